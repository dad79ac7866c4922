//! Unwind tables kept on disk (`sonde run`: `<data dir>/unwind-tables/<build id>.rows`), so a restarted
//! agent loads the node's tables instead of parsing every binary's `.eh_frame` again. A file holds
//! the rows exactly as built; it is named by the binary's build id, which names its contents, so it
//! never goes stale. Files are checked whole before use (magic, length, checksum, order): a damaged or
//! foreign file is counted, removed and rebuilt, never trusted.

use sonde_abi::UnwindRow;

use crate::storage::SafeDir;

/// Subdirectory of the data directory.
pub(crate) const DIR: &str = "unwind-tables";
const MAGIC: &[u8; 8] = b"SONDEUT2";
const HEADER: usize = 8 + 8 + 8;
const ROW: usize = 8;
/// Largest file read (the CFI bound of one binary's table, `table::MAX_ROWS` rows, with room).
const MAX_FILE: u64 = 128 << 20;
/// Bytes of tables kept at most; beyond it new tables are not saved (they are still built and used).
const MAX_TOTAL: u64 = 1 << 30;
/// Free space a save must leave on the data directory's file system, at least: the tables are a
/// cache, and the profiles and the spool beside them are not, so a table never takes the room a
/// window needs (a tenth of the file system, and never less than the spool's default bound).
const MIN_FREE: u64 = 256 << 20;
const MIN_FREE_FRACTION: u64 = 10;

/// The directory of saved tables and what it holds.
pub(crate) struct SavedTables {
    dir: SafeDir,
    total: u64,
}

/// Why a saved table was not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SavedError {
    /// Reading or writing the directory failed.
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    /// The file is not a table sonde wrote, or was damaged.
    #[error("{name} in the unwind table directory is damaged ({why}); it is removed and rebuilt")]
    Damaged {
        /// The file.
        name: String,
        /// What is wrong.
        why: &'static str,
    },
}

impl SavedTables {
    /// Opens (creating it if needed) the table directory under `data`.
    pub(crate) fn open(data: &SafeDir) -> Result<Self, SavedError> {
        let dir = data.subdir(DIR)?;
        dir.remove_temp_files()?;
        let total = dir
            .entries()?
            .iter()
            .filter(|e| e.is_file)
            .map(|e| e.len)
            .sum();
        Ok(Self { dir, total })
    }

    /// The rows saved for `build_id`, None when there are none.
    pub(crate) fn load(&mut self, build_id: &str) -> Result<Option<Vec<UnwindRow>>, SavedError> {
        let Some(name) = file_name(build_id) else {
            return Ok(None);
        };
        if !self.dir.exists(&name)? {
            return Ok(None);
        }
        let bytes = self.dir.read(&name, MAX_FILE)?;
        match decode(&bytes) {
            Ok(rows) => Ok(Some(rows)),
            Err(why) => {
                let _ = self.dir.remove(&name);
                self.total = self.total.saturating_sub(bytes.len() as u64);
                Err(SavedError::Damaged { name, why })
            }
        }
    }

    /// Saves the rows of `build_id` (unless the directory is at its bound or has them already).
    pub(crate) fn save(&mut self, build_id: &str, rows: &[UnwindRow]) -> Result<(), SavedError> {
        let Some(name) = file_name(build_id) else {
            return Ok(());
        };
        let bytes = encode(rows);
        if self.total + bytes.len() as u64 > MAX_TOTAL || bytes.len() as u64 > MAX_FILE {
            return Ok(());
        }
        let (free, size) = self.dir.space()?;
        if free.saturating_sub(bytes.len() as u64) < MIN_FREE.max(size / MIN_FREE_FRACTION) {
            tracing::debug!(
                build_id,
                free,
                "not saving an unwind table: the data directory's file system is nearly full"
            );
            return Ok(());
        }
        match self.dir.write_new(&name, &bytes) {
            Ok(()) => {
                self.total += bytes.len() as u64;
                Ok(())
            }
            Err(e) if e.is_already_exists() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// `<build id>.rows` for a build id of hex digits (anything else is not saved).
fn file_name(build_id: &str) -> Option<String> {
    let ok = !build_id.is_empty()
        && build_id.len() <= 128
        && build_id.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| format!("{build_id}.rows"))
}

fn encode(rows: &[UnwindRow]) -> Vec<u8> {
    let mut body = Vec::with_capacity(rows.len() * ROW);
    for r in rows {
        body.extend_from_slice(&r.pc.to_le_bytes());
        body.extend_from_slice(&r.cfa_offset.to_le_bytes());
        body.push(r.rbp_offset as u8);
        body.push(r.kind);
    }
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn decode(bytes: &[u8]) -> Result<Vec<UnwindRow>, &'static str> {
    let (header, body) = bytes
        .split_at_checked(HEADER)
        .ok_or("shorter than its header")?;
    if &header[..8] != MAGIC {
        return Err("not a sonde unwind table");
    }
    let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    let count = word(8);
    if count.checked_mul(ROW as u64) != Some(body.len() as u64) {
        return Err("length does not match its row count");
    }
    if word(16) != checksum(body) {
        return Err("checksum mismatch");
    }
    let rows: Vec<UnwindRow> = body
        .chunks_exact(ROW)
        .map(|c| UnwindRow {
            pc: u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            cfa_offset: u16::from_le_bytes([c[4], c[5]]),
            rbp_offset: c[6] as i8,
            kind: c[7],
        })
        .collect();
    // The kernel's layout needs rows sorted by address.
    if rows.windows(2).any(|w| w[0].pc > w[1].pc) {
        return Err("rows out of order");
    }
    Ok(rows)
}

/// FNV-1a, 64-bit: catches a truncated or altered file (the directory is the agent's own, so this
/// guards against damage, not an adversary).
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<UnwindRow> {
        vec![
            UnwindRow {
                pc: 0x1000,
                cfa_offset: 8,
                rbp_offset: 0,
                kind: 0,
            },
            UnwindRow {
                pc: 0x1004,
                cfa_offset: 16,
                rbp_offset: -2,
                kind: 0x10,
            },
        ]
    }

    #[test]
    fn rows_round_trip_and_damage_is_refused() {
        let bytes = encode(&rows());
        assert_eq!(decode(&bytes).unwrap(), rows());
        assert_eq!(
            decode(&bytes[..bytes.len() - 1]),
            Err("length does not match its row count")
        );
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(decode(&flipped), Err("checksum mismatch"));
        assert_eq!(decode(b"SONDEUT"), Err("shorter than its header"));
        let mut foreign = bytes.clone();
        foreign[0] = b'X';
        assert_eq!(decode(&foreign), Err("not a sonde unwind table"));
        let mut reversed = rows();
        reversed.reverse();
        assert_eq!(decode(&encode(&reversed)), Err("rows out of order"));
    }

    #[test]
    fn only_hex_build_ids_name_files() {
        assert_eq!(file_name("ab12").as_deref(), Some("ab12.rows"));
        assert_eq!(file_name("../etc"), None);
        assert_eq!(file_name(""), None);
    }

    #[test]
    fn tables_survive_a_reopen_and_a_damaged_file_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let data = SafeDir::open_root(tmp.path(), crate::storage::DataMode::default()).unwrap();
        let mut saved = SavedTables::open(&data).unwrap();
        saved.save("ab12", &rows()).unwrap();
        let mut again = SavedTables::open(&data).unwrap();
        assert_eq!(again.load("ab12").unwrap(), Some(rows()));
        assert_eq!(again.load("cd34").unwrap(), None);
        let path = tmp.path().join(DIR).join("ab12.rows");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, bytes).unwrap();
        assert!(matches!(
            again.load("ab12"),
            Err(SavedError::Damaged { .. })
        ));
        assert!(!path.exists(), "a damaged table is removed");
        assert_eq!(again.load("ab12").unwrap(), None);
    }
}
