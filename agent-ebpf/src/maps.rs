//! Every map the kernel programs share with userspace, and the small helpers that touch them.
//!
//! Aggregations and stack-trace maps come in `SLOTS` copies; programs write into the slot of the current
//! generation (see `sonde_abi::Control`). Sizes here are defaults: the agent resizes maps at load time.

use core::intrinsics::{AtomicOrdering, atomic_xadd};

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf, StackTrace},
};
use sonde_abi::{Control, OffCpuStart, OffCpuValue, ProcEvent, SampleKey, stat};

/// Control block written by userspace.
#[map]
pub static CONTROL: Array<Control> = Array::with_max_entries(1, 0);
/// Processes to sample when `Control::filter_pids` is set.
#[map]
pub static PIDS: HashMap<u32, u8> = HashMap::with_max_entries(1024, 0);
/// Per-CPU counters, indexed by `sonde_abi::stat`.
#[map]
pub static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(stat::COUNT, 0);
/// Processes already announced to userspace through `PROC_EVENTS`.
#[map]
pub static SEEN: LruHashMap<u32, u8> = LruHashMap::with_max_entries(16384, 0);
/// Process lifecycle events for userspace.
#[map]
pub static PROC_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

#[map]
pub static STACKS_0: StackTrace = StackTrace::with_max_entries(8192, 0);
#[map]
pub static STACKS_1: StackTrace = StackTrace::with_max_entries(8192, 0);
#[map]
pub static STACKS_2: StackTrace = StackTrace::with_max_entries(8192, 0);

#[map]
pub static ONCPU_0: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, 0);
#[map]
pub static ONCPU_1: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, 0);
#[map]
pub static ONCPU_2: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, 0);

#[map]
pub static OFFCPU_0: HashMap<SampleKey, OffCpuValue> = HashMap::with_max_entries(16384, 0);
#[map]
pub static OFFCPU_1: HashMap<SampleKey, OffCpuValue> = HashMap::with_max_entries(16384, 0);
#[map]
pub static OFFCPU_2: HashMap<SampleKey, OffCpuValue> = HashMap::with_max_entries(16384, 0);
/// Threads currently off-CPU, by thread id.
#[map]
pub static OFFCPU_START: HashMap<u32, OffCpuStart> = HashMap::with_max_entries(16384, 0);

/// The control block, copied so a concurrent userspace update cannot be seen half-written field by field.
#[inline(always)]
pub fn control() -> Option<Control> {
    let ptr = CONTROL.get_ptr(0)?;
    // SAFETY: the pointer comes from a successful array lookup and the value is plain data.
    Some(unsafe { core::ptr::read_volatile(ptr) })
}

/// Adds one to a per-CPU counter. Per-CPU, so no atomic is needed.
#[inline(always)]
pub fn bump(index: u32) {
    if let Some(ptr) = STATS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, and programs do not nest on one CPU for the same counter.
        unsafe { *ptr += 1 };
    }
}

/// Whether `tgid` passes the process filter.
#[inline(always)]
pub fn wanted(control: &Control, tgid: u32) -> bool {
    control.filter_pids == 0 || PIDS.get_ptr(tgid).is_some()
}

/// The stack-trace map of `slot`.
#[inline(always)]
pub fn stacks(slot: u64) -> &'static StackTrace {
    match slot {
        0 => &STACKS_0,
        1 => &STACKS_1,
        _ => &STACKS_2,
    }
}

/// The on-CPU aggregation of `slot`.
#[inline(always)]
pub fn on_cpu_counts(slot: u64) -> &'static HashMap<SampleKey, u64> {
    match slot {
        0 => &ONCPU_0,
        1 => &ONCPU_1,
        _ => &ONCPU_2,
    }
}

/// The off-CPU aggregation of `slot`.
#[inline(always)]
pub fn off_cpu_counts(slot: u64) -> &'static HashMap<SampleKey, OffCpuValue> {
    match slot {
        0 => &OFFCPU_0,
        1 => &OFFCPU_1,
        _ => &OFFCPU_2,
    }
}

/// Adds `delta` to the value at `ptr` atomically: several CPUs update one key at once.
#[inline(always)]
pub fn atomic_add(ptr: *mut u64, delta: u64) {
    // SAFETY: `ptr` points into a map value that lives as long as the map; 8-byte aligned by the kernel.
    // The BPF target has no `AtomicU64::fetch_add`; the intrinsic lowers to the BPF atomic add.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(ptr, delta) };
}

/// Adds one sample to `key` in `map`. Err when the map is full.
#[inline(always)]
pub fn add_sample(map: &HashMap<SampleKey, u64>, key: &SampleKey) -> Result<(), i32> {
    if let Some(ptr) = map.get_ptr_mut(key) {
        atomic_add(ptr, 1);
        return Ok(());
    }
    match map.insert(key, 1u64, BPF_NOEXIST as u64) {
        Ok(()) => Ok(()),
        // Another CPU created the key between our lookup and insert: add to its entry.
        Err(_) => match map.get_ptr_mut(key) {
            Some(ptr) => {
                atomic_add(ptr, 1);
                Ok(())
            }
            None => Err(-1),
        },
    }
}

/// Adds one blocking episode of `ns` nanoseconds to `key` in `map`. Err when the map is full.
#[inline(always)]
pub fn add_episode(
    map: &HashMap<SampleKey, OffCpuValue>,
    key: &SampleKey,
    ns: u64,
) -> Result<(), i32> {
    if let Some(value) = map.get_ptr_mut(key) {
        // SAFETY: field pointers into a live map value.
        unsafe {
            atomic_add(&raw mut (*value).total_ns, ns);
            atomic_add(&raw mut (*value).count, 1);
        }
        return Ok(());
    }
    let first = OffCpuValue {
        total_ns: ns,
        count: 1,
    };
    match map.insert(key, first, BPF_NOEXIST as u64) {
        Ok(()) => Ok(()),
        Err(_) => match map.get_ptr_mut(key) {
            Some(value) => {
                // SAFETY: as above.
                unsafe {
                    atomic_add(&raw mut (*value).total_ns, ns);
                    atomic_add(&raw mut (*value).count, 1);
                }
                Ok(())
            }
            None => Err(-1),
        },
    }
}

/// Sends a process event; counts it when the ring buffer is full.
#[inline(always)]
pub fn send_proc_event(event: &ProcEvent) -> bool {
    let sent = PROC_EVENTS.output::<ProcEvent>(event, 0).is_ok();
    if !sent {
        bump(stat::PROC_EVENTS_LOST);
    }
    sent
}
