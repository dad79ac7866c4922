//! Shared helpers of the integration tests: root check, workload builds, running sonde, reading pprof.
#![allow(dead_code)]

pub mod backends;
pub mod caps;
pub mod certs;
pub mod daemon;
pub mod debug_files;
pub mod deploy;
pub mod diff_fixtures;
pub mod fake_proc;
pub mod go;
pub mod host;
pub mod java;
pub mod node;
pub mod otlp;
pub mod pod;
pub mod python;
pub mod recursion;
pub mod scripted;
pub mod sonde_env;
pub mod spans;
pub mod vm;

use std::{
    collections::HashMap,
    io::Read as _,
    path::{Path, PathBuf},
    process::{Child, Command, Output},
    sync::OnceLock,
};

use prost::Message as _;
use sonde::profile::pprof::proto;
use sonde_env::sonde_env;

/// Panics unless root: these tests load BPF programs and must fail loudly, never skip, without it.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test loads BPF programs: run it as root (cargo xtask test)"
    );
}

/// The Python with the test peers: `$SONDE_TEST_PYTHON`, else the repository's `.venv-peers` (made by
/// `cargo xtask setup --peers`), else `python3`.
pub fn python() -> String {
    let venv = root().join(".venv-peers/bin/python");
    std::env::var("SONDE_TEST_PYTHON").unwrap_or_else(|_| {
        if venv.exists() {
            venv.display().to_string()
        } else {
            "python3".into()
        }
    })
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// A fresh temporary directory under target/.
pub fn temp_dir(name: &str) -> PathBuf {
    static RUN: OnceLock<u128> = OnceLock::new();
    let run = RUN.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    });
    let dir = root().join("target/test-tmp").join(format!("{name}-{run}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A TCP port nobody listens on now, on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Compiles `tests/workloads/<name>.c` with `flags` into the test directory.
pub fn build_workload(name: &str, out_name: &str, flags: &[&str]) -> PathBuf {
    build_workload_with("gcc", name, out_name, flags)
}

/// [`build_workload`] with the C compiler `gcc` (a cross compiler for another architecture's guest).
pub fn build_workload_with(gcc: &str, name: &str, out_name: &str, flags: &[&str]) -> PathBuf {
    let out = temp_dir("workloads").join(out_name);
    let status = Command::new(gcc)
        .args(flags)
        .arg("-pthread")
        .arg("-o")
        .arg(&out)
        .arg(root().join(format!("tests/workloads/{name}.c")))
        .status()
        .unwrap_or_else(|e| panic!("{gcc} must be installed (cargo xtask setup --peers; cargo xtask build --target for a cross gcc): {e}"));
    assert!(status.success(), "compiling workload {name} failed");
    out
}

/// Frame pointers, symbols and DWARF: what a profiler-friendly build looks like.
pub const FP_FLAGS: &[&str] = &["-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline"];

/// A release build as distributions make them: optimised, no frame pointers (only `.eh_frame` says
/// how to unwind), symbols kept. Sibling calls stay calls so every function the workload header
/// names is a real frame.
pub const NOFP_FLAGS: &[&str] = &[
    "-O2",
    "-g",
    "-fomit-frame-pointer",
    "-fno-optimize-sibling-calls",
];

/// Compiles `tests/workloads/<name>.c` into a shared library with `flags`.
pub fn build_library(name: &str, out_name: &str, flags: &[&str]) -> PathBuf {
    let mut all = flags.to_vec();
    all.extend_from_slice(&["-shared", "-fPIC"]);
    build_workload(name, out_name, &all)
}

/// Seconds of a recording whose `cpu_split` shares are asserted: at 99 Hz the sampling phase drifts
/// 0.5 ms per 50 ms cycle of the workload, so it takes about 5 s to sweep the whole cycle once; a
/// shorter recording samples part of the cycle more than the rest (a 3 s one was seen 6 points off).
pub const SPLIT_SECONDS: &str = "5";

/// Asserts `cpu_split`'s 50/30/20 split of `pid`'s samples within ±5 points; returns the sample count.
pub fn assert_cpu_split(samples: &[Resolved], pid: u32, context: &str) -> f64 {
    let all = total(samples, pid, 0) as f64;
    let split = [
        ("burn_fifty", 50.0),
        ("burn_thirty", 30.0),
        ("burn_twenty", 20.0),
    ];
    assert_shares(samples, pid, all, &split, context);
    all
}

/// Asserts that each function of `split` has its share (percent) of `of` samples of `pid`, ±5 points.
pub fn assert_shares(
    samples: &[Resolved],
    pid: u32,
    of: f64,
    split: &[(&str, f64)],
    context: &str,
) {
    let shares: Vec<(&str, f64, f64)> = split
        .iter()
        .map(|&(f, want)| (f, want, 100.0 * inclusive(samples, pid, f, 0) as f64 / of))
        .collect();
    eprintln!("samples={of} shares={shares:?}\n{context}");
    for (f, want, got) in shares {
        assert!(
            (got - want).abs() <= 5.0,
            "{f} share {got:.1}% not within {want}±5"
        );
    }
}

/// Asserts `offcpu_sleep`'s 2:1 split (±10%) of `pid`'s off-CPU time between `sleep_twenty` and
/// `sleep_ten`, and more than 3 s of it in a 4 s recording.
pub fn assert_sleep_split(samples: &[Resolved], pid: u32, context: &str) {
    let twenty = inclusive(samples, pid, "sleep_twenty", 0) as f64;
    let ten = inclusive(samples, pid, "sleep_ten", 0) as f64;
    eprintln!(
        "sleep_twenty={:.0}ms sleep_ten={:.0}ms\n{context}",
        twenty / 1e6,
        ten / 1e6
    );
    assert_two_to_one(twenty, ten, 3.0e9);
}

/// The off-CPU time of a workload that sleeps 20 ms then 10 ms, again and again: at least
/// `least_ns` in all (the thread sleeps nearly all the time), split 2:1 (±10%) between the
/// function of the 20 ms sleep (`twenty` ns) and that of the 10 ms one (`ten`).
pub fn assert_two_to_one(twenty: f64, ten: f64, least_ns: f64) {
    assert!(
        twenty + ten > least_ns,
        "only {:.2} s off-CPU under the two sleeping functions",
        (twenty + ten) / 1e9
    );
    let ratio = twenty / ten;
    assert!(
        (ratio - 2.0).abs() <= 0.2,
        "off-CPU split {ratio:.2}, expected 2 ±10%"
    );
}

/// Share of `pid`'s samples (by value `index`) whose stack contains `function`, among the samples
/// whose stack contains `within` (all samples when `within` is empty).
pub fn share_reaching(
    samples: &[Resolved],
    pid: u32,
    within: &str,
    function: &str,
    index: usize,
) -> f64 {
    let chosen = samples
        .iter()
        .filter(|s| s.pid == i64::from(pid))
        .filter(|s| within.is_empty() || s.functions.iter().any(|f| f == within));
    let (mut all, mut reaching) = (0i64, 0i64);
    for s in chosen {
        all += s.values[index];
        if s.functions.iter().any(|f| f == function) {
            reaching += s.values[index];
        }
    }
    assert!(all > 0, "no samples of pid {pid} contain {within:?}");
    reaching as f64 / all as f64
}

/// Starts a workload.
pub fn spawn(path: &Path, args: &[&str]) -> Child {
    Command::new(path)
        .args(args)
        .spawn()
        .expect("starting workload")
}

/// A running workload, killed and reaped when dropped (also when an assertion fails).
pub struct Workload(Child);

impl Workload {
    /// Starts `path args`.
    pub fn start(path: &Path, args: &[&str]) -> Self {
        Self(spawn(path, args))
    }

    /// Takes over a process started with other options (killed and reaped when dropped too).
    pub fn adopt(child: Child) -> Self {
        Self(child)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sonde record --duration SECS --pid PID EXTRA... --output OUT --summary-json -`, panicking on
/// failure; the summary's JSON (read with [`summary_field`]).
pub fn record_pid(pid: u32, seconds: &str, extra: &[&str], out: &Path) -> String {
    let pid = pid.to_string();
    let mut args = vec!["record", "--duration", seconds, "--pid", &pid];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--output", out.to_str().unwrap(), "--summary-json", "-"]);
    sonde_ok(&args)
}

/// Runs `sonde` with `args` and returns its output.
pub fn sonde(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args(args)
        .envs(sonde_env())
        .env("SONDE_LOG", "warn")
        .output()
        .expect("running sonde")
}

/// Runs `sonde` and panics with its stderr when it fails.
pub fn sonde_ok(args: &[&str]) -> String {
    let out = sonde(args);
    assert!(
        out.status.success(),
        "sonde {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A figure of `sonde record --summary-json`'s object (or of a `sonde run --summary-json` window
/// line), by name: `walk_root_ratio`, or `input_refusals[perf_map/symlink]` for one series of a
/// figure with labels. Shares are fractions (0 to 1).
pub fn summary_field(summary: &str, key: &str) -> f64 {
    let json: serde_json::Value = serde_json::from_str(summary.trim()).unwrap_or_else(|e| {
        panic!("the summary is not JSON ({e}): pass --summary-json -\n{summary}")
    });
    let (name, series) = match key.split_once('[') {
        Some((name, rest)) => (name, Some(rest.trim_end_matches(']'))),
        None => (key, None),
    };
    let figure = &json["figures"][name];
    let value = match series {
        Some(series) => &figure[series],
        None => figure,
    };
    value
        .as_f64()
        .unwrap_or_else(|| panic!("the summary has no figure {key}:\n{summary}"))
}

/// Checks the kernel's own timing of on-CPU samples charged to `path` (`oncpu_sample_nanoseconds`):
/// there, measured (below the histogram's 64 µs top bucket at the median), p90 at or above p50. Returns
/// the median, ns.
pub fn assert_sample_cost(summary: &str, path: &str) -> f64 {
    let p50 = summary_field(summary, &format!("oncpu_sample_nanoseconds[{path}/p50]"));
    let p90 = summary_field(summary, &format!("oncpu_sample_nanoseconds[{path}/p90]"));
    eprintln!("BPF time per on-CPU sample on the {path} path: p50 {p50} ns, p90 {p90} ns");
    assert!(
        p50 > 0.0 && p50 < 63_750.0 && p90 >= p50,
        "{path} samples: p50 {p50} ns, p90 {p90} ns"
    );
    p50
}

/// Decodes a gzip pprof file.
pub fn read_pprof(path: &Path) -> proto::Profile {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut bytes)
        .expect("valid gzip");
    proto::Profile::decode(bytes.as_slice()).expect("valid pprof")
}

/// The profile a line of a data directory's `index.jsonl` names: its file decompressed, then the
/// `offset`/`length` slice of it when the file is a window's pack (the whole file otherwise).
pub fn read_indexed(data: &Path, entry: &serde_json::Value) -> proto::Profile {
    let path = data.join(entry["path"].as_str().expect("a path"));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_end(&mut bytes)
        .expect("valid gzip");
    let slice = match (entry["offset"].as_u64(), entry["length"].as_u64()) {
        (Some(offset), Some(length)) => &bytes[offset as usize..(offset + length) as usize],
        (None, None) => &bytes[..],
        _ => panic!("offset and length come together: {entry}"),
    };
    proto::Profile::decode(slice).expect("valid pprof")
}

/// One sample of a profile, resolved to readable names.
#[derive(Debug)]
pub struct Resolved {
    pub pid: i64,
    pub comm: String,
    /// Label `thread_id` (-1 without one).
    pub tid: i64,
    /// Label `thread_name` (empty without one).
    pub thread_name: String,
    /// Function names leaf first (inline chains expanded innermost first); unsymbolized as `?`.
    pub functions: Vec<String>,
    /// Whether each entry of `functions` came from a kernel mapping.
    pub kernel: Vec<bool>,
    /// The mapping's file name of each entry of `functions` (`[js]` for JavaScript frames).
    pub modules: Vec<String>,
    /// Whether each entry of `functions` was inlined into the next one (the same frame's caller).
    pub inlined: Vec<bool>,
    pub values: Vec<i64>,
    /// Labelled `truncated=1`: the user stack did not reach a thread root.
    pub truncated: bool,
    /// The process's own string labels (Go's pprof labels): every one but `comm`, `thread_name` and
    /// `truncated`.
    pub labels: Vec<(String, String)>,
}

impl Resolved {
    /// The value of the process's own label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl Resolved {
    /// The user-space entries of `functions`, leaf first.
    pub fn user(&self) -> Vec<&str> {
        self.functions
            .iter()
            .zip(&self.kernel)
            .filter(|(_, kernel)| !**kernel)
            .map(|(f, _)| f.as_str())
            .collect()
    }
}

/// Resolves every sample of `p`.
pub fn resolve(p: &proto::Profile) -> Vec<Resolved> {
    let s = |i: i64| p.string_table[i as usize].clone();
    let funcs: HashMap<u64, String> = p.function.iter().map(|f| (f.id, s(f.name))).collect();
    let maps: HashMap<u64, String> = p.mapping.iter().map(|m| (m.id, s(m.filename))).collect();
    let locs: HashMap<u64, &proto::Location> = p.location.iter().map(|l| (l.id, l)).collect();
    p.sample
        .iter()
        .map(|sample| {
            let mut functions = Vec::new();
            let mut kernel = Vec::new();
            let mut modules = Vec::new();
            let mut inlined = Vec::new();
            for id in &sample.location_id {
                let loc = locs[id];
                let module = maps.get(&loc.mapping_id).cloned().unwrap_or_default();
                let is_kernel = module == "[kernel.kallsyms]";
                if loc.line.is_empty() {
                    functions.push("?".to_owned());
                    kernel.push(is_kernel);
                    modules.push(module.clone());
                    inlined.push(false);
                }
                // pprof lists a location's inline chain innermost first, the frame's own function last.
                for (i, line) in loc.line.iter().enumerate() {
                    functions.push(funcs[&line.function_id].clone());
                    kernel.push(is_kernel);
                    modules.push(module.clone());
                    inlined.push(i + 1 < loc.line.len());
                }
            }
            let label = |k: &str| sample.label.iter().find(|l| s(l.key) == k);
            Resolved {
                pid: label("pid").map(|l| l.num).unwrap_or(-1),
                comm: label("comm").map(|l| s(l.str)).unwrap_or_default(),
                tid: label("thread_id").map(|l| l.num).unwrap_or(-1),
                thread_name: label("thread_name").map(|l| s(l.str)).unwrap_or_default(),
                functions,
                kernel,
                modules,
                inlined,
                values: sample.value.clone(),
                truncated: label("truncated").is_some_and(|l| s(l.str) == "1"),
                labels: sample
                    .label
                    .iter()
                    .filter(|l| {
                        l.str != 0
                            && !["comm", "thread_name", "truncated"].contains(&s(l.key).as_str())
                    })
                    .map(|l| (s(l.key), s(l.str)))
                    .collect(),
            }
        })
        .collect()
}

/// Sum of value `index` over samples of `pid` whose stack contains `function`.
pub fn inclusive(samples: &[Resolved], pid: u32, function: &str, index: usize) -> i64 {
    samples
        .iter()
        .filter(|s| s.pid == i64::from(pid) && s.functions.iter().any(|f| f == function))
        .map(|s| s.values[index])
        .sum()
}

/// Sum of value `index` over samples of `pid`.
pub fn total(samples: &[Resolved], pid: u32, index: usize) -> i64 {
    samples
        .iter()
        .filter(|s| s.pid == i64::from(pid))
        .map(|s| s.values[index])
        .sum()
}

/// CPU seconds used so far by `pid` (utime + stime from /proc/PID/stat).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// The CPU time of a process across one `sonde record`, to compare with its samples.
pub struct CpuProbe {
    pid: u32,
    cpu: f64,
    wall: std::time::Instant,
}

impl CpuProbe {
    /// Starts measuring `pid`, just before `sonde record` starts.
    pub fn start(pid: u32) -> Self {
        Self {
            pid,
            cpu: cpu_seconds(pid),
            wall: std::time::Instant::now(),
        }
    }

    /// The CPU-seconds `pid` used during the recording's window: its CPU share over the whole
    /// `sonde record` run times the window's duration from the summary. The run is longer than the
    /// window (the kernel verifies the BPF programs first, more of them with more runtimes), so the
    /// process's CPU time over the run would overstate what the window could sample.
    pub fn in_window(&self, summary: &str) -> f64 {
        let share = (cpu_seconds(self.pid) - self.cpu) / self.wall.elapsed().as_secs_f64();
        share * summary_field(summary, "window_duration_seconds")
    }
}

/// `sonde` running in the background (killed when dropped).
pub struct Background {
    child: Child,
    log: Option<std::thread::JoinHandle<String>>,
}

/// Starts `sonde ARGS` and returns once it logs that it is recording (panics with its log if it exits
/// first).
pub fn start_recording(args: &[&str]) -> Background {
    use std::io::BufRead as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args(args)
        .envs(sonde_env())
        .env("SONDE_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running sonde");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.wait();
            panic!("sonde {args:?} exited before recording:\n{seen}");
        }
        seen.push_str(&line);
        if line.contains("recording") {
            break;
        }
    }
    let log = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        seen + &rest
    });
    Background {
        child,
        log: Some(log),
    }
}

impl Background {
    /// Waits for sonde to finish; panics with its log unless it succeeded. Returns its stdout.
    pub fn finish(mut self) -> String {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut self.child.stdout.take().unwrap(), &mut out).unwrap();
        let status = self.child.wait().unwrap();
        let log = self
            .log
            .take()
            .map(|l| l.join().unwrap())
            .unwrap_or_default();
        assert!(status.success(), "sonde failed ({status}):\n{log}");
        // The harness shows a test's stderr only when it fails: sonde's warnings say why a figure the
        // test asserts on fell short (a binary it could not open, a table it could not build).
        for line in log
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        {
            eprintln!("sonde: {line}");
        }
        out
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends SIGUSR1 to `pid` (the workloads' "start now" signal).
pub fn start_signal(pid: u32) {
    // SAFETY: signalling a child of this test.
    unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
}

/// Waits for a workload that prints one line of `key value` pairs and exits; returns the values.
pub fn workload_report(child: Child) -> HashMap<String, f64> {
    let out = child.wait_with_output().expect("waiting for the workload");
    assert!(out.status.success(), "workload failed: {:?}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text.split_whitespace().collect();
    fields
        .chunks(2)
        .filter_map(|kv| Some((kv[0].to_owned(), kv.get(1)?.parse().ok()?)))
        .collect()
}
