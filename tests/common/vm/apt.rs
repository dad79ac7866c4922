//! A private apt index of one Debian release and architecture, under `target/vm-cache/`: the guests'
//! kernels and, for a guest of another architecture, its busybox and Python come from Debian's
//! archive through apt's own tools, while the machine's apt configuration stays untouched.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::Arch;
use crate::common::root;

/// Debian `release`'s package index for `arch`, updated once per test run.
pub struct Index {
    pub release: String,
    pub arch: Arch,
    dir: PathBuf,
}

impl Index {
    /// The index of `release` for `arch` (`target/vm-cache/<release>` for amd64, as before arm64
    /// came, and `<release>-<arch>` for the others), updated from the archive.
    pub fn update(release: &str, arch: Arch) -> Index {
        let name = match arch {
            Arch::X86_64 => release.to_owned(),
            _ => format!("{release}-{}", arch.debian()),
        };
        let dir = root().join("target/vm-cache").join(name);
        for sub in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(
            dir.join("sources.list"),
            format!(
                "deb [arch={}] {} {release} main\n",
                arch.debian(),
                debian_archive()
            ),
        )
        .unwrap();
        let index = Index {
            release: release.into(),
            arch,
            dir,
        };
        index.apt(&index.dir, "apt-get", &["-qq", "update"]);
        index
    }

    /// The cache directory of this index (extracted packages live under it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `apt-cache depends package`.
    pub fn depends(&self, package: &str) -> String {
        self.apt(&self.dir, "apt-cache", &["depends", package])
    }

    /// The candidate version of `package` in the index, if it is there.
    pub fn version_of(&self, package: &str) -> Option<String> {
        let out = self.output(
            &self.dir,
            "apt-cache",
            &["show", "--no-all-versions", package],
        );
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("Version: "))
            .map(str::to_owned)
    }

    /// Downloads `package` at `version` and unpacks the members matching `patterns` (tar wildcards,
    /// e.g. `./boot/vmlinuz-*`; all of it when empty) into `package_version/` under the cache,
    /// reused when already there. Returns that directory.
    pub fn unpack(&self, package: &str, version: &str, patterns: &[&str]) -> PathBuf {
        let extracted = self.dir.join(format!("{package}_{version}"));
        if extracted.exists() {
            return extracted;
        }
        eprintln!(
            "vm: downloading {package} {version} ({} {})",
            self.release,
            self.arch.debian()
        );
        let download = self.dir.join("download");
        let _ = std::fs::remove_dir_all(&download);
        std::fs::create_dir_all(&download).unwrap();
        self.apt(
            &download,
            "apt-get",
            &["-qq", "download", &format!("{package}={version}")],
        );
        let deb = std::fs::read_dir(&download)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .unwrap_or_else(|| panic!("apt-get download {package} left no .deb"));
        let tmp = self.dir.join("extract");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let status = Command::new("sh")
            .arg("-c")
            .arg("deb=$1 dir=$2; shift 2; dpkg-deb --fsys-tarfile \"$deb\" | tar -x -C \"$dir\" --wildcards \"$@\"")
            .args(["sh", deb.to_str().unwrap(), tmp.to_str().unwrap()])
            .args(patterns)
            .status()
            .expect("dpkg-deb and tar");
        assert!(
            status.success(),
            "extracting {patterns:?} from {}",
            deb.display()
        );
        // Renamed into place only once complete: an interrupted run leaves nothing half-extracted.
        std::fs::rename(&tmp, &extracted).unwrap();
        std::fs::remove_dir_all(&download).unwrap();
        extracted
    }

    /// [`Index::unpack`] of the candidate version of `package`.
    pub fn unpack_current(&self, package: &str, patterns: &[&str]) -> PathBuf {
        let version = self.version_of(package).unwrap_or_else(|| {
            panic!(
                "{package} is not in Debian {}'s {} index",
                self.release,
                self.arch.debian()
            )
        });
        self.unpack(package, &version, patterns)
    }

    /// Runs an apt tool on this index in `cwd`; panics with its output when it fails.
    fn apt(&self, cwd: &Path, tool: &str, args: &[&str]) -> String {
        let out = self.output(cwd, tool, args);
        assert!(
            out.status.success(),
            "{tool} {args:?} on Debian's {} index failed (the VM tests download Debian's packages: is \
             the archive reachable?):\n{}{}",
            self.dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn output(&self, cwd: &Path, tool: &str, args: &[&str]) -> std::process::Output {
        let dir = &self.dir;
        let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
        let arch = self.arch.debian();
        Command::new(tool)
            .current_dir(cwd)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args([
                "-o",
                &opt("Dir::Etc::sourcelist", &dir.join("sources.list")),
            ])
            .args(["-o", "Dir::Etc::sourceparts=-"])
            .args(["-o", &opt("Dir::State::Lists", &dir.join("lists"))])
            .args(["-o", &opt("Dir::Cache", &dir.join("cache"))])
            // The guest's architecture, whatever the host's: `apt-cache depends` and `download`
            // then mean its packages.
            .args(["-o", &format!("APT::Architecture={arch}")])
            .args(["-o", &format!("APT::Architectures={arch}")])
            // apt drops to the `_apt` user to download, who cannot write into target/.
            .args(["-o", "APT::Sandbox::User=root"])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {tool}: {e}"))
    }
}

/// The Debian archive this machine's apt is set up with (the `URIs:` of its deb822 Debian entry, or the
/// URI of a one-line `deb` entry): the other releases' packages come from the same archive.
fn debian_archive() -> String {
    let deb822 =
        std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources").unwrap_or_default();
    let from_deb822 = deb822
        .lines()
        .filter_map(|l| l.strip_prefix("URIs:"))
        .flat_map(str::split_whitespace)
        .find(|uri| uri.trim_end_matches('/').ends_with("/debian"));
    let one_line = std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    let from_one_line = one_line
        .lines()
        .filter(|l| l.trim_start().starts_with("deb "))
        .filter_map(|l| l.split_whitespace().find(|w| w.contains("://")))
        .find(|uri| uri.trim_end_matches('/').ends_with("/debian"));
    from_deb822
        .or(from_one_line)
        .map(str::to_owned)
        .expect("no Debian archive in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list: the VM tests fetch Debian's kernels from the archive apt is set up with")
}
