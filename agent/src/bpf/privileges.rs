//! Checks the effective capabilities before anything is loaded, so a missing one is named instead of
//! surfacing as an EPERM from deep inside the loader.

use super::BpfError;

const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Effective capability mask of this process, from `/proc/self/status`.
fn effective() -> u64 {
    procfs::process::Process::myself()
        .and_then(|me| me.status())
        .map_or(0, |s| s.capeff)
}

/// Fails with the first missing capability among those sonde needs (CAP_SYS_ADMIN covers BPF and PERFMON).
pub fn check() -> Result<(), BpfError> {
    check_mask(effective())
}

fn check_mask(caps: u64) -> Result<(), BpfError> {
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    let admin = has(CAP_SYS_ADMIN);
    let required = [
        ("CAP_BPF", has(CAP_BPF) || admin),
        ("CAP_PERFMON", has(CAP_PERFMON) || admin),
        ("CAP_SYS_PTRACE", has(CAP_SYS_PTRACE)),
        ("CAP_DAC_READ_SEARCH", has(CAP_DAC_READ_SEARCH)),
    ];
    match required.iter().find(|(_, ok)| !ok) {
        Some((capability, _)) => Err(BpfError::MissingCapability { capability }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_first_missing_capability() {
        let err = check_mask(0).unwrap_err();
        assert!(err.to_string().contains("CAP_BPF"), "{err}");
        let bpf_only = (1 << CAP_BPF) | (1 << CAP_SYS_PTRACE) | (1 << CAP_DAC_READ_SEARCH);
        let err = check_mask(bpf_only).unwrap_err();
        assert!(err.to_string().contains("CAP_PERFMON"), "{err}");
    }

    #[test]
    fn sys_admin_covers_bpf_and_perfmon() {
        let caps = (1 << CAP_SYS_ADMIN) | (1 << CAP_SYS_PTRACE) | (1 << CAP_DAC_READ_SEARCH);
        assert!(check_mask(caps).is_ok());
    }
}
