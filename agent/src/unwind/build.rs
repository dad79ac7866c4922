//! Tables built off the unwinder thread, smallest first. Building is CPU over a binary's CFI (a
//! second or more for a JVM's or Node.js's), and when sonde starts on a busy node every process
//! needs its tables at once while the node's programs hold every CPU: until a binary's table is in,
//! its frames are walked by frame pointer and most stacks are cut. So builds run on a thread per CPU,
//! the smallest binary first (most are a library of a few hundred KiB, in within milliseconds, where
//! a JVM's `libjvm.so` holds the queue for a second), and each table is handed back as soon as it
//! is built: a process captured while a large table builds gets its other tables at once, and a
//! short-lived one is written before it exits. Loading stays on the unwinder thread, the maps' one
//! writer.

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    sync::{Arc, Condvar, Mutex},
    time::{Duration, Instant},
};

use super::table::{self, BuiltTable, TableError};
use crate::{process::Binary, runtimes::seam::CodeRows};

/// A table to build: the binary, and the rows its runtime gives (None: from its CFI alone).
pub(super) struct Job<K> {
    pub(super) key: K,
    pub(super) binary: Arc<Binary>,
    pub(super) runtime_rows: Option<Vec<CodeRows>>,
}

/// What one build gave, and the time it took on its thread.
pub(super) struct Built<K> {
    pub(super) key: K,
    pub(super) table: Result<BuiltTable, TableError>,
    pub(super) took: Duration,
}

/// The building threads, fed through a queue ordered by size.
pub(super) struct Builders<K> {
    shared: Arc<Shared<K>>,
}

struct Shared<K> {
    queue: Mutex<Queue<K>>,
    ready: Condvar,
}

struct Queue<K> {
    /// Smallest first, then in the order submitted.
    jobs: BinaryHeap<Reverse<Queued<K>>>,
    submitted: u64,
    stopped: bool,
}

struct Queued<K> {
    /// Bytes of the binary's loadable segments: a table's build time grows with its code.
    size: u64,
    order: u64,
    job: Job<K>,
}

impl<K> PartialEq for Queued<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.size, self.order) == (other.size, other.order)
    }
}
impl<K> Eq for Queued<K> {}
impl<K> PartialOrd for Queued<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Queued<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.size, self.order).cmp(&(other.size, other.order))
    }
}

impl<K: Send + 'static> Builders<K> {
    /// Starts a thread per CPU; each table built is given to `done`, on the thread that built it.
    pub(super) fn start(done: impl Fn(Built<K>) + Send + Clone + 'static) -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_threads(threads, done)
    }

    fn with_threads(threads: usize, done: impl Fn(Built<K>) + Send + Clone + 'static) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: BinaryHeap::new(),
                submitted: 0,
                stopped: false,
            }),
            ready: Condvar::new(),
        });
        for _ in 0..threads.max(1) {
            let shared = shared.clone();
            let done = done.clone();
            std::thread::Builder::new()
                .name("sonde-tables".into())
                .spawn(move || {
                    while let Some(job) = shared.next() {
                        done(build_one(job));
                    }
                })
                .expect("spawning a thread");
        }
        Self { shared }
    }

    /// Queues `job` behind the smaller binaries already queued.
    pub(super) fn submit(&self, job: Job<K>) {
        let size = job.binary.elf.segments.iter().map(|s| s.size).sum();
        let mut queue = self.shared.lock();
        queue.submitted += 1;
        let order = queue.submitted;
        queue.jobs.push(Reverse(Queued { size, order, job }));
        drop(queue);
        self.shared.ready.notify_one();
    }
}

impl<K> Shared<K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<K>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next job, or None once stopped.
    fn next(&self) -> Option<Job<K>> {
        let mut queue = self.lock();
        loop {
            if queue.stopped {
                return None;
            }
            if let Some(Reverse(queued)) = queue.jobs.pop() {
                return Some(queued.job);
            }
            queue = self.ready.wait(queue).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Dropping the builders stops their threads after the builds under way (whose results go
/// nowhere): the unwinder stops without waiting a second for a JVM's table.
impl<K> Drop for Builders<K> {
    fn drop(&mut self) {
        self.shared.lock().stopped = true;
        self.shared.ready.notify_all();
    }
}

fn build_one<K>(job: Job<K>) -> Built<K> {
    let started = Instant::now();
    let table = table::build_binary(&job.binary, job.runtime_rows);
    Built {
        key: job.key,
        table,
        took: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use std::{
        path::{Path, PathBuf},
        sync::mpsc,
    };

    use super::*;
    use crate::unwind::table::tests::fixture::binary;

    /// The files this test process maps whose names contain `part` (libc, the dynamic loader).
    fn mapped(part: &str) -> PathBuf {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains(part))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("this test maps no {part}"))
    }

    fn job(key: usize, path: &Path) -> Job<usize> {
        Job {
            key,
            binary: Arc::new(binary(path)),
            runtime_rows: None,
        }
    }

    #[test]
    fn tables_built_side_by_side_are_those_built_alone() {
        let paths = [
            mapped("libc.so"),
            PathBuf::from("/etc/passwd"),
            mapped("ld-linux"),
        ];
        let (tx, rx) = mpsc::channel();
        let builders = Builders::start(move |built| tx.send(built).unwrap());
        for (key, path) in paths.iter().enumerate() {
            builders.submit(job(key, path));
        }
        let mut built: Vec<Built<usize>> = rx.iter().take(paths.len()).collect();
        built.sort_by_key(|b| b.key);
        for (path, built) in paths.iter().zip(&built) {
            let alone = table::build_binary(&binary(path), None);
            match (&built.table, alone) {
                (Ok(side_by_side), Ok(alone)) => {
                    assert!(!alone.rows.is_empty(), "{}", path.display());
                    assert_eq!(side_by_side.rows, alone.rows, "{}", path.display());
                }
                (Err(_), Err(_)) => assert_eq!(path, Path::new("/etc/passwd")),
                (side_by_side, alone) => panic!(
                    "{}: side by side {:?}, alone {:?}",
                    path.display(),
                    side_by_side.as_ref().map(|t| t.rows.len()),
                    alone.map(|t| t.rows.len())
                ),
            }
        }
    }

    #[test]
    fn a_small_binary_queued_behind_a_large_one_is_built_first() {
        // One thread, held by a first job while the others queue: libc (about 2 MiB) submitted
        // before ld.so (about 200 KiB) is built after it.
        let (tx, rx) = mpsc::channel();
        let (gate_tx, gate_rx) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(Some(gate_rx)));
        let builders = Builders::with_threads(1, move |built: Built<usize>| {
            if let Some(gate) = gate.lock().unwrap().take() {
                gate.recv().unwrap();
            }
            tx.send(built.key).unwrap();
        });
        builders.submit(job(0, &mapped("ld-linux")));
        builders.submit(job(1, &mapped("libc.so")));
        builders.submit(job(2, &mapped("ld-linux")));
        gate_tx.send(()).unwrap();
        let order: Vec<usize> = rx.iter().take(3).collect();
        assert_eq!(order, [0, 2, 1]);
    }
}
