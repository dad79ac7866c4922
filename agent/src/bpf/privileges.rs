//! The capabilities sonde needs, from the one canonical list (`deploy/capabilities.txt`, embedded), and
//! how a missing one is named:
//! - CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH are checked before anything is loaded: without them nothing
//!   fails at load, but every other user's process would stay unnamed;
//! - CAP_BPF and CAP_PERFMON are left to the kernel, which knows best (CAP_SYS_ADMIN stands in before
//!   Linux 5.8, and capabilities held in a user namespace do not count): a step it refuses with EPERM or
//!   EACCES becomes a one-line error naming the capability that step needs ([`refused`]);
//! - CAP_CHECKPOINT_RESTORE and CAP_SYSLOG only cost names: their absence is warned about at start
//!   ([`warn_degraded`], and [`warn_if_kallsyms_hidden`] where kernel frames are named from
//!   kallsyms: before Linux 5.13), where it would otherwise leave frames silently unnamed.

use std::io;

use super::BpfError;

/// The canonical capability list: one `CAP_*` per line, `#` comments (the deployments are checked
/// against the same file).
const CANONICAL: &str = include_str!("../../../deploy/capabilities.txt");

/// A capability sonde uses or may be refused for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cap {
    Bpf,
    Perfmon,
    SysPtrace,
    DacReadSearch,
    CheckpointRestore,
    Syslog,
    SysAdmin,
}

impl Cap {
    /// Its bit in the capability sets (`linux/capability.h`).
    fn bit(self) -> u32 {
        match self {
            Cap::DacReadSearch => 2,
            Cap::SysPtrace => 19,
            Cap::SysAdmin => 21,
            Cap::Syslog => 34,
            Cap::Perfmon => 38,
            Cap::Bpf => 39,
            Cap::CheckpointRestore => 40,
        }
    }

    /// Its name, as `capabilities(7)` spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Cap::Bpf => "CAP_BPF",
            Cap::Perfmon => "CAP_PERFMON",
            Cap::SysPtrace => "CAP_SYS_PTRACE",
            Cap::DacReadSearch => "CAP_DAC_READ_SEARCH",
            Cap::CheckpointRestore => "CAP_CHECKPOINT_RESTORE",
            Cap::Syslog => "CAP_SYSLOG",
            Cap::SysAdmin => "CAP_SYS_ADMIN",
        }
    }

    /// Its name with what stood in for it on kernels that predate it.
    pub(crate) fn with_history(self) -> String {
        match self {
            Cap::Bpf | Cap::Perfmon => {
                format!("{} (or CAP_SYS_ADMIN before Linux 5.8)", self.name())
            }
            Cap::CheckpointRestore => {
                format!("{} (or CAP_SYS_ADMIN before Linux 5.9)", self.name())
            }
            _ => self.name().to_owned(),
        }
    }

    /// Capabilities that CAP_SYS_ADMIN also grants (the kernel checks "either").
    fn covered_by_admin(self) -> bool {
        matches!(self, Cap::Bpf | Cap::Perfmon | Cap::CheckpointRestore)
    }
}

/// The canonical list, in file order.
pub fn canonical() -> Vec<&'static str> {
    CANONICAL
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The effective capabilities of this process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held(u64);

impl Held {
    /// This process's effective set, from `/proc/self/status`.
    pub(crate) fn current() -> Self {
        Self(
            procfs::process::Process::myself()
                .and_then(|me| me.status())
                .map_or(0, |s| s.capeff),
        )
    }

    /// Whether `cap` is effective (directly, or through CAP_SYS_ADMIN where the kernel accepts that).
    pub(crate) fn has(self, cap: Cap) -> bool {
        let bit = |c: Cap| self.0 & (1u64 << c.bit()) != 0;
        bit(cap) || (cap.covered_by_admin() && bit(Cap::SysAdmin))
    }
}

/// Fails with the first missing capability among those the kernel would not refuse loudly.
pub fn check() -> Result<(), BpfError> {
    check_held(Held::current())
}

fn check_held(held: Held) -> Result<(), BpfError> {
    let required = [
        (
            Cap::SysPtrace,
            "to read other users' processes (/proc/PID/maps, /proc/PID/root)",
        ),
        (
            Cap::DacReadSearch,
            "to read tracefs (mode 0700) and binaries that are not world-readable",
        ),
    ];
    match required.into_iter().find(|(cap, _)| !held.has(*cap)) {
        Some((cap, why)) => Err(BpfError::MissingCapability {
            capability: cap.name(),
            why,
            all: all_caps(),
        }),
        None => Ok(()),
    }
}

/// The canonical list as `CAP_A, CAP_B and CAP_C`, for messages.
fn all_caps() -> String {
    let caps = canonical();
    match caps.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => caps.concat(),
    }
}

/// A step of loading and attaching that the kernel may refuse for want of a capability.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// Creating the maps and loading BTF (`bpf()`).
    Load,
    /// `BPF_PROG_LOAD` of a tracepoint or perf_event program.
    ProgramLoad(&'static str),
    /// Reading a tracepoint's id from tracefs (root-only files).
    TracepointId(&'static str),
    /// `perf_event_open` on a tracepoint.
    TracepointAttach(&'static str),
    /// `perf_event_open` of the cpu-clock event on every CPU.
    PerfEventOpen,
}

impl Step {
    fn describe(self) -> String {
        match self {
            Step::Load => "loading the eBPF maps (bpf)".into(),
            Step::ProgramLoad(p) => format!("loading program {p} (bpf BPF_PROG_LOAD)"),
            Step::TracepointId(e) => format!("reading the id of tracepoint sched:{e} from tracefs"),
            Step::TracepointAttach(e) => {
                format!("attaching to tracepoint sched:{e} (perf_event_open)")
            }
            Step::PerfEventOpen => "perf_event_open (cpu-clock on every CPU)".into(),
        }
    }

    /// What the kernel checks for this step.
    fn needs(self) -> &'static [Cap] {
        match self {
            Step::Load => &[Cap::Bpf],
            Step::ProgramLoad(_) => &[Cap::Bpf, Cap::Perfmon],
            Step::TracepointId(_) => &[Cap::DacReadSearch],
            Step::TracepointAttach(_) | Step::PerfEventOpen => &[Cap::Perfmon],
        }
    }
}

/// The errno of the first OS error in `err`'s chain.
fn errno(err: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(code) = e
            .downcast_ref::<io::Error>()
            .and_then(io::Error::raw_os_error)
        {
            return Some(code);
        }
        next = e.source();
    }
    None
}

/// The one-line error for `step` failing with `err`, when the kernel refused it for want of a
/// capability (EPERM, or EACCES with a capability of the step missing); None for any other failure.
pub(crate) fn refused(step: Step, err: &(dyn std::error::Error + 'static)) -> Option<BpfError> {
    refused_with(
        step,
        errno(err)?,
        Held::current(),
        in_initial_user_namespace(),
    )
}

fn refused_with(step: Step, errno: i32, held: Held, initial_ns: bool) -> Option<BpfError> {
    let missing: Vec<Cap> = step
        .needs()
        .iter()
        .copied()
        .filter(|c| !held.has(*c))
        .collect();
    let errno_name = match errno {
        libc::EPERM => "EPERM",
        libc::EACCES if !missing.is_empty() => "EACCES",
        _ => return None,
    };
    let named = if missing.is_empty() {
        step.needs()
    } else {
        &missing[..]
    };
    let needs = named
        .iter()
        .map(|c| c.with_history())
        .collect::<Vec<_>>()
        .join(" and ");
    Some(BpfError::Refused {
        step: step.describe(),
        errno: errno_name,
        needs,
        held_anyway: held_anyway(missing.is_empty(), initial_ns),
    })
}

/// Empty when a capability was missing; else why the kernel refused although it shows as held.
fn held_anyway(all_held: bool, initial_ns: bool) -> &'static str {
    // The kernel checks capabilities in the initial user namespace: one held in a container's own
    // namespace, or a seccomp or LSM policy, refuses the step even though the capability shows.
    match (all_held, initial_ns) {
        (true, false) => {
            "; sonde holds it, but only in a user namespace: run it in the host's user namespace (a rootless container cannot load BPF)"
        }
        (true, true) => {
            "; sonde holds it, so a seccomp profile or an LSM policy refuses the call: allow bpf() and perf_event_open() for sonde"
        }
        (false, _) => "",
    }
}

/// [`held_anyway`] for `cap`, as this process holds it.
pub(crate) fn held_anyway_for(cap: Cap) -> &'static str {
    held_anyway(Held::current().has(cap), in_initial_user_namespace())
}

/// Whether this process runs in the initial user namespace (its uid map is the identity of all ids).
fn in_initial_user_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|map| map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
}

/// Warns once, at start, about each capability whose absence would leave frames unnamed without
/// failing anything.
pub fn warn_degraded() {
    let held = Held::current();
    if !held.has(Cap::CheckpointRestore) {
        tracing::warn!(
            "without {} sonde cannot open binaries through /proc/PID/map_files: binaries deleted or replaced since their process started, and memfd code, stay unnamed (counted in sonde_processes_unreadable_total)",
            Cap::CheckpointRestore.with_history()
        );
    }
}

/// Warns that kernel frames stay unnamed where `/proc/kallsyms`, which names them when the kernel
/// cannot itself (before Linux 5.13, see `kernel_names`), hides their addresses from sonde.
pub(crate) fn warn_if_kallsyms_hidden() {
    if kallsyms_hidden() {
        let sysctl = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
                .map_or_else(|_| "?".into(), |v| v.trim().to_owned())
        };
        tracing::warn!(
            "kernel frames stay unnamed: /proc/kallsyms hides kernel addresses from sonde (kernel.kptr_restrict={}, kernel.perf_event_paranoid={}); grant {} (with kptr_restrict=2 nobody sees them)",
            sysctl("kptr_restrict"),
            sysctl("perf_event_paranoid"),
            Cap::Syslog.name()
        );
    }
}

/// Whether `/proc/kallsyms`, as opened by this process, shows every address as zero (the kernel
/// decides per opener: CAP_SYSLOG, `kptr_restrict` and `perf_event_paranoid`).
fn kallsyms_hidden() -> bool {
    use std::io::BufRead as _;
    let Ok(file) = std::fs::File::open("/proc/kallsyms") else {
        return true;
    };
    let mut lines = io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .take(64);
    lines.all(|l| {
        l.split(' ')
            .next()
            .is_some_and(|a| a.bytes().all(|b| b == b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(caps: &[Cap]) -> Held {
        Held(caps.iter().fold(0, |m, c| m | (1u64 << c.bit())))
    }

    #[test]
    fn the_canonical_list_is_the_capabilities_sonde_names() {
        let caps = canonical();
        assert_eq!(
            caps,
            [
                Cap::Bpf,
                Cap::Perfmon,
                Cap::SysPtrace,
                Cap::DacReadSearch,
                Cap::CheckpointRestore,
                Cap::Syslog,
            ]
            .map(Cap::name)
        );
        assert!(!caps.contains(&Cap::SysAdmin.name()));
    }

    #[test]
    fn names_the_first_missing_capability_checked_before_loading() {
        let err = check_held(held(&[Cap::Bpf, Cap::Perfmon])).unwrap_err();
        assert!(err.to_string().contains("missing CAP_SYS_PTRACE"), "{err}");
        let err = check_held(held(&[Cap::SysPtrace])).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("missing CAP_DAC_READ_SEARCH"), "{text}");
        assert!(
            text.contains("CAP_CHECKPOINT_RESTORE and CAP_SYSLOG"),
            "{text}"
        );
        assert!(check_held(held(&[Cap::SysPtrace, Cap::DacReadSearch])).is_ok());
    }

    #[test]
    fn a_refused_step_names_the_missing_capability() {
        let all = held(&[Cap::Bpf, Cap::Perfmon]);
        let no_perfmon = held(&[Cap::Bpf]);
        let err = refused_with(Step::PerfEventOpen, libc::EACCES, no_perfmon, true).unwrap();
        assert_eq!(
            err.to_string(),
            "perf_event_open (cpu-clock on every CPU) refused (EACCES): sonde needs CAP_PERFMON (or CAP_SYS_ADMIN before Linux 5.8)"
        );
        let err = refused_with(Step::ProgramLoad("p"), libc::EPERM, no_perfmon, true).unwrap();
        assert!(
            err.to_string()
                .ends_with("needs CAP_PERFMON (or CAP_SYS_ADMIN before Linux 5.8)")
        );
        let err = refused_with(Step::Load, libc::EPERM, held(&[]), true).unwrap();
        assert!(err.to_string().contains("needs CAP_BPF"), "{err}");
        // Held, yet refused: the namespace or a policy is named instead.
        let err = refused_with(Step::Load, libc::EPERM, all, false).unwrap();
        assert!(
            err.to_string().contains("only in a user namespace"),
            "{err}"
        );
        let err = refused_with(Step::Load, libc::EPERM, all, true).unwrap();
        assert!(err.to_string().contains("seccomp"), "{err}");
        // EACCES with every capability held is the verifier's, not a refusal.
        assert!(refused_with(Step::ProgramLoad("p"), libc::EACCES, all, true).is_none());
        assert!(refused_with(Step::Load, libc::EINVAL, held(&[]), true).is_none());
    }

    #[test]
    fn sys_admin_stands_in_for_bpf_perfmon_and_checkpoint_restore() {
        let admin = held(&[Cap::SysAdmin]);
        assert!(admin.has(Cap::Bpf) && admin.has(Cap::Perfmon));
        assert!(admin.has(Cap::CheckpointRestore));
        assert!(!admin.has(Cap::SysPtrace) && !admin.has(Cap::Syslog));
    }

    #[test]
    fn the_errno_is_found_down_the_cause_chain() {
        let err = aya::maps::MapError::CreateError {
            name: "M".into(),
            io_error: io::Error::from_raw_os_error(libc::EPERM),
        };
        let err = aya::EbpfError::MapError(err);
        assert_eq!(errno(&err), Some(libc::EPERM));
    }
}
