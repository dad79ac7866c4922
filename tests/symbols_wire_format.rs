//! Frames sonde could not name leave it in a form a symbolizing backend (Parca, the OpenTelemetry model)
//! can finish: in pprof and in OTLP, as decoded by the independent Python peers, every unnamed frame of a
//! stripped binary has a mapping with the binary's GNU build id, its address lies in the mapping, and
//! `address - memory_start + file_offset` falls inside the right function's bytes in the file, as the
//! unstripped build's symbol table places them.

use crate::common;
use crate::common::debug_files;

use std::{
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
};

use common::*;
use debug_files::*;

/// File-offset ranges of the functions of `bin` (from its symbol table and program headers), and
/// of its PLT sections: a sample can land in a PLT stub (`clock_gettime@plt`, on the workload's timing
/// path), real code of this build that no symbol covers.
fn function_file_ranges(bin: &std::path::Path) -> Vec<(String, u64, u64)> {
    let path = bin.to_str().unwrap();
    // The executable PT_LOAD: file offset = vaddr - p_vaddr + p_offset.
    let segments = tool("readelf", &["-lW", path]);
    let (seg_vaddr, seg_offset) = segments
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD") && l.contains(" R E "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            (hex(f[2]), hex(f[1]))
        })
        .next()
        .expect("an executable segment");
    let plt = tool("readelf", &["-SW", path])
        .lines()
        .filter_map(|l| {
            // "  [13] .plt  PROGBITS  <addr> <offset> <size> ...": the name is the field after "]".
            let f: Vec<&str> = l.split(']').nth(1)?.split_whitespace().collect();
            if f.len() < 5 || !f[0].starts_with(".plt") {
                return None;
            }
            let offset = u64::from_str_radix(f[3], 16).ok()?;
            let size = u64::from_str_radix(f[4], 16).ok()?;
            Some((f[0].to_owned(), offset, offset + size))
        })
        .collect::<Vec<_>>();
    assert!(!plt.is_empty(), "{path} has no .plt section");
    tool("nm", &["-S", "--defined-only", path])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 4 || !matches!(f[2], "T" | "t") {
                return None;
            }
            let start = u64::from_str_radix(f[0], 16).ok()? - seg_vaddr + seg_offset;
            let size = u64::from_str_radix(f[1], 16).ok()?;
            Some((f[3].to_owned(), start, start + size))
        })
        .chain(plt)
        .collect()
}

/// Checks one unresolved frame; returns the function its normalized address falls in.
fn check_frame(
    address: u64,
    start: u64,
    limit: u64,
    file_offset: u64,
    ranges: &[(String, u64, u64)],
) -> String {
    assert!(
        (start..limit).contains(&address),
        "address {address:#x} outside its mapping [{start:#x}, {limit:#x})"
    );
    let normalized = address - start + file_offset;
    ranges
        .iter()
        .find(|(_, lo, hi)| (*lo..*hi).contains(&normalized))
        .map(|(name, _, _)| name.clone())
        .unwrap_or_else(|| panic!("normalized address {normalized:#x} is in no function"))
}

#[test]
fn unnamed_frames_carry_build_id_and_a_normalizable_address() {
    require_root();
    let work = temp_dir("symbols_wire");
    let bin = build_workload("cpu_split", "cpu_split_wire_full", NOFP_FLAGS);
    let ranges = function_file_ranges(&bin);
    let split = split_debug(&bin, "cpu_split_wire");
    let workload = Workload::start(&split.stripped, &["60"]);
    let pid = workload.pid();
    std::thread::sleep(std::time::Duration::from_millis(300));

    // pprof, decoded by tests/peers/decode_pprof.py.
    let out = work.join("profile.pb.gz");
    let (summary, _) = record_with_debuginfod(pid, "3", None, &[], &out);
    let decoded = Command::new(python())
        .arg(root().join("tests/peers/decode_pprof.py"))
        .arg(root().join("proto"))
        .arg(&out)
        .output()
        .expect("running the Python pprof decoder");
    assert!(
        decoded.status.success(),
        "decode_pprof.py: {}",
        String::from_utf8_lossy(&decoded.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&decoded.stdout).unwrap();
    let mut functions = std::collections::BTreeSet::new();
    let mut frames = 0;
    for frame in json["unresolved"].as_array().unwrap() {
        let m = &frame["mapping"];
        if !m["filename"]
            .as_str()
            .is_some_and(|f| f.ends_with("cpu_split_wire"))
        {
            continue;
        }
        assert_eq!(m["build_id"], split.build_id.as_str(), "{frame}");
        let n = |v: &serde_json::Value| v.as_u64().unwrap();
        functions.insert(check_frame(
            n(&frame["address"]),
            n(&m["memory_start"]),
            n(&m["memory_limit"]),
            n(&m["file_offset"]),
            &ranges,
        ));
        frames += 1;
    }
    eprintln!("pprof: {frames} unnamed locations in {functions:?}\n{summary}");
    for f in ["burn_fifty", "burn_thirty", "burn_twenty", "main"] {
        assert!(
            functions.contains(f),
            "no unnamed frame normalizes into {f}"
        );
    }

    // OTLP, decoded by tests/peers/otlp_receiver.py.
    let mut receiver = Command::new(python())
        .arg(root().join("tests/peers/otlp_receiver.py"))
        .args(["--requests", "1", "--timeout", "60"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the Python OTLP receiver");
    let mut lines = BufReader::new(receiver.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let port = first
        .strip_prefix("PORT ")
        .unwrap_or_else(|| panic!("the Python receiver did not start: {first:?}"))
        .to_owned();
    let daemon = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args([
            "run",
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{port}"),
        ])
        .args([
            "--export-interval",
            "3",
            "--duration",
            "4",
            "--debuginfod-urls",
            "",
        ])
        .args(["--data-dir", work.join("data").to_str().unwrap()])
        .env("SONDE_LOG", "warn")
        .status()
        .expect("running sonde run");
    assert!(daemon.success(), "sonde run exited {daemon}");
    let request: serde_json::Value = serde_json::from_str(
        &lines
            .next()
            .and_then(Result::ok)
            .expect("one decoded request"),
    )
    .unwrap();
    let _ = receiver.wait();
    let mut functions = std::collections::BTreeSet::new();
    for frame in request["unresolved"].as_array().unwrap() {
        let m = &frame["mapping"];
        if !m["filename"]
            .as_str()
            .is_some_and(|f| f.ends_with("cpu_split_wire"))
        {
            continue;
        }
        assert_eq!(
            m["attributes"]["process.executable.build_id.gnu"],
            split.build_id.as_str(),
            "{frame}"
        );
        let n = |v: &serde_json::Value| v.as_u64().unwrap();
        functions.insert(check_frame(
            n(&frame["address"]),
            n(&m["memory_start"]),
            n(&m["memory_limit"]),
            n(&m["file_offset"]),
            &ranges,
        ));
    }
    eprintln!("OTLP: unnamed frames in {functions:?}");
    for f in ["burn_fifty", "burn_thirty", "burn_twenty", "main"] {
        assert!(
            functions.contains(f),
            "no unnamed OTLP frame normalizes into {f}"
        );
    }
    drop(workload);
}
