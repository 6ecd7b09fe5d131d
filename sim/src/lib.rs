//! Deterministic simulation of an Annal node under faults (turmoil).
//!
//! A run ([`scenario::run`]) starts a real node with the simulated Env (`annal::env::sim`: turmoil
//! network and time, inline blocking work, an in-memory disk with `fault/`'s seeded faults), drives
//! it over HTTP from several simulated clients ([`workload`], [`client`]), carries out the seed's
//! fault plan (crashes with torn writes, disk errors, partitions, clock jumps, …) and checks the
//! history ([`checker`], one module per invariant): nothing acknowledged is lost, nothing
//! corrupted is served, every stream is linearizable against `annal_model::Model`, the node never
//! panics, and it serves again once the faults are healed. A linearizability search that runs out
//! of its step budget makes the run *inconclusive* (neither a pass nor a failure), which runs and
//! campaigns report. [`campaign`] runs many seeds (the corpus first) and the determinism canary;
//! `annal-sim` is the command line.
//!
//! Modules: [`scenario`] (one run), [`workload`] (the clients), [`client`] (HTTP over turmoil),
//! [`history`] (operations and outcomes), [`checker`] (the invariants), [`shared`] (trace and
//! state of a run), [`panics`] (catching panics), [`campaign`] (seeds, corpus, canary).

pub mod campaign;
pub mod checker;
pub mod client;
pub mod history;
pub mod panics;
pub mod scenario;
pub mod shared;
pub mod workload;

pub use scenario::{run, Options, RunResult};
