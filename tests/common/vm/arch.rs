//! The guest's architecture: what differs between booting an x86_64 and an arm64 Debian guest (the
//! kernel package, QEMU's machine, the console, the compilers of the workloads, where their shared
//! libraries come from, and which sonde goes in).

use std::path::{Path, PathBuf};

/// A guest architecture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Arch {
    #[default]
    X86_64,
    /// arm64, emulated (`qemu-system-aarch64 -M virt -cpu max`) on any host.
    Aarch64,
}

impl Arch {
    /// Debian's name (`amd64`, `arm64`): the kernel packages' suffix and apt's architecture.
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The QEMU system emulator and the Debian package it is in.
    pub fn qemu(self) -> (&'static str, &'static str) {
        match self {
            Arch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
            Arch::Aarch64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }

    /// QEMU's machine for this guest, under software emulation. x86_64 runs both vCPUs in one
    /// thread: with a thread each (QEMU's default), a vCPU could run kernel text the other was
    /// live-patching (`text_poke_bp`'s int3, as the kernel flips a static key when sonde attaches
    /// its tracepoints), and 6.12 was seen to oops on it. arm64 patches its text with
    /// `stop_machine`, so its vCPUs keep a thread each. `-cpu max` on arm64 has pointer
    /// authentication, which Debian's kernel turns on for user space: return addresses on the stack
    /// carry a PAC, as on Graviton 3 and later.
    pub fn tcg_machine(self) -> &'static [&'static str] {
        match self {
            Arch::X86_64 => &["-accel", "tcg,thread=single", "-cpu", "max"],
            Arch::Aarch64 => &["-M", "virt", "-accel", "tcg", "-cpu", "max"],
        }
    }

    /// Host threads a guest keeps busy (one per vCPU thread, see `tcg_machine`): the guest pool
    /// boots guests side by side only while their threads fit the host's CPUs. An arm64 guest's
    /// two vCPU threads beside another guest's shifted its timed splits (Debian's Python at 44%
    /// for its 50% burner beside the other arm64 guest; in one host thread, its off-CPU split read
    /// 1.75 for 2).
    pub fn host_threads(self) -> usize {
        match self {
            Arch::X86_64 => 1,
            Arch::Aarch64 => 2,
        }
    }

    /// The serial console's device in the guest.
    pub fn console(self) -> &'static str {
        match self {
            Arch::X86_64 => "ttyS0",
            Arch::Aarch64 => "ttyAMA0",
        }
    }

    /// Whether this host runs the guest's code natively (KVM can help, `ldd` works).
    pub fn is_host(self) -> bool {
        match self {
            Arch::X86_64 => cfg!(target_arch = "x86_64"),
            Arch::Aarch64 => cfg!(target_arch = "aarch64"),
        }
    }

    /// The C compiler of the guest's workloads: Debian's cross compiler for another architecture
    /// (`gcc-aarch64-linux-gnu`, which `cargo xtask build --target` installs).
    pub fn gcc(self) -> &'static str {
        if self.is_host() {
            return "gcc";
        }
        match self {
            Arch::X86_64 => "x86_64-linux-gnu-gcc",
            Arch::Aarch64 => "aarch64-linux-gnu-gcc",
        }
    }

    /// Where a cross compiler's target libraries are (`libc6-arm64-cross`): the guest's libc, its
    /// dynamic loader and libgcc come from there.
    pub fn cross_libraries(self) -> PathBuf {
        match self {
            Arch::X86_64 => PathBuf::from("/usr/x86_64-linux-gnu/lib"),
            Arch::Aarch64 => PathBuf::from("/usr/aarch64-linux-gnu/lib"),
        }
    }

    /// Go's name (`GOARCH`).
    pub fn goarch(self) -> &'static str {
        self.debian()
    }

    /// The sonde that goes into the guest: the test's own build on this architecture, else the
    /// cross build `cargo xtask test` makes and names in `SONDE_TEST_SONDE_<ARCH>`.
    pub fn sonde(self) -> PathBuf {
        if self.is_host() {
            return PathBuf::from(env!("CARGO_BIN_EXE_sonde"));
        }
        let var = format!("SONDE_TEST_SONDE_{}", self.debian().to_uppercase());
        let path = std::env::var_os(&var).map(PathBuf::from).unwrap_or_else(|| {
            panic!(
                "${var} is not set: the {self:?} guests run a cross-built sonde, which `cargo xtask test` \
                 (or `cargo xtask vm-test`) builds and names there"
            )
        });
        assert!(
            Path::new(&path).exists(),
            "${var} names {}, which does not exist",
            path.display()
        );
        path
    }
}
