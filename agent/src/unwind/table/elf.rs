//! The ELF side of the builder: refuse what the rules cannot describe (anything but 64-bit
//! little-endian ELF of the build's architecture), then find the call frame information section and the base addresses its
//! pointer encodings are relative to.

use std::borrow::Cow;

use gimli::BaseAddresses;
use object::elf;
use object::read::elf::{ElfFile64, FileHeader};
use object::{Endianness, FileKind, Object, ObjectSection};

use super::{FrameSource, TableError};
use crate::process::untrusted::{Input, Reason, refusals};

/// A parsed 64-bit ELF image.
pub(super) type Elf<'data> = ElfFile64<'data, Endianness, &'data [u8]>;

/// The call frame information section of a binary.
pub(super) struct FoundCfi<'data> {
    /// Which section it is.
    pub(super) source: FrameSource,
    /// Its name, for error messages.
    pub(super) name: &'static str,
    /// Its bytes: borrowed from the file, or decompressed (`SHF_COMPRESSED` `.debug_frame`).
    pub(super) data: Cow<'data, [u8]>,
    /// Addresses that `.eh_frame` pointer encodings may be relative to.
    pub(super) bases: BaseAddresses,
}

/// Parses `data` as an ELF image of the architecture sonde was built for (little-endian).
pub(super) fn open(data: &[u8]) -> Result<Elf<'_>, TableError> {
    // 32-bit ELF gets the architecture error; any other format fails to parse as ELF64 below.
    if let Ok(FileKind::Elf32) = FileKind::parse(data) {
        let header = elf::FileHeader32::<Endianness>::parse(data)
            .map_err(|source| TableError::NotElf { source })?;
        let endian = header
            .endian()
            .map_err(|source| TableError::NotElf { source })?;
        return Err(unsupported(32, endian, header.e_machine(endian)));
    }
    let file = Elf::parse(data).map_err(|source| TableError::NotElf { source })?;
    let endian = file.endian();
    let machine = file.elf_header().e_machine(endian);
    if machine != crate::platform::arch::ELF_MACHINE || endian != Endianness::Little {
        return Err(unsupported(64, endian, machine));
    }
    Ok(file)
}

/// Finds `.eh_frame`, or `.debug_frame` when there is no `.eh_frame`.
pub(super) fn find_cfi<'data>(file: &Elf<'data>) -> Result<FoundCfi<'data>, TableError> {
    // Unwinders prefer `.eh_frame`: it is what the program's own exception handling uses, so it is
    // the CFI that gets exercised, and it is never stripped.
    if let Some(section) = with_contents(file, ".eh_frame") {
        let name = ".eh_frame";
        let data = section.data().map_err(|source| TableError::Section {
            section: name,
            source,
        })?;
        let bases = crate::process::elf_info::eh_frame_bases(file, section.address());
        return Ok(FoundCfi {
            source: FrameSource::EhFrame,
            name,
            data: Cow::Borrowed(data),
            bases,
        });
    }
    if let Some(section) = with_contents(file, ".debug_frame") {
        let name = ".debug_frame";
        // `.debug_frame` holds absolute addresses only; it may be compressed (`-gz`, dwz, objcopy
        // --compress-debug-sections). The size it declares is checked before anything is inflated.
        let declared = section
            .compressed_file_range()
            .map_or(section.size(), |range| range.uncompressed_size);
        if declared > super::MAX_CFI_BYTES as u64 {
            refusals::count(Input::UnwindTable, Reason::TooLarge);
            return Err(TableError::TooLarge {
                section: name,
                bytes: declared,
                limit: super::MAX_CFI_BYTES as u64,
            });
        }
        let data = section
            .uncompressed_data()
            .map_err(|source| TableError::Section {
                section: name,
                source,
            })?;
        return Ok(FoundCfi {
            source: FrameSource::DebugFrame,
            name,
            data,
            bases: BaseAddresses::default(),
        });
    }
    Err(TableError::NoUnwindInfo)
}

/// Section `name` if it has bytes in the file: an empty section, or a NOBITS one (what `objcopy
/// --only-keep-debug` leaves of `.eh_frame` in a separate debug file), counts as absent.
fn with_contents<'data, 'file>(
    file: &'file Elf<'data>,
    name: &str,
) -> Option<impl ObjectSection<'data> + use<'data, 'file>> {
    file.section_by_name(name)
        .filter(|section| section.size() > 0 && section.file_range().is_some())
}

/// The unsupported-architecture error, naming what was found.
fn unsupported(bits: u8, endian: Endianness, machine: u16) -> TableError {
    let order = match endian {
        Endianness::Little => "little-endian",
        Endianness::Big => "big-endian",
    };
    let name = crate::platform::arch::elf_machine_name(machine);
    TableError::UnsupportedArch {
        machine: format!("{bits}-bit {order} {name} (e_machine {machine})"),
    }
}
