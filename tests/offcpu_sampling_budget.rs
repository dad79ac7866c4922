//! The off-CPU budget holds under a context-switch storm: two threads ping-ponging a pipe (tens of
//! thousands of voluntary switches a second) for 4 s inside a recording with the default budget of 500
//! walks per CPU per second. The walks stay within what the controller's rules allow on this many
//! CPUs, and `events/count` estimates the storm's true switch count (getrusage) within ±10%. With a
//! budget of 0 every episode is tracked, each counting once: the exact counts of unsampled tracking.

use crate::common;
use common::*;

/// Runs the storm for 4 s inside a recording of `budget`; returns (summary, events, tracked, truth).
fn storm_under(budget: &str, name: &str) -> (String, f64, f64, f64) {
    let bin = build_workload("pipe_storm", "pipe_storm", FP_FLAGS);
    let storm = std::process::Command::new(&bin)
        .args(["4", "wait"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = storm.id();
    let out = temp_dir(name).join("offcpu.pb.gz");
    let pid_arg = pid.to_string();
    let sonde = start_recording(&[
        "record",
        "--profile",
        "offcpu",
        "--offcpu-budget",
        budget,
        "--duration",
        "6",
        "--pid",
        &pid_arg,
        "--output",
        out.to_str().unwrap(),
        "--summary-json",
        "-",
    ]);
    start_signal(pid);
    let truth = workload_report(storm);
    let summary = sonde.finish();
    let samples = resolve(&read_pprof(&out));
    (
        summary,
        total(&samples, pid, 1) as f64,
        total(&samples, pid, 2) as f64,
        truth["switches"],
    )
}

fn online_cpus() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

#[test]
fn walks_stay_within_the_budget_and_estimate_the_switch_count() {
    require_root();
    let (summary, events, tracked, switches) = storm_under("500", "offcpu_budget");
    // The storm runs 4 s of the 6 s recording; nothing else of its process switches.
    let (budget, cpus) = (500.0, online_cpus());
    let walks_per_s = tracked / 4.0;
    eprintln!(
        "walks/s {walks_per_s:.0} on {cpus} CPUs; estimated {events} switches from {tracked}, true {switches}\n{summary}"
    );
    assert!(
        switches > 20_000.0,
        "the storm made only {switches} switches"
    );
    // The controller's rules (`bpf/sampling.rs`), on any CPU count: the average CPU aims at 95% of
    // the budget and the busiest may reach 150%, so the machine walks at most the budget on every CPU
    // (20% above for the steps' lag), and at least what the tighter rule allows: 95% of the budget
    // on every CPU, or 150% of it on the one CPU a ping-pong of two threads may share (20% below for
    // the same lag and uneven CPUs). Far above the switch rate's needs, it tracks every switch.
    let most = budget * cpus * 1.2;
    let least = 0.8 * (switches / 4.0).min(budget * (0.95 * cpus).min(1.5));
    assert!(
        walks_per_s <= most && walks_per_s >= least,
        "{walks_per_s:.0} walks per second on {cpus} CPUs for a budget of 500 per CPU (expected {least:.0} to {most:.0})"
    );
    assert!(
        (events / switches - 1.0).abs() <= 0.1,
        "estimated {events} switches, true {switches}"
    );
}

#[test]
fn a_budget_of_zero_tracks_every_episode_once() {
    require_root();
    let (summary, events, tracked, switches) = storm_under("0", "offcpu_unlimited");
    eprintln!("{events} events, {tracked} tracked, true {switches}\n{summary}");
    assert_eq!(events, tracked, "unsampled episodes must each count once");
    assert_eq!(
        summary_field(&summary, "offcpu_one_in_max"),
        1.0,
        "{summary}"
    );
    assert_eq!(
        summary_field(&summary, "offcpu_switch_out"),
        summary_field(&summary, "offcpu_eligible"),
        "{summary}"
    );
    // Every switch the storm made, but for episodes under the 1 µs minimum or still pending at the end.
    assert!(
        (events / switches - 1.0).abs() <= 0.02,
        "{events} episodes, true {switches} switches"
    );
}
