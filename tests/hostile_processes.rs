//! Unprivileged processes that try to read through, stall or steer the root agent (THREAT_MODEL.md), as
//! root with real BPF. Each runs `hostile_jit` as `nobody`: machine code it generated, looked up in
//! `/tmp/perf-PID.map`, which it makes into a weapon:
//! - a symlink to a root-only file holding a perf-map line: the file's text appears nowhere;
//! - a map owned by another unprivileged user: ignored;
//! - a FIFO: `record` ends on time, `run` keeps making windows and stops on SIGINT;
//! - in its own user and mount namespace (`unshare -Urm`, a private `/tmp`), a symlink to `/etc/shadow`;
//! - beside them, a `nobody` process with its own honest map: still named.
//!
//! A binary with a hostile `.eh_frame` (FDEs pointing at FDEs as their CIE, overlapping FDEs, an entry
//! claiming 4 GiB) and a `.gnu_debuglink` of `../../../etc/shadow` is profiled in bounded time, counted.
//! Every refusal is read back from the summary's counters.

use crate::common;
use crate::common::daemon;
use common::*;
use daemon::Daemon;

use std::{
    io::{BufRead as _, BufReader, Read as _},
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// An unprivileged user other than `nobody`, owning the foreign perf map (no account needed).
const OTHER_UID: u32 = 4242;

/// The workload, copied where `nobody` may run it and where a private `/tmp` does not hide it.
fn hostile_jit() -> PathBuf {
    let built = build_workload("hostile_jit", "hostile_jit", FP_FLAGS);
    let dir = PathBuf::from(format!("/var/tmp/sonde-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("hostile_jit");
    std::fs::copy(&built, &bin).unwrap();
    bin
}

/// Starts `hostile_jit ADDRESS SECONDS MODE ARG` as `nobody` (inside `unshare -Urm` with a private
/// tmpfs `/tmp` when `namespaced`) and waits for its "ready".
fn start_as_nobody(bin: &Path, address: u64, mode: &str, arg: &str, namespaced: bool) -> Workload {
    let hex = format!("{address:x}");
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"]);
    if namespaced {
        let script = format!(
            "mount -t tmpfs tmpfs /tmp && exec {} {hex} 60 {mode} {arg}",
            bin.display()
        );
        cmd.args(["unshare", "-Urm", "sh", "-c", &script]);
    } else {
        cmd.arg(bin).args([hex.as_str(), "60", mode, arg]);
    }
    let mut child: Child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("setpriv (util-linux)");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "ready",
        "hostile_jit {mode} did not start (unprivileged user namespaces allowed?): {:?}",
        child.try_wait()
    );
    Workload::adopt(child)
}

/// Files removed when dropped, at the end of a test or when it panics.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A root-only (0600) file holding one perf-map line for `address`.
fn root_only_secret(dir: &Path, address: u64, token: &str) -> PathBuf {
    let path = dir.join(format!("{token}.map"));
    std::fs::write(&path, format!("{address:x} 100 {token}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn gunzip(path: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    bytes
}

#[test]
fn unprivileged_perf_maps_neither_read_through_nor_stall_a_recording() {
    require_root();
    let bin = hostile_jit();
    let work = temp_dir("hostile_record");
    let secret = root_only_secret(&work, 0x7e10_0000_0000, "ROOT_ONLY_SECRET_TOKEN");
    let symlinked = start_as_nobody(
        &bin,
        0x7e10_0000_0000,
        "symlink",
        secret.to_str().unwrap(),
        false,
    );
    let foreign = start_as_nobody(&bin, 0x7e20_0000_0000, "none", "", false);
    let foreign_map = PathBuf::from(format!("/tmp/perf-{}.map", foreign.pid()));
    std::fs::write(&foreign_map, "7e2000000000 100 OTHER_USER_TOKEN\n").unwrap();
    std::fs::set_permissions(&foreign_map, std::fs::Permissions::from_mode(0o644)).unwrap();
    rustix::fs::chown(
        &foreign_map,
        Some(rustix::fs::Uid::from_raw(OTHER_UID)),
        Some(rustix::fs::Gid::from_raw(OTHER_UID)),
    )
    .unwrap();
    let fifo = start_as_nobody(&bin, 0x7e30_0000_0000, "fifo", "", false);
    let namespaced = start_as_nobody(&bin, 0x7e40_0000_0000, "symlink", "/etc/shadow", true);
    let honest = start_as_nobody(&bin, 0x7e50_0000_0000, "own", "honest_jit_code", false);
    // The workloads are killed, not ended, so their maps outlive them; a later process given one of
    // these pids would find its map's name taken.
    let _cleanup = RemoveOnDrop(
        [&symlinked, &foreign, &fifo, &honest]
            .iter()
            .map(|w| PathBuf::from(format!("/tmp/perf-{}.map", w.pid())))
            .collect(),
    );

    let out = work.join("profile.pb.gz");
    let pids: Vec<String> = [&symlinked, &foreign, &fifo, &namespaced, &honest]
        .iter()
        .map(|w| w.pid().to_string())
        .collect();
    let mut args = vec!["record", "--duration", "4", "--unwind", "fp"];
    for pid in &pids {
        args.extend_from_slice(&["--pid", pid]);
    }
    args.extend_from_slice(&["--output", out.to_str().unwrap(), "--summary-json", "-"]);
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args(&args)
        .env("SONDE_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A FIFO that blocked the recording would keep it past any reasonable end: 4 s of sampling plus
    // loading and symbolizing take well under 30 s.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("sonde record of a FIFO perf map did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = child.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let _ = std::fs::remove_file(&foreign_map);
    assert!(status.success(), "sonde record exited {status}\n{stderr}");
    eprintln!("{summary}");

    // Nothing of the root-only file, the other user's map or /etc/shadow is in the profile or the log.
    let profile = gunzip(&out);
    let text = String::from_utf8_lossy(&profile);
    // /etc/shadow's first entry up to its password field (`root:*:` or `root:$y$...`).
    let shadow = std::fs::read_to_string("/etc/shadow").unwrap();
    let shadow_entry: String = shadow
        .lines()
        .next()
        .unwrap()
        .split(':')
        .take(2)
        .collect::<Vec<_>>()
        .join(":")
        + ":";
    for leak in [
        "ROOT_ONLY_SECRET_TOKEN",
        "OTHER_USER_TOKEN",
        shadow_entry.as_str(),
    ] {
        assert!(!text.contains(leak), "{leak} reached the profile");
        assert!(
            !summary.contains(leak) && !stderr.contains(leak),
            "{leak} reached the output"
        );
    }
    // The honest map is still read and names its process's code.
    let samples = resolve(&read_pprof(&out));
    let all = total(&samples, honest.pid(), 0) as f64;
    let named = inclusive(&samples, honest.pid(), "honest_jit_code", 0) as f64;
    assert!(
        all > 100.0,
        "only {all} samples of the honest process\n{summary}"
    );
    assert!(
        named / all > 0.9,
        "honest_jit_code in {named} of {all} samples\n{summary}"
    );
    assert_eq!(
        summary_field(&summary, "perf_map_entries"),
        1.0,
        "{summary}"
    );
    assert_eq!(
        summary_field(&summary, "perf_map_bad_lines"),
        0.0,
        "{summary}"
    );
    // Each attack refused and counted: two symlinks (the host one and the namespaced one), the other
    // user's map, the FIFO.
    assert!(
        summary_field(&summary, "input_refusals[perf_map/symlink]") >= 2.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "input_refusals[perf_map/owner]") >= 1.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "input_refusals[perf_map/not_regular]") >= 1.0,
        "{summary}"
    );
    // The attackers' own samples are still there, unnamed.
    for w in [&symlinked, &foreign, &fifo, &namespaced] {
        assert!(
            total(&samples, w.pid(), 0) > 100,
            "no samples of {}",
            w.pid()
        );
    }
}

#[test]
fn a_fifo_perf_map_does_not_stall_the_daemon_and_sigint_ends_it() {
    require_root();
    let bin = hostile_jit();
    let fifo = start_as_nobody(&bin, 0x7e60_0000_0000, "fifo", "", false);
    let _cleanup = RemoveOnDrop(vec![PathBuf::from(format!("/tmp/perf-{}.map", fifo.pid()))]);
    let cpu = build_workload("cpu_split", "cpu_split_hostile", FP_FLAGS);
    let _busy = Workload::start(&cpu, &["60"]);
    let work = temp_dir("hostile_run");
    let data = work.join("data");
    let mut daemon = Daemon::start(
        &[
            "--export-interval",
            "2",
            "--unwind",
            "fp",
            "--metrics-addr",
            "none",
            "--debuginfod-urls",
            "",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &work.join("sonde.log"),
    );
    // Windows keep coming every interval while the FIFO is there: 4 windows of 2 s in well under 20 s.
    daemon.wait_windows(4, Duration::from_secs(20));
    let index = std::fs::read_to_string(data.join("index.jsonl")).unwrap();
    assert!(
        index.contains(&format!("\"process.pid\":\"{}\"", fifo.pid())),
        "the FIFO process's own profile is written:\n{index}"
    );
    let (status, took, log) = daemon.interrupt(Duration::from_secs(25));
    assert!(
        status.success(),
        "sonde run exited {status} on SIGINT\n{log}"
    );
    assert!(
        took < Duration::from_secs(20),
        "the stop took {took:?}\n{log}"
    );
}

/// `.eh_frame` entries of an ELF file: (file offset, is a CIE) of each, in order.
fn eh_frame_entries(elf: &[u8]) -> (usize, Vec<(usize, bool)>) {
    use object::{Object as _, ObjectSection as _};
    let file = object::File::parse(elf).unwrap();
    let section = file.section_by_name(".eh_frame").unwrap();
    let (start, size) = section.file_range().unwrap();
    let (start, end) = (start as usize, (start + size) as usize);
    let mut entries = Vec::new();
    let mut at = start;
    while at + 8 <= end {
        let len = u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 || len == 0xffff_ffff {
            break;
        }
        let id = u32::from_le_bytes(elf[at + 4..at + 8].try_into().unwrap());
        entries.push((at, id == 0));
        at += 4 + len;
    }
    (start, entries)
}

/// The workload with its `.eh_frame` made hostile, stripped, with a debug link climbing to
/// `/etc/shadow`.
fn hostile_binary(work: &Path) -> PathBuf {
    let bin = build_workload("cpu_split", "cpu_split_hostile_cfi", NOFP_FLAGS);
    let mut elf = std::fs::read(&bin).unwrap();
    let (_, entries) = eh_frame_entries(&elf);
    let fdes: Vec<usize> = entries.iter().filter(|e| !e.1).map(|e| e.0).collect();
    assert!(
        fdes.len() >= 6,
        "too few FDEs to make hostile: {}",
        fdes.len()
    );
    let put =
        |elf: &mut Vec<u8>, at: usize, v: u32| elf[at..at + 4].copy_from_slice(&v.to_le_bytes());
    // FDE 0 names itself as its CIE, FDE 1 names FDE 0: a loop if a reader followed them. (The CIE
    // pointer is the distance from the field back to the CIE.)
    let back = |from: usize, to: usize| (from + 4 - to) as u32;
    put(&mut elf, fdes[0] + 4, back(fdes[0], fdes[0]));
    put(&mut elf, fdes[1] + 4, back(fdes[1], fdes[0]));
    // FDE 3 starts where FDE 2 starts (pc-relative sdata4 at +8) and covers a megabyte: overlaps.
    let target = |elf: &[u8], at: usize| {
        at as i64 + 8 + i64::from(i32::from_le_bytes(elf[at + 8..at + 12].try_into().unwrap()))
    };
    let fde2_start = target(&elf, fdes[2]);
    put(
        &mut elf,
        fdes[3] + 8,
        (fde2_start - (fdes[3] as i64 + 8)) as i32 as u32,
    );
    put(&mut elf, fdes[3] + 12, 1 << 20);
    // The last FDE claims to be 4 GiB long.
    put(&mut elf, *fdes.last().unwrap(), 0xffff_fff0);
    let patched = work.join("cpu_split_patched");
    std::fs::write(&patched, &elf).unwrap();
    // The debug link's section: the name, NUL, padding to 4, a CRC.
    let mut link = b"../../../etc/shadow\0".to_vec();
    while !link.len().is_multiple_of(4) {
        link.push(0);
    }
    link.extend_from_slice(&0u32.to_le_bytes());
    let link_file = work.join("debuglink");
    std::fs::write(&link_file, &link).unwrap();
    let out = work.join("cpu_split_hostile");
    let status = Command::new("objcopy")
        .args([
            "--strip-debug",
            "--strip-unneeded",
            "--remove-section=.gnu_debuglink",
        ])
        .arg(format!(
            "--add-section=.gnu_debuglink={}",
            link_file.display()
        ))
        .arg(&patched)
        .arg(&out)
        .status()
        .expect("objcopy (binutils)");
    assert!(status.success(), "objcopy failed");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
    out
}

#[test]
fn a_hostile_eh_frame_and_debug_link_cost_bounded_time_and_are_counted() {
    require_root();
    let work = temp_dir("hostile_binary");
    let bin = hostile_binary(&work);
    let workload = Workload::start(&bin, &["30"]);
    std::thread::sleep(Duration::from_millis(300));
    let out = work.join("profile.pb.gz");
    let started = Instant::now();
    let summary = record_pid(workload.pid(), "3", &["--debuginfod-urls", ""], &out);
    let took = started.elapsed();
    eprintln!("{summary}");
    assert!(took < Duration::from_secs(30), "recording took {took:?}");
    assert!(
        summary_field(&summary, "input_refusals[debug_file/bad_name]") >= 1.0,
        "the climbing debug link is refused and counted\n{summary}"
    );
    // The table is built from the FDEs that survive: the damaged ones cost their own functions only.
    assert!(
        summary_field(&summary, "unwind_tables_built") >= 1.0,
        "{summary}"
    );
    assert_eq!(
        summary_field(&summary, "unwind_table_failures"),
        0.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "agent_peak_resident_memory_bytes") < 256.0 * 1048576.0,
        "memory stayed bounded\n{summary}"
    );
    let samples = resolve(&read_pprof(&out));
    assert!(total(&samples, workload.pid(), 0) > 100, "{summary}");
}
