//! Runs a program of an unpacked image the way the DaemonSet's pod runs it, without Kubernetes: a private
//! mount namespace with the image as a read-only root, the host's /proc (hostPID), a read-only sysfs with the
//! host's tracefs and cgroup hierarchy bound read-only over it, the host's /dev, and the pod's volumes; UID 0
//! holding only the listed capabilities (bounding set, so exec gives root exactly those) and no new
//! privileges. Not emulated: the network namespace and the runtime's seccomp profile.
#![allow(dead_code)]

use std::{
    ffi::CString,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::Command,
};

/// A bind mount of the host's `source` at `target` inside the image.
pub struct Volume {
    pub source: PathBuf,
    pub target: &'static str,
    pub read_only: bool,
}

/// `program` of the image at `rootfs`, to be run as a DaemonSet pod runs it with `volumes` and `caps`
/// (capability numbers). Mount points are created in `rootfs` first.
pub fn command(rootfs: &Path, program: &str, volumes: Vec<Volume>, caps: &[u32]) -> Command {
    let cstr = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let inside = |t: &str| rootfs.join(t.trim_start_matches('/'));
    for t in ["proc", "sys", "dev"] {
        std::fs::create_dir_all(inside(t)).unwrap();
    }
    let mut binds: Vec<(CString, CString, bool)> = Vec::new();
    for v in &volumes {
        std::fs::create_dir_all(inside(v.target)).unwrap();
        binds.push((cstr(&v.source), cstr(&inside(v.target)), v.read_only));
    }
    // Over the fresh sysfs, as the DaemonSet's hostPath volumes: read-only.
    let host_sys = [
        ("/sys/kernel/tracing", "sys/kernel/tracing"),
        ("/sys/fs/cgroup", "sys/fs/cgroup"),
    ]
    .map(|(s, t)| (CString::new(s).unwrap(), cstr(&rootfs.join(t))));
    let root = cstr(rootfs);
    let (proc_in, sys_in, dev_in) = (
        cstr(&inside("proc")),
        cstr(&inside("sys")),
        cstr(&inside("dev")),
    );
    let last_cap: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let drop: Vec<u32> = (0..=last_cap).filter(|c| !caps.contains(c)).collect();

    let mut cmd = Command::new(program);
    // SAFETY: only system calls on data prepared above (no allocation) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let check = |rc: libc::c_int| {
                if rc == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            };
            let none = std::ptr::null::<libc::c_char>();
            let bind =
                |src: &std::ffi::CStr, dst: &std::ffi::CStr, flags: libc::c_ulong, ro: bool| {
                    check(libc::mount(
                        src.as_ptr(),
                        dst.as_ptr(),
                        none,
                        libc::MS_BIND | flags,
                        std::ptr::null(),
                    ))?;
                    if ro {
                        let remount = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY;
                        check(libc::mount(
                            none,
                            dst.as_ptr(),
                            none,
                            remount,
                            std::ptr::null(),
                        ))?;
                    }
                    Ok::<(), std::io::Error>(())
                };
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            bind(&root, &root, 0, true)?;
            bind(c"/proc", &proc_in, libc::MS_REC, false)?;
            let sysfs_flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            check(libc::mount(
                c"sysfs".as_ptr(),
                sys_in.as_ptr(),
                c"sysfs".as_ptr(),
                sysfs_flags,
                std::ptr::null(),
            ))?;
            for (src, dst) in &host_sys {
                bind(src, dst, 0, true)?;
            }
            bind(c"/dev", &dev_in, libc::MS_REC, false)?;
            for (src, dst, ro) in &binds {
                bind(src, dst, 0, *ro)?;
            }
            check(libc::chroot(root.as_ptr()))?;
            check(libc::chdir(c"/".as_ptr()))?;
            for cap in &drop {
                check(libc::prctl(
                    libc::PR_CAPBSET_DROP,
                    *cap as libc::c_ulong,
                    0,
                    0,
                    0,
                ))?;
            }
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        });
    }
    cmd.env_clear().env("PATH", "/usr/bin:/bin");
    cmd
}
