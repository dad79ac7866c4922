//! Kernel function names from `/proc/kallsyms`, kept compact: ~120,000 text symbols (`t`, `T`, `w`,
//! `W`: the functions a stack holds) as a sorted array of 32-bit address offsets, and their 3 MB of
//! names deflated in blocks of [`BLOCK`] (0.9 MB). A lookup inflates one block (3 KiB, microseconds)
//! and keeps it for the next: a window's kernel addresses are named in one batch, most of them in a
//! few hot blocks. blazesym's kernel resolver held each name in its own `String` (7.8 MiB here), and
//! the plain arrays before these 4.9 MiB, for the agent's lifetime, for names read once per address
//! (the symbolizer caches what it found).
//!
//! x86_64's kernel text and modules lie in the top 2 GiB of the address space, so offsets from the
//! lowest symbol fit 32 bits; a symbol beyond 4 GiB of it (no x86_64 kernel has one) stays unnamed.

use std::io::{BufRead, Read as _, Write as _};

use flate2::{Compression, read::DeflateDecoder, write::DeflateEncoder};

/// Where the running kernel lists its symbols.
const PATH: &str = "/proc/kallsyms";

/// Names per deflated block: 128 compress 3 MB of names to 0.9 MB and inflate in a few microseconds.
const BLOCK: usize = 128;

/// Text symbols by address.
#[derive(Default)]
pub(super) struct Kallsyms {
    /// Lowest symbol address.
    base: u64,
    /// Per symbol, sorted by address: its offset from `base` and its index in kallsyms' order (the
    /// order of the names in `packed`).
    symbols: Vec<(u32, u32)>,
    /// Where each block of names ends in `packed`.
    block_ends: Vec<u32>,
    /// The names, newline-separated, deflated block by block in kallsyms' order.
    packed: Vec<u8>,
    /// The block inflated last: its index, its names and where each ends.
    open: Option<(usize, String, Vec<u32>)>,
}

impl Kallsyms {
    /// Reads the running kernel's symbols. Empty (every lookup fails) when they are hidden: without
    /// root, or with `kernel.kptr_restrict` set, kallsyms shows every address as 0.
    pub(super) fn load() -> std::io::Result<Self> {
        Self::parse(std::io::BufReader::new(std::fs::File::open(PATH)?))
    }

    /// Parses kallsyms lines (`ADDRESS TYPE NAME [MODULE]`), in one pass: names are deflated a block
    /// at a time as they come, so no more than one block of them is ever held uncompressed.
    fn parse(input: impl BufRead) -> std::io::Result<Self> {
        let mut addresses: Vec<(u64, u32)> = Vec::with_capacity(1 << 17);
        let mut out = Self::default();
        let mut block = String::new();
        let mut in_block = 0;
        each_text_symbol(input, |address, name| {
            addresses.push((address, addresses.len() as u32));
            block.push_str(name);
            block.push('\n');
            in_block += 1;
            if in_block == BLOCK {
                out.seal(&block)?;
                block.clear();
                in_block = 0;
            }
            Ok(())
        })?;
        if in_block > 0 {
            out.seal(&block)?;
        }
        out.packed.shrink_to_fit();
        // Aliases at one address stay in listing order: the first wins a lookup (see `name`).
        addresses.sort_unstable();
        out.base = addresses.first().map_or(0, |a| a.0);
        out.symbols = addresses
            .iter()
            .filter_map(|&(address, index)| Some((u32::try_from(address - out.base).ok()?, index)))
            .collect();
        Ok(out)
    }

    /// Deflates one block of names onto `packed`.
    fn seal(&mut self, names: &str) -> std::io::Result<()> {
        let mut encoder =
            // Fastest level: the default took a third of the load (69 against 50 ms on 121k
            // symbols, at every start) for 0.6 MB instead of 0.9.
            DeflateEncoder::new(std::mem::take(&mut self.packed), Compression::fast());
        encoder.write_all(names.as_bytes())?;
        self.packed = encoder.finish()?;
        let end = u32::try_from(self.packed.len()).map_err(std::io::Error::other)?;
        self.block_ends.push(end);
        Ok(())
    }

    /// The function holding `address`: the last text symbol at or before it; of aliases, the first
    /// listed, as the kernel names it itself (`%ps`, `bpf::kernel_names`).
    pub(super) fn name(&mut self, address: u64) -> Option<&str> {
        let offset = u32::try_from(address.checked_sub(self.base)?).ok()?;
        let at = self
            .symbols
            .partition_point(|s| s.0 <= offset)
            .checked_sub(1)?;
        let holder = self.symbols.get(at)?.0;
        let first = self.symbols[..at].partition_point(|s| s.0 < holder);
        let index = self.symbols.get(first)?.1 as usize;
        let (block, at) = (index / BLOCK, index % BLOCK);
        if self.open.as_ref().is_none_or(|(open, _, _)| *open != block) {
            self.open = Some(self.inflate(block)?);
        }
        let (_, names, ends) = self.open.as_ref()?;
        let start = match at {
            0 => 0,
            _ => *ends.get(at - 1)? as usize + 1,
        };
        names.get(start..*ends.get(at)? as usize)
    }

    /// Block `block`'s names and where each ends.
    fn inflate(&self, block: usize) -> Option<(usize, String, Vec<u32>)> {
        let start = match block {
            0 => 0,
            _ => *self.block_ends.get(block - 1)? as usize,
        };
        let end = *self.block_ends.get(block)? as usize;
        let mut names = String::new();
        DeflateDecoder::new(self.packed.get(start..end)?)
            .read_to_string(&mut names)
            .ok()?;
        let ends = names.match_indices('\n').map(|(i, _)| i as u32).collect();
        Some((block, names, ends))
    }

    /// Whether any symbol was read.
    pub(super) fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

/// The names of `addrs` (as [`Kallsyms::name`] gives them) from one pass over the running kernel's
/// kallsyms that keeps nothing else: for a batch asked once (a recording's only window) the table's
/// parse and compression (~20 ms of a 50 ms load) buy nothing. Empty when the symbols are hidden.
pub(super) fn names_once(addrs: &[u64]) -> std::io::Result<Vec<Option<String>>> {
    names_in(std::io::BufReader::new(std::fs::File::open(PATH)?), addrs)
}

fn names_in(input: impl BufRead, addrs: &[u64]) -> std::io::Result<Vec<Option<String>>> {
    let mut wanted = addrs.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    // Per wanted address, the highest symbol above the wanted address before it and at or below it
    // (one binary search per symbol, however the listing is ordered); then each address with none
    // of its own takes its predecessor's, the highest symbol below that.
    let mut best: Vec<Option<(u64, String)>> = vec![None; wanted.len()];
    each_text_symbol(input, |address, name| {
        let i = wanted.partition_point(|&w| w < address);
        if let Some(slot) = best.get_mut(i) {
            match slot {
                // Of aliases at one address, the first listed stays, as in the table.
                Some((at, kept)) if *at < address => {
                    *at = address;
                    kept.clear();
                    kept.push_str(name);
                }
                Some(_) => {}
                None => *slot = Some((address, name.to_owned())),
            }
        }
        Ok(())
    })?;
    for i in 1..best.len() {
        if best[i].is_none() {
            best[i] = best[i - 1].clone();
        }
    }
    Ok(addrs
        .iter()
        .map(|a| {
            let i = wanted.partition_point(|w| w < a);
            best.get(i)?.as_ref().map(|(_, name)| name.clone())
        })
        .collect())
}

/// Calls `f` with the address and name of each text symbol with an address in kallsyms `input`.
fn each_text_symbol(
    mut input: impl BufRead,
    mut f: impl FnMut(u64, &str) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut fields = line.split_ascii_whitespace();
        let (Some(address), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !matches!(kind, "t" | "T" | "w" | "W") {
            continue;
        }
        match u64::from_str_radix(address, 16) {
            Ok(address) if address != 0 => f(address, name)?,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_symbol_at_or_before_an_address_names_it() {
        let text = "ffffffff81000000 T _text\n\
                    ffffffff81001000 t do_one\n\
                    ffffffff81002000 D some_data\n\
                    ffffffff81003000 T do_two\n\
                    ffffffffc0001000 t mod_fn\t[some_module]\n\
                    0000000000000000 T hidden\n";
        let mut k = Kallsyms::parse(text.as_bytes()).unwrap();
        assert_eq!(k.name(0xffffffff81001010), Some("do_one"));
        // Data is not a function: the text symbol before it still holds the address.
        assert_eq!(k.name(0xffffffff81002010), Some("do_one"));
        assert_eq!(k.name(0xffffffff81003000), Some("do_two"));
        assert_eq!(k.name(0xffffffffc0001004), Some("mod_fn"));
        assert_eq!(k.name(0xffffffff80000000), None);
    }

    #[test]
    fn names_in_many_blocks_out_of_order_match_a_plain_search() {
        // Five blocks' worth, listed out of address order (as modules come after the core kernel),
        // with aliases: one address listed twice, the first name winning.
        let mut text = String::new();
        let mut plain: Vec<(u64, String)> = Vec::new();
        for i in 0..(BLOCK * 5 + 7) as u64 {
            let address = 0xffff_ffff_8100_0000 + ((i * 7919) % 4096) * 0x40;
            let name = format!("fn_{i}_{}", "x".repeat((i % 13) as usize));
            text.push_str(&format!("{address:x} t {name}\n"));
            if plain.iter().all(|(a, _)| *a != address) {
                plain.push((address, name));
            }
        }
        plain.sort();
        let mut k = Kallsyms::parse(text.as_bytes()).unwrap();
        for (address, name) in &plain {
            assert_eq!(k.name(*address + 3), Some(name.as_str()), "{address:x}");
        }
        // Lookups jumping between blocks give the same answers.
        for (address, name) in plain.iter().rev().step_by(17) {
            assert_eq!(k.name(*address), Some(name.as_str()));
        }
        assert!(
            k.packed.len() < text.len() / 2,
            "{} of {}",
            k.packed.len(),
            text.len()
        );
    }

    /// The running kernel's table, and addresses `offsets` past every `step`-th of its symbols,
    /// across the whole listing (modules included).
    fn running_kernel(step: usize, offsets: &'static [u64]) -> (Kallsyms, Vec<u64>) {
        let table = Kallsyms::load().expect("read /proc/kallsyms (the tests run as root)");
        assert!(
            !table.is_empty(),
            "kallsyms hides its addresses: run the tests as root"
        );
        let addrs = table
            .symbols
            .iter()
            .step_by(step)
            .flat_map(|&(offset, _)| {
                let at = table.base + u64::from(offset);
                offsets.iter().map(move |o| at + o)
            })
            .collect();
        (table, addrs)
    }

    #[test]
    fn one_pass_names_match_the_table_on_the_running_kernel() {
        // Addresses at, inside and between symbols, below the lowest, and repeated.
        let (mut table, mut addrs) = running_kernel(97, &[0, 1, 0x35]);
        addrs.push(table.base - 1);
        addrs.push(addrs[7]);
        addrs.reverse();
        let once = names_once(&addrs).unwrap();
        assert_eq!(once.len(), addrs.len());
        let mut named = 0;
        for (address, name) in addrs.iter().zip(&once) {
            assert_eq!(name.as_deref(), table.name(*address), "{address:x}");
            named += usize::from(name.is_some());
        }
        assert!(named + 1 >= addrs.len(), "{named} of {}", addrs.len());
    }

    #[test]
    fn the_kernels_own_names_match_the_table() {
        use crate::symbolize::NameKernel as _;
        let (_ebpf, mut kernel) = crate::bpf::kernel_names::load_for_tests();
        // Symbols at their start and one byte in, and an address below every symbol (no name).
        let (mut table, mut addrs) = running_kernel(41, &[0, 1]);
        addrs.push(table.base - 0x1000);
        let names = kernel.names(&addrs).expect("running sonde_kernel_names");
        assert_eq!(names.len(), addrs.len());
        let differ: Vec<String> = addrs
            .iter()
            .zip(&names)
            .filter_map(|(a, n)| {
                let kept = table.name(*a);
                (n.as_deref() != kept).then(|| format!("{a:x}: kernel {n:?}, table {kept:?}"))
            })
            .collect();
        assert!(
            differ.is_empty(),
            "{} of {}: {differ:#?}",
            differ.len(),
            addrs.len()
        );
        assert_eq!(names.last(), Some(&None));
    }

    #[test]
    fn one_pass_takes_the_first_alias_and_the_nearest_symbol_below() {
        let text = "ffffffff81003000 T late\n\
                    ffffffff81001000 t early\n\
                    ffffffff81001000 t early_alias\n\
                    ffffffff81002000 D some_data\n\
                    0000000000000000 T hidden\n";
        let names = names_in(
            text.as_bytes(),
            &[
                0xffffffff81003010,
                0xffffffff81002010,
                0xffffffff81000fff,
                0xffffffff81001000,
            ],
        )
        .unwrap();
        assert_eq!(
            names,
            [Some("late"), Some("early"), None, Some("early")].map(|n| n.map(str::to_owned))
        );
    }

    #[test]
    fn hidden_addresses_give_no_symbols() {
        let mut k =
            Kallsyms::parse("0000000000000000 T _text\n0000000000000000 t f\n".as_bytes()).unwrap();
        assert!(k.is_empty());
        assert_eq!(k.name(0xffffffff81000000), None);
    }

    #[test]
    fn the_running_kernel_names_its_own_functions() {
        let mut k = Kallsyms::load().expect("read /proc/kallsyms (the tests run as root)");
        assert!(
            !k.is_empty(),
            "kallsyms shows no addresses: the tests run as root"
        );
        let schedule = std::fs::read_to_string(PATH)
            .unwrap()
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(2) == Some(&"schedule")).then(|| u64::from_str_radix(f[0], 16).unwrap())
            })
            .expect("schedule in kallsyms");
        assert_eq!(k.name(schedule + 1), Some("schedule"));
    }
}
