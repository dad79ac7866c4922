//! Integration tests: offcpu. One test binary per area (each links the whole agent), one module per
//! case; the shared helpers are `crate::common` and its modules.

mod common;

mod offcpu_mutex_wait;
mod offcpu_sampling_budget;
mod offcpu_sampling_storm_split;
mod offcpu_sampling_unbiased;
mod offcpu_sleep_split;
mod offcpu_thread_churn;
