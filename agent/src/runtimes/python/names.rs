//! Names the Python frames the kernel stored in user stacks (`sonde_abi::python`): each code object is
//! read once from its process (`python::code`) and cached with the frames built for the instruction
//! offsets seen, so a stack seen again costs hash lookups.
//!
//! The cache is per process and remembers the interpreter it was filled for: a process captured again
//! after an exec has a new interpreter (a new `Arc`), and its old entries are dropped before any is
//! used. Processes gone are dropped by [`PythonNames::retain`]; the whole cache starts over beyond
//! [`MAX_ENTRIES`] or [`MAX_BYTES`]; code that could not be read is asked again the next window.
//! A code object freed and another allocated at its address while the process runs is told apart
//! when the kernel announces the address again (another CPU, or its announcement cache evicted the
//! address) with other string addresses: the later object replaces the first from then on. Frames
//! of both in one window share the address and are named after the one held at the window's end.

use std::{
    collections::{HashMap, HashSet},
    hash::{DefaultHasher, Hash as _, Hasher as _},
    sync::Arc,
};

use sonde_abi::python::PyFrame as Word;

use crate::{
    process::untrusted,
    profile::{Frame, FrameKind, Module, Symbol},
    runtimes::python::{
        code::{Code, CodeReader, Remains},
        detect::Interpreter,
        linetable::Format,
    },
};

/// Code objects plus frames cached, over all processes, before the cache starts over.
const MAX_ENTRIES: usize = 100_000;
/// Bytes of names, file names and line tables cached before the cache starts over (line tables may
/// each be up to 64 KiB).
const MAX_BYTES: usize = 64 << 20;
/// Code objects one process may hold before its own cache starts over (counted as a `budget`
/// refusal): one process spraying code addresses must not flush every other process's names.
const MAX_PROCESS_CODES: usize = MAX_ENTRIES / 8;

/// Pseudo path of the mapping every Python frame is in.
pub(crate) const PYTHON_PATH: &str = "[python]";

/// One process's code objects.
struct Process {
    /// The interpreter the entries were read with; another one (an exec) invalidates them.
    interpreter: Arc<Interpreter>,
    /// `PyCode_Type`'s address once one code object was checked.
    code_type: Option<u64>,
    /// By code address; None when the object could not be read.
    codes: HashMap<u64, Option<Entry>>,
}

/// A code object and the frames of the instruction offsets seen in it.
struct Entry {
    code: Code,
    /// Its name's and file's string addresses as the kernel announced them, if it did.
    seen: Option<(u64, u64)>,
    frames: HashMap<u32, Frame>,
}

/// The Python frame cache.
pub(crate) struct PythonNames {
    processes: HashMap<u32, Process>,
    /// Code objects and frames held.
    entries: usize,
    /// [`Code::size`] of the code objects held.
    bytes: usize,
    module: Arc<Module>,
}

impl Default for PythonNames {
    fn default() -> Self {
        Self {
            processes: HashMap::new(),
            entries: 0,
            bytes: 0,
            module: Arc::new(Module {
                path: PYTHON_PATH.into(),
                build_id: None,
                start: 0,
                limit: u64::MAX,
                file_offset: 0,
            }),
        }
    }
}

impl PythonNames {
    /// Reads the code object of `word` in `pid` unless cached, and builds its frame for `word`'s
    /// instruction offset.
    pub(crate) fn resolve(&mut self, pid: u32, interpreter: &Arc<Interpreter>, word: Word) {
        self.read_code(pid, interpreter, word.code, None);
        let module = &self.module;
        let Some(Some(entry)) = self
            .processes
            .get_mut(&pid)
            .and_then(|p| p.codes.get_mut(&word.code))
        else {
            return;
        };
        if !entry.frames.contains_key(&word.instr) {
            let frame = named_frame(module, &entry.code, word.instr);
            entry.frames.insert(word.instr, frame);
            self.entries += 1;
        }
    }

    /// Reads the code object at `code` in `pid` unless cached: at the window's end, or as soon as the
    /// kernel announces it (`proc_event::PYTHON_CODE`), while the process still runs. `remains`:
    /// the addresses of its name and file strings as the kernel read them, for a code object freed
    /// before this read (announced only).
    pub(crate) fn read_code(
        &mut self,
        pid: u32,
        interpreter: &Arc<Interpreter>,
        code: u64,
        remains: Option<Remains<'_>>,
    ) {
        let process = self.processes.entry(pid).or_insert_with(|| Process {
            interpreter: interpreter.clone(),
            code_type: None,
            codes: HashMap::new(),
        });
        if !Arc::ptr_eq(&process.interpreter, interpreter) {
            // Captured again (exec): nothing read from the old image may name the new one's frames.
            let (entries, bytes) = footprint(&process.codes);
            self.entries -= entries;
            self.bytes -= bytes;
            *process = Process {
                interpreter: interpreter.clone(),
                code_type: None,
                codes: HashMap::new(),
            };
        }
        if process.codes.len() >= MAX_PROCESS_CODES && !process.codes.contains_key(&code) {
            let (entries, bytes) = footprint(&process.codes);
            self.entries -= entries;
            self.bytes -= bytes;
            process.codes.clear();
            untrusted::refusals::count(untrusted::Input::RuntimeCode, untrusted::Reason::Budget);
        }
        let seen = remains.as_ref().map(|r| (r.name, r.file));
        if let Some(held) = process.codes.get(&code)
            && seen.is_some()
            && held
                .as_ref()
                .is_none_or(|e| e.seen.is_some_and(|s| Some(s) != seen))
        {
            // Announced again with what the walk saw: held was unreadable (read it now, with the
            // copies), or another object's (freed, and this one took its address).
            let (entries, bytes) = process
                .codes
                .remove(&code)
                .map_or((0, 0), |e| entry_footprint(&e));
            self.entries -= entries;
            self.bytes -= bytes;
        }
        process.codes.entry(code).or_insert_with(|| {
            self.entries += 1;
            let format = Format::for_version(interpreter.version)?;
            let reader = CodeReader::new(pid, &interpreter.offsets, format);
            let read = reader
                .read(code, &mut process.code_type, remains.as_ref())
                .or_else(|e| match remains {
                    Some(remains) => reader.read_remains(&remains).map_err(|_| e),
                    None => Err(e),
                });
            match read {
                Ok(code) => Some(Entry {
                    code: {
                        self.bytes += code.size();
                        code
                    },
                    seen,
                    frames: HashMap::new(),
                }),
                Err(e) => {
                    // Counted per frame as `python_unreadable`; a stale or garbage address is common
                    // enough (code freed since the sample) not to warn.
                    tracing::debug!(pid, "Python frame left unnamed: {e}");
                    None
                }
            }
        });
    }

    /// The frame of `word` in `pid`, resolved before: named, or (code unreadable, not resolved) the
    /// `[python]` mapping with the code's address and no name.
    pub(crate) fn frame(&self, pid: u32, interpreter: &Arc<Interpreter>, word: Word) -> Frame {
        self.processes
            .get(&pid)
            .filter(|p| Arc::ptr_eq(&p.interpreter, interpreter))
            .and_then(|p| p.codes.get(&word.code)?.as_ref()?.frames.get(&word.instr))
            .cloned()
            .unwrap_or_else(|| Frame {
                address: word.code,
                kind: FrameKind::User,
                return_address: false,
                module: Some(self.module.clone()),
                symbols: Arc::from(Vec::new()),
            })
    }

    /// Drops the processes not in `live_pids`.
    pub(crate) fn retain(&mut self, live_pids: &HashSet<u32>) {
        let (mut entries, mut bytes) = (0, 0);
        self.processes.retain(|pid, p| {
            let keep = live_pids.contains(pid);
            if !keep {
                let (e, b) = footprint(&p.codes);
                entries += e;
                bytes += b;
            }
            keep
        });
        self.entries -= entries;
        self.bytes -= bytes;
    }

    /// Starts over beyond [`MAX_ENTRIES`] or [`MAX_BYTES`] (hot code comes back within a window).
    /// Call between windows, before [`Self::resolve`].
    pub(crate) fn trim(&mut self) {
        if self.entries > MAX_ENTRIES || self.bytes > MAX_BYTES {
            self.processes.clear();
            self.entries = 0;
            self.bytes = 0;
            return;
        }
        // Code that could not be read is asked again next window: the read may have raced the
        // object's creation, and a failure costs one small read.
        for p in self.processes.values_mut() {
            let before = p.codes.len();
            p.codes.retain(|_, e| e.is_some());
            self.entries -= before - p.codes.len();
        }
    }
}

/// (entries, bytes) held for one process's code objects.
fn footprint(codes: &HashMap<u64, Option<Entry>>) -> (usize, usize) {
    codes
        .values()
        .map(entry_footprint)
        .fold((0, 0), |(n, b), (en, eb)| (n + en, b + eb))
}

/// (entries, bytes) held for one code object (unreadable: its entry alone).
fn entry_footprint(entry: &Option<Entry>) -> (usize, usize) {
    match entry {
        Some(e) => (1 + e.frames.len(), e.code.size()),
        None => (1, 0),
    }
}

/// The frame of `code` at `instr`. Its address stands for (function, file, line): encoders keep one
/// location per address in a mapping, so two lines of a function stay two locations, and the same
/// line seen in two processes is one.
fn named_frame(module: &Arc<Module>, code: &Code, instr: u32) -> Frame {
    let line = code.lines.line(instr);
    let mut h = DefaultHasher::new();
    (&code.name, &code.file, line).hash(&mut h);
    Frame {
        // Below the mapping's limit (u64::MAX), as every address in a mapping is.
        address: h.finish() >> 1,
        kind: FrameKind::User,
        return_address: false,
        module: Some(module.clone()),
        symbols: Arc::from(vec![Symbol {
            name: code.name.clone(),
            file: Some(code.file.clone()),
            line,
        }]),
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{BufRead as _, BufReader},
        process::{Command, Stdio},
    };

    use sonde_abi::python::{FILE_COPY, NAME_COPY};

    use super::*;
    use crate::runtimes::python::offsets;

    const SCRIPT: &str = r#"
import sys
def work():
    a = 1
    b = 2
    return a + b
c = work.__code__
units = [f"{s // 2}:{l}" for s, e, l in c.co_lines() if l is not None]
print(id(c), *units, flush=True)
sys.stdin.read()
"#;

    /// Debian's `/usr/bin/python3` running `script`, and the first line it printed.
    fn started(script: &str) -> (std::process::Child, String) {
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting /usr/bin/python3 (Debian package python3)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (child, line)
    }

    fn interpreter() -> Arc<Interpreter> {
        Arc::new(Interpreter {
            version: (3, 11),
            runtime: 0,
            offsets: offsets::for_version(3, 11).unwrap(),
            binary: "/usr/bin/python3".into(),
            mapped: None,
        })
    }

    /// Names frames of a live `/usr/bin/python3` (3.11), one location per line, and forgets them on
    /// an exec (a new interpreter) and when the process is no longer live.
    #[test]
    fn caches_per_process_and_interpreter() {
        let (mut child, line) = started(SCRIPT);
        let pid = child.id();
        let mut cols = line.split_whitespace();
        let code: u64 = cols.next().unwrap().parse().unwrap();
        // (code unit, line) of the first instruction of each line of `work`: lines 3 to 6.
        let units: Vec<(u32, u32)> = cols
            .map(|c| c.split_once(':').unwrap())
            .map(|(u, l)| (u.parse().unwrap(), l.parse().unwrap()))
            .collect();
        assert!(units.len() >= 3, "{line}");
        let word = |instr| Word {
            code,
            instr,
            entry: true,
        };
        let first = interpreter();
        let mut names = PythonNames::default();
        for &(unit, _) in &units {
            names.resolve(pid, &first, word(unit));
            names.resolve(pid, &first, word(unit));
        }
        assert_eq!(
            names.entries,
            1 + units.len(),
            "one code object, one frame per offset"
        );
        let frames: Vec<Frame> = units
            .iter()
            .map(|&(unit, _)| names.frame(pid, &first, word(unit)))
            .collect();
        for (f, &(unit, line)) in frames.iter().zip(&units) {
            let s = &f.symbols[0];
            assert_eq!(
                (s.name.as_str(), s.file.as_deref(), s.line),
                ("work", Some("<string>"), Some(line)),
                "code unit {unit}"
            );
            assert_eq!(f.module.as_ref().unwrap().path, PYTHON_PATH);
        }
        // One address per line: the same for two offsets of a line, another for each other line.
        let lines: HashSet<u32> = units.iter().map(|&(_, l)| l).collect();
        let addresses: HashSet<u64> = frames.iter().map(|f| f.address).collect();
        assert!(lines.len() >= 3, "{line}");
        assert_eq!(addresses.len(), lines.len(), "one location per line");

        // A bad address is an unnamed frame in `[python]`, at the code's address.
        names.resolve(pid, &first, word(0).with_code(0x10));
        let bad = names.frame(pid, &first, word(0).with_code(0x10));
        assert!(bad.symbols.is_empty() && bad.address == 0x10);
        assert_eq!(names.entries, 2 + units.len());
        names.trim();
        assert_eq!(
            names.entries,
            1 + units.len(),
            "failures are asked again next window"
        );

        // After an exec the process has a new interpreter: nothing of the old one is used.
        let second = interpreter();
        assert!(
            names
                .frame(pid, &second, word(units[0].0))
                .symbols
                .is_empty()
        );
        names.resolve(pid, &second, word(units[0].0));
        assert_eq!(names.entries, 2, "the old entries are gone");
        assert_eq!(names.frame(pid, &second, word(units[0].0)), frames[0]);

        // Past the bound everything starts over.
        names.resolve(pid, &second, word(units[1].0));
        names.entries += MAX_ENTRIES;
        names.trim();
        assert_eq!((names.entries, names.bytes), (0, 0));
        assert!(names.processes.is_empty());
        names.resolve(pid, &second, word(units[0].0));

        names.retain(&HashSet::from([pid + 1]));
        assert_eq!((names.entries, names.bytes), (0, 0));
        assert!(
            names
                .frame(pid, &second, word(units[0].0))
                .symbols
                .is_empty()
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The kernel announces one address twice with different string addresses (the first code
    /// object freed, another at its address): the later object names the address from then on, and
    /// an announcement of the same strings again reads nothing.
    #[test]
    fn an_address_announced_with_other_strings_is_named_after_the_later_object() {
        const TWO: &str = r#"
import sys
def first():
    return 1
def second():
    return 2
print(id(first.__code__), id(second.__code__), flush=True)
sys.stdin.read()
"#;
        let (mut child, line) = started(TWO);
        let pid = child.id();
        let ids: Vec<u64> = line
            .split_whitespace()
            .map(|c| c.parse().unwrap())
            .collect();
        let interpreter = interpreter();
        let offsets = &interpreter.offsets;
        // What the kernel copies of each object's strings (`sonde_abi::python::CodeEvent`).
        let mem = crate::runtimes::memory::ProcessMemory::new(pid);
        let strings = |code: u64| {
            let name = mem.u64(code + offsets.code_name_field()).unwrap();
            let file = mem.u64(code + offsets.code_filename).unwrap();
            let mut copies = (vec![0; NAME_COPY], vec![0; FILE_COPY]);
            mem.read(name, &mut copies.0).unwrap();
            mem.read(file, &mut copies.1).unwrap();
            (name, file, copies)
        };
        let (first, second) = (strings(ids[0]), strings(ids[1]));
        fn remains(strings: &(u64, u64, (Vec<u8>, Vec<u8>))) -> Remains<'_> {
            Remains {
                name: strings.0,
                file: strings.1,
                name_copy: &strings.2.0,
                file_copy: &strings.2.1,
            }
        }
        let word = Word {
            code: ids[0],
            instr: 0,
            entry: true,
        };
        let name = |names: &mut PythonNames| {
            names.resolve(pid, &interpreter, word);
            names.frame(pid, &interpreter, word).symbols[0].name.clone()
        };
        let mut names = PythonNames::default();
        names.read_code(pid, &interpreter, ids[0], Some(remains(&first)));
        assert_eq!(name(&mut names), "first");
        // The same object announced again (another CPU): nothing changes.
        names.read_code(pid, &interpreter, ids[0], Some(remains(&first)));
        assert_eq!((name(&mut names), names.entries), ("first".into(), 2));
        // `second` announced at `first`'s address: the live object is not the one the walk saw,
        // so it is named from the copies.
        names.read_code(pid, &interpreter, ids[0], Some(remains(&second)));
        assert_eq!(name(&mut names), "second");
        assert_eq!(
            names.entries, 2,
            "the first object's entry and frame are gone"
        );
        // Read at the window's end, without what the walk saw, the held object stays.
        names.read_code(pid, &interpreter, ids[0], None);
        assert_eq!(name(&mut names), "second");
        let _ = child.kill();
        let _ = child.wait();
    }

    trait WithCode {
        fn with_code(self, code: u64) -> Self;
    }
    impl WithCode for Word {
        fn with_code(self, code: u64) -> Self {
            Word { code, ..self }
        }
    }
}
