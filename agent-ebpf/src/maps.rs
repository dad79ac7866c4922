//! Every map the kernel programs share with userspace, and the small helpers that touch them. Names are
//! those of `sonde_abi::names` (an agent test checks the built object against that list).
//!
//! Aggregations and stack maps come in `SLOTS` copies; programs write into the slot of the current
//! generation (see `sonde_abi::Control`). Sizes here are defaults: the agent resizes maps at load time.

use core::intrinsics::{AtomicOrdering, atomic_xadd};

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST},
    btf_maps::{Array as BtfArray, ArrayOfMaps, HashMap as BtfHashMap},
    helpers::bpf_probe_read_user_buf,
    macros::{btf_map, map},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, ProgramArray, RingBuf},
};
use sonde_abi::{
    Control, FileKey, FileTable, KernelStack, OffCpuSampling, OffCpuStart, OffCpuValue,
    PROCESS_SLOTS, PageEntry, PageKey, ProcEvent, ProcMappings, ProcessSampling, RowBlock,
    SampleKey, ShallowUserStack, TARGET_SLOTS, THREAD_SLOTS, TargetRule, ThreadSlot, UnwindRule,
    UserStack, VmaMappings, cost_path,
    go::{GoProc, LabelSet},
    hotspot::HsProc,
    names::runtime_programs,
    php::PhpProc,
    proc_event,
    python::{CodeEvent, PyProc},
    ruby::RbProc,
    stat,
    thread_ctx::ThreadCtxProc,
    unwind::{ROW_CHUNK_BLOCKS, SCRATCH_SLOTS},
    v8::V8Proc,
};

/// Flags of the hash maps that fill as programs run: allocated entry by entry (`BPF_F_NO_PREALLOC`),
/// which perf_event programs may do since Linux 6.1 (`bpf_mem_alloc`, NMI-safe); preallocated in the
/// legacy object (Linux 5.10 to 6.0, see `crate::repeat`), where the agent sizes them smaller.
const ALLOCATED: u32 = if cfg!(feature = "legacy") {
    0
} else {
    BPF_F_NO_PREALLOC
};

/// Control block written by userspace (the generation).
#[map]
static CONTROL: Array<Control> = Array::with_max_entries(1, 0);
/// Processes to sample when the pid filter is on.
#[map]
static PIDS: HashMap<u32, u8> = HashMap::with_max_entries(1024, 0);
/// What the relabel rules decided per process (by tgid); see `crate::targets`. Sized by the
/// agent; a process without an entry is sampled at the base frequency.
#[map]
pub static TARGETS: HashMap<u32, TargetRule> = HashMap::with_max_entries(16384, ALLOCATED);
/// Per-CPU credit of thinned targets, by `tgid % TARGET_SLOTS`.
#[map]
pub static TARGET_CREDIT: PerCpuArray<u32> = PerCpuArray::with_max_entries(TARGET_SLOTS, 0);
/// Per-CPU counters, indexed by `sonde_abi::stat`.
#[map]
static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(stat::COUNT, 0);
/// Processes already announced to userspace through `PROC_EVENTS`. LRU maps are preallocated
/// (16384 entries held 1.3 MB); an entry evicted only makes a process not yet captured be
/// announced twice, which userspace takes as once.
#[map]
pub static SEEN: LruHashMap<u32, u8> = LruHashMap::with_max_entries(4096, 0);
/// Process lifecycle events for userspace.
#[map]
static PROC_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);
/// Kernel names asked for by userspace (`kernel_names`): one run's `BATCH` records of ~520 bytes fit,
/// and userspace empties it after every run.
#[map]
pub static KERNEL_NAMES: RingBuf = RingBuf::with_byte_size(16 * 1024, 0);
/// Threads currently off-CPU (tracked episodes), by thread id.
#[map]
pub static OFFCPU_START: HashMap<u32, OffCpuStart> = HashMap::with_max_entries(16384, 0);
/// Off-CPU sampling settings of each CPU, written by userspace.
#[map]
pub static OFFCPU_SAMPLING: PerCpuArray<OffCpuSampling> = PerCpuArray::with_max_entries(1, 0);
/// Counted switch-outs by `tgid % PROCESS_SLOTS`, per CPU (a storm's threads on two CPUs would
/// otherwise fight over one cache line at every switch).
#[map]
pub static OFFCPU_PROCESS_SWITCHES: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(PROCESS_SLOTS, 0);
/// Sampling probability by `tgid % PROCESS_SLOTS`, written by userspace.
#[map]
pub static OFFCPU_PROCESS_SAMPLING: Array<ProcessSampling> =
    Array::with_max_entries(PROCESS_SLOTS, 0);
/// Per-thread off-CPU state by `tid % THREAD_SLOTS`.
#[map]
pub static OFFCPU_THREADS: Array<ThreadSlot> = Array::with_max_entries(THREAD_SLOTS, 0);

/// Unwind rows in blocks, in chunks of `ROW_CHUNK_BLOCKS` that userspace creates as tables need them
/// (an array preallocates all it may hold: at the `--max-unwind-table-mib` budget that was 60 MiB of
/// kernel memory for the few hundred KiB one process's tables use). The outer array is sized by the
/// budget at load; a chunk not created yet reads as no rows.
#[btf_map]
pub static UNWIND_ROWS: ArrayOfMaps<BtfArray<RowBlock, { ROW_CHUNK_BLOCKS as usize }>, 1> =
    ArrayOfMaps::new();
/// The distinct rules of all loaded tables, indexed by the packed rows.
#[map]
pub static UNWIND_RULES: Array<UnwindRule> = Array::with_max_entries(1, 0);
/// Where each page of each loaded table is: one hash behind a one-slot array, which userspace
/// replaces with a larger copy as tables need more entries. A hash's buckets are allocated for every
/// entry it may hold (16 bytes each, 4 MiB at the `--max-unwind-table-mib` budget), while one
/// process's tables use a few hundred; the copy is complete before the swap, so a walk sees either.
/// Not preallocated: the entries themselves follow the tables loaded.
#[btf_map]
pub static UNWIND_PAGES: ArrayOfMaps<BtfHashMap<PageKey, PageEntry, 1, { ALLOCATED as usize }>, 1> =
    ArrayOfMaps::new();
/// Executable mappings of each process with tables, by tgid. Not preallocated (8 KiB per process).
#[map]
pub static PROC_MAPPINGS: HashMap<u32, ProcMappings> = HashMap::with_max_entries(1, ALLOCATED);
/// Tables of binary files by device and inode, written by userspace as tables load.
#[map]
pub static FILE_TABLES: HashMap<FileKey, FileTable> = HashMap::with_max_entries(1, ALLOCATED);
/// Executable file mappings the kernel recorded for processes that exec'd while the agent ran, by
/// tgid. Not preallocated (648 bytes per process); removed at exit.
#[map]
pub static VMA_MAPPINGS: HashMap<u32, VmaMappings> = HashMap::with_max_entries(1, ALLOCATED);

/// CPython settings of each Python process, by tgid. Not preallocated (48 bytes per process).
#[map]
pub static PY_PROCS: HashMap<u32, PyProc> = HashMap::with_max_entries(4096, ALLOCATED);
/// CPython settings by binary file, written by userspace once per interpreter binary it finds (see
/// `crate::binaries`). Not preallocated (64 bytes per binary).
#[map]
pub static PY_FILES: HashMap<FileKey, PyProc> = HashMap::with_max_entries(64, ALLOCATED);
/// The thread state found for each Python thread, by tid; checked against the thread's id at every use.
/// Preallocated (LRU): 4096 threads, 0.3 MB; an evicted thread's state is searched for again.
#[map]
pub static PY_THREADS: LruHashMap<u32, u64> = LruHashMap::with_max_entries(4096, 0);
/// CRuby settings of each Ruby process, by tgid. Not preallocated (56 bytes per process).
#[map]
pub static RB_PROCS: HashMap<u32, RbProc> = HashMap::with_max_entries(4096, ALLOCATED);
/// PHP settings of each PHP process, by tgid. Not preallocated (24 bytes per process; a php-fpm pool
/// is one process per worker).
#[map]
pub static PHP_PROCS: HashMap<u32, PhpProc> = HashMap::with_max_entries(4096, ALLOCATED);
/// Goroutine-label settings of each Go process, by tgid. Not preallocated (24 bytes per process).
#[map]
pub static GO_PROCS: HashMap<u32, GoProc> = HashMap::with_max_entries(4096, ALLOCATED);
/// Thread-context settings of each process publishing one, by tgid. Not preallocated (304 bytes per
/// process).
#[map]
pub static TC_PROCS: HashMap<u32, ThreadCtxProc> = HashMap::with_max_entries(4096, ALLOCATED);
/// HotSpot settings of each JVM process, by tgid. Not preallocated (144 bytes per process).
#[map]
pub static HS_PROCS: HashMap<u32, HsProc> = HashMap::with_max_entries(1024, ALLOCATED);
/// V8 settings of each Node.js process, by tgid. Not preallocated (176 bytes per process).
#[map]
pub static V8_PROCS: HashMap<u32, V8Proc> = HashMap::with_max_entries(1024, ALLOCATED);
/// Label sets copied from goroutines, by a hash of their content; userspace reads them at each drain.
/// LRU: a set no sample of the last windows refers to gives way to new ones.
#[map]
pub static SAMPLE_LABELS: LruHashMap<u64, LabelSet> = LruHashMap::with_max_entries(1024, 0);

#[map]
static SAMPLE_COST: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(cost_path::COUNT * cost_path::BUCKETS, 0);

/// The runtimes' on-CPU programs (`sonde_abi::names::runtime_programs`), loaded by userspace when
/// a process of the runtime is first found.
#[map]
pub static ONCPU_RUNTIMES: ProgramArray =
    ProgramArray::with_max_entries(runtime_programs::COUNT, 0);

/// The runtimes' off-CPU programs, likewise (a program array holds programs of one type).
#[map]
pub static OFFCPU_RUNTIMES: ProgramArray =
    ProgramArray::with_max_entries(runtime_programs::COUNT, 0);

// Stacks and aggregations are not preallocated: a preallocated hash holds its every possible entry
// from load (9 MiB of user stacks per slot at 8192), while a window of one process uses a few hundred
// entries. perf_event programs may allocate since Linux 6.1 (`bpf_mem_alloc`, which is NMI-safe), as
// `UNWIND_PAGES` already does; a failed allocation is a full map, counted as such. Kernel stacks are
// kept the same way (see `sonde_abi::KernelStack` for why not in the kernel's stack-trace maps).
#[map]
static KSTACKS_0: HashMap<u32, KernelStack> = HashMap::with_max_entries(8192, ALLOCATED);
#[map]
static KSTACKS_1: HashMap<u32, KernelStack> = HashMap::with_max_entries(8192, ALLOCATED);
#[map]
static KSTACKS_2: HashMap<u32, KernelStack> = HashMap::with_max_entries(8192, ALLOCATED);
/// Where a kernel stack is read before it is hashed, per CPU and per program kind (indexed like
/// the unwinder's scratch: a perf event's NMI may interrupt the sched_switch program on its CPU).
#[map]
pub static KSTACK_SCRATCH: PerCpuArray<KernelStack> =
    PerCpuArray::with_max_entries(SCRATCH_SLOTS, 0);
#[map]
static USTACKS_0: HashMap<u64, ShallowUserStack> = HashMap::with_max_entries(8192, ALLOCATED);
#[map]
static USTACKS_1: HashMap<u64, ShallowUserStack> = HashMap::with_max_entries(8192, ALLOCATED);
#[map]
static USTACKS_2: HashMap<u64, ShallowUserStack> = HashMap::with_max_entries(8192, ALLOCATED);
#[map]
static DSTACKS_0: HashMap<u64, UserStack> = HashMap::with_max_entries(1024, ALLOCATED);
#[map]
static DSTACKS_1: HashMap<u64, UserStack> = HashMap::with_max_entries(1024, ALLOCATED);
#[map]
static DSTACKS_2: HashMap<u64, UserStack> = HashMap::with_max_entries(1024, ALLOCATED);

#[map]
static ONCPU_0: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, ALLOCATED);
#[map]
static ONCPU_1: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, ALLOCATED);
#[map]
static ONCPU_2: HashMap<SampleKey, u64> = HashMap::with_max_entries(16384, ALLOCATED);

#[map]
static OFFCPU_0: HashMap<SampleKey, OffCpuValue> = HashMap::with_max_entries(16384, ALLOCATED);
#[map]
static OFFCPU_1: HashMap<SampleKey, OffCpuValue> = HashMap::with_max_entries(16384, ALLOCATED);
#[map]
static OFFCPU_2: HashMap<SampleKey, OffCpuValue> = HashMap::with_max_entries(16384, ALLOCATED);

/// The current generation, read once per invocation.
#[inline(always)]
pub fn generation() -> Option<u64> {
    let ptr = CONTROL.get_ptr(0)?;
    // SAFETY: the pointer comes from a successful array lookup; a volatile read because userspace
    // rewrites the value while programs run.
    Some(unsafe { core::ptr::read_volatile(&raw const (*ptr).generation) })
}

/// Adds one to a per-CPU counter. Per-CPU, so no atomic is needed.
#[inline(always)]
pub fn bump(index: u32) {
    add(index, 1);
}

/// Adds `n` to a per-CPU counter.
#[inline(always)]
pub fn add(index: u32, n: u64) {
    if let Some(ptr) = STATS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, and programs do not nest on one CPU for the same counter.
        unsafe { *ptr += n };
    }
}

/// Charges `ns` of run time to an on-CPU sample of `path` (`cost_path`).
#[inline(always)]
pub fn charge_sample(path: u32, ns: u64) {
    let bucket = (ns / cost_path::BUCKET_NS).min(u64::from(cost_path::BUCKETS - 1)) as u32;
    if let Some(ptr) = SAMPLE_COST.get_ptr_mut(path * cost_path::BUCKETS + bucket) {
        // SAFETY: per-CPU slot; a perf event does not nest within itself on one CPU.
        unsafe { *ptr += 1 };
    }
}

/// This CPU's recorded on-CPU samples so far (`stat::ONCPU_SAMPLES`).
#[inline(always)]
pub fn sample_count() -> u64 {
    STATS.get(stat::ONCPU_SAMPLES).copied().unwrap_or(0)
}

/// Whether `tgid` is in the pid filter.
#[inline(always)]
pub fn pid_listed(tgid: u32) -> bool {
    PIDS.get_ptr(tgid).is_some()
}

/// The kernel-stack map of `slot`.
#[inline(always)]
pub fn kernel_stacks(slot: u64) -> &'static HashMap<u32, KernelStack> {
    match slot {
        0 => &KSTACKS_0,
        1 => &KSTACKS_1,
        _ => &KSTACKS_2,
    }
}

/// The user-stack map of `slot` (stacks of at most `SHALLOW_STACK_DEPTH` frames).
#[inline(always)]
pub fn user_stacks(slot: u64) -> &'static HashMap<u64, ShallowUserStack> {
    match slot {
        0 => &USTACKS_0,
        1 => &USTACKS_1,
        _ => &USTACKS_2,
    }
}

/// The deep user-stack map of `slot` (stacks of more than `SHALLOW_STACK_DEPTH` frames).
#[inline(always)]
pub fn deep_user_stacks(slot: u64) -> &'static HashMap<u64, UserStack> {
    match slot {
        0 => &DSTACKS_0,
        1 => &DSTACKS_1,
        _ => &DSTACKS_2,
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
///
/// # Safety
/// `ptr` must point into a live map value, 8-byte aligned (the kernel aligns map values).
#[inline(always)]
pub unsafe fn atomic_add(ptr: *mut u64, delta: u64) {
    // SAFETY: guaranteed by the caller. The BPF target has no `AtomicU64::fetch_add`; the intrinsic
    // lowers to the BPF atomic add.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(ptr, delta) };
}

/// Adds `delta` (wrapping: `u32::MAX` subtracts one) to the 32-bit value at `ptr` atomically.
///
/// # Safety
/// `ptr` must point into a live map value, 4-byte aligned.
#[inline(always)]
pub unsafe fn atomic_add_u32(ptr: *mut u32, delta: u32) {
    // SAFETY: guaranteed by the caller; lowers to the BPF 32-bit atomic add.
    unsafe { atomic_xadd::<u32, u32, { AtomicOrdering::Relaxed }>(ptr, delta) };
}

/// The map is full: the entry could not be created.
pub struct MapFull;

/// Adds one sample to `key` in `map`.
#[inline(always)]
pub fn add_sample(map: &HashMap<SampleKey, u64>, key: &SampleKey) -> Result<(), MapFull> {
    if let Some(ptr) = map.get_ptr_mut(key) {
        // SAFETY: a pointer from a successful lookup.
        unsafe { atomic_add(ptr, 1) };
        return Ok(());
    }
    match map.insert(key, 1u64, BPF_NOEXIST as u64) {
        Ok(()) => Ok(()),
        // Another CPU created the key between our lookup and insert: add to its entry.
        Err(_) => match map.get_ptr_mut(key) {
            Some(ptr) => {
                // SAFETY: as above.
                unsafe { atomic_add(ptr, 1) };
                Ok(())
            }
            None => Err(MapFull),
        },
    }
}

/// Adds one blocking episode of `ns` nanoseconds to `key` in `map`.
#[inline(always)]
pub fn add_episode(
    map: &HashMap<SampleKey, OffCpuValue>,
    key: &SampleKey,
    ns: u64,
) -> Result<(), MapFull> {
    let add_to = |value: *mut OffCpuValue| {
        // SAFETY: field pointers into a live map value.
        unsafe {
            atomic_add(&raw mut (*value).total_ns, ns);
            atomic_add(&raw mut (*value).count, 1);
        }
    };
    if let Some(value) = map.get_ptr_mut(key) {
        add_to(value);
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
                add_to(value);
                Ok(())
            }
            None => Err(MapFull),
        },
    }
}

/// How storing a stack under a hash of it went ([`insert_once`]).
pub enum Once {
    /// Stored now or before.
    Stored,
    /// Another stack is stored under the same key.
    Collision,
    /// Not stored: the map is full.
    Full,
}

/// Stores `value` under `key`, a hash of it, unless the map holds it already; a value there whose
/// second hash (`check_of`) is not `check` is another stack under the same key. Another CPU may store
/// the same key between the lookup and the insert.
#[inline(always)]
pub fn insert_once<K, V>(
    map: &HashMap<K, V>,
    key: &K,
    value: &V,
    check: u64,
    check_of: impl Fn(*const V) -> u64,
) -> Once {
    let same = |existing: *const V| match check_of(existing) == check {
        true => Once::Stored,
        false => Once::Collision,
    };
    if let Some(existing) = map.get_ptr(key) {
        return same(existing);
    }
    match map.insert(key, value, BPF_NOEXIST as u64) {
        Ok(()) => Once::Stored,
        Err(_) => match map.get_ptr(key) {
            Some(existing) => same(existing),
            None => Once::Full,
        },
    }
}

/// Sends a `PYTHON_CODE` announcement of the code object at `code` in `tgid`, with copies of its name
/// and file strings (at `name` and `file`) taken now. The record is built in the ring, not on the
/// stack: the legacy walk (no `bpf_loop`) has little of its 512 bytes to spare.
#[inline(always)]
pub fn send_python_code(tgid: u32, code: u64, name: u64, file: u64) {
    let Some(mut entry) = PROC_EVENTS.reserve::<CodeEvent>(0) else {
        bump(stat::PROC_EVENTS_LOST);
        return;
    };
    let record = entry.as_mut_ptr();
    // SAFETY: `record` is the reserved entry, written whole before it is submitted; a copy that
    // faults leaves zeros (the helper clears its destination), which userspace refuses as a string.
    unsafe {
        (*record).event = ProcEvent {
            kind: proc_event::PYTHON_CODE,
            tgid,
            time_ns: 0,
            address: code,
            data: name,
            extra: file,
        };
        copy_user(&mut (*record).name, name);
        copy_user(&mut (*record).file, file);
    }
    entry.submit(0);
}

/// Fills `to` from user memory at `from`; zeros when it faults (or `from` is 0).
#[inline(always)]
fn copy_user<const N: usize>(to: &mut [u8; N], from: u64) {
    if from == 0
        // SAFETY: the helper checks the user address and writes at most `N` bytes into `to`.
        || unsafe {
            bpf_probe_read_user_buf(from as *const u8, to.as_mut_slice()).is_err()
        }
    {
        *to = [0; N];
    }
}

/// Sends a process event; counts it when the ring buffer refuses it (full), and returns the errno.
#[inline(always)]
pub fn send_proc_event(event: &ProcEvent) -> Result<(), i32> {
    let sent = PROC_EVENTS.output::<ProcEvent>(event, 0);
    if sent.is_err() {
        bump(stat::PROC_EVENTS_LOST);
    }
    sent
}
