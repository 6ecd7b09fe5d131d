//! Simulator seeds from the repository root: `cargo test --features sim` runs the simulator's
//! quick suite ([`annal_sim::campaign::quick_suite`]: the failing-seed corpus, a quick campaign of
//! fresh seeds, a few seeds on three independent node hosts and on a cluster of three, and a few
//! seeds of each maintenance scenario and of the persistent subscription scenario) and prints
//! `N seeds passed` (past the test harness's capture). The suite lives in the simulator crate
//! (`sim/`), whose own tests (`sim/tests/campaign.rs`, the long campaign) `cargo test --workspace`
//! runs too; the fresh seeds here come after that campaign's range, so a workspace run adds seeds
//! instead of repeating them.
//!
//! Features: plain `cargo test` at the root builds annal without `sim` (the build users run) and
//! this file is empty; `--features sim` (and `cargo test --workspace`, where the simulator crate
//! turns it on) builds it.
#![cfg(feature = "sim")]

#[test]
fn corpus_and_a_quick_campaign_pass() {
    let passed = annal_sim::campaign::quick_suite().unwrap_or_else(|failed| {
        panic!("failing seeds: {failed:?} (each printed its report and replay command above)")
    });
    assert!(passed > 0, "no seed ran conclusively");
    annal_sim::campaign::show(&format!("{passed} seeds passed"));
}
