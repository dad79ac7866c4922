//! Symbol settings shared by `record` and `run`: debug directories and the debuginfod client. `run`
//! also reads them from its config file's `[symbols]` table; a flag wins over the file, the file over
//! `$DEBUGINFOD_URLS`.

use std::{path::PathBuf, time::Duration};

use super::{ConfigError, ranges};
use crate::symbolize::debuginfo::{DebugInfoConfig, DebuginfodConfig, debuginfod::parse_urls};

/// The standard variable naming debuginfod servers (elfutils, gdb, perf).
pub(super) const DEBUGINFOD_URLS_ENV: &str = "DEBUGINFOD_URLS";

/// Fetch threads of the debuginfod client.
const DEBUGINFOD_CONCURRENCY: usize = 4;
const DEFAULT_CACHE_MIB: u64 = 2048;
const DEFAULT_TIMEOUT_SECS: u64 = 10;
const DEFAULT_NEGATIVE_TTL_SECS: u64 = 600;

/// Symbols for stripped binaries.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SymbolArgs {
    /// Directory of debug files, in the `.build-id/xx/rest.debug` layout or by debug-link name
    /// (repeatable; host paths).
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,
    /// debuginfod servers, space-separated. Default: `$DEBUGINFOD_URLS`; "" turns debuginfod off.
    #[arg(long, value_name = "URLS")]
    pub debuginfod_urls: Option<String>,
    /// Where fetched debug files are kept. Default: `$CACHE_DIRECTORY/debuginfod` under systemd,
    /// else `$XDG_CACHE_HOME/sonde/debuginfod` or `~/.cache/sonde/debuginfod`.
    #[arg(long, value_name = "DIR")]
    pub debuginfod_cache_dir: Option<PathBuf>,
    /// Bound of the debuginfod cache, MiB (least recently used files go first) [default: 2048].
    #[arg(long, value_name = "MIB")]
    pub debuginfod_cache_mib: Option<u64>,
    /// Timeout of one debuginfod request (connect to last byte), seconds [default: 10].
    #[arg(long, value_name = "SECS")]
    pub debuginfod_timeout: Option<u64>,
    /// How long a build id no server has is not asked for again, seconds [default: 600].
    #[arg(long, value_name = "SECS")]
    pub debuginfod_negative_ttl: Option<u64>,
}

/// The `[symbols]` table of `sonde run`'s config file; the same settings as the flags.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SymbolFile {
    #[serde(default)]
    debug_dirs: Vec<PathBuf>,
    debuginfod_urls: Option<String>,
    debuginfod_cache_dir: Option<PathBuf>,
    debuginfod_cache_mib: Option<u64>,
    debuginfod_timeout_secs: Option<u64>,
    debuginfod_negative_ttl_secs: Option<u64>,
}

/// A symbol setting that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum SymbolArgsError {
    /// A debug directory does not exist.
    #[error("--debug-dir {0} is not a directory: give a directory of debug files")]
    NotADirectory(PathBuf),
    /// URLs were given but none is http(s).
    #[error(
        "no http:// or https:// URL in {source_name} {value:?}: give space-separated server URLs, or \"\" to turn debuginfod off"
    )]
    NoUrl {
        /// The flag or variable.
        source_name: &'static str,
        /// Its value.
        value: String,
    },
    /// A number is out of range (the message names the key, its flag and the range).
    #[error(transparent)]
    OutOfRange(#[from] ConfigError),
    /// No cache directory could be derived.
    #[error("no cache directory for debuginfod: set --debuginfod-cache-dir (HOME is not set)")]
    NoCacheDir,
}

impl SymbolArgs {
    /// These flags, completed by the config file's `[symbols]` table: a flag wins over the file.
    pub fn with_file(&self, file: &SymbolFile) -> Self {
        Self {
            debug_dirs: if self.debug_dirs.is_empty() {
                file.debug_dirs.clone()
            } else {
                self.debug_dirs.clone()
            },
            debuginfod_urls: self
                .debuginfod_urls
                .clone()
                .or_else(|| file.debuginfod_urls.clone()),
            debuginfod_cache_dir: self
                .debuginfod_cache_dir
                .clone()
                .or_else(|| file.debuginfod_cache_dir.clone()),
            debuginfod_cache_mib: self.debuginfod_cache_mib.or(file.debuginfod_cache_mib),
            debuginfod_timeout: self.debuginfod_timeout.or(file.debuginfod_timeout_secs),
            debuginfod_negative_ttl: self
                .debuginfod_negative_ttl
                .or(file.debuginfod_negative_ttl_secs),
        }
    }

    /// The validated settings; `DEBUGINFOD_URLS` is read when no URLs were given.
    pub fn config(&self) -> Result<DebugInfoConfig, SymbolArgsError> {
        self.config_with(std::env::var(DEBUGINFOD_URLS_ENV).ok(), |k| {
            std::env::var_os(k).map(PathBuf::from)
        })
    }

    fn config_with(
        &self,
        env_urls: Option<String>,
        env: impl Fn(&str) -> Option<PathBuf>,
    ) -> Result<DebugInfoConfig, SymbolArgsError> {
        for dir in &self.debug_dirs {
            if !dir.is_dir() {
                return Err(SymbolArgsError::NotADirectory(dir.clone()));
            }
        }
        let (source_name, value) = match (&self.debuginfod_urls, env_urls) {
            (Some(flag), _) => ("--debuginfod-urls", flag.clone()),
            (None, Some(env)) => (DEBUGINFOD_URLS_ENV, env),
            (None, None) => ("", String::new()),
        };
        let urls = parse_urls(&value);
        if urls.is_empty() && !value.trim().is_empty() {
            return Err(SymbolArgsError::NoUrl { source_name, value });
        }
        let cache_mib = ranges::DEBUGINFOD_CACHE_MIB
            .check(self.debuginfod_cache_mib.unwrap_or(DEFAULT_CACHE_MIB))?;
        let timeout = ranges::DEBUGINFOD_TIMEOUT_SECS
            .check(self.debuginfod_timeout.unwrap_or(DEFAULT_TIMEOUT_SECS))?;
        let negative_ttl = ranges::DEBUGINFOD_NEGATIVE_TTL_SECS.check(
            self.debuginfod_negative_ttl
                .unwrap_or(DEFAULT_NEGATIVE_TTL_SECS),
        )?;
        let debuginfod = if urls.is_empty() {
            None
        } else {
            let cache_dir = match &self.debuginfod_cache_dir {
                Some(dir) => dir.clone(),
                None => default_cache_dir(env).ok_or(SymbolArgsError::NoCacheDir)?,
            };
            Some(DebuginfodConfig {
                urls,
                cache_dir,
                cache_max_bytes: cache_mib << 20,
                timeout: Duration::from_secs(timeout),
                negative_ttl: Duration::from_secs(negative_ttl),
                concurrency: DEBUGINFOD_CONCURRENCY,
            })
        };
        Ok(DebugInfoConfig {
            debug_dirs: self.debug_dirs.clone(),
            debuginfod,
        })
    }
}

/// systemd's `CacheDirectory=` (`$CACHE_DIRECTORY`), else the XDG cache, else `~/.cache`.
fn default_cache_dir(env: impl Fn(&str) -> Option<PathBuf>) -> Option<PathBuf> {
    if let Some(dir) = env("CACHE_DIRECTORY") {
        return Some(dir.join("debuginfod"));
    }
    let base = env("XDG_CACHE_HOME").or_else(|| env("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("sonde/debuginfod"))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        symbols: SymbolArgs,
    }

    fn args(argv: &[&str]) -> SymbolArgs {
        Cli::parse_from(std::iter::once("sonde").chain(argv.iter().copied())).symbols
    }

    fn env(key: &str) -> Option<PathBuf> {
        match key {
            "HOME" => Some("/home/op".into()),
            _ => None,
        }
    }

    #[test]
    fn the_flag_wins_over_the_environment_and_empty_turns_it_off() {
        let env_urls = Some("http://env:8002".to_owned());
        let c = args(&["--debuginfod-urls", "http://flag:8002"])
            .config_with(env_urls.clone(), env)
            .unwrap();
        assert_eq!(c.debuginfod.unwrap().urls, vec!["http://flag:8002"]);
        let c = args(&[]).config_with(env_urls.clone(), env).unwrap();
        let d = c.debuginfod.unwrap();
        assert_eq!(d.urls, vec!["http://env:8002"]);
        assert_eq!(
            d.cache_dir,
            PathBuf::from("/home/op/.cache/sonde/debuginfod")
        );
        let off = args(&["--debuginfod-urls", ""]).config_with(env_urls, env);
        assert!(off.unwrap().debuginfod.is_none());
    }

    #[test]
    fn bad_settings_say_what_to_fix() {
        let err = args(&["--debuginfod-urls", "debuginfod.example"])
            .config_with(None, env)
            .unwrap_err();
        assert!(err.to_string().contains("--debuginfod-urls"), "{err}");
        let err = args(&["--debug-dir", "/nonexistent/debug"])
            .config_with(None, env)
            .unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_the_environment() {
        let file: SymbolFile = toml::from_str(
            r#"
            debuginfod_urls = "http://file:8002"
            debuginfod_timeout_secs = 3
            debuginfod_cache_mib = 100
            "#,
        )
        .unwrap();
        let env_urls = Some("http://env:8002".to_owned());
        let c = args(&[])
            .with_file(&file)
            .config_with(env_urls.clone(), env)
            .unwrap()
            .debuginfod
            .unwrap();
        assert_eq!(c.urls, vec!["http://file:8002"]);
        assert_eq!(c.timeout, Duration::from_secs(3));
        assert_eq!(c.cache_max_bytes, 100 << 20);
        let c = args(&[
            "--debuginfod-urls",
            "http://flag:8002",
            "--debuginfod-timeout",
            "7",
        ])
        .with_file(&file)
        .config_with(env_urls, env)
        .unwrap()
        .debuginfod
        .unwrap();
        assert_eq!(c.urls, vec!["http://flag:8002"]);
        assert_eq!(c.timeout, Duration::from_secs(7));
        let err = args(&["--debuginfod-timeout", "0"])
            .config_with(None, env)
            .unwrap_err();
        assert!(err.to_string().contains("--debuginfod-timeout"), "{err}");
        assert!(toml::from_str::<SymbolFile>("debuginfod_url = \"x\"").is_err());
    }

    #[test]
    fn systemd_cache_directory_is_used() {
        let dir =
            default_cache_dir(|k| (k == "CACHE_DIRECTORY").then(|| "/var/cache/sonde".into()));
        assert_eq!(dir.unwrap(), PathBuf::from("/var/cache/sonde/debuginfod"));
    }
}
