//! Relabel rules choose what `sonde run` profiles: of three busy processes, one is kept by its comm,
//! one by its cgroup (at `__sample_rate__` 19 Hz against the base 99 Hz) and one is dropped. The
//! dropped one is absent from every profile and its samples are filtered in the kernel (counted);
//! the 19 Hz target has 19/99 of the kept one's samples per CPU-second, within 10%, and its
//! profiles' period says 19 Hz; `sonde targets` lists all three with their labels.

use crate::common;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use common::{daemon::*, *};

/// The cgroup v2 hierarchy: `/sys/fs/cgroup` on a unified host, its `unified` mount on a hybrid one.
fn cgroup2_root() -> PathBuf {
    for dir in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
        let dir = Path::new(dir);
        if dir.join("cgroup.procs").exists() && dir.join("cgroup.subtree_control").exists() {
            return dir.to_owned();
        }
    }
    panic!("no cgroup v2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified: mount cgroup2");
}

/// A cgroup of its own, removed when dropped (after its processes are gone).
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

const RULES: &str = r#"
export_interval_secs = 3
[[relabel]]
source_labels = ["__meta_process_comm", "__meta_process_cgroup"]
regex = "tgt_keep;.*|.*;/sonde-tgt-[0-9]+"
action = "keep"
[[relabel]]
source_labels = ["__meta_process_cgroup"]
regex = "/sonde-tgt-[0-9]+"
target_label = "__sample_rate__"
replacement = "19"
[[relabel]]
source_labels = ["__meta_process_comm"]
target_label = "workload"
"#;

/// `sonde run` with [`RULES`] in `dir`: the daemon, its data directory and its metrics address.
fn start_with_rules(dir: &Path) -> (Daemon, PathBuf, String) {
    let config = dir.join("sonde.toml");
    std::fs::write(&config, RULES).unwrap();
    let data = dir.join("data");
    let addr = format!("127.0.0.1:{}", free_port());
    let daemon = Daemon::start(
        &[
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--metrics-addr",
            &addr,
        ],
        &dir.join("sonde.log"),
    );
    (daemon, data, addr)
}

#[test]
fn rules_keep_by_comm_and_cgroup_drop_in_the_kernel_and_thin_to_19_hz() {
    require_root();
    let dir = temp_dir("relabel_targets");
    let keep = build_workload("cpu_split", "tgt_keep", FP_FLAGS);
    let drop_bin = build_workload("cpu_split", "tgt_drop", FP_FLAGS);
    let slow = build_workload("cpu_split", "tgt_slow", FP_FLAGS);
    let cgroup = Cgroup(cgroup2_root().join(format!("sonde-tgt-{}", std::process::id())));
    std::fs::create_dir_all(&cgroup.0).expect("creating a cgroup (root needed)");

    let kept = Workload::start(&keep, &["120"]);
    let dropped = Workload::start(&drop_bin, &["120"]);
    // Joins the cgroup before it execs the workload, so every sample of it is in the cgroup.
    let slow_cmd = format!(
        "echo $$ > {}/cgroup.procs && exec {} 120",
        cgroup.0.display(),
        slow.display()
    );
    let thinned = Workload::adopt(Command::new("sh").args(["-c", &slow_cmd]).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let cg_line = std::fs::read_to_string(format!("/proc/{}/cgroup", thinned.pid())).unwrap();
    assert!(cg_line.contains("/sonde-tgt-"), "{cg_line}");

    let cpu_before = [kept.pid(), thinned.pid(), dropped.pid()].map(cpu_seconds);
    let (mut daemon, data, addr) = start_with_rules(&dir);
    // The frequencies are compared after the first window: a process's samples before the event
    // thread decides (its first tens of milliseconds) are at the base rate.
    daemon.wait_windows(1, Duration::from_secs(90));
    let cpu_settled = [kept.pid(), thinned.pid()].map(cpu_seconds);
    daemon.wait_windows(5, Duration::from_secs(90));

    // sonde targets: all three, with discovery and final labels, frequency and verdict.
    let out = sonde(&["targets", "--metrics-addr", &addr, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let find = |pid: u32| {
        listed
            .iter()
            .find(|t| t["pid"] == pid)
            .unwrap_or_else(|| panic!("pid {pid} not in /targets: {listed:?}"))
            .clone()
    };
    let (k, s, d) = (find(kept.pid()), find(thinned.pid()), find(dropped.pid()));
    assert_eq!(
        (k["kept"].as_bool(), k["frequency_hz"].as_u64()),
        (Some(true), Some(99)),
        "{k}"
    );
    assert_eq!(k["labels"]["workload"], "tgt_keep", "{k}");
    assert_eq!(
        k["discovery_labels"]["__meta_process_comm"], "tgt_keep",
        "{k}"
    );
    assert!(
        k["discovery_labels"]["__meta_process_exe"]
            .as_str()
            .is_some_and(|e| e.ends_with("/tgt_keep")),
        "{k}"
    );
    assert_eq!(
        (s["kept"].as_bool(), s["frequency_hz"].as_u64()),
        (Some(true), Some(19)),
        "{s}"
    );
    assert!(
        s["discovery_labels"]["__meta_process_cgroup"]
            .as_str()
            .is_some_and(|c| c.contains("/sonde-tgt-")),
        "{s}"
    );
    assert!(
        s["labels"].get("__sample_rate__").is_none(),
        "internal labels are dropped: {s}"
    );
    assert_eq!(d["kept"], false, "{d}");
    assert_eq!(
        d["discovery_labels"]["__meta_process_comm"], "tgt_drop",
        "{d}"
    );
    let text = sonde_ok(&["targets", "--metrics-addr", &addr]);
    for needle in [
        format!("pid {:<8} kept 99 Hz", kept.pid()),
        format!("pid {:<8} kept 19 Hz", thinned.pid()),
        format!("pid {:<8} dropped", dropped.pid()),
        "workload=\"tgt_keep\"".to_owned(),
    ] {
        assert!(text.contains(&needle), "no {needle:?} in:\n{text}");
    }

    let (status, _, log) = daemon.stop();
    let cpu_after = [kept.pid(), thinned.pid(), dropped.pid()].map(cpu_seconds);
    assert!(status.success(), "{status}\n{log}");
    let cpu: Vec<f64> = (0..3).map(|i| cpu_after[i] - cpu_before[i]).collect();
    let settled: Vec<f64> = (0..2).map(|i| cpu_after[i] - cpu_settled[i]).collect();

    // Profiles: the dropped process in none, the others with their labels and periods.
    let index = std::fs::read_to_string(data.join("index.jsonl")).expect("index.jsonl");
    let entries: Vec<serde_json::Value> = index
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| e["kind"] == "cpu")
        .collect();
    let first_window = entries
        .iter()
        .filter_map(|e| e["start_unix_nanos"].as_u64())
        .min()
        .unwrap_or(0);
    // Samples of `pid` in every window and in those after the first, and its profiles' periods.
    let samples_of = |pid: u32| -> (i64, i64, Vec<i64>) {
        let (mut n, mut after_first) = (0, 0);
        let mut periods = Vec::new();
        for e in entries.iter().filter(|e| {
            e["tags"]["process.pid"]
                .as_str()
                .and_then(|p| p.parse().ok())
                == Some(pid)
        }) {
            let profile = read_indexed(&data, e);
            periods.push(profile.period);
            let samples = total(&resolve(&profile), pid, 0);
            n += samples;
            if e["start_unix_nanos"].as_u64() > Some(first_window) {
                after_first += samples;
            }
        }
        (n, after_first, periods)
    };
    let (n_dropped, _, _) = samples_of(dropped.pid());
    assert_eq!(n_dropped, 0, "the dropped process is in a profile");
    assert!(
        !entries
            .iter()
            .any(|e| e["tags"]["process.executable.name"] == "tgt_drop"),
        "the dropped process has an index entry"
    );
    let (_, n_kept, kept_periods) = samples_of(kept.pid());
    let (_, n_slow, slow_periods) = samples_of(thinned.pid());
    assert!(
        kept_periods.iter().all(|p| *p == 1_000_000_000 / 99),
        "{kept_periods:?}"
    );
    assert!(
        slow_periods.iter().all(|p| *p == 1_000_000_000 / 19),
        "{slow_periods:?}"
    );
    assert!(
        entries.iter().any(|e| e["tags"]["workload"] == "tgt_keep"),
        "the rules' label in the tags"
    );

    // 19 Hz against 99 Hz, per CPU-second of each (they share the CPUs with whatever else runs).
    let rate_kept = n_kept as f64 / settled[0];
    let rate_slow = n_slow as f64 / settled[1];
    let ratio = rate_slow / rate_kept;
    let want = 19.0 / 99.0;
    eprintln!(
        "after the first window: kept {n_kept} samples / {:.2} CPU-s = {rate_kept:.1}/s; 19 Hz target {n_slow} / {:.2} CPU-s = {rate_slow:.1}/s; ratio {ratio:.4} (want {want:.4})",
        settled[0], settled[1]
    );
    assert!(n_slow > 50, "too few samples to judge: {n_slow}");
    assert!(
        (ratio / want - 1.0).abs() < 0.10,
        "19 Hz / 99 Hz sample rate ratio {ratio:.4}, want {want:.4} within 10%"
    );

    // Every sample of the dropped process is counted: filtered in the kernel, or (before the
    // kernel had the decision) removed at the drain.
    let json = json_log_of(&dir.join("sonde.log"));
    let windows = windows_json(&json);
    let sum = |key: &str| -> f64 {
        windows
            .iter()
            .map(|w| {
                w["figures"][key]
                    .as_f64()
                    .unwrap_or_else(|| panic!("no figure {key}: {w}"))
            })
            .sum()
    };
    let filtered = sum("target_dropped_samples");
    let late = sum("target_late_samples");
    let thinned_n = sum("target_thinned_samples");
    let expected_dropped = cpu[2] * 99.0;
    eprintln!(
        "dropped process: {filtered} samples filtered in the kernel, {late} removed late, ~{expected_dropped:.0} expected from its CPU time; {thinned_n} thinned"
    );
    assert!(
        filtered > 0.5 * expected_dropped,
        "the kernel filtered {filtered} samples of a process that should have had ~{expected_dropped:.0}"
    );
    assert!(late < 0.1 * filtered, "{late} late vs {filtered} filtered");
    assert!(thinned_n > 0.0);
    let last = windows.last().unwrap();
    assert!(
        last["figures"]["targets_kept"].as_f64().unwrap() >= 2.0,
        "{last}"
    );
    assert!(
        last["figures"]["targets_dropped"].as_f64().unwrap() >= 1.0,
        "{last}"
    );
    std::mem::drop((kept, dropped, thinned));
}

/// A process is decided again when it execs: a shell the rules drop (its comm is `sh`), busy until
/// told to go on, then replaced by a program they keep. Dropped in `/targets` before, kept after,
/// with samples of the new image only.
#[test]
fn an_exec_into_a_kept_program_is_decided_again() {
    require_root();
    let dir = temp_dir("relabel_exec");
    let keep = build_workload("cpu_split", "tgt_keep", FP_FLAGS);
    let go_on = dir.join("go-on");
    let script = format!(
        "while [ ! -e {} ]; do :; done; exec {} 120",
        go_on.display(),
        keep.display()
    );
    let shell = Workload::adopt(Command::new("sh").args(["-c", &script]).spawn().unwrap());
    let pid = shell.pid();
    let (mut daemon, data, addr) = start_with_rules(&dir);
    daemon.wait_windows(1, Duration::from_secs(90));
    let target = |addr: &str| -> serde_json::Value {
        let out = sonde(&["targets", "--metrics-addr", addr, "--json"]);
        assert!(out.status.success(), "{out:?}");
        let listed: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let found = listed.into_iter().find(|t| t["pid"] == pid);
        found.unwrap_or_else(|| panic!("pid {pid} not in /targets"))
    };
    let before = target(&addr);
    assert_eq!(before["kept"], false, "{before}");
    assert_eq!(before["discovery_labels"]["__meta_process_comm"], "sh");

    std::fs::write(&go_on, "").unwrap();
    daemon.wait_windows(3, Duration::from_secs(90));
    let after = target(&addr);
    assert_eq!(
        (after["kept"].as_bool(), after["frequency_hz"].as_u64()),
        (Some(true), Some(99)),
        "{after}"
    );
    assert_eq!(after["labels"]["workload"], "tgt_keep", "{after}");
    let (status, _, log) = daemon.stop();
    assert!(status.success(), "{status}\n{log}");
    drop(shell);

    // Its profiles hold the kept program's samples, and none of the shell's.
    let index = std::fs::read_to_string(data.join("index.jsonl")).expect("index.jsonl");
    let (mut samples, mut shell_frames) = (0, 0);
    for line in index.lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        if e["kind"] != "cpu" || e["tags"]["process.pid"].as_str() != Some(&pid.to_string()) {
            continue;
        }
        let resolved = resolve(&read_indexed(&data, &e));
        samples += total(&resolved, pid, 0);
        shell_frames += resolved
            .iter()
            .filter(|s| s.pid == i64::from(pid) && s.comm == "sh")
            .map(|s| s.values[0])
            .sum::<i64>();
    }
    assert!(samples > 100, "{samples} samples after the exec");
    assert_eq!(shell_frames, 0, "samples of the dropped shell in a profile");
}
