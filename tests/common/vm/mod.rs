//! Sonde inside Debian's own kernels: each kernel is booted once under QEMU with an initramfs
//! holding busybox, sonde and the workloads; the guest's `/init` (`tests/vm/init.sh`) runs every
//! scenario and sends the profiles back on the serial console, where the host tests' assertions
//! check them.

pub mod initramfs;
pub mod kernel;
pub mod qemu;

use std::{path::PathBuf, sync::OnceLock, time::Duration};

use super::{FP_FLAGS, NOFP_FLAGS, build_workload, go, root, temp_dir};

pub use kernel::Kernel;
pub use qemu::Boot;

/// One kernel's boot: which kernel, what its guest printed and sent.
pub struct Guest {
    pub kernel: Kernel,
    pub boot: Boot,
    /// `uname -r` in the guest.
    pub uname: String,
    /// Where the files the guest sent were written (to read them with the host tests' helpers).
    pub dir: PathBuf,
}

/// The longest a boot with every scenario may take under software emulation: about 10 s of boot and
/// five recordings of 15-25 s of wall time each.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

/// The initramfs every kernel boots (built once per test run: the same programs run on each).
fn initrd() -> &'static PathBuf {
    static INITRD: OnceLock<PathBuf> = OnceLock::new();
    INITRD.get_or_init(|| {
        let init = std::fs::read_to_string(root().join("tests/vm/init.sh")).unwrap();
        let mut fs = initramfs::Initramfs::new(&init);
        fs.add_program(
            "bin/sonde",
            std::path::Path::new(env!("CARGO_BIN_EXE_sonde")),
        );
        fs.add_program(
            "work/cpu_split_fp",
            &build_workload("cpu_split", "vm_cpu_split_fp", FP_FLAGS),
        );
        fs.add_program(
            "work/cpu_split_nofp",
            &build_workload("cpu_split", "vm_cpu_split_nofp", NOFP_FLAGS),
        );
        fs.add_program(
            "work/offcpu_sleep",
            &build_workload("offcpu_sleep", "vm_offcpu_sleep", FP_FLAGS),
        );
        fs.add_program("work/go_split", &go::build_stripped("go_split"));
        let out = temp_dir("vm").join("initrd.cpio");
        fs.write(&out);
        out
    })
}

/// Boots the newest cloud kernel of Debian `release` with every scenario, and writes what the guest
/// sent under a fresh directory. Panics (never skips) when the kernel, QEMU or busybox cannot be had.
pub fn boot_release(release: &str) -> Guest {
    let kernel = kernel::fetch(release);
    eprintln!(
        "vm: {release}: booting {} {} ({})",
        kernel.package,
        kernel.version,
        kernel.vmlinuz.display()
    );
    let dir = temp_dir(&format!("vm-{release}"));
    let boot = qemu::boot(&kernel.vmlinuz, initrd(), "", &dir, BOOT_TIMEOUT);
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
    // What each scenario did, for the log of every run (the test's output shows it on failure).
    for line in boot.console.lines().filter(|l| l.starts_with("SONDE-VM: ")) {
        eprintln!("guest {uname}: {line}");
    }
    Guest {
        kernel,
        boot,
        uname,
        dir: dir.join("out"),
    }
}

impl Guest {
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
