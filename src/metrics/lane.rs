//! Queue length, queueing time and busy time of a node's lanes ([`crate::env::Lane`]).
//!
//! [`Metered`] wraps any lane (real thread, simulated or in-memory), so the figures mean the
//! same under every environment. Invariants: `queued` counts jobs handed to the lane and not
//! yet started; `busy` only grows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::instruments::RecentMax;
use crate::env::{BoxFuture, Clock, Lane};

/// A lane's figures.
pub struct LaneStats {
    /// The lane's name in metrics (`queue` label).
    pub name: &'static str,
    /// Jobs waiting to start.
    pub queued: AtomicU64,
    /// Nanoseconds spent running jobs.
    pub busy_ns: AtomicU64,
    /// Longest wait of a job before it started, recently (nanoseconds).
    pub wait_max: RecentMax,
}

impl LaneStats {
    fn new(name: &'static str) -> LaneStats {
        LaneStats {
            name,
            queued: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            wait_max: RecentMax::new(15),
        }
    }
}

/// A lane that keeps [`LaneStats`].
pub struct Metered {
    inner: Box<dyn Lane>,
    stats: Arc<LaneStats>,
    clock: Arc<dyn Clock>,
}

impl Metered {
    /// Wraps `inner`, named `name` in metrics.
    pub fn new(name: &'static str, inner: Box<dyn Lane>, clock: Arc<dyn Clock>) -> Metered {
        Metered { inner, stats: Arc::new(LaneStats::new(name)), clock }
    }

    /// The figures (shared with the lane).
    pub fn stats(&self) -> Arc<LaneStats> {
        self.stats.clone()
    }
}

impl Lane for Metered {
    fn run(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        let stats = self.stats.clone();
        let clock = self.clock.clone();
        stats.queued.fetch_add(1, Ordering::Relaxed);
        let queued_at = clock.monotonic();
        self.inner.run(Box::new(move || {
            let start = clock.monotonic();
            stats.queued.fetch_sub(1, Ordering::Relaxed);
            let waited = start.saturating_sub(queued_at);
            stats.wait_max.record(start, u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX));
            f();
            let ran = clock.monotonic().saturating_sub(start);
            stats.busy_ns.fetch_add(u64::try_from(ran.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        }))
    }
}

/// `inner` metered as the queue `name`, with its figures.
pub fn metered(
    env: &crate::env::Env,
    name: &'static str,
    inner: Box<dyn Lane>,
) -> (Box<dyn Lane>, Arc<LaneStats>) {
    let lane = Metered::new(name, inner, env.clock.clone());
    let stats = lane.stats();
    (Box::new(lane), stats)
}
