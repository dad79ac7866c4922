//! Kernel function names from `/proc/kallsyms`, kept compact: one string of names and a sorted array
//! of (address, name range). blazesym's kernel resolver holds each of the ~120,000 names in its own
//! `String` beside a wider record, 7.8 MiB here against 4.9 for this, for the same answer: the text
//! symbol at or before an address. Only text symbols (`t`, `T`, `w`, `W`) are kept, the functions a
//! stack holds.

use std::io::BufRead;

/// Where the running kernel lists its symbols.
const PATH: &str = "/proc/kallsyms";

/// Text symbols by address.
#[derive(Default)]
pub(super) struct Kallsyms {
    /// (address, start and end of its name in `names`), sorted by address.
    symbols: Vec<(u64, u32, u32)>,
    names: String,
}

impl Kallsyms {
    /// Reads the running kernel's symbols. Empty (every lookup fails) when they are hidden: without
    /// root, or with `kernel.kptr_restrict` set, kallsyms shows every address as 0. Read twice, to
    /// size the arrays exactly first: growing them by doubling would hold about twice the memory
    /// while they fill, which is the agent's peak.
    pub(super) fn load() -> std::io::Result<Self> {
        let open = || std::fs::File::open(PATH).map(std::io::BufReader::new);
        let (count, bytes) = Self::size(open()?)?;
        Self::parse_into(open()?, count, bytes)
    }

    #[cfg(test)]
    fn parse(input: impl BufRead + Clone) -> std::io::Result<Self> {
        let (count, bytes) = Self::size(input.clone())?;
        Self::parse_into(input, count, bytes)
    }

    /// Text symbols and the bytes of their names.
    fn size(input: impl BufRead) -> std::io::Result<(usize, usize)> {
        let (mut count, mut bytes) = (0, 0);
        each_text_symbol(input, |_, name| {
            count += 1;
            bytes += name.len();
        })?;
        Ok((count, bytes))
    }

    /// Parses kallsyms lines (`ADDRESS TYPE NAME [MODULE]`) into arrays of the given sizes.
    fn parse_into(input: impl BufRead, count: usize, bytes: usize) -> std::io::Result<Self> {
        let mut out = Self {
            symbols: Vec::with_capacity(count),
            names: String::with_capacity(bytes),
        };
        each_text_symbol(input, |address, name| {
            let start = out.names.len();
            // Past 4 GiB of names (never on Linux), the rest stays unnamed.
            if let (Ok(s), Ok(e)) = (u32::try_from(start), u32::try_from(start + name.len())) {
                out.names.push_str(name);
                out.symbols.push((address, s, e));
            }
        })?;
        // In place (no scratch); of aliases at one address, the last listed wins a lookup.
        out.symbols.sort_unstable_by_key(|s| (s.0, s.1));
        Ok(out)
    }

    /// The function holding `address`: the last text symbol at or before it.
    pub(super) fn name(&self, address: u64) -> Option<&str> {
        let after = self.symbols.partition_point(|s| s.0 <= address);
        let (_, start, end) = *self.symbols.get(after.checked_sub(1)?)?;
        self.names.get(start as usize..end as usize)
    }

    /// Whether any symbol was read.
    pub(super) fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

/// Calls `f` with the address and name of each text symbol with an address in kallsyms `input`.
fn each_text_symbol(mut input: impl BufRead, mut f: impl FnMut(u64, &str)) -> std::io::Result<()> {
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
            Ok(address) if address != 0 => f(address, name),
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
        let k = Kallsyms::parse(text.as_bytes()).unwrap();
        assert_eq!(k.name(0xffffffff81001010), Some("do_one"));
        // Data is not a function: the text symbol before it still holds the address.
        assert_eq!(k.name(0xffffffff81002010), Some("do_one"));
        assert_eq!(k.name(0xffffffff81003000), Some("do_two"));
        assert_eq!(k.name(0xffffffffc0001004), Some("mod_fn"));
        assert_eq!(k.name(0xffffffff80000000), None);
    }

    #[test]
    fn hidden_addresses_give_no_symbols() {
        let k =
            Kallsyms::parse("0000000000000000 T _text\n0000000000000000 t f\n".as_bytes()).unwrap();
        assert!(k.is_empty());
        assert_eq!(k.name(0xffffffff81000000), None);
    }

    #[test]
    fn the_running_kernel_names_its_own_functions() {
        let k = Kallsyms::load().expect("read /proc/kallsyms (the tests run as root)");
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
