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
    labels: BTreeMap<u64, sonde_abi::labels::LabelSet>,
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
    fn label_set(&self, id: u64) -> Result<Option<sonde_abi::labels::LabelSet>, BpfError> {
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
        tid: tgid,
        _reserved: 0,
    }
}

#[test]
fn label_sets_are_read_once_cut_to_their_lengths_and_a_missing_one_is_counted() {
    let mut set = sonde_abi::labels::LabelSet {
        count: 2,
        cut: 0,
        labels: [sonde_abi::labels::Label {
            key_len: 0,
            value_len: 0,
            key: [0; sonde_abi::go::KEY_BYTES],
            value: [0; sonde_abi::go::VALUE_BYTES],
        }; sonde_abi::labels::MAX_LABELS],
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

#[test]
fn kernel_stacks_that_fill_the_map_depth_are_counted_by_weight() {
    let mut maps = FakeMaps::default();
    let frame = 0xffff_ffff_8100_0000u64;
    maps.on_cpu.insert(
        0,
        vec![
            (key(7, STACK_NONE.into(), 4, 0), 3),
            (key(7, STACK_NONE.into(), 5, 0), 2),
            (key(8, STACK_NONE.into(), 4, 0), 1),
        ],
    );
    // Stack 4 filled every frame of the map (its outer frames may be cut), stack 5 one fewer.
    maps.stacks.insert((0, 4), vec![frame; KERNEL_STACK_DEPTH]);
    maps.stacks
        .insert((0, 5), vec![frame; KERNEL_STACK_DEPTH - 1]);
    let mut d = drainer(maps);
    let w = d.next_window().unwrap();
    assert_eq!(w.stats.kernel_stacks_full, 4);
    assert_eq!(d.next_window().unwrap().stats.kernel_stacks_full, 0);
}
