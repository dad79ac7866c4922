//! tracefs: finds (or mounts) it and reads tracepoint record layouts from `format` files, because field
//! offsets differ between kernel versions and must never be hard-coded.
//!
//! Mounting needs CAP_SYS_ADMIN, which sonde is not given in its least-privilege deployments: they
//! mount the host's tracefs instead, and a missing one is an error saying what to mount. tracefs is
//! root-only (mode 0700), so reading it needs CAP_DAC_READ_SEARCH when sonde is not root.

use std::{
    collections::HashMap,
    ffi::CString,
    io,
    path::{Path, PathBuf},
};

use super::{
    BpfError,
    privileges::{self, Cap},
};

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Returns the tracefs root, mounting tracefs at `/sys/kernel/tracing` when no mounted copy is found.
pub fn ensure_mounted() -> Result<PathBuf, BpfError> {
    for candidate in CANDIDATES.map(PathBuf::from) {
        match std::fs::metadata(candidate.join("events")) {
            Ok(meta) if meta.is_dir() => return Ok(candidate),
            // The root is there but closed to this process: mounting another copy would not help.
            Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
                return Err(BpfError::TracefsDenied {
                    path: candidate,
                    io_error: err,
                    held_anyway: privileges::held_anyway_for(Cap::DacReadSearch),
                });
            }
            _ => {}
        }
    }
    let target = PathBuf::from(CANDIDATES[0]);
    mount_tracefs(&target).map_err(|err| BpfError::TracefsUnavailable {
        looked: CANDIDATES.join(" and "),
        reason: mount_failure(&target, &err),
    })?;
    tracing::info!(path = %target.display(), "mounted tracefs");
    Ok(target)
}

/// Why mounting tracefs at `target` failed, naming the capability when that is the cause.
fn mount_failure(target: &Path, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) => format!(
            "mounting it at {} needs CAP_SYS_ADMIN, which sonde does not otherwise need",
            target.display()
        ),
        _ => format!("mounting it at {} failed: {err}", target.display()),
    }
}

fn mount_tracefs(target: &Path) -> io::Result<()> {
    let c = |s: &str| CString::new(s).expect("no NUL in literal");
    let target = CString::new(target.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call.
    let rc = unsafe {
        libc::mount(
            c("tracefs").as_ptr(),
            target.as_ptr(),
            c("tracefs").as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One field of a tracepoint record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Byte offset in the record.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
}

/// Layout of `sched:sched_switch` as the off-CPU program needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedSwitchLayout {
    /// `prev_pid` (pid_t).
    pub prev_pid: u32,
    /// `prev_state` (long).
    pub prev_state: u32,
    /// `next_pid` (pid_t).
    pub next_pid: u32,
    /// The `prev_state` bit that means "preempted while runnable".
    pub preempt_bit: u32,
}

/// Reads the layout of `sched:sched_switch` from tracefs.
pub fn sched_switch_layout(tracefs: &Path) -> Result<SchedSwitchLayout, BpfError> {
    let path = tracefs.join("events/sched/sched_switch/format");
    let fail = |reason: String| BpfError::TracepointFormat {
        tracepoint: "sched:sched_switch".into(),
        reason,
        path: path.clone(),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        fail(match e.kind() {
            io::ErrorKind::PermissionDenied => format!(
                "cannot read the format file ({e}): sonde needs CAP_DAC_READ_SEARCH (tracefs is root-only)"
            ),
            _ => format!("cannot read the format file: {e}"),
        })
    })?;
    parse_sched_switch(&text).map_err(fail)
}

/// The offset of `field` (of `size` bytes) in the records of tracepoint `category:event`.
pub fn field_offset(
    tracefs: &Path,
    category: &str,
    event: &str,
    field: &str,
    size: u32,
) -> Result<u32, BpfError> {
    let path = tracefs.join(format!("events/{category}/{event}/format"));
    let fail = |reason: String| BpfError::TracepointFormat {
        tracepoint: format!("{category}:{event}"),
        reason,
        path: path.clone(),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| fail(format!("cannot read the format file: {e}")))?;
    match parse_fields(&text).get(field) {
        Some(f) if f.size == size => Ok(f.offset),
        Some(f) => Err(fail(format!(
            "field {field} is {} bytes, not {size}",
            f.size
        ))),
        None => Err(fail(format!("no field {field}"))),
    }
}

fn parse_sched_switch(text: &str) -> Result<SchedSwitchLayout, String> {
    let fields = parse_fields(text);
    let get = |name: &str, size: u32| match fields.get(name) {
        Some(f) if f.size == size => Ok(f.offset),
        Some(f) => Err(format!(
            "field {name} has size {} (expected {size})",
            f.size
        )),
        None => Err(format!("field {name} is missing")),
    };
    let (prev_pid, prev_state, next_pid) = (
        get("prev_pid", 4)?,
        get("prev_state", 8)?,
        get("next_pid", 4)?,
    );
    Ok(SchedSwitchLayout {
        prev_pid,
        prev_state,
        next_pid,
        preempt_bit: preempt_bit(text)?,
    })
}

/// Parses `field:TYPE NAME; offset:N; size:N;` lines.
pub fn parse_fields(text: &str) -> HashMap<String, Field> {
    let mut fields = HashMap::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("field:"))
    {
        let mut parts = line.split(';').map(str::trim);
        let decl = parts
            .next()
            .unwrap_or_default()
            .trim_start_matches("field:");
        let name = decl.rsplit(' ').next().unwrap_or_default();
        let name = name.split('[').next().unwrap_or(name).to_owned();
        let mut offset = None;
        let mut size = None;
        for part in parts {
            if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        if let (Some(offset), Some(size)) = (offset, size) {
            fields.insert(name, Field { offset, size });
        }
    }
    fields
}

/// The "preempted" flag is the bit above the highest state flag the print format lists
/// (`TASK_REPORT_MAX`): read it rather than assume it, it moved between kernel versions.
fn preempt_bit(text: &str) -> Result<u32, String> {
    let fmt = text.split("print fmt:").nth(1).ok_or("no print fmt")?;
    let highest = fmt
        .split('{')
        .skip(1)
        .filter_map(|entry| {
            let value = entry.split(',').next()?.trim();
            u32::from_str_radix(value.strip_prefix("0x")?, 16).ok()
        })
        .max()
        .ok_or("no state flags in print fmt")?;
    Ok(highest << 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from kernel 6.18 (`/sys/kernel/tracing/events/sched/sched_switch/format`).
    const SCHED_SWITCH_6_18: &str = r#"name: sched_switch
ID: 372
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:char prev_comm[16];	offset:8;	size:16;	signed:0;
	field:pid_t prev_pid;	offset:24;	size:4;	signed:1;
	field:int prev_prio;	offset:28;	size:4;	signed:1;
	field:long prev_state;	offset:32;	size:8;	signed:1;
	field:char next_comm[16];	offset:40;	size:16;	signed:0;
	field:pid_t next_pid;	offset:56;	size:4;	signed:1;
	field:int next_prio;	offset:60;	size:4;	signed:1;

print fmt: "prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), "|", { 0x00000001, "S" }, { 0x00000002, "D" }, { 0x00000004, "T" }, { 0x00000008, "t" }, { 0x00000010, "X" }, { 0x00000020, "Z" }, { 0x00000040, "P" }, { 0x00000080, "I" }) : "R", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio
"#;

    #[test]
    fn reads_sched_switch_offsets_and_preempt_bit() {
        let layout = parse_sched_switch(SCHED_SWITCH_6_18).unwrap();
        assert_eq!(
            layout,
            SchedSwitchLayout {
                prev_pid: 24,
                prev_state: 32,
                next_pid: 56,
                preempt_bit: 0x100,
            }
        );
    }

    #[test]
    fn missing_field_is_named() {
        let broken = SCHED_SWITCH_6_18.replace("next_pid;", "next_tid;");
        let err = parse_sched_switch(&broken).unwrap_err();
        assert!(err.contains("next_pid"), "{err}");
    }

    #[test]
    fn other_kernel_layouts_are_followed() {
        // A 4.x-style record where prev_state is 8 bytes further in and the flags stop at 0x40.
        let shifted = SCHED_SWITCH_6_18
            .replace("offset:32;\tsize:8", "offset:40;\tsize:8")
            .replace(", { 0x00000080, \"I\" }", "");
        let layout = parse_sched_switch(&shifted).unwrap();
        assert_eq!((layout.prev_state, layout.preempt_bit), (40, 0x80));
    }
}
