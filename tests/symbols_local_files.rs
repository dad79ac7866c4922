//! Debug files found without a network:
//! - a `/usr/lib/debug`-style `.build-id` directory given with `--debug-dir`; a debug file of another build
//!   placed under the binary's build id is rejected and counted;
//! - MiniDebugInfo: a `.gnu_debugdata` section (xz-compressed symbol table) added the way Fedora's
//!   `find-debuginfo` does, decompressed in-process.

use crate::common;
use crate::common::debug_files;

use common::*;
use debug_files::*;

const BURNERS: &[&str] = &["burn_fifty", "burn_thirty", "burn_twenty", "main"];

#[test]
fn build_id_directory_names_frames_and_a_wrong_build_is_rejected() {
    require_root();
    let work = temp_dir("symbols_build_id_dir");
    let bin = build_workload("cpu_split", "cpu_split_bid_full", NOFP_FLAGS);
    let split = split_debug(&bin, "cpu_split_bid");
    let workload = Workload::start(&split.stripped, &["60"]);
    let pid = workload.pid();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = work.join("profile.pb.gz");

    let good = work.join("debug-good");
    place_by_build_id(&good, &split.build_id, &split.debug);
    let (summary, _) = record_with_debuginfod(
        pid,
        SPLIT_SECONDS,
        None,
        &["--debug-dir", good.to_str().unwrap()],
        &out,
    );
    let profile = read_pprof(&out);
    BinaryFrames::of(&profile, "cpu_split_bid").assert_named(BURNERS, "cpu_split.c", &summary);
    assert_cpu_split(&resolve(&profile), pid, &summary);
    assert!(
        summary_field(&summary, "debug_files_local") >= 1.0,
        "{summary}"
    );
    assert_eq!(summary_field(&summary, "debug_build_id_mismatches"), 0.0);

    // Another build's debug file (the same source at -O1, so another build id) under this build id.
    let other = build_workload(
        "cpu_split",
        "cpu_split_bid_other",
        &[NOFP_FLAGS, &["-O1"]].concat(),
    );
    let other_split = split_debug(&other, "cpu_split_bid_other_stripped");
    assert_ne!(other_split.build_id, split.build_id);
    let wrong = work.join("debug-wrong");
    place_by_build_id(&wrong, &split.build_id, &other_split.debug);
    let (summary, _) = record_with_debuginfod(
        pid,
        "3",
        None,
        &["--debug-dir", wrong.to_str().unwrap()],
        &out,
    );
    let frames = BinaryFrames::of(&read_pprof(&out), "cpu_split_bid");
    assert_eq!(
        frames.named, 0,
        "another build's symbols were used\n{summary}"
    );
    assert!(
        summary_field(&summary, "debug_build_id_mismatches") >= 1.0,
        "{summary}"
    );
    assert!(
        unsymbolized_top(&summary)
            .starts_with(&format!("{} (build-id mismatch)", split.stripped.display())),
        "{summary}"
    );
    drop(workload);
}

/// Fedora's MiniDebugInfo recipe (gdb manual, "MiniDebugInfo"; `find-debuginfo`'s
/// `add_minidebug`): the function symbols that `.dynsym` lacks, in an otherwise stripped ELF, compressed
/// with xz into the shipped binary's `.gnu_debugdata`.
const MINIDEBUGINFO_RECIPE: &str = r#"
set -eu
bin="$1"; work="$2"
nm -D "$bin" --format=posix --defined-only | awk '{ print $1 }' | sort > "$work/dynsyms"
nm "$bin" --format=posix --defined-only | awk '{ if ($2 == "T" || $2 == "t" || $2 == "D") print $1 }' | sort > "$work/funcsyms"
comm -13 "$work/dynsyms" "$work/funcsyms" > "$work/keep_symbols"
objcopy --only-keep-debug "$bin" "$work/debug"
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols="$work/keep_symbols" "$work/debug" "$work/mini_debuginfo"
rm -f "$work/mini_debuginfo.xz"
xz "$work/mini_debuginfo"
strip --strip-all --remove-section .comment "$bin"
objcopy --add-section .gnu_debugdata="$work/mini_debuginfo.xz" "$bin"
"#;

#[test]
fn minidebuginfo_names_the_functions_of_a_stripped_binary() {
    require_root();
    let work = temp_dir("symbols_minidebuginfo");
    let bin = build_workload("cpu_split", "cpu_split_mini", NOFP_FLAGS);
    tool(
        "sh",
        &[
            "-c",
            MINIDEBUGINFO_RECIPE,
            "minidebuginfo",
            bin.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    let sections = tool("readelf", &["-S", bin.to_str().unwrap()]);
    assert!(sections.contains(".gnu_debugdata") && !sections.contains(".symtab"));
    let workload = Workload::start(&bin, &["60"]);
    let pid = workload.pid();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = work.join("profile.pb.gz");
    let (summary, _) = record_with_debuginfod(pid, SPLIT_SECONDS, None, &[], &out);
    let profile = read_pprof(&out);
    // Names only: MiniDebugInfo carries a symbol table, no line tables.
    let frames = BinaryFrames::of(&profile, "cpu_split_mini");
    assert!(frames.named_ratio() >= 0.95, "{summary}");
    for f in BURNERS {
        assert!(
            frames.symbols.iter().any(|(name, _, _)| name == f),
            "{f} missing: {:?}",
            frames.symbols
        );
    }
    assert_cpu_split(&resolve(&profile), pid, &summary);
    assert!(
        summary_field(&summary, "debug_files_minidebuginfo") >= 1.0,
        "{summary}"
    );
    drop(workload);
}
