//! `## Outage` of `cargo xtask bench --outage-minutes M [--daemon-minutes N]`: the daemon workload (50
//! busy processes, `sonde run`, 10 s windows) exporting to the real Python OTLP receiver
//! (tests/peers/otlp_receiver.py), which is killed for M minutes in the middle of the N-minute run and
//! started again on the same port. Reported: windows produced, spooled, delivered (distinct
//! `sonde.batch.id`s received, duplicates apart) and lost; spool bytes per window; replay time after
//! recovery; the agent's CPU and RSS during replay against before the outage; and the RSS curve of the
//! whole run (flat within 5 MiB after the first 5 minutes is the target of a 1-hour run).
//!
//! The agent's CPU and RSS come from /proc/PID/stat and /proc/PID/status, sampled once per second
//! (the window log lines only give one figure per 10 s, too coarse for a replay of a few seconds).

mod receiver;

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, bail, ensure};

use self::receiver::{Receipt, Receiver};
use crate::{
    bench::{compile, cpus, has_exited},
    util::root,
};

/// Busy processes, as in the daemon benchmark.
const WORKERS: usize = 50;
/// `--export-interval` of the agent, seconds.
const WINDOW_SECS: u64 = 10;
/// Period of the /proc and spool-directory polls.
const TICK: Duration = Duration::from_secs(1);
/// One point of the RSS curve every this many ticks (10 s).
const CURVE_TICKS: usize = 10;
/// The RSS curve is judged after this warm-up (caches and tables fill first).
const CURVE_WARMUP: Duration = Duration::from_secs(5 * 60);
/// Target: RSS max - min after the warm-up, MiB.
const FLAT_MIB: f64 = 5.0;
/// Time the agent gets beyond `--duration` to flush and exit before the run counts as failed.
const EXIT_GRACE: Duration = Duration::from_secs(120);

/// The batch id in a spool file name, `<window end, 20 digits>-<batch id>.batch` (`None` for
/// temporary and quarantined files).
fn spool_batch_id(name: &str) -> Option<&str> {
    let (end, id) = name.strip_suffix(".batch")?.split_once('-')?;
    (end.bytes().all(|b| b.is_ascii_digit()) && !id.is_empty()).then_some(id)
}

/// User + system CPU ticks of a process, from the text of /proc/PID/stat.
fn stat_ticks(stat: &str) -> Option<u64> {
    // The command name may hold spaces and parentheses: fields are counted after its last ')'.
    // After it come state (field 3), ..., utime (field 14) and stime (field 15).
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// VmRSS of a process in KiB, from the text of /proc/PID/status.
fn status_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `key=value` of the agent's log (`None` when absent).
fn log_field(log: &str, key: &str) -> Option<u64> {
    log.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.trim_matches('"').parse().ok())
}

/// `name value` of the metrics printed in the agent's exit line.
fn exit_metric(log: &str, name: &str) -> Option<u64> {
    let at = log.rfind(&format!("{name} "))?;
    log[at + name.len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Wall clock, ns since the epoch (the receiver stamps arrivals with the same clock).
fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Children killed and reaped when dropped, whatever happened meanwhile.
struct Reaped(Vec<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One poll of the agent and its spool.
struct Sample {
    /// Since the agent was started.
    at: Duration,
    cpu_ticks: u64,
    rss_kib: u64,
    spool_bytes: u64,
}

/// Bytes and batch ids of the spool's files (an absent spool is empty).
fn poll_spool(spool: &Path) -> (u64, Vec<String>) {
    let mut bytes = 0;
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(spool).into_iter().flatten().flatten() {
        bytes += entry.metadata().map_or(0, |m| m.len());
        if let Some(id) = entry.file_name().to_str().and_then(spool_batch_id) {
            ids.push(id.to_owned());
        }
    }
    (bytes, ids)
}

/// What happened, for the report.
struct Run {
    minutes: u64,
    outage_minutes: u64,
    samples: Vec<Sample>,
    /// Agent start, wall clock ns.
    started_unix_ns: u128,
    outage_at: Duration,
    /// When the receiver was listening again, since the agent's start.
    recovered_at: Duration,
    recovered_unix_ns: u128,
    /// Spool size and files at the last poll before the receiver came back.
    spool_at_recovery: (u64, usize),
    /// Every batch id seen in the spool directory.
    spooled: HashSet<String>,
    receipts: Vec<Receipt>,
    log: String,
}

/// Runs the benchmark: `minutes` of `sonde run`, with the backend down `outage_minutes` in the middle.
pub(crate) fn run(
    sonde: &Path,
    dir: &Path,
    minutes: u64,
    outage_minutes: u64,
) -> anyhow::Result<()> {
    ensure!(
        outage_minutes > 0 && outage_minutes < minutes,
        "--outage-minutes ({outage_minutes}) must be at least 1 and shorter than --daemon-minutes ({minutes})"
    );
    let busy = compile(
        &root().join("tests/workloads/cpu_split.c"),
        &dir.join("cpu_split"),
    )?;
    let seconds = minutes * 60;
    let data = dir.join("outage-data");
    let _ = std::fs::remove_dir_all(&data);
    let receiver_log = dir.join("outage-receiver.log");
    let sonde_log = dir.join("outage-sonde.log");
    let _ = std::fs::remove_file(&receiver_log);
    let receipts = Arc::new(Mutex::new(Vec::new()));
    let (receiver, port) = Receiver::start(0, &receiver_log, &receipts)?;
    let mut receiver = Some(receiver);
    let _workers = Reaped(
        (0..WORKERS)
            .map(|_| {
                Command::new(&busy)
                    .arg((seconds + 60).to_string())
                    .stdout(Stdio::null())
                    .spawn()
            })
            .collect::<Result<_, _>>()?,
    );
    let started_unix_ns = unix_ns();
    let started = Instant::now();
    let agent = Command::new(sonde)
        .args(["run", "--otlp-endpoint"])
        .arg(format!("http://127.0.0.1:{port}"))
        .args(["--export-interval", &WINDOW_SECS.to_string()])
        .args(["--duration", &seconds.to_string()])
        .args(["--metrics-addr", "none", "--data-dir"])
        .arg(&data)
        .env("SONDE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&sonde_log)?)
        .spawn()
        .context("starting sonde run")?;
    let pid = agent.id();
    let mut agent = Reaped(vec![agent]);
    let outage_at = Duration::from_secs((minutes - outage_minutes) * 60 / 2);
    let recover_at = outage_at + Duration::from_secs(outage_minutes * 60);
    println!(
        "outage bench: {minutes} min, receiver down from {} s to {} s (log: {})",
        outage_at.as_secs(),
        recover_at.as_secs(),
        sonde_log.display()
    );
    let spool = data.join("spool");
    let mut samples = Vec::new();
    let mut spooled = HashSet::new();
    let mut recovered = None;
    let mut spool_at_recovery = (0, 0);
    let mut tick = 0u32;
    loop {
        // Ticks missed while the receiver was starting are skipped, not made up in a burst of
        // samples a few microseconds apart.
        tick = tick.max((started.elapsed().as_nanos() / TICK.as_nanos()) as u32) + 1;
        let next = started + TICK * tick;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        if has_exited(pid) {
            break;
        }
        let at = started.elapsed();
        ensure!(
            at < Duration::from_secs(seconds) + EXIT_GRACE,
            "sonde run did not exit {} s after its --duration; see {}",
            EXIT_GRACE.as_secs(),
            sonde_log.display()
        );
        let read =
            |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}")).unwrap_or_default();
        let (spool_bytes, ids) = poll_spool(&spool);
        let spool_files = ids.len();
        spooled.extend(ids);
        if let (Some(cpu_ticks), Some(rss_kib)) =
            (stat_ticks(&read("stat")), status_rss_kib(&read("status")))
        {
            samples.push(Sample {
                at,
                cpu_ticks,
                rss_kib,
                spool_bytes,
            });
        }
        if at >= outage_at
            && recovered.is_none()
            && let Some(r) = receiver.take()
        {
            r.kill();
            println!("receiver killed at {} s", at.as_secs());
        }
        if at >= recover_at && recovered.is_none() {
            spool_at_recovery = (spool_bytes, spool_files);
            let (r, again) = Receiver::start(port, &receiver_log, &receipts)?;
            ensure!(
                again == port,
                "the receiver came back on port {again}, not {port}"
            );
            receiver = Some(r);
            recovered = Some((started.elapsed(), unix_ns()));
            println!(
                "receiver back on port {port} at {} s",
                started.elapsed().as_secs()
            );
        }
    }
    let status = agent.0[0].wait()?;
    drop(agent);
    println!("sonde run exited: {status}");
    // The last window's request may still be on its way through the receiver's output.
    std::thread::sleep(Duration::from_secs(2));
    drop(receiver);
    let Some((recovered_at, recovered_unix_ns)) = recovered else {
        bail!(
            "sonde run exited before the outage ended; see {}",
            sonde_log.display()
        );
    };
    let receipts = std::mem::take(&mut *receipts.lock().expect("receipts lock"));
    let log = std::fs::read_to_string(&sonde_log)?;
    let run = Run {
        minutes,
        outage_minutes,
        samples,
        started_unix_ns,
        outage_at,
        recovered_at,
        recovered_unix_ns,
        spool_at_recovery,
        spooled,
        receipts,
        log,
    };
    write_curve(&run, &dir.join("outage-rss.csv"))?;
    report(&run)
}

/// The RSS curve, one point per 10 s: `seconds,rss_mib`.
fn write_curve(run: &Run, path: &Path) -> anyhow::Result<()> {
    let mut csv = String::from("seconds,rss_mib\n");
    for s in run.samples.iter().step_by(CURVE_TICKS) {
        csv.push_str(&format!(
            "{},{:.1}\n",
            s.at.as_secs(),
            s.rss_kib as f64 / 1024.0
        ));
    }
    std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))
}

/// Agent CPU (% of one core), mean and max RSS (MiB) between two times since its start, from the
/// samples that bracket them (so a span shorter than a tick still covers one tick).
fn usage_between(samples: &[Sample], from: Duration, to: Duration) -> Option<(f64, f64, f64)> {
    let a = samples.iter().rposition(|s| s.at <= from).unwrap_or(0);
    let b = samples
        .iter()
        .position(|s| s.at >= to)
        .unwrap_or(samples.len().checked_sub(1)?)
        .max(a + 1);
    let (sa, sb) = (samples.get(a)?, samples.get(b)?);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = 100.0 * (sb.cpu_ticks - sa.cpu_ticks) as f64 / hz / (sb.at - sa.at).as_secs_f64();
    let rss: Vec<f64> = samples[a..=b]
        .iter()
        .map(|s| s.rss_kib as f64 / 1024.0)
        .collect();
    let mean = rss.iter().sum::<f64>() / rss.len() as f64;
    Some((cpu, mean, rss.iter().cloned().fold(0.0, f64::max)))
}

/// Prints the `## Outage` section.
fn report(run: &Run) -> anyhow::Result<()> {
    let produced = log_field(&run.log, "windows_produced")
        .context("sonde's exit line (windows_produced=...) is missing from its log")?;
    let exit = |k: &str| log_field(&run.log, k).map_or_else(|| "?".into(), |v| v.to_string());
    let metric = |k: &str| exit_metric(&run.log, k).map_or_else(|| "?".into(), |v| v.to_string());
    // First arrival of each batch id, and repeats of an identical request.
    let mut first: HashMap<&str, u128> = HashMap::new();
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    for r in &run.receipts {
        for id in &r.batch_ids {
            let t = first.entry(id).or_insert(r.received_unix_ns);
            *t = (*t).min(r.received_unix_ns);
        }
        if !seen.insert((r.batch_ids.clone(), r.content)) {
            duplicates += 1;
        }
    }
    let distinct = first.len() as u64;
    let replayed: Vec<u128> = run
        .spooled
        .iter()
        .filter_map(|id| first.get(id.as_str()).copied())
        .collect();
    let never = run.spooled.len() - replayed.len();
    let since_recovery = |t: u128| t.saturating_sub(run.recovered_unix_ns) as f64 / 1e9;
    let (first_replay, last_replay) = (
        replayed.iter().min().map(|&t| since_recovery(t)),
        replayed.iter().max().copied(),
    );
    let replay_end = last_replay.map_or(run.recovered_at, |t| {
        Duration::from_nanos(t.saturating_sub(run.started_unix_ns) as u64)
    });
    let before_from = (run.outage_at / 2).min(Duration::from_secs(60));
    let before = usage_between(&run.samples, before_from, run.outage_at);
    let replay = usage_between(&run.samples, run.recovered_at, replay_end);
    let (spool_bytes, spool_files) = run.spool_at_recovery;
    let secs = |v: Option<f64>| v.map_or_else(|| "-".into(), |s| format!("{s:.1} s"));

    println!(
        "\n## Outage: {WORKERS} busy processes, {} min, {WINDOW_SECS} s windows, OTLP receiver down {} min (t = {} s to {} s)",
        run.minutes,
        run.outage_minutes,
        run.outage_at.as_secs(),
        run.recovered_at.as_secs()
    );
    println!("| | measured | sonde's own count |");
    println!("|---|---|---|");
    println!("| windows produced | - | {produced} (exit line) |");
    println!(
        "| windows spooled | {} (batch ids seen in <data-dir>/spool, polled every 1 s) | {} (sonde_export_spooled_batches_total) |",
        run.spooled.len(),
        metric("sonde_export_spooled_batches_total")
    );
    println!(
        "| windows delivered | {distinct} distinct sonde.batch.id received | {} (exit line; replayed: {}) |",
        exit("windows_delivered"),
        metric("sonde_export_replayed_batches_total")
    );
    println!("| duplicate deliveries | {duplicates} (same batch id, same request again) | - |");
    println!(
        "| windows lost (target 0) | {} (produced - distinct received) | {} (+ {} of earlier runs; left in spool: {}) |",
        produced.saturating_sub(distinct),
        exit("windows_lost"),
        exit("earlier_windows_lost"),
        exit("windows_spooled")
    );
    println!(
        "| spool bytes per window | {} ({spool_bytes} B in {spool_files} files at the end of the outage) | - |",
        if spool_files > 0 {
            format!("{:.0}", spool_bytes as f64 / spool_files as f64)
        } else {
            "-".into()
        }
    );
    println!(
        "| replay after recovery | first spooled window {}, last {} after the receiver restart{} | - |",
        secs(first_replay),
        secs(last_replay.map(since_recovery)),
        if never > 0 {
            format!(" ({never} spooled windows never arrived)")
        } else {
            String::new()
        }
    );
    let cpu =
        |u: Option<(f64, f64, f64)>| u.map_or_else(|| "-".into(), |(c, _, _)| format!("{c:.2}%"));
    let rss = |u: Option<(f64, f64, f64)>| {
        u.map_or_else(
            || "-".into(),
            |(_, m, x)| format!("mean {m:.1}, max {x:.1}"),
        )
    };
    println!(
        "| agent CPU, % of one core (/proc/PID/stat, 1 s samples) | before the outage ({}-{} s): {}; during replay: {} | {} CPUs |",
        before_from.as_secs(),
        run.outage_at.as_secs(),
        cpu(before),
        cpu(replay),
        cpus()
    );
    println!(
        "| agent RSS MiB (/proc/PID/status VmRSS, 1 s samples) | before the outage: {}; during replay: {}; at the end: {} | - |",
        rss(before),
        rss(replay),
        run.samples.last().map_or_else(
            || "-".into(),
            |s| format!("{:.1}", s.rss_kib as f64 / 1024.0)
        )
    );
    let curve: Vec<f64> = run
        .samples
        .iter()
        .step_by(CURVE_TICKS)
        .filter(|s| s.at >= CURVE_WARMUP)
        .map(|s| s.rss_kib as f64 / 1024.0)
        .collect();
    if curve.is_empty() {
        println!(
            "RSS curve: the run is shorter than the {} min warm-up",
            CURVE_WARMUP.as_secs() / 60
        );
    } else {
        let (min, max) = (
            curve.iter().cloned().fold(f64::MAX, f64::min),
            curve.iter().cloned().fold(0.0, f64::max),
        );
        println!(
            "RSS curve (VmRSS every 10 s, {} points after the first {} min): min {min:.1} MiB, max {max:.1} MiB: {} (target: flat within {FLAT_MIB} MiB)",
            curve.len(),
            CURVE_WARMUP.as_secs() / 60,
            if max - min <= FLAT_MIB {
                "flat within 5 MiB"
            } else {
                "NOT flat within 5 MiB"
            }
        );
    }
    let peak_spool = run.samples.iter().map(|s| s.spool_bytes).max().unwrap_or(0);
    println!("(peak spool {peak_spool} B; curve in target/bench/outage-rss.csv)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{exit_metric, log_field, spool_batch_id, stat_ticks, status_rss_kib};

    #[test]
    fn spool_names_give_their_batch_id_and_others_none() {
        assert_eq!(
            spool_batch_id("00001700000000000000-00000000deadbeef-3.batch"),
            Some("00000000deadbeef-3")
        );
        assert_eq!(
            spool_batch_id("00001700000000000000-00000000deadbeef-3.corrupt"),
            None
        );
        assert_eq!(spool_batch_id(".tmp-00000000deadbeef-3.batch"), None);
    }

    #[test]
    fn proc_fields_are_read_past_a_command_name_with_spaces() {
        let stat =
            "4242 (so (nde) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 5 0 1 2 3";
        assert_eq!(stat_ticks(stat), Some(281));
        assert_eq!(
            status_rss_kib("Name:\tsonde\nVmRSS:\t   51200 kB\n"),
            Some(51200)
        );
    }

    #[test]
    fn exit_line_fields_and_metrics_are_found() {
        let log = "INFO sonde stopped windows_produced=48 windows_lost=0 metrics=sonde_export_batches_sent_total 30\nsonde_export_spooled_batches_total 18\n";
        assert_eq!(log_field(log, "windows_produced"), Some(48));
        assert_eq!(log_field(log, "windows_lost"), Some(0));
        assert_eq!(
            exit_metric(log, "sonde_export_spooled_batches_total"),
            Some(18)
        );
        assert_eq!(
            exit_metric(log, "sonde_export_replayed_batches_total"),
            None
        );
    }
}
