//! The simulation campaign of `cargo test`: the failing-seed corpus first, then a quick campaign of
//! seeds, a few seeds on three node hosts, the determinism canary, and proof that every test-only
//! bug switch is caught by its seed in `corpus/bugs.txt`. Run it in release mode:
//!
//! ```text
//! cargo test --release -p annal-sim --test campaign -- --nocapture --test-threads 1
//! ```
//!
//! `ANNAL_SIM_SEEDS=N` changes the number of campaign seeds (default 300). The root package's
//! `cargo test --features sim` runs a smaller campaign of other seeds (`tests/sim_seeds.rs`).

#![cfg(feature = "sim")]

use annal::buggify::Bug;
use annal_sim::campaign::{bug_seeds, meta, run_and_report, show, with_corpus, with_scenario_corpus};
use annal_sim::{Options, Scenario};

#[test]
fn corpus_then_quick_campaign() {
    let n: u64 = std::env::var("ANNAL_SIM_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let seeds = with_corpus(0..n);
    let s = run_and_report(&seeds, Options::quick);
    show(&s.line("campaign", seeds.len()));
    let failed: Vec<u64> = s.failed.iter().map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "failing seeds: {failed:?}");
    show(&format!("{} seeds passed", s.passed));
}

/// Three node hosts, each with its own disk, clock, faults and clients, checked per host.
#[test]
fn three_node_hosts() {
    let seeds: Vec<u64> = (0..12).collect();
    let s = run_and_report(&seeds, Options::three_nodes);
    show(&s.line("three node hosts", seeds.len()));
    let failed: Vec<u64> = s.failed.iter().map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "failing seeds: {failed:?}");
    // Every host served its own clients and was faulted and healed on its own.
    let r = annal_sim::run(&Options::three_nodes(5));
    for host in ["node1", "node2", "node3"] {
        let lines = |who: &str| r.trace.iter().filter(|l| l.contains(&format!(" {host}.{who}"))).count();
        assert!(lines("c0") > 20, "{host}'s client 0 traced {} operations", lines("c0"));
        assert!(lines("node") >= 2, "{host}'s node booted and stopped");
        assert!(lines("fault") > 0, "{host} was never faulted or healed");
    }
    assert!(r.trace.iter().any(|l| l.contains(" partitioned for ")), "no partition between node hosts");
    assert_eq!(r.plans.len(), 3);
    let lines = meta(&Options::three_nodes(7)).unwrap_or_else(|e| panic!("{e}"));
    assert!(lines > 300, "seed 7 on three hosts traced only {lines} lines");
}

/// The maintenance scenarios: backups restored and checked, redactions with a crash at every
/// step; each replays exactly.
#[test]
fn maintenance_scenarios() {
    let seeds: Vec<u64> = (0..20).collect();
    for scenario in [Scenario::Backup, Scenario::Redact] {
        let s = run_and_report(&seeds, |seed| Options::with_scenario(seed, scenario));
        show(&s.line(&format!("scenario {}", scenario.name()), seeds.len()));
        let failed: Vec<u64> = s.failed.iter().map(|r| r.options.seed).collect();
        assert!(failed.is_empty(), "scenario {}: failing seeds: {failed:?}", scenario.name());
        let r = annal_sim::run(&Options::with_scenario(2, scenario));
        let summary = match scenario {
            Scenario::Backup => "backups: ",
            _ => "redactions: ",
        };
        let line = r.trace.iter().find(|l| l.contains(summary)).cloned().unwrap_or_default();
        assert!(
            !line.contains(" 0 completed") && !line.contains(" 0 attempts") && !line.is_empty(),
            "{line}"
        );
        meta(&Options::with_scenario(3, scenario)).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The certificate rollover on a TLS cluster of three: rolled under load and after healing, bad
/// reloads refused, the intruder kept out; it replays exactly.
#[test]
fn certificate_rollover_scenario() {
    let seeds: Vec<u64> = (0..16).collect();
    let s = run_and_report(&seeds, |seed| Options::with_scenario(seed, Scenario::Certs));
    show(&s.line("scenario certs", seeds.len()));
    let failed: Vec<u64> = s.failed.iter().map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "scenario certs: failing seeds: {failed:?}");
    let r = annal_sim::run(&Options::with_scenario(1, Scenario::Certs));
    let rolled = r.trace.iter().any(|l| l.contains("rolled everywhere after healing; converged"));
    let summary = r.trace.iter().find(|l| l.contains("bad reloads refused")).cloned().unwrap_or_default();
    assert!(rolled && !summary.contains(" 0 reloads") && !summary.contains(" 0 bad"), "{summary}");
    meta(&Options::with_scenario(3, Scenario::Certs)).unwrap_or_else(|e| panic!("{e}"));
}

/// The persistent subscription scenario: its corpus and fresh seeds on one node, a few on a
/// cluster of three; the consumers get messages and answer them; a seed replays exactly.
#[test]
fn subscriptions_scenario() {
    let seeds = with_scenario_corpus(Scenario::Subs, None, 0..20);
    let s = run_and_report(&seeds, |seed| Options::with_scenario(seed, Scenario::Subs));
    show(&s.line("scenario subs", seeds.len()));
    let cluster = with_scenario_corpus(Scenario::Subs, Some(3), 0..4);
    let c =
        run_and_report(&cluster, |seed| Options { scenario: Scenario::Subs, ..Options::cluster(seed, 3) });
    show(&c.line("scenario subs, clusters of three", cluster.len()));
    let failed: Vec<u64> = s.failed.iter().chain(&c.failed).map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "scenario subs: failing seeds: {failed:?}");
    let r = annal_sim::run(&Options::with_scenario(2, Scenario::Subs));
    let line = r.trace.iter().find(|l| l.contains(" subscriptions (")).cloned().unwrap_or_default();
    let count = |what: &str| -> u64 {
        line.split(", ")
            .find_map(|p| {
                p.strip_suffix(what).and_then(|n| n.rsplit(' ').next()).and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    };
    assert!(count(" deliveries") > 50 && count(" parked links") > 0 && count(" checkpoints") > 0, "{line}");
    meta(&Options::with_scenario(3, Scenario::Subs)).unwrap_or_else(|e| panic!("{e}"));
}

/// The projections scenario: its corpus and fresh seeds on one node, a few on a cluster of
/// three; the producer's outputs and the JavaScript projections' states and emits are compared
/// with the reference folds (and there are some); a seed replays exactly.
#[test]
fn projections_scenario() {
    let seeds = with_scenario_corpus(Scenario::Projections, None, 0..16);
    let s = run_and_report(&seeds, |seed| Options::with_scenario(seed, Scenario::Projections));
    show(&s.line("scenario projections", seeds.len()));
    let cluster = with_scenario_corpus(Scenario::Projections, Some(3), 4..8);
    let c = run_and_report(&cluster, |seed| Options {
        scenario: Scenario::Projections,
        ..Options::cluster(seed, 3)
    });
    show(&c.line("scenario projections, clusters of three", cluster.len()));
    let failed: Vec<u64> = s.failed.iter().chain(&c.failed).map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "scenario projections: failing seeds: {failed:?}");
    let r = annal_sim::run(&Options::with_scenario(2, Scenario::Projections));
    let line = r.trace.iter().find(|l| l.contains(" outputs compared in ")).cloned().unwrap_or_default();
    let compared: u64 =
        line.split("; ").nth(1).and_then(|p| p.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(compared > 100 && line.contains(" 0 differing"), "{line}");
    // The JavaScript projections: every producer stream's partition state compared (with events
    // in most), some emitted events, and all equal to the fold.
    let js = r.trace.iter().find(|l| l.contains("projections: JavaScript: ")).cloned().unwrap_or_default();
    let number = |after: &str| -> u64 {
        js.split(after).nth(1).and_then(|p| p.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    assert!(
        number("JavaScript: ") == 10
            && number("(") >= 5
            && number("), ") > 0
            && js.ends_with("all as the fold"),
        "{js}"
    );
    meta(&Options::with_scenario(3, Scenario::Projections)).unwrap_or_else(|e| panic!("{e}"));
}

/// The recovery scenario: a cluster of three through seeded rounds of kills and pauses, a write
/// acknowledged after each recovery; its corpus and fresh seeds pass, rounds ran with their
/// recoveries, and a seed replays exactly.
#[test]
fn recovery_scenario() {
    let seeds = with_scenario_corpus(Scenario::Survivor, None, 0..8);
    let s = run_and_report(&seeds, |seed| Options::with_scenario(seed, Scenario::Survivor));
    show(&s.line("scenario survivor", seeds.len()));
    let failed: Vec<u64> = s.failed.iter().map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "scenario survivor: failing seeds: {failed:?}");
    let r = annal_sim::run(&Options::with_scenario(2, Scenario::Survivor));
    let line = r.trace.iter().find(|l| l.contains(" rounds: [")).cloned().unwrap_or_default();
    let recoveries: u64 =
        line.rsplit("; ").next().and_then(|p| p.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(recoveries >= 2, "{line}");
    meta(&Options::with_scenario(3, Scenario::Survivor)).unwrap_or_else(|e| panic!("{e}"));
}

/// The scavenge scenario: members of a cluster of three, followers as well as the leader, asked
/// for scavenges under faults and once each after healing; every start answered 200 is recorded
/// in the cluster's log, scavenges ran on followers and completed, and a seed replays exactly.
#[test]
fn scavenge_scenario() {
    let seeds = with_scenario_corpus(Scenario::Scavenge, None, 0..12);
    let s = run_and_report(&seeds, |seed| Options::with_scenario(seed, Scenario::Scavenge));
    show(&s.line("scenario scavenge", seeds.len()));
    let failed: Vec<u64> = s.failed.iter().map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "scenario scavenge: failing seeds: {failed:?}");
    let r = annal_sim::run(&Options::with_scenario(2, Scenario::Scavenge));
    let line = r.trace.iter().find(|l| l.contains(" scavenges: ")).cloned().unwrap_or_default();
    let number = |before: &str| -> u64 {
        line.split(before).next().and_then(|p| p.rsplit(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    assert!(number(" on members that did not lead") > 0 && number(" completed") > 0, "{line}");
    meta(&Options::with_scenario(3, Scenario::Scavenge)).unwrap_or_else(|e| panic!("{e}"));
}

/// Deployed clusters of three (`--deploy`): members found only through a DNS whose answers are
/// spoiled now and then, listening on 0.0.0.0 and advertising their names, stopped gracefully
/// (leaders as well as followers) and restarted. Seeds 3, 117 and 189 found the stop checker
/// judging stops a kill had cut short, and 117 a stopping follower elected leader (fixed: a
/// stopping member leaves, and never stands again). Their graceful stops end within the bound,
/// the usual checkers pass, leaders are among those stopped, and a seed replays exactly.
#[test]
fn deploy_runs() {
    let found = [3, 117, 189];
    let seeds: Vec<u64> = found.into_iter().chain((0..10).filter(|s| !found.contains(s))).collect();
    let deployed = |seed| Options { deploy: true, ..Options::cluster(seed, 3) };
    let s = run_and_report(&seeds, deployed);
    show(&s.line("deployed clusters of three", seeds.len()));
    let failed: Vec<u64> = s.failed.iter().map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "deploy: failing seeds: {failed:?}");
    let leaders: usize = (0..10)
        .map(|seed| {
            let r = annal_sim::run(&deployed(seed));
            let line = r.trace.iter().find(|l| l.contains("graceful stops: ")).cloned().unwrap_or_default();
            line.split(" of a leader")
                .next()
                .and_then(|p| p.rsplit('(').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        })
        .sum();
    assert!(leaders > 0, "no leader was stopped gracefully in ten seeds");
    meta(&deployed(4)).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn determinism_canary() {
    for seed in [1, 2, 3] {
        let lines = meta(&Options::quick(seed)).unwrap_or_else(|e| panic!("{e}"));
        assert!(lines > 100, "seed {seed} traced only {lines} lines");
    }
}

#[test]
fn every_bug_switch_is_caught_by_its_seed() {
    let table = bug_seeds();
    for b in Bug::ALL {
        assert!(table.iter().any(|(x, ..)| *x == b), "corpus/bugs.txt has no seed for {}", b.name());
    }
    for (bug, seed, options, what) in table {
        let clean = annal_sim::run(&options);
        assert!(clean.passed(), "seed {seed} fails without a bug:\n{}", clean.report());
        let r = annal_sim::run(&Options { bugs: vec![bug], ..options });
        assert!(!r.passed(), "bug {} is no longer caught by seed {seed} ({what})", bug.name());
        println!("bug {} caught by seed {seed}: {}", bug.name(), r.failures[0].lines().next().unwrap_or(""));
    }
}
