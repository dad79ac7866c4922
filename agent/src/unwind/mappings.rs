//! A process's executable mappings as the kernel's unwinder needs them ([`ProcMappings`]): address
//! range, table id and the load bias that turns a runtime address into the table's ELF address.

use sonde_abi::{
    ExecMapping, ProcMappings,
    unwind::{MAPPING_AT_ADDRESS, MAPPING_NO_UNWIND_INFO, MAPPING_RULE, MAX_EXEC_MAPPINGS},
};

/// What the kernel should do for one mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unwinding {
    /// Use table `id` with `bias`.
    Table {
        /// Table id.
        id: u32,
        /// Load bias.
        bias: u64,
    },
    /// Use table `id`'s rule at table address `address` for every address of the mapping: JIT code
    /// running on its interpreter loop's native frame (`runtimes::seam::UnwindAs`).
    At {
        /// Table id (the loop's binary's).
        id: u32,
        /// The loop's address in the table.
        address: u64,
    },
    /// The one rule at `index` of the kernel's shared rules for every address of the mapping: JIT
    /// code whose frame has a fixed shape of its own (`runtimes::seam::JitFrame::Fixed`).
    Rule { index: u16 },
    /// A table is expected but not loaded (being built, or evicted): frame pointers meanwhile.
    Pending,
    /// No table will ever exist (anonymous or JIT code, a binary without CFI or for another
    /// architecture): frame pointers.
    NoInfo,
}

/// Builds the kernel's view of a process from its mappings (sorted by start), read at
/// `read_at_ns` (CLOCK_MONOTONIC, the kernel's clock): the kernel asks for the next re-read no sooner
/// than its refresh interval after that. Returns the value and how many mappings did not fit.
///
/// Mappings at kernel addresses (x86_64's `[vsyscall]` page, 0xffffffffff600000, which the maps
/// file lists as executable) are left out: the kernel's branch-free search takes every key as below
/// 2^63, and such a key was taken for every address past the mapping before it, so the last
/// mapping of the address space (the vDSO, or a JIT's code) was never found.
pub(crate) fn proc_mappings(
    mappings: &[(u64, u64, Unwinding)],
    read_at_ns: u64,
) -> (Box<ProcMappings>, usize) {
    let mut out = Box::new(ProcMappings {
        count: 0,
        _pad: 0,
        refresh_requested_ns: read_at_ns,
        mappings: [ExecMapping::default(); MAX_EXEC_MAPPINGS],
    });
    let user: Vec<&(u64, u64, Unwinding)> = mappings
        .iter()
        .filter(|(start, ..)| *start < KERNEL_ADDRESSES)
        .collect();
    for (slot, &&(start, end, how)) in out.mappings.iter_mut().zip(&user) {
        let (table_id, bias, flags) = match how {
            Unwinding::Table { id, bias } => (id, bias, 0),
            Unwinding::At { id, address } => (id, address, MAPPING_AT_ADDRESS),
            Unwinding::Rule { index } => (0, u64::from(index), MAPPING_RULE),
            Unwinding::Pending => (0, 0, 0),
            Unwinding::NoInfo => (0, 0, MAPPING_NO_UNWIND_INFO),
        };
        *slot = ExecMapping {
            start,
            end,
            bias,
            table_id,
            flags,
        };
    }
    out.count = user.len().min(MAX_EXEC_MAPPINGS) as u32;
    (out, user.len().saturating_sub(MAX_EXEC_MAPPINGS))
}

/// Where the kernel's half of the address space starts.
const KERNEL_ADDRESSES: u64 = 1 << 63;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_order_and_overflow_is_reported() {
        let many: Vec<(u64, u64, Unwinding)> = (0..MAX_EXEC_MAPPINGS as u64 + 3)
            .map(|i| (i * 0x1000, i * 0x1000 + 0x800, Unwinding::NoInfo))
            .collect();
        let (value, dropped) = proc_mappings(&many, 0);
        assert_eq!(value.count as usize, MAX_EXEC_MAPPINGS);
        assert_eq!(dropped, 3);
        assert_eq!(value.mappings[1].start, 0x1000);
        assert_eq!(value.mappings[1].flags, MAPPING_NO_UNWIND_INFO);
        let (value, _) = proc_mappings(
            &[(0x1000, 0x2000, Unwinding::Table { id: 9, bias: 0x10 })],
            77,
        );
        assert_eq!(value.refresh_requested_ns, 77);
        let (jit, _) = proc_mappings(
            &[(
                0x1000,
                0x2000,
                Unwinding::At {
                    id: 3,
                    address: 0x4242,
                },
            )],
            0,
        );
        let m = jit.mappings[0];
        assert_eq!(
            (m.table_id, m.bias, m.flags),
            (3, 0x4242, MAPPING_AT_ADDRESS)
        );
        // A JIT's code right below x86_64's vsyscall page: the page is not written, so the search
        // ends at the JIT's mapping; the JIT's one rule is its index.
        let (top, _) = proc_mappings(
            &[
                (
                    0x7f00_0000_0000,
                    0x7f10_0000_0000,
                    Unwinding::Rule { index: 7 },
                ),
                (
                    0xffff_ffff_ff60_0000,
                    0xffff_ffff_ff60_1000,
                    Unwinding::NoInfo,
                ),
            ],
            0,
        );
        let m = top.mappings[0];
        assert_eq!(top.count, 1);
        assert_eq!((m.table_id, m.bias, m.flags), (0, 7, MAPPING_RULE));
        assert_eq!(
            (
                value.mappings[0].table_id,
                value.mappings[0].bias,
                value.count
            ),
            (9, 0x10, 1)
        );
    }
}
