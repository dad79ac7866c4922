//! The C workloads of the symbolization section, each built once with DWARF and without frame
//! pointers, then copied stripped (`strip --strip-all`) with its debug info split into the directory
//! the local debuginfod server indexes: the stripped copy's names are reachable only through it.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{Context as _, bail};

use crate::{bench::compile_with, util::root};

/// Code generation of every build: the distribution default (no frame pointers) with debug info.
const FLAGS: [&str; 3] = ["-O2", "-g", "-fomit-frame-pointer"];

/// Longer than any recording: the workloads are killed once sonde has exited (it symbolizes at exit
/// and needs them alive until then).
const FOREVER_SECONDS: &str = "100000";
const FOREVER_ITERATIONS: &str = "1000000000000000";

/// Name (the source in tests/workloads, the binary and its thread name), what it shows, arguments.
const SPECS: [(&str, &str, &[&str]); 3] = [
    (
        "cpu_split",
        "three named burners under main",
        &[FOREVER_SECONDS],
    ),
    (
        "busy_threads",
        "two threads in a static function",
        &[FOREVER_ITERATIONS],
    ),
    (
        "recursion",
        "100 recursive frames per stack",
        &[FOREVER_SECONDS, "100"],
    ),
];

/// One workload, both builds.
pub(in crate::bench) struct Workload {
    pub(in crate::bench) name: &'static str,
    pub(in crate::bench) what: &'static str,
    pub(in crate::bench) unstripped: PathBuf,
    pub(in crate::bench) stripped: PathBuf,
    /// GNU build id, hex: what sonde asks debuginfod for.
    pub(in crate::bench) build_id: String,
    args: Vec<String>,
    /// Functions the binary defines (nm on the unstripped build): a named frame with one of these names
    /// is the workload's own, as opposed to libc's, ld.so's or the kernel's.
    functions: HashSet<String>,
}

/// Frames of the workload binary itself, weighted by samples.
#[derive(Clone, Copy, Default)]
pub(in crate::bench) struct OwnFrames {
    pub(in crate::bench) named: u64,
    pub(in crate::bench) total: u64,
}

impl OwnFrames {
    pub(in crate::bench) fn percent(self) -> Option<f64> {
        (self.total > 0).then(|| 100.0 * self.named as f64 / self.total as f64)
    }
}

/// Builds every workload into `dir/unstripped` and `dir/stripped` and its debug file into `debug_dir`
/// (the files the debuginfod server serves).
pub(in crate::bench) fn prepare(dir: &Path, debug_dir: &Path) -> anyhow::Result<Vec<Workload>> {
    for tool in ["gcc", "strip", "objcopy", "readelf", "nm", "debuginfod"] {
        if !crate::util::succeeds("sh", &["-c", &format!("command -v {tool}")]) {
            bail!("{tool} is missing: apt-get install gcc binutils debuginfod");
        }
    }
    // Same file name in both directories, so an unnamed frame reads `NAME+0x…` either way.
    let (unstripped_dir, stripped_dir) = (dir.join("unstripped"), dir.join("stripped"));
    for d in [unstripped_dir.as_path(), stripped_dir.as_path(), debug_dir] {
        std::fs::create_dir_all(d)?;
    }
    SPECS
        .iter()
        .map(|&(name, what, args)| {
            let src = root().join(format!("tests/workloads/{name}.c"));
            let unstripped = compile_with(&src, &unstripped_dir.join(name), &FLAGS)?;
            let stripped = stripped_dir.join(name);
            std::fs::copy(&unstripped, &stripped)
                .with_context(|| format!("copying {}", unstripped.display()))?;
            crate::util::run(Command::new("strip").arg("--strip-all").arg(&stripped))?;
            crate::util::run(
                Command::new("objcopy")
                    .arg("--only-keep-debug")
                    .arg(&unstripped)
                    .arg(debug_dir.join(format!("{name}.debug"))),
            )?;
            Ok(Workload {
                name,
                what,
                build_id: build_id(&stripped)?,
                functions: functions(&unstripped)?,
                unstripped,
                stripped,
                args: args.iter().map(|&a| a.to_owned()).collect(),
            })
        })
        .collect()
}

impl Workload {
    /// Starts the stripped or the unstripped build.
    pub(in crate::bench) fn start(&self, stripped: bool) -> anyhow::Result<Running> {
        let program = if stripped {
            &self.stripped
        } else {
            &self.unstripped
        };
        let child = Command::new(program)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        Ok(Running(child))
    }

    /// The workload's own frames in sonde's folded stacks (`comm;frame;…;frame count` lines): named
    /// when the name is a function of the binary, unnamed when it reads `NAME+0x…`.
    pub(in crate::bench) fn own_frames(&self, folded: &str) -> OwnFrames {
        let unnamed = format!("{}+0x", self.name);
        let mut own = OwnFrames::default();
        for line in folded.lines() {
            let Some((stack, count)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(count) = count.parse::<u64>() else {
                continue;
            };
            // The first field is the thread name, not a frame.
            for frame in stack.split(';').skip(1) {
                if frame.starts_with(&unnamed) {
                    own.total += count;
                } else if self.functions.contains(frame) {
                    own.total += count;
                    own.named += count;
                }
            }
        }
        own
    }
}

/// A started workload, killed and reaped when dropped (also when the recording fails).
pub(in crate::bench) struct Running(Child);

impl Running {
    pub(in crate::bench) fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Whether it already exited (its share of the window is then missing).
    pub(in crate::bench) fn exited(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// stdout of a command that must succeed.
fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The GNU build id of an ELF file, hex, from `readelf -n`.
fn build_id(binary: &Path) -> anyhow::Result<String> {
    let notes = output(Command::new("readelf").arg("-n").arg(binary))?;
    notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID:"))
        .map(|id| id.trim().to_owned())
        .with_context(|| format!("{} has no build id", binary.display()))
}

/// Names of the code symbols an unstripped binary defines (`nm --defined-only`, types t/T/w/W).
fn functions(binary: &Path) -> anyhow::Result<HashSet<String>> {
    let symbols = output(Command::new("nm").arg("--defined-only").arg(binary))?;
    Ok(symbols
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let (_, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            matches!(kind, "t" | "T" | "w" | "W").then(|| name.to_owned())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_frames_count_named_functions_and_unnamed_offsets_of_the_binary_only() {
        let w = Workload {
            name: "cpu_split",
            what: "",
            unstripped: PathBuf::new(),
            stripped: PathBuf::new(),
            build_id: String::new(),
            args: Vec::new(),
            functions: ["main", "burn_fifty", "_start"].map(str::to_owned).into(),
        };
        let folded = "cpu_split;_start;__libc_start_call_main;main;burn_fifty 3\n\
                      cpu_split;cpu_split+0x1171;__libc_start_call_main;cpu_split+0x10e1;clock_gettime 2\n";
        let own = w.own_frames(folded);
        assert_eq!((own.named, own.total), (9, 13));
    }
}
