//! Reads every FDE of a CFI section (`.eh_frame` or `.debug_frame`) and evaluates its rows with
//! gimli, translating each with the architecture's rules. Independent of `.eh_frame_hdr`: the whole
//! section is walked, so FDEs missing from the search table (or a missing table) change nothing.

use std::collections::HashMap;
use std::ops::Range;

use gimli::{
    BaseAddresses, CieOrFde, CommonInformationEntry, EndianSlice, LittleEndian, UnwindContext,
    UnwindOffset, UnwindSection, UnwindTableRow,
};
use sonde_abi::{UnwindRow, unwind::cfa};

use super::TableError;
use crate::runtimes::seam::CodeRows;

/// An architecture's translation of one evaluated row (see `crate::platform::arch::unwind_rules::translate`).
pub(super) type Translate = fn(u32, &UnwindTableRow<usize>, bool, &[u8]) -> UnwindRow;

/// The rows of one FDE, in the order gimli evaluated them.
#[derive(Debug, Clone)]
pub(super) struct FdeRows {
    /// First address covered.
    pub(super) start: u32,
    /// First address after the FDE.
    pub(super) end: u32,
    /// Its rows in [`Collected::rows`].
    pub(super) rows: Range<usize>,
}

/// Everything read from a section.
#[derive(Debug, Default)]
pub(super) struct Collected {
    /// FDEs that cover at least one byte, in section order.
    pub(super) fdes: Vec<FdeRows>,
    /// The rows of all FDEs, back to back (one allocation instead of one per FDE).
    pub(super) rows: Vec<UnwindRow>,
    /// FDEs read, zero-length ones included.
    pub(super) fde_count: u64,
    /// FDEs gimli could not parse or evaluate (their code gets one `UNSUPPORTED` row, or none when
    /// even their range is unknown), and a section whose walk broke off.
    pub(super) bad_fdes: u64,
}

impl Collected {
    /// Adds functions whose rows come from elsewhere (a runtime's own table), after the FDEs so
    /// that where one starts with an FDE it is the one kept.
    pub(super) fn add_functions(&mut self, functions: Vec<CodeRows>) {
        for f in functions.into_iter().filter(|f| f.start < f.end) {
            let from = self.rows.len();
            self.rows.extend(f.rows);
            self.fdes.push(FdeRows {
                start: f.start,
                end: f.end,
                rows: from..self.rows.len(),
            });
        }
    }
}

type Reader<'a> = EndianSlice<'a, LittleEndian>;

/// Reads and evaluates every FDE of `section`, whose bytes are `bytes`.
pub(super) fn collect<'a, S>(
    section: &S,
    bytes: &'a [u8],
    bases: &BaseAddresses,
    name: &'static str,
    translate: Translate,
) -> Result<Collected, TableError>
where
    S: UnwindSection<Reader<'a>>,
{
    let cfi_error = |source| TableError::Cfi {
        section: name,
        source,
    };
    let mut out = Collected::default();
    // Most FDEs share a handful of CIEs: parse each once.
    let mut cies: HashMap<usize, CommonInformationEntry<Reader<'a>>> = HashMap::new();
    // One context for all FDEs: gimli resets it per FDE, and its register stack is allocated once.
    let mut context = Box::new(UnwindContext::new());
    let mut entries = section.entries(bases);
    // Kept to explain a section where nothing at all could be read.
    let mut first_error = None;
    loop {
        // A section that cannot be walked further keeps the FDEs read so far.
        let entry = match entries.next() {
            Ok(Some(entry)) => entry,
            Ok(None) => break,
            Err(err) => {
                first_error.get_or_insert(err);
                out.bad_fdes += 1;
                break;
            }
        };
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let parsed = partial.parse(|section, bases, offset| {
            let key = UnwindOffset::into(offset);
            if let Some(cie) = cies.get(&key) {
                return Ok(cie.clone());
            }
            let cie = section.cie_from_offset(bases, offset)?;
            cies.insert(key, cie.clone());
            Ok(cie)
        });
        out.fde_count += 1;
        let fde = match parsed {
            Ok(fde) => fde,
            Err(err) => {
                first_error.get_or_insert(err);
                out.bad_fdes += 1;
                continue;
            }
        };
        if fde.len() == 0 {
            continue;
        }
        let start = to_u32(fde.initial_address())?;
        let end = to_u32(fde.end_address())?;
        let signal = fde.is_signal_trampoline();
        let first = out.rows.len();
        let evaluated = (|| {
            let mut table = fde.rows(section, bases, &mut context)?;
            while let Some(row) = table.next_row()? {
                // An advance past the FDE's end describes no code.
                if row.start_address() >= fde.end_address() {
                    break;
                }
                let Ok(pc) = u32::try_from(row.start_address()) else {
                    return Err(gimli::Error::AddressOverflow);
                };
                out.rows.push(translate(pc, row, signal, bytes));
            }
            Ok::<(), gimli::Error>(())
        })();
        if let Err(err) = evaluated {
            first_error.get_or_insert(err);
            // Instructions gimli rejects (seen in libgcrypt's hand-written assembly): the walk stops
            // in this function, counted, and every other FDE of the binary keeps its rows.
            out.rows.truncate(first);
            out.rows.push(UnwindRow {
                pc: start,
                kind: cfa::UNSUPPORTED,
                ..Default::default()
            });
            out.bad_fdes += 1;
        }
        out.fdes.push(FdeRows {
            start,
            end,
            rows: first..out.rows.len(),
        });
    }
    if let (true, Some(err)) = (out.fdes.is_empty(), first_error) {
        return Err(cfi_error(err));
    }
    Ok(out)
}

/// `address` as a row address, or the error saying the binary cannot have a table.
fn to_u32(address: u64) -> Result<u32, TableError> {
    u32::try_from(address).map_err(|_| TableError::AddressTooLarge { address })
}
