//! Symbol settings shared by `record` and `run`: debug directories and the debuginfod client.

use std::{path::PathBuf, time::Duration};

use super::debuginfo::{DebugInfoConfig, DebuginfodConfig, debuginfod::parse_urls};

/// The standard variable naming debuginfod servers (elfutils, gdb, perf).
pub const DEBUGINFOD_URLS_ENV: &str = "DEBUGINFOD_URLS";

/// Fetch threads of the debuginfod client.
const DEBUGINFOD_CONCURRENCY: usize = 4;

/// Symbols for stripped binaries.
#[derive(Debug, Clone, clap::Args)]
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
    /// Bound of the debuginfod cache, MiB (least recently used files go first).
    #[arg(long, default_value_t = 2048, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub debuginfod_cache_mib: u64,
    /// Timeout of one debuginfod request (connect to last byte), seconds.
    #[arg(long, default_value_t = 10, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub debuginfod_timeout: u64,
    /// How long a build id no server has is not asked for again, seconds.
    #[arg(long, default_value_t = 600, value_name = "SECS")]
    pub debuginfod_negative_ttl: u64,
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
    /// No cache directory could be derived.
    #[error("no cache directory for debuginfod: set --debuginfod-cache-dir (HOME is not set)")]
    NoCacheDir,
}

impl SymbolArgs {
    /// The validated settings; `DEBUGINFOD_URLS` is read when `--debuginfod-urls` is absent.
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
                cache_max_bytes: self.debuginfod_cache_mib << 20,
                timeout: Duration::from_secs(self.debuginfod_timeout),
                negative_ttl: Duration::from_secs(self.debuginfod_negative_ttl),
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
    fn systemd_cache_directory_is_used() {
        let dir =
            default_cache_dir(|k| (k == "CACHE_DIRECTORY").then(|| "/var/cache/sonde".into()));
        assert_eq!(dir.unwrap(), PathBuf::from("/var/cache/sonde/debuginfod"));
    }
}
