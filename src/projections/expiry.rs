//! When a transient projection expires: `ProjectionsQueryExpiry` after its last access, as v5
//! decides it, and how often the service looks.
//!
//! A transient projection is a query someone runs and reads back; it lives in memory only, and
//! nobody deletes it when done. v5 counts as an access each request that reads or changes one
//! projection: its state, its result, its query, its configuration, a command, an update of its
//! query or configuration. The statistics documents (one projection's or the lists) are not
//! accesses: polling a query's status until it completes keeps it no longer than its reads do.
//!
//! The decision is a pure function of the last access, the clock and the expiry, on the `Env`
//! monotonic clock ([`expired`]); the service sweeps at [`sweep_period`] while any transient
//! projection exists.
//!
//! Invariants: a projection accessed at `t` is never deleted before `t + expiry` (strictly
//! after, as v5); one accessed no more is deleted at most one sweep period after that.

use std::time::Duration;

/// `ProjectionsQueryExpiry`'s default, in minutes (v5's).
pub const QUERY_EXPIRY_DEFAULT_MINUTES: u64 = 5;
/// The default expiry.
pub const QUERY_EXPIRY_DEFAULT: Duration = Duration::from_secs(QUERY_EXPIRY_DEFAULT_MINUTES * 60);
/// The longest time between two sweeps (v5 looks every minute).
pub const SWEEP_PERIOD_MAX: Duration = Duration::from_secs(60);
/// The shortest time between two sweeps (an expiry shorter than this is met this late).
pub const SWEEP_PERIOD_MIN: Duration = Duration::from_millis(10);

/// Whether a transient projection last accessed at `last_access` has expired at `now` (both on
/// the `Env` monotonic clock): more than `expiry` has passed.
pub fn expired(last_access: Duration, now: Duration, expiry: Duration) -> bool {
    now.saturating_sub(last_access) > expiry
}

/// How long the sweep waits between looks for an `expiry`: a tenth of it, within
/// [`SWEEP_PERIOD_MIN`] and [`SWEEP_PERIOD_MAX`], so a projection outlives its expiry by at most
/// a tenth of it (or a minute).
pub fn sweep_period(expiry: Duration) -> Duration {
    (expiry / 10).clamp(SWEEP_PERIOD_MIN, SWEEP_PERIOD_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_strictly_after_the_expiry() {
        let s = Duration::from_secs;
        assert!(!expired(s(100), s(100), s(300)));
        assert!(!expired(s(100), s(400), s(300)), "exactly the expiry is not yet expired");
        assert!(expired(s(100), s(400) + Duration::from_millis(1), s(300)));
        // An access after the sweep read the clock (the clock seen earlier) is never expired.
        assert!(!expired(s(500), s(400), s(300)));
        assert!(expired(s(0), s(10), Duration::ZERO), "a zero expiry ends at the first sweep after");
    }

    #[test]
    fn sweeps_a_tenth_of_the_expiry_within_bounds() {
        assert_eq!(sweep_period(QUERY_EXPIRY_DEFAULT), Duration::from_secs(30));
        assert_eq!(sweep_period(Duration::from_secs(3600)), SWEEP_PERIOD_MAX);
        assert_eq!(sweep_period(Duration::from_millis(500)), Duration::from_millis(50));
        assert_eq!(sweep_period(Duration::ZERO), SWEEP_PERIOD_MIN);
    }
}
