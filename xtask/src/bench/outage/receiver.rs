//! The backend of the outage benchmark: tests/peers/otlp_receiver.py run with the peers' Python, killed
//! for the outage and started again on the same port, and the parse of what it prints (one JSON object
//! per Export request, with its arrival stamp).

use std::{
    hash::{Hash as _, Hasher as _},
    io::{BufRead as _, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    thread::JoinHandle,
};

use anyhow::{Context as _, bail, ensure};

use crate::{setup::peers_python, util::root};

/// The OTLP resource attribute that names a window.
const BATCH_ID_KEY: &str = "\"sonde.batch.id\": \"";
/// The receiver's arrival stamp (wall clock, ns), a key of each JSON line.
const RECEIVED_KEY: &str = "\"received_unix_ns\": ";

/// One Export request as the receiver printed it.
#[derive(Debug, PartialEq)]
pub(super) struct Receipt {
    pub(super) received_unix_ns: u128,
    /// Distinct batch ids of its resources (one, unless a test sends several windows in one request).
    pub(super) batch_ids: Vec<String>,
    /// Hash of the decoded request without its arrival stamp: the same window sent twice hashes the same,
    /// while the parts of a window split into several requests do not.
    pub(super) content: u64,
}

/// Parses one JSON line of the receiver (`None` for any other line). Python's `json.dumps` writes
/// `"key": value`, and batch ids hold no quotes, so plain string search is enough here.
fn parse_receipt(line: &str) -> Option<Receipt> {
    let at = line.find(RECEIVED_KEY)?;
    let rest = &line[at + RECEIVED_KEY.len()..];
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let received_unix_ns = rest[..digits].parse().ok()?;
    let mut stripped = line[..at].to_owned();
    stripped.push_str(rest[digits..].trim_start_matches(", "));
    let mut batch_ids: Vec<String> = Vec::new();
    for (i, _) in line.match_indices(BATCH_ID_KEY) {
        let id = &line[i + BATCH_ID_KEY.len()..];
        let id = &id[..id.find('"')?];
        if !batch_ids.iter().any(|b| b == id) {
            batch_ids.push(id.to_owned());
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    stripped.hash(&mut h);
    Some(Receipt {
        received_unix_ns,
        batch_ids,
        content: h.finish(),
    })
}

/// A running receiver and the thread that collects what it prints.
pub(super) struct Receiver {
    child: Child,
    reader: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Starts the receiver on `port` (0: any), waits for its `PORT` line and returns it with the port.
    pub(super) fn start(
        port: u16,
        log: &Path,
        receipts: &Arc<Mutex<Vec<Receipt>>>,
    ) -> anyhow::Result<(Self, u16)> {
        let python = peers_python();
        ensure!(
            python.exists(),
            "{} is missing: run `cargo xtask setup --peers` first",
            python.display()
        );
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let mut child = Command::new(&python)
            .arg(root().join("tests/peers/otlp_receiver.py"))
            .args(["--requests", "1000000000", "--timeout", "86400", "--port"])
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {}", python.display()))?;
        let mut lines = BufReader::new(child.stdout.take().context("receiver stdout")?).lines();
        let first = lines.next().transpose()?.unwrap_or_default();
        let Some(bound) = first.strip_prefix("PORT ").and_then(|p| p.parse().ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the OTLP receiver did not start (first line {first:?}); see {}",
                log.display()
            );
        };
        let receipts = Arc::clone(receipts);
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(r) = parse_receipt(&line) {
                    receipts.lock().expect("receipts lock").push(r);
                }
            }
        });
        Ok((
            Self {
                child,
                reader: Some(reader),
            },
            bound,
        ))
    }

    /// Kills it (SIGKILL: a backend that dies, no goodbye) and waits until its output is read.
    pub(super) fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::parse_receipt;

    #[test]
    fn a_receipt_gives_its_stamp_and_distinct_batch_ids_and_ignores_the_stamp_in_its_hash() {
        let line = r#"{"received_unix_ns": 1700000000123456789, "resources": [{"attributes": {"host.name": "h", "sonde.batch.id": "00000000deadbeef-7"}}, {"attributes": {"sonde.batch.id": "00000000deadbeef-7"}}], "stack_table_size": 3}"#;
        let r = parse_receipt(line).unwrap();
        assert_eq!(r.received_unix_ns, 1_700_000_000_123_456_789);
        assert_eq!(r.batch_ids, vec!["00000000deadbeef-7".to_owned()]);
        let later = line.replace("1700000000123456789", "1700000099000000000");
        assert_eq!(parse_receipt(&later).unwrap().content, r.content);
        let other = line.replace("\"stack_table_size\": 3", "\"stack_table_size\": 4");
        assert_ne!(parse_receipt(&other).unwrap().content, r.content);
        assert_eq!(parse_receipt("PORT 4317"), None);
    }
}
