//! The symbolized, in-memory profile: what the sampler and symbolizer produce and every encoder consumes.

use std::sync::Arc;

/// One loaded object (executable, shared library, vdso or the kernel) as it was mapped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Module {
    /// Path of the object as the process mapped it, or a pseudo name like `[kernel.kallsyms]`.
    pub path: String,
    /// GNU build id, lowercase hex, when the object has one.
    pub build_id: Option<String>,
    /// First mapped address.
    pub start: u64,
    /// End of the mapping (exclusive).
    pub limit: u64,
    /// File offset of `start`.
    pub file_offset: u64,
}

/// One function at one source position. Several form an inline chain.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Symbol {
    /// Demangled function name.
    pub name: String,
    /// Source file, when debug info has it.
    pub file: Option<String>,
    /// Source line, when debug info has it.
    pub line: Option<u32>,
}

/// Where a frame came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A user-space instruction address.
    User,
    /// A kernel instruction address.
    Kernel,
    /// Not an address: a marker standing for a stack that could not be collected (named in `symbols`).
    Marker,
}

/// One stack frame, symbolized or not. Unsymbolized frames keep their module and address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Address as sampled (return address for non-leaf frames).
    pub address: u64,
    /// User, kernel or marker.
    pub kind: FrameKind,
    /// `address` is a return address, named as the call before it. The same address sampled as an
    /// exact pc (a leaf, or the instruction a signal interrupted) can be another line or function,
    /// so encoders keep the two apart: one location per address would name both as whichever came
    /// first.
    pub return_address: bool,
    /// The mapping the address falls in, when known.
    pub module: Option<Arc<Module>>,
    /// Inline chain, innermost first and the containing function last; empty when unsymbolized.
    pub symbols: Arc<[Symbol]>,
}

impl Frame {
    /// The function the address is in (outermost of the inline chain), if symbolized.
    pub fn function(&self) -> Option<&str> {
        self.symbols.last().map(|s| s.name.as_str())
    }

    /// A readable name for any frame: the function, else `module+0xoffset`, else the address.
    pub fn display_name(&self) -> String {
        if let Some(name) = self.function() {
            return name.to_owned();
        }
        match &self.module {
            Some(m) => {
                let base = m.path.rsplit('/').next().unwrap_or(&m.path);
                format!(
                    "{base}+{:#x}",
                    self.address
                        .wrapping_sub(m.start)
                        .wrapping_add(m.file_offset)
                )
            }
            None => format!("{:#x}", self.address),
        }
    }
}

/// One aggregated stack of one process with its values (one per sample type of the profile).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackSample {
    /// Process id.
    pub pid: u32,
    /// Thread id (samples are aggregated per thread in the kernel).
    pub tid: u32,
    /// Thread name (the thread's `comm` when it was sampled).
    pub comm: String,
    /// Frames, leaf first: kernel frames, then user frames.
    pub frames: Vec<Frame>,
    /// Values in the order of the profile's sample types.
    pub values: Vec<i64>,
    /// The user stack did not reach a thread entry point (frame-pointer walk stopped early or hit the depth cap).
    pub truncated: bool,
    /// Labels the process set on the sampled code (Go's pprof labels), key and value.
    pub labels: Labels,
}

/// Labels of a sample, shared by the samples of one label set.
pub type Labels = std::sync::Arc<[(String, String)]>;

/// Which measurement a profile carries; `cpu` or `offcpu` in the data directory's index.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum ProfileKind {
    /// On-CPU samples from the cpu-clock event.
    #[serde(rename = "cpu")]
    Cpu,
    /// Time blocked off-CPU from `sched_switch`.
    #[serde(rename = "offcpu")]
    OffCpu,
}

impl ProfileKind {
    /// `(type, unit)` of each value in [`StackSample::values`].
    pub fn sample_types(self) -> &'static [(&'static str, &'static str)] {
        match self {
            ProfileKind::Cpu => &[("samples", "count"), ("cpu", "nanoseconds")],
            // Time and events are estimates (sampled episodes weighted by their inverse probability);
            // `tracked` counts the episodes behind them, what their precision depends on.
            ProfileKind::OffCpu => &[
                ("offcpu", "nanoseconds"),
                ("events", "count"),
                ("tracked", "count"),
            ],
        }
    }

    /// `(type, unit)` of the profile's period.
    pub fn period_type(self) -> (&'static str, &'static str) {
        match self {
            ProfileKind::Cpu => ("cpu", "nanoseconds"),
            ProfileKind::OffCpu => ("offcpu", "nanoseconds"),
        }
    }

    /// Name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            ProfileKind::Cpu => "cpu",
            ProfileKind::OffCpu => "offcpu",
        }
    }
}

/// A window's worth of symbolized stacks of one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// What the values measure.
    pub kind: ProfileKind,
    /// Start of the capture, nanoseconds since the Unix epoch.
    pub time_nanos: i64,
    /// Length of the capture.
    pub duration_nanos: i64,
    /// Nanoseconds per sample for cpu profiles (1e9 / frequency), 1 for off-CPU.
    pub period: i64,
    /// The stacks.
    pub samples: Vec<StackSample>,
    /// How the window was taken, as `key=value` notes (off-CPU sampling probabilities); written into
    /// pprof comments.
    pub notes: Vec<(String, String)>,
}
