//! Metrics: what the node measures and `GET /metrics` serves, in Prometheus text or
//! OpenMetrics, under KurrentDB's names or EventStoreDB 23.10/24.10's.
//!
//! - [`instruments`]: histograms and recent maxima that code updates on its paths;
//! - [`lane`]: queue length, queueing and busy time of the node's lanes;
//! - [`text`]: the exposition formats and the two namings;
//! - [`groups`]: which groups are on (`metricsconfig.json` keys);
//! - [`scrape`]: one scrape: every figure read from the services and written out.
//!
//! Most figures already live where they are made (the store's writer figures, the scavenger's
//! progress, a group's counters) and are read at scrape time; [`Metrics`] holds the ones that
//! belong to no service: HTTP request durations, events and bytes served over HTTP, redactions,
//! and the scrape-time memory (when each status was last seen, the replication lag history).
//! Invariants: no label takes a value per stream or per event type (persistent subscription
//! groups and projections are bounded by what operators define); a scrape never blocks a
//! commit (it reads atomics and takes the services' short locks).

pub mod groups;
pub mod instruments;
pub mod lane;
pub mod scrape;
pub mod text;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub use groups::Groups;
use instruments::Histogram;
pub use text::{Format, Naming};

/// What an HTTP request did, for its duration histogram and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// Reading events (stream and `$all` pages, single events).
    Read = 0,
    /// Appending events.
    Append = 1,
}

/// How a measured request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx or 3xx answer.
    Successful = 0,
    /// Any other answer.
    Failed = 1,
}

/// The node-wide figures no service owns (see the module doc).
pub struct Metrics {
    /// The names served.
    pub naming: Naming,
    /// The groups served.
    pub groups: Groups,
    /// HTTP request durations by [`Activity`] and [`Outcome`].
    http: [[Histogram; 2]; 2],
    /// Events served (`Read`) and appended (`Append`) over HTTP.
    http_events: [AtomicU64; 2],
    /// Event bytes (data and metadata) served and appended over HTTP.
    http_bytes: [AtomicU64; 2],
    /// Redactions (chunk switches) that succeeded and failed.
    pub redactions: [AtomicU64; 2],
    /// Open HTTP connections (every listener).
    pub connections: AtomicU64,
    /// Scrape-time memory and the cached last document.
    pub(crate) memory: Mutex<scrape::Memory>,
}

impl Metrics {
    /// Metrics with `naming` and `groups`.
    pub fn new(naming: Naming, groups: Groups) -> Metrics {
        Metrics {
            naming,
            groups,
            http: std::array::from_fn(|_| std::array::from_fn(|_| Histogram::latency())),
            http_events: Default::default(),
            http_bytes: Default::default(),
            redactions: Default::default(),
            connections: AtomicU64::new(0),
            memory: Mutex::new(scrape::Memory::default()),
        }
    }

    /// Records one HTTP request of `activity` that took `took`.
    pub fn request(&self, activity: Activity, outcome: Outcome, took: Duration) {
        self.http[activity as usize][outcome as usize].observe_duration(took);
    }

    /// Counts `events` events of `bytes` bytes read or appended over HTTP.
    pub fn events(&self, activity: Activity, events: u64, bytes: u64) {
        self.http_events[activity as usize].fetch_add(events, Ordering::Relaxed);
        self.http_bytes[activity as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts one redaction's end.
    pub fn redaction(&self, ok: bool) {
        self.redactions[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new(Naming::Kurrent, Groups::default())
    }
}
