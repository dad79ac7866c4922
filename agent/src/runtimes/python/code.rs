//! Reads one code object (`PyCodeObject`) out of a CPython process at the address the kernel stored
//! for a Python frame: its name (`co_qualname` from 3.11, `co_name` before), file (`co_filename`),
//! first line (`co_firstlineno`) and line table (`co_linetable`, `co_lnotab` in 3.9).
//!
//! The address may be stale (the code was freed between the sample and now) or garbage: the object's
//! type is checked to be `code` (its `tp_name`; the type's address is remembered once checked), every
//! length is bounded before it is read, and any failure is an error for the caller to count.

use super::{
    linetable::{Format, LineTable},
    offsets::Offsets,
    strings::{ObjectError, field, read_bytes, read_str},
};
use crate::runtimes::memory::{Copied, ProcessMemory};

/// Longest function name read (characters).
const MAX_NAME_CHARS: usize = 1024;
/// Longest file name read (characters).
const MAX_FILE_CHARS: usize = 4096;
/// Largest line table read (bytes): a function of tens of thousands of lines.
const MAX_TABLE_BYTES: usize = 64 * 1024;
/// `PyObject.ob_type`.
const OB_TYPE: u64 = 8;
/// `PyTypeObject.tp_name`: after `PyObject_VAR_HEAD` in every CPython 3.
const TP_NAME: u64 = 24;
/// The `tp_name` of `PyCode_Type`, with its terminating NUL.
const CODE_TYPE_NAME: &[u8] = b"code\0";

/// What the kernel read of a code object as its frame ran (`proc_event::PYTHON_CODE`): the addresses
/// of its name and file strings (both read: never 0), and the first bytes of each (`sonde_abi::python::CodeEvent`; empty
/// from an event that carried none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Remains<'a> {
    pub(crate) name: u64,
    pub(crate) file: u64,
    pub(crate) name_copy: &'a [u8],
    pub(crate) file_copy: &'a [u8],
}

/// What a Python frame is named from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Code {
    /// `co_qualname` (3.11+) or `co_name`.
    pub(crate) name: String,
    /// `co_filename`.
    pub(crate) file: String,
    /// `co_firstlineno`.
    pub(crate) first_line: u32,
    /// The line table.
    pub(crate) lines: LineTable,
}

impl Code {
    /// Bytes held (for the cache's bound).
    pub(crate) fn size(&self) -> usize {
        self.name.len() + self.file.len() + self.lines.bytes().len()
    }
}

/// Reads the code objects of one process.
pub(crate) struct CodeReader<'a> {
    mem: ProcessMemory,
    offsets: &'a Offsets,
    format: Format,
}

impl<'a> CodeReader<'a> {
    /// A reader for process `pid`, whose interpreter has `offsets` and line tables in `format`.
    pub(crate) fn new(pid: u32, offsets: &'a Offsets, format: Format) -> Self {
        Self {
            mem: ProcessMemory::new(pid),
            offsets,
            format,
        }
    }

    /// The code object at `addr`. `code_type` is the address of the process's `PyCode_Type` once one
    /// object was checked to be code (then a type at another address is refused without reading its
    /// name); the first check sets it. With `seen`, what the walk read of the object, an object whose
    /// strings are not those is refused: the code was freed and another now lives at its address.
    pub(crate) fn read(
        &self,
        addr: u64,
        code_type: &mut Option<u64>,
        seen: Option<&Remains<'_>>,
    ) -> Result<Code, ObjectError> {
        const WHAT: &str = "code object";
        let o = self.offsets;
        let name_off = o.code_name_field();
        let span = [
            OB_TYPE,
            name_off,
            o.code_filename,
            o.code_firstlineno,
            o.code_linetable,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
            + 8;
        let mut head = vec![0u8; span as usize];
        self.mem
            .read(addr, &mut head)
            .map_err(|source| ObjectError::Memory {
                what: WHAT,
                addr,
                source,
            })?;
        let ptr = |off| field::<8>(&head, off, WHAT, addr).map(u64::from_le_bytes);
        self.check_type(addr, ptr(OB_TYPE)?, code_type)?;
        if let Some(seen) = seen {
            let now = (ptr(name_off)?, ptr(o.code_filename)?);
            if now != (seen.name, seen.file) {
                return Err(ObjectError::Implausible {
                    what: WHAT,
                    addr,
                    why: format!(
                        "its strings ({:#x}, {:#x}) are not those its frame ran with ({:#x}, {:#x}): \
                         another code object took its place",
                        now.0, now.1, seen.name, seen.file
                    ),
                });
            }
        }
        let first_line = i32::from_le_bytes(field(&head, o.code_firstlineno, WHAT, addr)?);
        let first_line = u32::try_from(first_line)
            .ok()
            .filter(|&l| l > 0)
            .ok_or_else(|| ObjectError::Implausible {
                what: WHAT,
                addr,
                why: format!("first line {first_line}"),
            })?;
        // The strings as the walk copied them where it did: the object may be freed and replaced
        // between two of these reads, the copies were taken at once.
        let (name_copy, file_copy) =
            seen.map_or((&[][..], &[][..]), |r| (r.name_copy, r.file_copy));
        let name = self.string(ptr(name_off)?, name_copy, MAX_NAME_CHARS, "function name")?;
        let file = self.string(
            ptr(o.code_filename)?,
            file_copy,
            MAX_FILE_CHARS,
            "file name",
        )?;
        let table = read_bytes(
            &self.mem,
            o,
            ptr(o.code_linetable)?,
            MAX_TABLE_BYTES,
            "line table",
        )?;
        Ok(Code {
            name,
            file,
            first_line,
            lines: LineTable::new(self.format, first_line, table.into()),
        })
    }

    /// A code object freed before it was read, from what the kernel read of it while it ran: its
    /// name and file strings, as the kernel copied them, else read now (a string too long for the
    /// copy outlives the code when it is shared: a module's file name, with its functions). No line:
    /// the line table went with the object.
    pub(crate) fn read_remains(&self, remains: &Remains<'_>) -> Result<Code, ObjectError> {
        let name = self.string(
            remains.name,
            remains.name_copy,
            MAX_NAME_CHARS,
            "function name",
        )?;
        if name.is_empty() {
            return Err(ObjectError::Implausible {
                what: "function name",
                addr: remains.name,
                why: "empty".into(),
            });
        }
        let file = self.string(remains.file, remains.file_copy, MAX_FILE_CHARS, "file name")?;
        Ok(Code {
            name,
            file,
            first_line: 0,
            lines: LineTable::new(self.format, 0, Box::new([])),
        })
    }

    /// The `str` at `addr` from `copy` (the kernel's copy of its first bytes) when it holds the whole
    /// string, else read from the process.
    fn string(
        &self,
        addr: u64,
        copy: &[u8],
        max: usize,
        what: &'static str,
    ) -> Result<String, ObjectError> {
        let o = self.offsets;
        let copied = Copied {
            base: addr,
            bytes: copy,
        };
        read_str(&copied, o, addr, max, what).or_else(|_| read_str(&self.mem, o, addr, max, what))
    }

    /// Checks that `ty`, the object's type, is `PyCode_Type`.
    fn check_type(&self, addr: u64, ty: u64, known: &mut Option<u64>) -> Result<(), ObjectError> {
        let not_code = |why: String| ObjectError::Implausible {
            what: "code object",
            addr,
            why,
        };
        match *known {
            Some(code_type) if code_type == ty => return Ok(()),
            Some(code_type) => {
                return Err(not_code(format!(
                    "its type {ty:#x} is not the code type {code_type:#x}"
                )));
            }
            None => {}
        }
        let name_ptr = self
            .mem
            .u64(ty + TP_NAME)
            .map_err(|e| not_code(format!("its type {ty:#x} cannot be read: {e}")))?;
        let mut name = [0u8; CODE_TYPE_NAME.len()];
        self.mem
            .read(name_ptr, &mut name)
            .map_err(|e| not_code(format!("its type's name cannot be read: {e}")))?;
        if name != CODE_TYPE_NAME {
            return Err(not_code(format!(
                "its type is {:?}, not code",
                String::from_utf8_lossy(&name)
            )));
        }
        *known = Some(ty);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, BufReader};

    use sonde_abi::python::{FILE_COPY, NAME_COPY};

    use super::*;
    use crate::runtimes::python::{offsets, peer::Peer};

    /// Prints, for code objects of several string kinds (ASCII, Latin-1, 2-byte and 4-byte
    /// characters), `id(code)`, name (qualified from 3.11), file, first line and line table, then a
    /// forged code object whose name claims 2^40 characters, then waits for stdin to close.
    const SCRIPT: &str = r#"
import ctypes, sys

class Outer:
    class Inner:
        def busy_loop(self, n):
            total = 0
            for i in range(n):
                total += i
            return total

def größe():
    return 1

def 関数():
    return 2

ns = {}
exec(compile("\n\ndef emoji_file():\n    return 3\n", "/tmp/😀/f.py", "exec"), ns)

def name(c):
    return getattr(c, "co_qualname", c.co_name)

def table(c):
    return c.co_linetable if sys.version_info >= (3, 10) else c.co_lnotab

for f in [Outer.Inner.busy_loop, größe, 関数, ns["emoji_file"]]:
    c = f.__code__
    print("code", id(c), name(c), c.co_filename, c.co_firstlineno, table(c).hex(), sep="\t")

# A forged str claiming 2^40 characters, and a copy of a real code object naming it.
real = Outer.Inner.busy_loop.__code__
fake_str = ctypes.create_string_buffer(ctypes.string_at(id("abc"), 64), 64)
ctypes.c_int64.from_buffer(fake_str, 16).value = 1 << 40
head = bytearray(ctypes.string_at(id(real), 256))
target = id(name(real)).to_bytes(8, "little")
at = head.index(target)
head[at:at + 8] = ctypes.addressof(fake_str).to_bytes(8, "little")
fake_code = ctypes.create_string_buffer(bytes(head), 256)
print("forged", ctypes.addressof(fake_code), sep="\t")
print("str", id("not code"), sep="\t")
print("ready", flush=True)
sys.stdin.read()
"#;

    /// Runs `python` on [`SCRIPT`]; its pid and rows once it is ready.
    fn start(python: &str) -> (Peer, Vec<Vec<String>>) {
        let mut peer = Peer::start(python, SCRIPT);
        let out = BufReader::new(peer.0.stdout.take().unwrap());
        let mut rows = Vec::new();
        for line in out.lines() {
            let line = line.unwrap();
            if line == "ready" {
                return (peer, rows);
            }
            rows.push(line.split('\t').map(str::to_owned).collect());
        }
        panic!("{python} ended before it was ready: {rows:?}");
    }

    /// Reads the code objects of a live `python` with `offsets` and compares them with what the
    /// interpreter says about them; forged and wrong objects are refused.
    fn reads_code_objects(python: &str, offsets: Option<Offsets>, format: Format) {
        let (peer, rows) = start(python);
        let pid = peer.0.id();
        // Without a table (3.13+), the interpreter describes itself: found as sonde finds it.
        let offsets = offsets.unwrap_or_else(|| {
            let mut table = crate::capture::Capturer::with(crate::runtimes::Runtime::Python);
            let info = table.capture(pid).expect("the interpreter runs");
            let found = crate::runtimes::python::interpreter_of(&info);
            found
                .unwrap_or_else(|| panic!("{python}: no interpreter found"))
                .offsets
                .clone()
        });
        let reader = CodeReader::new(pid, &offsets, format);
        let mut code_type = None;
        let codes: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == "code").collect();
        assert_eq!(codes.len(), 4, "{python}: rows {rows:?}");
        // What the kernel sends of each object as its frame runs: its strings' addresses and first
        // bytes (`sonde_abi::python::CodeEvent`).
        let mut remains = Vec::new();
        for row in &codes {
            let addr: u64 = row[1].parse().unwrap();
            let mem = ProcessMemory::new(pid);
            let name = mem.u64(addr + offsets.code_name_field()).unwrap();
            let file = mem.u64(addr + offsets.code_filename).unwrap();
            let (mut name_copy, mut file_copy) = (vec![0; NAME_COPY], vec![0; FILE_COPY]);
            mem.read(name, &mut name_copy).unwrap();
            mem.read(file, &mut file_copy).unwrap();
            let code = reader
                .read(addr, &mut code_type, None)
                .unwrap_or_else(|e| panic!("{python}: reading {} at {addr:#x}: {e}", row[2]));
            let hex: String = code
                .lines
                .bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                (&code.name, &code.file, code.first_line.to_string(), &hex),
                (&row[2], &row[3], row[4].clone(), &row[5]),
                "{python}"
            );
            assert!(code.lines.line(0).is_some_and(|l| l >= code.first_line));
            let seen = Remains {
                name,
                file,
                name_copy: &name_copy,
                file_copy: &file_copy,
            };
            let again = reader.read(addr, &mut code_type, Some(&seen));
            assert_eq!(again.ok(), Some(code), "{python}: the object its frame ran");
            let moved = Remains { name: file, ..seen };
            assert!(
                matches!(
                    reader.read(addr, &mut code_type, Some(&moved)),
                    Err(ObjectError::Implausible { .. })
                ),
                "{python}: an object whose name is not the one its frame ran with is refused"
            );
            remains.push((
                row[2].clone(),
                row[3].clone(),
                name_copy,
                file_copy,
                name,
                file,
            ));
        }
        assert!(code_type.is_some(), "the code type is remembered");
        let field = |tag: &str| -> u64 {
            rows.iter().find(|r| r[0] == tag).unwrap()[1]
                .parse()
                .unwrap()
        };
        match reader.read(field("forged"), &mut code_type, None) {
            Err(ObjectError::Length { len, max, .. }) => {
                assert_eq!((len, max), (1 << 40, MAX_NAME_CHARS), "{python}")
            }
            other => panic!("{python}: a name of 2^40 characters must be refused: {other:?}"),
        }
        let s = field("str");
        assert!(
            matches!(
                reader.read(s, &mut code_type, None),
                Err(ObjectError::Implausible { .. })
            ),
            "{python}: a str is not a code object (type known)"
        );
        assert!(
            matches!(
                reader.read(s, &mut None, None),
                Err(ObjectError::Implausible { .. })
            ),
            "{python}: a str is not a code object (type checked by name)"
        );
        assert!(
            matches!(
                reader.read(8, &mut None, None),
                Err(ObjectError::Memory { .. })
            ),
            "{python}: an unmapped address is a memory error"
        );

        // The process gone, its frames are named from the copies alone; a copy that ends before
        // its string does names nothing.
        drop(peer);
        for (name, file, name_copy, file_copy, name_at, file_at) in &remains {
            let copies = Remains {
                name: *name_at,
                file: *file_at,
                name_copy,
                file_copy,
            };
            let code = reader
                .read_remains(&copies)
                .unwrap_or_else(|e| panic!("{python}: {name} from its copies: {e}"));
            assert_eq!((&code.name, &code.file, code.first_line), (name, file, 0));
            let short = Remains {
                name_copy: &name_copy[..offsets.unicode_ascii_data as usize],
                ..copies
            };
            assert!(
                reader.read_remains(&short).is_err(),
                "{python}: a copy of {name}'s header alone names nothing"
            );
        }
    }

    /// Debian's `/usr/bin/python3` (3.11).
    #[test]
    fn reads_code_objects_of_debians_python() {
        reads_code_objects(
            "/usr/bin/python3",
            offsets::for_version(3, 11),
            Format::Locations,
        );
    }

    /// The pyenv builds of the machine image: 3.9 and 3.10 (`co_name`, a `wstr` in every string
    /// header), 3.12 (no `ready` bit) and 3.13 (offsets from the runtime's `_Py_DebugOffsets`).
    #[test]
    fn reads_code_objects_of_the_pyenv_builds() {
        for (version, offsets, format) in [
            ("3.9.18", offsets::for_version(3, 9), Format::Lnotab),
            ("3.10.13", offsets::for_version(3, 10), Format::Pep626),
            ("3.12.1", offsets::for_version(3, 12), Format::Locations),
            ("3.13.0", None, Format::Locations),
        ] {
            reads_code_objects(
                &format!("/root/.pyenv/versions/{version}/bin/python3"),
                offsets,
                format,
            );
        }
    }
}
