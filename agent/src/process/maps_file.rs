//! A process's memory mappings, read with `procfs` from the one proc root. When the main thread has
//! exited (the process lives on in other threads), `/proc/PID/maps` is empty: the mappings are read from
//! a live thread's `/proc/PID/task/TID/maps` instead.
//!
//! The paths in a maps file are chosen by the profiled process (any file it maps, named as it likes in
//! its own root), so the text goes through [`parse_maps`], which keeps procfs from panicking on them.

use std::path::{Path, PathBuf};

use procfs::{
    FromBufRead as _,
    process::{MMPermissions, MMapPath, MemoryMap, MemoryMaps, Process},
};

/// Where `/proc` is: `/proc` unless [`set_proc_root`] said otherwise at start (a container given the
/// host's `/proc` elsewhere). The one proc root every reader of other processes goes through.
static PROC_ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Sets the proc root, once, before any process is read; false when it was already set to another.
pub(crate) fn set_proc_root(root: &Path) -> bool {
    PROC_ROOT.get_or_init(|| root.to_owned()) == root
}

/// The proc root.
pub(super) fn proc_root() -> &'static Path {
    PROC_ROOT.get_or_init(|| PathBuf::from("/proc"))
}

/// The `/proc` directory of process `pid`.
pub(crate) fn proc_dir(pid: u32) -> PathBuf {
    proc_root().join(pid.to_string())
}

/// One executable mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MapsLine {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// Path, `[vdso]`, or empty for anonymous memory. ` (deleted)` is stripped.
    pub path: String,
    /// Device of the mapped file (`makedev(major, minor)`), 0 for anonymous memory.
    pub dev: u64,
    /// Inode of the mapped file, 0 for anonymous memory.
    pub inode: u64,
}

/// Why a process's mappings could not be read.
#[derive(Debug)]
pub(crate) enum Unreadable {
    /// The process is gone.
    Gone,
    /// The kernel refused to show its mappings (the ptrace read check: another user's process
    /// without CAP_SYS_PTRACE). Its name, when readable, and the refusal.
    Denied(String, std::io::Error),
}

/// How long [`read`] waits for an `execve` in flight to finish mapping the new program.
const EXEC_SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// The process's name (`comm`) and executable mappings.
///
/// A process inside `execve` has its new address space before the program is mapped in it (the
/// kernel maps the segments one by one, then sets `start_code`): a maps file read then lacks
/// mappings, and the capture built from it would name none of the program's frames. When
/// `start_code` (stat field 26, 0 only for a process without one) was 0 before or after the read of
/// a process with mappings, the read is taken again once the exec is through.
pub(crate) fn read(pid: u32) -> Result<(String, Vec<MapsLine>), Unreadable> {
    let began = std::time::Instant::now();
    loop {
        let (name, maps, settled) = read_once(pid)?;
        if settled || maps.is_empty() || began.elapsed() >= EXEC_SETTLE {
            return Ok((name, executable(maps)));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// One read of [`read`]: also whether no exec was in flight around it.
fn read_once(pid: u32) -> Result<(String, Vec<MemoryMap>, bool), Unreadable> {
    let process = Process::new_with_root(proc_dir(pid)).map_err(|_| Unreadable::Gone)?;
    let before = process.stat().map_err(|_| Unreadable::Gone)?;
    let mut maps = match read_maps(&proc_dir(pid)) {
        Ok(maps) => maps,
        Err(err) if denied(&err) => return Err(Unreadable::Denied(before.comm, err)),
        Err(_) => return Err(Unreadable::Gone),
    };
    // A leader that exited has no address space of its own (start_code 0) and cannot be in exec.
    let from_leader = !maps.is_empty();
    if !from_leader {
        // The leader exited: any live thread shares the address space.
        maps = process
            .tasks()
            .map_err(|_| Unreadable::Gone)?
            .flatten()
            .filter(|t| t.tid as u32 != pid)
            .find_map(|t| {
                read_maps(&proc_dir(pid).join("task").join(t.tid.to_string()))
                    .ok()
                    .filter(|m| !m.is_empty())
            })
            .ok_or(Unreadable::Gone)?;
    }
    let after = process.stat().map_err(|_| Unreadable::Gone)?;
    let settled = !from_leader || (before.startcode != 0 && after.startcode != 0);
    Ok((after.comm, maps, settled))
}

/// Whether `err` is a permission refusal (as opposed to the process being gone).
pub(crate) fn denied(err: &std::io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

/// The mappings in `dir/maps`.
fn read_maps(dir: &Path) -> std::io::Result<Vec<MemoryMap>> {
    Ok(parse_maps(&std::fs::read(dir.join("maps"))?))
}

/// Parses the text of a maps file with procfs, one line at a time, so that a line procfs cannot read
/// costs that mapping only, never every mapping of the process:
/// - a path that is not UTF-8 is taken lossily (procfs refuses the whole file otherwise);
/// - a line whose path procfs would slice out of bounds is dropped before procfs sees it: it takes a
///   path starting with `/SYSV` for a System V segment (`/SYSV` + 8 hex digits) and one starting with
///   `[stack:` for a thread stack, so a file named `/SYSV` in a container's root panicked the capture
///   thread (found by the `maps` fuzz target).
pub(crate) fn parse_maps(text: &[u8]) -> Vec<MemoryMap> {
    String::from_utf8_lossy(text)
        .lines()
        .filter(|line| !procfs_would_panic(line))
        .filter_map(|line| MemoryMaps::from_buf_read(line.as_bytes()).ok())
        .flat_map(|maps| maps.0)
        .collect()
}

/// Whether procfs's `MMapPath::from` would slice the path of this line out of bounds.
fn procfs_would_panic(line: &str) -> bool {
    // procfs takes the path as the rest of the line after five single-space separated fields.
    let Some(path) = line.splitn(6, ' ').nth(5).map(str::trim) else {
        return false;
    };
    (path.starts_with("/SYSV") && path.get(5..13).is_none())
        || (path.starts_with("[stack:") && path.get(1..path.len() - 1).is_none())
}

/// Whether a process whose main thread exited still runs other threads.
pub(crate) fn has_live_threads(pid: u32) -> bool {
    Process::new_with_root(proc_dir(pid))
        .and_then(|p| p.tasks())
        .is_ok_and(|mut tasks| tasks.any(|t| t.is_ok_and(|t| t.tid as u32 != pid)))
}

/// Whether process `pid` is gone: no `/proc` entry, or a zombie leader with no thread left.
pub(crate) fn is_gone(pid: u32) -> bool {
    match state(pid) {
        None => true,
        Some(state) => state == b'Z' && !has_live_threads(pid),
    }
}

/// The processes `/proc` lists now (thread-group ids), or None when it cannot be read. One directory
/// read, where asking each process costs an open of its own.
pub(crate) fn listed_pids() -> Option<std::collections::HashSet<u32>> {
    Some(numbered_entries(proc_root())?.collect())
}

/// The entries of `dir` named by a number (processes in `/proc`, descriptors in `/proc/self/fd`).
pub(crate) fn numbered_entries(dir: &Path) -> Option<impl Iterator<Item = u32>> {
    let dir = std::fs::read_dir(dir).ok()?;
    Some(dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()))
}

/// The state letter of `/proc/PID/stat`, read into a buffer on the stack: the daemon's sweep asks it
/// of every live process in turn, and a full parse of the line (procfs's `Stat`, forty-odd fields
/// and their allocations) was an eighth of the daemon's CPU with 1,000 services.
fn state(pid: u32) -> Option<u8> {
    use std::io::Read as _;
    let mut buf = [0u8; 512];
    let mut file = std::fs::File::open(proc_dir(pid).join("stat")).ok()?;
    let n = file.read(&mut buf).ok()?;
    // `pid (comm) S ...`: the command may hold spaces and parentheses, the state follows the last ')'.
    let line = &buf[..n];
    let close = line.iter().rposition(|&b| b == b')')?;
    line.get(close + 2).copied()
}

/// The executable mappings among `maps`.
pub(crate) fn executable(maps: Vec<MemoryMap>) -> Vec<MapsLine> {
    maps.into_iter()
        .filter(|m| m.perms.contains(MMPermissions::EXECUTE))
        .map(|m| MapsLine {
            start: m.address.0,
            end: m.address.1,
            offset: m.offset,
            dev: libc::makedev(m.dev.0 as u32, m.dev.1 as u32),
            inode: m.inode,
            path: match m.pathname {
                MMapPath::Path(p) => {
                    let p = p.to_string_lossy();
                    p.strip_suffix(" (deleted)").unwrap_or(&p).to_owned()
                }
                MMapPath::Vdso => "[vdso]".to_owned(),
                MMapPath::Anonymous => String::new(),
                other => format!("{other:?}"),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use procfs::{FromBufRead as _, process::MemoryMaps};

    use super::*;

    #[test]
    fn keeps_executable_file_backed_anonymous_vdso_and_deleted_mappings() {
        let text = "\
55d0c8a00000-55d0c8a01000 r--p 00000000 fe:01 1234                       /usr/bin/cat
55d0c8a01000-55d0c8a05000 r-xp 00001000 fe:01 1234                       /usr/bin/cat
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 
7f1e2d000000-7f1e2d001000 rwxp 00000000 00:00 0 
7ffd5e9f2000-7ffd5e9f4000 r-xp 00000000 00:00 0                          [vdso]
7f00aa000000-7f00aa100000 r-xp 00002000 fe:01 99                         /tmp/my app (deleted)
";
        let maps = MemoryMaps::from_buf_read(text.as_bytes()).unwrap();
        let lines = executable(maps.0);
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0],
            MapsLine {
                start: 0x55d0c8a01000,
                end: 0x55d0c8a05000,
                offset: 0x1000,
                path: "/usr/bin/cat".into(),
                dev: libc::makedev(0xfe, 1),
                inode: 1234,
            }
        );
        assert_eq!(lines[1].path, "");
        assert_eq!(lines[2].path, "[vdso]");
        assert_eq!(lines[3].path, "/tmp/my app");
    }

    #[test]
    fn paths_procfs_cannot_slice_are_dropped_not_panicked_on() {
        // Regression inputs of the `maps` fuzz target: procfs slices `/SYSV` + 8 hex digits and
        // `[stack:...]` without checking the length or the character boundaries.
        let text = "\
7f00aa000000-7f00aa100000 r-xp 00002000 fe:01 99 /SYSV
7f00ab000000-7f00ab100000 r-xp 00002000 fe:01 98 /SYSV0000\u{e9}0000
7f00ac000000-7f00ac100000 r-xp 00000000 00:00 0 [stack:\u{e9}
55d0c8a01000-55d0c8a05000 r-xp 00001000 fe:01 1234 /usr/bin/cat
";
        let maps = parse_maps(text.as_bytes());
        assert_eq!(maps.len(), 1, "{maps:?}");
        assert_eq!(executable(maps)[0].path, "/usr/bin/cat");
        // A real System V segment still parses.
        let shm = "7f00aa000000-7f00aa100000 rw-s 00000000 00:01 5 /SYSV0000abcd (deleted)\n";
        assert_eq!(parse_maps(shm.as_bytes()).len(), 1);
    }

    #[test]
    fn a_line_procfs_cannot_read_does_not_hide_the_other_mappings() {
        let mut text =
            b"7f00aa000000-7f00aa100000 r-xp 00000000 fe:01 9 /tmp/\xff\xfe.so\n".to_vec();
        text.extend_from_slice(
            b"55d0c8a01000-55d0c8a05000 r-xp 00001000 fe:01 1234 /usr/bin/cat\n",
        );
        text.extend_from_slice(b"not a maps line\n");
        let lines = executable(parse_maps(&text));
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].path, "/usr/bin/cat");
    }

    /// Waits up to 5 s for `condition`.
    fn eventually(mut condition: impl FnMut() -> bool) -> bool {
        (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            condition()
        })
    }

    #[test]
    fn a_process_whose_main_thread_exited_is_read_from_a_live_thread() {
        let dir = std::env::temp_dir().join(format!("sonde-leader-exit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("leader_exit");
        let source = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/workloads/leader_exit.c"
        );
        let built = std::process::Command::new("gcc")
            .args(["-O1", "-pthread", "-o"])
            .arg(&bin)
            .arg(source)
            .status()
            .expect("gcc must be installed (cargo xtask setup --peers)");
        assert!(built.success(), "compiling {source}");
        let mut child = std::process::Command::new(&bin).spawn().unwrap();
        let pid = child.id();
        let leader_gone = eventually(|| {
            Process::new_with_root(proc_dir(pid))
                .and_then(|p| p.maps())
                .is_ok_and(|m| m.0.is_empty())
        });
        let read_back = read(pid).ok();
        let (live, gone) = (has_live_threads(pid), is_gone(pid));
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert!(leader_gone, "the main thread of {pid} never exited");
        let (_, lines) = read_back.expect("the process still runs in its other thread");
        assert!(
            lines.iter().any(|l| l.path.ends_with("/leader_exit")),
            "{lines:?}"
        );
        assert!(live && !gone, "live threads {live}, gone {gone}");
        assert!(
            is_gone(pid),
            "{pid} is not gone after being killed and reaped"
        );
    }

    #[test]
    fn the_state_follows_the_last_parenthesis_of_a_hostile_name() {
        // A thread named like a stat line's middle: the state is read after the real ')'.
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(") Z (x".to_owned())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() } as u32).unwrap();
                wait.recv().ok();
            })
            .unwrap();
        let tid = rx.recv().unwrap();
        // A thread's stat is under the process's task directory; its id is also a /proc entry.
        let state = state(tid);
        stop.send(()).unwrap();
        thread.join().unwrap();
        assert!(
            matches!(state, Some(b'S' | b'R')),
            "{:?}",
            state.map(char::from)
        );
        assert!(!is_gone(std::process::id()));
        let listed = listed_pids().expect("/proc lists processes");
        assert!(listed.contains(&std::process::id()));
        assert!(!listed.contains(&tid), "threads are not listed");
    }

    #[test]
    fn a_process_read_as_it_execs_shows_its_whole_program() {
        // `spawn` returns once the child's exec has let go of this process's memory (vfork), before
        // the kernel has mapped the new program: the read lands inside the exec as often as not.
        let sleep = std::fs::canonicalize("/usr/bin/sleep").unwrap();
        let mut partial = Vec::new();
        for _ in 0..200 {
            let mut child = std::process::Command::new(&sleep).arg("5").spawn().unwrap();
            let read_back = read(child.id());
            child.kill().unwrap();
            child.wait().unwrap();
            let (_, lines) = read_back.expect("the child runs");
            let program = lines.iter().any(|l| Path::new(&l.path) == sleep);
            let interpreter = lines.iter().any(|l| l.path.contains("/ld-linux"));
            if !(program && interpreter) {
                partial.push(lines);
            }
        }
        assert!(
            partial.is_empty(),
            "reads without the program or ld.so: {partial:?}"
        );
    }

    #[test]
    fn reads_this_process() {
        let (name, lines) = read(std::process::id()).expect("own process");
        assert!(!name.is_empty());
        assert!(lines.iter().any(|l| l.path == "[vdso]"), "{lines:?}");
        assert!(lines.iter().any(|l| l.path.contains("libc")), "{lines:?}");
    }
}
