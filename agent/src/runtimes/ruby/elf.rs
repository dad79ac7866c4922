//! What a binary holding CRuby's VM says of itself, read once per binary as it is first opened
//! (`process::elf_info::ElfReader`): that it holds the VM (it defines `rb_vm_exec`, exported by every
//! CRuby since 2.6), its version (`ruby_version`, a string every build exports), and where it keeps
//! the thread-local `ruby_current_ec` (3.0+; exported by Debian's stripped `libruby`), or before it
//! the global `ruby_current_execution_context_ptr` (2.5 to 2.7, exported too).

use std::sync::Arc;

use crate::{
    process::{
        ElfReader, RuntimeFact,
        elf_info::{read_bytes, symbol},
    },
    runtimes::tls::{TlsVariable, variable},
};

/// The VM's facts of one binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RbElf {
    /// (major, minor, patch) from `ruby_version`; None when unreadable.
    pub(crate) version: Option<(u8, u8, u8)>,
    /// `ruby_current_ec`, when the binary defines it.
    pub(crate) ec: Option<TlsVariable>,
    /// The link-time address of `ruby_current_execution_context_ptr`, when the binary defines it
    /// and no `ruby_current_ec`.
    pub(crate) shared_ec: Option<u64>,
    /// The link-time address of `rb_cObject` (the variable holding `Object`), from which class
    /// names are learned (`super::owner`).
    pub(crate) object_class: Option<u64>,
}

/// Reads [`RbElf`] of every binary as it is first opened.
pub(crate) const READER: ElfReader = ElfReader {
    runtime: super::NAME,
    read,
};

fn read(file: &object::File, bytes: &[u8]) -> Option<RuntimeFact> {
    symbol(file, "rb_vm_exec")?;
    // Looked up only in binaries holding the VM: a miss scans the whole symbol table.
    let version = symbol(file, "ruby_version")
        .and_then(|addr| read_bytes(file, bytes, addr, 16))
        .and_then(|b| version_of(&b));
    let ec = variable(file, "ruby_current_ec");
    let shared_ec = match ec {
        Some(_) => None,
        None => symbol(file, "ruby_current_execution_context_ptr"),
    };
    let object_class = symbol(file, "rb_cObject");
    Some(Arc::new(RbElf {
        version,
        ec,
        shared_ec,
        object_class,
    }))
}

/// (major, minor, patch) of a `ruby_version` string such as `3.1.2`, NUL-terminated.
pub(crate) fn version_of(bytes: &[u8]) -> Option<(u8, u8, u8)> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut parts = text.split('.').map(|p| p.parse::<u8>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// What `binary` says of the VM, if it holds one.
pub(crate) fn of(binary: &crate::process::Binary) -> Option<&RbElf> {
    binary.fact::<RbElf>(super::NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_the_vm_writes_them() {
        assert_eq!(version_of(b"3.1.2\0\0\0"), Some((3, 1, 2)));
        assert_eq!(version_of(b"3.4.0"), Some((3, 4, 0)));
        assert_eq!(version_of(b"3.x.0\0"), None);
        assert_eq!(version_of(b"3.1\0"), None);
    }

    /// Debian's `libruby-3.1`: the VM, its version and its execution context, from the real file.
    #[test]
    fn debians_libruby_says_what_it_is() {
        let path = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1";
        let Ok(bytes) = std::fs::read(path) else {
            panic!("{path} is missing: `cargo xtask setup --peers` installs Debian's ruby3.1");
        };
        let file = object::File::parse(&*bytes).unwrap();
        let fact = read(&file, &bytes).expect("libruby holds the VM");
        let rb = fact.downcast::<RbElf>().unwrap();
        assert_eq!(rb.version.map(|v| (v.0, v.1)), Some((3, 1)));
        let ec = rb.ec.as_ref().expect("ruby_current_ec");
        assert!(!ec.program && !ec.slots.is_empty(), "{ec:?}");
        assert_eq!(rb.shared_ec, None);
    }
}
