//! What a binary holding PHP's executor says of itself, read once per binary as it is first opened
//! (`process::elf_info::ElfReader`): that it holds the executor (it exports `execute_ex`, as the
//! CLI, php-fpm and Apache's `libphp` all do), where its executor globals are (`executor_globals`,
//! exported by non-thread-safe builds; a thread-safe build keeps them per thread and has none), and
//! its version, which PHP exports no symbol for: the `X-Powered-By: PHP/8.2.7` header it sends.

use std::sync::Arc;

use crate::process::{ElfReader, RuntimeFact, elf_info::symbol};

/// The executor's facts of one binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PhpElf {
    /// (major, minor, patch) of its version string; None when not found.
    pub(crate) version: Option<(u8, u8, u8)>,
    /// Link-time address of `executor_globals`; None in a thread-safe build.
    pub(crate) executor_globals: Option<u64>,
}

/// Reads [`PhpElf`] of every binary as it is first opened.
pub(crate) const READER: ElfReader = ElfReader {
    runtime: super::NAME,
    read,
};

/// The string the version follows, in every build's read-only data.
const VERSION_NEEDLE: &[u8] = b"X-Powered-By: PHP/";

fn read(file: &object::File, bytes: &[u8]) -> Option<RuntimeFact> {
    symbol(file, "execute_ex")?;
    // Looked up only in binaries holding the executor: a miss scans the whole symbol table.
    let executor_globals = symbol(file, "executor_globals");
    let version = version_in(bytes);
    Some(Arc::new(PhpElf {
        version,
        executor_globals,
    }))
}

/// (major, minor, patch) of the version after `X-Powered-By: PHP/` in `bytes`.
pub(crate) fn version_in(bytes: &[u8]) -> Option<(u8, u8, u8)> {
    let at = bytes
        .windows(VERSION_NEEDLE.len())
        .position(|w| w == VERSION_NEEDLE)?;
    let rest = &bytes[at + VERSION_NEEDLE.len()..];
    let end = rest
        .iter()
        .position(|&b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(rest.len());
    let text = std::str::from_utf8(&rest[..end]).ok()?;
    let mut parts = text.split('.').map(|p| p.parse::<u8>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// What `binary` says of the executor, if it holds one.
pub(crate) fn of(binary: &crate::process::Binary) -> Option<&PhpElf> {
    binary.fact::<PhpElf>(super::NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_php_writes_them() {
        assert_eq!(
            version_in(b"\0X-Powered-By: PHP/8.2.36\0PHP/"),
            Some((8, 2, 36))
        );
        assert_eq!(
            version_in(b"X-Powered-By: PHP/7.4.33-nmm1\0"),
            Some((7, 4, 33))
        );
        assert_eq!(version_in(b"X-Powered-By: PHP/8.x\0"), None);
        assert_eq!(version_in(b"X-Powered-By: ASP.NET\0"), None);
    }

    /// Debian 12's `php8.2`: the executor, its globals and its version, from the real file.
    #[test]
    fn debians_php_says_what_it_is() {
        let path = "/usr/bin/php8.2";
        let Ok(bytes) = std::fs::read(path) else {
            panic!("{path} is missing: `cargo xtask setup --peers` installs Debian's php8.2-cli");
        };
        let file = object::File::parse(&*bytes).unwrap();
        let fact = read(&file, &bytes).expect("php8.2 holds the executor");
        let php = fact.downcast::<PhpElf>().unwrap();
        assert_eq!(php.version.map(|v| (v.0, v.1)), Some((8, 2)));
        assert!(php.executor_globals.is_some_and(|a| a > 0), "{php:?}");
    }
}
