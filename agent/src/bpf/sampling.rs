//! Off-CPU sampling control: keeps the stack walks of off-CPU tracking within `--offcpu-budget` walks
//! per CPU per second by setting each CPU's tracking probability (`sonde_abi::OffCpuSampling`) from the
//! switch rate just measured on that CPU.
//!
//! The estimator. Each tracked episode carries the inverse of the probability it was tracked with
//! (`SampleKey::weight`, 1 for a long sleeper's next episode, N for a random draw of 1 in N), and the
//! profile's time and event counts are weighted by it. Because the probability is fixed before the
//! episode's length is known, the weighted sum is an unbiased estimate of the true sum (Horvitz-Thompson).
//! Its variance, for a function whose episodes have lengths x_i and probabilities p_i, is
//! Σ x_i² (1 - p_i) / p_i: zero for what is tracked for sure (long blocks), and about (N - 1)·Σ x_i²
//! for storms of short switches, which are many and short, so their relative error shrinks as
//! 1/√(tracked). The profile's `tracked/count` values let `sonde diff` size its noise estimate on the
//! episodes actually walked, not on the estimated event counts.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use aya::maps::{Array, IterableMap as _, Map, MapData, PerCpuArray, PerCpuValues};
use sonde_abi::{OffCpuSampling, PROCESS_SLOTS, ProcessSampling, names, stat};

use super::{BpfError, batch, maps::map_err};

/// Smallest "long" episode: a thread whose tracked episode lasted this long has its next one
/// tracked for sure. Raised while long sleepers alone would overrun the budget.
pub const LONG_NS_MIN: u64 = 5_000_000;
/// Largest "long" threshold.
const LONG_NS_MAX: u64 = 1_000_000_000;
/// Largest inverse probability (the key's weight is 16 bits).
const MAX_ONE_IN: u32 = u16::MAX as u32;
/// Share of the budget the average CPU aims at, so a rising switch rate does not overrun it before
/// the next step.
const AIM: f64 = 0.95;
/// Share of the budget the busiest CPU may reach (threads move between CPUs unevenly).
const BUSIEST: f64 = 1.5;
/// Random-draw walks a CPU may make in a step, relative to what the busiest CPU may reach
/// ([`BUSIEST`]), before the overflow probability applies (a storm that started since the last
/// step). Below that, a process whose threads share one CPU reached the cap within every step and
/// spent the rest of it at the overflow draw, where each walk weighs hundreds of episodes: its
/// estimate swung by ±15%.
const CAP: f64 = 1.2;
/// How much rarer the draw becomes past the cap.
const OVERFLOW_FACTOR: u32 = 64;
/// Delays between steps: fast at first, so the starting guess is corrected within milliseconds,
/// then four times a second (a step reads every process slot; a storm that starts between steps is
/// held by the kernel's per-step cap).
const STEPS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(100),
];
const STEADY_STEP: Duration = Duration::from_millis(250);
/// A process slot's probability is rewritten only when its inverse moves by more than this factor
/// (rates wobble from step to step; rewriting every slot every step cost most of the controller's time).
const HYSTERESIS: f64 = 1.2;

/// The settings that track everything (the unlimited budget, and the start).
pub fn track_all(long_ns: u64) -> OffCpuSampling {
    OffCpuSampling {
        threshold: u32::MAX,
        one_in: 1,
        long_ns,
        cap: u32::MAX,
        overflow_threshold: u32::MAX,
        overflow_one_in: 1,
        tracked: 0,
    }
}

/// What the CPUs saw over the last step, per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// Counted switch-outs, averaged over CPUs.
    pub eligible_mean: f64,
    /// Counted switch-outs of the busiest CPU.
    pub eligible_max: f64,
    /// Episodes tracked for sure (long sleepers), of the CPU with the most.
    pub long_max: f64,
}

/// The settings for the next step of `step` from the last step's `rates`, for `budget` walks per CPU
/// per second.
pub fn next_settings(
    budget: u32,
    rates: Rates,
    current: &OffCpuSampling,
    step: Duration,
) -> OffCpuSampling {
    let budget = f64::from(budget);
    let long = rates.long_max;
    // Long sleepers are few by nature; when they alone approach the budget, fewer threads qualify.
    let long_ns = if long > budget / 2.0 {
        (current.long_ns * 2).min(LONG_NS_MAX)
    } else if long < budget / 8.0 {
        (current.long_ns / 2).max(LONG_NS_MIN)
    } else {
        current.long_ns
    }
    .max(LONG_NS_MIN);
    // What the long sleepers leave, but always a tenth of the budget for the random draw.
    let room = |share: f64| (budget * share - long).max(budget * 0.1);
    let needed = |eligible: f64, share: f64| (eligible - long).max(0.0) / room(share);
    let one_in = needed(rates.eligible_mean, AIM)
        .max(needed(rates.eligible_max, BUSIEST))
        .ceil()
        .clamp(1.0, f64::from(MAX_ONE_IN)) as u32;
    with_one_in(one_in, long_ns, step_cap(budget, step))
}

/// The random-draw walks a CPU may make in a step of `step` before the overflow draw.
fn step_cap(budget: f64, step: Duration) -> u32 {
    (budget * BUSIEST * step.as_secs_f64() * CAP)
        .ceil()
        .max(1.0) as u32
}

/// Each process slot's inverse probability for the next step, from its switch `rates` (per second):
/// a fair share of `total` walks per second each (water-filling: a slot needing less than its share
/// tracks everything and leaves the rest to the others), but never more than `most`: a process's
/// threads may all run on one CPU, whose walks the busiest CPU's limit bounds.
pub fn process_shares(rates: &[f64], total: f64, most: f64) -> Vec<u32> {
    let mut order: Vec<usize> = (0..rates.len()).collect();
    order.sort_by(|a, b| rates[*a].total_cmp(&rates[*b]));
    let mut out = vec![1u32; rates.len()];
    let mut left = total.max(0.0);
    let mut active = rates.iter().filter(|r| **r > 0.0).count();
    for i in order {
        let rate = rates[i];
        if rate <= 0.0 {
            continue;
        }
        let share = (left / active as f64).min(most);
        out[i] = if rate <= share {
            1
        } else {
            (rate / share.max(1e-9))
                .ceil()
                .clamp(1.0, f64::from(MAX_ONE_IN)) as u32
        };
        left -= rate.min(share);
        active -= 1;
    }
    out
}

/// Whether a slot's inverse probability must be rewritten: never written, or moved by more than
/// [`HYSTERESIS`] either way (every change to or from 1 counts: tracking all is exact).
fn moved(written: u32, wanted: u32) -> bool {
    if written == 0 || (written == 1) != (wanted == 1) {
        return true;
    }
    let ratio = f64::from(wanted) / f64::from(written);
    !(1.0 / HYSTERESIS..=HYSTERESIS).contains(&ratio)
}

/// The settings until the first step: track all, up to the first step's share of `budget`.
fn start_settings(budget: u32) -> OffCpuSampling {
    with_one_in(1, LONG_NS_MIN, step_cap(f64::from(budget), STEPS[0]))
}

/// Settings for a fixed inverse probability and per-step cap.
fn with_one_in(one_in: u32, long_ns: u64, cap: u32) -> OffCpuSampling {
    let one_in = one_in.clamp(1, MAX_ONE_IN);
    let overflow = one_in
        .saturating_mul(OVERFLOW_FACTOR)
        .clamp(OVERFLOW_FACTOR, MAX_ONE_IN);
    OffCpuSampling {
        threshold: u32::MAX / one_in,
        one_in,
        long_ns,
        cap,
        overflow_threshold: u32::MAX / overflow,
        overflow_one_in: overflow,
        tracked: 0,
    }
}

/// The inverse probabilities used during a window, over all CPUs and steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplingWindow {
    /// Smallest inverse probability (1: everything tracked).
    pub one_in_min: u32,
    /// Largest inverse probability.
    pub one_in_max: u32,
    /// The "long" threshold at the end of the window, nanoseconds.
    pub long_ns: u64,
}

/// The running controller. Stopping it (or dropping it) leaves the last settings in place.
pub struct Controller {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    window: Arc<Mutex<SamplingWindow>>,
    /// The maps, held open when no thread holds them (an unlimited budget): programs loaded later
    /// carry their descriptors' numbers (`runtime_programs`).
    _idle_maps: Option<SamplingMaps>,
}

/// What the controller needs from the loaded programs.
pub struct SamplingMaps {
    /// `OFFCPU_SAMPLING`.
    pub sampling: PerCpuArray<MapData, OffCpuSampling>,
    /// `OFFCPU_PROCESS_SWITCHES`.
    pub process_switches: PerCpuArray<MapData, u64>,
    /// `OFFCPU_PROCESS_SAMPLING`.
    pub process_sampling: Array<MapData, ProcessSampling>,
    /// A second handle on `STATS` (a duplicated descriptor: the drain owns the first; opening it by id
    /// would need CAP_SYS_ADMIN).
    pub stats: MapData,
}

impl Controller {
    /// Starts adjusting `maps` for `budget` walks per CPU per second (0: unlimited, nothing to do).
    pub fn start(maps: SamplingMaps, budget: u32) -> Result<Self, BpfError> {
        let window = Arc::new(Mutex::new(SamplingWindow {
            one_in_min: 1,
            one_in_max: 1,
            long_ns: LONG_NS_MIN,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        if budget == 0 {
            return Ok(Self {
                stop,
                thread: None,
                window,
                _idle_maps: Some(maps),
            });
        }
        let stats: PerCpuArray<MapData, u64> =
            PerCpuArray::try_from(Map::PerCpuArray(maps.stats)).map_err(map_err(names::STATS))?;
        let mut stepper = Stepper {
            sampling: maps.sampling,
            process_switches: maps.process_switches,
            process_sampling: maps.process_sampling,
            last_processes: None,
            written: Vec::new(),
            stats,
            budget,
            online: aya::util::online_cpus().map_or(1, |c| c.len()),
            possible: aya::util::nr_cpus()
                .map_err(|(path, _)| BpfError::OnlineCpus(path.to_owned()))?,
            last: None,
            window: window.clone(),
        };
        // The counters' starting point. Until the first step has measured the switch rate, every
        // CPU tracks everything up to its cap for that step, then draws 1 in OVERFLOW_FACTOR: a storm
        // running at start is not walked in full, and quiet processes are counted exactly. (A blind
        // 1-in-32 start was unbiased too, but one 20 ms sleep drawn in it weighed 640 ms: a quarter
        // of a 4 s recording's error from a single episode.)
        stepper.baseline()?;
        let start = start_settings(budget);
        let cpus = stepper.cpus();
        stepper.write(&vec![start; cpus])?;
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sonde-offcpu".into())
            .spawn(move || {
                let mut delays = STEPS.iter().copied().chain(std::iter::repeat(STEADY_STEP));
                let mut delay = delays.next().unwrap_or(STEADY_STEP);
                loop {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::park_timeout(delay);
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    delay = delays.next().unwrap_or(STEADY_STEP);
                    if let Err(err) = stepper.step(delay) {
                        tracing::warn!(%err, "adjusting off-CPU sampling failed; the last settings stay");
                    }
                }
            })
            .expect("spawning a thread");
        Ok(Self {
            stop,
            thread: Some(thread),
            window,
            _idle_maps: None,
        })
    }

    /// The probabilities used since the last call; the next window starts from the current ones.
    pub fn take_window(&self) -> SamplingWindow {
        let mut w = self.window.lock().expect("sampling window lock");
        let taken = *w;
        w.one_in_min = w.one_in_max;
        taken
    }

    /// Stops adjusting.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

struct Stepper {
    sampling: PerCpuArray<MapData, OffCpuSampling>,
    process_switches: PerCpuArray<MapData, u64>,
    process_sampling: Array<MapData, ProcessSampling>,
    /// Each process slot's switch counter at the last step.
    last_processes: Option<Vec<u64>>,
    /// Each process slot's inverse probability as written last.
    written: Vec<u32>,
    stats: PerCpuArray<MapData, u64>,
    budget: u32,
    /// Online CPUs (the counters have a value for every possible one).
    online: usize,
    /// Possible CPUs: the per-CPU values each counter has.
    possible: usize,
    /// Counters of each CPU (eligible, long) at the last step, and when.
    last: Option<(Instant, Vec<(u64, u64)>)>,
    window: Arc<Mutex<SamplingWindow>>,
}

impl Stepper {
    /// Each CPU's (eligible, long) counters.
    fn counts(&self) -> Result<Vec<(u64, u64)>, BpfError> {
        let read = |index| self.stats.get(&index, 0).map_err(map_err(names::STATS));
        let (eligible, long) = (
            read(stat::OFFCPU_ELIGIBLE)?,
            read(stat::OFFCPU_TRACKED_LONG)?,
        );
        Ok(eligible.iter().copied().zip(long.iter().copied()).collect())
    }

    fn cpus(&self) -> usize {
        self.last.as_ref().map_or(1, |(_, c)| c.len())
    }

    fn baseline(&mut self) -> Result<(), BpfError> {
        self.last = Some((Instant::now(), self.counts()?));
        self.last_processes = Some(self.process_counts()?);
        Ok(())
    }

    fn process_counts(&self) -> Result<Vec<u64>, BpfError> {
        batch::read_all_summed(
            self.process_switches.map(),
            PROCESS_SLOTS,
            self.possible,
            names::OFFCPU_PROCESS_SWITCHES,
        )
    }

    /// Shares the budget out between process slots by their switch rates over the last step.
    fn share_out(&mut self, seconds: f64, total: f64) -> Result<(u32, u32), BpfError> {
        let counts = self.process_counts()?;
        let before = self
            .last_processes
            .replace(counts.clone())
            .unwrap_or_default();
        let rates: Vec<f64> = counts
            .iter()
            .zip(before.iter().chain(std::iter::repeat(&0)))
            .map(|(now, then)| now.saturating_sub(*then) as f64 / seconds)
            .collect();
        let shares = process_shares(&rates, total, f64::from(self.budget) * BUSIEST);
        if self.written.len() != shares.len() {
            self.written = vec![0; shares.len()];
        }
        let mut changed = false;
        for (written, wanted) in self.written.iter_mut().zip(&shares) {
            if moved(*written, *wanted) {
                *written = *wanted;
                changed = true;
            }
        }
        if changed {
            let values: Vec<ProcessSampling> = self
                .written
                .iter()
                .map(|one_in| ProcessSampling {
                    threshold: u32::MAX / one_in,
                    one_in: *one_in,
                })
                .collect();
            batch::write_all(
                self.process_sampling.map(),
                &values,
                names::OFFCPU_PROCESS_SAMPLING,
            )?;
        }
        let used = shares
            .iter()
            .zip(&rates)
            .filter(|(_, r)| **r > 0.0)
            .map(|(s, _)| *s);
        Ok(used.fold((u32::MAX, 1), |(lo, hi), s| (lo.min(s), hi.max(s))))
    }

    fn write(&mut self, settings: &[OffCpuSampling]) -> Result<(), BpfError> {
        // One value per possible CPU, as read from the counters: the conversion cannot fail.
        let values = PerCpuValues::try_from(settings.to_vec()).expect("one value per possible CPU");
        self.sampling
            .set(0, values, 0)
            .map_err(map_err(names::OFFCPU_SAMPLING))
    }

    /// Sets the probability for the next step, of length `next_step`, from the rates over the last
    /// one. One probability for every CPU: threads move between CPUs, so one CPU's last rate says
    /// little about its next; the average aims at the budget and no CPU may go far above it.
    fn step(&mut self, next_step: Duration) -> Result<(), BpfError> {
        let now = Instant::now();
        let counts = self.counts()?;
        let Some((then, before)) = self.last.replace((now, counts.clone())) else {
            return Ok(());
        };
        let seconds = (now - then).as_secs_f64().max(1e-3);
        let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / seconds;
        let per_cpu: Vec<(f64, f64)> = counts
            .iter()
            .zip(&before)
            .map(|((e, l), (e0, l0))| (rate(*e, *e0), rate(*l, *l0)))
            .collect();
        let online = self.online.max(1) as f64;
        let rates = Rates {
            eligible_mean: per_cpu.iter().map(|(e, _)| e).sum::<f64>() / online,
            eligible_max: per_cpu.iter().map(|(e, _)| *e).fold(0.0, f64::max),
            long_max: per_cpu.iter().map(|(_, l)| *l).fold(0.0, f64::max),
        };
        let current = self
            .sampling
            .get(&0, 0)
            .map_err(map_err(names::OFFCPU_SAMPLING))?;
        let next = next_settings(self.budget, rates, &current[0], next_step);
        let long_total: f64 = per_cpu.iter().map(|(_, l)| l).sum();
        let total = f64::from(self.budget) * online * AIM - long_total;
        let (lo, hi) = self.share_out(seconds, total.max(f64::from(self.budget) * 0.1))?;
        tracing::trace!(
            ?rates,
            one_in = next.one_in,
            lo,
            hi,
            "off-CPU sampling step"
        );
        let mut w = self.window.lock().expect("sampling window lock");
        w.one_in_min = w.one_in_min.min(lo.min(next.one_in));
        w.one_in_max = w.one_in_max.max(hi);
        w.long_ns = next.long_ns;
        drop(w);
        let cpus = counts.len();
        self.write(&vec![next; cpus])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: Duration = STEADY_STEP;

    fn rates(mean: f64, max: f64, long: f64) -> Rates {
        Rates {
            eligible_mean: mean,
            eligible_max: max,
            long_max: long,
        }
    }

    #[test]
    fn a_storm_is_sampled_down_to_the_budget() {
        let start = track_all(LONG_NS_MIN);
        // 30,000 switch-outs per second on each CPU, a 500-walk budget: 1 in 64 keeps 469 walks.
        let s = next_settings(500, rates(30_000.0, 30_000.0, 0.0), &start, STEP);
        assert_eq!(s.one_in, 64);
        assert_eq!(s.threshold, u32::MAX / 64);
        assert!(30_000 / s.one_in <= 475, "within 95% of the budget");
        // The cap is the step's share of what the busiest CPU may reach, with 20% to spare.
        assert_eq!(s.cap, 225);
        assert_eq!(s.overflow_one_in, 64 * OVERFLOW_FACTOR);
    }

    #[test]
    fn the_busiest_cpu_stays_under_one_and_a_half_budgets() {
        // One CPU takes the whole storm: the average alone would allow 1 in 32.
        let s = next_settings(
            500,
            rates(15_000.0, 30_000.0, 0.0),
            &track_all(LONG_NS_MIN),
            STEP,
        );
        assert_eq!(s.one_in, 40);
        assert!(30_000 / s.one_in <= 750, "within 1.5 budgets");
    }

    #[test]
    fn quiet_cpus_track_everything_but_still_cap_a_sudden_storm() {
        let s = next_settings(
            500,
            rates(120.0, 200.0, 10.0),
            &track_all(LONG_NS_MIN),
            STEP,
        );
        assert_eq!((s.one_in, s.threshold), (1, u32::MAX));
        assert_eq!((s.cap, s.overflow_one_in), (225, OVERFLOW_FACTOR));
        assert_eq!(s.overflow_threshold, u32::MAX / OVERFLOW_FACTOR);
    }

    #[test]
    fn long_sleepers_take_their_share_and_raise_the_bar_when_too_many() {
        let start = track_all(LONG_NS_MIN);
        // 200 long-sleeper walks per second of a 500 budget leave 275 for 10,000 other switches.
        let s = next_settings(500, rates(10_200.0, 10_200.0, 200.0), &start, STEP);
        assert_eq!(s.one_in, 37);
        assert_eq!(s.long_ns, LONG_NS_MIN);
        // Long sleepers alone above half the budget: fewer threads count as long.
        let s = next_settings(500, rates(10_400.0, 10_400.0, 400.0), &start, STEP);
        assert_eq!(s.long_ns, 2 * LONG_NS_MIN);
        // ...and back when they are few again, never below the minimum.
        let s = next_settings(500, rates(1_000.0, 1_000.0, 10.0), &s, STEP);
        assert_eq!(s.long_ns, LONG_NS_MIN);
    }

    #[test]
    fn quiet_processes_track_everything_and_storms_share_the_rest() {
        // 1,000 walks a second: two quiet processes need 100 and 50, the storm gets the other 850.
        let shares = process_shares(&[30_000.0, 100.0, 0.0, 50.0], 1_000.0, f64::INFINITY);
        assert_eq!(shares, vec![36, 1, 1, 1]);
        // Two storms split it evenly.
        let shares = process_shares(&[10_000.0, 10_000.0], 1_000.0, f64::INFINITY);
        assert_eq!(shares, vec![20, 20]);
        // Nothing to share: the largest probability the key can carry.
        assert_eq!(process_shares(&[5.0], 0.0, f64::INFINITY), vec![MAX_ONE_IN]);
    }

    #[test]
    fn one_process_gets_no_more_walks_than_one_cpu_may_make() {
        // The test workload's shape: one process, 3,700 switches a second, a 200-walk budget on
        // 2 CPUs (380 walks a second to share), all its threads on one CPU. Its fair share alone
        // gave 1 in 10, 370 walks a second on that CPU, past the step's cap (the rest of every step
        // then went to the 1-in-832 overflow draw).
        let most = 200.0 * BUSIEST;
        let shares = process_shares(&[3_700.0], 380.0, most);
        assert_eq!(shares, vec![13]);
        let walks_per_step = 3_700.0 / 13.0 * STEP.as_secs_f64();
        let cap = step_cap(200.0, STEP);
        assert!(
            walks_per_step * 1.2 < f64::from(cap),
            "{walks_per_step} walks a step against a cap of {cap}"
        );
        // Water-filling goes on: what the capped process leaves goes to the others.
        let shares = process_shares(&[3_700.0, 300.0], 1_000.0, most);
        assert_eq!(shares, vec![13, 1]);
    }

    #[test]
    fn small_moves_are_not_written() {
        assert!(moved(0, 1), "never written");
        assert!(!moved(50, 55));
        assert!(moved(50, 70));
        assert!(moved(50, 40));
        assert!(moved(2, 1), "back to exact counts");
        assert!(moved(1, 2), "from exact counts");
    }

    #[test]
    fn the_start_tracks_everything_up_to_the_first_steps_cap() {
        let s = start_settings(500);
        // Exact counts until the cap: a 20 ms sleep at start weighs 20 ms, not a multiple of it.
        assert_eq!((s.one_in, s.threshold), (1, u32::MAX));
        // 500 walks a second (750 on the busiest CPU), 10 ms to the first step, 20% to spare.
        assert_eq!(s.cap, 9);
        assert_eq!(s.overflow_one_in, OVERFLOW_FACTOR);
        assert_eq!(start_settings(1).cap, 1, "at least one walk");
    }

    #[test]
    fn the_inverse_probability_fits_the_key() {
        let s = next_settings(1, rates(1e9, 1e9, 0.0), &track_all(LONG_NS_MIN), STEP);
        assert_eq!((s.one_in, s.overflow_one_in), (MAX_ONE_IN, MAX_ONE_IN));
    }
}
