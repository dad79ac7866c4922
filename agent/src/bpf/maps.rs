//! Raw access to the kernel maps behind a small trait, so the drain logic can be tested with a fake.

use aya::{
    Ebpf, Pod,
    maps::{Array, HashMap, MapData, PerCpuArray},
};
use sonde_abi::{
    Control, KernelStack, OffCpuStart, OffCpuValue, SampleKey, ShallowUserStack, UserStack,
    labels::LabelSet, names, stat, unwind::DEEP_STACK,
};

use super::BpfError;

/// A user stack as the kernel stored it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserStackRead {
    /// Addresses, leaf first.
    pub frames: Vec<u64>,
    /// How the walk ended (`sonde_abi::unwind::outcome`).
    pub outcome: u32,
}

/// What the drain needs from the kernel maps.
pub trait KernelMaps {
    /// Writes the control block (its `generation` selects the slot the programs write into).
    fn write_control(&mut self, control: &Control) -> Result<(), BpfError>;
    /// Reads and removes every on-CPU count of `slot`.
    fn take_on_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, u64)>, BpfError>;
    /// Reads and removes every off-CPU aggregate of `slot`.
    fn take_off_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, OffCpuValue)>, BpfError>;
    /// Instruction pointers of kernel stack `id` in the kernel-stack map of `slot`, leaf first.
    fn kernel_stack(&self, slot: u64, id: u32) -> Result<Option<Vec<u64>>, BpfError>;
    /// User stack `id` in the user-stack map of `slot`.
    fn user_stack(&self, slot: u64, id: u64) -> Result<Option<UserStackRead>, BpfError>;
    /// Empties the kernel and user stack maps of `slot`; returns how many stacks they held.
    fn clear_stacks(&mut self, slot: u64) -> Result<usize, BpfError>;
    /// Cumulative counters, summed over CPUs, indexed by `sonde_abi::stat`.
    fn stats(&self) -> Result<[u64; stat::COUNT as usize], BpfError>;
    /// Threads currently remembered as off-CPU.
    fn off_cpu_pending(&self) -> Result<usize, BpfError>;
    /// Goroutine label set `id` (`SampleKey::labels`), if the kernel still holds it.
    fn label_set(&self, id: u64) -> Result<Option<LabelSet>, BpfError>;
}

/// The real maps of a loaded [`Ebpf`] object.
pub struct AyaMaps {
    control: Array<MapData, Control>,
    stats: PerCpuArray<MapData, u64>,
    on_cpu: Vec<HashMap<MapData, SampleKey, u64>>,
    off_cpu: Vec<HashMap<MapData, SampleKey, OffCpuValue>>,
    kernel_stacks: Vec<HashMap<MapData, u32, KernelStack>>,
    user_stacks: Vec<HashMap<MapData, u64, ShallowUserStack>>,
    deep_user_stacks: Vec<HashMap<MapData, u64, UserStack>>,
    start: HashMap<MapData, u32, OffCpuStart>,
    labels: HashMap<MapData, u64, LabelSet>,
}

/// The frames and outcome of a stored user stack of `len` frames.
fn read_user_stack(len: u32, outcome: u32, frames: &[u64]) -> UserStackRead {
    let len = (len as usize).min(frames.len());
    UserStackRead {
        frames: frames[..len].to_vec(),
        outcome,
    }
}

pub(crate) fn missing(name: &str) -> BpfError {
    BpfError::Map {
        map: name.to_owned(),
        source: aya::maps::MapError::InvalidName {
            name: name.to_owned(),
        },
    }
}

/// Takes map `name` out of `ebpf` as a typed map. A taken map is closed when dropped: maps the
/// programs use stay referenced by the loaded programs, so this is safe for them too.
pub(crate) fn take_map<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
    ebpf: &mut Ebpf,
    name: &str,
) -> Result<T, BpfError> {
    let map = ebpf.take_map(name).ok_or_else(|| missing(name))?;
    T::try_from(map).map_err(map_err(name))
}

fn take_slots<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
    ebpf: &mut Ebpf,
    names: &[&str; 3],
) -> Result<Vec<T>, BpfError> {
    names.iter().map(|name| take_map(ebpf, name)).collect()
}

impl AyaMaps {
    /// Takes ownership of the maps the drain reads.
    pub fn new(ebpf: &mut Ebpf) -> Result<Self, BpfError> {
        Ok(Self {
            control: take_map(ebpf, names::CONTROL)?,
            stats: take_map(ebpf, names::STATS)?,
            on_cpu: take_slots(ebpf, &names::ONCPU)?,
            off_cpu: take_slots(ebpf, &names::OFFCPU)?,
            kernel_stacks: take_slots(ebpf, &names::KERNEL_STACKS)?,
            user_stacks: take_slots(ebpf, &names::USER_STACKS)?,
            deep_user_stacks: take_slots(ebpf, &names::DEEP_USER_STACKS)?,
            start: take_map(ebpf, names::OFFCPU_START)?,
            labels: take_map(ebpf, names::SAMPLE_LABELS)?,
        })
    }
}

/// Removes every entry of `map`, the slot `slot` of the maps `names`; how many there were.
fn empty<K: Pod, V: Pod>(
    map: &HashMap<MapData, K, V>,
    names: &[&'static str; 3],
    slot: u64,
) -> Result<usize, BpfError> {
    Ok(take_all(map, slot_name(names, slot))?.len())
}

/// Whether `err` says the key was not in the map. aya answers a lookup of an absent key with
/// `KeyNotFound` but passes a removal's ENOENT on as a failed syscall: removing what is already
/// gone (a process that exited twice over, a table withdrawn) is not a failure.
pub(crate) fn key_absent(err: &aya::maps::MapError) -> bool {
    match err {
        aya::maps::MapError::KeyNotFound => true,
        aya::maps::MapError::SyscallError(e) => e.io_error.raw_os_error() == Some(libc::ENOENT),
        _ => false,
    }
}

pub(crate) fn map_err(map: &str) -> impl Fn(aya::maps::MapError) -> BpfError + '_ {
    move |source| BpfError::Map {
        map: map.to_owned(),
        source,
    }
}

/// Reads all entries of a hash map and deletes them, many per syscall. Only called on a slot the
/// kernel no longer writes.
fn take_all<K: Pod, V: Pod>(
    map: &HashMap<MapData, K, V>,
    name: &'static str,
) -> Result<Vec<(K, V)>, BpfError> {
    super::batch::take_all(aya::maps::IterableMap::map(map), name)
}

fn slot_name(names: &[&'static str; 3], slot: u64) -> &'static str {
    names[slot as usize % 3]
}

impl KernelMaps for AyaMaps {
    fn write_control(&mut self, control: &Control) -> Result<(), BpfError> {
        self.control
            .set(0, control, 0)
            .map_err(map_err(names::CONTROL))
    }

    fn take_on_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, u64)>, BpfError> {
        take_all(&self.on_cpu[slot as usize], slot_name(&names::ONCPU, slot))
    }

    fn take_off_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, OffCpuValue)>, BpfError> {
        take_all(
            &self.off_cpu[slot as usize],
            slot_name(&names::OFFCPU, slot),
        )
    }

    fn kernel_stack(&self, slot: u64, id: u32) -> Result<Option<Vec<u64>>, BpfError> {
        match self.kernel_stacks[slot as usize].get(&id, 0) {
            Ok(stack) => {
                // The kernel zeroes the words after the last frame.
                let len = stack.ips.iter().position(|&ip| ip == 0);
                Ok(Some(stack.ips[..len.unwrap_or(stack.ips.len())].to_vec()))
            }
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(source) => Err(map_err(slot_name(&names::KERNEL_STACKS, slot))(source)),
        }
    }

    fn user_stack(&self, slot: u64, id: u64) -> Result<Option<UserStackRead>, BpfError> {
        let s = slot as usize;
        // Which map holds it is in the id (`sonde_abi::unwind::DEEP_STACK`).
        let (found, map) = if id & DEEP_STACK != 0 {
            let found = self.deep_user_stacks[s].get(&id, 0);
            let read = found.map(|v| read_user_stack(v.len, v.outcome, &v.frames));
            (read, &names::DEEP_USER_STACKS)
        } else {
            let found = self.user_stacks[s].get(&id, 0);
            let read = found.map(|v| read_user_stack(v.len, v.outcome, &v.frames));
            (read, &names::USER_STACKS)
        };
        match found {
            Ok(stack) => Ok(Some(stack)),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(source) => Err(map_err(slot_name(map, slot))(source)),
        }
    }

    fn clear_stacks(&mut self, slot: u64) -> Result<usize, BpfError> {
        let s = slot as usize;
        let kernel = empty(&self.kernel_stacks[s], &names::KERNEL_STACKS, slot)?;
        let user = empty(&self.user_stacks[s], &names::USER_STACKS, slot)?;
        let deep = empty(&self.deep_user_stacks[s], &names::DEEP_USER_STACKS, slot)?;
        Ok(kernel + user + deep)
    }

    fn stats(&self) -> Result<[u64; stat::COUNT as usize], BpfError> {
        let mut out = [0u64; stat::COUNT as usize];
        for (index, slot) in out.iter_mut().enumerate() {
            let per_cpu = self
                .stats
                .get(&(index as u32), 0)
                .map_err(map_err(names::STATS))?;
            *slot = per_cpu.iter().sum();
        }
        Ok(out)
    }

    fn off_cpu_pending(&self) -> Result<usize, BpfError> {
        Ok(self.start.keys().filter(Result::is_ok).count())
    }

    fn label_set(&self, id: u64) -> Result<Option<LabelSet>, BpfError> {
        match self.labels.get(&id, 0) {
            Ok(set) => Ok(Some(set)),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(map_err(names::SAMPLE_LABELS)(e)),
        }
    }
}
