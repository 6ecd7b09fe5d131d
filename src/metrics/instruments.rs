//! The instruments code updates on its paths: [`Histogram`] and [`RecentMax`].
//!
//! Both are lock-free or nearly so and cost a few relaxed atomic operations per observation, so
//! they can sit on the commit path. Values are recorded as integers in a base unit (nanoseconds
//! for durations, a count for sizes); the exposition divides by the instrument's scale.
//! Invariants: a histogram's bucket counts sum to its count; its bounds are strictly increasing;
//! a recent maximum never reports a value older than its window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Bucket bounds for request and commit latencies, in nanoseconds (100 µs … 10 s).
pub const LATENCY_BOUNDS_NS: &[u64] = &[
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Bucket bounds for operations per group commit.
pub const GROUP_SIZE_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096];

/// A histogram with fixed bounds.
pub struct Histogram {
    bounds: &'static [u64],
    /// `bounds.len() + 1` counts: the last one is above every bound.
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
    /// Base units per exported unit (1e9 for seconds from nanoseconds).
    scale: f64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::latency()
    }
}

/// A histogram's figures at one moment, in exported units.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    /// Upper bounds with the cumulative count of observations at or below each.
    pub buckets: Vec<(f64, u64)>,
    /// Observations.
    pub count: u64,
    /// Sum of the observed values.
    pub sum: f64,
}

impl Histogram {
    /// A histogram over `bounds` (strictly increasing, in base units).
    pub fn new(bounds: &'static [u64], scale: f64) -> Histogram {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bounds must increase");
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            scale,
        }
    }

    /// Latencies exported in seconds ([`LATENCY_BOUNDS_NS`]).
    pub fn latency() -> Histogram {
        Histogram::new(LATENCY_BOUNDS_NS, 1e9)
    }

    /// Records one duration.
    pub fn observe_duration(&self, d: Duration) {
        self.observe(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one value in base units.
    pub fn observe(&self, v: u64) {
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
    }

    /// The figures now (read bucket by bucket: a concurrent observation may show in the
    /// buckets and not yet in the sum, never the reverse order of magnitude).
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(self.bounds.len());
        for (b, c) in self.bounds.iter().zip(self.counts.iter()) {
            cumulative += c.load(Ordering::Relaxed);
            buckets.push((*b as f64 / self.scale, cumulative));
        }
        let count = cumulative + self.counts[self.bounds.len()].load(Ordering::Relaxed);
        HistogramSnapshot { buckets, count, sum: self.sum.load(Ordering::Relaxed) as f64 / self.scale }
    }
}

/// Slots of a [`RecentMax`]: the window is between `SLOTS - 1` and `SLOTS` slot widths long.
const SLOTS: usize = 5;

/// The largest value recorded over a sliding window (KurrentDB's "RecentMax" gauges), so a spike
/// between two scrapes still shows. The window spans the last `SLOTS - 1` whole slots and the
/// current one; its label (`range`) says how long that is.
pub struct RecentMax {
    /// Slot width, seconds.
    slot_secs: AtomicU64,
    /// (slot number, max) per slot, indexed by slot number modulo `SLOTS`.
    slots: Mutex<[(u64, u64); SLOTS]>,
}

impl Default for RecentMax {
    fn default() -> RecentMax {
        RecentMax::new(15)
    }
}

/// Slot width for a scrape every `secs` seconds: a quarter of a little more than the interval,
/// so the window always covers one interval.
fn slot_width(secs: u64) -> u64 {
    secs.div_ceil(4).max(1)
}

impl RecentMax {
    /// A window fitting a scrape every `scrape_interval_secs` (0: as fast as possible).
    pub fn new(scrape_interval_secs: u64) -> RecentMax {
        RecentMax {
            slot_secs: AtomicU64::new(slot_width(scrape_interval_secs)),
            slots: Mutex::new([(u64::MAX, 0); SLOTS]),
        }
    }

    /// Resizes the window for a scrape every `secs` seconds (what was recorded is forgotten).
    pub fn set_scrape_interval(&self, secs: u64) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        self.slot_secs.store(slot_width(secs), Ordering::Relaxed);
        *slots = [(u64::MAX, 0); SLOTS];
    }

    /// The `range` label: how far back the window reaches (`"16-20 seconds"` for a 15 s scrape).
    pub fn range(&self) -> String {
        let w = self.slot_secs.load(Ordering::Relaxed);
        format!("{}-{} seconds", w * (SLOTS as u64 - 1), w * SLOTS as u64)
    }

    fn slot_of(&self, now: Duration) -> u64 {
        now.as_secs() / self.slot_secs.load(Ordering::Relaxed).max(1)
    }

    /// Records `v` at monotonic time `now`.
    pub fn record(&self, now: Duration, v: u64) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.slot_of(now);
        let s = &mut slots[(n % SLOTS as u64) as usize];
        if s.0 != n {
            *s = (n, v);
        } else if v > s.1 {
            s.1 = v;
        }
    }

    /// The maximum over the window ending at `now` (0 when nothing was recorded in it).
    pub fn max(&self, now: Duration) -> u64 {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.slot_of(now);
        slots
            .iter()
            .filter(|(slot, _)| *slot <= n && n - *slot < SLOTS as u64)
            .map(|s| s.1)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_each_value_in_the_first_bucket_that_holds_it() {
        let h = Histogram::new(&[10, 20], 10.0);
        for v in [0, 10, 11, 20, 21, 1000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(1.0, 2), (2.0, 4)]);
        assert_eq!(s.count, 6);
        assert_eq!(s.sum, 106.2);
    }

    #[test]
    fn a_recent_max_forgets_values_older_than_its_window() {
        let m = RecentMax::new(15);
        assert_eq!(m.range(), "16-20 seconds");
        let s = Duration::from_secs;
        m.record(s(1), 70);
        m.record(s(9), 30);
        assert_eq!(m.max(s(10)), 70);
        assert_eq!(m.max(s(19)), 70, "slot 0 is still in the window at 19 s");
        assert_eq!(m.max(s(20)), 30, "slot 0 has left the window at 20 s");
        assert_eq!(m.max(s(40)), 0);
        m.record(s(41), 5);
        m.record(s(41), 3);
        assert_eq!(m.max(s(41)), 5);
    }
}
