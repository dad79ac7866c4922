//! Host-wide `sonde record` opens its window once the processes it samples are known: a Node.js
//! process started before sonde has its JavaScript frames named from the window's first sample, as
//! with `--pid`. Before the warm-up (`Sampler::prepare`), the first few hundred milliseconds of such a
//! recording (the process captured, V8's kernel program verified, its tables built) were walked
//! natively: 6-9% of a 2 s recording's main-thread samples held an unnamed JIT frame here.

use crate::common;
use common::{
    host::record_host,
    java::{weight, weight_with},
    node::*,
    read_pprof, require_root, resolve, temp_dir,
};

#[test]
fn a_node_process_started_before_sonde_is_named_from_the_first_sample() {
    require_root();
    let run = NodeRun::start(NODE20, &[], "split.js", &["60", "1"]);
    let pid = run.pid();
    let out = temp_dir("record_warm_up").join("host.pb.gz");
    let summary = record_host("2", &out);
    let samples = resolve(&read_pprof(&out));
    run.finish();
    let main = main_thread(&samples, pid);
    let (all, unnamed) = (weight(&main), weight_with(&main, |f| f == "?"));
    let burners = weight_with(&main, |f| f.starts_with("burn"));
    eprintln!("main thread: {all} samples, {burners} in a burner, {unnamed} with an unnamed frame");
    assert!(
        all > 100 && unnamed * 100 <= all && burners * 100 >= 98 * all,
        "of {all} main-thread samples, {unnamed} hold an unnamed frame and {burners} a burner\n{summary}"
    );
}
