//! Benchmark of `sonde diff`: two generated profiles of 1,000,000 samples each over 50,000 unique stacks,
//! diffed by the release binary into a table plus a differential flame graph. Reports wall time and peak
//! RSS of the child (`ru_maxrss` from `wait4`) as plain lines; exits 1 when over the budget
//! (1 s, 500 MiB).
//!
//! ```text
//! cargo build --release && cargo run --release --example diff_bench [-- path/to/sonde]
//! ```
//!
//! `SONDE_BENCH_KEEP=1` keeps the generated profiles (for profiling the binary by hand).
//!
//! Each pprof sample is written as its own message (value 1 sample / 10 ms), the worst case for the
//! decoder; sample stacks follow a skewed distribution so a few stacks are hot and most are rare.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use flate2::{Compression, write::GzEncoder};
use prost::Message as _;
use sonde::profile::pprof::proto;

const SAMPLES: usize = 1_000_000;
const STACKS: usize = 50_000;
const FUNCTIONS: usize = 5_000;
const PERIOD: i64 = 10_000_000;
const RUNS: usize = 3;
const BUDGET_TIME: Duration = Duration::from_secs(1);
const BUDGET_RSS_MIB: f64 = 500.0;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The unique stacks as location ids, leaf first; location `i + 1` is function `i`.
fn stacks(rng: &mut Rng) -> Vec<Vec<u64>> {
    (0..STACKS)
        .map(|_| {
            let depth = 8 + rng.below(24);
            // A shared spine of entry functions, then a random walk through the rest.
            let mut frames: Vec<u64> = (0..depth)
                .map(|d| {
                    if d < 3 {
                        d as u64 + 1
                    } else {
                        4 + rng.below(FUNCTIONS - 3) as u64
                    }
                })
                .collect();
            frames.reverse();
            frames
        })
        .collect()
}

/// A profile whose samples pick stacks with a skewed distribution; `shift` moves weight between stacks so
/// the two sides differ.
fn profile(stacks: &[Vec<u64>], seed: u64, shift: bool) -> proto::Profile {
    let mut rng = Rng(seed);
    let mut strings = vec![
        String::new(),
        "samples".into(),
        "count".into(),
        "cpu".into(),
        "nanoseconds".into(),
    ];
    let mut p = proto::Profile {
        period: PERIOD,
        duration_nanos: 60_000_000_000,
        time_nanos: 1_767_225_600_000_000_000,
        ..Default::default()
    };
    let vt = |ty, unit| {
        // `type` is set through its field number: its Rust name (`ty` or `r#type`) depends on the prost setup.
        let mut v = proto::ValueType {
            unit,
            ..Default::default()
        };
        let mut field = vec![0x08];
        prost::encoding::encode_varint(ty, &mut field);
        v.merge(field.as_slice()).expect("a varint field");
        v
    };
    p.sample_type = vec![vt(1, 2), vt(3, 4)];
    p.period_type = Some(vt(3, 4));
    p.mapping.push(proto::Mapping {
        id: 1,
        memory_start: 0x40_0000,
        memory_limit: 0x80_0000,
        filename: strings.len() as i64,
        ..Default::default()
    });
    strings.push("/usr/bin/app".into());
    for f in 0..FUNCTIONS as u64 {
        let name = strings.len() as i64;
        strings.push(format!(
            "app::module{}::Type{}::function_{f}",
            f % 97,
            f % 13
        ));
        p.function.push(proto::Function {
            id: f + 1,
            name,
            system_name: name,
            filename: 0,
            start_line: 0,
        });
        p.location.push(proto::Location {
            id: f + 1,
            mapping_id: 1,
            address: 0x40_0000 + f * 64,
            line: vec![proto::Line {
                function_id: f + 1,
                line: 1,
            }],
            is_folded: false,
        });
    }
    p.string_table = strings;
    p.sample.reserve(SAMPLES);
    for _ in 0..SAMPLES {
        let mut i = (rng.unit().powi(3) * STACKS as f64) as usize;
        if shift && i.is_multiple_of(10) {
            i = (i + 17) % STACKS;
        }
        p.sample.push(proto::Sample {
            location_id: stacks[i].clone(),
            value: vec![1, PERIOD],
            label: Vec::new(),
        });
    }
    p
}

fn write_gzip(path: &Path, p: &proto::Profile) {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(&p.encode_to_vec()).expect("gzip into memory");
    std::fs::write(path, gz.finish().expect("gzip into memory")).expect("writing a bench profile");
}

/// Runs `cmd` and returns its wall time, peak RSS in MiB and exit status.
// The child is reaped by wait4 (for its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn measure(cmd: &mut std::process::Command) -> (Duration, f64, i32) {
    let start = Instant::now();
    let child = cmd.spawn().expect("starting sonde");
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 writes it for our own child, which we have not reaped yet.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert!(pid > 0, "wait4 failed: {}", std::io::Error::last_os_error());
    // Linux reports ru_maxrss in KiB.
    (
        elapsed,
        usage.ru_maxrss as f64 / 1024.0,
        libc::WEXITSTATUS(status),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, dir] = args.as_slice()
        && flag == "--generate"
    {
        generate(Path::new(dir));
        return;
    }
    let sonde = args.get(1).map(PathBuf::from).unwrap_or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        target.join("release/sonde")
    });
    assert!(
        sonde.exists(),
        "{} not found: run `cargo build --release` or pass the binary",
        sonde.display()
    );
    let dir = std::env::temp_dir().join(format!("sonde-diff-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the bench directory");

    // Generate in a child process: the generator holds hundreds of MiB, and a child spawned from a large
    // parent starts with the parent's resident pages counted in its ru_maxrss.
    let me = std::env::current_exe().expect("the bench's own path");
    let status = std::process::Command::new(me)
        .arg("--generate")
        .arg(&dir)
        .status()
        .expect("running the generator");
    assert!(status.success(), "generating the profiles failed");
    let (base, new) = (dir.join("base.pb.gz"), dir.join("new.pb.gz"));
    println!(
        "input sizes: base {} KiB, new {} KiB",
        kib(&base),
        kib(&new)
    );

    let svg = dir.join("diff.svg");
    let table = dir.join("table.txt");
    let mut worst = (Duration::ZERO, 0.0f64);
    for run in 1..=RUNS {
        let out = std::fs::File::create(&table).expect("creating the table file");
        let mut cmd = std::process::Command::new(&sonde);
        cmd.arg("diff")
            .arg("--base")
            .arg(&base)
            .arg("--new")
            .arg(&new)
            .arg("--flamegraph")
            .arg(&svg)
            .stdout(out);
        let (time, rss, code) = measure(&mut cmd);
        assert_eq!(code, 0, "sonde diff failed");
        println!(
            "run {run}: wall_time_ms {:.0} peak_rss_mib {rss:.1}",
            time.as_secs_f64() * 1e3
        );
        worst = (worst.0.max(time), worst.1.max(rss));
    }
    println!(
        "table: {} bytes, svg: {} KiB",
        std::fs::metadata(&table).map(|m| m.len()).unwrap_or(0),
        kib(&svg)
    );
    println!(
        "worst of {RUNS}: wall_time_ms {:.0} peak_rss_mib {:.1}",
        worst.0.as_secs_f64() * 1e3,
        worst.1
    );
    if std::env::var_os("SONDE_BENCH_KEEP").is_some() {
        println!("kept inputs in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if worst.0 > BUDGET_TIME || worst.1 > BUDGET_RSS_MIB {
        println!("budget: EXCEEDED (1000 ms, {BUDGET_RSS_MIB} MiB)");
        std::process::exit(1);
    }
    println!("budget: ok (1000 ms, {BUDGET_RSS_MIB} MiB)");
}

/// Writes `base.pb.gz` and `new.pb.gz` into `dir`.
fn generate(dir: &Path) {
    let started = Instant::now();
    let stacks = stacks(&mut Rng(0x5eed));
    write_gzip(&dir.join("base.pb.gz"), &profile(&stacks, 1, false));
    write_gzip(&dir.join("new.pb.gz"), &profile(&stacks, 2, true));
    println!(
        "generated: 2 profiles x {SAMPLES} samples over {STACKS} stacks in {:.1?}",
        started.elapsed()
    );
}

fn kib(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len() / 1024).unwrap_or(0)
}
