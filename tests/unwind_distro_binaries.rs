//! Debian's own binaries, unchanged (no frame pointers, stripped of `.symtab`, `.eh_frame` kept): a busy
//! `xz -9` and the system `python3` running a loop.
//! - At least 95% of each process's samples reach `__libc_start_call_main` or `start_thread` (libc's
//!   names come from its debug file in /usr/lib/debug, package libc6-dbg).
//! - Their tables need more page entries than the kernel's first page hash holds: the walks go
//!   through the larger hash that replaced it.
//! - Agreement with `perf record --call-graph dwarf` on the same processes in the same seconds: at
//!   least 90% of sonde's samples (weighted) have a user stack that perf also sampled.
//!
//! Comparison method: each user stack becomes the sequence of its physical frames' function names,
//! leaf first (perf with `--no-inline`; sonde's containing function of each location, inlined callees
//! folded into it). Kernel frames are dropped on both sides. Frames either tool cannot name count as
//! `?`. Names are compared after removing symbol versions (`@@GLIBC_2.34`) and glibc's internal
//! aliases of one function (`__GI_` prefixes, `__libc_start_main_impl` = `__libc_start_main`), since
//! the two tools may pick different names for the same address. Two stacks match when the sequences
//! are equal. sonde records without `python` among its `--runtimes`: this compares native unwinding, and perf has no Python
//! frames (the Python frames have their own tests, `python_*`).

use crate::common;
use std::{collections::HashSet, process::Stdio, time::Duration};

use common::*;

const PYTHON_LOOP: &str = "
def work(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
while True:
    work(100000)
";

fn normalise(name: &str) -> String {
    let name = name.split('@').next().unwrap_or(name);
    let name = name.strip_prefix("__GI_").unwrap_or(name);
    match name {
        "__libc_start_main_impl" => "__libc_start_main".to_owned(),
        other => other.to_owned(),
    }
}

/// perf's user stacks per pid, as normalised name sequences (leaf first).
fn perf_stacks(data: &std::path::Path) -> Vec<(u32, Vec<String>)> {
    let out = std::process::Command::new("perf")
        .args(["script", "--no-inline", "-F", "pid,ip,sym,dso", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output()
        .expect("perf must be installed (cargo xtask setup --peers)");
    assert!(out.status.success(), "perf script failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut stacks = Vec::new();
    for record in text.split("\n\n").filter(|r| !r.trim().is_empty()) {
        let mut lines = record.lines();
        let Some(pid) = lines.next().and_then(|l| l.trim().parse::<u32>().ok()) else {
            continue;
        };
        let frames: Vec<String> = lines
            .filter_map(|line| {
                let line = line.trim();
                let (rest, dso) = line.rsplit_once(" (")?;
                if dso.starts_with("[kernel") {
                    return None;
                }
                let sym = rest.split_once(' ').map_or("", |(_, s)| s);
                Some(match sym {
                    "[unknown]" | "" => "?".to_owned(),
                    s => normalise(s),
                })
            })
            .collect();
        if !frames.is_empty() {
            stacks.push((pid, frames));
        }
    }
    stacks
}

/// sonde's user stacks per pid with their sample counts, as normalised name sequences (leaf first).
fn sonde_stacks(p: &sonde::profile::pprof::proto::Profile) -> Vec<(u32, Vec<String>, i64)> {
    let s = |i: i64| p.string_table[i as usize].clone();
    let funcs: std::collections::HashMap<u64, String> =
        p.function.iter().map(|f| (f.id, s(f.name))).collect();
    let kernel: HashSet<u64> = p
        .mapping
        .iter()
        .filter(|m| s(m.filename) == "[kernel.kallsyms]")
        .map(|m| m.id)
        .collect();
    let locs: std::collections::HashMap<u64, &sonde::profile::pprof::proto::Location> =
        p.location.iter().map(|l| (l.id, l)).collect();
    p.sample
        .iter()
        .map(|sample| {
            let pid = sample
                .label
                .iter()
                .find(|l| s(l.key) == "pid")
                .map_or(0, |l| l.num as u32);
            let frames = sample
                .location_id
                .iter()
                .map(|id| locs[id])
                .filter(|l| !kernel.contains(&l.mapping_id))
                // pprof lists a location's inline chain innermost first: the last line is the
                // function the address is in.
                .map(|l| {
                    l.line
                        .last()
                        .map_or("?".to_owned(), |line| normalise(&funcs[&line.function_id]))
                })
                .collect();
            (pid, frames, sample.value[0])
        })
        .collect()
}

#[test]
fn debian_xz_and_python3_stacks_are_complete_and_agree_with_perf_dwarf() {
    require_root();
    let dir = temp_dir("unwind_distro");
    let input = dir.join("random.bin");
    let random = std::process::Command::new("head")
        .args(["-c", "67108864", "/dev/urandom"])
        .output()
        .unwrap();
    std::fs::write(&input, random.stdout).unwrap();
    let xz = std::process::Command::new("/usr/bin/xz")
        .args(["-9", "-T1", "-c"])
        .arg(&input)
        .stdout(Stdio::null())
        .spawn()
        .expect("Debian's xz (package xz-utils)");
    let xz = Workload::adopt(xz);
    let python = Workload::start(
        std::path::Path::new("/usr/bin/python3"),
        &["-c", PYTHON_LOOP],
    );
    std::thread::sleep(Duration::from_millis(500));
    let pids = format!("{},{}", xz.pid(), python.pid());
    let perf_data = dir.join("perf.data");
    let mut perf = std::process::Command::new("perf")
        .args([
            "record",
            "-q",
            "--call-graph",
            "dwarf",
            "-F",
            "99",
            "-p",
            &pids,
            "-o",
        ])
        .arg(&perf_data)
        .args(["--", "sleep", "6"])
        .stdout(Stdio::null())
        .spawn()
        .expect("perf must be installed (cargo xtask setup --peers)");
    let out = dir.join("sonde.pb.gz");
    let (xz_pid, py_pid) = (xz.pid().to_string(), python.pid().to_string());
    let summary = sonde_ok(&[
        "record",
        "--duration",
        "5",
        "--pid",
        &xz_pid,
        "--pid",
        &py_pid,
        "--runtimes",
        "go,java,node",
        "--output",
        out.to_str().unwrap(),
        "--summary-json",
        "-",
    ]);
    assert!(perf.wait().unwrap().success(), "perf record failed");
    eprintln!("{summary}");
    // python3's, libc's and liblzma's tables need more page entries than the kernel's first page
    // hash holds (1,024): the stacks below were walked through the larger hash that replaced it.
    let pages = summary_field(&summary, "unwind_table_pages");
    let capacity = summary_field(&summary, "unwind_page_hash_capacity");
    assert!(
        pages > 1024.0 && capacity >= pages,
        "{pages} page entries in a hash of {capacity}: the hash should have grown past 1,024"
    );

    let profile = read_pprof(&out);
    let samples = resolve(&profile);
    for (name, pid) in [("xz", xz.pid()), ("python3", python.pid())] {
        let reaching: i64 = samples
            .iter()
            .filter(|s| s.pid == i64::from(pid))
            .filter(|s| {
                s.functions
                    .iter()
                    .any(|f| f == "__libc_start_call_main" || f == "start_thread")
            })
            .map(|s| s.values[0])
            .sum();
        let all = total(&samples, pid, 0);
        eprintln!("{name}: {reaching}/{all} samples reach a thread entry");
        assert!(all > 100, "{name}: only {all} samples");
        assert!(
            reaching as f64 >= 0.95 * all as f64,
            "{name}: {reaching} of {all} samples reach __libc_start_call_main or start_thread"
        );
    }

    let perf = perf_stacks(&perf_data);
    let theirs: HashSet<(u32, &[String])> =
        perf.iter().map(|(pid, f)| (*pid, f.as_slice())).collect();
    for (name, pid) in [("xz", xz.pid()), ("python3", python.pid())] {
        let ours: Vec<(Vec<String>, i64)> = sonde_stacks(&profile)
            .into_iter()
            .filter(|(p, _, _)| *p == pid)
            .map(|(_, f, n)| (f, n))
            .collect();
        let all: i64 = ours.iter().map(|(_, n)| n).sum();
        let matched: i64 = ours
            .iter()
            .filter(|(f, _)| theirs.contains(&(pid, f.as_slice())))
            .map(|(_, n)| n)
            .sum();
        let perf_samples = perf.iter().filter(|(p, _)| *p == pid).count();
        eprintln!(
            "{name}: {matched}/{all} of sonde's samples have a stack perf sampled ({perf_samples} perf samples)"
        );
        for (frames, n) in ours
            .iter()
            .filter(|(f, _)| !theirs.contains(&(pid, f.as_slice())))
            .take(5)
        {
            eprintln!("  unmatched x{n}: {}", frames.join(";"));
        }
        assert!(
            perf_samples > 100,
            "{name}: perf took only {perf_samples} samples"
        );
        assert!(
            matched as f64 >= 0.9 * all as f64,
            "{name}: only {matched} of {all} samples match a perf --call-graph dwarf stack"
        );
    }
}
