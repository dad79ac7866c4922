//! debuginfod client: fetches `/buildid/<id>/debuginfo` from the servers of `DEBUGINFOD_URLS` on a few
//! fetch threads, never on the sampling path. A lookup answers at once (ready, pending, miss, failed);
//! frames of a binary still pending go out as mapping + address + build id and later windows are
//! symbolized.
//!
//! The cache is elfutils' layout, `<dir>/<build id>/debuginfo`, bounded in bytes (least recently
//! used files go first). A miss (404 from every server) is remembered on disk as
//! `<dir>/<build id>/debuginfo.miss` for the negative TTL; a failure (timeout, refused, 5xx) in memory
//! only, for a shorter time, so a server that comes back is asked again soon.
//!
//! The cache is one of sonde's own directories ([`SafeDir`]): a symlinked, foreign or world-writable one
//! is refused at start, and files are created with `O_EXCL` and renamed into place.

use std::{
    collections::HashMap,
    fs::File,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    time::{Duration, Instant, SystemTime},
};

use crate::{
    process::ElfInfo,
    storage::{DataMode, SafeDir, StorageError},
};

/// Fetch requests queued at most; more wait for a later window.
const QUEUE: usize = 256;
/// How long a failed fetch (not a miss) is not retried.
const FAILURE_TTL: Duration = Duration::from_secs(60);

/// Settings of the client.
#[derive(Clone, Debug)]
pub struct DebuginfodConfig {
    /// Server base URLs, tried in order.
    pub urls: Vec<String>,
    /// Cache directory.
    pub cache_dir: PathBuf,
    /// Cache bound in bytes; a single file larger than this is not kept.
    pub cache_max_bytes: u64,
    /// Whole-request timeout (connect, headers and body).
    pub timeout: Duration,
    /// How long a miss is remembered.
    pub negative_ttl: Duration,
    /// Fetch threads (concurrent requests).
    pub concurrency: usize,
}

/// Counters, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DebuginfodStats {
    /// HTTP requests made.
    pub requests: u64,
    /// Debug files downloaded and kept.
    pub fetched: u64,
    /// Lookups answered from the disk cache.
    pub cache_hits: u64,
    /// Build ids no server has (404 everywhere).
    pub misses: u64,
    /// Fetches that failed (timeout, connection, server error, too large, not an ELF).
    pub failures: u64,
    /// Downloaded files whose build id was not the one asked for.
    pub mismatches: u64,
    /// Bytes downloaded.
    pub bytes: u64,
    /// Lookups that found the fetch queue full (asked again next window).
    pub queue_full: u64,
}

/// The answer to a lookup.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The debug file, opened.
    Ready(File),
    /// Being fetched.
    Pending,
    /// No server has it.
    Miss,
    /// The last fetch failed.
    Failed,
}

#[derive(Debug)]
enum Entry {
    Pending,
    Found,
    Miss(Instant),
    Failed(Instant),
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    fetched: AtomicU64,
    cache_hits: AtomicU64,
    misses: AtomicU64,
    failures: AtomicU64,
    mismatches: AtomicU64,
    bytes: AtomicU64,
    queue_full: AtomicU64,
}

struct Shared {
    config: DebuginfodConfig,
    cache: SafeDir,
    entries: Mutex<HashMap<String, Entry>>,
    counters: Counters,
}

/// The client; dropping it stops the fetch threads once their current request ends.
pub(crate) struct Client {
    shared: Arc<Shared>,
    jobs: mpsc::SyncSender<String>,
}

/// Why the client could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot use the debuginfod cache: {0}; or pass another --debuginfod-cache-dir")]
pub(crate) struct CacheDirError(#[source] StorageError);

impl Client {
    /// Creates the cache directory and starts the fetch threads.
    pub(crate) fn start(config: DebuginfodConfig) -> Result<Self, CacheDirError> {
        // Debug files are public; owner-only all the same, as sonde's other directories.
        let cache =
            SafeDir::open_root(&config.cache_dir, DataMode::default()).map_err(CacheDirError)?;
        let (jobs, rx) = mpsc::sync_channel::<String>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let shared = Arc::new(Shared {
            config,
            cache,
            entries: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        });
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(shared.config.timeout))
            .http_status_as_error(false)
            .user_agent(concat!("sonde/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        for i in 0..shared.config.concurrency.max(1) {
            let (shared, rx, agent) = (shared.clone(), rx.clone(), agent.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("sonde-debuginfod-{i}"))
                .spawn(move || {
                    loop {
                        let job = rx.lock().expect("debuginfod queue lock").recv();
                        let Ok(build_id) = job else { break };
                        let entry = fetch(&shared, &agent, &build_id);
                        shared
                            .entries
                            .lock()
                            .expect("debuginfod lock")
                            .insert(build_id, entry);
                    }
                });
            if let Err(err) = spawned {
                tracing::warn!(%err, "cannot start a debuginfod fetch thread");
            }
        }
        Ok(Self { shared, jobs })
    }

    /// What is known of `build_id`'s debug file now; starts a fetch when nothing is.
    pub(crate) fn lookup(&self, build_id: &str) -> Lookup {
        let c = &self.shared.counters;
        let mut entries = self.shared.entries.lock().expect("debuginfod lock");
        match entries.get(build_id) {
            Some(Entry::Pending) => return Lookup::Pending,
            Some(Entry::Found) => {
                // When the cache evicted it meanwhile, it is fetched again below.
                if let Some(file) = open_cached(&self.shared.cache, build_id, DEBUGINFO) {
                    return Lookup::Ready(file);
                }
            }
            Some(Entry::Miss(at)) if at.elapsed() < self.shared.config.negative_ttl => {
                return Lookup::Miss;
            }
            Some(Entry::Failed(at)) if at.elapsed() < FAILURE_TTL => return Lookup::Failed,
            _ => {}
        }
        if let Some(file) = open_cached(&self.shared.cache, build_id, DEBUGINFO) {
            c.cache_hits.fetch_add(1, Ordering::Relaxed);
            // Recently used: the last to be evicted.
            let _ = file.set_modified(SystemTime::now());
            entries.insert(build_id.to_owned(), Entry::Found);
            return Lookup::Ready(file);
        }
        if let Some(age) = open_cached(&self.shared.cache, build_id, MISS).and_then(|f| age_of(&f))
            && age < self.shared.config.negative_ttl
        {
            let since = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
            entries.insert(build_id.to_owned(), Entry::Miss(since));
            return Lookup::Miss;
        }
        match self.jobs.try_send(build_id.to_owned()) {
            Ok(()) => {
                entries.insert(build_id.to_owned(), Entry::Pending);
                Lookup::Pending
            }
            Err(_) => {
                c.queue_full.fetch_add(1, Ordering::Relaxed);
                Lookup::Pending
            }
        }
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> DebuginfodStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DebuginfodStats {
            requests: get(&c.requests),
            fetched: get(&c.fetched),
            cache_hits: get(&c.cache_hits),
            misses: get(&c.misses),
            failures: get(&c.failures),
            mismatches: get(&c.mismatches),
            bytes: get(&c.bytes),
            queue_full: get(&c.queue_full),
        }
    }
}

/// Names inside a build id's cache directory (elfutils' layout).
const DEBUGINFO: &str = "debuginfo";
const MISS: &str = "debuginfo.miss";

/// `<cache>/<build_id>/<name>`, opened without following links; None when absent or unusable.
fn open_cached(cache: &SafeDir, build_id: &str, name: &str) -> Option<File> {
    let dir = cache.existing_subdir(build_id).ok()??;
    if !dir.exists(name).ok()? {
        return None;
    }
    dir.open_read(name)
        .inspect_err(|err| tracing::warn!(%err, "unusable file in the debuginfod cache"))
        .ok()
}

fn age_of(file: &File) -> Option<Duration> {
    let modified = file.metadata().ok()?.modified().ok()?;
    Some(
        SystemTime::now()
            .duration_since(modified)
            .unwrap_or_default(),
    )
}

/// One fetch: each server in turn until one has it.
fn fetch(shared: &Shared, agent: &ureq::Agent, build_id: &str) -> Entry {
    let c = &shared.counters;
    let mut failed = false;
    for base in &shared.config.urls {
        let url = format!(
            "{}/buildid/{build_id}/debuginfo",
            base.trim_end_matches('/')
        );
        c.requests.fetch_add(1, Ordering::Relaxed);
        match download(shared, agent, &url, build_id) {
            Ok(true) => {
                c.fetched.fetch_add(1, Ordering::Relaxed);
                evict(&shared.cache, shared.config.cache_max_bytes);
                return Entry::Found;
            }
            Ok(false) => {}
            Err(err) => {
                tracing::debug!(%url, %err, "debuginfod fetch failed");
                failed = true;
            }
        }
    }
    if failed {
        c.failures.fetch_add(1, Ordering::Relaxed);
        Entry::Failed(Instant::now())
    } else {
        c.misses.fetch_add(1, Ordering::Relaxed);
        let marked = shared
            .cache
            .subdir(build_id)
            .and_then(|dir| dir.create_new(MISS)?.commit(true));
        if let Err(err) = marked {
            tracing::debug!(%err, "cannot remember a debuginfod miss on disk");
        }
        Entry::Miss(Instant::now())
    }
}

#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("{0}")]
    Http(#[from] ureq::Error),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("cache write: {0}")]
    Io(#[from] std::io::Error),
    #[error("cache: {0}")]
    Storage(#[from] StorageError),
    #[error("larger than the cache bound of {0} bytes")]
    TooLarge(u64),
    #[error("not an ELF debug file of build {0}")]
    WrongFile(String),
}

/// GETs `url` into the cache; Ok(None) on 404.
fn download(
    shared: &Shared,
    agent: &ureq::Agent,
    url: &str,
    build_id: &str,
) -> Result<bool, FetchError> {
    let response = agent.get(url).call()?;
    match response.status().as_u16() {
        200 => {}
        404 => return Ok(false),
        other => return Err(FetchError::Status(other)),
    }
    let max = shared.config.cache_max_bytes;
    let dir = shared.cache.subdir(build_id)?;
    // Removed on drop unless committed: a failed or wrong download leaves nothing behind.
    let mut out = dir.create_new(DEBUGINFO)?;
    let mut body = response.into_body().into_with_config().limit(max).reader();
    let copied = std::io::copy(&mut body, out.file());
    let bytes = out.file().metadata().map(|m| m.len()).unwrap_or(0);
    shared.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
    copied.map_err(|e| {
        if bytes >= max {
            FetchError::TooLarge(max)
        } else {
            FetchError::Io(e)
        }
    })?;
    let info = ElfInfo::read(out.file());
    if info.build_id.as_deref() != Some(build_id) || !(info.has_symtab || info.has_debug_info) {
        if info.build_id.is_some() {
            shared.counters.mismatches.fetch_add(1, Ordering::Relaxed);
        }
        return Err(FetchError::WrongFile(build_id.to_owned()));
    }
    out.commit(true)?;
    if dir.exists(MISS)? {
        dir.remove(MISS)?;
    }
    Ok(true)
}

/// Deletes the least recently used debug files until the cache holds at most `max` bytes. Files in
/// use stay readable: sonde holds them open.
fn evict(cache: &SafeDir, max: u64) {
    let Ok(dirs) = cache.entries() else {
        return;
    };
    let mut files: Vec<(SystemTime, u64, SafeDir)> = dirs
        .into_iter()
        .filter(|d| d.is_dir)
        .filter_map(|d| {
            let dir = cache.existing_subdir(&d.name).ok()??;
            let file = dir
                .entries()
                .ok()?
                .into_iter()
                .find(|e| e.name == DEBUGINFO)?;
            file.is_file.then_some((file.modified, file.len, dir))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort_by_key(|f| f.0);
    for (_, len, dir) in files {
        if total <= max {
            break;
        }
        if dir.remove(DEBUGINFO).is_ok() {
            tracing::debug!(dir = %dir.path().display(), "debuginfod cache full: evicted");
            total -= len;
        }
    }
}

/// `DEBUGINFOD_URLS`: space-separated base URLs (elfutils' syntax; `ima:` policy words are skipped).
pub(crate) fn parse_urls(value: &str) -> Vec<String> {
    value
        .split_whitespace()
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .map(|u| u.trim_end_matches('/').to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_elfutils_syntax() {
        assert_eq!(
            parse_urls(" https://debuginfod.debian.net/  ima:ignore http://127.0.0.1:8002 "),
            vec!["https://debuginfod.debian.net", "http://127.0.0.1:8002"]
        );
        assert!(parse_urls("").is_empty());
    }

    #[test]
    fn eviction_drops_the_least_recently_used_first() {
        let cache = tempfile::tempdir().unwrap();
        for (i, id) in ["aa01", "bb02", "cc03"].iter().enumerate() {
            let dir = cache.path().join(id);
            std::fs::create_dir_all(&dir).unwrap();
            let file = File::create(dir.join("debuginfo")).unwrap();
            file.set_len(1000).unwrap();
            let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + i as u64);
            file.set_modified(t).unwrap();
        }
        evict(
            &SafeDir::open_root(cache.path(), DataMode::default()).unwrap(),
            2000,
        );
        let left: Vec<bool> = ["aa01", "bb02", "cc03"]
            .iter()
            .map(|id| cache.path().join(id).join("debuginfo").exists())
            .collect();
        assert_eq!(left, vec![false, true, true]);
    }
}
