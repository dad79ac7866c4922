//! What a `node` (or `libnode.so`) binary says about its V8 build, read from the ELF file when it is
//! first captured: the `v8dbg_*` postmortem constants (frame slots, object field offsets, instance
//! types: constant data in the file, no process read needed), V8's version, and where the embedded
//! builtins' code lies (`v8_Default_embedded_blob_code_` and its size).
//!
//! A binary is looked at only if its `.dynsym` exports `v8dbg_*` symbols (Node exports them for
//! postmortem debuggers); the constants themselves are read from `.symtab` when there is one (it has
//! them all), else from `.dynsym`.

use std::{collections::BTreeMap, sync::Arc};

use object::{Object as _, ObjectSection as _, ObjectSymbol as _, SectionKind};

use crate::process::{ElfReader, RuntimeFact};

/// Reads [`V8Symbols`] of every binary as it is first opened.
pub(crate) const READER: ElfReader = ElfReader {
    runtime: super::NAME,
    read: |file, bytes| V8Symbols::find(file, bytes).map(|s| Arc::new(s) as RuntimeFact),
};

/// The prefix of V8's postmortem constants.
const PREFIX: &str = "v8dbg_";
/// Most constants kept: a file exporting more is not what this reader expects.
const MAX_CONSTANTS: usize = 4096;

/// The V8 facts of one binary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct V8Symbols {
    /// Every `v8dbg_*` constant, without the prefix (`off_fp_function`, `type_Code__CODE_TYPE`, ...),
    /// as the 32-bit value the file holds (0 for those in `.bss`).
    pub constants: BTreeMap<String, u32>,
    /// V8's (major, minor, build), from `v8::internal::Version`'s statics.
    pub version: Option<(u32, u32, u32)>,
    /// ELF addresses of the embedded builtins' code (`start..end`).
    pub builtins: Option<(u64, u64)>,
}

impl V8Symbols {
    /// The constant `name` (without the prefix).
    pub(crate) fn get(&self, name: &str) -> Option<u32> {
        self.constants.get(name).copied()
    }

    /// The V8 facts of `file` (its bytes `bytes`), when it exports `v8dbg_*` symbols.
    pub(crate) fn find(file: &object::File, bytes: &[u8]) -> Option<Self> {
        let exported = file.dynamic_symbols().any(|s| {
            s.name()
                .is_ok_and(|n| n.starts_with(PREFIX) && !s.is_undefined())
        });
        if !exported {
            return None;
        }
        let symbols: Vec<object::Symbol> = match file.symbols().next() {
            Some(_) => file.symbols().collect(),
            None => file.dynamic_symbols().collect(),
        };
        let mut constants = BTreeMap::new();
        let mut at = BTreeMap::new();
        for s in &symbols {
            let Ok(name) = s.name() else { continue };
            if let Some(short) = name.strip_prefix(PREFIX) {
                if constants.len() < MAX_CONSTANTS && short.len() <= 128 {
                    constants.insert(short.to_owned(), value_u32(file, bytes, s).unwrap_or(0));
                }
            } else if matches!(
                name,
                "_ZN2v88internal7Version6major_E"
                    | "_ZN2v88internal7Version6minor_E"
                    | "_ZN2v88internal7Version6build_E"
                    | "v8_Default_embedded_blob_code_"
                    | "v8_Default_embedded_blob_code_size_"
            ) {
                at.insert(name, s);
            }
        }
        let u32_of = |name: &str| at.get(name).and_then(|s| value_u32(file, bytes, s));
        let version = match (
            u32_of("_ZN2v88internal7Version6major_E"),
            u32_of("_ZN2v88internal7Version6minor_E"),
            u32_of("_ZN2v88internal7Version6build_E"),
        ) {
            (Some(major), Some(minor), Some(build)) if major > 0 => Some((major, minor, build)),
            _ => None,
        };
        let builtins = at.get("v8_Default_embedded_blob_code_").and_then(|code| {
            let size = u64::from(u32_of("v8_Default_embedded_blob_code_size_")?);
            // Node 20 and 22 label the blob itself (in `.text`); Node 18 a pointer to it (in
            // `.data`), which a non-PIE executable holds as the absolute address.
            let start = match section_kind(file, code) {
                Some(SectionKind::Text) => code.address(),
                _ => value_u64(file, bytes, code)?,
            };
            (size > 0).then_some((start, start + size))
        });
        Some(Self {
            constants,
            version,
            builtins,
        })
    }
}

fn section_kind(file: &object::File, s: &object::Symbol) -> Option<SectionKind> {
    let index = s.section_index()?;
    Some(file.section_by_index(index).ok()?.kind())
}

/// The bytes of the file at ELF address `addr`, `len` of them, through the section holding them
/// (none for `.bss`).
fn bytes_at<'a>(file: &object::File, bytes: &'a [u8], addr: u64, len: u64) -> Option<&'a [u8]> {
    let section = file.sections().find(|s| {
        s.address() <= addr && addr + len <= s.address() + s.size() && s.file_range().is_some()
    })?;
    let (offset, size) = section.file_range()?;
    if addr + len > section.address() + size {
        return None;
    }
    let at = usize::try_from(offset + (addr - section.address())).ok()?;
    bytes.get(at..at + usize::try_from(len).ok()?)
}

fn value_u32(file: &object::File, bytes: &[u8], s: &object::Symbol) -> Option<u32> {
    if section_kind(file, s) == Some(SectionKind::UninitializedData) {
        return Some(0);
    }
    Some(u32::from_le_bytes(
        bytes_at(file, bytes, s.address(), 4)?.try_into().ok()?,
    ))
}

fn value_u64(file: &object::File, bytes: &[u8], s: &object::Symbol) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes_at(file, bytes, s.address(), 8)?.try_into().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use super::*;
    use crate::process::ElfInfo;

    #[test]
    fn debian_node_exports_its_v8_constants_version_and_builtins() {
        let node = File::open("/usr/bin/node").expect("Debian's node (Node.js 20)");
        let (_, facts) = ElfInfo::read_with(&node, &[READER]);
        let v8 = facts[0]
            .1
            .downcast_ref::<V8Symbols>()
            .expect("node exports v8dbg_* symbols");
        assert_eq!(v8.version.map(|v| v.0), Some(11), "{:?}", v8.version);
        assert_eq!(v8.get("off_fp_function"), Some(-16i32 as u32));
        assert_eq!(v8.get("type_JSFunction__JS_FUNCTION_TYPE"), Some(2066));
        let (start, end) = v8.builtins.expect("the embedded blob");
        assert!(end - start > 1 << 20, "{start:#x}..{end:#x}");
        let libc = File::open("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
        assert!(ElfInfo::read_with(&libc, &[READER]).1.is_empty());
    }
}
