//! What the running kernel offers sonde's kernel programs, probed once at start into one value
//! ([`KernelFeatures`]): the loader chooses what to load from it, the start log and the reports show
//! it. Nothing else probes the kernel or compares its version.
//!
//! Features are probed where the kernel can be asked (a helper by loading a two-instruction program
//! that calls it, as libbpf and aya probe; a map type by creating one), not inferred from the version
//! number, since distribution kernels backport (RHEL 9's 5.14 has `bpf_loop`). The one exception is
//! allocation in perf_event programs, which no probe short of a full program shows: it is taken from
//! the version (Linux 6.1, `bpf_mem_alloc`), as is the floor itself (Linux 5.10, whose verifier first
//! takes BPF-to-BPF calls in programs that tail calls reach).
//!
//! Two builds of the programs are embedded ([`Programs`]): the full one wherever the kernel has
//! every feature it uses, the legacy one (Linux 5.10 to 6.0, x86_64) elsewhere.

use std::fmt;

use aya::{
    maps::MapType,
    programs::ProgramType,
    sys::{BpfHelper, is_helper_supported, is_map_supported},
};

/// The oldest Linux sonde's programs load on, as users know it: the legacy programs' floor where
/// this architecture has them, the full programs' elsewhere.
pub const FLOOR: &str = if crate::platform::arch::LEGACY_PROGRAMS {
    "5.10"
} else {
    FULL_FLOOR
};

/// Test hook: loads the legacy programs whatever the kernel offers.
pub const LEGACY_PROGRAMS_ENV: &str = "SONDE_TEST_LEGACY_PROGRAMS";

/// The first upstream Linux with every feature of the full programs.
const FULL_FLOOR: &str = "6.1";

/// The floor as a version number.
const FLOOR_VERSION: (u32, u32, u32) = (5, 10, 0);

/// Which build of the kernel programs a kernel loads (`agent/build.rs` builds both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Programs {
    /// Stacks walked in `bpf_loop`s, maps allocated as they fill, the mappings of new processes
    /// recorded by the kernel.
    Full,
    /// For kernels without one of [`Feature::FULL`]: stacks walked in bounded loops of global
    /// steps, preallocated maps at smaller sizes, new processes walked by frame pointers until
    /// userspace reads their mappings.
    Legacy,
}

impl Programs {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Programs::Full => "full",
            Programs::Legacy => "legacy",
        }
    }
}

/// A kernel feature sonde's programs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Ring buffer maps (`PROC_EVENTS`, the kernel namer's output).
    RingBuf,
    /// `bpf_loop`: every stack walk is a loop of frame steps.
    Loop,
    /// `bpf_task_pt_regs`: a switched-out task's user registers.
    TaskPtRegs,
    /// `bpf_find_vma`: the mappings of processes younger than their first capture.
    FindVma,
    /// Hash maps allocated from perf_event programs (not preallocated: stacks and aggregates).
    AllocInPerfEvent,
    /// `bpf_snprintf`'s `%ps`: kernel frames named by the kernel itself.
    Snprintf,
    /// The kernel's own BTF (`/sys/kernel/btf/vmlinux`): task and VMA field offsets.
    VmlinuxBtf,
}

impl Feature {
    /// Every feature, in report order.
    pub const ALL: [Feature; 7] = [
        Feature::RingBuf,
        Feature::Loop,
        Feature::TaskPtRegs,
        Feature::FindVma,
        Feature::AllocInPerfEvent,
        Feature::Snprintf,
        Feature::VmlinuxBtf,
    ];

    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Feature::RingBuf => "ringbuf",
            Feature::Loop => "bpf_loop",
            Feature::TaskPtRegs => "bpf_task_pt_regs",
            Feature::FindVma => "bpf_find_vma",
            Feature::AllocInPerfEvent => "alloc_in_perf_event",
            Feature::Snprintf => "bpf_snprintf",
            Feature::VmlinuxBtf => "vmlinux_btf",
        }
    }

    /// The first upstream Linux with it.
    pub fn since(self) -> &'static str {
        match self {
            Feature::RingBuf => "5.8",
            Feature::Loop | Feature::FindVma => "5.17",
            Feature::TaskPtRegs => "5.15",
            Feature::AllocInPerfEvent => "6.1",
            Feature::Snprintf => "5.13",
            Feature::VmlinuxBtf => "5.4 with CONFIG_DEBUG_INFO_BTF",
        }
    }

    /// The features the full programs need; without one, the legacy programs load.
    pub const FULL: [Feature; 4] = [
        Feature::Loop,
        Feature::TaskPtRegs,
        Feature::FindVma,
        Feature::AllocInPerfEvent,
    ];

    /// What the user sees without it; None when sonde cannot run without it.
    pub fn without(self) -> Option<&'static str> {
        match self {
            Feature::RingBuf => None,
            Feature::Loop => Some(
                "the legacy programs load: each frame step is a global function called from a bounded loop, and finds its memory with two map lookups more",
            ),
            Feature::TaskPtRegs => Some(
                "the legacy programs load: a switched-out thread's user registers are found at the top of its kernel stack (task_struct.stack from the kernel's BTF; without BTF, off-CPU stacks hold kernel frames only)",
            ),
            Feature::FindVma => Some(
                "the legacy programs load: a process is walked by frame pointers until sonde has read its mappings (a few ms after its first sample), so processes living less than that have frame-pointer stacks",
            ),
            Feature::AllocInPerfEvent => Some(
                "the legacy programs load: stack and aggregation maps are preallocated, at a quarter of the default sizes (about 30 MiB of kernel memory)",
            ),
            Feature::Snprintf => Some(
                "kernel frames are named from /proc/kallsyms (slower at the first window, needs CAP_SYSLOG)",
            ),
            Feature::VmlinuxBtf => Some(
                "CPython 3.9/3.10 threads and the mappings of processes younger than their first capture are not recognised",
            ),
        }
    }
}

/// A kernel release as `uname -r` gives it, and its version numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// `uname -r`.
    pub name: String,
    /// Major, minor, patch (0 where absent).
    pub version: (u32, u32, u32),
}

impl Release {
    /// The running kernel's.
    fn running() -> Self {
        // SAFETY: `uname` fills the zeroed struct it is given.
        let mut buf: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `buf` is a valid utsname.
        let name = match unsafe { libc::uname(&mut buf) } {
            0 => {
                // SAFETY: the kernel NUL-terminates `release`.
                unsafe { std::ffi::CStr::from_ptr(buf.release.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            }
            _ => String::from("unknown"),
        };
        Self::parse(&name)
    }

    fn parse(name: &str) -> Self {
        let mut numbers = name
            .split(|c: char| !c.is_ascii_digit())
            .map(|n| n.parse::<u32>().unwrap_or(0));
        let mut next = || numbers.next().unwrap_or(0);
        let version = (next(), next(), next());
        Self {
            name: name.to_owned(),
            version,
        }
    }
}

/// What the running kernel offers, probed once.
#[derive(Clone, Debug)]
pub struct KernelFeatures {
    /// The running kernel.
    pub release: Release,
    present: [bool; Feature::ALL.len()],
}

/// The kernel lacks a feature sonde cannot run without.
#[derive(Debug, thiserror::Error)]
#[error(
    "sonde needs Linux {FLOOR} or later: this kernel, {release}, lacks {missing}. Run sonde on a node with a newer kernel (Debian 11, Ubuntu 22.04, Amazon Linux 2, RHEL 9 and COS 97+ qualify on x86_64; Debian 12, Amazon Linux 2023 and Ubuntu 24.04 on arm64)"
)]
pub struct BelowFloor {
    /// `uname -r`.
    pub release: String,
    /// The missing features with the version that brought each.
    pub missing: String,
}

impl KernelFeatures {
    /// Probes the running kernel. Needs the privileges the loader checks first (CAP_BPF,
    /// CAP_PERFMON): a probe that cannot tell counts the feature as present, so the load itself
    /// says what failed rather than a guess.
    pub fn probe() -> Self {
        let release = Release::running();
        let helper = |helper: BpfHelper| {
            is_helper_supported(ProgramType::PerfEvent, helper).unwrap_or_else(|e| {
                tracing::debug!(?helper, "cannot probe the helper ({e}); taken as present");
                true
            })
        };
        let present = Feature::ALL.map(|feature| match feature {
            Feature::RingBuf => is_map_supported(MapType::RingBuf).unwrap_or(true),
            Feature::Loop => helper(BpfHelper::BPF_FUNC_loop),
            Feature::TaskPtRegs => helper(BpfHelper::BPF_FUNC_task_pt_regs),
            Feature::FindVma => helper(BpfHelper::BPF_FUNC_find_vma),
            Feature::Snprintf => helper(BpfHelper::BPF_FUNC_snprintf),
            Feature::AllocInPerfEvent => release.version >= (6, 1, 0),
            Feature::VmlinuxBtf => std::path::Path::new("/sys/kernel/btf/vmlinux").exists(),
        });
        Self { release, present }
    }

    /// Whether the kernel offers `feature`.
    pub fn has(&self, feature: Feature) -> bool {
        let index = Feature::ALL.iter().position(|f| *f == feature);
        index.is_some_and(|i| self.present[i])
    }

    /// Whether the kernel charges BPF maps against `RLIMIT_MEMLOCK` (before Linux 5.11, when memory
    /// cgroups took over): the loader then lifts the limit, as preallocated maps need it.
    pub fn charges_maps_to_memlock(&self) -> bool {
        self.release.version < (5, 11, 0)
    }

    /// Which build of the programs this kernel loads. The test hook `SONDE_TEST_LEGACY_PROGRAMS=1`
    /// picks the legacy ones on any kernel, so the host's tests run them too.
    pub fn programs(&self) -> Programs {
        let forced: Option<bool> = test_hook!(Some(
            std::env::var_os(LEGACY_PROGRAMS_ENV).is_some_and(|v| v == "1")
        ));
        match forced == Some(true) || !Feature::FULL.iter().all(|f| self.has(*f)) {
            true => Programs::Legacy,
            false => Programs::Full,
        }
    }

    /// An error naming what is missing when sonde cannot run on this kernel.
    pub fn check_floor(&self) -> Result<(), BelowFloor> {
        // Where the legacy programs are not built, the full programs' features are required too.
        let required = |f: &Feature| {
            f.without().is_none()
                || (!crate::platform::arch::LEGACY_PROGRAMS && Feature::FULL.contains(f))
        };
        let mut missing: Vec<String> = Feature::ALL
            .into_iter()
            .filter(|f| required(f) && !self.has(*f))
            .map(|f| format!("{} (Linux {})", f.name(), f.since()))
            .collect();
        if self.release.version < FLOOR_VERSION {
            missing.push(String::from(
                "BPF-to-BPF calls in programs reached by tail calls (Linux 5.10)",
            ));
        }
        match missing.is_empty() {
            true => Ok(()),
            false => Err(BelowFloor {
                release: self.release.name.clone(),
                missing: missing.join(", "),
            }),
        }
    }

    /// One series per feature (feature, kernel release), 1 when present: the `kernel_feature` figure.
    pub(crate) fn series(&self) -> Vec<(Vec<String>, f64)> {
        Feature::ALL
            .into_iter()
            .map(|f| {
                let labels = vec![f.name().to_owned(), self.release.name.clone()];
                (labels, f64::from(u8::from(self.has(f))))
            })
            .collect()
    }

    /// Says once at start what the kernel offers, and what each missing feature costs.
    pub fn log(&self) {
        tracing::info!(
            kernel = %self.release.name,
            features = %self,
            programs = self.programs().name(),
            "kernel features probed"
        );
        for feature in Feature::ALL.into_iter().filter(|f| !self.has(*f)) {
            if let Some(without) = feature.without() {
                tracing::warn!(
                    kernel = %self.release.name,
                    "this kernel lacks {} (Linux {}): {without}",
                    feature.name(),
                    feature.since()
                );
            }
        }
    }
}

impl fmt::Display for KernelFeatures {
    /// `bpf_loop=yes,bpf_find_vma=yes,...`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, feature) in Feature::ALL.into_iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let yes = if self.has(feature) { "yes" } else { "no" };
            write!(f, "{sep}{}={yes}", feature.name())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_as_distributions_name_them() {
        assert_eq!(Release::parse("6.1.0-50-cloud-amd64").version, (6, 1, 0));
        assert_eq!(Release::parse("5.10.0-32-cloud-amd64").version, (5, 10, 0));
        assert_eq!(Release::parse("6.18.44-fc-v1272").version, (6, 18, 44));
        assert_eq!(
            Release::parse("5.14.0-427.13.1.el9_4.x86_64").version,
            (5, 14, 0)
        );
        assert_eq!(Release::parse("6.12").version, (6, 12, 0));
    }

    #[test]
    fn a_kernel_without_a_required_feature_is_refused_by_name() {
        let without = |release: &str, gone: &[Feature]| {
            let mut features = KernelFeatures {
                release: Release::parse(release),
                present: [true; Feature::ALL.len()],
            };
            for f in gone {
                let i = Feature::ALL.iter().position(|a| a == f).unwrap();
                features.present[i] = false;
            }
            features
        };
        // Everything there: the full programs.
        let all = without("6.1.0-50-cloud-amd64", &[]);
        assert!(all.check_floor().is_ok());
        assert_eq!(all.programs(), Programs::Full);
        // Optional features missing: still runs, the full programs.
        let no_names = without("6.1.0-50-cloud-amd64", &[Feature::Snprintf]);
        assert!(no_names.check_floor().is_ok());
        assert_eq!(no_names.programs(), Programs::Full);
        // Debian 11's 5.10: the legacy programs, where this architecture has them.
        let bullseye = without("5.10.0-32-cloud-amd64", &Feature::FULL);
        assert_eq!(bullseye.programs(), Programs::Legacy);
        assert_eq!(
            bullseye.check_floor().is_ok(),
            crate::platform::arch::LEGACY_PROGRAMS,
            "{:?}",
            bullseye.check_floor()
        );
        // RHEL 9's 5.14 has `bpf_loop` but not `bpf_task_pt_regs`: the legacy programs still.
        let rhel = without("5.14.0-427.13.1.el9_4.x86_64", &[Feature::TaskPtRegs]);
        assert_eq!(rhel.programs(), Programs::Legacy);
        // Below the floor: no ring buffer, or a version before 5.10.
        let old = without("5.4.0-216-generic", &[Feature::RingBuf, Feature::Snprintf]);
        let err = old.check_floor().unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("sonde needs Linux {FLOOR} or later"))
                && err.contains("5.4.0-216-generic")
                && err.contains("ringbuf (Linux 5.8)")
                && err.contains("(Linux 5.10)")
                && !err.contains("bpf_snprintf"),
            "{err}"
        );
    }

    #[test]
    fn the_readme_lists_every_feature_as_declared_here() {
        let readme = include_str!("../../../README.md");
        let section = readme
            .split("## Kernels")
            .nth(1)
            .expect("a Kernels section");
        let rows: Vec<Vec<&str>> = section
            .lines()
            .skip_while(|l| !l.starts_with("| feature |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        let declared: Vec<Vec<String>> = Feature::ALL
            .iter()
            .map(|f| {
                let since = f.since().replacen(" with ", ", `", 1);
                let since = if since.contains('`') {
                    since + "`"
                } else {
                    since
                };
                let required = if f.without().is_none() { "yes" } else { "no" };
                vec![format!("`{}`", f.name()), since, required.to_owned()]
            })
            .collect();
        let listed: Vec<Vec<String>> = rows
            .iter()
            .map(|r| r[..3].iter().map(|c| (*c).to_owned()).collect())
            .collect();
        assert_eq!(listed, declared);
    }

    #[test]
    fn the_running_kernel_is_probed_as_having_what_sonde_needs() {
        // The test machine's kernel (6.18) has every feature; the VM test covers older ones.
        // SAFETY: geteuid has no preconditions.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "probes load programs: run as root"
        );
        let features = KernelFeatures::probe();
        assert!(features.check_floor().is_ok(), "{features}");
        for feature in Feature::ALL {
            assert!(features.has(feature), "{}: {features}", feature.name());
        }
    }
}
