//! The flags of `cargo xtask bench`: which sections run, and each section's span and rounds.

use std::path::PathBuf;

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Measure this sonde binary instead of building one: the previous commit's, to compare before
    /// and after a change in the same conditions.
    #[arg(long, value_name = "PATH")]
    pub(crate) sonde: Option<PathBuf>,
    /// Target wall time of the CPU-bound workload alone, seconds.
    #[arg(long, default_value_t = 20.0)]
    pub(crate) seconds: f64,
    /// Interleaved rounds of the CPU-bound section: every profiler once per round, the order reversed
    /// on odd rounds; each row is the profiler's median run by total cost.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub(crate) cpu_rounds: u64,
    /// Iterations of `perf bench sched pipe` for the off-CPU part: about 15 s alone, so a profiler's
    /// start and its final drain weigh on its cost no more than they do over a long recording.
    #[arg(long, default_value_t = 400_000)]
    pub(crate) pipe_loops: u64,
    /// Interleaved rounds of the context-switch section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 3)]
    pub(crate) offcpu_rounds: usize,
    /// Only the off-CPU sections: the context-switch workload and the CPU-bound one under sonde
    /// offcpu (the CPU-bound workload is still calibrated and timed alone once).
    #[arg(long, conflicts_with = "unwind_only")]
    pub(crate) offcpu_only: bool,
    /// Instead: the daemon benchmark (50 busy processes, `sonde run`) for this many minutes.
    #[arg(long)]
    pub(crate) daemon_minutes: Option<u64>,
    /// Instead: the daemon's footprint over four runtimes (a C loop, python3, a JVM, Node.js), `sonde
    /// run` for this many seconds.
    #[arg(long)]
    pub(crate) footprint_seconds: Option<u64>,
    /// Instead: the daemon benchmark against a real OTLP receiver that is down this many minutes (10
    /// without a value) in the middle of the run (`--daemon-minutes`, default 20); see [`outage`].
    #[arg(long, num_args = 0..=1, default_missing_value = "10")]
    pub(crate) outage_minutes: Option<u64>,
    /// Only the CPU-bound section.
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only"])]
    pub(crate) cpu_only: bool,
    /// Only the unwinding comparison (skips the CPU-bound and off-CPU sections).
    #[arg(long, conflicts_with = "offcpu_only")]
    pub(crate) unwind_only: bool,
    /// Window each profiler records in the unwinding comparison, seconds.
    #[arg(long, default_value_t = 20)]
    pub(crate) unwind_seconds: u64,
    /// Interleaved rounds of the unwinding comparison (per-run numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) unwind_rounds: usize,
    /// Only the symbolization section (skips every other section).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only"])]
    pub(crate) symbols_only: bool,
    /// Window of each recording in the symbolization section, seconds.
    #[arg(long, default_value_t = 5)]
    pub(crate) symbols_seconds: u64,
    /// Interleaved rounds of the symbolization section (per-row numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) symbols_rounds: usize,
    /// Only the scrape-cost section (`sonde run` with 1,000 services, /metrics scraped).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only"])]
    pub(crate) scrape_only: bool,
    /// Run the scrape-cost section with relabel rules (half the services kept, a label mapped):
    /// what rules cost the agent with 1,000 services.
    #[arg(long)]
    pub(crate) scrape_relabel: bool,
    /// Only the Python section (a CPU-bound Python workload alone, under sonde and under py-spy).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only"])]
    pub(crate) python_only: bool,
    /// Timed work of the Python workload in each run of the Python section, seconds.
    #[arg(long, default_value_t = 15)]
    pub(crate) python_seconds: u64,
    /// Interleaved rounds of the Python section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) python_rounds: usize,
    /// Only the Go section (a stripped Go workload under sonde, perf and Go's own profiler).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only"])]
    pub(crate) go_only: bool,
    /// Profiled seconds of each run of the Go section.
    #[arg(long, default_value_t = 10)]
    pub(crate) go_seconds: u64,
    /// Interleaved rounds of the Go section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) go_rounds: usize,
    /// Only the Java section (a JIT-compiled Java workload under sonde, perf with a perf map, JFR).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only"])]
    pub(crate) java_only: bool,
    /// Profiled seconds of each run of the Java section.
    #[arg(long, default_value_t = 10)]
    pub(crate) java_seconds: u64,
    /// Interleaved rounds of the Java section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) java_rounds: usize,
    /// Only the Node.js section (a JIT-compiled JavaScript workload under sonde, perf with a perf map,
    /// V8's own profiler).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only"])]
    pub(crate) node_only: bool,
    /// Profiled seconds of each run of the Node.js section.
    #[arg(long, default_value_t = 8)]
    pub(crate) node_seconds: u64,
    /// Interleaved rounds of the Node.js section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) node_rounds: usize,
    /// Only the short-lived processes section (a gcc build loop under sonde and perf's DWARF mode).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only", "node_only"])]
    pub(crate) build_only: bool,
    /// Recorded seconds of each run of the short-lived processes section.
    #[arg(long, default_value_t = 8)]
    pub(crate) build_seconds: u64,
    /// Interleaved rounds of the short-lived processes section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) build_rounds: usize,
    /// Only the busy-node section (six real programs at once under sonde and perf's DWARF mode).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only", "node_only", "build_only"])]
    pub(crate) busy_only: bool,
    /// Recorded seconds of each run of the busy-node section.
    #[arg(long, default_value_t = 10)]
    pub(crate) busy_seconds: u64,
    /// Interleaved rounds of the busy-node section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 1)]
    pub(crate) busy_rounds: usize,
    /// Only the Ruby section (Debian's ruby3.1 under sonde, rbspy and perf).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only"])]
    pub(crate) ruby_only: bool,
    /// Recorded seconds of each run of the Ruby section.
    #[arg(long, default_value_t = 10)]
    pub(crate) ruby_seconds: u64,
    /// Interleaved rounds of the Ruby section (medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) ruby_rounds: usize,
    /// Only the PHP section (Debian's php8.2 under sonde, and perf with the JIT's perf map).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "ruby_only"])]
    pub(crate) php_only: bool,
    /// Recorded seconds of each run of the PHP section.
    #[arg(long, default_value_t = 10)]
    pub(crate) php_seconds: u64,
    /// Interleaved rounds of the PHP section (medians over rounds).
    #[arg(long, default_value_t = 2)]
    pub(crate) php_rounds: usize,
    /// Only the trace-context section (the cost of reading each sample's span).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only", "node_only", "build_only", "busy_only"])]
    pub(crate) trace_context_only: bool,
    /// Recorded seconds of each run of the trace-context section.
    #[arg(long, default_value_t = 8)]
    pub(crate) trace_context_seconds: u64,
    /// Interleaved rounds of the trace-context section (medians over rounds).
    #[arg(long, default_value_t = 3)]
    pub(crate) trace_context_rounds: usize,
    /// Only the targets section (a dropped process's per-sample kernel cost against a filtered one).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only", "node_only", "build_only"])]
    pub(crate) targets_only: bool,
    /// Measured seconds of each run of the targets section.
    #[arg(long, default_value_t = 10)]
    pub(crate) targets_seconds: u64,
    /// Interleaved rounds of the targets section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 3)]
    pub(crate) targets_rounds: usize,
}
