//! Instruction offset -> source line, from a code object's line table, in the three formats CPython used:
//! - 3.9 `co_lnotab`: (byte offset increment, signed line increment) pairs; a pair marks where a line
//!   starts (`Objects/lnotab_notes.txt` of 3.9, `PyCode_Addr2Line`).
//! - 3.10 `co_linetable` (PEP 626): (range length in bytes, signed line delta) pairs, each a range; a line
//!   delta of -128 means "no line" (`Objects/lnotab_notes.txt` of 3.10, `_PyCode_CheckLineNumber`).
//! - 3.11+ location table (`co_linetable`): one entry per range of 1-8 code units, a first byte with the
//!   high bit set (bits 3-6 the form, bits 0-2 the length - 1), then varints (`Objects/locations.md`).
//!
//! Tables come from another process and may be garbage: decoding is bounded by the table's length and
//! never panics; an offset the table does not cover has no line.

/// The format of a line table, by interpreter version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Format {
    /// 3.9 `co_lnotab`; instruction offsets are `f_lasti` in bytes.
    Lnotab,
    /// 3.10 `co_linetable`; instruction offsets are `f_lasti` in code units.
    Pep626,
    /// 3.11+ location table; instruction offsets in code units.
    Locations,
}

impl Format {
    /// The format of CPython `version`, or None for a version sonde does not read.
    pub(crate) fn for_version(version: (u8, u8)) -> Option<Format> {
        match version {
            (3, 9) => Some(Format::Lnotab),
            (3, 10) => Some(Format::Pep626),
            (3, minor) if minor >= 11 => Some(Format::Locations),
            _ => None,
        }
    }

    /// Bytes of bytecode per unit of the instruction offset the kernel stores (`sonde_abi::python`).
    fn bytes_per_instr(self) -> u64 {
        match self {
            Format::Lnotab => 1,
            // `_Py_CODEUNIT` is 2 bytes; the tables count bytes.
            Format::Pep626 | Format::Locations => 2,
        }
    }
}

/// One code object's line table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LineTable {
    format: Format,
    first_line: u32,
    bytes: Box<[u8]>,
}

impl LineTable {
    /// The table `bytes` of a code object starting at `first_line` (`co_firstlineno`).
    pub(crate) fn new(format: Format, first_line: u32, bytes: Box<[u8]>) -> Self {
        Self {
            format,
            first_line,
            bytes,
        }
    }

    /// The table as read.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The source line of the instruction at `instr` (in the unit the kernel stores for this format),
    /// or None where the table has no line (compiler-generated code, an offset past the table).
    pub(crate) fn line(&self, instr: u32) -> Option<u32> {
        let addr = i64::from(instr) * self.format.bytes_per_instr() as i64;
        let first = i64::from(self.first_line);
        let line = match self.format {
            Format::Lnotab => lnotab_line(&self.bytes, first, addr),
            Format::Pep626 => pep626_line(&self.bytes, first, addr),
            Format::Locations => locations_line(&self.bytes, first, addr),
        }?;
        u32::try_from(line).ok().filter(|&l| l > 0)
    }
}

/// 3.9: the line of the last pair starting at or before `addr` (`PyCode_Addr2Line`). Every offset has a
/// line, the last one reaching to the end of the code.
fn lnotab_line(table: &[u8], first: i64, addr: i64) -> Option<i64> {
    let mut line = first;
    let mut start = 0i64;
    for pair in table.chunks_exact(2) {
        start += i64::from(pair[0]);
        if start > addr {
            break;
        }
        line += i64::from(pair[1] as i8);
    }
    Some(line)
}

/// 3.10: the range holding `addr`; -128 is "no line" and leaves the running line as it was.
fn pep626_line(table: &[u8], first: i64, addr: i64) -> Option<i64> {
    const NO_LINE: i8 = -128;
    let mut line = first;
    let mut start = 0i64;
    for pair in table.chunks_exact(2) {
        let end = start + i64::from(pair[0]);
        let delta = pair[1] as i8;
        let this = if delta == NO_LINE {
            None
        } else {
            line += i64::from(delta);
            Some(line)
        };
        if (start..end).contains(&addr) {
            return this;
        }
        start = end;
    }
    None
}

/// Location entry forms (bits 3-6 of an entry's first byte), `Include/cpython/code.h`
/// (`_PyCodeLocationInfoKind`); 0-9 are the short forms, all on the previous entry's line.
mod form {
    pub(super) const ONE_LINE1: u8 = 11;
    pub(super) const ONE_LINE2: u8 = 12;
    pub(super) const NO_COLUMNS: u8 = 13;
    pub(super) const LONG: u8 = 14;
    pub(super) const NONE: u8 = 15;
}

/// 3.11+: walks the entries, each `(first byte & 7) + 1` code units long, to the one holding `addr`.
fn locations_line(table: &[u8], first: i64, addr: i64) -> Option<i64> {
    let mut line = first;
    let mut start = 0i64;
    let mut i = 0;
    while i < table.len() {
        let head = table[i];
        if head & 0x80 == 0 {
            // Not an entry start: a corrupt table. Stop rather than guess.
            return None;
        }
        let code = (head >> 3) & 15;
        let end = start + (i64::from(head & 7) + 1) * 2;
        let delta = match code {
            form::NO_COLUMNS | form::LONG => signed_varint(&table[i + 1..])?,
            form::ONE_LINE1 => 1,
            form::ONE_LINE2 => 2,
            _ => 0,
        };
        // The table comes from the process's memory: deltas that overflow are a corrupt table.
        line = line.checked_add(delta)?;
        if (start..end).contains(&addr) {
            return (code != form::NONE).then_some(line);
        }
        start = end;
        // The entry's other bytes (varints, columns) never have the high bit set.
        i += 1;
        while i < table.len() && table[i] & 0x80 == 0 {
            i += 1;
        }
    }
    None
}

/// A varint of the location table: 6-bit chunks, least significant first, 0x40 when more follow.
fn varint(bytes: &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (n, &b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 63) << (6 * n);
        if b & 64 == 0 {
            return Some(value);
        }
    }
    None
}

/// A signed varint: the sign in the lowest bit.
fn signed_varint(bytes: &[u8]) -> Option<i64> {
    let v = varint(bytes)?;
    let magnitude = i64::try_from(v >> 1).ok()?;
    Some(if v & 1 != 0 { -magnitude } else { magnitude })
}

/// CPython line tables (`co_lnotab`, PEP 626 `co_linetable`, 3.11+ location tables), read from the
/// process's memory. The first byte picks the version, the next four the instruction offset.
pub(crate) fn fuzz(bytes: &[u8]) {
    let [version, a, b, c, d, table @ ..] = bytes else {
        return;
    };
    let Some(format) = Format::for_version((3, 9 + version % 5)) else {
        return;
    };
    let table = LineTable::new(format, 1, table.into());
    let _ = table.line(u32::from_le_bytes([*a, *b, *c, *d]));
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// Found by the `python_linetable` fuzz target: long-form entries whose line deltas add up past
    /// `i64::MAX` (a panic with overflow checks, a wrapped line without). A corrupt table names no line.
    #[test]
    fn line_deltas_that_overflow_are_a_corrupt_table() {
        let mut table = Vec::new();
        for _ in 0..20 {
            // A LONG entry (form 14, one code unit) with a line delta of +(2^59 - 1).
            table.push(0x80 | (form::LONG << 3));
            table.extend_from_slice(&[0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x3f]);
        }
        let t = LineTable::new(Format::Locations, 1, table.into());
        assert_eq!(t.line(19), None);
        assert_eq!(t.line(0), None, "a line past u32 is no line either");
    }

    /// The 3.9 example of `Objects/lnotab_notes.txt` (3.9): lines start at offsets 0, 6, 50, 350, 361
    /// on lines 1, 2, 7, 207, 208, with the jump of 300 bytes and 200 lines split as the notes say
    /// (`255, 0, 45, 127, 0, 73`). Hand-built from the notes; the pyenv 3.9 build is checked below.
    #[test]
    fn lnotab_example_of_the_cpython_notes() {
        let table = LineTable::new(
            Format::Lnotab,
            1,
            vec![6, 1, 44, 5, 255, 0, 45, 127, 0, 73, 11, 1].into(),
        );
        let expect = [
            (0, 1),
            (5, 1),
            (6, 2),
            (49, 2),
            (50, 7),
            (349, 7),
            (350, 207),
            (360, 207),
            (361, 208),
            (2000, 208),
        ];
        for (lasti, line) in expect {
            assert_eq!(table.line(lasti), Some(line), "f_lasti {lasti} (bytes)");
        }
    }

    /// The 3.10 example of `Objects/lnotab_notes.txt` (3.10), final form, hand-built: ranges 0-6 line
    /// 1, 6-50 line 2, 50-350 line 7 (split 254 + 46 with a zero delta), 350-360 no line, 360-376
    /// line 8, an empty range for line 135, 376-380 line 208. Offsets there are bytes; the kernel stores
    /// code units (half).
    #[test]
    fn pep626_example_of_the_cpython_notes() {
        let no_line = (-128i8) as u8;
        let table = LineTable::new(
            Format::Pep626,
            0,
            vec![
                6, 1, 44, 1, 254, 5, 46, 0, 10, no_line, 16, 1, 0, 127, 4, 73,
            ]
            .into(),
        );
        let expect = [
            (0, Some(1)),
            (2, Some(1)),
            (3, Some(2)),
            (24, Some(2)),
            (25, Some(7)),
            (151, Some(7)),
            (152, Some(7)),
            (174, Some(7)),
            (175, None),
            (179, None),
            (180, Some(8)),
            (187, Some(8)),
            (188, Some(208)),
            (189, Some(208)),
            (190, None),
        ];
        for (lasti, line) in expect {
            assert_eq!(table.line(lasti), line, "f_lasti {lasti} (code units)");
        }
    }

    /// Functions whose tables the real interpreter builds, with every form of the 3.11+ table: short
    /// (same line), one-line (+1, +2), no-columns and long (large and negative deltas), and
    /// no-location entries; and for 3.9/3.10 line jumps beyond one byte's delta. Prints, per function,
    /// its name, first line, table (hex) and `start-end-line` byte ranges from the interpreter itself:
    /// `co_lines()` (3.10+, the C implementation) or `dis.findlinestarts` (3.9).
    const FIXTURE_SCRIPT: &str = r#"
import dis, sys

def simple(a, b):
    c = a + b
    return c * 2

def branches(xs):
    total = 0
    for x in xs:
        if x % 2:
            total += x
        else:
            total -= x
    try:
        total = total // len(xs)
    except ZeroDivisionError:
        total = 0
    return total

def long_jump(x):
    y = (
        x
        +
        1
    )
    return [
        i for i in range(y)
        if i
    ]

exec(compile("def far(a):\n    x = a\n" + "\n" * 500 + "    return (x,\n" + "\n" * 70 + " x)\n", "<far>", "exec"))

class Outer:
    def method(self):
        async def inner():
            return 1
        return inner

for f in [simple, branches, long_jump, far, Outer.method, Outer.method(None)]:
    c = f.__code__
    if sys.version_info >= (3, 10):
        ranges, table = list(c.co_lines()), c.co_linetable
    else:
        starts = list(dis.findlinestarts(c))
        ends = [s for s, _ in starts[1:]] + [len(c.co_code)]
        ranges, table = [(s, e, l) for (s, l), e in zip(starts, ends)], c.co_lnotab
    lines = ";".join("%d-%d-%s" % (s, e, "" if l is None else l) for s, e, l in ranges)
    print(getattr(c, "co_qualname", c.co_name), c.co_firstlineno, table.hex(), lines)
"#;

    /// Decodes the tables `python` builds and compares every instruction with what the interpreter
    /// says about it.
    fn matches_the_interpreter(python: &str, format: Format) {
        let out = Command::new(python)
            .arg("-c")
            .arg(FIXTURE_SCRIPT)
            .output()
            .unwrap_or_else(|e| panic!("running {python} for line table fixtures: {e} (Debian's /usr/bin/python3 is the package python3; the pyenv builds are part of the machine image)"));
        assert!(
            out.status.success(),
            "{python} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let mut functions = 0;
        let mut checked = 0;
        for row in stdout.lines() {
            let cols: Vec<&str> = row.split(' ').collect();
            assert_eq!(cols.len(), 4, "fixture row {row:?}");
            let first: u32 = cols[1].parse().unwrap();
            let table = LineTable::new(format, first, hex(cols[2]).into());
            // What the kernel stores for the instruction at a byte offset.
            let instr = |byte: u32| byte / format.bytes_per_instr() as u32;
            let mut past = 0;
            for range in cols[3].split(';') {
                let parts: Vec<&str> = range.split('-').collect();
                let (start, end): (u32, u32) =
                    (parts[0].parse().unwrap(), parts[1].parse().unwrap());
                let line: Option<u32> = parts[2].parse().ok();
                for byte in (start..end).step_by(2) {
                    assert_eq!(
                        table.line(instr(byte)),
                        line,
                        "{python}: {} at byte {byte}: the interpreter says {line:?}",
                        cols[0]
                    );
                    checked += 1;
                }
                past = past.max(end);
            }
            // 3.9's table has no end: its last line runs on.
            if format != Format::Lnotab {
                assert_eq!(table.line(instr(past)), None, "{}: past the code", cols[0]);
            }
            functions += 1;
        }
        assert_eq!(functions, 6, "fixture functions: {stdout}");
        assert!(
            checked > 50,
            "{python}: only {checked} instructions checked"
        );
    }

    /// Debian's `/usr/bin/python3` (3.11, the location table).
    #[test]
    fn locations_match_debians_python() {
        matches_the_interpreter("/usr/bin/python3", Format::Locations);
    }

    /// The pyenv builds of the machine image: the 3.9 and 3.10 formats against real interpreters
    /// (besides the hand-built examples above), and the location table of 3.12 and 3.13.
    #[test]
    fn every_format_matches_the_pyenv_builds() {
        for (version, format) in [
            ("3.9.18", Format::Lnotab),
            ("3.10.13", Format::Pep626),
            ("3.12.1", Format::Locations),
            ("3.13.0", Format::Locations),
        ] {
            matches_the_interpreter(
                &format!("/root/.pyenv/versions/{version}/bin/python3"),
                format,
            );
        }
    }

    #[test]
    fn garbage_tables_give_no_line_and_never_panic() {
        let garbage: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
        for format in [Format::Lnotab, Format::Pep626, Format::Locations] {
            let t = LineTable::new(format, 10, garbage.clone().into());
            for instr in [0, 1, 100, 4000, u32::MAX] {
                let _ = t.line(instr);
            }
            let empty = LineTable::new(format, 10, Vec::new().into());
            assert!(matches!(empty.line(3), None | Some(10)));
        }
        // A long-form entry cut in the middle of its varint.
        let cut = LineTable::new(Format::Locations, 5, vec![0x80 | (14 << 3), 0x41].into());
        assert_eq!(cut.line(0), None);
        // No line below 1 is reported (a negative delta past the start).
        let negative = LineTable::new(Format::Locations, 1, vec![0x80 | (13 << 3), 0x07].into());
        assert_eq!(negative.line(0), None);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
