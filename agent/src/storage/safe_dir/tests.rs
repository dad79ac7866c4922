//! The attacks of issue 14 against a [`SafeDir`], one by one. Run as root (the suite does): one case
//! hands a directory to `nobody`.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink};

use std::io::Read as _;

use super::*;

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// Modes come from the data mode, not from the umask (022 here, as on most hosts, and 0 to be sure).
#[test]
fn modes_ignore_the_umask() {
    for umask in [0o022, 0o000] {
        let old = rustix::process::umask(Mode::from_raw_mode(umask));
        let tmp = tempfile::tempdir().unwrap();
        let root = SafeDir::open_root(&tmp.path().join("data"), DataMode::default()).unwrap();
        let sub = root.subdir("profiles").unwrap();
        sub.write_new("a.pb.gz", b"x").unwrap();
        root.append("index.jsonl", b"{}\n").unwrap();
        rustix::process::umask(old);
        assert_eq!(mode_of(&tmp.path().join("data")), 0o700);
        assert_eq!(mode_of(&tmp.path().join("data/profiles")), 0o700);
        assert_eq!(mode_of(&tmp.path().join("data/profiles/a.pb.gz")), 0o600);
        assert_eq!(mode_of(&tmp.path().join("data/index.jsonl")), 0o600);
    }
    let tmp = tempfile::tempdir().unwrap();
    let group: DataMode = "0640".parse().unwrap();
    let root = SafeDir::open_root(&tmp.path().join("data"), group).unwrap();
    root.write_new("f", b"x").unwrap();
    assert_eq!(mode_of(&tmp.path().join("data")), 0o750);
    assert_eq!(mode_of(&tmp.path().join("data/f")), 0o640);
}

#[test]
fn a_planted_directory_symlink_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
    symlink(&elsewhere, tmp.path().join("data")).unwrap();
    let err = SafeDir::open_root(&tmp.path().join("data"), DataMode::default()).unwrap_err();
    assert!(matches!(err, StorageError::Symlink { .. }), "{err}");

    let root = SafeDir::open_root(&tmp.path().join("real"), DataMode::default()).unwrap();
    symlink(&elsewhere, tmp.path().join("real/profiles")).unwrap();
    let err = root.subdir("profiles").unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// A temporary name pointing at a root-owned 0600 file: the file keeps its bytes.
#[test]
fn a_planted_temp_symlink_is_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("shadow");
    std::fs::write(&victim, b"secret").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let root = SafeDir::open_root(&tmp.path().join("data"), DataMode::default()).unwrap();
    let next = TEMP_SEQ.load(Ordering::Relaxed);
    for seq in next..next + 64 {
        let name = format!(".a.pb.gz.{}-{seq}.tmp", std::process::id());
        symlink(&victim, tmp.path().join("data").join(name)).unwrap();
    }
    symlink(&victim, tmp.path().join("data/.a.pb.gz.tmp")).unwrap();
    root.write_new("a.pb.gz", b"profile").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"secret");
    assert_eq!(
        std::fs::read(tmp.path().join("data/a.pb.gz")).unwrap(),
        b"profile"
    );

    // A link planted under the final name is never replaced or appended through either.
    symlink(&victim, tmp.path().join("data/index.jsonl")).unwrap();
    let err = root.append("index.jsonl", b"{}\n").unwrap_err();
    assert!(matches!(err, StorageError::Symlink { .. }), "{err}");
    symlink(&victim, tmp.path().join("data/b.pb.gz")).unwrap();
    assert!(
        root.write_new("b.pb.gz", b"x")
            .unwrap_err()
            .is_already_exists()
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"secret");
    assert!(root.remove_temp_files().unwrap() > 0);
    assert!(
        root.entries()
            .unwrap()
            .iter()
            .all(|e| !e.name.ends_with(".tmp"))
    );
}

#[test]
fn foreign_and_writable_directories_are_refused() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test hands a directory to `nobody` and must run as root"
    );
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let err = SafeDir::open_root(&theirs, DataMode::default()).unwrap_err();
    assert!(
        matches!(err, StorageError::ForeignOwner { owner: 65534, .. }),
        "{err}"
    );

    let open = tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = SafeDir::open_root(&open, DataMode::default()).unwrap_err();
    assert!(
        err.to_string().contains("writable by group and others"),
        "{err}"
    );
    assert_eq!(
        mode_of(&open),
        0o777,
        "a refused directory is left as it was"
    );

    // Ours but merely readable by others (an older sonde made it 0755): narrowed to the data mode.
    let old = tmp.path().join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    SafeDir::open_root(&old, DataMode::default()).unwrap();
    assert_eq!(mode_of(&old), 0o700);
}

#[test]
fn a_fifo_or_directory_under_a_file_name_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = SafeDir::open_root(&tmp.path().join("data"), DataMode::default()).unwrap();
    rfs::mkfifoat(&root.fd, "index.jsonl", Mode::from_raw_mode(0o600)).unwrap();
    let err = root.append("index.jsonl", b"{}\n").unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
    let err = root.open_read("index.jsonl").unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
    root.subdir("d").unwrap();
    assert!(root.open_read("d").is_err());
    assert!(root.subdir("../x").is_err());
}

#[test]
fn truncate_cuts_and_uncommitted_files_vanish() {
    let tmp = tempfile::tempdir().unwrap();
    let root = SafeDir::open_root(&tmp.path().join("data"), DataMode::default()).unwrap();
    root.append("log", b"one\ntw").unwrap();
    root.truncate("log", 4).unwrap();
    let mut text = String::new();
    root.open_read("log")
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "one\n");
    // An uncommitted new file leaves nothing behind.
    let mut f = root.create_new("half").unwrap();
    f.write_all(b"abc").unwrap();
    drop(f);
    let names: Vec<String> = root
        .entries()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec!["log".to_owned()]);
}
