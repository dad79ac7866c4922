//! Agreement with V8's own profiler: `split.js` runs under `node --cpu-prof` (V8's sampling CPU
//! profiler, in process, writing a `.cpuprofile` at exit) while `sonde record` records the same run
//! without Node flags. Over the span sonde recorded, the ten functions with the most self time in
//! either profile hold the same share of the main thread's JavaScript samples in both, within ±5
//! points.
//!
//! The common scope: samples of the main thread whose stack holds a function of a script, counted to
//! the innermost such function whose code runs. For sonde that is the innermost `[js]` frame (V8
//! builtins and stubs, the native code of Node and libc above it are skipped; a JavaScript frame sonde
//! could not name counts as `?`, against sonde), and of its inline chain the frame's own function:
//! Node's `--cpu-prof` runs V8's profiler in its default mode (`kLeafNodeLineNumbers`), which counts
//! the time of a function inlined by the optimizing compiler (`step`, in every burner) to the
//! function it was inlined into, where sonde shows the inlined function too. For the `.cpuprofile` it is the innermost node with a script URL:
//! nodes without one are Node's native callbacks (`hrtimeBigInt`) and V8 builtins, which sonde shows
//! as native frames above their JavaScript caller, or V8's pseudo-functions `(program)`,
//! `(garbage collector)`, `(idle)` and `(root)` whose samples hold no JavaScript (these are left out
//! of both shares: V8 stops sampling stacks during GC, sonde sees the JavaScript under the
//! collector, so the test checks that they are rare in this workload).

use std::{collections::HashMap, path::Path};

use crate::common;
use common::{node::*, require_root};

/// Share (percent) of each function among `counts`.
fn shares(counts: &HashMap<String, f64>) -> HashMap<String, f64> {
    let total: f64 = counts.values().sum();
    counts
        .iter()
        .map(|(f, n)| (f.clone(), 100.0 * n / total.max(1.0)))
        .collect()
}

/// The `n` functions with the most samples, most first.
fn top(counts: &HashMap<String, f64>, n: usize) -> Vec<String> {
    let mut all: Vec<(&String, &f64)> = counts.iter().collect();
    all.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    all.into_iter().take(n).map(|(f, _)| f.clone()).collect()
}

/// CLOCK_MONOTONIC in microseconds: the clock of V8's profile timestamps on Linux.
fn monotonic_us() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) },
        0
    );
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
}

/// What the `.cpuprofile` counts in `[from, to]` (µs): self samples per script function, and the
/// samples without one.
struct CpuProfile {
    functions: HashMap<String, f64>,
    without_js: f64,
}

fn read_cpuprofile(path: &Path, from: i64, to: i64) -> CpuProfile {
    let text = std::fs::read_to_string(path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    // Node id -> (parent, innermost script function at or above it).
    let nodes = json["nodes"].as_array().expect("nodes");
    let mut parent: HashMap<i64, i64> = HashMap::new();
    let mut frame: HashMap<i64, (String, bool)> = HashMap::new();
    for node in nodes {
        let id = node["id"].as_i64().unwrap();
        let call = &node["callFrame"];
        let name = call["functionName"].as_str().unwrap_or_default();
        let in_script = !call["url"].as_str().unwrap_or_default().is_empty();
        // V8 calls an unnamed function "" here; sonde writes "(anonymous)", as DevTools shows it.
        let name = if name.is_empty() { "(anonymous)" } else { name };
        frame.insert(id, (name.to_owned(), in_script));
        for child in node["children"].as_array().into_iter().flatten() {
            parent.insert(child.as_i64().unwrap(), id);
        }
    }
    let script_function = |mut id: i64| -> Option<&str> {
        loop {
            let (name, in_script) = &frame[&id];
            if *in_script {
                return Some(name);
            }
            id = *parent.get(&id)?;
        }
    };
    let samples = json["samples"].as_array().expect("samples");
    let deltas = json["timeDeltas"].as_array().expect("timeDeltas");
    let mut at = json["startTime"].as_i64().expect("startTime");
    let mut out = CpuProfile {
        functions: HashMap::new(),
        without_js: 0.0,
    };
    for (sample, delta) in samples.iter().zip(deltas) {
        at += delta.as_i64().unwrap();
        if at < from || at > to {
            continue;
        }
        match script_function(sample.as_i64().unwrap()) {
            Some(f) => *out.functions.entry(f.to_owned()).or_default() += 1.0,
            None => out.without_js += 1.0,
        }
    }
    out
}

#[test]
fn v8_cpuprof_self_time_agrees_with_sonde() {
    require_root();
    let dir = common::temp_dir("node_cpuprof");
    let run = NodeRun::start(
        NODE20,
        &["--cpu-prof", "--cpu-prof-dir", dir.to_str().unwrap()],
        "split.js",
        &["60", "3"],
    );
    let pid = run.pid();
    let from = monotonic_us();
    let (samples, summary) = record(pid, "8", &[], "node_cpuprof");
    let to = monotonic_us();
    let output = run.finish();
    // Node names the file CPU.DATE.TIME.PID.THREAD.SEQ.cpuprofile; thread 0 is the main thread.
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".cpuprofile") && name.contains(&format!(".{pid}.0."))
        })
        .unwrap_or_else(|| panic!("node wrote no main-thread profile in {}", dir.display()));
    let v8 = read_cpuprofile(&file, from, to);
    let v8_js: f64 = v8.functions.values().sum();

    let mut sonde: HashMap<String, f64> = HashMap::new();
    let main = main_thread(&samples, pid);
    for s in &main {
        if let Some(f) = leaf_js(s) {
            *sonde.entry(f.to_owned()).or_default() += s.values[0] as f64;
        }
    }
    let sonde_js: f64 = sonde.values().sum();
    eprintln!(
        "node_cpuprof: sonde {sonde_js} of {} main-thread samples in JavaScript; V8 {v8_js} in \
         JavaScript, {} without; {}",
        common::java::weight(&main),
        v8.without_js,
        output.trim()
    );
    assert!(
        sonde_js > 400.0,
        "sonde has only {sonde_js} main-thread samples in JavaScript\n{summary}"
    );
    assert!(
        v8_js > 1000.0,
        "the .cpuprofile has only {v8_js} samples in JavaScript in sonde's span ({from}..{to} µs): \
         is its clock CLOCK_MONOTONIC?"
    );
    assert!(
        v8.without_js <= 0.05 * (v8_js + v8.without_js),
        "{} of the .cpuprofile's samples hold no JavaScript: the common scope leaves too much out",
        v8.without_js
    );

    let (ours, theirs) = (shares(&sonde), shares(&v8.functions));
    let mut compared = top(&sonde, 10);
    for f in top(&v8.functions, 10) {
        if !compared.contains(&f) {
            compared.push(f);
        }
    }
    let mut worst = (0.0, String::new());
    for f in &compared {
        let (a, b) = (
            ours.get(f).copied().unwrap_or(0.0),
            theirs.get(f).copied().unwrap_or(0.0),
        );
        eprintln!("node_cpuprof: {f:24} sonde {a:5.1}%  V8 {b:5.1}%");
        if (a - b).abs() > worst.0 {
            worst = ((a - b).abs(), f.clone());
        }
    }
    assert!(
        worst.0 <= 5.0,
        "{} differs by {:.1} points between sonde ({:.1}%) and V8's profiler ({:.1}%)",
        worst.1,
        worst.0,
        ours.get(&worst.1).copied().unwrap_or(0.0),
        theirs.get(&worst.1).copied().unwrap_or(0.0)
    );
}
