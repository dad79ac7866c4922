//! The four CPU-bound workloads every profiler of the unwinding comparison records at once:
//! `busy_threads.c` with and without frame pointers, and two Debian binaries without them (`xz`,
//! `python3`). They run until killed, so each profiler gets a fresh set for exactly its window.

use std::{
    collections::HashMap,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::Context as _;

use crate::{bench::compile_with, util::root};

/// Size of xz's input: incompressible, so xz -9 stays in its match finder for the whole window.
const RANDOM_INPUT_BYTES: usize = 64 << 20;

/// Iterations that no window reaches (busy_threads runs fixed work; it is killed instead).
const FOREVER_ITERATIONS: &str = "1000000000000000";

/// A Python loop calling a function, so frames of the interpreter's call path are on the stack.
const PYTHON_LOOP: &str = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\nwhile True:\n    f(1000)\n";

/// One workload: its label in the tables, its thread name (sonde's folded files key on it) and how to
/// start it.
pub(super) struct Workload {
    pub(super) label: &'static str,
    pub(super) comm: &'static str,
    program: PathBuf,
    args: Vec<String>,
}

/// The workloads, built and ready to start.
pub(super) struct Workloads {
    pub(super) list: Vec<Workload>,
}

/// Index of the frame-pointer build in [`Workloads::list`] (the row `sonde --unwind fp` is judged on).
pub(super) const FP_BUILD: usize = 0;

impl Workloads {
    /// Builds both variants of busy_threads and xz's random input into `dir`.
    pub(super) fn prepare(dir: &Path) -> anyhow::Result<Self> {
        let src = root().join("tests/workloads/busy_threads.c");
        // Distinct names so their threads are told apart by comm (15 characters at most).
        let fp = compile_with(
            &src,
            &dir.join("busy_fp"),
            &["-O2", "-g", "-fno-omit-frame-pointer"],
        )?;
        let nofp = compile_with(
            &src,
            &dir.join("busy_nofp"),
            &["-O2", "-g", "-fomit-frame-pointer"],
        )?;
        let input = dir.join("random-64MiB.bin");
        if std::fs::metadata(&input).map(|m| m.len()).ok() != Some(RANDOM_INPUT_BYTES as u64) {
            write_random(&input)?;
        }
        for bin in ["/usr/bin/xz", "/usr/bin/python3"] {
            anyhow::ensure!(
                Path::new(bin).exists(),
                "{bin} is missing: apt-get install xz-utils python3"
            );
        }
        let busy = |label, comm, program: PathBuf| Workload {
            label,
            comm,
            program,
            args: vec![FOREVER_ITERATIONS.into()],
        };
        Ok(Self {
            list: vec![
                busy("busy_threads -O2 frame pointers", "busy_fp", fp),
                busy("busy_threads -O2 -fomit-frame-pointer", "busy_nofp", nofp),
                Workload {
                    label: "/usr/bin/xz -9 -T1 (Debian)",
                    comm: "xz",
                    program: "/usr/bin/xz".into(),
                    args: vec![
                        "-9".into(),
                        "-T1".into(),
                        "-c".into(),
                        input.display().to_string(),
                    ],
                },
                Workload {
                    label: "/usr/bin/python3 loop (Debian)",
                    comm: "python3",
                    program: "/usr/bin/python3".into(),
                    args: vec!["-c".into(), PYTHON_LOOP.into()],
                },
            ],
        })
    }

    /// Starts every workload.
    pub(super) fn start(&self) -> anyhow::Result<Running> {
        let mut children = Vec::new();
        for w in &self.list {
            let child = Command::new(&w.program)
                .args(&w.args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .with_context(|| format!("starting {}", w.program.display()));
            match child {
                Ok(c) => children.push(c),
                Err(e) => {
                    Running { children }.stop();
                    return Err(e);
                }
            }
        }
        Ok(Running { children })
    }

    /// The workload slot of a thread name.
    pub(super) fn by_comm(&self, comm: &str) -> Option<usize> {
        self.list.iter().position(|w| w.comm == comm)
    }
}

/// Started workloads, in the order of [`Workloads::list`].
pub(super) struct Running {
    children: Vec<Child>,
}

impl Running {
    /// Process ids, in workload order.
    pub(super) fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Workload slot by process id.
    pub(super) fn slots(&self) -> HashMap<u32, usize> {
        self.pids().into_iter().zip(0..).collect()
    }

    /// Slots of workloads that already exited (their share of the window is missing).
    pub(super) fn exited(&mut self) -> Vec<usize> {
        (0..self.children.len())
            .filter(|&i| matches!(self.children[i].try_wait(), Ok(Some(_))))
            .collect()
    }

    /// Kills and reaps every workload.
    pub(super) fn stop(mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Writes xz's incompressible input (from the kernel's random source, once per bench directory).
fn write_random(path: &Path) -> anyhow::Result<()> {
    let mut random = std::fs::File::open("/dev/urandom")?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..RANDOM_INPUT_BYTES / buf.len() {
        std::io::Read::read_exact(&mut random, &mut buf)?;
        out.write_all(&buf)?;
    }
    out.flush()
        .with_context(|| format!("writing {}", path.display()))
}
