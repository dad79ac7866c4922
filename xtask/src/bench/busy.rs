//! `## Busy node` of `cargo xtask bench`: six real programs at once on the host's CPUs, as a node
//! runs them, recorded host-wide by `sonde record` and by `perf record -a --call-graph dwarf` at
//! 99 Hz over the same span, in interleaved rounds. Per program, the share of its samples that is
//! complete and named (`busy::judge`: rooted, no unnamed frame, its language's frames where the
//! stack enters the language), for each profiler; sonde's BPF time per sample, p50 and p90 by walk
//! path from its own timing. The programs run without flags: perf names Java and JavaScript only
//! through perf maps, which neither runtime writes unless told to, so its Java and JavaScript rows
//! show what a user gets from perf on such a node. Samples taken while a process had no user stack
//! (exiting, exec) are counted apart, as in the short-lived processes section. To compare two
//! builds of sonde (deeper stacks against the previous depth), run the section with `--sonde`.

mod judge;

use std::{
    collections::HashMap,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, ensure};
use judge::{Frame, Language, Verdict, judge};

use super::{HostProfiler as Kind, interleaved, median, sonde_summary, wait_usage};
use crate::util::root;

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) type Options = super::Rounds;

/// Seconds the programs run before a profiler starts: the JVM's and V8's JITs warm up, the loops
/// reach their steady mix.
const WARM_UP: Duration = Duration::from_secs(8);

/// One program of the node.
struct Program {
    name: &'static str,
    language: Language,
    /// Thread names of its processes, for the loops of short-lived processes (the long-lived
    /// runtimes' threads are read from `/proc` while they run).
    comms: &'static [&'static str],
}

const PROGRAMS: [Program; 6] = [
    Program {
        name: "javac (OpenJDK 17)",
        language: Language::Java,
        comms: &[],
    },
    Program {
        name: "tsc (Node 20)",
        language: Language::JavaScript,
        comms: &[],
    },
    Program {
        name: "gofmt (Debian, stripped)",
        language: Language::Native,
        comms: &["gofmt"],
    },
    Program {
        name: "python3 -m tokenize (Debian)",
        language: Language::Python,
        comms: &["python3"],
    },
    Program {
        name: "xz (Debian)",
        language: Language::Native,
        comms: &["xz"],
    },
    Program {
        name: "gcc build loop",
        language: Language::Native,
        comms: &["gcc", "cc1", "as", "collect2", "ld"],
    },
];

/// Index of the JVM and of Node.js in [`PROGRAMS`] (their processes live through the run).
const JAVAC: usize = 0;
const TSC: usize = 1;

/// Tallies of one program's samples.
#[derive(Clone, Copy, Default)]
struct Tally {
    samples: u64,
    stackless: u64,
    complete: u64,
    unrooted: u64,
    unnamed: u64,
    language_missing: u64,
}

impl Tally {
    fn add(&mut self, v: Verdict, count: u64) {
        self.samples += count;
        if v.stackless && !v.rooted {
            self.stackless += count;
            return;
        }
        self.complete += count * u64::from(v.complete_and_named());
        self.unrooted += count * u64::from(!v.rooted);
        self.unnamed += count * u64::from(v.unnamed);
        self.language_missing += count * u64::from(v.language_missing);
    }

    /// Percent of the samples with a user stack.
    fn percent(self, of: u64) -> Option<f64> {
        let live = self.samples - self.stackless;
        (live > 0).then(|| 100.0 * of as f64 / live as f64)
    }
}

struct Run {
    kind: Kind,
    tallies: Vec<Tally>,
    /// sonde: BPF ns per on-CPU sample by walk path, p50 and p90 (its own timing).
    costs: Vec<(String, f64, f64)>,
}

/// Runs the section and prints it; files are kept in `dir/busy`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.seconds >= 5, "--busy-seconds must be at least 5");
    ensure!(options.rounds > 0, "--busy-rounds must be at least 1");
    let dir = dir.join("busy");
    std::fs::create_dir_all(&dir)?;
    let setup = Setup::prepare(&dir)?;
    let runs = interleaved(
        "busy",
        options.rounds,
        &Kind::ALL,
        Kind::name,
        |round, kind| {
            let stem = dir.join(format!("{}-{round}", kind.stem()));
            measure(kind, sonde, &setup, &stem, options.seconds)
        },
    )?;
    print(&runs, options);
    Ok(())
}

/// What the programs need, made once.
struct Setup {
    classes: PathBuf,
    sources: PathBuf,
    xz_input: PathBuf,
    tokenize_input: PathBuf,
}

impl Setup {
    fn prepare(dir: &Path) -> anyhow::Result<Self> {
        let classes = dir.join("classes");
        std::fs::create_dir_all(&classes)?;
        let java = root().join("tests/workloads/java");
        let status = Command::new("/usr/lib/jvm/java-17-openjdk-amd64/bin/javac")
            .args(["--release", "11", "-d"])
            .arg(&classes)
            .arg(java.join("JavacLoop.java"))
            .arg(java.join("Control.java"))
            .status()
            .context("javac: Debian's openjdk-17-jdk-headless (cargo xtask setup --peers)")?;
        ensure!(status.success(), "compiling JavacLoop failed");
        ensure!(
            root()
                .join("target/peers/ts/node_modules/typescript")
                .exists(),
            "the TypeScript compiler is missing: cargo xtask setup --peers installs it"
        );
        // xz compresses a JDK module image: 130 MB of mixed code and data, read from the page cache.
        let xz_input = PathBuf::from("/usr/lib/jvm/java-17-openjdk-amd64/lib/modules");
        ensure!(xz_input.exists(), "{} is missing", xz_input.display());
        // `python3 -m tokenize` is pure Python up to 3.11 (Debian 12's); typing.py is 3,000 lines.
        let typing = Command::new("/usr/bin/python3")
            .args(["-c", "import typing; print(typing.__file__)"])
            .output()
            .context("Debian's python3")?;
        let tokenize_input = PathBuf::from(String::from_utf8_lossy(&typing.stdout).trim());
        Ok(Self {
            classes,
            sources: dir.join("sources"),
            xz_input,
            tokenize_input,
        })
    }
}

/// The six programs, each in its own process group (killed as a group).
struct Node {
    children: Vec<Child>,
}

impl Node {
    fn start(setup: &Setup) -> anyhow::Result<Self> {
        let gofmt =
            std::fs::canonicalize("/usr/bin/gofmt").context("Debian's gofmt (golang-go)")?;
        let goroot_src = gofmt.parent().unwrap().parent().unwrap().join("src/");
        let loop_of = |body: String| {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("while :; do {body}; done")]);
            c
        };
        let mut commands = [
            {
                let mut c = Command::new("/usr/lib/jvm/java-17-openjdk-amd64/bin/java");
                c.arg("-cp")
                    .arg(&setup.classes)
                    .args(["JavacLoop", "3600", "0"]);
                c
            },
            {
                let mut c = Command::new("/usr/bin/node");
                c.arg(root().join("tests/workloads/node/typescript.js"))
                    .arg(root().join("target/peers/ts"))
                    .arg("3600");
                c
            },
            loop_of(format!(
                "{} -l {} >/dev/null 2>&1",
                gofmt.display(),
                goroot_src.display()
            )),
            loop_of(format!(
                "/usr/bin/python3 -m tokenize {} >/dev/null",
                setup.tokenize_input.display()
            )),
            loop_of(format!(
                "xz -3 -T1 -c {} >/dev/null",
                setup.xz_input.display()
            )),
            {
                let mut c = Command::new("sh");
                c.arg(root().join("tests/workloads/build_loop.sh"))
                    .arg(&setup.sources);
                c
            },
        ];
        let mut children = Vec::new();
        for (cmd, program) in commands.iter_mut().zip(&PROGRAMS) {
            let child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .with_context(|| format!("starting {}", program.name))?;
            children.push(child);
        }
        Ok(Self { children })
    }

    /// Which program a thread name belongs to: the long-lived runtimes' threads as `/proc` lists
    /// them now, the loops' commands by name.
    fn programs_by_comm(&self) -> HashMap<String, usize> {
        let mut by_comm = HashMap::new();
        for (slot, program) in PROGRAMS.iter().enumerate() {
            for comm in program.comms {
                insert_comm(&mut by_comm, comm, slot);
            }
        }
        for slot in [JAVAC, TSC] {
            let tasks = format!("/proc/{}/task", self.children[slot].id());
            for task in std::fs::read_dir(tasks).into_iter().flatten().flatten() {
                if let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) {
                    insert_comm(&mut by_comm, comm.trim_end(), slot);
                }
            }
        }
        by_comm
    }

    fn pids(&self) -> [u32; 2] {
        [self.children[JAVAC].id(), self.children[TSC].id()]
    }
}

/// Maps thread name `comm` to program `slot`, as perf prints it and as sonde's folded lines do
/// (spaces and semicolons as underscores: `C2 CompilerThre` is `C2_CompilerThre`).
fn insert_comm(by_comm: &mut HashMap<String, usize>, comm: &str, slot: usize) {
    by_comm.insert(comm.to_owned(), slot);
    by_comm.insert(comm.replace([';', ' '], "_"), slot);
}

impl Drop for Node {
    fn drop(&mut self) {
        for child in &mut self.children {
            // SAFETY: signals the process group this bench created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
        }
    }
}

fn measure(
    kind: Kind,
    sonde: &Path,
    setup: &Setup,
    stem: &Path,
    seconds: u64,
) -> anyhow::Result<Run> {
    let path = |ext: &str| stem.with_extension(ext);
    let node = Node::start(setup)?;
    std::thread::sleep(WARM_UP);
    let mut cmd = kind.command(sonde, stem, seconds);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(path("stderr"))?)
        .spawn()
        .with_context(|| format!("starting {}", kind.name()))?;
    std::thread::sleep(Duration::from_secs(seconds) / 2);
    let by_comm = node.programs_by_comm();
    let pids = node.pids();
    let usage = wait_usage(child)?;
    drop(node);
    ensure!(
        usage.status.success(),
        "{} failed ({}); see {}",
        kind.name(),
        usage.status,
        path("stderr").display()
    );
    let (tallies, costs) = match kind {
        Kind::Sonde => {
            let folded = std::fs::read_to_string(path("folded"))
                .with_context(|| format!("reading {}", path("folded").display()))?;
            // The whole summary, for the walks' endings by reason behind the table's shares.
            std::fs::write(path("json"), &usage.stdout)?;
            let summary = sonde_summary(&usage.stdout);
            (from_folded(&folded, &by_comm), sample_costs(&summary))
        }
        Kind::PerfDwarf => {
            let script = Command::new("perf")
                .args(["script", "--no-inline", "-F", "pid,comm,ip,sym,dso", "-i"])
                .arg(path("data"))
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .context("starting perf script")?;
            let script = wait_usage(script)?;
            ensure!(script.status.success(), "perf script failed");
            let program_of = |pid: u32, comm: &str| {
                pids.iter()
                    .position(|p| *p == pid)
                    .map(|i| [JAVAC, TSC][i])
                    .or_else(|| by_comm.get(comm).copied())
            };
            (from_perf_script(&script.stdout, program_of), Vec::new())
        }
    };
    Ok(Run {
        kind,
        tallies,
        costs,
    })
}

/// sonde's per-sample BPF time by walk path, p50 and p90, ns.
fn sample_costs(summary: &[(String, String)]) -> Vec<(String, f64, f64)> {
    let mut costs = Vec::new();
    for (key, value) in summary {
        let Some(path) = key
            .strip_prefix("oncpu_sample_nanoseconds[")
            .and_then(|k| k.strip_suffix("/p50]"))
        else {
            continue;
        };
        let p90 = super::summary_number(summary, &format!("oncpu_sample_nanoseconds[{path}/p90]"));
        if let (Ok(p50), Some(p90)) = (value.parse(), p90) {
            costs.push((path.to_owned(), p50, p90));
        }
    }
    costs
}

/// Tallies sonde's folded lines (`comm;root;...;leaf[;kernel frames] COUNT`) by program. Kernel
/// frames follow the user leaf; sonde's kernel frames are the ones after the last user frame, which
/// folded text does not mark, so a frame is taken as the kernel's from the first kernel entry on.
fn from_folded(text: &str, by_comm: &HashMap<String, usize>) -> Vec<Tally> {
    let mut tallies = vec![Tally::default(); PROGRAMS.len()];
    for line in text.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        let mut names = stack.split(';');
        let Some(&slot) = names.next().and_then(|comm| by_comm.get(comm)) else {
            continue;
        };
        let mut kernel = false;
        let frames: Vec<Frame> = names
            .map(|name| {
                kernel |= is_kernel_entry(name);
                Frame { name, kernel }
            })
            .collect();
        tallies[slot].add(judge(&frames, PROGRAMS[slot].language), count);
    }
    tallies
}

/// The first kernel frame under a user stack: the syscall entry, an interrupt's or an exception's.
fn is_kernel_entry(name: &str) -> bool {
    name.starts_with("entry_SYSCALL")
        || name.starts_with("asm_")
        || name.starts_with("el0_")
        || name == "ret_from_fork"
        || name.starts_with("irq_")
}

/// Tallies `perf script -F pid,comm,ip,sym,dso`: a header line `COMM PID`, then one tab-indented
/// `ip sym (dso)` line per frame, leaf first.
fn from_perf_script(text: &str, program_of: impl Fn(u32, &str) -> Option<usize>) -> Vec<Tally> {
    let mut tallies = vec![Tally::default(); PROGRAMS.len()];
    let mut current: Option<(usize, Vec<(String, bool)>)> = None;
    let mut finish = |current: &mut Option<(usize, Vec<(String, bool)>)>| {
        if let Some((slot, mut leaf_first)) = current.take() {
            leaf_first.reverse();
            let frames: Vec<Frame> = leaf_first
                .iter()
                .map(|(name, kernel)| Frame {
                    name,
                    kernel: *kernel,
                })
                .collect();
            tallies[slot].add(judge(&frames, PROGRAMS[slot].language), 1);
        }
    };
    for line in text.lines() {
        if line.starts_with('\t') {
            if let Some((_, frames)) = &mut current {
                let frame = line.trim();
                let (_ip, rest) = frame.split_once(' ').unwrap_or((frame, ""));
                let (sym, dso) = rest.rsplit_once(" (").unwrap_or((rest, ""));
                let dso = dso.trim_end_matches(')');
                // A frame in a file without a symbol is named by its file, as sonde names it.
                let name = match (sym, dso.rsplit_once('/')) {
                    ("[unknown]", Some((_, file))) => format!("{file}+0x{_ip}"),
                    _ => sym.to_owned(),
                };
                frames.push((name, dso.starts_with("[kernel")));
            }
        } else if line.trim().is_empty() {
            finish(&mut current);
        } else {
            finish(&mut current);
            // `COMM PID`: perf prints its fields in its own order; a thread name may hold spaces.
            let header = line.trim();
            let (comm, pid) = header
                .rsplit_once(char::is_whitespace)
                .unwrap_or(("", header));
            current = pid
                .parse()
                .ok()
                .and_then(|pid| program_of(pid, comm.trim()))
                .map(|slot| (slot, Vec::new()));
        }
    }
    finish(&mut current);
    tallies
}

fn print(runs: &[Run], options: &Options) {
    println!(
        "\n## Busy node: six programs at once, {} s host-wide at 99 Hz, median of {} round(s)\n",
        options.seconds, options.rounds
    );
    println!(
        "Complete and named: reaches a thread root, no unnamed frame, the language's frames where the stack enters it; of the samples with a user stack (exit and exec apart). perf names Java and JavaScript only through perf maps, which these runs (no flags) do not write.\n"
    );
    println!(
        "| program | profiler | samples | complete and named | not rooted | unnamed frame | language frames missing | exit/exec |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut means: Vec<(Kind, Vec<f64>)> = Vec::new();
    for (slot, program) in PROGRAMS.iter().enumerate() {
        for kind in Kind::ALL {
            let of_kind: Vec<Tally> = runs
                .iter()
                .filter(|r| r.kind == kind)
                .map(|r| r.tallies[slot])
                .collect();
            let pick = |f: &dyn Fn(Tally) -> Option<f64>| {
                median(of_kind.iter().filter_map(|t| f(*t)).collect())
            };
            let complete = pick(&|t| t.percent(t.complete));
            if let Some(c) = complete {
                match means.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, v)) => v.push(c),
                    None => means.push((kind, vec![c])),
                }
            }
            let cell = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}%"));
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                program.name,
                kind.name(),
                median(of_kind.iter().map(|t| t.samples as f64).collect()).unwrap_or(0.0),
                cell(complete),
                cell(pick(&|t| t.percent(t.unrooted))),
                cell(pick(&|t| t.percent(t.unnamed))),
                cell(pick(&|t| t.percent(t.language_missing))),
                median(of_kind.iter().map(|t| t.stackless as f64).collect()).unwrap_or(0.0),
            );
        }
    }
    println!();
    for (kind, shares) in &means {
        let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
        let least = shares.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "- {}: mean complete and named {mean:.1}%, least {least:.1}% (target: each >= 97%, mean >= 98%)",
            kind.name()
        );
    }
    let sonde: Vec<&Run> = runs.iter().filter(|r| r.kind == Kind::Sonde).collect();
    if let Some(first) = sonde.first() {
        println!(
            "\nsonde's BPF time per on-CPU sample on the busy node (its own timing, median over rounds):\n"
        );
        println!("| walk path | p50 ns | p90 ns |");
        println!("|---|---|---|");
        for (path, _, _) in &first.costs {
            let of = |i: usize| {
                median(
                    sonde
                        .iter()
                        .filter_map(|r| r.costs.iter().find(|(p, _, _)| p == path))
                        .map(|c| if i == 0 { c.1 } else { c.2 })
                        .collect(),
                )
                .unwrap_or(f64::NAN)
            };
            println!("| {path} | {:.0} | {:.0} |", of(0), of(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_lines_are_tallied_by_program_with_kernel_frames_after_the_user_leaf() {
        let mut by_comm = HashMap::new();
        insert_comm(&mut by_comm, "xz", 4);
        insert_comm(&mut by_comm, "C2 CompilerThre", JAVAC);
        let text = "xz;_start;main;lzma_code 10\n\
                    xz;lzma_code;0x1b0b500000003 2\n\
                    xz;0x7f0000001000;entry_SYSCALL_64_after_hwframe;do_syscall_64;do_exit 1\n\
                    C2_CompilerThre;start_thread;C2Compiler::compile_method 5\n\
                    other;_start;main 100\n";
        let tallies = from_folded(text, &by_comm);
        let xz = tallies[4];
        assert_eq!(
            (xz.samples, xz.complete, xz.stackless, xz.unnamed),
            (13, 10, 1, 2)
        );
        let c2 = tallies[JAVAC];
        assert_eq!((c2.samples, c2.complete), (5, 5));
    }

    #[test]
    fn perf_script_samples_are_tallied_by_pid_then_comm() {
        let text = "C2 CompilerThre  4242 \n\
                    \t    7f00 [unknown] ([unknown])\n\
                    \t    7f10 JavaCalls::call_helper (/usr/lib/jvm/lib/server/libjvm.so)\n\
                    \t    7f20 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\
                    \n\
                    xz  777 \n\
                    \tffffffff81000000 asm_sysvec_apic_timer_interrupt ([kernel.kallsyms])\n\
                    \t    15a20 [unknown] (/usr/lib/x86_64-linux-gnu/liblzma.so.5)\n\
                    \t    5600 lzma_code (/usr/lib/x86_64-linux-gnu/liblzma.so.5)\n\
                    \t    5610 __libc_start_main@@GLIBC_2.34 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\
                    \n";
        let tallies = from_perf_script(text, |pid, comm| match (pid, comm) {
            (4242, _) => Some(JAVAC),
            (_, "xz") => Some(4),
            _ => None,
        });
        let java = tallies[JAVAC];
        assert_eq!(
            (
                java.samples,
                java.complete,
                java.unnamed,
                java.language_missing
            ),
            (1, 0, 1, 1)
        );
        assert_eq!((tallies[4].samples, tallies[4].complete), (1, 1));
    }
}
