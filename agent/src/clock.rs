//! Wall-clock time as profiles, indexes and the spool record it: nanoseconds since the Unix epoch.
//! One definition below every module that stamps or ages something.

use std::time::SystemTime;

/// Nanoseconds since the Unix epoch of `t` (0 before the epoch, a clock set wrong).
pub(crate) fn unix_nanos(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Nanoseconds since the Unix epoch, now.
pub(crate) fn unix_nanos_now() -> i64 {
    unix_nanos(SystemTime::now())
}
