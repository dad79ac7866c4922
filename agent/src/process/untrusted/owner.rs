//! The credentials a process opens files with, read from `/proc/PID/status` through the one proc root:
//! what "a file the process's own user could read" means for files sonde reads on its behalf.

use procfs::process::Process;

use crate::process::proc_dir;

/// A process's file-system credentials (as the host sees them, also for a process in a user
/// namespace) and its pid inside its own pid namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    /// Real, effective and file-system user ids.
    uids: [u32; 3],
    /// File-system group id.
    fsgid: u32,
    /// Effective group id.
    egid: u32,
    /// Supplementary groups.
    groups: Vec<u32>,
    /// The pid the process has in its own pid namespace (the one in `/tmp/perf-PID.map`).
    pub ns_pid: u32,
}

impl Owner {
    /// The credentials of process `pid`, None when it is gone.
    pub(crate) fn of(pid: u32) -> Option<Self> {
        let status = Process::new_with_root(proc_dir(pid)).ok()?.status().ok()?;
        let ns_pid = status
            .nspid
            .as_ref()
            .and_then(|ids| ids.last())
            .map_or(pid, |&id| id as u32);
        Some(Self {
            uids: [status.ruid, status.euid, status.fuid],
            fsgid: status.fgid,
            egid: status.egid,
            groups: status.groups,
            ns_pid,
        })
    }

    /// Whether a file owned by `uid` is the process's own (perf's rule also takes root's).
    pub(crate) fn owns(&self, uid: u32) -> bool {
        self.uids.contains(&uid)
    }

    /// Whether the process's file-system user may read a file of this owner, group and mode.
    pub(crate) fn may_read(&self, uid: u32, gid: u32, mode: u32) -> bool {
        let fsuid = self.uids[2];
        if fsuid == 0 {
            return true;
        }
        if uid == fsuid {
            return mode & 0o400 != 0;
        }
        if gid == self.fsgid || gid == self.egid || self.groups.contains(&gid) {
            return mode & 0o040 != 0;
        }
        mode & 0o004 != 0
    }

    #[cfg(test)]
    pub(crate) fn for_test(uid: u32, gid: u32, groups: Vec<u32>) -> Self {
        Self {
            uids: [uid; 3],
            fsgid: gid,
            egid: gid,
            groups,
            ns_pid: 1,
        }
    }
}
