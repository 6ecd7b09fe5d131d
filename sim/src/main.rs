//! `annal-sim`: run one seed, a swarm of seeds, or the determinism canary.
//!
//! ```text
//! annal-sim run   --seed N [options] [--trace]   one seed; prints the trace with --trace
//! annal-sim swarm --seeds A..B [--jobs J] [options]
//! annal-sim meta  --seed N [options]            the seed twice: traces must be byte-identical
//! options: --nodes N (node hosts, each with its own disk, clock, faults and clients; default 1)
//!          --cluster N (N node hosts forming one cluster; 10 s of workload unless --duration
//!          follows) --replica (with --cluster: one more host, a read-only replica)
//!          --duration SECS  --clients N  --hosts N (per node host)  --tick-ms MS
//!          --bug NAME (repeatable)
//!          --scenario faults|backup|redact|certs|subs|projections|survivor|scavenge (backup, redact: one node;
//!          backups by the copy tool, each restored and checked, or redactions with a crash at
//!          every step of the switch; certs: a TLS cluster, of three unless --cluster says
//!          otherwise, whose certificates are rolled under load and after healing; subs: one node
//!          or a cluster, competing consumers of a persistent subscription group; projections:
//!          one node or a cluster running the system projections, checked against a reference
//!          fold; survivor: a cluster of three through rounds of kills and pauses, a write
//!          acknowledged after each recovery; scavenge: a cluster of three whose members, followers
//!          as well as the leader, are asked for scavenges under faults)
//!          --budget STEPS (linearizability search steps per stream)
//!          --standard (60 s, 16 clients: the speed scenario)
//! ```
//!
//! A failing seed prints a one-line replay command and the fault schedule, and the exit code is 1.

use std::process::ExitCode;
use std::time::Duration;

use annal::buggify::Bug;
use annal_sim::campaign;
use annal_sim::{run, Options, Scenario};

struct Args {
    cmd: String,
    seed: u64,
    seeds: (u64, u64),
    jobs: usize,
    trace: bool,
    base: Options,
}

fn parse() -> Result<Args, String> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let cmd = argv.first().cloned().ok_or("usage: annal-sim run|swarm|meta [options] (see --help)")?;
    if cmd == "--help" || cmd == "-h" {
        return Err(HELP.to_owned());
    }
    let mut a = Args { cmd, seed: 0, seeds: (0, 100), jobs: 2, trace: false, base: Options::quick(0) };
    let mut i = 1;
    let val = |i: usize| argv.get(i + 1).cloned().ok_or(format!("{} needs a value", argv[i]));
    let num = |s: String| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
    while i < argv.len() {
        match argv[i].as_str() {
            "--seed" => a.seed = num(val(i)?)?,
            "--seeds" => {
                let v = val(i)?;
                let (x, y) = v.split_once("..").ok_or("--seeds wants A..B")?;
                a.seeds = (num(x.into())?, num(y.into())?);
            }
            "--jobs" => a.jobs = num(val(i)?)? as usize,
            "--duration" => a.base.duration = Duration::from_secs(num(val(i)?)?),
            "--clients" => a.base.clients = num(val(i)?)? as usize,
            "--hosts" => a.base.client_hosts = num(val(i)?)? as usize,
            "--tick-ms" => a.base.tick = Duration::from_millis(num(val(i)?)?),
            "--budget" => a.base.budget = num(val(i)?)?,
            "--nodes" => a.base.nodes = num(val(i)?)?.max(1) as usize,
            "--cluster" => {
                let n = num(val(i)?)?.max(2) as usize;
                let c = Options::cluster(0, n);
                (a.base.nodes, a.base.cluster, a.base.duration) = (n, true, c.duration);
            }
            "--replica" => {
                a.base.replica = true;
                i += 1;
                continue;
            }
            "--deploy" => {
                a.base.deploy = true;
                i += 1;
                continue;
            }
            "--scenario" => {
                let v = val(i)?;
                a.base.scenario = Scenario::parse(&v).ok_or(format!(
                    "unknown scenario {v}; known: faults, backup, redact, certs, subs, projections, survivor, scavenge"
                ))?;
            }
            "--bug" => {
                let v = val(i)?;
                let names: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
                a.base
                    .bugs
                    .push(Bug::parse(&v).ok_or(format!("unknown bug {v}; known: {}", names.join(", ")))?);
            }
            "--standard" => {
                let s = Options::standard(0);
                a.base.duration = s.duration;
                a.base.clients = s.clients;
                i += 1;
                continue;
            }
            "--trace" => {
                a.trace = true;
                i += 1;
                continue;
            }
            other => return Err(format!("unknown argument {other}\n{HELP}")),
        }
        i += 2;
    }
    if a.base.scenario == Scenario::Scavenge {
        // A cluster (of three unless --cluster says otherwise; --replica adds a replica to scavenge).
        if !a.base.cluster {
            let c = Options::cluster(a.base.seed, 3);
            (a.base.nodes, a.base.cluster, a.base.duration) = (3, true, c.duration);
        }
    } else if a.base.scenario == Scenario::Certs {
        if a.base.replica {
            return Err("--scenario certs rolls the members of a cluster (no --replica)".into());
        }
        if !a.base.cluster {
            let c = Options::cluster(a.base.seed, 3);
            (a.base.nodes, a.base.cluster, a.base.duration) = (3, true, c.duration);
        }
    } else if a.base.scenario == Scenario::Survivor {
        if a.base.replica || (a.base.cluster && a.base.nodes != 3) || (!a.base.cluster && a.base.nodes != 1) {
            return Err(
                "--scenario survivor runs a cluster of three (no --replica, --nodes or other sizes)".into()
            );
        }
        if !a.base.cluster {
            let c = Options::with_scenario(a.base.seed, Scenario::Survivor);
            (a.base.nodes, a.base.cluster, a.base.duration) = (3, true, c.duration);
            (a.base.clients, a.base.client_hosts) = (c.clients, c.client_hosts);
        }
    } else if !a.base.scenario.clusters() && (a.base.cluster || a.base.nodes != 1) {
        return Err(format!("--scenario {} runs one node (no --nodes or --cluster)", a.base.scenario.name()));
    }
    if matches!(a.base.scenario, Scenario::Subs | Scenario::Projections)
        && a.base.nodes != 1
        && !a.base.cluster
    {
        return Err(format!(
            "--scenario {} runs one node or a cluster (--cluster N), not --nodes",
            a.base.scenario.name()
        ));
    }
    Ok(a)
}

const HELP: &str = "annal-sim run --seed N [--trace] | swarm --seeds A..B [--jobs J] | meta --seed N
options: --nodes N | --cluster N [--replica] [--deploy] | --scenario faults|backup|redact|certs|subs|projections|survivor|scavenge --duration SECS --clients N --hosts N --tick-ms MS --budget STEPS --bug NAME --standard";

fn ratio(sim: Duration, wall: Duration) -> f64 {
    sim.as_secs_f64() / wall.as_secs_f64().max(1e-9)
}

fn main() -> ExitCode {
    if let Ok(filter) = std::env::var("ANNAL_SIM_LOG") {
        // The nodes' own log lines, for debugging one seed (not part of the trace).
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .without_time()
            .init();
    }
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let opts = |seed: u64| Options { seed, ..a.base.clone() };
    match a.cmd.as_str() {
        "run" => {
            let verdict = std::sync::Mutex::new(String::new());
            let s = campaign::swarm(&[a.seed], 1, opts, |r| {
                *verdict.lock().unwrap_or_else(|e| e.into_inner()) =
                    format!("{} ({} search steps)", r.verdict(), r.check_steps);
            });
            let verdict = verdict.into_inner().unwrap_or_else(|e| e.into_inner());
            let r = s.failed.first();
            let again = a.trace.then(|| run(&opts(a.seed)));
            if let Some(again) = &again {
                for l in &again.trace {
                    println!("{l}");
                }
                println!("checks took {:.2} s of the run's wall time", again.check_wall.as_secs_f64());
            }
            println!(
                "seed {}: {} ops, simulated {:.1} s in {:.2} s wall ({:.0}x real time)",
                a.seed,
                s.ops,
                s.sim_time.as_secs_f64(),
                s.wall.as_secs_f64(),
                ratio(s.sim_time, s.wall)
            );
            match r {
                None => {
                    println!("seed {} {verdict}", a.seed);
                    ExitCode::SUCCESS
                }
                Some(r) => {
                    println!("{}", r.report());
                    ExitCode::FAILURE
                }
            }
        }
        "swarm" => {
            let kind = a.base.cluster.then_some(a.base.nodes);
            let seeds = match a.base.scenario {
                Scenario::Faults => campaign::with_corpus_of(kind, a.seeds.0..a.seeds.1),
                other => campaign::with_scenario_corpus(other, kind, a.seeds.0..a.seeds.1),
            };
            let s = campaign::swarm(&seeds, a.jobs, opts, |r| {
                if !r.passed() {
                    println!("{}", r.report());
                }
            });
            println!(
                "{} seeds, {} ops, simulated {:.0} s in {:.1} s wall: {:.2} seeds/s, {:.0}x real time ({} jobs); \
                 {} inconclusive",
                seeds.len(),
                s.ops,
                s.sim_time.as_secs_f64(),
                s.wall.as_secs_f64(),
                seeds.len() as f64 / s.wall.as_secs_f64().max(1e-9),
                ratio(s.sim_time, s.wall),
                a.jobs,
                s.inconclusive.len()
            );
            if !s.inconclusive.is_empty() {
                println!("{}", s.inconclusive_line());
            }
            let failed: Vec<String> = s.failed.iter().map(|r| r.options.seed.to_string()).collect();
            println!("{} passed, {} failed, {} inconclusive", s.passed, s.failed.len(), s.inconclusive.len());
            if failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                println!("failing seeds: {}", failed.join(" "));
                ExitCode::FAILURE
            }
        }
        "meta" => match campaign::meta(&opts(a.seed)) {
            Ok(n) => {
                println!("seed {}: both runs produced the same trace ({n} lines)", a.seed);
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("{e}");
                ExitCode::FAILURE
            }
        },
        other => {
            eprintln!("unknown command {other}\n{HELP}");
            ExitCode::from(2)
        }
    }
}
