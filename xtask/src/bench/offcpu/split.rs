//! The sleeper's off-CPU split from each profiler's own output: time blocked under `sleep_twenty`
//! against time blocked under `sleep_ten` (truly 2:1), from sonde's folded file and from bpftrace's
//! printed `@off[comm, kstack, ustack]` map. One rule for both: an entry counts when its thread is
//! `offcpu_sleep` and one of its frames is named `sleep_twenty` or `sleep_ten` (offsets stripped).

/// Thread name of `tests/workloads/offcpu_sleep.c`.
const COMM: &str = "offcpu_sleep";

/// The function sleeping 20 ms per loop.
pub(super) const TWENTY: &str = "sleep_twenty";

/// The function sleeping 10 ms per loop.
pub(super) const TEN: &str = "sleep_ten";

/// The true ratio of their off-CPU times.
pub(super) const TRUE_RATIO: f64 = 2.0;

/// Off-CPU nanoseconds the profiler reported under each function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Split {
    pub(super) twenty_ns: u64,
    pub(super) ten_ns: u64,
}

impl Split {
    /// Adds `ns` to the function found among `frames`, if any.
    fn add<'a>(&mut self, frames: impl IntoIterator<Item = &'a str>, ns: u64) -> bool {
        for frame in frames {
            match frame.split('+').next().unwrap_or(frame).trim() {
                TWENTY => self.twenty_ns += ns,
                TEN => self.ten_ns += ns,
                _ => continue,
            }
            return true;
        }
        false
    }

    /// `sleep_twenty` time over `sleep_ten` time.
    pub(super) fn ratio(self) -> Option<f64> {
        (self.ten_ns > 0).then(|| self.twenty_ns as f64 / self.ten_ns as f64)
    }

    /// How far the ratio is from 2:1, in percent of 2.
    pub(super) fn error_percent(self) -> Option<f64> {
        self.ratio().map(|r| 100.0 * (r / TRUE_RATIO - 1.0))
    }

    /// The split, or why there is none.
    fn checked(self, entries: usize) -> Result<Self, String> {
        if self.twenty_ns > 0 && self.ten_ns > 0 {
            Ok(self)
        } else if entries == 0 {
            Err(format!("no off-CPU entry of {COMM} in the output"))
        } else {
            Err(format!(
                "{entries} off-CPU entries of {COMM}, but {} ns under {TWENTY} and {} ns under {TEN} (no frame with that name?)",
                self.twenty_ns, self.ten_ns
            ))
        }
    }
}

/// Reads sonde's folded lines (`comm;root;...;leaf NANOSECONDS`).
pub(super) fn from_folded(text: &str) -> Result<Split, String> {
    let mut split = Split::default();
    let mut entries = 0;
    for line in text.lines() {
        let Some((stack, ns)) = line.rsplit_once(' ') else {
            continue;
        };
        let mut frames = stack.split(';');
        let (Some(COMM), Ok(ns)) = (frames.next(), ns.parse::<u64>()) else {
            continue;
        };
        entries += 1;
        split.add(frames, ns);
    }
    split.checked(entries)
}

/// Reads bpftrace's printout of `@off[comm, kstack, ustack] = sum(ns)`: `@off[COMM, ` then one frame
/// per line (kernel stack, a `, ` line, user stack), then `]: NANOSECONDS`.
pub(super) fn from_bpftrace(text: &str) -> Result<Split, String> {
    let mut split = Split::default();
    let mut entries = 0;
    // The frames of the entry being read, when it belongs to the sleeper.
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(key) = trimmed.strip_prefix("@off[") {
            let comm = key.split(',').next().unwrap_or("").trim();
            current = (comm == COMM).then(Vec::new);
        } else if let Some((_, ns)) = trimmed.rsplit_once("]: ") {
            // A stack may be empty, leaving `, ]: N` on one line.
            if let (Some(frames), Ok(ns)) = (current.take(), ns.trim().parse::<u64>()) {
                entries += 1;
                split.add(frames, ns);
            }
        } else if let Some(frames) = &mut current {
            frames.push(trimmed);
        }
    }
    split.checked(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_sums_the_sleepers_lines_by_function_and_ignores_other_threads() {
        let text = "offcpu_sleep;_start;main;sleep_twenty;do_sleep;__GI___nanosleep;schedule 2000\n\
                    offcpu_sleep;main;sleep_twenty;__GI___clock_nanosleep;schedule 20\n\
                    offcpu_sleep;_start;main;sleep_ten;do_sleep;__GI___nanosleep;schedule 1000\n\
                    offcpu_sleep;_start;main;other 500\n\
                    sched-pipe;main;sleep_ten;read 7000";
        let split = from_folded(text).unwrap();
        assert_eq!((split.twenty_ns, split.ten_ns), (2020, 1000));
        assert!((split.error_percent().unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn bpftrace_entries_are_read_by_comm_with_offsets_stripped() {
        let text = "Attaching 2 probes...\n\n\n\
                    @off[offcpu_sleep, \n    __schedule+1560\n    schedule+35\n, \n    clock_nanosleep+35\n    sleep_ten+14\n    main+81\n]: 1500\n\
                    @off[offcpu_sleep, \n    __schedule+1560\n, \n    clock_nanosleep+35\n    sleep_twenty+14\n    main+76\n]: 3000\n\
                    @off[sched-pipe, \n    __schedule+1560\n, \n    sleep_ten+3\n]: 99999\n\
                    @off[migration/1, \n    __schedule+1560\n, ]: 4000\n";
        let split = from_bpftrace(text).unwrap();
        assert_eq!((split.twenty_ns, split.ten_ns), (3000, 1500));
        assert_eq!(split.error_percent(), Some(0.0));
    }

    #[test]
    fn unattributable_output_says_why() {
        let missing = from_bpftrace("Attaching 2 probes...\n@off[kworker/0:1, \n, ]: 5\n");
        assert!(missing.unwrap_err().contains("no off-CPU entry"));
        let unnamed =
            from_bpftrace("@off[offcpu_sleep, \n    schedule+35\n, \n    0x7f001234\n]: 5\n");
        assert!(unnamed.unwrap_err().contains("no frame with that name"));
    }
}
