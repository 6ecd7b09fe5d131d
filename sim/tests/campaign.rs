//! The simulation campaign of `cargo test`: the failing-seed corpus first, then a quick campaign of
//! seeds, the determinism canary, and proof that every test-only bug switch is caught by its seed
//! in `corpus/bugs.txt`. Run it in release mode:
//!
//! ```text
//! cargo test --release -p annal-sim --test campaign -- --nocapture --test-threads 1
//! ```
//!
//! `ANNAL_SIM_SEEDS=N` changes the number of campaign seeds (default 300).

use annal::buggify::Bug;
use annal_sim::campaign::{bug_seeds, meta, swarm, with_corpus};
use annal_sim::Options;

fn jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

#[test]
fn corpus_then_quick_campaign() {
    let n: u64 = std::env::var("ANNAL_SIM_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let seeds = with_corpus(0..n);
    let s = swarm(&seeds, jobs(), Options::quick, |r| {
        if !r.passed() {
            println!("{}", r.report());
        }
    });
    println!(
        "campaign: {} seeds in {:.1} s ({:.1} seeds/s, {:.0}x real time), {} ops, {} inconclusive",
        seeds.len(),
        s.wall.as_secs_f64(),
        seeds.len() as f64 / s.wall.as_secs_f64().max(1e-9),
        s.sim_time.as_secs_f64() / s.wall.as_secs_f64().max(1e-9),
        s.ops,
        s.inconclusive.len()
    );
    if !s.inconclusive.is_empty() {
        println!("{}", s.inconclusive_line());
    }
    let failed: Vec<u64> = s.failed.iter().map(|r| r.options.seed).collect();
    assert!(failed.is_empty(), "failing seeds: {failed:?}");
    println!("{} seeds passed", s.passed);
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
        assert!(table.iter().any(|(x, _, _)| *x == b), "corpus/bugs.txt has no seed for {}", b.name());
    }
    for (bug, seed, what) in table {
        let clean = annal_sim::run(&Options::quick(seed));
        assert!(clean.passed(), "seed {seed} fails without a bug:\n{}", clean.report());
        let r = annal_sim::run(&Options { bugs: vec![bug], ..Options::quick(seed) });
        assert!(!r.passed(), "bug {} is no longer caught by seed {seed} ({what})", bug.name());
        println!("bug {} caught by seed {seed}: {}", bug.name(), r.failures[0].lines().next().unwrap_or(""));
    }
}
