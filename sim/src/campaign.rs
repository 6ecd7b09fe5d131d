//! Campaigns: many seeds over a few threads, the failing-seed corpus, the bug-switch table, and
//! the determinism canary.
//!
//! `corpus/seeds.txt` holds one line per seed that ever failed on the real code
//! (`seed <N> <what it found>`, `seed <N> cluster <K> <what it found>` for a seed of a cluster
//! of K members, `seed <N> [cluster <K>] scenario <name> <what it found>` for a seed of another
//! scenario);
//! campaigns replay those of their kind first. `corpus/bugs.txt` holds, per
//! test-only bug switch, a seed that finds it (`bug <name> seed <N> [cluster <K> | scenario
//! <name>] <which invariant>`). Both are compiled in, so the test campaign needs no file access.
//!
//! Invariant: a seed's result depends only on its [`Options`]; threads share nothing but the
//! counter handing out seeds, so the set of failing seeds does not depend on the thread count.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use annal::buggify::Bug;

use crate::scenario::{run, Options, RunResult, Scenario};

/// The failing-seed corpus.
pub const CORPUS: &str = include_str!("../../corpus/seeds.txt");
/// The bug-switch table.
pub const BUGS: &str = include_str!("../../corpus/bugs.txt");
/// Cluster seeds that fail on the current code and are not fixed yet.
pub const OPEN: &str = include_str!("../../corpus/open-cluster-seeds.txt");

/// The open (known failing, not yet fixed) seeds of clusters: seed and cluster size.
pub fn open_seeds() -> Vec<(u64, usize)> {
    OPEN.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix("seed ")?;
            let (n, what) = rest.split_once(' ')?;
            let (cluster, what) = cluster_prefix(what);
            // A scenario's open seed (`… scenario <name> …`) fails only in that scenario.
            (scenario_prefix(&what).0.is_none()).then_some(())?;
            Some((n.parse().ok()?, cluster?))
        })
        .collect()
}

/// Splits `cluster <K> rest` into `(Some(K), rest)`; anything else is `(None, text)`.
fn cluster_prefix(text: &str) -> (Option<usize>, String) {
    if let Some(rest) = text.strip_prefix("cluster ") {
        let (k, what) = rest.split_once(' ').unwrap_or((rest, ""));
        if let Ok(k) = k.parse() {
            return (Some(k), what.to_owned());
        }
    }
    (None, text.to_owned())
}

/// Seeds of the corpus, with their cluster size (`None`: a single node), the scenario they
/// failed in (`None`: the default one) and what each found.
fn corpus_lines() -> Vec<(u64, Option<usize>, Option<Scenario>, String)> {
    CORPUS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix("seed ")?;
            let (n, what) = rest.split_once(' ').unwrap_or((rest, ""));
            let (cluster, what) = cluster_prefix(what);
            let (scenario, what) = scenario_prefix(&what);
            Some((n.parse().ok()?, cluster, scenario, what))
        })
        .collect()
}

/// Seeds of the corpus found in the default scenario, with their cluster size (`None`: a single
/// node) and what each found.
pub fn corpus_seeds() -> Vec<(u64, Option<usize>, String)> {
    corpus_lines().into_iter().filter(|(_, _, s, _)| s.is_none()).map(|(n, c, _, w)| (n, c, w)).collect()
}

/// The seeds `range`, after the corpus seeds found in `scenario` on clusters of `cluster`
/// members (`None`: on one node) (`seed <N> [cluster <K>] scenario <name> …`; for the default
/// scenario, [`with_corpus_of`]), each once.
pub fn with_scenario_corpus(scenario: Scenario, cluster: Option<usize>, range: Range<u64>) -> Vec<u64> {
    if scenario == Scenario::Faults {
        return with_corpus_of(cluster, range);
    }
    let mut v: Vec<u64> = corpus_lines()
        .into_iter()
        .filter(|(_, c, s, _)| *s == Some(scenario) && *c == cluster)
        .map(|(n, ..)| n)
        .collect();
    v.extend(range.filter(|s| !v.contains(s)).collect::<Vec<_>>());
    v
}

/// Splits `scenario <name> rest` into `(Some(scenario), rest)`; anything else is `(None, text)`.
fn scenario_prefix(text: &str) -> (Option<Scenario>, String) {
    if let Some(rest) = text.strip_prefix("scenario ") {
        let (name, what) = rest.split_once(' ').unwrap_or((rest, ""));
        if let Some(s) = Scenario::parse(name) {
            return (Some(s), what.to_owned());
        }
    }
    (None, text.to_owned())
}

/// The bug-switch table: each switch with a seed that finds it, the options of that seed's run
/// without the bug ([`corpus_options`], or a maintenance scenario's quick run) and the invariant
/// that catches it.
pub fn bug_seeds() -> Vec<(Bug, u64, Options, String)> {
    BUGS.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut w = l.splitn(5, ' ');
            let (b, name, s, n) = (w.next()?, w.next()?, w.next()?, w.next()?);
            (b == "bug" && s == "seed").then_some(())?;
            let seed = n.parse().ok()?;
            let (cluster, what) = cluster_prefix(w.next().unwrap_or(""));
            let (scenario, what) = scenario_prefix(&what);
            let options = match scenario {
                Some(sc) => Options::with_scenario(seed, sc),
                None => corpus_options(seed, cluster),
            };
            Some((Bug::parse(name)?, seed, options, what))
        })
        .collect()
}

/// The options of a corpus or bug-table seed: the quick run, on a cluster of `cluster` members
/// when given.
pub fn corpus_options(seed: u64, cluster: Option<usize>) -> Options {
    match cluster {
        Some(k) => Options::cluster(seed, k),
        None => Options::quick(seed),
    }
}

/// What a campaign found.
#[derive(Debug, Default)]
pub struct Summary {
    /// Seeds that passed every check.
    pub passed: u64,
    /// Runs that failed, by seed.
    pub failed: Vec<RunResult>,
    /// Simulated time of all runs.
    pub sim_time: Duration,
    /// Wall-clock time of the campaign.
    pub wall: Duration,
    /// Client operations of all runs.
    pub ops: u64,
    /// Seeds whose linearizability search ran out of budget on some stream and that passed every
    /// other check (inconclusive: neither a pass nor a failure), ascending.
    pub inconclusive: Vec<u64>,
}

impl Summary {
    /// One line headed `what`: seeds, wall time, seeds/s, ops, passed, failed, inconclusive (and
    /// which seeds were inconclusive).
    pub fn line(&self, what: &str, seeds: usize) -> String {
        let mut s = format!(
            "{what}: {seeds} seeds in {:.1} s ({:.1} seeds/s, {:.0}x real time), {} ops: {} passed, {} failed, {} inconclusive",
            self.wall.as_secs_f64(),
            seeds as f64 / self.wall.as_secs_f64().max(1e-9),
            self.sim_time.as_secs_f64() / self.wall.as_secs_f64().max(1e-9),
            self.ops,
            self.passed,
            self.failed.len(),
            self.inconclusive.len()
        );
        if !self.inconclusive.is_empty() {
            s.push('\n');
            s.push_str(&self.inconclusive_line());
        }
        s
    }

    /// The inconclusive seeds as a line for people (empty when there are none).
    pub fn inconclusive_line(&self) -> String {
        if self.inconclusive.is_empty() {
            return String::new();
        }
        let seeds: Vec<String> = self.inconclusive.iter().map(u64::to_string).collect();
        format!(
            "inconclusive (linearizability search out of budget; neither passed nor failed): seeds {}",
            seeds.join(" ")
        )
    }
}

/// Runs `options(seed)` for every seed in `seeds` on `jobs` threads; `each` sees every result as
/// it finishes.
// Wall-clock timing of the campaign itself (never of a run) is the one use of the real clock here.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
pub fn swarm(
    seeds: &[u64],
    jobs: usize,
    options: impl Fn(u64) -> Options + Sync,
    each: impl Fn(&RunResult) + Sync,
) -> Summary {
    let started = std::time::Instant::now();
    let next = AtomicU64::new(0);
    let out = Mutex::new(Summary::default());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                let Some(&seed) = seeds.get(i) else { break };
                let r = run(&options(seed));
                each(&r);
                let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                o.sim_time += r.sim_time;
                o.ops += r.ops;
                if !r.passed() {
                    o.failed.push(r);
                } else if r.inconclusive.is_empty() {
                    o.passed += 1;
                } else {
                    o.inconclusive.push(r.options.seed);
                }
            });
        }
    });
    let mut o = out.into_inner().unwrap_or_else(|e| e.into_inner());
    o.failed.sort_by_key(|r| r.options.seed);
    o.inconclusive.sort();
    o.wall = started.elapsed();
    o
}

/// Threads for a campaign: one per core.
pub fn jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Runs `seeds` with `options` on [`jobs`] threads, prints (captured by the test harness, so
/// shown when the test fails) the report of every failing seed, and returns the summary. The
/// callers assert on it and show [`Summary::line`].
pub fn run_and_report(seeds: &[u64], options: impl Fn(u64) -> Options + Sync) -> Summary {
    swarm(seeds, jobs(), options, |r| {
        if !r.passed() {
            println!("{}", r.report());
        }
    })
}

/// Writes `line` to the process's standard error directly, past the test harness's capture, so
/// that `cargo test` shows it for a passing test too.
pub fn show(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The seeds `range`, after the single-node corpus seeds (each once).
pub fn with_corpus(range: Range<u64>) -> Vec<u64> {
    with_corpus_of(None, range)
}

/// The seeds `range`, after the corpus seeds of clusters of `cluster` members (`None`: of single
/// nodes), each once; for a cluster, without its open seeds (`corpus/open-cluster-seeds.txt`:
/// known failures not fixed yet, which `annal-sim run` still replays).
pub fn with_corpus_of(cluster: Option<usize>, range: Range<u64>) -> Vec<u64> {
    let open: Vec<u64> =
        open_seeds().into_iter().filter(|(_, c)| Some(*c) == cluster).map(|(s, _)| s).collect();
    let mut v: Vec<u64> =
        corpus_seeds().into_iter().filter(|(_, c, _)| *c == cluster).map(|(s, _, _)| s).collect();
    v.extend(range.filter(|s| !v.contains(s) && !open.contains(s)).collect::<Vec<_>>());
    v
}

/// The determinism canary: runs `opts` twice and compares the traces byte for byte. Returns the
/// number of trace lines, or where the traces first differ.
pub fn meta(opts: &Options) -> Result<usize, String> {
    let a = run(opts);
    let b = run(opts);
    if a.trace == b.trace && a.failures == b.failures {
        return Ok(a.trace.len());
    }
    let i =
        a.trace.iter().zip(&b.trace).position(|(x, y)| x != y).unwrap_or(a.trace.len().min(b.trace.len()));
    Err(format!(
        "seed {} is not deterministic: traces differ at line {i} (of {} and {}):\n  first:  {}\n  second: {}\nfailures: {:?} vs {:?}",
        opts.seed,
        a.trace.len(),
        b.trace.len(),
        a.trace.get(i).map_or("<end>", String::as_str),
        b.trace.get(i).map_or("<end>", String::as_str),
        a.failures,
        b.failures
    ))
}

/// The quick suite the root package's `cargo test --features sim` runs (sized for a debug build
/// on 2 cores: about 40 s there, 3 s in release): the single-node corpus and `ANNAL_SIM_QUICK_SEEDS`
/// fresh seeds (default 40), three seeds on three node hosts, the cluster corpus and
/// `ANNAL_SIM_CLUSTER_SEEDS` fresh seeds on a cluster of three (default 3), and
/// `ANNAL_SIM_MAINTENANCE_SEEDS` seeds (default 4) of the backup, redaction and subscription
/// scenarios. Fresh seeds start at 300, after the long campaign's range. Prints each part's line
/// and every failing seed's report; returns the seeds that ran conclusively, or the failing ones.
pub fn quick_suite() -> Result<u64, Vec<u64>> {
    let env = |name: &str, default: u64| -> u64 {
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    };
    let n = env("ANNAL_SIM_QUICK_SEEDS", 40);
    let seeds = with_corpus(300..300 + n);
    let single = run_and_report(&seeds, Options::quick);
    show(&single.line("simulator: corpus and quick campaign", seeds.len()));
    let three: Vec<u64> = (300..303).collect();
    let multi = run_and_report(&three, Options::three_nodes);
    show(&multi.line("simulator: three node hosts", three.len()));
    let c = env("ANNAL_SIM_CLUSTER_SEEDS", 3);
    let cluster_seeds = with_corpus_of(Some(3), 300..300 + c);
    let cluster = run_and_report(&cluster_seeds, |s| Options::cluster(s, 3));
    show(&cluster.line("simulator: clusters of three (corpus and fresh seeds)", cluster_seeds.len()));
    let m = env("ANNAL_SIM_MAINTENANCE_SEEDS", 4);
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
    if !failed.is_empty() {
        return Err(failed);
    }
    Ok(single.passed + multi.passed + cluster.passed + backups.passed + redactions.passed + subs.passed)
}
