//! The nemesis: a seeded schedule of faults, each active for a while and then healed, applied to
//! the real processes and the real network of a run.
//!
//! Faults: partitions (the leader isolated, a majority/minority split, a bridge where one node
//! sees both sides, one-way loss of everything from one node to another) with `iptables` in the
//! nodes' namespaces; random packet loss (`iptables` statistic match); a slow link (`tc netem`
//! delay, loss and reordering when the kernel has it, else a `tbf` rate limit); `SIGSTOP` of the
//! leader or a node until after the others elected a new one; `kill -9` of one, two or all nodes,
//! restarted later; a jump of one node's wall clock (libfaketime); a full disk on one node (a
//! ballast file fills its tmpfs).
//!
//! Invariants: the schedule is a pure function of the seed and the run's shape (which node is the
//! leader is looked up when a fault starts, and recorded); faults never overlap (each is healed
//! before the next starts) and everything is healed before the final checks; healing never fails
//! silently — a heal that cannot be applied is an error of the run.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::hosts::{sh, sh_in};
use crate::nodes::Nodes;

/// A node, named directly or as whoever leads when the fault starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The leader at the time.
    Leader,
    /// Node `i`.
    Node(usize),
}

/// One fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The target cannot reach any other node, nor they it.
    Isolate(Target),
    /// The nodes are split in two sides (the first holds `minority` nodes, leader among them
    /// when `with_leader`).
    Split { minority: usize, with_leader: bool },
    /// Node `middle` sees everyone; the others see only `middle` and their own side.
    Bridge { middle: usize },
    /// Everything from `from` to `to` is lost (the other way works).
    OneWay { from: usize, to: usize },
    /// Per-mille of packets into the target are dropped.
    Loss { target: Target, permille: u32 },
    /// The target's link is slow (delay, loss and reordering, or a low rate).
    Slow(Target),
    /// SIGSTOP, SIGCONT at the heal.
    Pause(Target),
    /// kill -9 of these nodes (the leader counts as one of them when `leader`), restarted at the
    /// heal.
    Kill { nodes: usize, leader: bool },
    /// The target's wall clock jumps by this many seconds, back at the heal.
    ClockJump { target: Target, secs: i64 },
    /// The target's disk fills up; emptied at the heal.
    DiskFull(Target),
}

impl Fault {
    /// Its kind's name (one of [`NAMES`]).
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Isolate(Target::Leader) => "isolate-leader",
            Fault::Isolate(Target::Node(_)) => "isolate",
            Fault::Split { .. } => "split",
            Fault::Bridge { .. } => "bridge",
            Fault::OneWay { .. } => "one-way",
            Fault::Loss { .. } => "loss",
            Fault::Slow(_) => "slow",
            Fault::Pause(_) => "pause",
            Fault::Kill { .. } => "kill",
            Fault::ClockJump { .. } => "clock",
            Fault::DiskFull(_) => "disk",
        }
    }

    /// The lane of the timeline it is drawn in.
    pub fn lane(&self) -> &'static str {
        match self {
            Fault::Isolate(_) | Fault::Split { .. } | Fault::Bridge { .. } | Fault::OneWay { .. } => {
                "partition"
            }
            Fault::Loss { .. } | Fault::Slow(_) => "network",
            Fault::Pause(_) => "pause",
            Fault::Kill { .. } => "kill",
            Fault::ClockJump { .. } => "clock",
            Fault::DiskFull(_) => "disk",
        }
    }
}

/// A fault and when: `start` and `duration` from the start of the run.
#[derive(Clone, Debug)]
pub struct Planned {
    /// When it starts.
    pub start: Duration,
    /// How long it lasts.
    pub duration: Duration,
    /// What.
    pub fault: Fault,
}

/// What the schedule may contain.
#[derive(Clone, Debug)]
pub struct Kinds {
    /// libfaketime is installed.
    pub clock: bool,
    /// Only these faults ([`Fault::name`]); empty: all.
    pub only: Vec<String>,
}

/// The names `--faults` takes, one per kind of [`Fault`].
pub const NAMES: [&str; 11] = [
    "isolate-leader",
    "isolate",
    "split",
    "bridge",
    "one-way",
    "loss",
    "slow",
    "pause",
    "kill",
    "clock",
    "disk",
];

/// Draws before a restricted schedule gives up finding an allowed fault for a slot.
const DRAWS: usize = 1000;

/// Quiet time at the start (the cluster forms, the clients start).
const WARMUP: Duration = Duration::from_secs(4);
/// Quiet time at the end, before the final heal.
const COOLDOWN: Duration = Duration::from_secs(3);

/// The schedule of a run of `duration` on `nodes` nodes.
pub fn plan(seed: u64, nodes: usize, duration: Duration, kinds: Kinds) -> Vec<Planned> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7300);
    let mut out = Vec::new();
    let mut at = WARMUP;
    loop {
        let duration_ms = rng.gen_range(2_000..8_000);
        let quiet_ms = rng.gen_range(1_500..5_000);
        let length = Duration::from_millis(duration_ms);
        if at + length + COOLDOWN > duration {
            break;
        }
        let Some(fault) = (0..DRAWS)
            .map(|_| draw(&mut rng, nodes, &kinds))
            .find(|f| kinds.only.is_empty() || kinds.only.iter().any(|o| o == f.name()))
        else {
            break;
        };
        out.push(Planned { start: at, duration: length, fault });
        at += length + Duration::from_millis(quiet_ms);
    }
    out
}

/// One fault drawn from all kinds.
fn draw(rng: &mut ChaCha8Rng, nodes: usize, kinds: &Kinds) -> Fault {
    let minority = (nodes - 1) / 2;
    let node = |rng: &mut ChaCha8Rng| Target::Node(rng.gen_range(0..nodes));
    let either = |rng: &mut ChaCha8Rng| if rng.gen_bool(0.5) { Target::Leader } else { node(rng) };
    match rng.gen_range(0..12) {
        0 => Fault::Isolate(Target::Leader),
        1 => Fault::Split { minority, with_leader: rng.gen_bool(0.5) },
        2 => Fault::Bridge { middle: rng.gen_range(0..nodes) },
        3 => {
            let from = rng.gen_range(0..nodes);
            let to = (from + rng.gen_range(1..nodes)) % nodes;
            Fault::OneWay { from, to }
        }
        4 => Fault::Loss { target: either(rng), permille: rng.gen_range(100..400) },
        5 => Fault::Slow(either(rng)),
        6 => Fault::Pause(Target::Leader),
        7 => Fault::Pause(node(rng)),
        8 => {
            let n = match rng.gen_range(0..4) {
                0 | 1 => 1,
                2 => minority.max(1),
                _ => nodes,
            };
            Fault::Kill { nodes: n, leader: rng.gen_bool(0.7) }
        }
        9 if kinds.clock => {
            let secs = rng.gen_range(30..900) * if rng.gen_bool(0.5) { 1 } else { -1 };
            Fault::ClockJump { target: either(rng), secs }
        }
        10 => Fault::DiskFull(either(rng)),
        _ => Fault::Isolate(node(rng)),
    }
}

/// A fault being applied: what to undo at the heal.
#[derive(Debug, Default)]
pub struct Active {
    /// Nodes whose firewall rules to flush.
    pub firewalled: Vec<usize>,
    /// Nodes whose link shaping to remove.
    pub shaped: Vec<usize>,
    /// Nodes to SIGCONT.
    pub paused: Vec<usize>,
    /// Nodes to start again.
    pub killed: Vec<usize>,
    /// Nodes whose clock to put back.
    pub clocks: Vec<usize>,
    /// Nodes whose ballast to remove.
    pub ballast: Vec<usize>,
    /// What was done, for the report (nodes resolved).
    pub description: String,
}

/// Whether this kernel has `tc netem` (probed once per run in node 0's namespace).
pub fn netem_available(ns: &str) -> bool {
    let ok = sh_in(ns, &["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]).is_ok();
    if ok {
        let _ = sh_in(ns, &["tc", "qdisc", "del", "dev", "lo", "root"]);
    }
    ok
}

/// Drops everything between `a` and `b`, both ways, in `a`'s namespace.
fn cut(nodes: &Nodes, a: usize, b: usize) -> Result<(), String> {
    let ns = &nodes.nodes[a].host.ns;
    let ip = &nodes.nodes[b].host.ip;
    sh_in(ns, &["iptables", "-A", "INPUT", "-s", ip, "-j", "DROP"])?;
    sh_in(ns, &["iptables", "-A", "OUTPUT", "-d", ip, "-j", "DROP"])?;
    Ok(())
}

/// Applies `fault`; `leader` is the leader now, if one is known.
pub fn apply(
    fault: &Fault,
    nodes: &mut Nodes,
    leader: Option<usize>,
    netem: bool,
    seed: u64,
) -> Result<Active, String> {
    let n = nodes.nodes.len();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let resolve = |t: Target, rng: &mut ChaCha8Rng| match t {
        Target::Node(i) => i,
        Target::Leader => leader.unwrap_or_else(|| rng.gen_range(0..n)),
    };
    let mut a = Active::default();
    match fault {
        Fault::Isolate(t) => {
            let x = resolve(*t, &mut rng);
            for o in (0..n).filter(|&o| o != x) {
                cut(nodes, x, o)?;
                cut(nodes, o, x)?;
            }
            a.firewalled = (0..n).collect();
            a.description = format!("isolate node {x}");
        }
        Fault::Split { minority, with_leader } => {
            let mut order = shuffled(n, &mut rng);
            if let Some(l) = leader {
                let at = order.iter().position(|&x| x == l).unwrap_or(0);
                let to = if *with_leader { 0 } else { n - 1 };
                order.swap(at, to);
            }
            let (small, big) = order.split_at(*minority);
            for &x in small {
                for &y in big {
                    cut(nodes, x, y)?;
                    cut(nodes, y, x)?;
                }
            }
            a.firewalled = (0..n).collect();
            a.description = format!("split {small:?} | {big:?}");
        }
        Fault::Bridge { middle } => {
            let others: Vec<usize> = (0..n).filter(|&o| o != *middle).collect();
            let (left, right) = others.split_at(others.len() / 2);
            for &x in left {
                for &y in right {
                    cut(nodes, x, y)?;
                    cut(nodes, y, x)?;
                }
            }
            a.firewalled = (0..n).collect();
            a.description = format!("bridge: {left:?} <-> {middle} <-> {right:?}");
        }
        Fault::OneWay { from, to } => {
            let ip = nodes.nodes[*from].host.ip.clone();
            sh_in(&nodes.nodes[*to].host.ns, &["iptables", "-A", "INPUT", "-s", &ip, "-j", "DROP"])?;
            a.firewalled = vec![*to];
            a.description = format!("one-way loss {from} -> {to}");
        }
        Fault::Loss { target, permille } => {
            let x = resolve(*target, &mut rng);
            let p = format!("{:.3}", *permille as f64 / 1000.0);
            let ns = nodes.nodes[x].host.ns.clone();
            sh_in(
                &ns,
                &[
                    "iptables",
                    "-A",
                    "INPUT",
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    &p,
                    "-j",
                    "DROP",
                ],
            )?;
            a.firewalled = vec![x];
            a.description = format!("drop {permille}‰ of packets into node {x}");
        }
        Fault::Slow(target) => {
            let x = resolve(*target, &mut rng);
            let ns = nodes.nodes[x].host.ns.clone();
            if netem {
                sh_in(
                    &ns,
                    &[
                        "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "80ms", "40ms",
                        "loss", "2%", "reorder", "10%",
                    ],
                )?;
                a.description = format!("slow link of node {x}: delay 80±40 ms, 2% loss, 10% reordered");
            } else {
                sh_in(
                    &ns,
                    &[
                        "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "512kbit", "burst",
                        "16kbit", "latency", "400ms",
                    ],
                )?;
                a.description = format!("slow link of node {x}: 512 kbit/s, queue up to 400 ms");
            }
            a.shaped = vec![x];
        }
        Fault::Pause(target) => {
            let x = resolve(*target, &mut rng);
            nodes.nodes[x].pause();
            a.paused = vec![x];
            a.description = format!("SIGSTOP node {x}");
        }
        Fault::Kill { nodes: count, leader: with_leader } => {
            let mut order = shuffled(n, &mut rng);
            if let (Some(l), true) = (leader, *with_leader) {
                let at = order.iter().position(|&x| x == l).unwrap_or(0);
                order.swap(at, 0);
            }
            let victims: Vec<usize> = order.into_iter().take(*count).collect();
            for &v in &victims {
                nodes.nodes[v].kill();
            }
            a.killed = victims.clone();
            a.description = format!("kill -9 nodes {victims:?}");
        }
        Fault::ClockJump { target, secs } => {
            let x = resolve(*target, &mut rng);
            nodes.nodes[x].set_clock_offset(*secs)?;
            a.clocks = vec![x];
            a.description = format!("clock of node {x} jumps {secs:+} s");
        }
        Fault::DiskFull(target) => {
            let x = resolve(*target, &mut rng);
            let ballast = nodes.nodes[x].host.dir.join("ballast");
            // dd stops at ENOSPC (its failure is the point).
            let _ = sh(&["dd", "if=/dev/zero", &format!("of={}", ballast.display()), "bs=1M", "status=none"]);
            a.ballast = vec![x];
            a.description = format!("disk of node {x} full");
        }
    }
    Ok(a)
}

/// The nodes `0..n` in an order drawn from `rng`.
fn shuffled(n: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    order
}

/// Undoes what [`apply`] did.
pub fn heal(a: &Active, nodes: &mut Nodes) -> Result<(), String> {
    let mut errors = Vec::new();
    for &x in &a.firewalled {
        if let Err(e) = sh_in(&nodes.nodes[x].host.ns, &["iptables", "-F"]) {
            errors.push(e);
        }
    }
    for &x in &a.shaped {
        if let Err(e) = sh_in(&nodes.nodes[x].host.ns, &["tc", "qdisc", "del", "dev", "eth0", "root"]) {
            errors.push(e);
        }
    }
    for &x in &a.paused {
        nodes.nodes[x].resume();
    }
    for &x in &a.clocks {
        if let Err(e) = nodes.nodes[x].set_clock_offset(0) {
            errors.push(e);
        }
    }
    for &x in &a.ballast {
        let ballast = nodes.nodes[x].host.dir.join("ballast");
        if let Err(e) = std::fs::remove_file(&ballast) {
            errors.push(format!("{}: {e}", ballast.display()));
        }
    }
    for &x in &a.killed {
        if let Err(e) = nodes.nodes[x].start() {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_a_function_of_its_seed_and_never_overlaps() {
        let kinds = Kinds { clock: true, only: Vec::new() };
        let a = plan(7, 3, Duration::from_secs(120), kinds.clone());
        let b = plan(7, 3, Duration::from_secs(120), kinds.clone());
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert!(a.len() >= 8, "{a:?}");
        for w in a.windows(2) {
            assert!(w[0].start + w[0].duration < w[1].start, "{w:?}");
        }
        assert!(a.iter().all(|p| p.start + p.duration + COOLDOWN <= Duration::from_secs(120)));
        let no_clock = plan(7, 3, Duration::from_secs(600), Kinds { clock: false, only: Vec::new() });
        assert!(!no_clock.iter().any(|p| matches!(p.fault, Fault::ClockJump { .. })));
        // Over many seeds every kind of fault occurs.
        let lanes: std::collections::BTreeSet<&str> = (0..50)
            .flat_map(|s| plan(s, 5, Duration::from_secs(120), kinds.clone()))
            .map(|p| p.fault.lane())
            .collect();
        assert_eq!(lanes.len(), 6, "{lanes:?}");
        let only = Kinds { clock: true, only: vec!["isolate-leader".into(), "kill".into()] };
        let some = plan(3, 3, Duration::from_secs(300), only);
        assert!(
            some.len() >= 20 && some.iter().all(|p| matches!(p.fault.name(), "isolate-leader" | "kill")),
            "{some:?}"
        );
    }
}
