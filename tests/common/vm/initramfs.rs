//! The guest's root file system: an uncompressed newc cpio archive (Debian's cloud kernels unpack it
//! as they are) holding busybox, the programs the guest runs and the shared libraries they load.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

/// The files of an initramfs, by their path in the guest.
#[derive(Default)]
pub struct Initramfs {
    /// Guest path (no leading `/`) -> (contents, mode).
    files: BTreeMap<String, (Vec<u8>, u32)>,
    /// Guest path -> target of a symbolic link.
    links: BTreeMap<String, String>,
}

impl Initramfs {
    /// An initramfs with busybox-static's busybox as `/bin/busybox` and `/bin/sh`, and `init` (a
    /// busybox shell script) as `/init`.
    pub fn new(init: &str) -> Self {
        let busybox = Path::new("/bin/busybox");
        assert!(
            busybox.exists(),
            "/bin/busybox is missing: the VM tests need Debian's busybox-static (cargo xtask setup --peers)"
        );
        assert!(
            shared_libraries(busybox).is_empty(),
            "/bin/busybox is dynamically linked: the VM tests need Debian's busybox-static"
        );
        let mut fs = Self::default();
        fs.add_file("bin/busybox", busybox, 0o755);
        fs.links.insert("bin/sh".into(), "busybox".into());
        fs.files
            .insert("init".into(), (init.as_bytes().to_vec(), 0o755));
        fs
    }

    /// Adds the host file `from` as `to` (guest path).
    pub fn add_file(&mut self, to: &str, from: &Path, mode: u32) {
        let bytes = std::fs::read(from)
            .unwrap_or_else(|e| panic!("reading {} for the initramfs: {e}", from.display()));
        self.files
            .insert(to.trim_start_matches('/').into(), (bytes, mode));
    }

    /// Adds the program `from` as `to` with every shared library it loads (as `ldd` names them, at
    /// the same paths, the dynamic loader among them). A static program needs none.
    pub fn add_program(&mut self, to: &str, from: &Path) {
        self.add_file(to, from, 0o755);
        for lib in shared_libraries(from) {
            let guest = lib.display().to_string();
            self.add_file(&guest, &std::fs::canonicalize(&lib).unwrap(), 0o755);
        }
    }

    /// Writes the newc cpio archive (what the kernel's initramfs unpacker reads) to `out`.
    pub fn write(&self, out: &Path) {
        let mut dirs = std::collections::BTreeSet::new();
        for path in self.files.keys().chain(self.links.keys()) {
            let mut parent = Path::new(path).parent();
            while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
                dirs.insert(p.display().to_string());
                parent = p.parent();
            }
        }
        // The mount points /init mounts on.
        for d in ["dev", "proc", "sys", "tmp", "out"] {
            dirs.insert(d.into());
        }
        let mut cpio = Vec::new();
        let mut ino = 1;
        // Directories first (BTreeSet order puts parents before children): the unpacker creates
        // each entry in its parent.
        for d in &dirs {
            entry(&mut cpio, &mut ino, d, 0o040755, &[]);
        }
        for (path, (bytes, mode)) in &self.files {
            entry(&mut cpio, &mut ino, path, 0o100000 | mode, bytes);
        }
        for (path, target) in &self.links {
            entry(&mut cpio, &mut ino, path, 0o120777, target.as_bytes());
        }
        entry(&mut cpio, &mut ino, "TRAILER!!!", 0, &[]);
        std::fs::write(out, cpio).unwrap();
    }
}

/// One newc entry: a 110-byte ASCII header, the name (NUL-terminated) and the data, each padded to
/// 4 bytes.
fn entry(cpio: &mut Vec<u8>, ino: &mut u32, name: &str, mode: u32, data: &[u8]) {
    let fields = [
        *ino,
        mode,
        0, // uid
        0, // gid
        1, // nlink
        0, // mtime
        data.len() as u32,
        0, // devmajor
        0, // devminor
        0, // rdevmajor
        0, // rdevminor
        name.len() as u32 + 1,
        0, // check
    ];
    *ino += 1;
    cpio.extend_from_slice(b"070701");
    for f in fields {
        cpio.extend_from_slice(format!("{f:08X}").as_bytes());
    }
    cpio.extend_from_slice(name.as_bytes());
    cpio.push(0);
    pad(cpio);
    cpio.extend_from_slice(data);
    pad(cpio);
}

fn pad(cpio: &mut Vec<u8>) {
    while !cpio.len().is_multiple_of(4) {
        cpio.push(0);
    }
}

/// The shared libraries `program` loads, from `ldd`: `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6
/// (0x...)` and the loader's own line `/lib64/ld-linux-x86-64.so.2 (0x...)`. Empty for a static
/// program.
fn shared_libraries(program: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .expect("ldd (libc-bin)");
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("not a dynamic executable") {
        return Vec::new();
    }
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once(" => ") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .inspect(|p| {
            assert!(
                p.exists(),
                "{} needs {}, which is missing",
                program.display(),
                p.display()
            )
        })
        .collect()
}
