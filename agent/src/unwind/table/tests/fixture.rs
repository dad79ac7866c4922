//! What the tests build and run: the C test binary, the binutils tools, section lookups and the
//! row-in-effect lookup the kernel does.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSection};
use sonde_abi::UnwindRow;

/// `path` opened as the capture opens a binary, with what the runtimes read of it.
pub(crate) fn binary(path: &Path) -> crate::process::Binary {
    let file =
        std::fs::File::open(path).unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
    let (elf, facts) =
        crate::process::ElfInfo::read_with(&file, &crate::runtimes::registry::ELF_READERS);
    crate::process::Binary {
        id: (0, 0),
        path: path.display().to_string(),
        file,
        elf,
        facts,
        root: "/".into(),
        owner: None,
    }
}

/// The test program (see its header comment).
const FRAMES_C: &str = include_str!("../testdata/frames.c");

/// The flags of the normal test binary: optimised, no frame pointer, `.eh_frame`.
pub(super) const EH_FRAME_FLAGS: &[&str] = &["-O2", "-fomit-frame-pointer"];
/// The flags of a binary with IBT-enabled PLTs (`endbr64` first in each stub, as on distributions
/// that build with `-fcf-protection`): binutils then emits a third PLT expression.
pub(super) const IBT_PLT_FLAGS: &[&str] = &[
    "-O2",
    "-fomit-frame-pointer",
    "-fcf-protection=full",
    "-Wl,-z,ibtplt",
];
/// The flags of the `.debug_frame` test binary.
pub(super) const DEBUG_FRAME_FLAGS: &[&str] = &[
    "-O2",
    "-fomit-frame-pointer",
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
    "-g",
];

/// glibc's shared library, the other binary compared with readelf.
pub(super) const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
/// The image's dynamic loader.
pub(super) const LD_SO: &str = "/lib64/ld-linux-x86-64.so.2";

/// Runs `program` with `args` and returns its stdout; panics if it is missing or fails.
pub(super) fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "cannot run `{program}` ({error}): the unwind table tests need gcc and binutils \
             (readelf, nm, objcopy); on Debian: apt-get install gcc binutils"
            )
        });
    assert!(
        output.status.success(),
        "`{program} {}` failed ({}): {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("tool output is UTF-8")
}

/// Compiles the test program into `dir/name` with gcc and `flags`.
pub(super) fn compile(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let source = dir.join("frames.c");
    std::fs::write(&source, FRAMES_C).expect("write the C source to the temp dir");
    let binary = dir.join(name);
    let mut args: Vec<&str> = flags.to_vec();
    args.extend([
        "-o",
        binary.to_str().expect("UTF-8 temp path"),
        source.to_str().expect("UTF-8 temp path"),
    ]);
    run("gcc", &args);
    binary
}

/// A copy of `binary` at `out` without `.eh_frame` and `.eh_frame_hdr` (objcopy).
pub(super) fn without_eh_frame(binary: &Path, out: &Path) {
    run(
        "objcopy",
        &[
            "--remove-section",
            ".eh_frame",
            "--remove-section",
            ".eh_frame_hdr",
            binary.to_str().expect("UTF-8 path"),
            out.to_str().expect("UTF-8 path"),
        ],
    );
}

/// A fresh temporary directory.
pub(super) fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("create a temp dir")
}

/// Address ranges of the sections of `elf` whose name starts with `prefix`.
pub(super) fn section_ranges(elf: &[u8], prefix: &str) -> Vec<Range<u64>> {
    let file = object::File::parse(elf).expect("parse the test binary");
    file.sections()
        .filter(|s| s.name().is_ok_and(|name| name.starts_with(prefix)))
        .map(|s| s.address()..s.address() + s.size())
        .collect()
}

/// Whether `elf` has a non-empty section `name`.
pub(super) fn has_section(elf: &[u8], name: &str) -> bool {
    let file = object::File::parse(elf).expect("parse the test binary");
    file.section_by_name(name).is_some_and(|s| s.size() > 0)
}

/// The row in effect at `address`, as the kernel's binary search finds it.
pub(super) fn row_at(rows: &[UnwindRow], address: u64) -> Option<UnwindRow> {
    let after = rows.partition_point(|row| u64::from(row.pc) <= address);
    after.checked_sub(1).map(|i| rows[i])
}

/// The address of symbol `name` in `binary`, from `nm`.
pub(super) fn symbol(binary: &Path, name: &str) -> u64 {
    symbol_in(binary, name, &[])
}

/// The address of dynamic symbol `name` (`nm -D`), whatever its version.
pub(super) fn dynamic_symbol(binary: &Path, name: &str) -> u64 {
    symbol_in(binary, name, &["-D"])
}

fn symbol_in(binary: &Path, name: &str, flags: &[&str]) -> u64 {
    let mut args = flags.to_vec();
    args.push(binary.to_str().expect("UTF-8 path"));
    let output = run("nm", &args);
    output
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let (address, _kind, symbol) = (fields.next()?, fields.next()?, fields.next()?);
            let symbol = symbol.split('@').next()?;
            (symbol == name).then(|| u64::from_str_radix(address, 16).ok())?
        })
        .unwrap_or_else(|| panic!("nm lists no {name} in {}", binary.display()))
}
