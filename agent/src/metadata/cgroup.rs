//! Container id, pod uid and systemd unit of a process, parsed from `/proc/PID/cgroup`.
//!
//! Handles cgroup v2 (`0::/path`) and v1 (one line per hierarchy, `ID:controllers:/path`) files, the systemd
//! cgroup driver (`kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope`,
//! `crio-<id>.scope`, `docker-<id>.scope`, `libpod-<id>.scope`) and the cgroupfs driver
//! (`/kubepods/burstable/pod<uid>/<id>`, `/docker/<id>`). Container ids are 64 lowercase hex digits.

/// What a cgroup path tells about a process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupInfo {
    /// The container runtime's id (64 hex digits), when the process runs in a container.
    pub container_id: Option<String>,
    /// The Kubernetes pod uid (with dashes), when the process runs in a pod.
    pub pod_uid: Option<String>,
    /// The innermost systemd service unit (`nginx.service`), outside containers.
    pub systemd_unit: Option<String>,
}

/// Prefixes container runtimes put before the id in a systemd scope name.
const SCOPE_PREFIXES: &[&str] = &[
    "cri-containerd-",
    "crio-",
    "docker-",
    "libpod-",
    "containerd-",
];

/// Parses the text of `/proc/PID/cgroup` (recorded files, tests and the fuzzer; the agent reads
/// through `procfs`, see [`from_lines`]). The v2 line wins; v1 lines are tried in order until one names a
/// container (they normally all carry the same path).
pub fn parse(text: &str) -> CgroupInfo {
    from_lines(text.lines().filter_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(_controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        Some((id.parse().ok()?, path))
    }))
}

/// The same from lines already split into (hierarchy id, path), as `procfs` reads them for the agent.
pub fn from_lines<'a>(lines: impl IntoIterator<Item = (u32, &'a str)>) -> CgroupInfo {
    let mut paths: Vec<&str> = Vec::new();
    for (id, path) in lines {
        if id == 0 {
            paths.insert(0, path);
        } else {
            paths.push(path);
        }
    }
    let mut best = CgroupInfo::default();
    for path in paths {
        let info = parse_path(path);
        if info.container_id.is_some() || info.pod_uid.is_some() {
            return info;
        }
        if best.systemd_unit.is_none() {
            best = info;
        }
    }
    best
}

/// Parses one cgroup path.
pub fn parse_path(path: &str) -> CgroupInfo {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let container_id = components.iter().rev().find_map(|c| container_id(c));
    let pod_uid = components.iter().rev().find_map(|c| pod_uid(c));
    let systemd_unit = if container_id.is_some() || pod_uid.is_some() {
        None
    } else {
        components
            .iter()
            .rev()
            .find(|c| c.ends_with(".service"))
            .map(|c| (*c).to_owned())
    };
    CgroupInfo {
        container_id,
        pod_uid,
        systemd_unit,
    }
}

fn container_id(component: &str) -> Option<String> {
    let name = component.strip_suffix(".scope").unwrap_or(component);
    // `crio-conmon-<id>.scope` is CRI-O's monitor process, not the container.
    if name.starts_with("crio-conmon-") {
        return None;
    }
    let id = SCOPE_PREFIXES
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
    is_hex64(id).then(|| id.to_owned())
}

fn pod_uid(component: &str) -> Option<String> {
    let name = component.strip_suffix(".slice").unwrap_or(component);
    // systemd driver: kubepods-burstable-pod<uid_with_underscores>; cgroupfs driver: pod<uid>.
    let start = name.rfind("pod")?;
    if start > 0 && !name[..start].ends_with('-') {
        return None;
    }
    if start > 0 && !name.starts_with("kubepods") {
        return None;
    }
    let uid = name[start + 3..].replace('_', "-");
    is_uid(&uid).then_some(uid)
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_uid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "6f1b3c0f2d6e4b1a9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b";
    const UID: &str = "0f4b2c1e-7d3a-4e5b-9c8d-1a2b3c4d5e6f";
    const UID_: &str = "0f4b2c1e_7d3a_4e5b_9c8d_1a2b3c4d5e6f";

    fn check(text: &str, container: Option<&str>, pod: Option<&str>, unit: Option<&str>) {
        let info = parse(text);
        assert_eq!(
            info.container_id.as_deref(),
            container,
            "container id of {text:?}"
        );
        assert_eq!(info.pod_uid.as_deref(), pod, "pod uid of {text:?}");
        assert_eq!(
            info.systemd_unit.as_deref(),
            unit,
            "systemd unit of {text:?}"
        );
    }

    #[test]
    fn containerd_systemd_driver_v2() {
        let text = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope\n"
        );
        check(&text, Some(ID), Some(UID), None);
    }

    #[test]
    fn guaranteed_qos_pod_systemd_driver() {
        let text =
            format!("0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope\n");
        check(&text, Some(ID), Some(UID), None);
    }

    #[test]
    fn cgroupfs_driver() {
        check(
            &format!("0::/kubepods/burstable/pod{UID}/{ID}\n"),
            Some(ID),
            Some(UID),
            None,
        );
        check(
            &format!("0::/kubepods/besteffort/pod{UID}/{ID}\n"),
            Some(ID),
            Some(UID),
            None,
        );
    }

    #[test]
    fn crio_scope() {
        let text = format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/crio-{ID}.scope\n"
        );
        check(&text, Some(ID), Some(UID), None);
    }

    #[test]
    fn crio_conmon_is_not_the_container() {
        let text = format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/crio-conmon-{ID}.scope\n"
        );
        check(&text, None, Some(UID), None);
    }

    #[test]
    fn docker_scope_and_cgroupfs() {
        check(
            &format!("0::/system.slice/docker-{ID}.scope\n"),
            Some(ID),
            None,
            None,
        );
        check(&format!("0::/docker/{ID}\n"), Some(ID), None, None);
    }

    #[test]
    fn v1_multi_line_file() {
        let text = format!(
            "12:pids:/kubepods/burstable/pod{UID}/{ID}\n\
             11:hugetlb:/kubepods/burstable/pod{UID}/{ID}\n\
             10:memory:/kubepods/burstable/pod{UID}/{ID}\n\
             4:cpu,cpuacct:/kubepods/burstable/pod{UID}/{ID}\n\
             1:name=systemd:/kubepods/burstable/pod{UID}/{ID}\n\
             0::/\n"
        );
        check(&text, Some(ID), Some(UID), None);
    }

    #[test]
    fn v1_docker_lines() {
        let text = format!("13:rdma:/\n12:pids:/docker/{ID}\n1:name=systemd:/docker/{ID}\n");
        check(&text, Some(ID), None, None);
    }

    #[test]
    fn systemd_service_is_the_unit() {
        check(
            "0::/system.slice/nginx.service\n",
            None,
            None,
            Some("nginx.service"),
        );
        check(
            "1:name=systemd:/system.slice/cron.service\n0::/system.slice/cron.service\n",
            None,
            None,
            Some("cron.service"),
        );
    }

    #[test]
    fn user_slices() {
        check(
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/pipewire.service\n",
            None,
            None,
            Some("pipewire.service"),
        );
        // An interactive session is no service: identity falls back to the process name.
        check(
            "0::/user.slice/user-1000.slice/session-3.scope\n",
            None,
            None,
            None,
        );
    }

    #[test]
    fn root_and_garbage() {
        check("0::/\n", None, None, None);
        check("", None, None, None);
        check("not a cgroup line\n", None, None, None);
        // A 64-char component that is not hex is no container id.
        check(
            &format!("0::/docker/{}\n", "z".repeat(64)),
            None,
            None,
            None,
        );
    }
}
