//! Reads of the user stack through a window copied in one go. A walk reads one or two words per frame,
//! each depending on the one before, and at 99 Hz each lands on a cold cache line: a 512-byte copy
//! streams the lines of several frames at once (walks here span 0.4 to 1.6 KiB for 5 to 14 frames).
//! The copy never crosses the end of a page, so a window at the top of the stack cannot fault on the
//! unmapped page above it.

use aya_ebpf::helpers::{bpf_probe_read_user, generated};

use crate::verifier::forget;

/// Words in the window (512 bytes).
const WORDS: usize = 64;
const WORD_MASK: usize = WORDS - 1;
const PAGE: u64 = 4096;

/// A copy of `len` bytes of the user stack from `base`.
#[repr(C)]
pub struct Window {
    base: u64,
    len: u64,
    /// Where values pass through to be forgotten by the verifier (`forget`).
    opaque: u64,
    words: [u64; WORDS],
}

impl Window {
    /// Forgets the previous walk's stack.
    #[inline(always)]
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// The words at `addr` and `addr + 8`; None when the memory cannot be read.
    #[inline(always)]
    pub fn pair(&mut self, addr: u64) -> Option<[u64; 2]> {
        if !self.covers(addr, 16) && !self.fill(addr, 16) {
            // SAFETY: a user address; a fault makes the helper fail, which is handled.
            return unsafe { bpf_probe_read_user(addr as *const [u64; 2]).ok() };
        }
        let i = self.index(addr);
        Some([self.words[i & WORD_MASK], self.words[(i + 1) & WORD_MASK]])
    }

    /// The word at `addr`; None when the memory cannot be read.
    #[inline(always)]
    pub fn word(&mut self, addr: u64) -> Option<u64> {
        if !self.covers(addr, 8) && !self.fill(addr, 8) {
            // SAFETY: as in `pair`.
            return unsafe { bpf_probe_read_user(addr as *const u64).ok() };
        }
        let i = self.index(addr);
        Some(self.words[i & WORD_MASK])
    }

    /// The index of the word at `addr`, which the window covers. Passed through memory: an index
    /// into the window is precise to the verifier, and so, back through the arithmetic, would be
    /// `addr` and `base`, whose ranges differ on every path through `covers` and `fill`; states that
    /// differ in precise registers are never pruned, and each frame's step would be verified once per
    /// path through the reads before it.
    #[inline(always)]
    fn index(&mut self, addr: u64) -> usize {
        forget(&mut self.opaque, (addr - self.base) >> 3) as usize
    }

    /// Whether `size` bytes at `addr` are in the window, word aligned.
    #[inline(always)]
    fn covers(&self, addr: u64, size: u64) -> bool {
        addr & 7 == 0 && addr >= self.base && addr.wrapping_add(size) <= self.base + self.len
    }

    /// Copies the stack from `addr` to the end of its page (at most the window). False when that is
    /// less than `size` bytes, unaligned, or unreadable: the caller reads the words directly.
    #[inline(always)]
    fn fill(&mut self, addr: u64, size: u64) -> bool {
        let len = (PAGE - (addr & (PAGE - 1))).min((WORDS * 8) as u64);
        if addr & 7 != 0 || len < size {
            return false;
        }
        // The helper's size must be bounded, so it is precise; forgotten and bounded again here, so
        // that precision stops at this load rather than reaching `addr` (see `index`).
        let len = forget(&mut self.opaque, len);
        if len > (WORDS * 8) as u64 {
            return false;
        }
        // SAFETY: `len` bytes fit in `words`; a fault makes the helper fail, which is handled.
        let read = unsafe {
            generated::bpf_probe_read_user(
                self.words.as_mut_ptr().cast(),
                len as u32,
                addr as *const core::ffi::c_void,
            )
        };
        if read != 0 {
            self.len = 0;
            return false;
        }
        self.base = addr;
        self.len = len;
        true
    }
}
