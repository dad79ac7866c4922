//! Stripped binaries and their debug files, made the way distributions and release pipelines make them,
//! and a real debuginfod server (elfutils, Debian package `debuginfod`) serving them on loopback.
#![allow(dead_code)]

use std::{
    io::{Read as _, Write as _},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// Runs a tool, panicking with its stderr on failure.
pub fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} must be installed (cargo xtask setup --peers): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The GNU build id of an ELF file, in hex, from `readelf -n`.
pub fn build_id(path: &Path) -> String {
    tool("readelf", &["-n", path.to_str().unwrap()])
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("{} has no build id", path.display()))
        .trim()
        .to_owned()
}

/// A binary split as release pipelines do: `objcopy --only-keep-debug` keeps DWARF and `.symtab` in
/// `<bin>.debug`, then `strip --strip-all` leaves the shipped binary with `.dynsym` and `.eh_frame`.
pub struct Split {
    pub stripped: PathBuf,
    pub debug: PathBuf,
    pub build_id: String,
}

/// Splits `bin` (built with `-g`) into a stripped copy named `stripped_name` and its debug file.
pub fn split_debug(bin: &Path, stripped_name: &str) -> Split {
    let dir = bin.parent().unwrap();
    let stripped = dir.join(stripped_name);
    let debug = dir.join(format!("{stripped_name}.debug"));
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    tool("objcopy", &["--only-keep-debug", &s(bin), &s(&debug)]);
    std::fs::copy(bin, &stripped).unwrap();
    tool("strip", &["--strip-all", &s(&stripped)]);
    let sections = tool("readelf", &["-S", &s(&stripped)]);
    assert!(
        !sections.contains(".symtab") && !sections.contains(".debug_info"),
        "strip left symbols in {}",
        stripped.display()
    );
    Split {
        build_id: build_id(&stripped),
        stripped,
        debug,
    }
}

/// Places `debug` as `<dir>/.build-id/xx/rest.debug`, the layout of `/usr/lib/debug`.
pub fn place_by_build_id(dir: &Path, build_id: &str, debug: &Path) {
    let sub = dir.join(".build-id").join(&build_id[..2]);
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(debug, sub.join(format!("{}.debug", &build_id[2..]))).unwrap();
}

/// The HTTP status of `GET path` on `127.0.0.1:port` (None when nothing answers).
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// elfutils' debuginfod over a directory, killed when dropped.
pub struct Debuginfod {
    child: Child,
    pub url: String,
}

impl Debuginfod {
    /// Starts `debuginfod -F` over `dir` (scanned once, no grooming) and waits until it serves
    /// `build_id`'s debug file.
    pub fn serve(dir: &Path, build_id: &str, work: &Path) -> Self {
        let port = super::free_port();
        let log = std::fs::File::create(work.join("debuginfod.log")).unwrap();
        let child = Command::new("debuginfod")
            .args([
                "-F",
                "-p",
                &port.to_string(),
                "-t",
                "0",
                "-g",
                "0",
                "-c",
                "1",
                "-d",
            ])
            .arg(work.join("debuginfod.sqlite"))
            .arg(dir)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("debuginfod must be installed (cargo xtask setup --peers)");
        let server = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let path = format!("/buildid/{build_id}/debuginfo");
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_status(port, &path) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "debuginfod did not serve {path} within 30 s; see {}",
                work.join("debuginfod.log").display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }
}

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server that accepts connections and never answers, as a wedged proxy does. Runs until the test
/// process exits.
pub fn hanging_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    url
}

/// `sonde record` of `pid` with `DEBUGINFOD_URLS` set to `urls` (unset when None); the summary and the
/// wall time the command took.
pub fn record_with_debuginfod(
    pid: u32,
    seconds: &str,
    urls: Option<&str>,
    extra: &[&str],
    out: &Path,
) -> (String, Duration) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sonde"));
    cmd.args(["record", "--duration", seconds, "--pid", &pid.to_string()])
        .args(extra)
        .args(["--output", out.to_str().unwrap(), "--summary-json", "-"])
        .env("SONDE_LOG", "warn");
    match urls {
        Some(urls) => cmd.env("DEBUGINFOD_URLS", urls),
        None => cmd.env_remove("DEBUGINFOD_URLS"),
    };
    let start = Instant::now();
    let output = cmd.output().expect("running sonde");
    let took = start.elapsed();
    assert!(
        output.status.success(),
        "sonde record failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (String::from_utf8(output.stdout).unwrap(), took)
}

/// The `unsymbolized_top` of a JSON summary, as the text summary writes it:
/// `binary (reason) samples; ...`.
pub fn unsymbolized_top(summary: &str) -> String {
    let json: serde_json::Value = serde_json::from_str(summary.trim())
        .unwrap_or_else(|e| panic!("the summary is not JSON ({e}):\n{summary}"));
    json["unsymbolized_top"]
        .as_array()
        .unwrap_or_else(|| panic!("summary has no unsymbolized_top:\n{summary}"))
        .iter()
        .map(|o| {
            format!(
                "{} ({}) {}",
                o["binary"].as_str().unwrap_or("?"),
                o["reason"].as_str().unwrap_or("?"),
                o["samples"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Frames of the binary whose mapping path ends with `binary`, weighted by samples: how many were named,
/// of how many, and every (function, file, line) they were named with.
pub struct BinaryFrames {
    pub named: i64,
    pub total: i64,
    pub symbols: std::collections::BTreeSet<(String, String, i64)>,
}

impl BinaryFrames {
    pub fn of(profile: &sonde::profile::pprof::proto::Profile, binary: &str) -> Self {
        let s = |i: i64| profile.string_table[i as usize].clone();
        let mappings: Vec<u64> = profile
            .mapping
            .iter()
            .filter(|m| s(m.filename).ends_with(binary))
            .map(|m| m.id)
            .collect();
        let locations: std::collections::HashMap<u64, _> =
            profile.location.iter().map(|l| (l.id, l)).collect();
        let functions: std::collections::HashMap<u64, _> =
            profile.function.iter().map(|f| (f.id, f)).collect();
        let mut frames = Self {
            named: 0,
            total: 0,
            symbols: Default::default(),
        };
        for sample in &profile.sample {
            for id in &sample.location_id {
                let location = locations[id];
                if !mappings.contains(&location.mapping_id) {
                    continue;
                }
                frames.total += sample.value[0];
                if location.line.is_empty() {
                    continue;
                }
                frames.named += sample.value[0];
                for line in &location.line {
                    let f = functions[&line.function_id];
                    frames.symbols.insert((s(f.name), s(f.filename), line.line));
                }
            }
        }
        frames
    }

    /// Share of the binary's frames that were named.
    pub fn named_ratio(&self) -> f64 {
        self.named as f64 / self.total.max(1) as f64
    }

    /// Asserts the binary's frames are ≥95% named, and that `functions` appear with a source file
    /// ending in `file` and a line number.
    pub fn assert_named(&self, functions: &[&str], file: &str, context: &str) {
        assert!(self.total > 100, "only {} frames\n{context}", self.total);
        assert!(
            self.named_ratio() >= 0.95,
            "{:.1}% of the frames named\n{context}",
            100.0 * self.named_ratio()
        );
        for function in functions {
            assert!(
                self.symbols
                    .iter()
                    .any(|(f, path, line)| f == function && path.ends_with(file) && *line > 0),
                "{function} not named with {file}:line; got {:?}\n{context}",
                self.symbols
            );
        }
    }
}
