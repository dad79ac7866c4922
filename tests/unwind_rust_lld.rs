//! A Rust release binary linked by lld (sonde itself): no frame pointers, and an executable segment
//! whose virtual address is not its file offset (p_vaddr = p_offset + 0x1000; the offset is usually
//! not page aligned either, so the kernel maps it from a page that also holds the end of the segment
//! before). Off-CPU stacks of `sonde run`'s threads are
//! complete: they reach `start_thread` through std's thread entry (the main thread: libc's call of
//! `main`). (A wrong load bias once sent every
//! such walk into garbage after the first frame.)

use crate::common;
use common::*;

/// `(p_offset, p_vaddr)` of the executable `PT_LOAD` of `binary`, from readelf.
fn exec_segment(binary: &str) -> (u64, u64) {
    let out = std::process::Command::new("readelf")
        .args(["-lW", binary])
        .output()
        .expect("readelf (binutils) must be installed");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("LOAD") && l.contains(" R E "))
        .unwrap_or_else(|| panic!("no executable PT_LOAD in {binary}:\n{text}"));
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    (hex(fields[1]), hex(fields[2]))
}

#[test]
fn threads_of_a_rust_lld_binary_unwind_to_their_entry() {
    require_root();
    let sonde = env!("CARGO_BIN_EXE_sonde");
    let (offset, vaddr) = exec_segment(sonde);
    // What the load bias must handle is p_vaddr != p_offset. Whether the offset is also off a page
    // boundary depends on how large the segments before it came out in this build (it was not in one
    // build of this stop), so it is reported, not required.
    assert_ne!(
        offset, vaddr,
        "offset {offset:#x} = vaddr: not the lld layout"
    );
    eprintln!(
        "executable segment: offset {offset:#x}, vaddr {vaddr:#x}, page aligned: {}",
        offset % 4096 == 0
    );
    let data = temp_dir("unwind_rust_lld").join("data");
    let daemon = std::process::Command::new(sonde)
        .args([
            "run",
            "--duration",
            "30",
            "--export-interval",
            "1",
            "--data-dir",
        ])
        .arg(&data)
        .env("SONDE_LOG", "warn")
        .spawn()
        .unwrap();
    let daemon = Workload::adopt(daemon);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let out = temp_dir("unwind_rust_lld").join("offcpu.pb.gz");
    let summary = record_pid(daemon.pid(), "3", &["--profile", "offcpu"], &out);
    let samples = resolve(&read_pprof(&out));
    // Spawned threads end at start_thread, the main thread at libc's call of main: a stack holds one
    // or the other, so the shares add up. (The main thread's share varies from run to run; counting
    // only start_thread made this test pass or fail on it.)
    let to_thread_entry = share_reaching(&samples, daemon.pid(), "", "start_thread", 1)
        + share_reaching(&samples, daemon.pid(), "", "__libc_start_call_main", 1);
    eprintln!("reaching a thread entry: {to_thread_entry:.3}\n{summary}");
    assert!(
        to_thread_entry >= 0.9,
        "only {to_thread_entry:.3} of the daemon's blocking episodes reach their thread's entry"
    );
    assert!(
        summary_field(&summary, "walk_root_ratio") >= 0.9,
        "{summary}"
    );
    assert!(
        samples.iter().any(|s| s
            .functions
            .iter()
            .any(|f| f == "std::sys::backtrace::__rust_begin_short_backtrace")),
        "std's thread entry is missing from the stacks"
    );
}
