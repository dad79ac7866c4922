//! The runtimes' kernel programs, loaded on demand. The attached on-CPU and off-CPU programs hand
//! each sample to a walking program by a tail call (agent-ebpf `runtime.rs`): the native one,
//! loaded with them, or for a JVM or a Node.js process its runtime's. Verifying is most of what a
//! start costs the kernel (native on-CPU walking alone: 128k instructions; with the Java and V8
//! steps in one program, 276k), so a runtime's programs are loaded only when the process table
//! first publishes a process of it, and a host that runs neither never pays for them. Until then
//! its processes are walked natively (counted: `runtime_program_pending`).
//!
//! A constraint this puts on the rest of the agent: aya writes the maps' descriptor numbers into
//! every program's instructions when the object is loaded, so every map taken out of the object
//! must stay open (its number valid, naming that map) for as long as a program may still be
//! loaded: until the event thread, and the loader thread it asks (`capture::events`), have stopped.

use std::sync::{Arc, Mutex};

use aya::{
    Ebpf,
    maps::{MapData, ProgramArray},
    programs::{PerfEvent, Program, ProgramError, TracePoint},
};
use sonde_abi::names::runtime_programs::{COUNT, NATIVE, OFF_CPU, ON_CPU};

use super::{BpfError, maps::map_err, object::log_verified};

/// Where a runtime's programs stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    NotLoaded,
    Loaded,
    /// The kernel refused it: not tried again (its processes stay native, counted).
    Failed,
}

/// The runtimes' programs of one loaded object, and the program arrays they go into.
pub(crate) struct RuntimePrograms {
    ebpf: Arc<Mutex<Ebpf>>,
    /// `ONCPU_RUNTIMES` when on-CPU sampling is on, `OFFCPU_RUNTIMES` when off-CPU tracking is.
    on_cpu: Option<ProgramArray<MapData>>,
    off_cpu: Option<ProgramArray<MapData>>,
    state: [State; COUNT as usize],
}

impl RuntimePrograms {
    pub(crate) fn new(
        ebpf: Arc<Mutex<Ebpf>>,
        on_cpu: Option<ProgramArray<MapData>>,
        off_cpu: Option<ProgramArray<MapData>>,
    ) -> Self {
        Self {
            ebpf,
            on_cpu,
            off_cpu,
            // The native programs went in with the attached ones.
            state: std::array::from_fn(|i| match i as u32 {
                NATIVE => State::Loaded,
                _ => State::NotLoaded,
            }),
        }
    }

    /// Loads the programs of the runtime at `index` (`sonde_abi::names::runtime_programs`) into
    /// the program arrays, once. A failure is logged and not retried.
    pub(crate) fn ensure(&mut self, index: u32) {
        let Some(state) = self.state.get_mut(index as usize) else {
            return;
        };
        if *state != State::NotLoaded {
            return;
        }
        let mut ebpf = self.ebpf.lock().expect("BPF object lock");
        let mut load = |array: &mut Option<ProgramArray<MapData>>, name: &'static str| {
            let Some(array) = array else {
                return Ok(());
            };
            load_into(&mut ebpf, array, index, name)
        };
        let result = load(&mut self.on_cpu, ON_CPU[index as usize])
            .and_then(|()| load(&mut self.off_cpu, OFF_CPU[index as usize]));
        *state = match result {
            Ok(()) => State::Loaded,
            Err(err) => {
                tracing::warn!(%err, "cannot load a runtime's kernel program; its processes' stacks stay native (counted in runtime_program_pending)");
                State::Failed
            }
        };
    }
}

/// Loads program `name` (verifying it) and puts it at `index` of `array`.
pub(super) fn load_into(
    ebpf: &mut Ebpf,
    array: &mut ProgramArray<MapData>,
    index: u32,
    name: &'static str,
) -> Result<(), BpfError> {
    let program = ebpf
        .program_mut(name)
        .ok_or(ProgramError::UnexpectedProgramType)
        .map_err(|source| BpfError::Program {
            program: name,
            source,
        })?;
    let began = std::time::Instant::now();
    let loaded = match program {
        Program::PerfEvent(p) => PerfEvent::load(p),
        Program::TracePoint(p) => TracePoint::load(p),
        _ => Err(ProgramError::UnexpectedProgramType),
    };
    loaded.map_err(|source| {
        super::privileges::refused(super::privileges::Step::ProgramLoad(name), &source).unwrap_or(
            BpfError::Program {
                program: name,
                source,
            },
        )
    })?;
    log_verified(name, program.info().ok(), began);
    let fd = program.fd().map_err(|source| BpfError::Program {
        program: name,
        source,
    })?;
    let array_name = if ON_CPU.contains(&name) {
        sonde_abi::names::ONCPU_RUNTIMES
    } else {
        sonde_abi::names::OFFCPU_RUNTIMES
    };
    array.set(index, fd, 0).map_err(map_err(array_name))
}
