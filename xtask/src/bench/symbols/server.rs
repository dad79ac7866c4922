//! A local debuginfod server (Debian's `debuginfod`) over the workloads' split debug files, so the
//! debuginfod rows measure sonde's fetch and cache, not a public server's latency or availability.

use std::{
    fs::File,
    io::{Read as _, Write as _},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

/// Time the server gets to index the debug files (it scans them once, in the background, at start).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The running server: killed and reaped when dropped, so a failed bench leaves no server behind.
pub(super) struct Debuginfod {
    child: Child,
    /// What sonde's `--debuginfod-urls` gets.
    pub(super) url: String,
    port: u16,
    log: PathBuf,
}

impl Debuginfod {
    /// Serves the debug files under `files`, keeping its database and log in `dir`, and returns once
    /// every one of `build_ids` is served.
    pub(super) fn start(dir: &Path, files: &Path, build_ids: &[&str]) -> anyhow::Result<Self> {
        // A database of an earlier bench would list files that no longer exist.
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(dir.join(format!("debuginfod.sqlite{ext}")));
        }
        let port = free_port()?;
        let log = dir.join("debuginfod.log");
        let out = File::create(&log)?;
        let child = Command::new("debuginfod")
            .args(["-F", "-p", &port.to_string(), "-d"])
            .arg(dir.join("debuginfod.sqlite"))
            // No rescans, no grooming, one scanner thread: it indexes the files once, then only serves.
            .args(["-t", "0", "-g", "0", "-c", "1"])
            .arg(files)
            .stdin(Stdio::null())
            // One open file for both, so neither overwrites the other's lines.
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("starting debuginfod")?;
        let mut server = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            port,
            log,
        };
        server.wait_ready(build_ids)?;
        Ok(server)
    }

    fn wait_ready(&mut self, build_ids: &[&str]) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        for id in build_ids {
            let path = format!("/buildid/{id}/debuginfo");
            // 404 until the scan has reached the file; refused until the server listens.
            while http_status(self.port, &path) != Some(200) {
                if let Ok(Some(status)) = self.child.try_wait() {
                    bail!("debuginfod exited ({status}); see {}", self.log.display());
                }
                if Instant::now() > deadline {
                    bail!(
                        "debuginfod does not serve {path} after {} s; see {}",
                        READY_TIMEOUT.as_secs(),
                        self.log.display()
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }
}

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now (the kernel's pick; free, in practice, until the server binds it).
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a local port")?;
    Ok(listener.local_addr()?.port())
}

/// Status code of `GET path` on the local port, `None` when there is no answer.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    // HTTP/1.0: the server closes the connection after the response, which ends the read.
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let head = String::from_utf8_lossy(&response[..response.len().min(64)]).into_owned();
    head.split_whitespace().nth(1)?.parse().ok()
}
