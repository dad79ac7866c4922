//! A fake `/proc` for the metadata tests: the files the resolver reads, in the shapes the kernel writes
//! them (recorded from a live Linux 6.x system), under a temporary root.

use std::path::Path;

/// Writes `<root>/<pid>/{cgroup,comm,stat}` for a process named `comm` in `cgroup`.
pub fn fake_proc(root: &Path, pid: u32, cgroup: &str, comm: &str) {
    let dir = root.join(pid.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cgroup"), cgroup).unwrap();
    std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
    // The shape of a real /proc/PID/stat (Linux 6.x, 52 fields), recorded from a live process.
    std::fs::write(
        dir.join("stat"),
        format!(
            "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 1461852 3133440 411 \
             18446744073709551615 94626284130304 94626284150185 140729344903504 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 \
             94626284166192 94626284167808 94626475032576 140729344912097 140729344912117 140729344912117 \
             140729344913387 0\n"
        ),
    )
    .unwrap();
}
