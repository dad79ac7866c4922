//! What a binary holding PHP's executor says of itself, read once per binary as it is first opened
//! (`process::elf_info::ElfReader`): that it holds the executor (it exports `execute_ex`, as the
//! CLI, php-fpm and Apache's `libphp` all do), where its executor globals are (`executor_globals`,
//! exported by non-thread-safe builds; a thread-safe build keeps them per thread and has none), and
//! its version, which PHP exports no symbol for: the `X-Powered-By: PHP/8.2.7` header it sends;
//! and the address of `execute_ex`'s body, whose unwind rule its JIT's code shares (`super::jit`).

use std::sync::Arc;

use crate::process::{
    ElfReader, RuntimeFact,
    elf_info::{eh_frame_bases, symbol},
};

/// The executor's facts of one binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PhpElf {
    /// (major, minor, patch) of its version string; None when not found.
    pub(crate) version: Option<(u8, u8, u8)>,
    /// Link-time address of `executor_globals`; None in a thread-safe build.
    pub(crate) executor_globals: Option<u64>,
    /// Link-time address in `execute_ex` whose CFI row covers most of it: its body, after the
    /// prologue and outside the epilogues. None when its CFI cannot be read.
    pub(crate) loop_body: Option<u64>,
}

/// Reads [`PhpElf`] of every binary as it is first opened.
pub(crate) const READER: ElfReader = ElfReader {
    runtime: super::NAME,
    read,
};

/// The string the version follows, in every build's read-only data.
const VERSION_NEEDLE: &[u8] = b"X-Powered-By: PHP/";

fn read(file: &object::File, bytes: &[u8]) -> Option<RuntimeFact> {
    let execute_ex = symbol(file, "execute_ex")?;
    // Looked up only in binaries holding the executor: a miss scans the whole symbol table.
    let executor_globals = symbol(file, "executor_globals");
    let version = version_in(bytes);
    Some(Arc::new(PhpElf {
        version,
        executor_globals,
        loop_body: widest_row(file, execute_ex),
    }))
}

/// The start of the widest CFI row of the function at `function` in `file`'s `.eh_frame`: a
/// function's body keeps one rule while its prologue and epilogues each change it for a few bytes.
fn widest_row(file: &object::File, function: u64) -> Option<u64> {
    use gimli::UnwindSection as _;
    use object::{Object as _, ObjectSection as _};
    let section = file.section_by_name(".eh_frame")?;
    let data = section.data().ok()?;
    let bases = eh_frame_bases(file, section.address());
    let mut eh_frame = gimli::EhFrame::new(data, gimli::LittleEndian);
    eh_frame.set_address_size(8);
    let fde = eh_frame
        .fde_for_address(&bases, function, gimli::EhFrame::cie_from_offset)
        .ok()?;
    let mut context = Box::new(gimli::UnwindContext::new());
    let mut table = fde.rows(&eh_frame, &bases, &mut context).ok()?;
    let mut widest: Option<(u64, u64)> = None;
    while let Ok(Some(row)) = table.next_row() {
        let width = row.end_address().saturating_sub(row.start_address());
        if widest.is_none_or(|(w, _)| width > w) {
            widest = Some((width, row.start_address()));
        }
    }
    widest.map(|(_, start)| start)
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
        // Inside `execute_ex`, past its first bytes (the prologue).
        let execute_ex = symbol(&file, "execute_ex").unwrap();
        let body = php.loop_body.expect("execute_ex's CFI");
        assert!(
            body > execute_ex + 4 && body < execute_ex + (1 << 20),
            "{php:?}"
        );
    }
}
