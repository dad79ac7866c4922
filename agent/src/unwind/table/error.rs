//! Why a binary got no unwind table. Every case leaves the binary to frame-pointer unwinding, and
//! the messages say so, so a log line is enough to explain incomplete stacks.

/// Errors of the unwind table builder.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableError {
    /// The file could not be mapped.
    #[error(
        "cannot map the binary to read its unwind information (is it readable?); frame pointers are used for it"
    )]
    Map {
        /// The mmap error.
        #[source]
        source: std::io::Error,
    },
    /// Not an ELF file, or its headers are damaged.
    #[error("not an ELF file, or a truncated one; frame pointers are used for it")]
    NotElf {
        /// What the ELF parser found.
        #[source]
        source: object::Error,
    },
    /// Not a 64-bit little-endian binary of the build's architecture.
    #[error(
        "unsupported architecture {machine}: unwind tables are only built for {} binaries; frame pointers are used for this binary",
        crate::platform::arch::NAME
    )]
    UnsupportedArch {
        /// The ELF class, byte order and `e_machine`, e.g. "64-bit little-endian aarch64 (e_machine 183)".
        machine: String,
    },
    /// A section header points outside the file, or a compressed section does not decompress.
    #[error(
        "cannot read section {section} (truncated or damaged binary); frame pointers are used for it"
    )]
    Section {
        /// The section name.
        section: &'static str,
        /// What the ELF parser found.
        #[source]
        source: object::Error,
    },
    /// Neither `.eh_frame` nor `.debug_frame`.
    #[error(
        "no .eh_frame nor .debug_frame section: the binary has no unwind information (built with -fno-asynchronous-unwind-tables, or stripped of it); frame pointers are used for it, so build it with -fno-omit-frame-pointer or keep its unwind tables"
    )]
    NoUnwindInfo,
    /// An address the 32-bit rows cannot hold.
    #[error(
        "address {address:#x} does not fit the 32-bit addresses of unwind rows (code mapped above 4 GiB in the ELF file); frame pointers are used for this binary"
    )]
    AddressTooLarge {
        /// The first address found above `u32::MAX`.
        address: u64,
    },
    /// The call frame information is larger than any real binary's: refused before it is read.
    #[error(
        "its {section} is {bytes} bytes, over the {limit}-byte bound of a binary's unwind information (see THREAT_MODEL.md); frame pointers are used for it"
    )]
    TooLarge {
        /// `.eh_frame` or `.debug_frame`.
        section: &'static str,
        /// The section's size.
        bytes: u64,
        /// The bound.
        limit: u64,
    },
    /// The table would hold more rows than a binary's budget.
    #[error(
        "its unwind information gives more than {limit} rows, the bound of one binary's table (see THREAT_MODEL.md); frame pointers are used for it"
    )]
    TooManyRows {
        /// The bound.
        limit: usize,
    },
    /// gimli could not read or evaluate the call frame information.
    #[error(
        "cannot read the call frame information in {section} (damaged, or an extension gimli does not know); frame pointers are used for this binary"
    )]
    Cfi {
        /// `.eh_frame` or `.debug_frame`.
        section: &'static str,
        /// gimli's error.
        #[source]
        source: gimli::Error,
    },
}
