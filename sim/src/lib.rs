//! Deterministic simulation of Annal nodes under faults (turmoil).
//!
//! A run ([`scenario::run`]) starts one or more node hosts ([`rig`]), each a real node with the
//! simulated Env (`annal::env::sim`: turmoil network and time, inline blocking work, its own
//! in-memory disk with `fault/`'s seeded faults, its own skewed clock), drives each over HTTP from
//! its own simulated clients ([`workload`], [`client`]), carries out each host's fault plan
//! (crashes with torn writes, disk errors, partitions, clock jumps, …; with several hosts also
//! partitions between them) and checks each host's history ([`checker`], one module per
//! invariant): nothing acknowledged is lost, nothing corrupted is served, every stream is
//! linearizable against `annal_model::Model`, the node never panics, and it serves again once the
//! faults are healed. A linearizability search that runs out of its step budget makes the run
//! *inconclusive* (neither a pass nor a failure), which runs and campaigns report. [`campaign`]
//! runs many seeds (the corpus first) and the determinism canary; `annal-sim` is the command line
//! (`--nodes N` for several independent hosts, `--cluster N [--replica]` for one cluster). A
//! single-node run is the simulator's historic run, so old seeds replay unchanged.
//!
//! A cluster run ([`Options::cluster`]) makes its node hosts one cluster: one shared history for
//! every client, clients that follow `307`s to the leader and read with `ES-RequireMaster`,
//! network faults between the members ([`network`]) and kills during elections on top of each
//! host's own faults, and the cluster checkers (one leader per term, nothing published before a
//! leader committed it, a leader after healing, identical committed logs) beside the history
//! checks.
//!
//! The maintenance scenarios ([`Scenario::Backup`], [`Scenario::Redact`], `--scenario`) add to a
//! single-node run backups by the tool's copy logic, each restored into a fresh node and checked,
//! or redactions with every crash state of the switch opened and read ([`maintenance`]).
//!
//! The persistent subscription scenario ([`Scenario::Subs`], one node or a cluster) adds a
//! producer and competing HTTP consumers of one group that ack, nack with every action, time out
//! and vanish, checked by [`checker::subscriptions`] ([`subs`]).
//!
//! The projections scenario ([`Scenario::Projections`], one node or a cluster) runs the system
//! projections and two JavaScript projections while a producer writes streams of a few
//! categories; their output streams, states and emits must hold what the reference folds of the
//! `model` crate compute from the log ([`projections`], [`checker::projections`]).
//!
//! The recovery scenario ([`Scenario::Survivor`], a cluster of three) replaces the hosts' fault
//! plans with seeded rounds of kills and pauses, each ending in a recovery after which a write
//! must be acknowledged ([`survivor`], [`checker::writes_resume`]).
//!
//! A deployed cluster (`--deploy`) finds its members only through a seeded, faulty DNS and has
//! members stopped gracefully and restarted as a rolling restart does ([`deploy`]).
//!
//! Modules: [`scenario`] (one run: options, hosts, schedule, checks), [`rig`] (one node host: its
//! disk, clock, plan, faults), [`workload`] (the clients), [`client`] (HTTP over turmoil),
//! [`history`] (operations and outcomes), [`checker`] (the invariants), [`network`] (faults
//! between cluster members), [`maintenance`] (the backup copier and the redactions), [`subs`] (the subscription
//! scenario's producer, consumers and observations), [`projections`] (the projections
//! scenario's producer and final reads), [`survivor`] (the recovery scenario's rounds), [`shared`] (trace and
//! per-host state of a run), [`panics`] (catching panics), [`campaign`] (seeds, corpus, canary).

// Without its `sim` feature (how the root package's production test build sees it) the crate
// is empty: everything here runs on annal's simulated Env.
#![cfg(feature = "sim")]

pub mod campaign;
pub mod checker;
pub mod client;
pub mod deploy;
pub mod history;
pub mod maintenance;
pub mod network;
pub mod panics;
pub mod projections;
pub mod rig;
pub mod rollover;
pub mod scavenges;
pub mod scenario;
pub mod shared;
pub mod subs;
pub mod survivor;
pub mod workload;

pub use scenario::{run, Options, RunResult, Scenario};
