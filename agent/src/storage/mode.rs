//! The permission bits of sonde's files and directories (`--data-mode`).

use std::{fmt, str::FromStr};

/// File mode of profiles, spool and cache files; directories get the same bits plus search (`x`)
/// wherever read is allowed. Profiles hold binary and source paths, build ids, pids and host names, so
/// the default is owner-only (0600 files, 0700 directories); 0640 lets a log-reader group read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataMode {
    file: u32,
}

impl Default for DataMode {
    fn default() -> Self {
        Self { file: 0o600 }
    }
}

impl DataMode {
    /// Mode bits for new files.
    pub fn file(self) -> u32 {
        self.file
    }

    /// Mode bits for new directories: `x` where `r` is set.
    pub fn dir(self) -> u32 {
        self.file | ((self.file & 0o444) >> 2)
    }
}

/// Why a `--data-mode` value was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "data mode {0:?} is not allowed: give an octal file mode that the owner can read and write, with no write \
     or execute bits for group and others (0600, 0640 or 0644)"
)]
pub struct DataModeError(String);

impl FromStr for DataMode {
    type Err = DataModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digits = s.trim().trim_start_matches("0o");
        let file = u32::from_str_radix(digits, 8).map_err(|_| DataModeError(s.to_owned()))?;
        // Group or other write would let another user plant links; exec bits mean nothing on data.
        if file & !0o644 != 0 || file & 0o600 != 0o600 {
            return Err(DataModeError(s.to_owned()));
        }
        Ok(Self { file })
    }
}

impl fmt::Display for DataMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04o}", self.file)
    }
}

impl<'de> serde::Deserialize<'de> for DataMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_allow_group_read_at_most() {
        assert_eq!(DataMode::default().dir(), 0o700);
        let m: DataMode = "0640".parse().unwrap();
        assert_eq!((m.file(), m.dir()), (0o640, 0o750));
        assert_eq!("644".parse::<DataMode>().unwrap().dir(), 0o755);
        for bad in ["0660", "0606", "0400", "0700", "rw", "", "0o1600"] {
            assert!(bad.parse::<DataMode>().is_err(), "{bad}");
        }
    }
}
