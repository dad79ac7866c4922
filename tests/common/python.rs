//! Helpers of the Python tests: the interpreters they run, the workload scripts in
//! `tests/workloads/python/`, samples resolved to frames with mapping, file and line, and the function
//! split check that every interpreter build must pass.
#![allow(dead_code)]

use std::{
    collections::HashMap,
    io::BufRead as _,
    ops::RangeInclusive,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use sonde::profile::pprof::proto;

use crate::common::{Workload, read_pprof, record_pid, root, summary_field, temp_dir};

/// Debian's own interpreter (3.11, stripped, libpython linked in). Named by full path: a pyenv build
/// may come first on `PATH`.
pub const DEBIAN_PYTHON: &str = "/usr/bin/python3";

/// Where the machine image keeps its pyenv builds (shared libpython, one per minor version).
pub const PYENV_VERSIONS: &str = "/root/.pyenv/versions";

/// The mapping sonde gives Python frames.
pub const PYTHON_MAPPING: &str = "[python]";

/// `interpreter`, after checking that it exists and runs (panics with what to do otherwise).
pub fn interpreter(path: &str) -> PathBuf {
    let out = Command::new(path)
        .args(["-c", "import sys; print(sys.version)"])
        .output()
        .unwrap_or_else(|e| {
            panic!("this test needs the interpreter {path}, which does not run here ({e}): install it (Debian: apt-get install python3; pyenv: the machine image has it)")
        });
    assert!(
        out.status.success(),
        "{path} -c 'import sys' failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "interpreter {path}: {}",
        String::from_utf8_lossy(&out.stdout).trim()
    );
    PathBuf::from(path)
}

/// The pyenv build of `version` (e.g. "3.12.1").
pub fn pyenv(version: &str) -> PathBuf {
    interpreter(&format!("{PYENV_VERSIONS}/{version}/bin/python3"))
}

/// Absolute path of a workload script (also its `co_filename`: the tests pass it as given).
pub fn script(name: &str) -> PathBuf {
    root().join("tests/workloads/python").join(name)
}

/// Starts `python script args` and returns once the script prints `ready` (panics if it exits first).
pub fn start_script(python: &Path, name: &str, args: &[&str]) -> Workload {
    let mut child = Command::new(python)
        .arg(script(name))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {} {name}: {e}", python.display()));
    let stdout = child.stdout.take().unwrap();
    let workload = Workload::adopt(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "ready",
        "{} {name} did not start (see its stderr above)",
        python.display()
    );
    workload
}

/// One frame of a sample.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Function name (a Python frame's qualified name), `?` when unsymbolized.
    pub function: String,
    /// Source file, empty when unknown.
    pub file: String,
    /// Source line, 0 when unknown.
    pub line: i64,
    /// The mapping's file name (`[python]` for Python frames, `[kernel.kallsyms]` for the kernel).
    pub mapping: String,
}

impl Frame {
    pub fn is_python(&self) -> bool {
        self.mapping == PYTHON_MAPPING
    }

    pub fn is_kernel(&self) -> bool {
        self.mapping == "[kernel.kallsyms]"
    }
}

/// One sample with its frames, leaf first (inline chains innermost first).
#[derive(Debug)]
pub struct PySample {
    pub pid: i64,
    /// The sampled thread's id (`thread_id`).
    pub tid: i64,
    pub comm: String,
    pub frames: Vec<Frame>,
    pub values: Vec<i64>,
}

impl PySample {
    /// Its Python frames, leaf first.
    pub fn python(&self) -> impl Iterator<Item = &Frame> {
        self.frames.iter().filter(|f| f.is_python())
    }

    /// Position (from the leaf) of the first Python frame named `function`.
    pub fn python_position(&self, function: &str) -> Option<usize> {
        self.frames
            .iter()
            .position(|f| f.is_python() && f.function == function)
    }

    pub fn has_python(&self, function: &str) -> bool {
        self.python_position(function).is_some()
    }

    /// The leaf-most Python frame: whose self time the sample is, native frames below it included.
    pub fn leaf_python(&self) -> Option<&Frame> {
        self.python().next()
    }

    /// The stack, root first, for failure messages.
    pub fn describe(&self) -> String {
        let frames: Vec<String> = self
            .frames
            .iter()
            .rev()
            .map(|f| {
                if f.is_python() {
                    format!("{} ({}:{})", f.function, f.file, f.line)
                } else {
                    format!("{} [{}]", f.function, f.mapping)
                }
            })
            .collect();
        format!("{} x{}: {}", self.comm, self.values[0], frames.join(";"))
    }
}

/// Resolves every sample of `p` into frames.
pub fn resolve_frames(p: &proto::Profile) -> Vec<PySample> {
    let s = |i: i64| p.string_table[i as usize].clone();
    let funcs: HashMap<u64, &proto::Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let maps: HashMap<u64, String> = p.mapping.iter().map(|m| (m.id, s(m.filename))).collect();
    let locs: HashMap<u64, &proto::Location> = p.location.iter().map(|l| (l.id, l)).collect();
    p.sample
        .iter()
        .map(|sample| {
            let mut frames = Vec::new();
            for id in &sample.location_id {
                let loc = locs[id];
                let mapping = maps.get(&loc.mapping_id).cloned().unwrap_or_default();
                if loc.line.is_empty() {
                    frames.push(Frame {
                        function: "?".into(),
                        file: String::new(),
                        line: 0,
                        mapping: mapping.clone(),
                    });
                }
                for line in &loc.line {
                    let f = funcs[&line.function_id];
                    frames.push(Frame {
                        function: s(f.name),
                        file: s(f.filename),
                        line: line.line,
                        mapping: mapping.clone(),
                    });
                }
            }
            let label = |k: &str| sample.label.iter().find(|l| s(l.key) == k);
            PySample {
                pid: label("pid").map(|l| l.num).unwrap_or(-1),
                tid: label("thread_id").map(|l| l.num).unwrap_or(-1),
                comm: label("comm").map(|l| s(l.str)).unwrap_or_default(),
                frames,
                values: sample.value.clone(),
            }
        })
        .collect()
}

/// Samples of `pid` only.
pub fn of_pid(samples: Vec<PySample>, pid: u32) -> Vec<PySample> {
    samples
        .into_iter()
        .filter(|s| s.pid == i64::from(pid))
        .collect()
}

/// Sum of value 0 over `samples`.
pub fn weight<'a>(samples: impl IntoIterator<Item = &'a PySample>) -> i64 {
    samples.into_iter().map(|s| s.values[0]).sum()
}

/// The lines of `function` in `script`: its `def` line up to the last indented line.
pub fn body_lines(script: &Path, function: &str) -> RangeInclusive<i64> {
    let text = std::fs::read_to_string(script).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let def = lines
        .iter()
        .position(|l| l.starts_with(&format!("def {function}(")))
        .unwrap_or_else(|| panic!("no top-level `def {function}(` in {}", script.display()));
    let mut last = def;
    for (i, l) in lines.iter().enumerate().skip(def + 1) {
        if l.trim().is_empty() {
            continue;
        }
        if !l.starts_with(' ') {
            break;
        }
        last = i;
    }
    // Line numbers start at 1. The `def` line belongs to the function: from 3.11 on, a frame
    // sampled at its first instruction (RESUME, before the body's first line) is at the `def`
    // line, in py-spy as in the interpreter's own tracebacks.
    (def as i64 + 1)..=(last as i64 + 1)
}

/// Records `pid` for `seconds` with `extra` flags; returns the summary and the pid's samples.
pub fn record_python(
    pid: u32,
    seconds: &str,
    extra: &[&str],
    name: &str,
) -> (String, Vec<PySample>) {
    let out = temp_dir(name).join("profile.pb.gz");
    let summary = record_pid(pid, seconds, extra, &out);
    let samples = of_pid(resolve_frames(&read_pprof(&out)), pid);
    (summary, samples)
}

/// The three functions of `py_split.py` and their share of its CPU time, percent.
pub const SPLIT: [(&str, f64); 3] = [
    ("burn_fifty", 50.0),
    ("burn_thirty", 30.0),
    ("burn_twenty", 20.0),
];

/// Runs `py_split.py` under `python`, records it for 8 s and checks the 50/30/20 split (±5 points),
/// `main` and `<module>` root-ward of every sample of the three, file and line in the script, and the
/// summary's Python walk counters (walks for nearly every sample, failures under 1%).
pub fn check_function_split(python: &Path, name: &str) {
    let workload = start_script(python, "py_split.py", &["30"]);
    let pid = workload.pid();
    let (summary, samples) = record_python(pid, "8", &["--frequency", "99"], name);
    drop(workload);
    let all = weight(&samples);
    let with_python = weight(samples.iter().filter(|s| s.python().next().is_some()));
    eprintln!(
        "{}: {all} samples, {with_python} with Python frames\n{summary}",
        python.display()
    );
    assert!(
        all > 400,
        "only {all} samples of the busy script in 8 s at 99 Hz\n{summary}"
    );
    super::assert_sample_cost(&summary, "python");
    let failures = split_failures(&samples, &summary, &script("py_split.py"), 5.0);
    if !failures.is_empty() {
        let shown = failures.len().min(15);
        panic!(
            "{} under {}: {} failures, the first {shown}:\n{}\n{summary}",
            "py_split.py",
            python.display(),
            failures.len(),
            failures[..shown].join("\n")
        );
    }
}

/// What is wrong with `py_split.py`'s samples `samples` (one process's) and its summary: the
/// 50/30/20 split (within `points`), `main` and `<module>` root-ward of every sample of the three, the
/// frames' file `file` (the script's path where it ran) and lines in the script's bodies, and the
/// Python walk counters (walks for nearly every sample, failures under 1%).
pub fn split_failures(
    samples: &[PySample],
    summary: &str,
    file: &Path,
    points: f64,
) -> Vec<String> {
    let all = weight(samples);
    let path = script("py_split.py");
    let mut failures = Vec::new();
    // Every walk of this one busy thread finds its state and reads its frames: the leaf function,
    // main and <module> (2 frames only in main's loop between two calls).
    let walks = summary_field(summary, "python_walks");
    let failed =
        summary_field(summary, "python_no_thread") + summary_field(summary, "python_read_fault");
    if walks < 0.9 * all as f64 || failed > 0.01 * walks {
        failures.push(format!(
            "{walks} Python walks for {all} samples, {failed} of them failed"
        ));
    }
    let per_stack = summary_field(summary, "python_frames_per_stack");
    if per_stack < 2.9 {
        failures.push(format!("python_frames_per_stack {per_stack}, want about 3"));
    }
    for (function, want) in SPLIT {
        let in_function: Vec<&PySample> =
            samples.iter().filter(|s| s.has_python(function)).collect();
        let got = 100.0 * weight(in_function.iter().copied()) as f64 / all as f64;
        eprintln!("{function}: {got:.1}% (want {want}±{points})");
        if (got - want).abs() > points {
            failures.push(format!("{function} share {got:.1}%, want {want}±{points}"));
        }
        let body = body_lines(&path, function);
        for s in &in_function {
            let at = s.python_position(function).unwrap();
            let frame = &s.frames[at];
            let above = |f: &str| {
                s.frames[at + 1..]
                    .iter()
                    .any(|x| x.is_python() && x.function == f)
            };
            if !above("main") || !above("<module>") {
                failures.push(format!(
                    "no main/<module> above {function}: {}",
                    s.describe()
                ));
            }
            if Path::new(&frame.file) != file {
                failures.push(format!(
                    "{function} file {:?}, want {}: {}",
                    frame.file,
                    file.display(),
                    s.describe()
                ));
            }
            if !body.contains(&frame.line) {
                failures.push(format!(
                    "{function} line {} outside its body {body:?}: {}",
                    frame.line,
                    s.describe()
                ));
            }
        }
    }
    failures
}
