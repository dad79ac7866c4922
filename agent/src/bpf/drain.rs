//! Ends a window and drains it without losing what arrives meanwhile.
//!
//! The kernel writes into map set `generation % SLOTS`. To end a window userspace (1) empties the stack
//! maps (kernel and user) of the slot it is about to activate (their last users were drained two windows
//! ago), (2) bumps the generation, (3) waits a grace period for program invocations that read the old
//! generation, then (4) reads and deletes the old slot's aggregates and resolves their stack ids. Samples
//! taken during the drain land in the new slot. Stack ids are only ever resolved in the maps of the slot
//! that issued them (`SampleKey::stack_slot`), so ids reused across slots cannot be confused; within a
//! slot an id is never reused because stack maps are only emptied between uses. Collisions are reported
//! by the kernel (`STACK_COLLISION`, counted) and never overwrite a stored stack: kernel stacks without
//! `BPF_F_REUSE_STACKID`, user stacks keyed by one hash of their frames and checked against a second.

use std::{collections::HashMap, sync::Arc, time::Duration};

use sonde_abi::{
    Control, KERNEL_STACK_DEPTH, SLOTS, STACK_COLLISION, STACK_MAP_FULL, STACK_NONE, STACK_OK,
    STACK_STALE, SampleKey, stat, unwind::outcome,
};

use super::{BpfError, maps::KernelMaps};
use crate::profile::Labels;

/// How long in-flight program invocations get to finish after a generation change. Programs run for
/// microseconds with preemption disabled; a millisecond-scale wait is generous.
const GRACE: Duration = Duration::from_millis(5);

/// A stack as read from the kernel, before symbolization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawStack {
    /// Instruction pointers, leaf first.
    Frames(Arc<[u64]>),
    /// No stack of this kind (kernel thread, or sample taken in user mode for the kernel stack).
    None,
    /// Lost to a collision of its key with another stack (counted in the kernel).
    Collision,
    /// Off-CPU episode longer than the stack retention (counted in the kernel).
    Stale,
    /// The id was not in the map when read (counted in [`WindowStats::stacks_missing`]).
    Missing,
    /// The stack map was full (counted in the kernel).
    MapFull,
    /// Another kernel error, as a negative errno.
    Error(i32),
}

/// One aggregated kernel entry with its stacks read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSample {
    /// The kernel's aggregation key.
    pub key: SampleKey,
    /// User stack.
    pub user: RawStack,
    /// How the user-stack walk ended (`sonde_abi::unwind::outcome`); 0 without a user stack.
    pub user_outcome: u32,
    /// Kernel stack.
    pub kernel: RawStack,
    /// On-CPU: samples. Off-CPU: blocking episodes.
    pub count: u64,
    /// Off-CPU: blocked nanoseconds. On-CPU: 0.
    pub total_ns: u64,
    /// The goroutine's pprof labels (`SampleKey::labels`), key and value; empty without any.
    pub labels: Labels,
}

/// Counters of one window (differences of the kernel's cumulative counters, plus drain-side ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowStats {
    /// Kernel counters for this window, indexed by `sonde_abi::stat`.
    pub kernel: [u64; stat::COUNT as usize],
    /// Stack ids referenced by an aggregate but absent from their map.
    pub stacks_missing: u64,
    /// Threads remembered as off-CPU at the end of the window.
    pub off_cpu_pending: usize,
    /// Samples whose goroutine label set was gone from `SAMPLE_LABELS` when read (evicted): kept
    /// without labels.
    pub labels_missing: u64,
    /// Samples (on-CPU) and episodes (off-CPU) whose kernel stack filled the stack map's depth
    /// (`sonde_abi::KERNEL_STACK_DEPTH`): its outermost frames may have been cut.
    pub kernel_stacks_full: u64,
}

// By hand: arrays longer than 32 have no `Default`.
impl Default for WindowStats {
    fn default() -> Self {
        Self {
            kernel: [0; stat::COUNT as usize],
            stacks_missing: 0,
            off_cpu_pending: 0,
            labels_missing: 0,
            kernel_stacks_full: 0,
        }
    }
}

/// The process-age buckets of `stat::AGE_WALKS`, as the figures label them (`crate::figures`).
pub const AGE_BUCKETS: [&str; stat::AGE_BUCKETS as usize] =
    ["0-1ms", "1-10ms", "10-100ms", "100ms-1s", "1s+"];

impl WindowStats {
    /// On-CPU samples lost (never aggregated) in the kernel.
    pub fn lost_samples(&self) -> u64 {
        self.kernel[stat::ONCPU_MAP_FULL as usize]
    }

    /// User-stack walks (each ends in exactly one outcome).
    pub fn walks(&self) -> u64 {
        self.walks_ending(|_| true)
    }

    /// Walks of a user stack that exists: not of a process exiting without its address space or
    /// inside `execve` between two images, which have no stack to reach a root with.
    pub fn live_walks(&self) -> u64 {
        self.walks_ending(|o| !outcome::has_no_stack(o))
    }

    /// Walks whose outcome passes `keep`.
    fn walks_ending(&self, keep: impl Fn(u32) -> bool) -> u64 {
        outcome::ALL
            .into_iter()
            .filter(|o| keep(*o))
            .map(|o| self.kernel[stat::walk_counter(o) as usize])
            .sum()
    }

    /// Share of the walks of processes userspace had not captured (walked with the mappings the
    /// kernel recorded) that reached a thread root.
    pub fn new_process_root_ratio(&self) -> f64 {
        crate::ratio::good_share(
            self.kernel[stat::VMA_WALK_ROOT as usize],
            self.kernel[stat::VMA_WALKS as usize],
        )
    }

    /// Walks of processes in age bucket `bucket` (`AGE_BUCKETS`), and how many reached a root.
    pub fn walks_by_age(&self, bucket: usize) -> (u64, u64) {
        let k = |i: u32| self.kernel[(i as usize) + bucket];
        (k(stat::AGE_WALKS), k(stat::AGE_WALK_ROOT))
    }

    /// Frames per walked user stack.
    pub fn frames_per_stack(&self) -> f64 {
        self.per_walk(self.kernel[stat::WALK_FRAMES as usize])
    }

    /// Frames stepped by frame pointer for lack of a table or of unwind information, plus walks of
    /// processes without tables yet.
    pub fn fallbacks(&self) -> u64 {
        [
            stat::FALLBACK_NO_PROCESS,
            stat::FALLBACK_NO_TABLE,
            stat::FALLBACK_NO_INFO,
        ]
        .iter()
        .map(|i| self.kernel[*i as usize])
        .sum()
    }

    fn per_walk(&self, n: u64) -> f64 {
        match self.walks() {
            0 => 0.0,
            walks => n as f64 / walks as f64,
        }
    }
}

/// One drained window.
#[derive(Clone, Debug, Default)]
pub struct RawWindow {
    /// Generation that was drained.
    pub generation: u64,
    /// On-CPU aggregates.
    pub on_cpu: Vec<RawSample>,
    /// Off-CPU aggregates.
    pub off_cpu: Vec<RawSample>,
    /// Counters.
    pub stats: WindowStats,
}

/// Rotates slots and drains the previous one.
pub struct Drainer<M> {
    maps: M,
    control: Control,
    last_stats: [u64; stat::COUNT as usize],
    grace: Duration,
}

impl<M: KernelMaps> Drainer<M> {
    /// Starts at generation 0 with `control` (its generation is overwritten).
    pub fn new(mut maps: M, mut control: Control) -> Result<Self, BpfError> {
        control.generation = 0;
        maps.write_control(&control)?;
        Ok(Self {
            maps,
            control,
            last_stats: [0; stat::COUNT as usize],
            grace: GRACE,
        })
    }

    /// Ends the current window and returns its content.
    pub fn next_window(&mut self) -> Result<RawWindow, BpfError> {
        let old = self.control.generation;
        let next = old + 1;
        // Slot `next` last held generation next-SLOTS; everything referencing its stacks was drained.
        self.maps.clear_stacks(next % SLOTS)?;
        self.control.generation = next;
        self.maps.write_control(&self.control)?;
        std::thread::sleep(self.grace);

        let slot = old % SLOTS;
        let on_cpu = self.maps.take_on_cpu(slot)?;
        let off_cpu = self.maps.take_off_cpu(slot)?;
        let mut resolver = StackResolver {
            maps: &self.maps,
            kernel: HashMap::new(),
            user: HashMap::new(),
            labels: HashMap::new(),
            missing: 0,
            labels_missing: 0,
            kernel_full: 0,
        };
        let on_cpu = on_cpu
            .into_iter()
            .map(|(key, count)| resolver.sample(key, count, 0))
            .collect::<Result<Vec<_>, _>>()?;
        let off_cpu = off_cpu
            .into_iter()
            .map(|(key, v)| resolver.sample(key, v.count, v.total_ns))
            .collect::<Result<Vec<_>, _>>()?;
        let (stacks_missing, labels_missing, kernel_stacks_full) = (
            resolver.missing,
            resolver.labels_missing,
            resolver.kernel_full,
        );

        let now = self.maps.stats()?;
        let mut kernel = [0u64; stat::COUNT as usize];
        for (i, k) in kernel.iter_mut().enumerate() {
            *k = now[i].saturating_sub(self.last_stats[i]);
        }
        self.last_stats = now;
        let stats = WindowStats {
            kernel,
            stacks_missing,
            off_cpu_pending: self.maps.off_cpu_pending()?,
            labels_missing,
            kernel_stacks_full,
        };
        Ok(RawWindow {
            generation: old,
            on_cpu,
            off_cpu,
            stats,
        })
    }
}

/// The key/value pairs of a label set the kernel copied; bytes that are not UTF-8 are replaced
/// (the process wrote them), and raw values (a span's ids, `HEX_VALUE`) are written in lowercase hex.
fn label_pairs(set: &sonde_abi::labels::LabelSet) -> Labels {
    use sonde_abi::labels::HEX_VALUE;
    fn bytes(bytes: &[u8], len: u32) -> &[u8] {
        &bytes[..(len as usize).min(bytes.len())]
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let count = (set.count as usize).min(set.labels.len());
    set.labels[..count]
        .iter()
        .map(|l| {
            let key = text(bytes(&l.key, l.key_len));
            let value = match l.value_len & HEX_VALUE {
                0 => text(bytes(&l.value, l.value_len)),
                _ => bytes(&l.value, l.value_len & !HEX_VALUE)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
            };
            (key, value)
        })
        .collect()
}

/// A user stack read from the kernel: its frames and how the walk ended.
type UserFrames = (Arc<[u64]>, u32);

struct StackResolver<'a, M> {
    maps: &'a M,
    kernel: HashMap<(u64, u32), Option<Arc<[u64]>>>,
    user: HashMap<(u64, u64), Option<UserFrames>>,
    labels: HashMap<u64, Option<Labels>>,
    missing: u64,
    labels_missing: u64,
    /// Weighted count of samples whose kernel stack filled the map's depth.
    kernel_full: u64,
}

impl<M: KernelMaps> StackResolver<'_, M> {
    fn sample(&mut self, key: SampleKey, count: u64, total_ns: u64) -> Result<RawSample, BpfError> {
        let slot = u64::from(key.stack_slot) % SLOTS;
        let (user, user_outcome) = self.user_stack(slot, &key)?;
        let kernel = self.kernel_stack(slot, key.kernel_stack_id)?;
        if matches!(&kernel, RawStack::Frames(f) if f.len() >= KERNEL_STACK_DEPTH) {
            self.kernel_full += count;
        }
        Ok(RawSample {
            user,
            user_outcome,
            kernel,
            labels: self.labels(key.labels)?,
            key,
            count,
            total_ns,
        })
    }

    fn labels(&mut self, id: u64) -> Result<Labels, BpfError> {
        if id == 0 {
            return Ok(Labels::default());
        }
        let set = match self.labels.get(&id) {
            Some(hit) => hit.clone(),
            None => {
                let read = self.maps.label_set(id)?.map(|set| label_pairs(&set));
                self.labels.insert(id, read.clone());
                read
            }
        };
        Ok(set.unwrap_or_else(|| {
            self.labels_missing += 1;
            Labels::default()
        }))
    }

    fn kernel_stack(&mut self, slot: u64, id: i32) -> Result<RawStack, BpfError> {
        let id = match u32::try_from(id) {
            Ok(id) => id,
            Err(_) => return Ok(status(id)),
        };
        let frames = match self.kernel.get(&(slot, id)) {
            Some(hit) => hit.clone(),
            None => {
                let read = self.maps.kernel_stack(slot, id)?.map(Arc::from);
                self.kernel.insert((slot, id), read.clone());
                read
            }
        };
        Ok(match frames {
            Some(frames) if frames.is_empty() => RawStack::None,
            Some(frames) => RawStack::Frames(frames),
            None => {
                self.missing += 1;
                RawStack::Missing
            }
        })
    }

    fn user_stack(&mut self, slot: u64, key: &SampleKey) -> Result<(RawStack, u32), BpfError> {
        if key.user_stack_status != STACK_OK {
            return Ok((status(key.user_stack_status), 0));
        }
        let id = key.user_stack_id;
        let read = match self.user.get(&(slot, id)) {
            Some(hit) => hit.clone(),
            None => {
                let read = self
                    .maps
                    .user_stack(slot, id)?
                    .map(|s| (Arc::from(s.frames), s.outcome));
                self.user.insert((slot, id), read.clone());
                read
            }
        };
        Ok(match read {
            Some((frames, _)) if frames.is_empty() => (RawStack::None, 0),
            Some((frames, outcome)) => (RawStack::Frames(frames), outcome),
            None => {
                self.missing += 1;
                (RawStack::Missing, 0)
            }
        })
    }
}

/// The stack standing for a status code of the key (`STACK_*` or a negative errno).
fn status(code: i32) -> RawStack {
    match code {
        STACK_NONE => RawStack::None,
        STACK_COLLISION => RawStack::Collision,
        STACK_STALE => RawStack::Stale,
        STACK_MAP_FULL => RawStack::MapFull,
        errno => RawStack::Error(errno),
    }
}

#[cfg(test)]
mod tests;
