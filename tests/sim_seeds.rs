//! Simulator seeds from the repository root: `cargo test --features sim` replays the failing-seed
//! corpus (`corpus/seeds.txt`), a quick campaign of fresh seeds, a few seeds on three independent
//! node hosts, and the cluster corpus plus a few fresh seeds on a cluster of three
//! (`ANNAL_SIM_CLUSTER_SEEDS=N` fresh ones, default 3), and a few seeds of each maintenance
//! scenario, backups and redactions, and of the persistent subscription scenario
//! (`ANNAL_SIM_MAINTENANCE_SEEDS=N`, default 4), through the
//! simulator in `sim/` (annal-sim, a dev-dependency), and prints
//! `N seeds passed` (past the test harness's capture). Sized for debug builds on 2 cores: about
//! 40 s of seeds in debug, 3 s in release.
//!
//! The long campaign (300 seeds, the determinism canary, the bug switches) is
//! `sim/tests/campaign.rs`, which `cargo test --workspace` runs. This file's fresh seeds come
//! after that campaign's range (300 onwards), so a workspace run adds seeds instead of repeating
//! them; only the corpus is replayed by both. `ANNAL_SIM_QUICK_SEEDS=N` changes the number of
//! fresh seeds (default 40).
//!
//! Features: annal-sim depends on annal with `sim`, and cargo unifies features, so every test
//! build of this package that includes the dev-dependencies (`cargo test`, with or without
//! `--features sim`, and `cargo test --workspace`) has `sim` on and runs these seeds. The gate
//! below keeps the file empty in a build that has no `sim`.
#![cfg(feature = "sim")]

use annal_sim::campaign::{run_and_report, show, with_corpus, with_corpus_of};
use annal_sim::{Options, Scenario};

#[test]
fn corpus_and_a_quick_campaign_pass() {
    let n: u64 = std::env::var("ANNAL_SIM_QUICK_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    let seeds = with_corpus(300..300 + n);
    let single = run_and_report(&seeds, Options::quick);
    show(&single.line("simulator: corpus and quick campaign", seeds.len()));
    let three: Vec<u64> = (300..303).collect();
    let multi = run_and_report(&three, Options::three_nodes);
    show(&multi.line("simulator: three node hosts", three.len()));
    let c: u64 = std::env::var("ANNAL_SIM_CLUSTER_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let cluster_seeds = with_corpus_of(Some(3), 300..300 + c);
    let cluster = run_and_report(&cluster_seeds, |s| Options::cluster(s, 3));
    show(&cluster.line("simulator: clusters of three (corpus and fresh seeds)", cluster_seeds.len()));
    let m: u64 = std::env::var("ANNAL_SIM_MAINTENANCE_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let maint: Vec<u64> = (300..300 + m).collect();
    let backups = run_and_report(&maint, |s| Options::with_scenario(s, Scenario::Backup));
    show(&backups.line("simulator: backups restored and checked", maint.len()));
    let redactions = run_and_report(&maint, |s| Options::with_scenario(s, Scenario::Redact));
    show(&redactions.line("simulator: redactions with crashes at every step", maint.len()));
    let subs = run_and_report(&maint, |s| Options::with_scenario(s, Scenario::Subs));
    show(&subs.line("simulator: persistent subscription consumers", maint.len()));
    let failed: Vec<u64> = single
        .failed
        .iter()
        .chain(&multi.failed)
        .chain(&cluster.failed)
        .chain(&backups.failed)
        .chain(&redactions.failed)
        .chain(&subs.failed)
        .map(|r| r.options.seed)
        .collect();
    assert!(
        failed.is_empty(),
        "failing seeds: {failed:?} (each printed its report and replay command above)"
    );
    let passed =
        single.passed + multi.passed + cluster.passed + backups.passed + redactions.passed + subs.passed;
    assert!(passed > 0, "no seed ran conclusively");
    show(&format!("{passed} seeds passed"));
}
