//! Raw access to the kernel maps behind a small trait, so the drain logic can be tested with a fake.

use aya::{
    Ebpf,
    maps::{Array, HashMap, MapData, PerCpuArray, StackTraceMap},
};
use sonde_abi::{Control, OffCpuStart, OffCpuValue, SampleKey, stat};

use super::BpfError;

/// What the drain needs from the kernel maps.
pub trait KernelMaps {
    /// Writes the control block (its `generation` selects the slot the programs write into).
    fn write_control(&mut self, control: &Control) -> Result<(), BpfError>;
    /// Reads and removes every on-CPU count of `slot`.
    fn take_on_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, u64)>, BpfError>;
    /// Reads and removes every off-CPU aggregate of `slot`.
    fn take_off_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, OffCpuValue)>, BpfError>;
    /// Instruction pointers of stack `id` in the stack map of `slot`, leaf first; None if absent.
    fn stack(&self, slot: u64, id: u32) -> Result<Option<Vec<u64>>, BpfError>;
    /// Empties the stack map of `slot`; returns how many stacks it held.
    fn clear_stacks(&mut self, slot: u64) -> Result<usize, BpfError>;
    /// Cumulative counters, summed over CPUs, indexed by `sonde_abi::stat`.
    fn stats(&self) -> Result<[u64; stat::COUNT as usize], BpfError>;
    /// Threads currently remembered as off-CPU.
    fn off_cpu_pending(&self) -> Result<usize, BpfError>;
}

/// The real maps of a loaded [`Ebpf`] object.
pub struct AyaMaps {
    control: Array<MapData, Control>,
    stats: PerCpuArray<MapData, u64>,
    on_cpu: Vec<HashMap<MapData, SampleKey, u64>>,
    off_cpu: Vec<HashMap<MapData, SampleKey, OffCpuValue>>,
    stacks: Vec<StackTraceMap<MapData>>,
    start: HashMap<MapData, u32, OffCpuStart>,
}

/// Takes map `name` out of `ebpf` as a typed map.
pub(crate) fn take_map<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
    ebpf: &mut Ebpf,
    name: &str,
) -> Result<T, BpfError> {
    let map = ebpf.take_map(name).ok_or_else(|| BpfError::Map {
        map: name.to_owned(),
        source: aya::maps::MapError::InvalidName {
            name: name.to_owned(),
        },
    })?;
    T::try_from(map).map_err(|source| BpfError::Map {
        map: name.to_owned(),
        source,
    })
}

impl AyaMaps {
    /// Takes ownership of the maps of `ebpf`.
    pub fn new(ebpf: &mut Ebpf) -> Result<Self, BpfError> {
        let slots = 0..sonde_abi::SLOTS;
        Ok(Self {
            control: take_map(ebpf, "CONTROL")?,
            stats: take_map(ebpf, "STATS")?,
            on_cpu: slots
                .clone()
                .map(|s| take_map(ebpf, &format!("ONCPU_{s}")))
                .collect::<Result<_, _>>()?,
            off_cpu: slots
                .clone()
                .map(|s| take_map(ebpf, &format!("OFFCPU_{s}")))
                .collect::<Result<_, _>>()?,
            stacks: slots
                .map(|s| take_map(ebpf, &format!("STACKS_{s}")))
                .collect::<Result<_, _>>()?,
            start: take_map(ebpf, "OFFCPU_START")?,
        })
    }
}

fn map_err(map: &str) -> impl Fn(aya::maps::MapError) -> BpfError + '_ {
    move |source| BpfError::Map {
        map: map.to_owned(),
        source,
    }
}

/// Reads all entries of a hash map, then deletes them. Only called on a slot the kernel no longer writes.
fn take_all<K: aya::Pod + Eq + std::hash::Hash, V: aya::Pod>(
    map: &mut HashMap<MapData, K, V>,
    name: &str,
) -> Result<Vec<(K, V)>, BpfError> {
    let entries = map
        .iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(map_err(name))?;
    for (key, _) in &entries {
        map.remove(key).map_err(map_err(name))?;
    }
    Ok(entries)
}

impl KernelMaps for AyaMaps {
    fn write_control(&mut self, control: &Control) -> Result<(), BpfError> {
        self.control.set(0, control, 0).map_err(map_err("CONTROL"))
    }

    fn take_on_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, u64)>, BpfError> {
        take_all(&mut self.on_cpu[slot as usize], "ONCPU")
    }

    fn take_off_cpu(&mut self, slot: u64) -> Result<Vec<(SampleKey, OffCpuValue)>, BpfError> {
        take_all(&mut self.off_cpu[slot as usize], "OFFCPU")
    }

    fn stack(&self, slot: u64, id: u32) -> Result<Option<Vec<u64>>, BpfError> {
        match self.stacks[slot as usize].get(&id, 0) {
            Ok(trace) => Ok(Some(trace.frames().iter().map(|f| f.ip).collect())),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(source) => Err(BpfError::Map {
                map: format!("STACKS_{slot}"),
                source,
            }),
        }
    }

    fn clear_stacks(&mut self, slot: u64) -> Result<usize, BpfError> {
        let map = &mut self.stacks[slot as usize];
        let ids = map
            .stack_ids()
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_err("STACKS"))?;
        for id in &ids {
            match map.remove(id) {
                Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
                Err(source) => {
                    return Err(BpfError::Map {
                        map: format!("STACKS_{slot}"),
                        source,
                    });
                }
            }
        }
        Ok(ids.len())
    }

    fn stats(&self) -> Result<[u64; stat::COUNT as usize], BpfError> {
        let mut out = [0u64; stat::COUNT as usize];
        for (index, slot) in out.iter_mut().enumerate() {
            let per_cpu = self
                .stats
                .get(&(index as u32), 0)
                .map_err(map_err("STATS"))?;
            *slot = per_cpu.iter().sum();
        }
        Ok(out)
    }

    fn off_cpu_pending(&self) -> Result<usize, BpfError> {
        Ok(self.start.keys().filter(Result::is_ok).count())
    }
}
