//! `## Scrape cost` of `cargo xtask bench` (`--scrape-only`): what a Prometheus scrape of `sonde run`'s
//! /metrics costs the agent while 1,000 distinct services (one hard link of cpu_split per name, so
//! 1,000 `service.name`s) are alive and sampled, and the agent's memory holding them. The agent's CPU
//! is read from /proc over quiet intervals and over intervals of the same length with evenly spread
//! scrapes, in interleaved rounds; the difference per scrape is the cost. Also checked: the per-service
//! gauges stay bounded (top 10 + other), and the agent exits 0 on SIGINT.

mod http;
mod report;

use std::{
    fs::File,
    net::{SocketAddr, TcpListener},
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail, ensure};

use crate::{
    bench::{Usage, compile, has_exited, wait_usage},
    util::root,
};

/// Distinct services (processes with their own executable name).
const SERVICES: usize = 1000;
/// `--export-interval` of the agent, seconds.
const WINDOW: u64 = 5;
/// Length of each measured interval: a whole number of windows, so every interval, quiet or scraped,
/// holds the same number of window ends (the agent's big periodic cost) and only scrapes differ.
const INTERVAL: Duration = Duration::from_secs(4 * WINDOW);
/// Scrapes in a scraped interval, evenly spread (one every 20 ms, the agent's threads park between
/// them as between real scrapes): enough that their total stands out of the window work's jitter
/// (~0.3 CPU s per 20 s here with 1,000 services; 200 scrapes were lost in it).
const SCRAPES: usize = 1000;
/// Interleaved quiet/scraped pairs; the figures are medians over them.
const ROUNDS: usize = 3;
/// The scrape interval of the target.
const PROMETHEUS_INTERVAL_S: f64 = 15.0;
/// Target: share of the machine a scrape every 15 s may add, percent.
const TARGET_PERCENT: f64 = 0.01;
/// Bound of each per-service gauge family: top 10 services + "other".
const SERVICE_SERIES_BOUND: usize = 11;
/// How long the agent may take to attach and deliver its first window.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the agent may take to exit after SIGINT (it flushes the last window within 10 s).
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The 1,000 workers; killed and reaped when dropped, whatever happened meanwhile.
struct Workers(Vec<Child>);

impl Workers {
    /// Starts one cpu_split per service name, each burning CPU for `seconds`.
    fn start(dir: &Path, program: &Path, seconds: u64) -> anyhow::Result<Self> {
        let mut workers = Self(Vec::with_capacity(SERVICES));
        for i in 0..SERVICES {
            let path = dir.join(format!("svc{i:04}"));
            // A hard link is a new name for one inode: 1,000 executable names (so service names) at
            // the cost of one file, and one binary for the agent to read symbols and unwind tables of.
            let _ = std::fs::remove_file(&path);
            std::fs::hard_link(program, &path)
                .with_context(|| format!("linking {}", path.display()))?;
            let mut cmd = Command::new(&path);
            cmd.arg(seconds.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // SCHED_IDLE: 1,000 always-runnable workers at normal priority would leave the agent (and
            // this scraper) ~1/500 of a CPU whenever they want one, so intervals would measure run
            // queues, not scrapes. Idle-class workers still run, and are sampled, whenever the agent
            // sleeps, which is nearly always.
            // SAFETY: runs in the forked child before exec and only makes one system call.
            unsafe {
                cmd.pre_exec(|| {
                    let param = libc::sched_param { sched_priority: 0 };
                    if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            workers
                .0
                .push(cmd.spawn().with_context(|| format!("starting svc{i:04}"))?);
        }
        Ok(workers)
    }

    /// Workers still running.
    fn alive(&mut self) -> usize {
        self.0
            .iter_mut()
            .filter_map(|c| c.try_wait().ok())
            .filter(Option::is_none)
            .count()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// The agent under test; interrupted (then killed) if dropped without [`Agent::stop`], so an error
/// never leaves it running with its BPF programs attached.
struct Agent {
    child: Option<Child>,
    pid: u32,
    addr: SocketAddr,
}

impl Agent {
    /// SIGINT, then its resource usage and exit status once it is gone (SIGKILL past the bound).
    fn stop(mut self) -> anyhow::Result<(Usage, Duration)> {
        let child = self.child.take().context("agent already stopped")?;
        let started = Instant::now();
        // SAFETY: signalling our own, not yet reaped, child.
        unsafe { libc::kill(self.pid as i32, libc::SIGINT) };
        let mut killed = false;
        while !has_exited(self.pid) {
            if started.elapsed() > EXIT_TIMEOUT && !killed {
                // SAFETY: as above.
                unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
                killed = true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let took = started.elapsed();
        let usage = wait_usage(child)?;
        ensure!(
            !killed,
            "sonde run did not exit within {} s of SIGINT; killed",
            EXIT_TIMEOUT.as_secs()
        );
        Ok((usage, took))
    }

    fn get(&self, path: &str) -> anyhow::Result<http::Response> {
        http::get(self.addr, path, None)
    }

    /// One Prometheus-text scrape that must succeed.
    fn scrape(&self) -> anyhow::Result<String> {
        let r = self.get("/metrics")?;
        ensure!(r.status == 200, "/metrics answered {}", r.status);
        Ok(r.body)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own, not yet reaped, child.
            unsafe { libc::kill(self.pid as i32, libc::SIGINT) };
            let started = Instant::now();
            while !has_exited(self.pid) && started.elapsed() < EXIT_TIMEOUT {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One measured interval.
struct Interval {
    /// The agent's user + system CPU over it, seconds.
    cpu: f64,
    /// Run time of the agent's BPF programs over it (the windows that ended in it), seconds.
    bpf: f64,
    /// Wall time of each scrape in it (none for a quiet one).
    scrapes: Vec<Duration>,
}

/// What one scrape (after the rounds) showed, in both formats.
struct Snapshot {
    prometheus: String,
    openmetrics: String,
    /// Wall time of the Prometheus-text scrape.
    wall: Duration,
}

/// The rules of `--scrape-relabel`: keep half the services (`svc0000` to `svc0499`), and label each
/// kept one with its hundred, as an operator keeps some namespaces and maps a pod label.
const RULES: &str = r#"[[relabel]]
source_labels = ["__meta_process_comm"]
regex = "svc0[0-4][0-9][0-9]"
action = "keep"
[[relabel]]
source_labels = ["__meta_process_comm"]
regex = "svc(..).*"
target_label = "hundred"
replacement = "$1"
"#;

/// Runs the section and prints it (with `relabel`, the agent runs [`RULES`]); files are kept in
/// `dir/scrape`.
pub(crate) fn run(sonde: &Path, dir: &Path, relabel: bool) -> anyhow::Result<()> {
    let dir = dir.join("scrape");
    std::fs::create_dir_all(&dir)?;
    let program = compile(
        &root().join("tests/workloads/cpu_split.c"),
        &dir.join("cpu_split"),
    )?;
    // The agent's own stop is the safety net if we die: long enough for a slow start and every round.
    let planned = READY_TIMEOUT.as_secs() + 3 * WINDOW + 2 * ROUNDS as u64 * INTERVAL.as_secs();
    let agent_seconds = planned + 120;
    let mut workers = Workers::start(&dir, &program, agent_seconds + 60)?;
    eprintln!("scrape bench: {SERVICES} workers started");
    let addr = free_port()?;
    let data = dir.join("data");
    let _ = std::fs::remove_dir_all(&data);
    let stderr = dir.join("sonde.stderr");
    let mut cmd = Command::new(sonde);
    cmd.arg("run");
    if relabel {
        let config = dir.join("relabel.toml");
        std::fs::write(&config, RULES)?;
        cmd.arg("--config").arg(config);
    }
    let child = cmd
        .args(["--metrics-addr", &addr.to_string()])
        .args(["--export-interval", &WINDOW.to_string()])
        .args(["--duration", &agent_seconds.to_string(), "--data-dir"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(File::create(&stderr)?)
        .spawn()
        .context("starting sonde run")?;
    let agent = Agent {
        pid: child.id(),
        child: Some(child),
        addr,
    };
    let ready_after = wait_ready(&agent)?;
    eprintln!(
        "scrape bench: ready after {:.1} s; waiting 2 windows",
        ready_after.as_secs_f64()
    );
    wait_windows(&agent, 2)?;
    // Half a window after a window end, so no interval edge falls on one.
    std::thread::sleep(Duration::from_secs(WINDOW) / 2);
    let mut rounds = Vec::new();
    let mut next = Instant::now();
    for round in 0..ROUNDS {
        // Odd rounds scrape first, so a drift of the agent's cost over the run does not favour one.
        let scraped_first = round % 2 == 1;
        let mut pair = [None, None];
        for scraped in [scraped_first, !scraped_first] {
            eprintln!(
                "scrape bench: round {round}, {}",
                if scraped { "scraped" } else { "quiet" }
            );
            let k = if scraped { SCRAPES } else { 0 };
            pair[usize::from(scraped)] = Some(interval(&agent, next, k)?);
            next += INTERVAL;
        }
        let [Some(quiet), Some(scraped)] = pair else {
            unreachable!("both intervals of a round ran")
        };
        rounds.push((quiet, scraped));
    }
    let snapshot = snapshot(&agent)?;
    let (rss_kib, hwm_kib) = memory(agent.pid)?;
    let alive = workers.alive();
    let sampled_services = sampled_services(&data);
    let (usage, exit_took) = agent.stop()?;
    drop(workers);
    let report = report::Report {
        rounds: &rounds,
        snapshot: &snapshot,
        rss_kib,
        hwm_kib,
        alive,
        sampled_services,
        usage: &usage,
        exit_took,
        relabel,
        ready_after,
    };
    report.print();
    if !usage.status.success() {
        bail!(
            "sonde run exited with {}; see {}",
            usage.status,
            stderr.display()
        );
    }
    Ok(())
}

/// A loopback address with a port free right now (the agent binds it moments later).
fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?)
}

/// Polls /readyz until it answers 200; returns how long that took.
fn wait_ready(agent: &Agent) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        // Refused while the agent starts, 503 until it has attached and delivered a window.
        if agent.get("/readyz").is_ok_and(|r| r.status == 200) {
            return Ok(started.elapsed());
        }
        // An agent that failed to start (no BPF, port taken) is not waited for.
        ensure!(
            !has_exited(agent.pid),
            "sonde run exited before it was ready; see target/bench/scrape/sonde.stderr"
        );
        if started.elapsed() > READY_TIMEOUT {
            bail!("sonde run not ready within {} s", READY_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `sonde_windows_total` has grown by `n`, returning right after the last window ended.
fn wait_windows(agent: &Agent, n: u64) -> anyhow::Result<()> {
    let windows = || -> anyhow::Result<u64> {
        let body = agent.scrape()?;
        Ok(http::value(&body, "sonde_windows_total").context("no sonde_windows_total")? as u64)
    };
    let target = windows()? + n;
    let deadline = Instant::now() + Duration::from_secs((n + 2) * WINDOW * 4);
    while windows()? < target {
        ensure!(
            Instant::now() < deadline,
            "the agent stopped making windows"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// The agent's CPU over `INTERVAL` from `start`, with `k` scrapes evenly spread in it.
fn interval(agent: &Agent, start: Instant, k: usize) -> anyhow::Result<Interval> {
    sleep_until(start);
    let bpf_before = bpf_seconds(&agent.scrape()?);
    let before = cpu_seconds(agent.pid)?;
    let mut scrapes = Vec::with_capacity(k);
    for j in 0..k {
        // Absolute deadlines: a slow scrape delays the next one, not every later one.
        sleep_until(start + INTERVAL.mul_f64((j as f64 + 0.5) / k as f64));
        let t = Instant::now();
        agent.scrape()?;
        scrapes.push(t.elapsed());
    }
    sleep_until(start + INTERVAL);
    let cpu = cpu_seconds(agent.pid)? - before;
    Ok(Interval {
        cpu,
        bpf: bpf_seconds(&agent.scrape()?) - bpf_before,
        scrapes,
    })
}

/// The run time of all the agent's BPF programs so far, seconds, from a Prometheus-text scrape
/// (`sonde_bpf_program_run_seconds_total`, updated at each window's end).
fn bpf_seconds(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("sonde_bpf_program_run_seconds_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

fn sleep_until(t: Instant) {
    std::thread::sleep(t.saturating_duration_since(Instant::now()));
}

/// User + system CPU of all threads of `pid` (fields 14 and 15 of /proc/PID/stat), seconds.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces and parentheses; fields after its last `)` are plain.
    let rest = stat.rsplit_once(')').context("odd /proc/PID/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse().ok())
            .context("odd /proc/PID/stat")
    };
    // `rest` starts at field 3 (state), so field 14 is index 11.
    Ok((tick(11)? + tick(12)?) as f64 / clock_ticks() as f64)
}

/// VmRSS and VmHWM of `pid`, KiB.
fn memory(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .with_context(|| format!("no {key} in /proc/{pid}/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// One scrape in each format, for what a body holds.
fn snapshot(agent: &Agent) -> anyhow::Result<Snapshot> {
    let t = Instant::now();
    let prometheus = agent.scrape()?;
    let wall = t.elapsed();
    let om = http::get(agent.addr, "/metrics", Some(http::OPENMETRICS_ACCEPT))?;
    ensure!(
        om.status == 200,
        "/metrics (OpenMetrics) answered {}",
        om.status
    );
    ensure!(
        om.body.ends_with("# EOF\n"),
        "asked for OpenMetrics, got a body without `# EOF`"
    );
    Ok(Snapshot {
        prometheus,
        openmetrics: om.body,
        wall,
    })
}

/// Distinct svcNNNN service names with at least one profile in the data directory's index, i.e. the
/// workers sampled at least once over the run.
fn sampled_services(data: &Path) -> usize {
    const KEY: &str = "\"service.name\":\"";
    let Ok(index) = std::fs::read_to_string(data.join("index.jsonl")) else {
        return 0;
    };
    let names: std::collections::HashSet<&str> = index
        .match_indices(KEY)
        .filter_map(|(at, _)| {
            let rest = &index[at + KEY.len()..];
            rest.split_once('"').map(|(name, _)| name)
        })
        .filter(|name| name.starts_with("svc"))
        .collect();
    names.len()
}

/// Clock ticks per second (the resolution of /proc/PID/stat CPU times).
fn clock_ticks() -> i64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1)
}
