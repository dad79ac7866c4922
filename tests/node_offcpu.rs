//! Off-CPU stacks of Node.js walk JavaScript frames too: `sleeps.js` blocks its main thread twice as
//! long under `sleepTwenty` as under `sleepTen` (Atomics.wait, a futex wait inside V8), and sonde's
//! off-CPU profile charges the time to those functions 2:1 (±10%), through V8's builtin and C++
//! frames, under `main`.

use crate::common;
use common::{java::weight_with, node::*, require_root};

#[test]
fn v8_node20_blocked_time_is_charged_to_the_functions_that_wait() {
    require_root();
    let run = NodeRun::start(NODE20, &[], "sleeps.js", &["60", "1"]);
    let pid = run.pid();
    // Every episode walked: this judges where time is charged, not the sampling estimate.
    let (samples, summary) = record(
        pid,
        "6",
        &["--profile", "offcpu", "--offcpu-budget", "0"],
        "node20_sleeps",
    );
    run.finish();
    let main = main_thread(&samples, pid);
    let twenty = weight_with(&main, |f| f == "sleepTwenty") as f64;
    let ten = weight_with(&main, |f| f == "sleepTen") as f64;
    let under_main = weight_with(&main, |f| f == "main") as f64;
    eprintln!(
        "sleepTwenty {:.0} ms, sleepTen {:.0} ms, under main {:.0} ms\n{summary}",
        twenty / 1e6,
        ten / 1e6,
        under_main / 1e6
    );
    common::assert_two_to_one(twenty, ten, 4.0e9);
    assert!(
        under_main >= 0.9 * (twenty + ten),
        "only {:.0}% of the sleepers' time is under main",
        100.0 * under_main / (twenty + ten)
    );
}
