//! What the runtimes' tests of the symbolizer share: a symbolizer with every runtime on and no
//! debuginfod, and a sample as the kernel stores it.

use std::sync::Arc;

use sonde_abi::{SampleKey, unwind::outcome};

use super::{
    Symbolizer,
    debuginfo::{DebugInfo, DebugInfoConfig},
};
use crate::bpf::drain::{RawSample, RawStack};

pub(crate) fn sample(pid: u32, frames: Vec<u64>, count: u64) -> RawSample {
    RawSample {
        key: SampleKey {
            tgid: pid,
            kernel_stack_id: -1,
            user_stack_id: 1,
            user_stack_status: 0,
            stack_slot: 0,
            weight: 1,
            comm: [0; sonde_abi::TASK_COMM_LEN],
            labels: 0,
            tid: pid,
            _reserved: 0,
        },
        user: RawStack::Frames(Arc::from(frames)),
        user_outcome: outcome::ROOT,
        kernel: RawStack::None,
        count,
        total_ns: 0,
        labels: Default::default(),
    }
}

pub(crate) fn symbolizer() -> Symbolizer {
    let debug = DebugInfo::new(DebugInfoConfig {
        debug_dirs: Vec::new(),
        debuginfod: None,
    })
    .expect("a debug info finder without debuginfod");
    Symbolizer::new(debug, None, crate::runtimes::Runtimes::all())
}
