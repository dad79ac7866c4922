//! A stripped release binary whose debug file only a debuginfod server has (elfutils' `debuginfod`,
//! started on loopback over a directory holding nothing but the `.debug` file):
//! - without `DEBUGINFOD_URLS`, its frames are addresses and the summary names it the top offender;
//! - with it, its frames get names and file:line, fetched once;
//! - a second run is served by the cache, with no request at all;
//! - a server that accepts and never answers delays the recording by the request timeout at most, and the
//!   binary is reported as a failed fetch.

use crate::common;
use crate::common::debug_files;

use common::*;
use debug_files::*;

const BURNERS: &[&str] = &["burn_fifty", "burn_thirty", "burn_twenty", "main"];

#[test]
fn stripped_binary_is_symbolized_from_debuginfod_then_from_the_cache() {
    require_root();
    let work = temp_dir("symbols_debuginfod");
    let bin = build_workload("cpu_split", "cpu_split_dbgd_full", NOFP_FLAGS);
    let split = split_debug(&bin, "cpu_split_dbgd");
    let served = work.join("served");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::rename(&split.debug, served.join("cpu_split_dbgd.debug")).unwrap();
    let workload = Workload::start(&split.stripped, &["120"]);
    let pid = workload.pid();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = work.join("profile.pb.gz");

    // Without a server: addresses, and the binary named as the top offender.
    let (summary, baseline) = record_with_debuginfod(pid, "3", None, &[], &out);
    let frames = BinaryFrames::of(&read_pprof(&out), "cpu_split_dbgd");
    assert!(frames.total > 100, "{summary}");
    assert_eq!(frames.named, 0, "{summary}");
    let top = unsymbolized_top(&summary);
    assert!(
        top.starts_with(&format!("{} (no debug file)", split.stripped.display())),
        "top offender: {top}"
    );

    // With the server: named, with file:line, fetched once.
    let server = Debuginfod::serve(&served, &split.build_id, &work);
    let cache = work.join("cache");
    let cache_arg = ["--debuginfod-cache-dir", cache.to_str().unwrap()];
    let (summary, _) =
        record_with_debuginfod(pid, SPLIT_SECONDS, Some(&server.url), &cache_arg, &out);
    let profile = read_pprof(&out);
    BinaryFrames::of(&profile, "cpu_split_dbgd").assert_named(BURNERS, "cpu_split.c", &summary);
    assert_cpu_split(&resolve(&profile), pid, &summary);
    assert!(
        summary_field(&summary, "debuginfod_fetched") >= 1.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "debug_files_debuginfod") >= 1.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "debuginfod_downloaded_bytes") > 0.0,
        "{summary}"
    );
    assert_eq!(
        summary_field(&summary, "debuginfod_failures"),
        0.0,
        "{summary}"
    );
    assert!(
        cache
            .join(&split.build_id)
            .join("debuginfo")
            .metadata()
            .is_ok_and(|m| m.len() > 0),
        "the debug file is not in the cache"
    );

    // Second run: the cache answers (the server is gone, so any request would fail).
    drop(server);
    let (summary, _) =
        record_with_debuginfod(pid, "3", Some("http://127.0.0.1:9"), &cache_arg, &out);
    BinaryFrames::of(&read_pprof(&out), "cpu_split_dbgd").assert_named(
        BURNERS,
        "cpu_split.c",
        &summary,
    );
    assert_eq!(
        summary_field(&summary, "debuginfod_requests"),
        0.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "debuginfod_cache_hits") >= 1.0,
        "{summary}"
    );

    // A server that hangs: the recording waits one request timeout at most, and says why.
    let hang_cache = work.join("cache-hang");
    let (summary, took) = record_with_debuginfod(
        pid,
        "3",
        Some(&hanging_server()),
        &[
            "--debuginfod-cache-dir",
            hang_cache.to_str().unwrap(),
            "--debuginfod-timeout",
            "2",
        ],
        &out,
    );
    let delay = took.saturating_sub(baseline);
    eprintln!("baseline {baseline:?}, with a hanging server {took:?}\n{summary}");
    assert!(
        delay < std::time::Duration::from_millis(3500),
        "a hanging server delayed the recording by {delay:?} (timeout 2 s)"
    );
    assert!(
        summary_field(&summary, "debuginfod_failures") >= 1.0,
        "{summary}"
    );
    assert!(
        unsymbolized_top(&summary)
            .starts_with(&format!("{} (debuginfod failed)", split.stripped.display())),
        "{summary}"
    );
    drop(workload);
}
