//! Boots a kernel and an initramfs under QEMU and reads back what the guest printed on its serial
//! console: its lines, and the files it sent between marker lines, base64-encoded.

use std::{
    collections::BTreeMap,
    io::Read as _,
    path::Path,
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use base64::Engine as _;

use super::Arch;

/// What the guest's `/init` prints first: the boot reached user space.
pub const INIT_MARKER: &str = "SONDE-VM: init";
/// `SONDE-VM-FILE <name> <bytes>` opens a file, base64 lines follow, `SONDE-VM-END` closes it.
const FILE_MARKER: &str = "SONDE-VM-FILE ";
const END_MARKER: &str = "SONDE-VM-END";
/// The guest's last line before it powers off.
pub const DONE_MARKER: &str = "SONDE-VM: done";

/// A finished boot: the console and the files the guest sent.
pub struct Boot {
    pub console: String,
    pub files: BTreeMap<String, Vec<u8>>,
    pub wall: Duration,
    /// `kvm` or `tcg`.
    pub accel: &'static str,
}

impl Boot {
    /// The file `name` the guest sent; panics with the end of the console when it did not.
    pub fn file(&self, name: &str) -> &[u8] {
        self.files
            .get(name)
            .unwrap_or_else(|| panic!("the guest sent no {name}\n{}", self.tail(50)))
    }

    /// The file `name` as text (empty when the guest did not send it).
    pub fn text(&self, name: &str) -> String {
        self.files
            .get(name)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// The console's last `n` lines.
    pub fn tail(&self, n: usize) -> String {
        tail(&self.console, n)
    }
}

fn tail(console: &str, n: usize) -> String {
    let lines: Vec<&str> = console.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Set once a KVM guest failed to reach `/init`: the rest of the run uses software emulation.
static KVM_BROKEN: AtomicBool = AtomicBool::new(false);
/// How long a KVM guest may take to reach `/init` before KVM counts as broken. On some hosts (nested
/// virtualisation) `/dev/kvm` exists but the guest hangs after the BIOS; a working KVM guest gets
/// there in about a second.
const KVM_GRACE: Duration = Duration::from_secs(15);

/// What a boot runs: an `arch` kernel `vmlinuz` with `initrd`, `append` added to its command line.
pub struct Machine<'a> {
    pub arch: Arch,
    pub vmlinuz: &'a Path,
    pub initrd: &'a Path,
    pub append: &'a str,
}

/// Boots `machine` with the console into `dir/console.log`, and waits for the guest to power off
/// within `timeout`. KVM when the guest is of the host's architecture and `/dev/kvm` works, else
/// software emulation (TCG). Panics with the console's last lines when QEMU is missing, the guest
/// does not finish in time, or a file it sent is damaged.
pub fn boot(machine: &Machine, dir: &Path, timeout: Duration) -> Boot {
    let (qemu_bin, package) = machine.arch.qemu();
    let which = Command::new(qemu_bin).arg("--version").output();
    assert!(
        which.is_ok_and(|o| o.status.success()),
        "{qemu_bin} is missing: the VM tests need Debian's {package} (cargo xtask setup --peers)"
    );
    let start = Instant::now();
    if machine.arch.is_host()
        && Path::new("/dev/kvm").exists()
        && !KVM_BROKEN.load(Ordering::Relaxed)
    {
        let log = dir.join("console-kvm.log");
        let mut child = qemu(machine, &log, true);
        if wait_for(&mut child, &log, INIT_MARKER, KVM_GRACE) {
            let console = finish(child, &log, timeout.saturating_sub(start.elapsed()));
            return parse(console, start.elapsed(), "kvm");
        }
        let _ = child.kill();
        let _ = child.wait();
        KVM_BROKEN.store(true, Ordering::Relaxed);
        eprintln!(
            "vm: a KVM guest did not reach /init in {KVM_GRACE:?} (console in {}): software emulation from now on",
            log.display()
        );
    }
    let start = Instant::now();
    let log = dir.join("console.log");
    let child = qemu(machine, &log, false);
    let console = finish(child, &log, timeout);
    parse(console, start.elapsed(), "tcg")
}

fn qemu(machine: &Machine, log: &Path, kvm: bool) -> Child {
    let arch = machine.arch;
    let accel: &[&str] = if kvm {
        &["-accel", "kvm", "-cpu", "host"]
    } else {
        arch.tcg_machine()
    };
    let console = std::fs::File::create(log).unwrap();
    Command::new(arch.qemu().0)
        .args(accel)
        .args(["-smp", "2", "-m", "2048"])
        // No display, the serial console on stdout; a reboot (or panic=-1's reset) ends QEMU.
        .args([
            "-nographic",
            "-no-reboot",
            "-nodefaults",
            "-serial",
            "stdio",
        ])
        .arg("-kernel")
        .arg(machine.vmlinuz)
        .arg("-initrd")
        .arg(machine.initrd)
        .arg("-append")
        .arg(format!(
            "console={} panic=-1 quiet loglevel=1 {}",
            arch.console(),
            machine.append
        ))
        .stdin(Stdio::null())
        .stdout(console.try_clone().unwrap())
        .stderr(console)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", arch.qemu().0))
}

/// Waits until the console log holds `marker` (true) or `grace` passes or QEMU exits (false).
fn wait_for(child: &mut Child, log: &Path, marker: &str, grace: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < grace {
        if read_log(log).contains(marker) {
            return true;
        }
        if child.try_wait().ok().flatten().is_some() {
            return read_log(log).contains(marker);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// Waits for QEMU to exit (the guest powered off or panicked) within `timeout`; the console.
fn finish(mut child: Child, log: &Path, timeout: Duration) -> String {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let console = read_log(log);
            assert!(
                status.success(),
                "QEMU failed ({status}); console {}:\n{}",
                log.display(),
                tail(&console, 50)
            );
            return console;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the guest did not power off within {timeout:?}; last 50 lines of {}:\n{}",
                log.display(),
                tail(&read_log(log), 50)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn read_log(log: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        let _ = f.read_to_end(&mut bytes);
    }
    // The serial line ends lines with \r\n; the BIOS writes escape sequences before the kernel.
    String::from_utf8_lossy(&bytes).replace('\r', "")
}

/// Splits the files the guest sent out of the console; each must have the size the guest announced.
fn parse(console: String, wall: Duration, accel: &'static str) -> Boot {
    let mut files = BTreeMap::new();
    let mut current: Option<(String, usize, String)> = None;
    for line in console.lines() {
        if let Some(rest) = line.strip_prefix(FILE_MARKER) {
            let (name, size) = rest
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad file marker {line:?}"));
            current = Some((name.into(), size.trim().parse().unwrap(), String::new()));
        } else if line.starts_with(END_MARKER) {
            let (name, size, text) = current
                .take()
                .unwrap_or_else(|| panic!("{END_MARKER} without a file\n{}", tail(&console, 50)));
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&text)
                .unwrap_or_else(|e| panic!("the guest's {name} is not base64 ({e})"));
            assert_eq!(
                bytes.len(),
                size,
                "the guest's {name} came back damaged (console lines mixed into it?)"
            );
            files.insert(name, bytes);
        } else if let Some((_, _, text)) = current.as_mut() {
            text.push_str(line.trim());
        }
    }
    Boot {
        console,
        files,
        wall,
        accel,
    }
}
