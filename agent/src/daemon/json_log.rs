//! `sonde run --summary-json FILE`: the window log and the exit lines as JSON lines, one object per
//! line, for programs (tests, the bench, log shippers) to read instead of the text log. Each window
//! is `{"event":"window","figures":{...},...}` with every figure of the catalogue; each sink's exit
//! tally is `{"event":"stopped","sink":...}`. Appended, so a restart adds to the same file.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    sync::Mutex,
};

use anyhow::Context as _;

/// The open JSON log.
#[derive(Debug)]
pub(crate) struct JsonLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl JsonLog {
    /// Opens (creates) `path` for appending.
    pub(crate) fn open(path: &Path) -> anyhow::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| {
                format!(
                    "cannot write the JSON summary {}: choose a writable path",
                    path.display()
                )
            })?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Appends one line; a failure is logged, never fatal (the log is a report, not the profile).
    pub(crate) fn write(&self, line: serde_json::Value) {
        let mut text = line.to_string();
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(err) = file.write_all(text.as_bytes()) {
            tracing::warn!(%err, path = %self.path.display(), "writing the JSON summary failed");
        }
    }
}
