//! Language runtimes whose frames sonde names beyond what native symbols give: one home, one seam.
//!
//! A runtime is one [`seam::Registration`] (its `register.rs`), listed in [`registry`], the one place
//! that names them all; the rest of the agent reaches runtimes only through the registry. It plugs
//! into the data flow at up to four points, always the same ones, and reports its own figures
//! (`<lang>/figures.rs`, [`figures`]):
//! 1. **detect at capture**: each runtime's `capture.rs` implements [`seam::RuntimeCapture`] (with
//!    what its `elf.rs` read of each binary as it was first opened): when a process is captured, find
//!    the runtime in its mappings (`python::detect`: the interpreter and its structure offsets;
//!    `hotspot::detect`: the JVM and its own VMStructs; `v8::detect`: `node` and its `v8dbg_*`
//!    constants, from the ELF file), kept in the process's `ProcessInfo` as an opaque instance;
//! 2. **publish to the kernel**: per-process settings its kernel side needs, through one
//!    [`publish::Publisher`] per runtime map: `PY_PROCS` for agent-ebpf `unwind/python.rs`, which
//!    walks after the native frames; `GO_PROCS` for `go_labels.rs`, which copies the sampled
//!    goroutine's pprof labels (`go::labels` finds them per Go version); `HS_PROCS` for the HotSpot
//!    walker and `V8_PROCS` for the V8 walker, which step Java and JavaScript frames in place among
//!    the native ones;
//! 3. **name** (`<lang>/naming.rs`, [`seam::RuntimeNames`]): turn what the kernel stored into
//!    symbols: frame words the walker appended
//!    (`python::PythonNames`) or stored in place as runtime frames (`sonde_abi::runtime_frame`:
//!    `hotspot::JavaNames`, `v8::V8Names`, routed by kind: one `frame_names::FrameNames` cache over
//!    what each runtime reads of a process), or native code the runtime
//!    describes better than ELF symbols (`go::GoNames` reads `.gopclntab`, stripped binaries
//!    included);
//! 4. **merge** the runtime's frames into the native stack ([`merge`], for the interpreters whose
//!    walker appends them; in-place frames need none).
//!
//! What they read of a process's memory goes through `memory::ProcessMemory`.
//!
//! Which runtimes are on is one setting, [`Runtimes`] (`--runtimes`); every step above asks it.

use std::{fmt, str::FromStr};

pub(crate) use counts::{
    FrameTally, Outcome, ProcessCounts, RuntimeCounts, RuntimeStats, TableStats,
};

pub(crate) mod appended;
pub(crate) mod counts;
pub(crate) mod figures;
pub(crate) mod frame_names;
pub(crate) mod go;
pub(crate) mod hotspot;
pub(crate) mod memory;
pub(crate) mod merge;
pub(crate) mod php;
pub(crate) mod publish;
pub(crate) mod python;
pub(crate) mod refusals;
pub(crate) mod registry;
pub(crate) mod retry;
pub(crate) mod ruby;
pub(crate) mod seam;
pub(crate) mod stack_words;
pub(crate) mod tls;
pub(crate) mod trace_context;
pub(crate) mod v8;

/// A runtime sonde knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// CPython 3.9 to 3.13: Python frames walked in the kernel.
    Python,
    /// Go 1.16 and later: names, files, lines and inlined calls from `.gopclntab`.
    Go,
    /// OpenJDK's HotSpot VM (11, 17, 21): Java frames walked in the kernel from the VM's own
    /// structure offsets (`gHotSpotVMStructs`).
    Java,
    /// Node.js (V8 10 to 12: Node 18, 20, 22): JavaScript frames walked in the kernel from V8's
    /// postmortem constants (`v8dbg_*`).
    Node,
    /// CRuby 3.0 to 3.4: Ruby frames walked in the kernel from the thread's execution context.
    Ruby,
    /// PHP 7.4 to 8.5 (non-thread-safe builds): PHP frames walked in the kernel from the executor's
    /// globals.
    Php,
    /// Not a language: the OpenTelemetry thread context (OTEP 4947) a tracer publishes, read at each
    /// sample as the trace and span the thread runs in (`trace_id`, `span_id` labels).
    TraceContext,
}

impl Runtime {
    /// Every runtime, in the order `--runtimes` lists them.
    pub const ALL: [Runtime; 7] = [
        Runtime::Python,
        Runtime::Go,
        Runtime::Java,
        Runtime::Node,
        Runtime::Ruby,
        Runtime::Php,
        Runtime::TraceContext,
    ];

    /// The name used by `--runtimes`.
    pub const fn name(self) -> &'static str {
        match self {
            Runtime::Python => "python",
            Runtime::Go => "go",
            Runtime::Java => "java",
            Runtime::Node => "node",
            Runtime::Ruby => "ruby",
            Runtime::Php => "php",
            Runtime::TraceContext => trace_context::NAME,
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The set of runtimes that are on (`--runtimes python,go`, `all` or `none`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Runtimes(u8);

impl Runtimes {
    /// Every runtime sonde supports (the default).
    pub fn all() -> Self {
        Self(Runtime::ALL.iter().fold(0, |bits, r| bits | r.bit()))
    }

    /// No runtime: native frames only.
    pub fn none() -> Self {
        Self(0)
    }

    /// Whether `runtime` is on.
    pub fn has(self, runtime: Runtime) -> bool {
        self.0 & runtime.bit() != 0
    }

    /// This set with `runtime` on or off.
    pub fn with(self, runtime: Runtime, on: bool) -> Self {
        match on {
            true => Self(self.0 | runtime.bit()),
            false => Self(self.0 & !runtime.bit()),
        }
    }
}

impl Default for Runtimes {
    fn default() -> Self {
        Self::all()
    }
}

impl fmt::Debug for Runtimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Runtimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<&str> = Runtime::ALL
            .iter()
            .filter(|r| self.has(**r))
            .map(|r| r.name())
            .collect();
        match on.is_empty() {
            true => f.write_str("none"),
            false => f.write_str(&on.join(",")),
        }
    }
}

impl FromStr for Runtimes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "all" => return Ok(Self::all()),
            "none" | "" => return Ok(Self::none()),
            _ => {}
        }
        s.split(',').map(str::trim).try_fold(Self::none(), |set, name| {
            let runtime = Runtime::ALL
                .into_iter()
                .find(|r| r.name() == name)
                .ok_or_else(|| {
                    let known: Vec<&str> = Runtime::ALL.iter().map(|r| r.name()).collect();
                    format!(
                        "unknown runtime `{name}`: use a comma-separated list of {}, or `all` or `none`",
                        known.join(", ")
                    )
                })?;
            Ok(set.with(runtime, true))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_reads_lists_all_and_none_and_names_what_it_does_not_know() {
        let python_only: Runtimes = "python".parse().unwrap();
        assert!(python_only.has(Runtime::Python) && !python_only.has(Runtime::Go));
        let seven: Runtimes = " go , python,java,node,ruby,php,trace-context "
            .parse()
            .unwrap();
        assert_eq!(seven, Runtimes::all());
        assert_eq!("all".parse::<Runtimes>().unwrap(), Runtimes::all());
        assert_eq!("none".parse::<Runtimes>().unwrap(), Runtimes::none());
        assert_eq!(
            Runtimes::all().to_string(),
            "python,go,java,node,ruby,php,trace-context"
        );
        assert_eq!(Runtimes::none().to_string(), "none");
        let err = "python,jvm".parse::<Runtimes>().unwrap_err();
        assert!(
            err.contains("`jvm`")
                && err.contains("python, go, java, node, ruby, php, trace-context"),
            "{err}"
        );
        assert!(
            !Runtimes::all()
                .with(Runtime::Python, false)
                .has(Runtime::Python)
        );
    }
}
