//! Tests of the BTF reader: hand-built blobs of every kind, malformed blobs, and this kernel's own BTF.

use super::*;

/// Builds a BTF blob type by type, the way the kernel lays it out.
struct Blob {
    types: Vec<u8>,
    strings: Vec<u8>,
    next: u32,
}

impl Blob {
    fn new() -> Self {
        Blob {
            types: Vec::new(),
            strings: vec![0],
            next: 1,
        }
    }

    fn s(&mut self, name: &str) -> u32 {
        if name.is_empty() {
            return 0;
        }
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        off
    }

    /// Appends a type with its kind-specific words; returns its id.
    fn ty(&mut self, name: &str, kind: u32, vlen: u32, size_or_type: u32, data: &[u32]) -> u32 {
        let name_off = self.s(name);
        for w in [name_off, kind << 24 | vlen, size_or_type]
            .iter()
            .chain(data)
        {
            self.types.extend_from_slice(&w.to_ne_bytes());
        }
        self.next += 1;
        self.next - 1
    }

    /// A struct (`kind_flag` set when `kflag`) of `(name, type, offset word)` members.
    fn strukt(&mut self, name: &str, kflag: bool, size: u32, members: &[(&str, u32, u32)]) -> u32 {
        let mut words = Vec::new();
        for (m, ty, off) in members {
            words.extend([self.s(m), *ty, *off]);
        }
        // Bit 7 of the kind byte is bit 31 of `info`: kind_flag.
        let kind = KIND_STRUCT | if kflag { 1 << 7 } else { 0 };
        self.ty(name, kind, members.len() as u32, size, &words)
    }

    fn build(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&BTF_MAGIC.to_ne_bytes());
        out.extend_from_slice(&[BTF_VERSION, 0]);
        let (tl, sl) = (self.types.len() as u32, self.strings.len() as u32);
        for w in [HEADER_LEN as u32, 0, tl, tl, sl] {
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out.extend_from_slice(&self.types);
        out.extend_from_slice(&self.strings);
        out
    }
}

/// Every kind the reader must skip, then `struct task { int pid; u64 arr[4]; thread_t thread; }`
/// where `thread_t` is `typedef const struct thread_s` and `struct thread_s` (kind_flag) is
/// `{ u64 sp; int flag:1 at bit 64; union { __user u64 fsbase; } at bit 128 }`: `thread` is at
/// byte 40 and `fsbase` at byte 16 of it.
fn sample() -> Blob {
    let mut b = Blob::new();
    let u64_ = b.ty("u64", KIND_INT, 0, 8, &[64]);
    let (a, c) = (b.s("a"), b.s("c"));
    b.ty("big", KIND_ENUM64, 2, 8, &[a, 1, 0, c, 2, 0]);
    let x = b.s("x");
    let proto = b.ty("", KIND_FUNC_PROTO, 3, u64_, &[0, u64_, x, u64_, 0, u64_]);
    let arr = b.ty("", KIND_ARRAY, 0, 0, &[u64_, u64_, 4]);
    let var = b.ty("v", KIND_VAR, 0, u64_, &[1]);
    b.ty(".data", KIND_DATASEC, 1, 8, &[var, 0, 8]);
    b.ty("tag", KIND_DECL_TAG, 0, var, &[u32::MAX]);
    let e = b.s("e1");
    b.ty("e", KIND_ENUM, 1, 4, &[e, 3]);
    b.ty("", KIND_PTR, 0, u64_, &[]);
    b.ty("thread_s", 7, 0, 0, &[]); // FWD of the same name: must not be taken for the struct.
    b.ty("f", 12, 0, proto, &[]); // FUNC
    b.ty("double", KIND_FLOAT, 0, 8, &[]);
    let user_u64 = b.ty("user", KIND_TYPE_TAG, 0, u64_, &[]);
    let int = b.ty("int", KIND_INT, 0, 4, &[32]);
    let fsbase = b.s("fsbase");
    let anon = b.ty("", KIND_UNION, 1, 8, &[fsbase, user_u64, 0]);
    let members = [
        ("sp", u64_, 0),
        ("flag", int, 1 << 24 | 64),
        ("", anon, 128),
    ];
    let thread_s = b.strukt("thread_s", true, 24, &members);
    let constant = b.ty("", KIND_CONST, 0, thread_s, &[]);
    let thread_t = b.ty("thread_t", KIND_TYPEDEF, 0, constant, &[]);
    b.strukt(
        "task",
        false,
        64,
        &[("pid", int, 0), ("arr", arr, 64), ("thread", thread_t, 320)],
    );
    let cycle = b.next;
    b.ty("loop", KIND_TYPEDEF, 0, cycle, &[]);
    b.strukt("cyc", false, 8, &[("m", cycle, 0)]);
    b.strukt("bad", false, 8, &[("m", 999, 0)]);
    b
}

/// `(offset, size)` of a member path.
fn at(blob: &[u8], path: &[&str]) -> (u32, u32) {
    let m = layout_of(blob, path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    (m.offset, m.size)
}

/// The error for a member path, as its `Debug` text (variant and fields).
fn error(blob: &[u8], path: &[&str]) -> String {
    format!("{:?}", layout_of(blob, path).unwrap_err())
}

#[test]
fn follows_typedefs_qualifiers_and_anonymous_unions_after_every_kind() {
    let blob = sample().build();
    let fsbase = member_offset_path(&blob, &["task", "thread", "fsbase"]).unwrap();
    assert_eq!(fsbase, 56);
    assert_eq!(at(&blob, &["task", "thread", "fsbase"]), (56, 8));
    assert_eq!(at(&blob, &["task"]), (0, 64));
    assert_eq!(at(&blob, &["task", "arr"]), (8, 32));
    assert_eq!(at(&blob, &["task", "thread"]), (40, 24));
    assert_eq!(at(&blob, &["thread_s", "fsbase"]), (16, 8));
}

#[test]
fn bitfields_and_wrong_paths_are_errors_naming_the_path() {
    let blob = sample().build();
    let cases: [(&[&str], &str); 6] = [
        (
            &["task", "thread", "flag"],
            r#"Unaligned { path: "task.thread.flag", bit_offset: 64 }"#,
        ),
        (
            &["task", "thread", "gsbase"],
            r#"MissingMember { container: "task.thread", member: "gsbase" }"#,
        ),
        (&["task", "pid", "x"], r#"NotAStruct { path: "task.pid" }"#),
        (
            &["task_struct", "thread"],
            r#"MissingStruct { name: "task_struct" }"#,
        ),
        (
            &["cyc", "m", "x"],
            "BadType { what: \"type 20 is at the end of a typedef chain longer than 32\" }",
        ),
        (
            &["bad", "m", "x"],
            "BadType { what: \"type id 999 is not defined (22 types)\" }",
        ),
    ];
    for (path, expected) in cases {
        assert_eq!(error(&blob, path), expected, "{path:?}");
    }
    let message = layout_of(&blob, &["task", "gsbase"])
        .unwrap_err()
        .to_string();
    // What it costs is the caller's to say (the loader appends it); the error names the member.
    assert!(message.contains("gsbase"), "{message}");
}

#[test]
fn truncated_and_foreign_blobs_are_errors_not_panics() {
    let blob = sample().build();
    for len in 0..blob.len() {
        let err = error(&blob[..len], &["task", "thread", "fsbase"]);
        assert!(err.starts_with("Truncated"), "{len} bytes: {err}");
    }
    // The type section ends 4 bytes into the last type's members.
    let mut short = blob.clone();
    let type_len = word(&short, 12).unwrap() - 4;
    short[12..16].copy_from_slice(&type_len.to_ne_bytes());
    assert_eq!(error(&short, &["task"]), r#"Truncated { what: "type 22" }"#);

    let mut wrong = blob.clone();
    wrong[0] ^= 0xff;
    assert!(error(&wrong, &["task"]).starts_with("BadMagic"));
    let mut swapped = blob.clone();
    swapped.swap(0, 1);
    let message = layout_of(&swapped, &["task"]).unwrap_err().to_string();
    assert!(message.contains("other byte order"), "{message}");
    let mut v2 = blob.clone();
    v2[2] = 2;
    assert_eq!(error(&v2, &["task"]), "Version { version: 2 }");

    let mut future = sample();
    future.ty("", 25, 0, 0, &[]);
    assert_eq!(
        error(&future.build(), &["task"]),
        "UnknownKind { id: 23, kind: 25 }"
    );
}

/// The real thing: this machine's kernel BTF (readable by anyone, no root needed).
#[cfg(target_arch = "x86_64")]
#[test]
fn finds_fsbase_in_this_kernels_task_struct() {
    let blob = read_vmlinux().unwrap_or_else(|e| panic!("{e}"));
    let offset =
        word_offset(&blob, &["task_struct", "thread", "fsbase"]).unwrap_or_else(|e| panic!("{e}"));
    let (_, task_size) = at(&blob, &["task_struct"]);
    assert!(offset > 0 && offset.is_multiple_of(8), "offset {offset}");
    assert!(
        offset + 8 <= task_size,
        "offset {offset}, task_struct {task_size} bytes"
    );
    let (thread, _) = at(&blob, &["task_struct", "thread"]);
    assert_eq!(offset, thread + at(&blob, &["thread_struct", "fsbase"]).0);
    eprintln!("task_struct.thread.fsbase at byte {offset} of {task_size}");
}

/// The VMA recording's offsets on this machine's kernel: found, word-aligned, and consistent with the
/// layout every kernel since 2.6 has (`vm_end` right after `vm_start`).
#[cfg(target_arch = "x86_64")]
#[test]
fn finds_the_vma_recordings_members_in_this_kernel() {
    let blob = read_vmlinux().unwrap_or_else(|e| panic!("{e}"));
    let layout = vma_layout(&blob).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(layout.vm_end, layout.vm_start + 8, "{layout:?}");
    for offset in [
        layout.vm_pgoff,
        layout.vm_file,
        layout.vm_flags,
        layout.f_inode,
        layout.i_ino,
        layout.i_sb,
        layout.task_mm,
        layout.mm_start_code,
        layout.task_group_leader,
        layout.task_start_time,
    ] {
        assert!(offset.is_multiple_of(8), "{layout:?}");
    }
    assert!(layout.vm_file > 0 && layout.task_mm > 0, "{layout:?}");
    assert!(
        layout.task_group_leader > 0 && layout.task_start_time > 0,
        "{layout:?}"
    );
    // The tracepoint fields are the loader's to fill.
    assert_eq!((layout.fork_child_pid, layout.mmap_ret), (0, 0));
}

/// [`member_layout`] of a blob, parsed for the one query.
fn layout_of(blob: &[u8], path: &[&str]) -> Result<MemberLayout, BtfError> {
    member_layout(&Btf::parse(blob)?, path)
}
