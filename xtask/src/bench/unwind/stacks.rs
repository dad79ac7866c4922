//! Which recorded stacks reach a thread root, from each profiler's own output: sonde's folded file,
//! `perf script` and bpftrace's printed `ustack` maps. One rule for all three, so the shares compare:
//! a sample is complete when any of its user frames is named one of [`ROOTS`] (offsets and symbol
//! versions stripped).
//! "Any", not "outermost": a stripped executable's `_start` has no name, but the walk that got to it
//! passed `__libc_start_call_main` (libc has debug symbols here), and a cut stack never holds a root.
//! A sample inside `__libc_start_main_impl` itself (glibc 2.34's name of `__libc_start_main`: running
//! the program's constructors, or exiting) is as complete: its only caller is `_start`.

/// Thread entry points (glibc), as in agent/src/symbolize/roots.rs minus the Go and musl names.
pub(crate) const ROOTS: [&str; 10] = [
    "_start",
    "_dl_start_user",
    "__libc_start_call_main",
    "__libc_start_main",
    "__libc_start_main_impl",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
];

/// Kernel functions that say a sample's process has no user stack to walk, for any profiler: it is
/// exiting (`do_exit` tears the address space down) or loading a new image (`load_elf_binary`,
/// after the old one is gone). Approximate (the first steps of each still have the stack), and the
/// same for every profiler.
pub(crate) const NO_USER_STACK: [&str; 2] = ["do_exit", "load_elf_binary"];

/// Samples of one workload and how many of them reached a root.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Share {
    pub(crate) samples: u64,
    pub(crate) rooted: u64,
    /// Samples taken in [`NO_USER_STACK`] kernel code (0 where the profiler records no kernel
    /// frames).
    pub(crate) stackless: u64,
}

impl Share {
    fn add(&mut self, count: u64, rooted: bool, stackless: bool) {
        self.samples += count;
        if rooted {
            self.rooted += count;
        } else if stackless {
            self.stackless += count;
        }
    }

    /// Adds another tally of the same workload.
    pub(crate) fn merge(&mut self, other: Share) {
        self.samples += other.samples;
        self.rooted += other.rooted;
        self.stackless += other.stackless;
    }

    /// Rooted share in percent, `None` without samples.
    pub(crate) fn percent(self) -> Option<f64> {
        (self.samples > 0).then(|| 100.0 * self.rooted as f64 / self.samples as f64)
    }

    /// Rooted share in percent of the samples that had a user stack (not [`Self::stackless`]).
    pub(crate) fn percent_of_live(self) -> Option<f64> {
        let live = self.samples - self.stackless;
        (live > 0).then(|| 100.0 * self.rooted as f64 / live as f64)
    }
}

/// Whether a kernel frame says the process had no user stack ([`NO_USER_STACK`]).
fn is_stackless(frame: &str) -> bool {
    NO_USER_STACK.contains(&frame.trim())
}

/// Whether a frame name (`sym`, `sym+0x1a`, `sym+26`, perf's `sym@@GLIBC_2.34`) is a thread root.
fn is_root(frame: &str) -> bool {
    let name = frame.split(['+', '@']).next().unwrap_or(frame).trim();
    ROOTS.contains(&name)
}

/// Tallies sonde's folded lines (`comm;outer;...;leaf COUNT`) into `workloads` slots by thread name.
pub(crate) fn from_folded(
    text: &str,
    workloads: usize,
    workload_of_comm: impl Fn(&str) -> Option<usize>,
) -> Vec<Share> {
    let mut shares = vec![Share::default(); workloads];
    for line in text.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        let mut frames = stack.split(';');
        let Some(slot) = frames.next().and_then(&workload_of_comm) else {
            continue;
        };
        // Kernel frames follow the user leaf; none of them carries a glibc root name.
        let (mut rooted, mut stackless) = (false, false);
        for frame in frames {
            rooted |= is_root(frame);
            stackless |= is_stackless(frame);
        }
        shares[slot].add(count, rooted, stackless);
    }
    shares
}

/// Tallies `perf script -F pid,ip,sym,dso` output: a header line with the pid, then one tab-indented
/// `ip sym (dso)` line per frame, leaf first, kernel frames before user frames.
pub(crate) fn from_perf_script(
    text: &str,
    workloads: usize,
    workload_of_pid: impl Fn(u32) -> Option<usize>,
) -> Vec<Share> {
    from_perf_script_by(text, workloads, |first| {
        first.parse().ok().and_then(&workload_of_pid)
    })
}

/// As [`from_perf_script`], the workload chosen from the first field of each sample's header line
/// (the pid with `-F pid,...`, the command name with `-F comm,...`).
pub(crate) fn from_perf_script_by(
    text: &str,
    workloads: usize,
    workload_of_header: impl Fn(&str) -> Option<usize>,
) -> Vec<Share> {
    let mut shares = vec![Share::default(); workloads];
    let mut current: Option<(usize, bool, bool)> = None;
    let mut finish = |current: &mut Option<(usize, bool, bool)>| {
        if let Some((slot, rooted, stackless)) = current.take() {
            shares[slot].add(1, rooted, stackless);
        }
    };
    for line in text.lines() {
        if line.starts_with('\t') {
            if let Some((_, rooted, stackless)) = &mut current {
                let frame = line.trim();
                let (_ip, rest) = frame.split_once(' ').unwrap_or((frame, ""));
                let (sym, dso) = rest.rsplit_once(" (").unwrap_or((rest, ""));
                let kernel = dso.starts_with("[kernel");
                *rooted |= !kernel && is_root(sym);
                *stackless |= kernel && is_stackless(sym.split('+').next().unwrap_or(sym));
            }
        } else if line.trim().is_empty() {
            finish(&mut current);
        } else {
            finish(&mut current);
            current = line
                .split_whitespace()
                .next()
                .and_then(&workload_of_header)
                .map(|slot| (slot, false, false));
        }
    }
    finish(&mut current);
    shares
}

/// Tallies bpftrace's printout of `@[pid, ustack] = count()`:
/// `@[PID, ` then one frame per line, then `]: COUNT`.
pub(crate) fn from_bpftrace(
    text: &str,
    workloads: usize,
    workload_of_pid: impl Fn(u32) -> Option<usize>,
) -> Vec<Share> {
    let mut shares = vec![Share::default(); workloads];
    let mut current: Option<(Option<usize>, bool)> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(key) = trimmed.strip_prefix("@[") {
            let pid = key.split(',').next().and_then(|p| p.trim().parse().ok());
            current = Some((pid.and_then(&workload_of_pid), false));
        } else if let Some(count) = trimmed.strip_prefix("]:") {
            if let (Some((Some(slot), rooted)), Ok(count)) = (current.take(), count.trim().parse())
            {
                shares[slot].add(count, rooted, false);
            }
        } else if let Some((_, rooted)) = &mut current {
            *rooted |= is_root(trimmed);
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(shares: &[Share]) -> (u64, u64) {
        (shares[0].samples, shares[0].rooted)
    }

    #[test]
    fn folded_counts_a_stack_with_a_root_anywhere_and_ignores_other_threads() {
        let text = "busy_nofp;clone3;start_thread;worker;spin 30\n\
                    busy_nofp;spin 10\n\
                    python3;python3.11+0x1234;__libc_start_call_main;main;PyEval 5\n\
                    python3;python3.11+0x1234;__libc_start_main_impl 2\n\
                    other;_start;main 100\n";
        let shares = from_folded(text, 2, |c| match c {
            "busy_nofp" => Some(0),
            "python3" => Some(1),
            _ => None,
        });
        assert_eq!(one(&shares), (40, 30));
        assert_eq!((shares[1].samples, shares[1].rooted), (7, 7));
    }

    #[test]
    fn perf_script_roots_are_user_frames_and_samples_end_at_blank_lines() {
        let text = "  4242 \n\
                    \tffffffff81000000 asm_sysvec_apic_timer_interrupt ([kernel.kallsyms])\n\
                    \t    5600 spin (/bench/busy_nofp)\n\
                    \t    7f00 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\
                    \n\
                    \x20 4242 \n\
                    \t    5600 spin (/bench/busy_nofp)\n\
                    \t    0 [unknown] ([unknown])\n\
                    \n\
                    \x20 4242 \n\
                    \t    27304 __libc_start_main@@GLIBC_2.34 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\
                    \n\
                    \x20 1 \n\
                    \t    5600 main (/sbin/init)\n";
        let shares = from_perf_script(text, 1, |pid| (pid == 4242).then_some(0));
        assert_eq!(one(&shares), (3, 2));
    }

    #[test]
    fn bpftrace_maps_are_read_with_offsets_stripped() {
        let text = "Attaching 1 probe...\n\n\n\
                    @[4242, \n        spin+26\n        worker+9\n        start_thread+755\n        clone3+44\n]: 160\n\
                    @[4242, \n        spin+26\n        0x7f12\n]: 40\n\
                    @[99, \n        _start+5\n]: 7\n";
        let shares = from_bpftrace(text, 1, |pid| (pid == 4242).then_some(0));
        assert_eq!(one(&shares), (200, 160));
    }

    #[test]
    fn percent_is_none_without_samples() {
        assert_eq!(Share::default().percent(), None);
        let share = Share {
            samples: 4,
            rooted: 1,
            stackless: 2,
        };
        assert_eq!(share.percent(), Some(25.0));
        assert_eq!(share.percent_of_live(), Some(50.0));
    }

    #[test]
    fn exiting_and_exec_samples_are_told_apart_from_cut_stacks() {
        // sonde's folded lines: user frames, then kernel frames.
        let text = "cc1;_start;__libc_start_main;main;parse 50\n\
                    cc1;0x7f02a5a16409;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_exit_group;do_group_exit;do_exit;exit_mmap 3\n\
                    cc1;entry_SYSCALL_64_after_hwframe;__x64_sys_execve;bprm_execve;load_elf_binary;elf_load 2\n\
                    cc1;parse 5\n";
        let shares = from_folded(text, 1, |c| (c == "cc1").then_some(0));
        assert_eq!(
            (shares[0].samples, shares[0].rooted, shares[0].stackless),
            (60, 50, 5)
        );
        // perf script: kernel frames by dso, an exit that also has a user root counts as rooted.
        let text = "cc1 \n\
                    \tffffffff81000000 do_exit+0x1a ([kernel.kallsyms])\n\
                    \t    7f00 _exit (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\
                    \n\
                    cc1 \n\
                    \tffffffff81000000 load_elf_binary ([kernel.kallsyms])\n\
                    \t    5600 __libc_start_main (/usr/lib/x86_64-linux-gnu/libc.so.6)\n";
        let shares = from_perf_script_by(text, 1, |c| (c == "cc1").then_some(0));
        assert_eq!(
            (shares[0].samples, shares[0].rooted, shares[0].stackless),
            (2, 1, 1)
        );
    }
}
