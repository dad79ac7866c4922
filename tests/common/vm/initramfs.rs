//! The guest's root file system: an uncompressed newc cpio archive (Debian's cloud kernels unpack it
//! as they are) holding busybox, the programs the guest runs and the shared libraries they load.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use object::{
    Object as _,
    read::elf::{ElfFile64, ProgramHeader as _},
};

use super::{Arch, apt::Index};

/// The files of an initramfs, by their path in the guest.
#[derive(Default)]
pub struct Initramfs {
    /// The guest's architecture: where its programs' shared libraries come from.
    arch: Arch,
    /// Directories of the guest's architecture searched for libraries besides the cross toolchain's
    /// (unpacked Debian packages).
    library_dirs: Vec<PathBuf>,
    /// Guest path (no leading `/`) -> (contents, mode).
    files: BTreeMap<String, (Vec<u8>, u32)>,
    /// Guest path -> target of a symbolic link.
    links: BTreeMap<String, String>,
}

impl Initramfs {
    /// An initramfs for `arch` with busybox-static's busybox as `/bin/busybox` and `/bin/sh`, and
    /// `init` (a busybox shell script) as `/init`. The host's busybox for the host's architecture,
    /// else the package of `userland`'s release for `arch`.
    pub fn new(init: &str, arch: Arch, userland: Option<&Index>) -> Self {
        let busybox = match userland {
            None => PathBuf::from("/bin/busybox"),
            Some(index) => index
                .unpack_current("busybox-static", &["./bin/busybox"])
                .join("bin/busybox"),
        };
        assert!(
            busybox.exists(),
            "{} is missing: the VM tests need Debian's busybox-static (cargo xtask setup --peers)",
            busybox.display()
        );
        let mut fs = Self {
            arch,
            ..Self::default()
        };
        assert!(
            fs.shared_libraries(&busybox).is_empty(),
            "{} is dynamically linked: the VM tests need Debian's busybox-static",
            busybox.display()
        );
        fs.add_file("bin/busybox", &busybox, 0o755);
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

    /// Adds the program `from` as `to` with every shared library it loads, the dynamic loader among
    /// them. A static program needs none.
    pub fn add_program(&mut self, to: &str, from: &Path) {
        self.add_file(to, from, 0o755);
        for (guest, host) in self.shared_libraries(from) {
            self.add_file(&guest, &std::fs::canonicalize(&host).unwrap(), 0o755);
        }
    }

    /// Adds the symbolic link `to` (guest path) pointing at `target`.
    pub fn add_link(&mut self, to: &str, target: &str) {
        self.links
            .insert(to.trim_start_matches('/').into(), target.into());
    }

    /// Adds every file and symbolic link under the host directory `from` at the same path under the
    /// guest's `/` (an unpacked Debian package), and searches its library directories for the
    /// libraries of programs added later.
    pub fn add_tree(&mut self, from: &Path) {
        let mut stack = vec![from.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
                let path = entry.path();
                let guest = path.strip_prefix(from).unwrap().display().to_string();
                let kind = entry.file_type().unwrap();
                if kind.is_symlink() {
                    let target = std::fs::read_link(&path).unwrap();
                    self.links.insert(guest, target.display().to_string());
                } else if kind.is_dir() {
                    stack.push(path);
                } else {
                    use std::os::unix::fs::PermissionsExt as _;
                    let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
                    self.add_file(&guest, &path, mode);
                }
            }
        }
        let triplet = self.arch.cross_libraries();
        let triplet = triplet.parent().unwrap().file_name().unwrap();
        for lib in ["lib", "usr/lib"] {
            self.library_dirs.push(from.join(lib).join(triplet));
        }
    }

    /// The shared libraries `program` loads, as (guest path, host file). For the host's
    /// architecture, what `ldd` names, at the same paths. For another, the loader at its `PT_INTERP`
    /// path and every `DT_NEEDED` library, transitively, from the cross toolchain's libraries or an
    /// added tree, in `/lib` (on every loader's default search path).
    fn shared_libraries(&self, program: &Path) -> Vec<(String, PathBuf)> {
        if self.arch.is_host() {
            return host_libraries(program)
                .into_iter()
                .map(|p| (p.display().to_string(), p))
                .collect();
        }
        let mut dirs = vec![self.arch.cross_libraries()];
        dirs.extend(self.library_dirs.iter().cloned());
        let find = |name: &str| -> PathBuf {
            dirs.iter()
                .map(|d| d.join(name))
                .find(|p| p.exists())
                .unwrap_or_else(|| {
                    panic!(
                        "{} needs {name}, which is in none of {dirs:?} (the cross toolchain's \
                         libraries come with cargo xtask build --target)",
                        program.display()
                    )
                })
        };
        let (interp, mut queue) = dynamic_needs(program);
        let mut found: Vec<(String, PathBuf)> = Vec::new();
        if let Some(interp) = interp {
            let name = Path::new(&interp)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            found.push((interp.trim_start_matches('/').to_owned(), find(&name)));
        }
        while let Some(name) = queue.pop() {
            let guest = format!("lib/{name}");
            if found.iter().any(|(g, _)| *g == guest) {
                continue;
            }
            let host = find(&name);
            queue.extend(dynamic_needs(&host).1);
            found.push((guest, host));
        }
        found
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

/// The shared libraries `program` loads on the host, from `ldd`: `libc.so.6 =>
/// /lib/x86_64-linux-gnu/libc.so.6 (0x...)` and the loader's own line `/lib64/ld-linux-x86-64.so.2
/// (0x...)`. Empty for a static program.
fn host_libraries(program: &Path) -> Vec<PathBuf> {
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

/// A dynamic ELF program's loader (`PT_INTERP`) and the libraries it names (`DT_NEEDED`); both
/// empty for a static one.
pub fn dynamic_needs(path: &Path) -> (Option<String>, Vec<String>) {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let elf = ElfFile64::<object::Endianness>::parse(&*data)
        .unwrap_or_else(|e| panic!("{} is not a 64-bit ELF file: {e}", path.display()));
    let interp = elf
        .elf_program_headers()
        .iter()
        .find(|ph| ph.p_type.get(elf.endian()) == object::elf::PT_INTERP)
        .and_then(|ph| ph.data(elf.endian(), &*data).ok())
        .map(|d| String::from_utf8_lossy(d).trim_end_matches('\0').to_owned());
    let mut needed = Vec::new();
    if let Some(section) = elf.section_by_name(".dynamic") {
        use object::ObjectSection as _;
        let dynstr = elf
            .section_by_name(".dynstr")
            .and_then(|s| s.data().ok())
            .unwrap_or_default();
        let entries: &[object::elf::Dyn64<object::Endianness>] =
            object::pod::slice_from_all_bytes(section.data().unwrap()).unwrap_or_default();
        for entry in entries {
            if entry.d_tag.get(elf.endian()) == object::elf::DT_NEEDED {
                let at = entry.d_val.get(elf.endian()) as usize;
                let name = dynstr[at..].split(|b| *b == 0).next().unwrap_or_default();
                needed.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    (interp, needed)
}
