//! Where a process's dynamic linker put a thread-local variable, from the slots it filled
//! ([`super::Slot`]), as the kernel's settings: an offset from the thread pointer (static TLS), or a
//! module index into the thread's DTV and an offset in that module's block.
//!
//! The DTV's shape is the C library's: glibc's has 16-byte entries (`{val, to_free}`) and their
//! count at `dtv[-1]`, musl's 8-byte entries and their count at `dtv[0]`; where the thread keeps it
//! is the architecture's too (`platform::arch::DTV_AT`).

use sonde_abi::tls::{TLS_DTV, TLS_STATIC, TlsPlace};

use super::{Slot, TlsVariable};

/// The C library a process runs with, which lays out its threads' DTV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Libc {
    Glibc,
    Musl,
}

impl Libc {
    /// The C library of a process mapping `paths`: musl's loader is `ld-musl-<arch>.so.1` (Alpine),
    /// a link to `<arch>-linux-musl/libc.so` (Debian), which the mapping names.
    pub(crate) fn of<'a>(mut paths: impl Iterator<Item = &'a str>) -> Self {
        let musl = |p: &str| {
            ["/ld-musl-", "/libc.musl-", "-linux-musl/"]
                .iter()
                .any(|m| p.contains(m))
        };
        match paths.any(musl) {
            true => Libc::Musl,
            false => Libc::Glibc,
        }
    }

    /// `(dtv_at, dtv_stride, dtv_len_at)` of [`TlsPlace`] on this architecture.
    fn dtv(self) -> (i32, u32, i32) {
        let at = crate::platform::arch::DTV_AT;
        match self {
            Libc::Glibc => (at.glibc, 16, -16),
            Libc::Musl => (at.musl, 8, 0),
        }
    }
}

/// Why a process's variable is not placed (yet).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unplaced {
    /// The dynamic linker has not filled the slots yet (the library was just mapped).
    NotReady,
    /// The slots hold what no supported dynamic linker writes, or the binary has none.
    Unsupported(String),
    /// The process's memory could not be read.
    Unreadable(String),
}

/// The kernel's settings for `var` in a module loaded at `bias` (run-time minus link-time
/// addresses) of a process running with `libc`; `read` reads 8 bytes of the process.
pub(crate) fn place(
    var: &TlsVariable,
    bias: u64,
    libc: Libc,
    read: &dyn Fn(u64) -> std::io::Result<u64>,
) -> Result<TlsPlace, Unplaced> {
    let (dtv_at, dtv_stride, dtv_len_at) = libc.dtv();
    let dtv = |module: u64, offset: u64| TlsPlace {
        mode: TLS_DTV,
        module: module as u32,
        offset: offset as i64,
        dtv_at,
        dtv_stride,
        dtv_len_at,
        ..Default::default()
    };
    let fixed = |offset: u64| TlsPlace {
        mode: TLS_STATIC,
        offset: offset as i64,
        ..Default::default()
    };
    // A program's TLS is module 1 in glibc and musl alike; its accesses need no slot.
    if var.program {
        return Ok(dtv(1, var.offset));
    }
    let word =
        |at: u64| read(at.wrapping_add(bias)).map_err(|e| Unplaced::Unreadable(e.to_string()));
    let Some(slot) = var.slots.first() else {
        return Err(Unplaced::Unsupported(
            "the library defines the variable but never says where its TLS is (no TLSDESC, DTPMOD64 or TPOFF64 slot)".into(),
        ));
    };
    match *slot {
        Slot::Descriptor(at) => {
            let (resolver, arg) = (word(at)?, word(at + 8)?);
            if resolver == 0 {
                return Err(Unplaced::NotReady);
            }
            if is_thread_offset(arg) {
                return Ok(fixed(arg));
            }
            // A dynamic descriptor's argument points at `{module, offset}` (glibc's
            // `tlsdesc_dynamic_arg` and musl's pair alike).
            let (module, offset) = (
                read(arg).map_err(|e| Unplaced::Unreadable(e.to_string()))?,
                read(arg + 8).map_err(|e| Unplaced::Unreadable(e.to_string()))?,
            );
            if offset != var.offset || module == 0 || module > u64::from(u32::MAX) {
                return Err(Unplaced::Unsupported(format!(
                    "a TLS descriptor whose argument {arg:#x} holds module {module}, offset {offset:#x}, not the variable's offset {:#x}",
                    var.offset
                )));
            }
            Ok(dtv(module, offset))
        }
        Slot::ThreadOffset(at) => match word(at)? {
            0 => Err(Unplaced::NotReady),
            offset => Ok(fixed(offset)),
        },
        Slot::Module(at) => match word(at)? {
            0 => Err(Unplaced::NotReady),
            module if module > u64::from(u32::MAX) => Err(Unplaced::Unsupported(format!(
                "a module index of {module:#x}"
            ))),
            module => Ok(dtv(module, var.offset)),
        },
    }
}

/// Whether a static TLS descriptor's argument, an offset from the thread pointer, is what `arg` is,
/// rather than a pointer to a dynamic descriptor's pair: static TLS below the thread pointer is a
/// negative offset; above it, a small one (less than a megabyte: no mapping is that low).
fn is_thread_offset(arg: u64) -> bool {
    match crate::platform::arch::STATIC_TLS_BELOW_THREAD_POINTER {
        true => (arg as i64) < 0 && (arg as i64) > -(1 << 30),
        false => arg < 1 << 20,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn memory(words: &[(u64, u64)]) -> impl Fn(u64) -> std::io::Result<u64> + use<> {
        let words: HashMap<u64, u64> = words.iter().copied().collect();
        move |at| {
            words
                .get(&at)
                .copied()
                .ok_or_else(|| std::io::Error::other(format!("unmapped {at:#x}")))
        }
    }

    fn library(slot: Slot) -> TlsVariable {
        TlsVariable {
            offset: 0x110,
            program: false,
            slots: vec![slot],
        }
    }

    #[test]
    fn a_program_is_module_one_and_needs_no_slot() {
        let var = TlsVariable {
            offset: 0x8,
            program: true,
            slots: vec![],
        };
        let p = place(&var, 0, Libc::Glibc, &memory(&[])).unwrap();
        assert_eq!((p.mode, p.module, p.offset), (TLS_DTV, 1, 8));
        assert_eq!((p.dtv_stride, p.dtv_len_at), (16, -16));
        let p = place(&var, 0, Libc::Musl, &memory(&[])).unwrap();
        assert_eq!((p.dtv_stride, p.dtv_len_at), (8, 0));
    }

    /// ddtrace 4.16.0's `_native` module under glibc 2.36, read from a live process: its TLSDESC
    /// slot at 0xa37888 held `_dl_tlsdesc_dynamic` and a pointer into the (non-PIE python's) heap.
    #[test]
    fn a_dynamic_descriptor_gives_the_module_and_checks_the_offset() {
        let bias = 0x7f94_64a0_0000;
        let var = library(Slot::Descriptor(0xa3_7888));
        let read = memory(&[
            (bias + 0xa3_7888, 0x7f55_cf00_7410),
            (bias + 0xa3_7890, 0x3867_ee40),
            (0x3867_ee40, 2),
            (0x3867_ee48, 0x110),
        ]);
        let p = place(&var, bias, Libc::Glibc, &read).unwrap();
        assert_eq!((p.mode, p.module, p.offset), (TLS_DTV, 2, 0x110));
        // Another offset than the variable's: not a descriptor of ours.
        let wrong = memory(&[
            (bias + 0xa3_7888, 0x7f55_cf00_7410),
            (bias + 0xa3_7890, 0x3867_ee40),
            (0x3867_ee40, 2),
            (0x3867_ee48, 0x118),
        ]);
        assert!(matches!(
            place(&var, bias, Libc::Glibc, &wrong),
            Err(Unplaced::Unsupported(_))
        ));
    }

    #[test]
    fn a_static_descriptor_is_an_offset_from_the_thread_pointer() {
        // Below the thread pointer on x86_64, above it on AArch64.
        let offset: i64 = match crate::platform::arch::STATIC_TLS_BELOW_THREAD_POINTER {
            true => -0x2a0,
            false => 0x2a0,
        };
        let var = library(Slot::Descriptor(0x1000));
        let read = memory(&[(0x1000, 0x7f00_0000_1234), (0x1008, offset as u64)]);
        let p = place(&var, 0, Libc::Glibc, &read).unwrap();
        assert_eq!((p.mode, p.offset), (TLS_STATIC, offset));
    }

    #[test]
    fn unfilled_slots_are_not_ready_and_unreadable_ones_say_so() {
        for slot in [
            Slot::Descriptor(0x1000),
            Slot::Module(0x1000),
            Slot::ThreadOffset(0x1000),
        ] {
            let read = memory(&[(0x1000, 0), (0x1008, 0)]);
            assert_eq!(
                place(&library(slot), 0, Libc::Glibc, &read),
                Err(Unplaced::NotReady)
            );
            assert!(matches!(
                place(&library(slot), 0x10, Libc::Glibc, &read),
                Err(Unplaced::Unreadable(_))
            ));
        }
        let read = memory(&[(0x1000, 3)]);
        let p = place(&library(Slot::Module(0x1000)), 0, Libc::Musl, &read).unwrap();
        assert_eq!(
            (p.mode, p.module, p.offset, p.dtv_stride),
            (TLS_DTV, 3, 0x110, 8)
        );
        let none = TlsVariable {
            offset: 0,
            program: false,
            slots: vec![],
        };
        assert!(matches!(
            place(&none, 0, Libc::Glibc, &read),
            Err(Unplaced::Unsupported(_))
        ));
    }

    #[test]
    fn musl_is_known_by_its_loader() {
        let musl = ["/usr/bin/x", "/lib/ld-musl-x86_64.so.1"];
        assert_eq!(Libc::of(musl.into_iter()), Libc::Musl);
        let debian = ["/usr/bin/x", "/usr/lib/x86_64-linux-musl/libc.so"];
        assert_eq!(Libc::of(debian.into_iter()), Libc::Musl);
        let glibc = ["/usr/bin/x", "/lib/x86_64-linux-gnu/libc.so.6"];
        assert_eq!(Libc::of(glibc.into_iter()), Libc::Glibc);
    }
}
