//! The executable file mappings of processes that exec while the agent runs, recorded by the kernel
//! itself (`VMA_MAPPINGS`): at `exec` the program's text and its interpreter's (where the task will
//! start running), at each `mmap` that maps a file executable the library's text. A process living a
//! few milliseconds (a compiler pass, a shell pipeline) is then unwound with its binaries' tables from
//! its first sample, without waiting for userspace to read `/proc/PID/maps`, which it may never manage.
//!
//! VMAs are found with `bpf_find_vma` (kernel 5.17+) from process context only (exec and the return of
//! `mmap`): in the sampling programs, which run with interrupts off, the helper can release the address
//! space's lock only once per interrupt. Structure members are read at offsets from the running
//! kernel's BTF (`VmaLayout`), with `bpf_probe_read_kernel`. The legacy object (Linux 5.10 to 6.0,
//! see `crate::repeat`) has no `bpf_find_vma` and records nothing: there, a process is walked by frame
//! pointers until userspace has read its mappings.

use aya_ebpf::{
    bindings::BPF_ANY,
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel,
    },
    programs::TracePointContext,
};
use sonde_abi::{FileKey, VmaMapping, VmaMappings, stat, unwind::MAX_VMA_MAPPINGS};

use crate::{
    globals,
    maps::{FILE_TABLES, VMA_MAPPINGS, bump},
    regs,
};

/// `VM_EXEC` in `vm_area_struct.vm_flags`.
const VM_EXEC: u64 = 0x4;
/// Returns above this (as unsigned) are errors (`-4095..-1`).
const MAX_ERRNO_RET: u64 = (-4096i64) as u64;
const MAPPING_MASK: u32 = MAX_VMA_MAPPINGS as u32 - 1;

/// A process with nothing recorded yet (the map's value, written from read-only data: the BPF stack
/// is smaller than a value).
static EMPTY: VmaMappings = VmaMappings {
    count: 0,
    _pad: 0,
    mappings: [VmaMapping {
        start: 0,
        end: 0,
        file_base: 0,
        file: FileKey {
            dev: 0,
            _pad: 0,
            ino: 0,
        },
    }; MAX_VMA_MAPPINGS],
};

/// What the `bpf_find_vma` callback copies out of the VMA.
#[repr(C)]
#[derive(Default)]
struct Found {
    start: u64,
    end: u64,
    pgoff: u64,
    flags: u64,
    file: u64,
}

/// Whether the kernel's BTF gave the offsets (otherwise nothing is recorded).
#[inline(always)]
fn enabled() -> bool {
    globals::vma_layout().vm_file != 0
}

/// Whether this object can record mappings (`bpf_find_vma`; not in the legacy object).
pub const RECORDS: bool = cfg!(not(feature = "legacy"));

/// Whether mappings are recorded: the object can look VMAs up and the offsets are known.
#[inline(always)]
fn records() -> bool {
    RECORDS && enabled()
}

/// After `exec`: a fresh record for the process with its program's and its interpreter's text.
/// Returns true when the program's file has no table in `FILE_TABLES` yet (a binary run for the first
/// time since sonde started, or one without unwind information).
#[inline(always)]
pub fn exec(tgid: u32) -> bool {
    if !records() {
        return false;
    }
    if VMA_MAPPINGS.insert(tgid, &EMPTY, BPF_ANY as u64).is_err() {
        bump(stat::VMA_RECORD_FAILED);
        return false;
    }
    let Some(entry) = VMA_MAPPINGS.get_ptr_mut(tgid) else {
        return false;
    };
    // SAFETY: a pointer from a successful lookup; this program is the only writer of a process's
    // entry while it execs.
    let entry = unsafe { &mut *entry };
    let layout = globals::vma_layout();
    // SAFETY: kernel reads through bpf_probe_read_kernel, which tolerates bad pointers.
    let start_code = unsafe {
        let task = bpf_get_current_task() as *const u8;
        bpf_probe_read_kernel(task.add(layout.task_mm as usize).cast::<u64>())
            .ok()
            .and_then(|mm| {
                bpf_probe_read_kernel(
                    (mm as *const u8)
                        .add(layout.mm_start_code as usize)
                        .cast::<u64>(),
                )
                .ok()
            })
    };
    if let Some(start_code) = start_code {
        add(tgid, entry, start_code);
    }
    let unknown = match entry.mappings.first() {
        Some(program) if entry.count > 0 => FILE_TABLES.get_ptr(program.file).is_none(),
        _ => false,
    };
    // The task starts in its interpreter (ld.so) when it has one, in the program itself otherwise.
    if let Some(user) = regs::current_task_user_regs() {
        if !contains(entry, user.pc) {
            add(tgid, entry, user.pc);
        }
    }
    unknown
}

/// At the return of `mmap` in a recorded process: the mapping, if it maps a file executable.
#[inline(always)]
pub fn mmap(ctx: &TracePointContext) {
    if !records() {
        return;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let Some(entry) = VMA_MAPPINGS.get_ptr_mut(tgid) else {
        return;
    };
    // SAFETY: the offset of `ret` comes from the tracepoint's format; the read is checked.
    let Ok(ret) = (unsafe { ctx.read_at::<u64>(globals::vma_layout().mmap_ret as usize) }) else {
        return;
    };
    if ret >= MAX_ERRNO_RET {
        return;
    }
    // SAFETY: as in `exec`; threads of one process mmap concurrently, and a lost append only leaves
    // frames to the frame-pointer step.
    add(tgid, unsafe { &mut *entry }, ret);
}

/// At `fork` of a recorded process: the child runs the same image until it execs (a `vfork` child
/// runs in its parent's address space), so it starts with a copy of the parent's record. Threads
/// are forks too: their copies are keyed by thread id, never looked up, and removed at their exit.
#[inline(always)]
pub fn fork(ctx: &TracePointContext) {
    if !records() {
        return;
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let Some(parent) = VMA_MAPPINGS.get_ptr(tgid) else {
        return;
    };
    // SAFETY: the offset of `child_pid` comes from the tracepoint's format; the read is checked.
    let Ok(child) = (unsafe { ctx.read_at::<u32>(globals::vma_layout().fork_child_pid as usize) })
    else {
        return;
    };
    // SAFETY: a pointer from a successful lookup, copied by the helper.
    if VMA_MAPPINGS
        .insert(child, unsafe { &*parent }, BPF_ANY as u64)
        .is_err()
    {
        bump(stat::VMA_RECORD_FAILED);
    }
}

/// A thread exits: its record goes (a process's own at its leader's exit, a thread's copy at the
/// thread's).
#[inline(always)]
pub fn exit(tid: u32) {
    let _ = VMA_MAPPINGS.remove(tid);
}

/// What the current task's address space holds, for its user stack.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AddressSpace {
    /// A program is loaded: the user registers belong to it.
    Loaded,
    /// None any more: an exiting process samples in `exit_mmap` after `exit_mm` cleared `task->mm`.
    Gone,
    /// Inside `execve`, between two images: the new address space has no program yet
    /// (`mm->start_code` is set once the ELF is loaded) and the user registers still point into the
    /// old one, which is gone.
    Loading,
}

/// The current task's [`AddressSpace`]; `Loaded` when the layout is unknown.
#[inline(always)]
pub fn current_address_space() -> AddressSpace {
    if !enabled() {
        return AddressSpace::Loaded;
    }
    let layout = globals::vma_layout();
    // SAFETY: kernel reads that tolerate bad addresses.
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let mm: u64 = bpf_probe_read_kernel(task.add(layout.task_mm as usize).cast()).unwrap_or(1);
        if mm == 0 {
            return AddressSpace::Gone;
        }
        let start_code: u64 =
            bpf_probe_read_kernel((mm as *const u8).add(layout.mm_start_code as usize).cast())
                .unwrap_or(1);
        if start_code == 0 {
            AddressSpace::Loading
        } else {
            AddressSpace::Loaded
        }
    }
}

/// The age bucket (`stat::AGE_BUCKET_NS`) of the current task's process: time since its leader
/// forked. The last bucket when the layout is unknown, so an unknown age never looks young.
#[inline(always)]
pub fn current_process_age_bucket() -> u32 {
    let layout = globals::vma_layout();
    if layout.task_start_time == 0 {
        return stat::AGE_BUCKETS - 1;
    }
    // SAFETY: kernel reads that tolerate bad addresses.
    let started: u64 = unsafe {
        let task = bpf_get_current_task() as *const u8;
        let leader: u64 =
            bpf_probe_read_kernel(task.add(layout.task_group_leader as usize).cast()).unwrap_or(0);
        if leader == 0 {
            return stat::AGE_BUCKETS - 1;
        }
        bpf_probe_read_kernel(
            (leader as *const u8)
                .add(layout.task_start_time as usize)
                .cast(),
        )
        .unwrap_or(0)
    };
    // SAFETY: a helper without arguments.
    let age = unsafe { bpf_ktime_get_ns() }.saturating_sub(started);
    let mut bucket = 0;
    for bound in stat::AGE_BUCKET_NS {
        if age < bound {
            return bucket;
        }
        bucket += 1;
    }
    bucket
}

#[inline(always)]
fn contains(entry: &VmaMappings, addr: u64) -> bool {
    let count = entry.count.min(MAX_VMA_MAPPINGS as u32);
    for i in 0..MAX_VMA_MAPPINGS as u32 {
        if i >= count {
            break;
        }
        if let Some(m) = entry.mappings.get((i & MAPPING_MASK) as usize) {
            if m.start <= addr && addr < m.end {
                return true;
            }
        }
    }
    false
}

/// Appends the VMA containing `addr` when it maps a file executable, and tells the runtimes found in
/// that file before (`crate::binaries`).
#[inline(always)]
fn add(tgid: u32, entry: &mut VmaMappings, addr: u64) {
    let Some(found) = find(addr) else {
        bump(stat::VMA_RECORD_FAILED);
        return;
    };
    if found.flags & VM_EXEC == 0 || found.file == 0 {
        return; // data, or anonymous memory: nothing to unwind with
    }
    let Some(file) = file_key(found.file) else {
        bump(stat::VMA_RECORD_FAILED);
        return;
    };
    let count = entry.count;
    let Some(slot) = entry.mappings.get_mut((count & MAPPING_MASK) as usize) else {
        return;
    };
    if count >= MAX_VMA_MAPPINGS as u32 {
        bump(stat::VMA_RECORD_FAILED);
        return;
    }
    let file_base = found.start.wrapping_sub(found.pgoff << 12);
    *slot = VmaMapping {
        start: found.start,
        end: found.end,
        file_base,
        file,
    };
    entry.count = count + 1;
    crate::binaries::mapped(tgid, &file, file_base);
}

/// The current task's VMA containing `addr`.
#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn find(addr: u64) -> Option<Found> {
    use aya_ebpf::helpers::generated;
    use core::ffi::c_void;
    let mut found = Found::default();
    // SAFETY: the callback matches bpf_find_vma's contract and writes only `found`, which outlives
    // the call.
    let ret = unsafe {
        generated::bpf_find_vma(
            generated::bpf_get_current_task_btf(),
            addr,
            on_vma as *mut c_void,
            (&raw mut found).cast(),
            0,
        )
    };
    (ret == 0).then_some(found)
}

/// None: the legacy object cannot look VMAs up (and `records` keeps every caller away).
#[cfg(feature = "legacy")]
#[inline(always)]
fn find(_addr: u64) -> Option<Found> {
    None
}

/// `bpf_find_vma` callback: copies the VMA's bounds, offset, flags and file.
#[cfg(not(feature = "legacy"))]
#[inline(never)]
extern "C" fn on_vma(
    _task: *mut core::ffi::c_void,
    vma: *mut core::ffi::c_void,
    ctx: *mut core::ffi::c_void,
) -> i64 {
    use aya_ebpf::helpers::generated;
    let layout = globals::vma_layout();
    let base = vma as *const u8;
    // SAFETY: `ctx` is the `Found` passed by `find`.
    let out = unsafe { &mut *ctx.cast::<Found>() };
    // Straight into `out`, without looking at the helper's result: a failed read leaves 0 there
    // (the helper clears its destination), as `unwrap_or(0)` would, but a branch per field gave the
    // verifier 2^5 distinct states of the caller's `Found` to carry through the rest of `sonde_exec`,
    // twice over (518k instructions verified, 2.6 s of CPU at every start on Linux 6.18).
    let read = |dst: &mut u64, offset: u32| {
        // SAFETY: a kernel read that tolerates a bad address, into 8 bytes of `out`.
        unsafe {
            generated::bpf_probe_read_kernel(
                (dst as *mut u64).cast(),
                8,
                base.add(offset as usize).cast(),
            )
        };
    };
    read(&mut out.start, layout.vm_start);
    read(&mut out.end, layout.vm_end);
    read(&mut out.pgoff, layout.vm_pgoff);
    read(&mut out.flags, layout.vm_flags);
    read(&mut out.file, layout.vm_file);
    0
}

/// The device and inode of a `struct file`, as `FILE_TABLES` keys them.
#[inline(always)]
fn file_key(file: u64) -> Option<FileKey> {
    let layout = globals::vma_layout();
    // SAFETY: kernel reads that tolerate bad addresses.
    unsafe {
        let inode: u64 =
            bpf_probe_read_kernel((file as *const u8).add(layout.f_inode as usize).cast()).ok()?;
        let inode = inode as *const u8;
        let ino: u64 = bpf_probe_read_kernel(inode.add(layout.i_ino as usize).cast()).ok()?;
        let sb: u64 = bpf_probe_read_kernel(inode.add(layout.i_sb as usize).cast()).ok()?;
        let dev: u32 =
            bpf_probe_read_kernel((sb as *const u8).add(layout.s_dev as usize).cast()).ok()?;
        Some(FileKey { dev, _pad: 0, ino })
    }
}
