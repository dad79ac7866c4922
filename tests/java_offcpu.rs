//! Off-CPU stacks of a JVM walk Java frames too: `Sleeps` blocks twice as long under
//! `Sleeps.sleepTwenty` as under `Sleeps.sleepTen` (`Thread.sleep`), and sonde's off-CPU profile
//! charges the time to those Java methods 2:1 (±10%).

use crate::common;
use common::{inclusive, java::*, require_root};

#[test]
fn jdk17_blocked_time_is_charged_to_the_java_methods_that_sleep() {
    require_root();
    let jvm = Jvm::start(JDK17, &[], "Sleeps", &["60", "2"]);
    let pid = jvm.pid();
    // Every episode walked: this judges where time is charged, not the sampling estimate.
    let (samples, summary) = record(
        pid,
        "6",
        &["--profile", "offcpu", "--offcpu-budget", "0"],
        "java17_sleeps",
    );
    jvm.finish();
    let twenty = inclusive(&samples, pid, "Sleeps.sleepTwenty", 0) as f64;
    let ten = inclusive(&samples, pid, "Sleeps.sleepTen", 0) as f64;
    eprintln!(
        "sleepTwenty {:.0} ms, sleepTen {:.0} ms\n{summary}",
        twenty / 1e6,
        ten / 1e6
    );
    common::assert_two_to_one(twenty, ten, 4.0e9);
}
