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
    Control, SLOTS, STACK_COLLISION, STACK_MAP_FULL, STACK_NONE, STACK_OK, STACK_STALE, SampleKey,
    stat,
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
    /// Lost to a stack-map bucket collision (counted in the kernel).
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
    /// Samples whose goroutine label set was gone from `GO_LABELS` when read (evicted): kept
    /// without labels.
    pub labels_missing: u64,
}

// By hand: arrays longer than 32 have no `Default`.
impl Default for WindowStats {
    fn default() -> Self {
        Self {
            kernel: [0; stat::COUNT as usize],
            stacks_missing: 0,
            off_cpu_pending: 0,
            labels_missing: 0,
        }
    }
}

/// Every way a user-stack walk ends, with a short name; the first is the complete one.
pub const WALK_OUTCOMES: [(&str, u32); 8] = [
    ("root", stat::WALK_ROOT),
    ("depth", stat::WALK_DEPTH),
    ("read_fault", stat::WALK_READ_FAULT),
    ("no_table", stat::WALK_NO_TABLE),
    ("unsupported", stat::WALK_UNSUPPORTED),
    ("bad_frame", stat::WALK_BAD_FRAME),
    ("fp_end", stat::WALK_FP_END),
    ("exiting", stat::WALK_EXITING),
];

/// Every kernel counter (`sonde_abi::stat`) with its metric label, in index order.
pub const KERNEL_COUNTERS: [(&str, u32); stat::COUNT as usize] = [
    ("oncpu_samples", stat::ONCPU_SAMPLES),
    ("oncpu_idle", stat::ONCPU_IDLE),
    ("oncpu_map_full", stat::ONCPU_MAP_FULL),
    ("user_stack_collision", stat::USER_STACK_COLLISION),
    ("kernel_stack_collision", stat::KERNEL_STACK_COLLISION),
    ("user_stack_error", stat::USER_STACK_ERROR),
    ("kernel_stack_error", stat::KERNEL_STACK_ERROR),
    ("proc_events_lost", stat::PROC_EVENTS_LOST),
    ("offcpu_switch_out", stat::OFFCPU_SWITCH_OUT),
    ("offcpu_episodes", stat::OFFCPU_EPISODES),
    ("offcpu_short", stat::OFFCPU_SHORT),
    ("offcpu_start_full", stat::OFFCPU_START_FULL),
    ("offcpu_map_full", stat::OFFCPU_MAP_FULL),
    ("offcpu_unmatched_exit", stat::OFFCPU_UNMATCHED_EXIT),
    ("offcpu_stale_stack", stat::OFFCPU_STALE_STACK),
    ("walk_root", stat::WALK_ROOT),
    ("walk_depth", stat::WALK_DEPTH),
    ("walk_read_fault", stat::WALK_READ_FAULT),
    ("walk_no_table", stat::WALK_NO_TABLE),
    ("walk_unsupported", stat::WALK_UNSUPPORTED),
    ("walk_fp_end", stat::WALK_FP_END),
    ("walk_bad_frame", stat::WALK_BAD_FRAME),
    ("walk_frames", stat::WALK_FRAMES),
    ("fallback_no_process", stat::FALLBACK_NO_PROCESS),
    ("fallback_no_table", stat::FALLBACK_NO_TABLE),
    ("fallback_no_info", stat::FALLBACK_NO_INFO),
    ("mappings_refresh", stat::MAPPINGS_REFRESH),
    ("program_errors", stat::PROGRAM_ERRORS),
    ("offcpu_eligible", stat::OFFCPU_ELIGIBLE),
    ("offcpu_tracked_long", stat::OFFCPU_TRACKED_LONG),
    ("offcpu_weight", stat::OFFCPU_WEIGHT),
    ("python_walks", stat::PY_WALKS),
    ("python_frames", stat::PY_FRAMES),
    ("python_idle", stat::PY_IDLE),
    ("python_no_thread", stat::PY_NO_THREAD),
    ("python_read_fault", stat::PY_READ_FAULT),
    ("python_truncated", stat::PY_TRUNCATED),
    ("vma_walks", stat::VMA_WALKS),
    ("vma_no_table", stat::VMA_NO_TABLE),
    ("vma_missed", stat::VMA_MISSED),
    ("vma_record_failed", stat::VMA_RECORD_FAILED),
    ("walk_exiting", stat::WALK_EXITING),
    ("vma_walk_root", stat::VMA_WALK_ROOT),
    ("walks_age_0_1ms", stat::AGE_WALKS),
    ("walks_age_1_10ms", stat::AGE_WALKS + 1),
    ("walks_age_10_100ms", stat::AGE_WALKS + 2),
    ("walks_age_100ms_1s", stat::AGE_WALKS + 3),
    ("walks_age_1s_up", stat::AGE_WALKS + 4),
    ("walk_root_age_0_1ms", stat::AGE_WALK_ROOT),
    ("walk_root_age_1_10ms", stat::AGE_WALK_ROOT + 1),
    ("walk_root_age_10_100ms", stat::AGE_WALK_ROOT + 2),
    ("walk_root_age_100ms_1s", stat::AGE_WALK_ROOT + 3),
    ("walk_root_age_1s_up", stat::AGE_WALK_ROOT + 4),
    ("go_labeled", stat::GO_LABELED),
    ("go_labels_cut", stat::GO_LABELS_CUT),
    ("go_labels_fault", stat::GO_LABELS_FAULT),
];

/// The process-age buckets of `stat::AGE_WALKS`, as the summary and `/metrics` label them.
pub const AGE_BUCKETS: [&str; stat::AGE_BUCKETS as usize] =
    ["0-1ms", "1-10ms", "10-100ms", "100ms-1s", "1s+"];

impl WindowStats {
    /// On-CPU samples lost (never aggregated) in the kernel.
    pub fn lost_samples(&self) -> u64 {
        self.kernel[stat::ONCPU_MAP_FULL as usize]
    }

    /// User-stack walks (each ends in exactly one outcome).
    pub fn walks(&self) -> u64 {
        WALK_OUTCOMES
            .iter()
            .map(|(_, i)| self.kernel[*i as usize])
            .sum()
    }

    /// Share of walks that reached a thread root.
    pub fn walk_root_ratio(&self) -> f64 {
        crate::ratio::good_share(self.kernel[stat::WALK_ROOT as usize], self.walks())
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

    /// Python frames per walk of a Python process's stack.
    pub fn python_frames_per_stack(&self) -> f64 {
        match self.kernel[stat::PY_WALKS as usize] {
            0 => 0.0,
            walks => self.kernel[stat::PY_FRAMES as usize] as f64 / walks as f64,
        }
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
        };
        let on_cpu = on_cpu
            .into_iter()
            .map(|(key, count)| resolver.sample(key, count, 0))
            .collect::<Result<Vec<_>, _>>()?;
        let off_cpu = off_cpu
            .into_iter()
            .map(|(key, v)| resolver.sample(key, v.count, v.total_ns))
            .collect::<Result<Vec<_>, _>>()?;
        let (stacks_missing, labels_missing) = (resolver.missing, resolver.labels_missing);

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
/// (the process wrote them).
fn label_pairs(set: &sonde_abi::go::LabelSet) -> Labels {
    let text = |bytes: &[u8], len: u32| {
        let len = (len as usize).min(bytes.len());
        String::from_utf8_lossy(&bytes[..len]).into_owned()
    };
    let count = (set.count as usize).min(set.labels.len());
    set.labels[..count]
        .iter()
        .map(|l| (text(&l.key, l.key_len), text(&l.value, l.value_len)))
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
}

impl<M: KernelMaps> StackResolver<'_, M> {
    fn sample(&mut self, key: SampleKey, count: u64, total_ns: u64) -> Result<RawSample, BpfError> {
        let slot = u64::from(key.stack_slot) % SLOTS;
        let (user, user_outcome) = self.user_stack(slot, &key)?;
        Ok(RawSample {
            user,
            user_outcome,
            kernel: self.kernel_stack(slot, key.kernel_stack_id)?,
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
mod tests {

    #[test]
    fn every_kernel_counter_has_one_name_at_its_index() {
        for (i, (name, index)) in KERNEL_COUNTERS.iter().enumerate() {
            assert_eq!(*index as usize, i, "{name}");
        }
        let mut names: Vec<_> = KERNEL_COUNTERS.iter().map(|(n, _)| n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KERNEL_COUNTERS.len());
    }
    use std::collections::BTreeMap;

    use sonde_abi::{OffCpuValue, unwind::outcome};

    use super::*;
    use crate::bpf::maps::UserStackRead;

    /// A fake kernel: what the programs would have written, per slot.
    struct FakeMaps {
        generation_writes: Vec<u64>,
        on_cpu: BTreeMap<u64, Vec<(SampleKey, u64)>>,
        off_cpu: BTreeMap<u64, Vec<(SampleKey, OffCpuValue)>>,
        stacks: BTreeMap<(u64, u32), Vec<u64>>,
        user_stacks: BTreeMap<(u64, u64), (Vec<u64>, u32)>,
        cleared: Vec<u64>,
        stats: [u64; stat::COUNT as usize],
        labels: BTreeMap<u64, sonde_abi::go::LabelSet>,
    }

    // By hand: arrays longer than 32 have no `Default`.
    impl Default for FakeMaps {
        fn default() -> Self {
            Self {
                generation_writes: Vec::new(),
                on_cpu: BTreeMap::new(),
                off_cpu: BTreeMap::new(),
                stacks: BTreeMap::new(),
                user_stacks: BTreeMap::new(),
                cleared: Vec::new(),
                stats: [0; stat::COUNT as usize],
                labels: BTreeMap::new(),
            }
        }
    }

    impl KernelMaps for FakeMaps {
        fn write_control(&mut self, control: &Control) -> Result<(), BpfError> {
            self.generation_writes.push(control.generation);
            Ok(())
        }
        fn take_on_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, u64)>, BpfError> {
            Ok(self.on_cpu.remove(&slot).unwrap_or_default())
        }
        fn take_off_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, OffCpuValue)>, BpfError> {
            Ok(self.off_cpu.remove(&slot).unwrap_or_default())
        }
        fn kernel_stack(&self, slot: u64, id: u32) -> Result<Option<Vec<u64>>, BpfError> {
            Ok(self.stacks.get(&(slot, id)).cloned())
        }
        fn user_stack(&self, slot: u64, id: u64) -> Result<Option<UserStackRead>, BpfError> {
            Ok(self
                .user_stacks
                .get(&(slot, id))
                .map(|(frames, outcome)| UserStackRead {
                    frames: frames.clone(),
                    outcome: *outcome,
                }))
        }
        fn clear_stacks(&mut self, slot: u64) -> Result<usize, BpfError> {
            self.cleared.push(slot);
            let before = self.stacks.len() + self.user_stacks.len();
            self.stacks.retain(|(s, _), _| *s != slot);
            self.user_stacks.retain(|(s, _), _| *s != slot);
            Ok(before - self.stacks.len() - self.user_stacks.len())
        }
        fn stats(&self) -> Result<[u64; stat::COUNT as usize], BpfError> {
            Ok(self.stats)
        }
        fn off_cpu_pending(&self) -> Result<usize, BpfError> {
            Ok(0)
        }
        fn label_set(&self, id: u64) -> Result<Option<sonde_abi::go::LabelSet>, BpfError> {
            Ok(self.labels.get(&id).copied())
        }
    }

    /// A key; `user` is a stack id when non-negative, else a status.
    fn key(tgid: u32, user: i64, kernel: i32, slot: u16) -> SampleKey {
        let (user_stack_id, user_stack_status) = match u64::try_from(user) {
            Ok(id) => (id, STACK_OK),
            Err(_) => (0, user as i32),
        };
        SampleKey {
            tgid,
            user_stack_id,
            user_stack_status,
            kernel_stack_id: kernel,
            stack_slot: slot,
            weight: 1,
            comm: [0; 16],
            labels: 0,
        }
    }

    #[test]
    fn label_sets_are_read_once_cut_to_their_lengths_and_a_missing_one_is_counted() {
        let mut set = sonde_abi::go::LabelSet {
            count: 2,
            cut: 0,
            labels: [sonde_abi::go::Label {
                key_len: 0,
                value_len: 0,
                key: [0; sonde_abi::go::KEY_BYTES],
                value: [0; sonde_abi::go::VALUE_BYTES],
            }; sonde_abi::go::MAX_LABELS],
        };
        for (label, (k, v)) in set
            .labels
            .iter_mut()
            .zip([("endpoint", "a"), ("tier", "\u{e9}t\u{e9}")])
        {
            label.key[..k.len()].copy_from_slice(k.as_bytes());
            label.value[..v.len()].copy_from_slice(v.as_bytes());
            (label.key_len, label.value_len) = (k.len() as u32, v.len() as u32);
        }
        // Bytes past the length are not part of the value.
        set.labels[0].value[1] = b'X';
        let mut maps = FakeMaps::default();
        maps.labels.insert(7, set);
        let labelled = |id| SampleKey {
            labels: id,
            ..key(1, -14, -14, 0)
        };
        maps.on_cpu.insert(
            0,
            vec![(labelled(7), 3), (labelled(8), 1), (labelled(0), 2)],
        );
        let mut d = drainer(maps);
        let w = d.next_window().unwrap();
        let by_id = |id| {
            w.on_cpu
                .iter()
                .find(|s| s.key.labels == id)
                .map(|s| s.labels.to_vec())
                .unwrap()
        };
        let want = vec![
            ("endpoint".to_owned(), "a".to_owned()),
            ("tier".to_owned(), "\u{e9}t\u{e9}".to_owned()),
        ];
        assert_eq!(by_id(7), want);
        assert!(by_id(8).is_empty() && by_id(0).is_empty());
        assert_eq!(w.stats.labels_missing, 1);
    }

    fn drainer(maps: FakeMaps) -> Drainer<FakeMaps> {
        let mut d = Drainer::new(maps, Control::default()).unwrap();
        d.grace = Duration::ZERO;
        d
    }

    #[test]
    fn drains_the_old_slot_and_clears_the_next_before_activating_it() {
        let mut maps = FakeMaps::default();
        maps.on_cpu.insert(0, vec![(key(7, 1, 4, 0), 5)]);
        maps.on_cpu.insert(1, vec![(key(8, 1, STACK_NONE, 1), 9)]); // written after the flip: next window
        maps.user_stacks
            .insert((0, 1), (vec![0x1000, 0x2000], outcome::ROOT));
        maps.user_stacks
            .insert((1, 1), (vec![0x3000], outcome::DEPTH));
        maps.stacks.insert((0, 4), vec![0xffff_ffff_8100_0000]);
        let mut d = drainer(maps);
        let w = d.next_window().unwrap();
        assert_eq!(w.generation, 0);
        assert_eq!(w.on_cpu.len(), 1);
        assert_eq!(w.on_cpu[0].count, 5);
        assert_eq!(
            w.on_cpu[0].user,
            RawStack::Frames(Arc::from(vec![0x1000, 0x2000]))
        );
        assert_eq!(w.on_cpu[0].user_outcome, outcome::ROOT);
        assert_eq!(
            w.on_cpu[0].kernel,
            RawStack::Frames(Arc::from(vec![0xffff_ffff_8100_0000]))
        );
        // Slot 1 was emptied before generation 1 was published, not after.
        assert_eq!(d.maps.cleared, vec![1]);
        assert_eq!(d.maps.generation_writes, vec![0, 1]);
        let w = d.next_window().unwrap();
        assert_eq!(w.on_cpu[0].key.tgid, 8);
        assert_eq!(d.maps.cleared, vec![1, 2]);
    }

    #[test]
    fn same_id_in_two_slots_resolves_per_slot() {
        let mut maps = FakeMaps::default();
        // An off-CPU episode that began in slot 0 and ended in slot 1 names slot 0's stack 3.
        maps.off_cpu.insert(
            1,
            vec![
                (
                    key(7, 3, STACK_NONE, 0),
                    OffCpuValue {
                        total_ns: 10,
                        count: 1,
                    },
                ),
                (
                    key(7, 3, STACK_NONE, 1),
                    OffCpuValue {
                        total_ns: 20,
                        count: 2,
                    },
                ),
            ],
        );
        maps.user_stacks
            .insert((0, 3), (vec![0xaaa], outcome::ROOT));
        let mut d = drainer(maps);
        d.next_window().unwrap(); // generation 0 (empty) -> 1
        // Written while slot 1 is active.
        d.maps
            .user_stacks
            .insert((1, 3), (vec![0xbbb], outcome::READ_FAULT));
        let w = d.next_window().unwrap();
        assert_eq!(w.off_cpu[0].user, RawStack::Frames(Arc::from(vec![0xaaa])));
        assert_eq!(w.off_cpu[1].user, RawStack::Frames(Arc::from(vec![0xbbb])));
        assert_eq!(w.off_cpu[1].user_outcome, outcome::READ_FAULT);
        assert_eq!((w.off_cpu[1].count, w.off_cpu[1].total_ns), (2, 20));
    }

    #[test]
    fn failures_are_kept_as_markers_and_missing_ids_counted() {
        let mut maps = FakeMaps::default();
        maps.on_cpu.insert(
            0,
            vec![
                (key(7, STACK_COLLISION.into(), 4, 0), 1),
                (key(7, 99, STACK_STALE, 0), 1),
                (key(7, -12, STACK_NONE, 0), 1),
                (key(7, STACK_MAP_FULL.into(), STACK_COLLISION, 0), 1),
            ],
        );
        maps.stats[stat::ONCPU_MAP_FULL as usize] = 3;
        let mut d = drainer(maps);
        let w = d.next_window().unwrap();
        assert_eq!(w.on_cpu[0].user, RawStack::Collision);
        assert_eq!(w.on_cpu[0].kernel, RawStack::Missing);
        assert_eq!(w.on_cpu[1].user, RawStack::Missing);
        assert_eq!(w.on_cpu[1].kernel, RawStack::Stale);
        assert_eq!(w.on_cpu[2].user, RawStack::Error(-12));
        assert_eq!(w.on_cpu[3].user, RawStack::MapFull);
        assert_eq!(w.on_cpu[3].kernel, RawStack::Collision);
        assert_eq!(w.stats.stacks_missing, 2);
        assert_eq!(w.stats.lost_samples(), 3);
        // Counters are per window: nothing new in the next one.
        assert_eq!(d.next_window().unwrap().stats.lost_samples(), 0);
    }
}
