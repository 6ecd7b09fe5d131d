//! State shared, on the simulation thread, between the harness, a node host and its client hosts
//! in one run: the run's trace (one for all hosts), and per node host its history (one for all the
//! node hosts of a cluster), the running node and the phase flags.
//!
//! Invariant: everything here is touched only from the one thread that runs the simulation, in
//! the order the simulation runs; that order is a function of the seed, so the trace is too.
//! Trace lines of a node host's parts carry the host's name (`node2.c0`), except in a run of a
//! single node, whose lines are as they always were (`c0`), so old seeds keep their traces.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use annal::node::Node;

use crate::history::History;

/// Microseconds of simulated time now, inside a host (the harness passes its own time).
pub fn now_us() -> u64 {
    turmoil::sim_elapsed().map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// Whether trace lines also go to standard error as they are made (`ANNAL_SIM_LIVE=1`: for a run
/// that hangs, whose trace is otherwise printed only at its end).
fn live() -> bool {
    static LIVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LIVE.get_or_init(|| std::env::var_os("ANNAL_SIM_LIVE").is_some())
}

/// The trace of a run: one line per client operation, fault and node event, with simulated time.
#[derive(Debug, Default)]
pub struct Trace {
    lines: RefCell<Vec<String>>,
}

impl Trace {
    /// Appends a line stamped with `at` (µs).
    pub fn at(&self, at: u64, who: &str, what: impl std::fmt::Display) {
        let line = format!("{:>11.6} {who:<6} {what}", at as f64 / 1e6);
        if live() {
            eprintln!("{line}");
        }
        self.lines.borrow_mut().push(line);
    }

    /// Appends a line stamped with the current host's time.
    pub fn now(&self, who: &str, what: impl std::fmt::Display) {
        self.at(now_us(), who, what)
    }

    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.borrow().clone()
    }

    /// Lines containing `pat`.
    pub fn grep(&self, pat: &str) -> Vec<String> {
        self.lines.borrow().iter().filter(|l| l.contains(pat)).cloned().collect()
    }
}

/// Everything one node host, its clients and the harness share.
#[derive(Default)]
pub struct Shared {
    /// The run's trace (shared by every host of the run).
    pub trace: Rc<Trace>,
    /// The node host's name as trace lines show it: empty in a single-node run.
    pub host: String,
    /// The history (one for every node host of a cluster).
    pub history: Rc<RefCell<History>>,
    /// The running node, once it has opened (cleared when it goes down).
    pub node: RefCell<Option<Arc<Node>>>,
    /// How often the node was started (attempts included).
    pub boots: Cell<u64>,
    /// Set by the harness when every fault is healed and the final checks may begin.
    pub healed: Cell<bool>,
    /// Ids of the final reads (one per stream; one list for every node host of a cluster).
    pub final_reads: Rc<RefCell<Vec<usize>>>,
    /// Operations completed (one count for every node host of a cluster).
    pub ops_done: Rc<Cell<u64>>,
}

impl Shared {
    /// Parts of one node host, writing to `trace`, tagged `host` (empty: untagged).
    pub fn new(trace: Rc<Trace>, host: &str) -> Shared {
        Shared { trace, host: host.to_owned(), ..Shared::default() }
    }

    /// Parts of one node host of a cluster, sharing `other`'s history, final reads and count of
    /// operations (the clients of every node host record into one history).
    pub fn joined(trace: Rc<Trace>, host: &str, other: &Shared) -> Shared {
        Shared {
            trace,
            host: host.to_owned(),
            history: other.history.clone(),
            final_reads: other.final_reads.clone(),
            ops_done: other.ops_done.clone(),
            ..Shared::default()
        }
    }

    /// Appends a trace line by `who` (of this host) at `at` (µs).
    pub fn note(&self, at: u64, who: &str, what: impl std::fmt::Display) {
        if self.host.is_empty() {
            self.trace.at(at, who, what);
        } else {
            self.trace.at(at, &format!("{}.{who}", self.host), what);
        }
    }

    /// Appends a trace line by `who` (of this host), stamped with the current host's time.
    pub fn note_now(&self, who: &str, what: impl std::fmt::Display) {
        self.note(now_us(), who, what)
    }
}
