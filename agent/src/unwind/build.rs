//! The tables one process still needs, built side by side. Building is CPU over a binary's CFI (a
//! second or more for a JVM's or Node.js's), and when sonde starts on a busy node every process
//! needs its tables at once, while the node's programs hold every CPU: until a binary's table is in,
//! its frames are walked by frame pointer and most stacks are cut. A thread per CPU gets the tables
//! in sooner. Loading them into the kernel stays on the unwinder thread, the maps' one writer.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use super::table::{self, BuiltTable, TableError};
use crate::{process::Binary, runtimes::seam::CodeRows};

/// A table to build: the binary, and the rows its runtime gives (None: from its CFI alone).
pub(super) struct Job<'a> {
    pub(super) binary: &'a Binary,
    pub(super) runtime_rows: Option<Vec<CodeRows>>,
}

/// What one build gave, and the time it took on its thread.
pub(super) struct Built {
    pub(super) table: Result<BuiltTable, TableError>,
    pub(super) took: Duration,
}

/// Builds every job on up to one thread per CPU; the results in the jobs' order.
pub(super) fn build_all(jobs: Vec<Job<'_>>) -> Vec<Built> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len());
    if threads <= 1 {
        return jobs.into_iter().map(build_one).collect();
    }
    let count = jobs.len();
    // Popped from the end: the first jobs (the process's own binary, usually the largest table)
    // start first when they are put last.
    let queue = Mutex::new(jobs.into_iter().enumerate().rev().collect::<Vec<_>>());
    let done = Mutex::new(Vec::with_capacity(count));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some((index, job)) = next else {
                        return;
                    };
                    let built = build_one(job);
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((index, built));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, built)| built).collect()
}

fn build_one(job: Job<'_>) -> Built {
    let started = Instant::now();
    let table = table::build_binary(job.binary, job.runtime_rows);
    Built {
        table,
        took: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

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

    #[test]
    fn tables_built_side_by_side_are_those_built_alone_in_the_jobs_order() {
        let paths = [
            mapped("libc.so"),
            PathBuf::from("/etc/passwd"),
            mapped("ld-linux"),
        ];
        let binaries: Vec<Binary> = paths.iter().map(|p| binary(Path::new(p))).collect();
        let jobs = binaries
            .iter()
            .map(|binary| Job {
                binary,
                runtime_rows: None,
            })
            .collect();
        let built = build_all(jobs);
        assert_eq!(built.len(), 3);
        for (binary, built) in binaries.iter().zip(&built) {
            let alone = table::build_binary(binary, None);
            match (&built.table, alone) {
                (Ok(side_by_side), Ok(alone)) => {
                    assert!(!alone.rows.is_empty(), "{}", binary.path);
                    assert_eq!(side_by_side.rows, alone.rows, "{}", binary.path);
                }
                (Err(_), Err(_)) => assert_eq!(binary.path, "/etc/passwd"),
                (side_by_side, alone) => panic!(
                    "{}: side by side {:?}, alone {:?}",
                    binary.path,
                    side_by_side.as_ref().map(|t| t.rows.len()),
                    alone.map(|t| t.rows.len())
                ),
            }
        }
    }
}
