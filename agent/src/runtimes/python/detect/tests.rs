//! Detection on tables and on live interpreters (Debian's, and pyenv builds where present).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command},
    time::{Duration, Instant},
};

use sonde_abi::python::{OWNED_BY_CSTACK, layout};

use super::*;

const RUNTIME: u64 = 0x7f00_0000_0000;

fn tabled(minor: u8) -> Interpreter {
    Interpreter {
        version: (3, minor),
        runtime: RUNTIME,
        offsets: offsets::for_version(3, minor).unwrap(),
        binary: format!("/usr/bin/python3.{minor}"),
        mapped: None,
    }
}

#[test]
fn settings_by_binary_relocate_to_the_settings_of_the_process() {
    // A PIE interpreter's text mapped at 0x5600_0000_1000 from file offset 0x1000: the kernel
    // adds `start - offset` to the relative addresses.
    let base = 0x5600_0000_0000;
    for minor in [9, 11, 12] {
        let i = Interpreter {
            runtime: base + 0x55_8000,
            mapped: Some(((0x801, 42), base)),
            ..tabled(minor)
        };
        let (file, relative) = i.kernel_file_settings().unwrap();
        assert_eq!((file.dev, file.ino), (8 << 20 | 1, 42));
        assert_eq!(relative.origin, origin::BINARY);
        let own = i.kernel_settings();
        assert_eq!(relative.interp_head + base, own.interp_head, "3.{minor}");
        let gil = relative.gil_tstate;
        assert_eq!(
            if gil == 0 { 0 } else { gil + base },
            own.gil_tstate,
            "3.{minor}"
        );
        assert_eq!(
            PyProc {
                interp_head: own.interp_head,
                gil_tstate: own.gil_tstate,
                origin: origin::CAPTURE,
                ..relative
            },
            own
        );
    }
    assert!(tabled(11).kernel_file_settings().is_none());
}

#[test]
fn kernel_settings_of_each_table() {
    let none = OFFSET_NONE;
    let s = tabled(9).kernel_settings();
    assert_eq!((s.interp_head, s.gil_tstate), (RUNTIME + 32, RUNTIME + 568));
    assert_eq!((s.layout, s.frame_span), (layout::FRAME_OBJECT, 112));
    assert_eq!(
        (
            s.interp_threads_head,
            s.tstate_next,
            s.tstate_native_tid,
            s.tstate_frame
        ),
        (8, 8, none, 24)
    );
    assert_eq!(
        (
            s.cframe_current,
            s.frame_code,
            s.frame_previous,
            s.frame_instr,
            s.frame_entry
        ),
        (none, 32, 24, 104, none)
    );
    assert_eq!(s.code_bytecode, none);
    // The kernel reads a code object's name and file as it announces it: `co_name` before 3.11.
    assert_eq!((s.code_name, s.code_filename), (112, 104));
    let s = tabled(10).kernel_settings();
    assert_eq!(
        (s.frame_instr, s.frame_span, s.gil_tstate),
        (96, 104, RUNTIME + 568)
    );

    // 3.11 on: thread states carry the native thread id, so the GIL holder is not needed.
    let s = tabled(11).kernel_settings();
    assert_eq!((s.interp_head, s.gil_tstate), (RUNTIME + 40, 0));
    assert_eq!(
        (s.code_name, s.code_filename),
        (128, 112),
        "co_qualname from 3.11"
    );
    assert_eq!(
        (s.layout, s.frame_span),
        (layout::INTERP_FRAME_IS_ENTRY, 72)
    );
    assert_eq!(
        (
            s.interp_threads_head,
            s.tstate_native_tid,
            s.tstate_frame,
            s.cframe_current
        ),
        (16, 160, 56, 8)
    );
    assert_eq!(
        (
            s.frame_code,
            s.frame_previous,
            s.frame_instr,
            s.frame_entry,
            s.code_bytecode
        ),
        (32, 48, 56, 68, 184)
    );
    let s = tabled(12).kernel_settings();
    assert_eq!((s.interp_head, s.gil_tstate), (RUNTIME + 40, 0));
    assert_eq!((s.layout, s.frame_span), (layout::INTERP_FRAME_OWNER, 72));
    assert_eq!(
        (
            s.interp_threads_head,
            s.tstate_native_tid,
            s.tstate_frame,
            s.cframe_current
        ),
        (72, 144, 56, 0)
    );
    assert_eq!(
        (
            s.frame_code,
            s.frame_previous,
            s.frame_instr,
            s.frame_entry,
            s.code_bytecode
        ),
        (0, 8, 56, 70, 192)
    );
    let s = Interpreter {
        offsets: offsets::V3_13,
        ..tabled(12)
    }
    .kernel_settings();
    assert_eq!(
        (s.interp_head, s.gil_tstate, s.cframe_current),
        (RUNTIME + 632, 0, none)
    );
    assert_eq!(
        (s.interp_threads_head, s.tstate_frame, s.code_bytecode),
        (7344, 72, 200)
    );
}

/// A Python script that spins in `busy()`, called from the module's top level.
const SPIN: &str = "def busy():\n    x = 0\n    while True:\n        x += 1\n\nbusy()\n";

/// A running interpreter, killed on drop.
struct Spinner {
    child: Child,
    dir: PathBuf,
}

impl Spinner {
    fn start(python: &Path) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "sonde-py-detect-{}-{}",
            std::process::id(),
            python.display().to_string().replace('/', "_")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("spin.py"), SPIN).unwrap();
        let child = Command::new(python)
            .arg(dir.join("spin.py"))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {python:?}: {e}"));
        Self { child, dir }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// A compact ASCII string object's text (None if `object` is not one, or unreadable).
fn ascii(memory: &ProcessMemory, o: &Offsets, object: u64) -> Option<String> {
    let mut state = [0; 4];
    memory.read(object + o.unicode_state, &mut state).ok()?;
    // state: interned (2 bits), kind (3), compact (1), ascii (1).
    if u32::from_le_bytes(state) & 1 << 6 == 0 {
        return None;
    }
    let len = memory.u64(object + o.unicode_length).ok()?;
    if len > 4096 {
        return None;
    }
    let mut text = vec![0; len as usize];
    memory.read(object + o.unicode_ascii_data, &mut text).ok()?;
    String::from_utf8(text).ok()
}

/// (function name, file name) of each Python frame of the first thread state of `i`, leaf
/// first (shims left out); None while the interpreter is not up or a read fails (the process
/// runs on while it is read, so a frame may be torn during start-up).
fn frames(memory: &ProcessMemory, i: &Interpreter) -> Option<Vec<(String, String)>> {
    let o = &i.offsets;
    let interp = memory.u64(i.kernel_settings().interp_head).ok()?;
    let tstate = match interp {
        0 => return None,
        interp => memory.u64(interp + o.interp_threads_head).ok()?,
    };
    let mut frame = match tstate {
        0 => return None,
        tstate => memory.u64(tstate + o.tstate_frame).ok()?,
    };
    if let Some(current) = o.cframe_current.filter(|_| frame != 0) {
        frame = memory.u64(frame + current).ok()?;
    }
    let mut out = Vec::new();
    while frame != 0 && out.len() < 64 {
        let shim = o.layout == layout::INTERP_FRAME_OWNER && {
            let mut owner = [0; 1];
            memory.read(frame + o.frame_entry?, &mut owner).ok()?;
            owner[0] == OWNED_BY_CSTACK
        };
        if !shim {
            let code = memory.u64(frame + o.frame_code).ok()?;
            let name = memory.u64(code + o.code_name_field()).ok()?;
            let file = memory.u64(code + o.code_filename).ok()?;
            out.push((ascii(memory, o, name)?, ascii(memory, o, file)?));
        }
        frame = memory.u64(frame + o.frame_previous).ok()?;
    }
    Some(out)
}

/// Starts `python` spinning, captures it with a real process table and checks, by reading the
/// process the way the kernel will, that the interpreter found leads to the running thread, its
/// native thread id (or the GIL holder) and its `busy` frame called from `<module>` in the script.
fn detects_a_running_interpreter(python: &Path, version: (u8, u8)) -> Interpreter {
    let spinner = Spinner::start(python);
    let pid = spinner.child.id();
    let script = spinner.dir.join("spin.py").display().to_string();
    let busy = (String::from("busy"), script.clone());
    let module = (String::from("<module>"), script.clone());
    let mut table = crate::capture::Capturer::with(crate::runtimes::Runtime::Python);
    let memory = ProcessMemory::new(pid);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Capture again until the interpreter's library is mapped and its frames are up.
        let info = table.capture(pid).expect("the interpreter runs");
        let found = detect(pid, &info.mappings).unwrap_or_else(|e| panic!("{python:?}: {e}"));
        if let Some(interpreter) = found {
            assert_eq!(
                crate::runtimes::python::interpreter_of(&info).as_deref(),
                Some(&interpreter)
            );
            assert_eq!(interpreter.version, version, "{python:?}");
            let names = frames(&memory, &interpreter);
            if names.as_ref().and_then(|n| n.first()) == Some(&busy) {
                assert_eq!(names.unwrap(), [busy, module], "{python:?}");
                let s = interpreter.kernel_settings();
                let interp = memory.u64(s.interp_head).unwrap();
                let head = interp + interpreter.offsets.interp_threads_head;
                let tstate = memory.u64(head).unwrap();
                match interpreter.offsets.tstate_native_tid {
                    Some(tid) => {
                        assert_eq!(memory.u64(tstate + tid).unwrap(), u64::from(pid))
                    }
                    // 3.9, 3.10: the only thread holds the GIL while it spins.
                    None => assert_eq!(memory.u64(s.gil_tstate).unwrap(), tstate),
                }
                assert_eq!(table.found(crate::runtimes::Runtime::Python).found, 1);
                assert_eq!(table.found(crate::runtimes::Runtime::Python).unsupported, 0);
                return interpreter;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{python:?} never showed busy() as its current frame"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn debian_python3_11() {
    let found = detects_a_running_interpreter(Path::new("/usr/bin/python3.11"), (3, 11));
    assert_eq!(found.binary, "/usr/bin/python3.11");
    assert_eq!(found.offsets, offsets::for_version(3, 11).unwrap());
}

/// The pyenv builds on the CI machine link libpython3.X.so: `_PyRuntime` is in the library.
/// 3.11.7 is required; every other 3.9 to 3.13 build present is checked as well.
#[test]
fn pyenv_builds() {
    let root = Path::new("/root/.pyenv/versions");
    assert!(
        root.join("3.11.7/bin/python3.11").exists(),
        "pyenv's CPython 3.11.7 is missing (/root/.pyenv/versions/3.11.7, as on the CI machine)"
    );
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(minor) = name
            .strip_prefix("3.")
            .and_then(|rest| rest.split('.').next())
            .and_then(|m| m.parse::<u8>().ok())
            .filter(|m| (9..=13).contains(m))
        else {
            continue;
        };
        let python = root.join(&name).join(format!("bin/python3.{minor}"));
        let found = detects_a_running_interpreter(&python, (3, minor));
        assert!(
            found
                .binary
                .ends_with(&format!("/libpython3.{minor}.so.1.0")),
            "{found:?}"
        );
        if minor == 13 {
            // Read from the process's _Py_DebugOffsets: the same as the 3.13.0 headers.
            assert_eq!(found.offsets, offsets::V3_13);
        }
        checked.push(name);
    }
    eprintln!("checked pyenv builds {checked:?}");
}

#[test]
fn a_process_without_python_has_none() {
    let mut table = crate::capture::Capturer::with(crate::runtimes::Runtime::Python);
    let info = table.capture(std::process::id()).unwrap();
    assert!(crate::runtimes::python::interpreter_of(&info).is_none());
    assert!(detect(info.pid, &info.mappings).unwrap().is_none());
    assert_eq!(table.found(crate::runtimes::Runtime::Python).found, 0);
}

#[test]
fn an_unsupported_version_is_counted_and_not_walked() {
    // Any pyenv CPython older than 3.9 (the CI machine has 3.6 to 3.8).
    let (python, minor) = (6..=8)
        .rev()
        .find_map(|minor| {
            let dir = std::fs::read_dir("/root/.pyenv/versions").ok()?;
            dir.filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&format!("3.{minor}.")))
                })
                .map(|p| (p.join(format!("bin/python3.{minor}")), minor))
        })
        .expect("no pyenv CPython 3.6 to 3.8 under /root/.pyenv/versions (as on the CI machine)");
    let python = python.as_path();
    let spinner = Spinner::start(python);
    let pid = spinner.child.id();
    let mut table = crate::capture::Capturer::with(crate::runtimes::Runtime::Python);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = table.capture(pid).unwrap();
        match detect(pid, &info.mappings) {
            Err(PythonError::Unsupported { version, binary }) => {
                assert_eq!(version, (3, minor));
                assert!(binary.contains(&format!("/libpython3.{minor}")), "{binary}");
                assert!(crate::runtimes::python::interpreter_of(&info).is_none());
                assert_eq!(table.found(crate::runtimes::Runtime::Python).unsupported, 1);
                // Captured again (new mappings): still one process.
                table.capture(pid).unwrap();
                assert_eq!(table.found(crate::runtimes::Runtime::Python).unsupported, 1);
                return;
            }
            other => assert!(
                Instant::now() < deadline,
                "{python:?} never reported as unsupported: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
