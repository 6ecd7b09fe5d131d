//! `annal-netns`: faults on real Annal processes and a real network, with the history checked.
//!
//! Each run puts one real `annal` node in each of 3 or 5 network namespaces joined by a bridge,
//! runs clients and a subscription consumer on a host of their own, applies a seeded schedule of
//! partitions, packet loss, slow links, pauses, kills, clock jumps and full disks, heals
//! everything, and checks the whole history (see `checks`). Commands:
//!
//! - `annal-netns run --seed N [--nodes 3] [--duration 60] [--clients 6] [--binary PATH] [--out DIR]`
//! - `annal-netns campaign --seeds A..B | --for 60m [--nodes 3,5] [--duration 60] [--out DIR]`
//! - `annal-netns sweep`: removes what crashed runs left behind.
//!
//! Exit status: 0 when every checker passed, 1 when one found an anomaly, 2 on a usage or set-up
//! error. It needs root (network namespaces), `ip`, `iptables` and `tc`; clock jumps need
//! Debian's libfaketime.
//!
//! (A test harness, not node code: it uses the OS's clock, threads and files directly.)

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod checks;
mod hosts;
mod http;
mod nemesis;
mod nodes;
mod plot;
mod report;
mod run;
mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use run::{RunReport, RunSpec};

const USAGE: &str = "usage: annal-netns run --seed N [--nodes 3|5] [--duration SECS] [--clients N] [--binary PATH] [--out DIR] [--bugs NAMES] [--faults LIST]
       annal-netns campaign (--seeds A..B | --for 30m|2h) [--nodes 3,5] [--duration SECS] [--clients N] [--binary PATH] [--out DIR] [--bugs NAMES] [--faults LIST]
       annal-netns sweep";

/// Options shared by `run` and `campaign`.
struct Opts {
    seeds: Option<(u64, u64)>,
    seed: Option<u64>,
    for_secs: Option<u64>,
    nodes: Vec<usize>,
    duration: Duration,
    clients: usize,
    binary: PathBuf,
    out: PathBuf,
    bugs: Option<String>,
    faults: Vec<String>,
}

fn parse_duration(s: &str) -> Option<u64> {
    let (n, mult) = if let Some(h) = s.strip_suffix('h') {
        (h, 3600)
    } else if let Some(m) = s.strip_suffix('m') {
        (m, 60)
    } else {
        (s.strip_suffix('s').unwrap_or(s), 1)
    };
    n.parse::<u64>().ok().map(|n| n * mult)
}

fn default_binary() -> PathBuf {
    // Beside this binary (target/<profile>/), as cargo builds them.
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("annal")))
        .unwrap_or_else(|| PathBuf::from("annal"))
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        seeds: None,
        seed: None,
        for_secs: None,
        nodes: vec![3],
        duration: Duration::from_secs(60),
        clients: 6,
        binary: default_binary(),
        out: PathBuf::from("target/netns"),
        bugs: None,
        faults: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--seed" => o.seed = Some(val()?.parse().map_err(|_| "--seed takes a number")?),
            "--seeds" => {
                let v = val()?;
                let (a, b) = v.split_once("..").ok_or("--seeds takes A..B")?;
                o.seeds = Some((
                    a.parse().map_err(|_| "--seeds takes A..B")?,
                    b.parse().map_err(|_| "--seeds takes A..B")?,
                ));
            }
            "--for" => o.for_secs = Some(parse_duration(&val()?).ok_or("--for takes 30m, 2h or seconds")?),
            "--nodes" => {
                o.nodes = val()?
                    .split(',')
                    .map(|n| n.parse().ok().filter(|n| *n == 3 || *n == 5))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or("--nodes takes 3, 5 or 3,5")?;
            }
            "--duration" => {
                let secs = parse_duration(&val()?)
                    .filter(|s| *s >= 20)
                    .ok_or("--duration takes at least 20 seconds")?;
                o.duration = Duration::from_secs(secs);
            }
            "--clients" => {
                o.clients =
                    val()?.parse().ok().filter(|c| (1..=64).contains(c)).ok_or("--clients takes 1..64")?
            }
            "--binary" => o.binary = PathBuf::from(val()?),
            "--out" => o.out = PathBuf::from(val()?),
            "--bugs" => o.bugs = Some(val()?),
            "--faults" => {
                o.faults = val()?.split(',').map(str::to_owned).collect();
                if let Some(bad) = o.faults.iter().find(|f| !nemesis::NAMES.contains(&f.as_str())) {
                    return Err(format!("--faults: no fault {bad:?} (one of {})", nemesis::NAMES.join(", ")));
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(o)
}

fn spec(o: &Opts, seed: u64, nodes: usize) -> RunSpec {
    RunSpec {
        seed,
        nodes,
        duration: o.duration,
        clients: o.clients,
        binary: o.binary.clone(),
        node_args: Vec::new(),
        node_env: o.bugs.iter().map(|b| ("NODE_BUG_SWITCHES".to_owned(), b.clone())).collect(),
        out: run::out_dir(&o.out, seed, nodes),
        faults: o.faults.clone(),
    }
}

/// Runs one spec and writes its report; prints the verdict.
fn one(s: &RunSpec) -> Result<RunReport, String> {
    let started = Instant::now();
    let r = run::run(s)?;
    report::write_run(&r)?;
    let ((wo, wf, wu), (ro, _, _)) = report::counts(&r);
    println!(
        "seed {} on {} nodes: {} in {:.0} s; {} faults; appends {wo} ok, {wf} failed, {wu} unknown; {ro} reads; report {}",
        s.seed,
        s.nodes,
        if r.passed() { "passed" } else { "FAILED" },
        started.elapsed().as_secs_f64(),
        r.applied.len(),
        s.out.join("report.md").display()
    );
    for (name, found) in r.anomalies.iter().filter(|(_, a)| !a.is_empty()) {
        println!("  {name}: {} anomalies", found.len());
        for f in found.iter().take(3) {
            println!("    {}", f.lines().next().unwrap_or_default());
        }
    }
    Ok(r)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("sweep") => {
            for r in hosts::sweep() {
                println!("removed {r}");
            }
            0
        }
        // For the harness's own tests: creates a network, proves a node host reachable from the
        // clients' host over the bridge, says so, and holds it until killed.
        Some("hold-network") => match hold_network(args.get(1).and_then(|n| n.parse().ok()).unwrap_or(3)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{e}");
                2
            }
        },
        Some(cmd @ ("run" | "campaign")) => match parse(&args[1..]) {
            Err(e) => {
                eprintln!("{e}\n{USAGE}");
                2
            }
            Ok(o) => {
                if let Some(why) = hosts::missing_prerequisites() {
                    eprintln!("annal-netns cannot run here: {why}");
                    std::process::exit(2);
                }
                if !o.binary.exists() {
                    eprintln!("no annal binary at {} (build it, or pass --binary)", o.binary.display());
                    std::process::exit(2);
                }
                if cmd == "run" {
                    run_cmd(&o)
                } else {
                    campaign_cmd(&o)
                }
            }
        },
        _ => {
            eprintln!("{USAGE}");
            2
        }
    };
    std::process::exit(code);
}

fn hold_network(nodes: usize) -> Result<(), String> {
    let net = hosts::Net::create(nodes, "h")?;
    let addr = format!("{}:7", net.hosts[0].ip);
    let bind = addr.clone();
    let listener = hosts::in_ns(&net.hosts[0].ns, move || std::net::TcpListener::bind(bind))?
        .map_err(|e| format!("listening on {addr}: {e}"))?;
    hosts::in_ns(&net.clients, move || {
        std::net::TcpStream::connect_timeout(&addr.parse().expect("an address"), Duration::from_secs(5))
    })?
    .map_err(|e| format!("the clients' host cannot reach node 0: {e}"))?;
    drop(listener);
    println!("reachable");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn run_cmd(o: &Opts) -> i32 {
    let Some(seed) = o.seed else {
        eprintln!("run needs --seed\n{USAGE}");
        return 2;
    };
    match one(&spec(o, seed, o.nodes[0])) {
        Ok(r) if r.passed() => 0,
        Ok(_) => 1,
        Err(e) => {
            eprintln!("seed {seed}: the run could not be carried out: {e}");
            2
        }
    }
}

fn campaign_cmd(o: &Opts) -> i32 {
    let started = Instant::now();
    let seeds: Box<dyn Iterator<Item = u64>> = match (o.seeds, o.for_secs) {
        (Some((a, b)), _) => Box::new(a..b),
        (None, Some(_)) => {
            let base = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() * 1000)
                .unwrap_or(0);
            Box::new(base..)
        }
        (None, None) => {
            eprintln!("campaign needs --seeds or --for\n{USAGE}");
            return 2;
        }
    };
    let _ = std::fs::create_dir_all(&o.out);
    let mut runs = Vec::new();
    let mut errors = 0;
    for (k, seed) in seeds.enumerate() {
        if o.for_secs.is_some_and(|f| started.elapsed() >= Duration::from_secs(f)) {
            break;
        }
        let nodes = o.nodes[k % o.nodes.len()];
        match one(&spec(o, seed, nodes)) {
            Ok(r) => runs.push(r),
            Err(e) => {
                errors += 1;
                eprintln!("seed {seed}: the run could not be carried out: {e}");
            }
        }
        let _ = report::write_summary(&o.out, &runs, started.elapsed().as_secs_f64());
    }
    let failed = runs.iter().filter(|r| !r.passed()).count();
    println!(
        "campaign: {} runs, {failed} failed, {errors} not carried out, in {:.1} min; summary {}",
        runs.len(),
        started.elapsed().as_secs_f64() / 60.0,
        o.out.join("README.md").display()
    );
    if failed > 0 {
        1
    } else if errors > 0 {
        2
    } else {
        0
    }
}
