//! Sonde inside Debian's own kernels: each kernel is booted once under QEMU with an initramfs
//! holding busybox, sonde and the workloads; the guest's `/init` (`tests/vm/init.sh`) runs every
//! scenario and sends the profiles back on the serial console, where the host tests' assertions
//! check them.

pub mod apt;
pub mod arch;
mod filter;
pub mod initramfs;
pub mod kernel;
pub mod pool;
pub mod qemu;

use std::{collections::HashMap, path::PathBuf, sync::Mutex, time::Duration};

use super::{FP_FLAGS, NOFP_FLAGS, build_workload_with, go, root, temp_dir};

pub use arch::Arch;
pub use kernel::Kernel;
pub use qemu::Boot;

/// One kernel's boot: which kernel, what its guest printed and sent.
pub struct Guest {
    pub arch: Arch,
    /// Whether `/init` ran the Python scenario.
    pub python: bool,
    pub kernel: Kernel,
    pub boot: Boot,
    /// `uname -r` in the guest.
    pub uname: String,
    /// Where the files the guest sent were written (to read them with the host tests' helpers).
    pub dir: PathBuf,
}

/// The longest a boot with every scenario may take under software emulation: about 10 s of boot and
/// five recordings of 15-25 s of wall time each (six on arm64, emulated more slowly).
const BOOT_TIMEOUT: Duration = Duration::from_secs(420);

/// Where the guest finds Python's split workload (also its frames' file name).
pub const PY_SPLIT: &str = "/work/py_split.py";

/// The initramfs every kernel of `arch` boots (built once per test run: the same programs run on
/// each).
fn initrd(arch: Arch) -> PathBuf {
    static INITRDS: Mutex<Option<HashMap<Arch, PathBuf>>> = Mutex::new(None);
    let mut built = INITRDS.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(path) = built.get(&arch) {
        return path.clone();
    }
    let path = build_initrd(arch);
    built.insert(arch, path.clone());
    path
}

fn build_initrd(arch: Arch) -> PathBuf {
    let init = std::fs::read_to_string(root().join("tests/vm/init.sh")).unwrap();
    // Busybox and Python of another architecture come from the host's own Debian release (whose
    // libc the cross toolchain's is).
    let userland = (!arch.is_host()).then(|| apt::Index::update(&host_release(), arch));
    let mut fs = initramfs::Initramfs::new(&init, arch, userland.as_ref());
    let gcc = arch.gcc();
    let tag = arch.debian();
    let workload = |name: &str, flags: &[&str], kind: &str| {
        build_workload_with(gcc, name, &format!("vm_{tag}_{name}_{kind}"), flags)
    };
    fs.add_program("bin/sonde", &arch.sonde());
    fs.add_program("work/cpu_split_fp", &workload("cpu_split", FP_FLAGS, "fp"));
    fs.add_program(
        "work/cpu_split_nofp",
        &workload("cpu_split", NOFP_FLAGS, "nofp"),
    );
    fs.add_program(
        "work/offcpu_sleep",
        &workload("offcpu_sleep", FP_FLAGS, "fp"),
    );
    fs.add_program(
        "work/go_split",
        &go::build_stripped_for("go_split", arch.goarch()),
    );
    if let Some(userland) = &userland {
        add_python(&mut fs, userland);
        fs.add_program(
            "work/signal_burn_nofp",
            &workload("signal_burn", NOFP_FLAGS, "nofp"),
        );
    }
    let out = temp_dir("vm").join(format!("initrd-{tag}.cpio"));
    fs.write(&out);
    out
}

/// Debian's `python3` of the guest's architecture (its interpreter package and those it depends on,
/// libc aside) and `py_split.py` as [`PY_SPLIT`]: `/init` records it when `/usr/bin/python3` is
/// there. Python runs on the host's own architecture in the host tests; in a guest, only where the
/// host cannot run it.
fn add_python(fs: &mut initramfs::Initramfs, index: &apt::Index) {
    let depends = |package: &str| -> Vec<String> {
        index
            .depends(package)
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                l.strip_prefix("Depends: ")
                    .or_else(|| l.strip_prefix("PreDepends: "))
            })
            .map(|p| p.trim_matches(|c| c == '<' || c == '>').to_owned())
            .collect()
    };
    let interpreter = depends("python3-minimal")
        .into_iter()
        .find(|p| p.starts_with("python3.") && p.ends_with("-minimal"))
        .expect("python3-minimal depends on a python3.X-minimal");
    let version = interpreter.trim_end_matches("-minimal").to_owned();
    for package in std::iter::once(interpreter.clone()).chain(depends(&interpreter)) {
        if package.starts_with("libc6") {
            continue;
        }
        let tree = index.unpack_current(&package, &[]);
        fs.add_tree(&tree);
    }
    fs.add_link("usr/bin/python3", &version);
    fs.add_file(
        PY_SPLIT.trim_start_matches('/'),
        &root().join("tests/workloads/python/py_split.py"),
        0o644,
    );
}

/// The codename of the host's Debian release (`VERSION_CODENAME` in `/etc/os-release`).
fn host_release() -> String {
    let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    os.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
        .expect("/etc/os-release names no VERSION_CODENAME: the VM tests take another architecture's busybox and Python from the host's Debian release")
}

/// Boots the newest cloud kernel of Debian `release` for `arch` with every scenario (Python where
/// planned), and writes what the guest sent under a fresh directory. Panics (never skips) when the
/// kernel, QEMU or busybox cannot be had.
fn boot_release(planned: &pool::Planned) -> Guest {
    let (release, arch) = (planned.release, planned.arch);
    let python = planned.python && !arch.is_host();
    // Guests boot in parallel (`pool`), but apt's indexes and the initramfs are shared: one
    // guest's preparation at a time.
    static PREPARE: Mutex<()> = Mutex::new(());
    let prepared = PREPARE.lock().unwrap_or_else(|e| e.into_inner());
    let kernel = kernel::fetch(release, arch);
    eprintln!(
        "vm: {release} ({}): booting {} {} ({})",
        arch.debian(),
        kernel.package,
        kernel.version,
        kernel.vmlinuz.display()
    );
    let dir = temp_dir(&format!("vm-{release}-{}", arch.debian()));
    let initrd = initrd(arch);
    drop(prepared);
    let machine = qemu::Machine {
        arch,
        vmlinuz: &kernel.vmlinuz,
        initrd: &initrd,
        // Read by `/init`.
        append: if python { "" } else { "sonde.no_python" },
    };
    let boot = qemu::boot(&machine, &dir, BOOT_TIMEOUT);
    eprintln!(
        "vm: {release}: {} {} booted and finished in {:.0} s ({}); console in {}",
        kernel.package,
        kernel.version,
        boot.wall.as_secs_f64(),
        boot.accel,
        dir.display()
    );
    assert!(
        boot.console.contains(qemu::DONE_MARKER),
        "the guest did not finish its scenarios:\n{}",
        boot.tail(50)
    );
    for (name, bytes) in &boot.files {
        let path = dir.join("out").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let uname = boot.text("uname").trim().to_owned();
    assert!(
        !uname.is_empty(),
        "the guest sent no uname\n{}",
        boot.tail(50)
    );
    Guest {
        arch,
        python,
        kernel,
        boot,
        uname,
        dir: dir.join("out"),
    }
}

impl Guest {
    /// Prints how long the boot took and what each scenario did, for the log of every run (the
    /// test's output shows it on failure). The test's own thread prints it: a guest booted ahead
    /// (`pool`) printed nothing into its test's output.
    pub fn print_log(&self) {
        eprintln!(
            "vm: {} {} {} finished in {:.0} s ({})",
            self.kernel.release,
            self.arch.debian(),
            self.uname,
            self.boot.wall.as_secs_f64(),
            self.boot.accel
        );
        for line in self
            .boot
            .console
            .lines()
            .filter(|l| l.starts_with("SONDE-VM: "))
        {
            eprintln!("guest {}: {line}", self.uname);
        }
    }

    /// The exit status scenario `name` reported.
    pub fn status(&self, name: &str) -> i32 {
        let text = self.boot.text(&format!("{name}.status"));
        text.trim().parse().unwrap_or_else(|_| {
            panic!(
                "the guest sent no status for {name}\n{}",
                self.boot.tail(50)
            )
        })
    }

    /// A pid the guest recorded (`<name>.pid`).
    pub fn pid(&self, name: &str) -> u32 {
        self.boot
            .text(&format!("{name}.pid"))
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the guest sent no {name}.pid"))
    }

    /// Scenario `name`'s stderr.
    pub fn stderr(&self, name: &str) -> String {
        self.boot.text(&format!("{name}.stderr"))
    }

    /// Panics with scenario `name`'s stderr unless it exited 0.
    pub fn assert_ok(&self, name: &str) {
        let status = self.status(name);
        assert_eq!(
            status,
            0,
            "{name} on {} ({} {}): sonde exited {status}:\n{}",
            self.uname,
            self.kernel.package,
            self.kernel.version,
            self.stderr(name)
        );
    }
}
