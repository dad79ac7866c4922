//! Hostile input to `sonde diff`: memory bombs end with a clear error, quickly and within 1 GiB; FIFOs and
//! devices are refused before anything is read; sums that overflow and malformed samples are errors.
//!
//! Peak memory is the child's own `ru_maxrss`, from `wait4` on its pid (not RUSAGE_CHILDREN, which the
//! other tests of this binary would share).

use crate::common::diff_fixtures as fixtures;

use std::{
    ffi::{OsStr, OsString},
    io::{Read as _, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use fixtures::{Kind, gzip, profile, scratch, stack, write};
use flate2::{Compression, write::GzEncoder};
use prost::Message as _;

/// What one run of `sonde diff` did.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    peak_rss_mib: u64,
}

/// Runs `sonde diff args` with `stdin` piped in, killing it after `deadline`.
fn run_diff(args: &[&OsStr], stdin: &[u8], deadline: Duration) -> Run {
    let started = Instant::now();
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4 below, which also reports its own peak RSS"
    )]
    let mut child = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .arg("diff")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running sonde");
    let pid = child.id() as libc::pid_t;
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // sonde may exit without reading its input: a broken pipe here is expected.
    let feeder = std::thread::spawn(move || drop(input.write_all(&stdin)));
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            r.read_to_string(&mut s).ok();
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let watchdog = std::thread::spawn(move || {
        while started.elapsed() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: signal 0 only checks that the process exists; it is our unreaped child.
            if unsafe { libc::kill(pid, 0) } != 0 {
                return;
            }
        }
        // SAFETY: the child is not reaped yet (wait4 below), so the pid is still ours.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child; `status` and `usage` are valid for writes.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let elapsed = started.elapsed();
    feeder.join().unwrap();
    watchdog.join().unwrap();
    Run {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed,
        // ru_maxrss is in KiB on Linux.
        peak_rss_mib: usage.ru_maxrss as u64 / 1024,
    }
}

fn args(list: &[&dyn AsRef<OsStr>]) -> Vec<OsString> {
    list.iter().map(|a| a.as_ref().to_owned()).collect()
}

fn as_refs(v: &[OsString]) -> Vec<&OsStr> {
    v.iter().map(OsString::as_os_str).collect()
}

/// Asserts a clean failure: exit status 1, one `sonde: error:` line holding every `expected` piece.
fn assert_fails(run: &Run, expected: &[&str]) {
    assert_eq!(run.code, Some(1), "stderr: {}", run.stderr);
    assert!(
        run.stderr.starts_with("sonde: error: "),
        "stderr: {}",
        run.stderr
    );
    for e in expected {
        assert!(run.stderr.contains(e), "expected {e:?} in: {}", run.stderr);
    }
    assert!(run.stdout.is_empty(), "no table on error");
}

fn good(dir: &Path) -> PathBuf {
    write(
        &dir.join("good.pb.gz"),
        &profile(Kind::Cpu, 10.0, &[stack("main;work", 100)]),
    )
}

/// Streams `chunk` `times` times through gzip into `path`, never holding more than one chunk.
fn gzip_stream(path: &Path, chunk: &[u8], times: usize) -> u64 {
    let file = std::fs::File::create(path).unwrap();
    let mut gz = GzEncoder::new(std::io::BufWriter::new(file), Compression::best());
    for _ in 0..times {
        gz.write_all(chunk).unwrap();
    }
    gz.finish().unwrap().flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// Runs `sonde diff --base good --new bomb` and checks the bomb is refused within 10 s and 1 GiB.
fn assert_bomb_refused(name: &str, bomb: &Path, expected: &[&str]) -> Run {
    let good = good(bomb.parent().unwrap());
    let run = run_diff(
        &as_refs(&args(&[&"--base", &good, &"--new", &bomb])),
        b"",
        Duration::from_secs(60),
    );
    eprintln!(
        "{name}: {} bytes on disk, refused in {:?} at {} MiB peak RSS",
        std::fs::metadata(bomb).unwrap().len(),
        run.elapsed,
        run.peak_rss_mib
    );
    assert_fails(&run, expected);
    assert!(
        run.elapsed < Duration::from_secs(10),
        "{name}: {:?}",
        run.elapsed
    );
    assert!(
        run.peak_rss_mib < 1024,
        "{name}: peak RSS {} MiB",
        run.peak_rss_mib
    );
    run
}

#[test]
fn gzip_bomb_stops_at_the_decompressed_limit() {
    let dir = scratch("hostile_gzip_bomb");
    let bomb = dir.join("bomb.pb.gz");
    // 2 GiB of zeros, ~2 MB compressed.
    let size = gzip_stream(&bomb, &vec![0u8; 1 << 20], 2048);
    assert!(size < 16 << 20, "the bomb is {size} bytes");
    assert_bomb_refused(
        "gzip bomb",
        &bomb,
        &[
            "bomb.pb.gz",
            "larger than 512 MiB decompressed",
            "--max-input-mib",
        ],
    );
}

#[test]
fn string_table_bomb_is_refused_before_decoding() {
    let dir = scratch("hostile_string_bomb");
    let bomb = dir.join("strings.pb.gz");
    // ~135 million empty string-table entries (key 0x32, length 0): 270 MB of protobuf, under the
    // decompressed limit, but 3.2 GB as a Vec<String>.
    let size = gzip_stream(&bomb, &[0x32u8, 0].repeat(1 << 19), 258);
    assert!(size < 1 << 20, "the bomb is {size} bytes");
    assert_bomb_refused(
        "string-table bomb",
        &bomb,
        &[
            "strings.pb.gz",
            "string table (135266304 entries)",
            "--max-input-mib 512",
        ],
    );
}

#[test]
fn the_limit_bounds_compressed_bytes_too() {
    let dir = scratch("hostile_compressed_limit");
    let good = good(&dir);
    // 2 MiB that gzip cannot shrink: over a 1 MiB limit before any decompression.
    let mut noise = Vec::with_capacity(2 << 20);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while noise.len() < 2 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    let big = dir.join("big.pb.gz");
    std::fs::write(&big, gzip(&noise)).unwrap();
    let a = args(&[&"--base", &good, &"--new", &big, &"--max-input-mib", &"1"]);
    let run = run_diff(&as_refs(&a), b"", Duration::from_secs(30));
    assert_fails(&run, &["big.pb.gz", "larger than 1 MiB compressed"]);
    // The same file through standard input: no size to check up front, the count stops it.
    let a = args(&[&"--base", &good, &"--new", &"-", &"--max-input-mib", &"1"]);
    let run = run_diff(&as_refs(&a), &gzip(&noise), Duration::from_secs(30));
    assert_fails(&run, &["<stdin> is larger than 1 MiB compressed"]);
}

#[test]
fn devices_and_fifos_are_refused_at_once() {
    let dir = scratch("hostile_special_files");
    let good = good(&dir);
    let fifo = dir.join("pipe.pb.gz");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    for (path, kind) in [
        (Path::new("/dev/zero"), "is a character device"),
        (fifo.as_path(), "is a FIFO"),
        (dir.as_path(), "is a directory"),
    ] {
        let run = run_diff(
            &as_refs(&args(&[&"--base", &good, &"--new", &path])),
            b"",
            Duration::from_secs(30),
        );
        assert_fails(
            &run,
            &[&path.display().to_string(), kind, "not a regular file"],
        );
        assert!(
            run.elapsed < Duration::from_secs(2),
            "{path:?} took {:?}",
            run.elapsed
        );
    }
    // An index that is a FIFO is refused the same way.
    let data = scratch("hostile_index_fifo");
    let index = data.join("index.jsonl");
    let c = std::ffi::CString::new(index.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let a = args(&[
        &"--data",
        &data,
        &"--base",
        &"version=1",
        &"--new",
        &"version=2",
    ]);
    let run = run_diff(&as_refs(&a), b"", Duration::from_secs(30));
    assert_fails(&run, &["index.jsonl", "is a FIFO"]);
    assert!(run.elapsed < Duration::from_secs(2), "{:?}", run.elapsed);
}

#[test]
fn index_entries_cannot_leave_the_data_directory() {
    let dir = scratch("hostile_index_path");
    let line = r#"{"path":"/dev/zero","kind":"cpu","start_unix_nanos":0,"end_unix_nanos":1,"tags":{"service.version":"1"}}"#;
    std::fs::write(dir.join("index.jsonl"), format!("{line}\n")).unwrap();
    let a = args(&[
        &"--data",
        &dir,
        &"--base",
        &"version=1",
        &"--new",
        &"version=1",
        &"--strict",
    ]);
    let run = run_diff(&as_refs(&a), b"", Duration::from_secs(30));
    assert_fails(
        &run,
        &[
            "index.jsonl line 1",
            "\"/dev/zero\" is not a file inside the data directory",
        ],
    );
    // Without --strict the line is skipped, with the same reason, and nothing is left to compare.
    let run = run_diff(&as_refs(&a[..a.len() - 1]), b"", Duration::from_secs(30));
    assert_eq!(run.code, Some(1), "stderr: {}", run.stderr);
    assert!(
        run.stderr
            .contains("\"/dev/zero\" is not a file inside the data directory")
            && run.stderr.contains("no cpu profile"),
        "{}",
        run.stderr
    );
}

/// A cpu profile (samples/count, cpu/nanoseconds) whose samples carry exactly `values`.
fn with_values(values: &[Vec<i64>]) -> Vec<u8> {
    let stacks: Vec<_> = (0..values.len())
        .map(|i| stack(&format!("main;f{i}"), 1))
        .collect();
    let mut p = profile(Kind::Cpu, 10.0, &stacks);
    for (sample, v) in p.sample.iter_mut().zip(values) {
        sample.value = v.clone();
    }
    gzip(&p.encode_to_vec())
}

#[test]
fn sums_that_overflow_are_errors_naming_the_file() {
    let dir = scratch("hostile_overflow");
    let good = good(&dir);
    let big = i64::MAX / 2 + 1;
    let one = dir.join("one.pb.gz");
    std::fs::write(&one, with_values(&[vec![1, big], vec![1, big]])).unwrap();
    let run = run_diff(
        &as_refs(&args(&[&"--base", &good, &"--new", &one])),
        b"",
        Duration::from_secs(30),
    );
    assert_fails(
        &run,
        &["one.pb.gz", "`cpu` values overflows a 64-bit integer"],
    );

    // Each file fits; their sum on one side does not. The second file is named.
    let (a, b) = (dir.join("a.pb.gz"), dir.join("b.pb.gz"));
    std::fs::write(&a, with_values(&[vec![1, big]])).unwrap();
    std::fs::write(&b, with_values(&[vec![1, big]])).unwrap();
    let run = run_diff(
        &as_refs(&args(&[&"--base", &good, &"--new", &a, &b])),
        b"",
        Duration::from_secs(30),
    );
    assert_fails(&run, &["b.pb.gz", "overflows"]);

    // Values that sum to exactly i64::MAX fit: the shares are right and add up to 100%.
    let edge = dir.join("edge.pb.gz");
    std::fs::write(&edge, with_values(&[vec![1, big], vec![1, big - 1]])).unwrap();
    let a = args(&[&"--base", &good, &"--new", &edge, &"--format", &"json"]);
    let run = run_diff(&as_refs(&a), b"", Duration::from_secs(30));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let shares: f64 = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["new_self_pct"].as_f64().unwrap())
        .sum();
    assert!(
        (shares - 100.0).abs() < 1e-6,
        "new shares add up to {shares}%"
    );
    let f0 = fixtures::row(&json, "f0").1;
    assert!(
        (fixtures::num(f0, "new_self_pct") - 50.0).abs() < 1e-6,
        "{f0}"
    );
}

fn has_row(json: &serde_json::Value, function: &str) -> bool {
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["function"] == function)
}

#[test]
fn malformed_samples_fail_unless_lenient() {
    let dir = scratch("hostile_short_values");
    let good = good(&dir);
    let bad = dir.join("short.pb.gz");
    let values = [
        vec![1, 10_000_000],
        vec![3],
        vec![1, -5],
        vec![3, 30_000_000],
    ];
    std::fs::write(&bad, with_values(&values)).unwrap();
    let strict = args(&[&"--base", &good, &"--new", &bad, &"--format", &"json"]);
    let run = run_diff(&as_refs(&strict), b"", Duration::from_secs(30));
    assert_fails(
        &run,
        &[
            "short.pb.gz",
            "sample 1 has 1 value(s) for 2 sample types",
            "--lenient",
        ],
    );

    let mut lenient = strict.clone();
    lenient.push("--lenient".into());
    let run = run_diff(&as_refs(&lenient), b"", Duration::from_secs(30));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("skipped 2 malformed sample(s) of")
            && run.stderr.contains("short.pb.gz"),
        "{}",
        run.stderr
    );
    // Only the two well-formed samples count: 10 ms and 30 ms of cpu.
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(has_row(&json, "f0") && !has_row(&json, "f1") && !has_row(&json, "f2"));
    assert!((fixtures::num(fixtures::row(&json, "f3").1, "new_self_pct") - 75.0).abs() < 1e-6);

    // A negative value alone is named as such.
    let neg = dir.join("negative.pb.gz");
    std::fs::write(&neg, with_values(&[vec![1, 10], vec![1, -5]])).unwrap();
    let run = run_diff(
        &as_refs(&args(&[&"--base", &good, &"--new", &neg])),
        b"",
        Duration::from_secs(30),
    );
    assert_fails(
        &run,
        &[
            "negative.pb.gz",
            "sample 1 has a negative value -5 for cpu/nanoseconds",
        ],
    );
}

#[test]
fn standard_input_is_read_once() {
    let dir = scratch("hostile_stdin");
    let good = good(&dir);
    let piped = gzip(&profile(Kind::Cpu, 10.0, &[stack("main;other", 100)]).encode_to_vec());
    let a = args(&[&"--base", &good, &"--new", &"-", &"--format", &"json"]);
    let run = run_diff(&as_refs(&a), &piped, Duration::from_secs(30));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        fixtures::num(fixtures::row(&json, "other").1, "new_self_pct"),
        100.0
    );
    let a = args(&[&"--base", &"-", &"--new", &"-"]);
    let run = run_diff(&as_refs(&a), &piped, Duration::from_secs(30));
    assert_fails(&run, &["standard input (`-`) can be read only once"]);
}
