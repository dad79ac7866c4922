//! Settings fixed while the programs run, read-only globals of the eBPF object set at load (see
//! agent-ebpf `globals`): the verifier prunes the branches they turn off, so a disabled feature costs
//! nothing per sample.

use std::time::Duration;

use aya::EbpfLoader;
use sonde_abi::names::globals;

use super::{
    btf::{BtfError, KernelBtf},
    kernel_log,
    options::LoadOptions,
    tracefs,
    unwind_maps::UnwindMode,
};

/// Minimum time between two requests to re-read one process's mappings.
const REFRESH_INTERVAL: Duration = Duration::from_millis(500);
/// Test hook: when this variable is `1`, the exec program fails on every run (the `TEST_FAIL_EXEC`
/// global), so a test can see a kernel failure counted and logged. Not a user setting, and only read
/// by builds with the `test-hooks` feature.
#[cfg(feature = "test-hooks")]
const TEST_FAIL_EXEC_ENV: &str = "SONDE_TEST_FAIL_EXEC";
/// Settings fixed while the programs run, loaded as read-only globals (see agent-ebpf `globals`).
pub(super) struct Globals {
    filter_pids: u32,
    unwind_mode: u32,
    refresh_interval_ns: u64,
    min_block_ns: u64,
    offcpu_kind: u32,
    standard_layout: u32,
    prev_pid_offset: u32,
    prev_state_offset: u32,
    next_pid_offset: u32,
    preempt_state_bit: u64,
    pub(super) kernel_log: u32,
    test_fail_exec: u32,
    /// Each runtime's switch: its global and 1 when its kernel side is on.
    runtimes: Vec<(&'static str, u32)>,
    task_tp_offset: u32,
    task_stack_offset: u32,
    pub(super) vma_layout: sonde_abi::VmaLayout,
}

impl Globals {
    pub(super) fn new(
        options: &LoadOptions,
        layout: Option<&tracefs::SchedSwitchLayout>,
        tracefs: &std::path::Path,
    ) -> Self {
        let off = options.off_cpu.zip(layout);
        let btf = std::cell::OnceCell::new();
        let vmlinux = || btf.get_or_init(super::btf::read_vmlinux);
        Self {
            filter_pids: u32::from(!options.pids.is_empty()),
            unwind_mode: options.unwind.abi(),
            refresh_interval_ns: REFRESH_INTERVAL.as_nanos() as u64,
            min_block_ns: off.map_or(0, |(o, _)| o.min_block.as_nanos() as u64),
            offcpu_kind: off.map_or(0, |(o, _)| o.kind as u32),
            standard_layout: off.map_or(0, |(_, l)| {
                u32::from((l.prev_pid, l.prev_state, l.next_pid) == (24, 32, 56))
            }),
            prev_pid_offset: off.map_or(0, |(_, l)| l.prev_pid),
            prev_state_offset: off.map_or(0, |(_, l)| l.prev_state),
            next_pid_offset: off.map_or(0, |(_, l)| l.next_pid),
            preempt_state_bit: off.map_or(0, |(_, l)| u64::from(l.preempt_bit)),
            kernel_log: u32::from(kernel_log::wanted(options.kernel_log)),
            test_fail_exec: u32::from(test_fail_exec()),
            runtimes: options
                .kernel_sides()
                .map(|(side, on)| (side.global, u32::from(on)))
                .collect(),
            task_tp_offset: if options
                .kernel_sides()
                .any(|(side, on)| on && side.needs_thread_pointer)
            {
                tp_offset(vmlinux())
            } else {
                0
            },
            task_stack_offset: task_stack_offset(vmlinux()),
            vma_layout: if options.unwind == UnwindMode::Fp {
                sonde_abi::VmaLayout::default()
            } else {
                vma_layout(vmlinux(), tracefs)
            },
        }
    }

    pub(super) fn set<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader
            .override_global(globals::FILTER_PIDS, &self.filter_pids, true)
            .override_global(globals::UNWIND_MODE, &self.unwind_mode, true)
            .override_global(
                globals::REFRESH_INTERVAL_NS,
                &self.refresh_interval_ns,
                true,
            )
            .override_global(globals::MIN_BLOCK_NS, &self.min_block_ns, true)
            .override_global(globals::OFFCPU_KIND, &self.offcpu_kind, true)
            .override_global(globals::STANDARD_LAYOUT, &self.standard_layout, true)
            .override_global(globals::PREV_PID_OFFSET, &self.prev_pid_offset, true)
            .override_global(globals::PREV_STATE_OFFSET, &self.prev_state_offset, true)
            .override_global(globals::NEXT_PID_OFFSET, &self.next_pid_offset, true)
            .override_global(globals::PREEMPT_STATE_BIT, &self.preempt_state_bit, true)
            .override_global(globals::KERNEL_LOG, &self.kernel_log, true)
            .override_global(globals::TEST_FAIL_EXEC, &self.test_fail_exec, true)
            .override_global(globals::TASK_TP_OFFSET, &self.task_tp_offset, true)
            .override_global(globals::TASK_STACK_OFFSET, &self.task_stack_offset, true)
            .override_global(globals::VMA_LAYOUT, &self.vma_layout, true);
        for (global, on) in &self.runtimes {
            loader.override_global(global, on, true);
        }
    }
}

/// Where the kernel keeps a task's thread pointer (x86_64's fs base), which recognises CPython
/// 3.9/3.10 threads (their thread states hold `pthread_self()`, the thread pointer, and no native
/// thread id) and finds Go's `g`; 0 when unknown or where the architecture keeps it elsewhere.
fn tp_offset(vmlinux: &Result<KernelBtf, BtfError>) -> u32 {
    let Some(path) = crate::platform::arch::THREAD_POINTER_IN_TASK else {
        return 0;
    };
    let found = vmlinux
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|blob| super::btf::word_offset(blob, path).map_err(|e| e.to_string()));
    match found {
        Ok(offset) => offset,
        Err(e) => {
            tracing::warn!("{e}: {}", super::btf::THREAD_POINTER_CONSEQUENCE);
            0
        }
    }
}

/// Where `task_struct` points at the task's kernel stack, at whose top the legacy programs find a
/// switched-out task's user registers; 0 when the kernel has no BTF (its off-CPU stacks then hold
/// kernel frames only, which the kernel feature report says).
fn task_stack_offset(vmlinux: &Result<KernelBtf, BtfError>) -> u32 {
    vmlinux
        .as_ref()
        .ok()
        .and_then(|blob| super::btf::word_offset(blob, &["task_struct", "stack"]).ok())
        .unwrap_or(0)
}

/// Offsets for recording the executable mappings of new processes in the kernel; all 0 (recording
/// off) when the kernel's BTF lacks them (x86_64 only).
fn vma_layout(
    vmlinux: &Result<KernelBtf, BtfError>,
    tracefs: &std::path::Path,
) -> sonde_abi::VmaLayout {
    if !crate::platform::arch::KERNEL_RECORDS_MAPPINGS {
        return sonde_abi::VmaLayout::default();
    }
    let found = vmlinux
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|blob| super::btf::vma_layout(blob).map_err(|e| e.to_string()))
        .and_then(|layout| {
            let field = |category, event, field, size| {
                tracefs::field_offset(tracefs, category, event, field, size)
                    .map_err(|e| e.to_string())
            };
            Ok(sonde_abi::VmaLayout {
                fork_child_pid: field("sched", "sched_process_fork", "child_pid", 4)?,
                mmap_ret: field("syscalls", "sys_exit_mmap", "ret", 8)?,
                ..layout
            })
        });
    match found {
        Ok(layout) => layout,
        Err(e) => {
            tracing::warn!(
                "{e}: the kernel cannot record the mappings of new processes, so the first samples of \
                 each process (all of those living under a few tens of milliseconds) fall back to \
                 frame pointers"
            );
            sonde_abi::VmaLayout::default()
        }
    }
}

/// Whether the test hook `SONDE_TEST_FAIL_EXEC` is set (said loudly: it breaks process tracking).
fn test_fail_exec() -> bool {
    let set: Option<bool> = test_hook!(Some(
        std::env::var_os(TEST_FAIL_EXEC_ENV).is_some_and(|v| v == "1")
    ));
    let set = set.unwrap_or(false);
    if set {
        tracing::warn!("test hook SONDE_TEST_FAIL_EXEC=1: the exec program fails on every run");
    }
    set
}
