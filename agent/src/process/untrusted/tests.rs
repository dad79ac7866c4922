//! The opening rules on real files in a directory standing for a process's root. Runs as root (as
//! every test here does), so that refusals come from the rules, not from sonde's own permissions.

use std::{
    fs::File,
    os::unix::fs::{PermissionsExt as _, symlink},
    path::PathBuf,
};

use super::*;

const NOBODY: u32 = 65534;

fn fake_root(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sonde-untrusted-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    dir
}

fn perf_map_rules() -> Rules {
    Rules {
        input: Input::PerfMap,
        symlinks: false,
        owned: true,
        user_readable: true,
        max_bytes: u64::MAX,
    }
}

/// `/tmp/perf-1.map` of `root`, opened on behalf of `owner` by the perf-map rules.
fn open_perf_map(root: &std::path::Path, owner: &Owner) -> Result<File, Refused> {
    open_in_root(
        root,
        "/tmp/perf-1.map".as_ref(),
        Some(owner),
        perf_map_rules(),
    )
}

/// The debug-file rules: links followed inside the root, readable by the process's user.
fn debug_rules(max_bytes: u64) -> Rules {
    Rules {
        input: Input::DebugFile,
        symlinks: true,
        owned: false,
        user_readable: true,
        max_bytes,
    }
}

fn text_of(mut file: File) -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text).unwrap();
    text
}

fn chown(path: &std::path::Path, uid: u32) {
    rustix::fs::chown(path, Some(rustix::fs::Uid::from_raw(uid)), None).unwrap();
}

#[test]
fn a_symlinked_perf_map_is_refused_and_counted() {
    let root = fake_root("symlink");
    let secret = root.join("etc/secret");
    std::fs::write(&secret, "1000 10 SECRET\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    symlink("/etc/secret", root.join("tmp/perf-1.map")).unwrap();
    let owner = Owner::for_test(NOBODY, NOBODY, vec![]);
    let before = refusals::total();
    let err = open_perf_map(&root, &owner).unwrap_err();
    assert!(matches!(err, Refused::Rule(Reason::Symlink)), "{err}");
    assert_eq!(refusals::total(), before + 1);
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let root = fake_root("fifo");
    let fifo = root.join("tmp/perf-1.map");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        FileType::Fifo,
        Mode::from_raw_mode(0o666),
        0,
    )
    .unwrap();
    let owner = Owner::for_test(0, 0, vec![]);
    let err = open_perf_map(&root, &owner).unwrap_err();
    assert!(matches!(err, Refused::Rule(Reason::NotRegular)), "{err}");
}

#[test]
fn another_users_perf_map_is_refused_and_the_own_one_taken() {
    let root = fake_root("owner");
    let map = root.join("tmp/perf-1.map");
    std::fs::write(&map, "1000 10 f\n").unwrap();
    std::fs::set_permissions(&map, std::fs::Permissions::from_mode(0o644)).unwrap();
    chown(&map, 4242);
    let owner = Owner::for_test(NOBODY, NOBODY, vec![]);
    let err = open_perf_map(&root, &owner).unwrap_err();
    assert!(matches!(err, Refused::Rule(Reason::Owner)), "{err}");
    chown(&map, NOBODY);
    assert_eq!(
        text_of(open_perf_map(&root, &owner).unwrap()),
        "1000 10 f\n"
    );
}

#[test]
fn a_file_the_process_user_cannot_read_is_refused() {
    let root = fake_root("mode");
    let file = root.join("etc/debug");
    std::fs::write(&file, "x").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let rules = debug_rules(u64::MAX);
    let nobody = Owner::for_test(NOBODY, NOBODY, vec![]);
    let err = open_in_root(&root, "/etc/debug".as_ref(), Some(&nobody), rules).unwrap_err();
    assert!(matches!(err, Refused::Rule(Reason::Permission)), "{err}");
    // In the file's group it may.
    let member = Owner::for_test(NOBODY, NOBODY, vec![0]);
    assert!(open_in_root(&root, "/etc/debug".as_ref(), Some(&member), rules).is_ok());
    let root_user = Owner::for_test(0, 0, vec![]);
    assert!(open_in_root(&root, "/etc/debug".as_ref(), Some(&root_user), rules).is_ok());
}

#[test]
fn links_resolve_inside_the_root_never_out_of_it() {
    let root = fake_root("inroot");
    std::fs::write(root.join("etc/hostname"), "inside\n").unwrap();
    // Absolute and climbing links both land inside the root.
    symlink("/etc/hostname", root.join("tmp/abs")).unwrap();
    symlink("../../../../../../etc/hostname", root.join("tmp/climb")).unwrap();
    let rules = debug_rules(u64::MAX);
    for link in ["/tmp/abs", "/tmp/climb", "/../../etc/hostname"] {
        let opened = open_in_root(&root, link.as_ref(), None, rules).unwrap();
        assert_eq!(
            text_of(opened),
            "inside
",
            "{link}"
        );
    }
}

#[test]
fn size_bounds_refuse_before_reading() {
    let root = fake_root("size");
    let file = root.join("etc/big");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let rules = debug_rules(1 << 20);
    let err = open_in_root(&root, "/etc/big".as_ref(), None, rules).unwrap_err();
    assert!(matches!(err, Refused::Rule(Reason::TooLarge)), "{err}");
}

#[test]
fn debug_link_names_must_be_plain_file_names() {
    assert!(plain_file_name("libc.so.6.debug"));
    for bad in ["", ".", "..", "../../../etc/shadow", "/etc/shadow", "a/b"] {
        assert!(!plain_file_name(bad), "{bad:?}");
    }
}
