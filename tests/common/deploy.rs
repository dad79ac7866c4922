//! Helpers of the deploy tests: the systemd unit's settings, capability names and numbers, and the
//! ELF machine of a packaged binary. The measured capability list itself is read by
//! `caps::canonical` (tests/common/caps.rs).
#![allow(dead_code)]

use std::{collections::BTreeSet, path::Path};

/// Every value of `key=` in a unit file (later lines add to earlier ones, as systemd reads lists).
pub fn unit_values(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with(';'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_owned())
        .collect()
}

/// The whitespace-separated words of every `key=` line.
pub fn unit_words(unit: &str, key: &str) -> BTreeSet<String> {
    unit_values(unit, key)
        .iter()
        .flat_map(|v| v.split_whitespace().map(str::to_owned))
        .collect()
}

/// `setpriv` capability list (`+bpf,+perfmon`) for `CAP_*` names, after dropping all (`-all`).
pub fn setpriv_caps(caps: &BTreeSet<String>) -> String {
    let mut list = String::from("-all");
    for cap in caps {
        list.push_str(",+");
        list.push_str(&cap.trim_start_matches("CAP_").to_lowercase());
    }
    list
}

/// Capability names by number (linux/capability.h; 0..=40 as of Linux 5.9).
const CAPABILITIES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The number of the capability `name` (`CAP_BPF` → 39).
pub fn capability_number(name: &str) -> u32 {
    CAPABILITIES
        .iter()
        .position(|c| *c == name)
        .unwrap_or_else(|| panic!("unknown capability {name}")) as u32
}

/// `e_machine` of aarch64 ELF files.
pub const EM_AARCH64: u16 = 183;

/// The ELF machine (`e_machine`) of the file at `path`; panics unless it is a little-endian ELF.
pub fn elf_machine(path: &Path) -> u16 {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert!(
        bytes.starts_with(b"\x7fELF") && bytes.get(5) == Some(&1) && bytes.len() > 20,
        "{} is not a little-endian ELF file",
        path.display()
    );
    u16::from_le_bytes([bytes[18], bytes[19]])
}
