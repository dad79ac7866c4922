//! What HotSpot's `libjvm.so` says of itself, read once per binary as it is first captured
//! (`process::elf_info::ElfReader`): the addresses of its exported `gHotSpotVM*` variables.

use std::{collections::BTreeMap, sync::Arc};

use object::{Object as _, ObjectSymbol as _};

use crate::process::{ElfReader, RuntimeFact};

/// Reads [`HotspotSymbols`] of every binary as it is first opened.
pub(crate) const READER: ElfReader = ElfReader {
    runtime: super::NAME,
    read: |file, _| HotspotSymbols::find(file).map(|s| Arc::new(s) as RuntimeFact),
};

/// Where a `libjvm.so` describes its own structures (VMStructs): the ELF addresses of its exported
/// `gHotSpotVM*` variables. Each table symbol (`gHotSpotVMStructs`, ...) is a pointer variable to its
/// array; the entry layout is given by the `gHotSpotVM*Entry*Offset` and `*ArrayStride` variables.
/// All of them are read from the process (the layout variables are set at the JVM's start, in
/// `.bss`), so only their addresses are kept here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HotspotSymbols {
    /// ELF address of every `gHotSpotVM*` variable, by name.
    pub by_name: BTreeMap<String, u64>,
}

impl HotspotSymbols {
    /// The names of the four table pointers: a file exporting all of them is a `libjvm.so`.
    pub(crate) const TABLES: [&str; 4] = [
        "gHotSpotVMStructs",
        "gHotSpotVMTypes",
        "gHotSpotVMIntConstants",
        "gHotSpotVMLongConstants",
    ];

    /// The ELF address of the variable `name`.
    pub(crate) fn get(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied()
    }

    /// The `gHotSpotVM*` variables of `file`'s `.dynsym`, when all four tables are among them. One
    /// pass over `.dynsym` (libjvm exports them for the serviceability agent), and nothing kept for any
    /// other file.
    pub(crate) fn find(file: &object::File) -> Option<Self> {
        let by_name: BTreeMap<String, u64> = file
            .dynamic_symbols()
            .filter(|s| !s.is_undefined())
            .filter_map(|s| {
                let name = s.name().ok()?;
                // Bounded: names of a known prefix and a sane length only.
                (name.starts_with("gHotSpotVM") && name.len() <= 64)
                    .then(|| (name.to_owned(), s.address()))
            })
            .collect();
        Self::TABLES
            .iter()
            .all(|t| by_name.contains_key(*t))
            .then_some(Self { by_name })
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use super::*;
    use crate::process::ElfInfo;

    #[test]
    fn libjvm_exports_its_vmstructs_and_nothing_else_does() {
        let path = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";
        let file = File::open(path).unwrap_or_else(|e| panic!("OpenJDK 17's {path}: {e}"));
        let (_, facts) = ElfInfo::read_with(&file, &[READER]);
        let symbols = facts[0]
            .1
            .downcast_ref::<HotspotSymbols>()
            .expect("gHotSpotVM* in .dynsym");
        for name in HotspotSymbols::TABLES.into_iter().chain([
            "gHotSpotVMStructEntryArrayStride",
            "gHotSpotVMStructEntryTypeNameOffset",
            "gHotSpotVMTypeEntrySizeOffset",
            "gHotSpotVMLongConstantEntryValueOffset",
        ]) {
            let addr = symbols
                .get(name)
                .unwrap_or_else(|| panic!("{name} missing"));
            assert!(addr > 0, "{name}");
        }
        // 4 tables, 6 struct entry offsets and a stride, 6 + 1 for types, 2 + 1 for each constant table.
        assert_eq!(symbols.by_name.len(), 24, "{:?}", symbols.by_name.keys());
        let libc = File::open("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
        assert!(ElfInfo::read_with(&libc, &[READER]).1.is_empty());
    }
}
