//! Model checking the cluster core (`src/cluster/core.rs`) with `stateright`: three real `Core`s
//! (not a copy of their logic) over a network that loses, reorders, delays and duplicates messages, with
//! crashes that keep only what was made durable, election timeouts at any moment, client writes
//! on whoever leads (written first, shipped at once, synced by a later step of their own, so a
//! leader may crash holding less than it shipped) and a leader asked to resign. Every reachable state within the bounds is explored.
//!
//! Properties:
//! - at most one leader per term (epoch number);
//! - every position any node ever published (committed) holds the same bytes on every node that
//!   publishes it, and every later leader's log starts with all of them;
//! - a follower publishes nothing past what a leader committed, and no node publishes past what
//!   it holds durably;
//! - effects are well formed (a follower's write starts at its log's end).
//!
//! Each property is proven by a bug switch it catches (`src/buggify.rs`). The bounded check runs
//! with `cargo test --test cluster_model`; a deeper one with
//! `ANNAL_MODEL_DEPTH=40 ANNAL_MODEL_STATES=50000000 cargo test --release --test cluster_model -- --ignored deep`.

use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

#[cfg(feature = "sim")]
use annal::buggify::set_bugs;
use annal::buggify::Bug;

/// Without `sim` (the production build) the core has no bug switches: the properties are checked
/// on the core users run, and the bug-switch tests below are left out.
#[cfg(not(feature = "sim"))]
fn set_bugs(bugs: &[Bug]) {
    assert!(bugs.is_empty(), "bug switches need the sim feature");
}
use annal::cluster::core::{Core, Effect, Envelope, Epoch, Input, Msg, NodeId, Persisted, Settings};
use bytes::Bytes;
use stateright::{Checker, Model, Property};

const NODES: usize = 3;
/// Every record is two bytes: `[term, sequence]` for a client write, `[0x80 | term, node]` for an
/// epoch record, so positions are even and a log's bytes name who wrote what in which term.
const REC: usize = 2;
/// Records per shipment.
const SHIP_RECORDS: usize = 2;
const ELECTION: Duration = Duration::from_secs(1);
const HEARTBEAT: Duration = Duration::from_millis(100);

fn id(i: usize) -> NodeId {
    SocketAddr::from(([10, 0, 0, i as u8 + 1], 1112))
}

fn index_of(n: NodeId) -> usize {
    match n {
        SocketAddr::V4(a) => a.ip().octets()[3] as usize - 1,
        SocketAddr::V6(_) => usize::MAX,
    }
}

fn settings(i: usize) -> Settings {
    Settings {
        me: id(i),
        peers: (0..NODES).filter(|&j| j != i).map(id).collect(),
        cluster_size: NODES,
        read_only: false,
        priority: 0,
        election_timeout: ELECTION,
        heartbeat_interval: HEARTBEAT,
        max_truncation: None,
        gossip_interval: Duration::from_secs(3600),
        gossip_timeout: Duration::from_secs(1),
        dead_member_removal: Duration::from_secs(1800),
        http: None,
        instance: [i as u8; 16],
        allow_surplus: false,
        fresh: false,
    }
}

fn epochs_in(log: &[u8], base: usize) -> Vec<Epoch> {
    log.chunks(REC)
        .enumerate()
        .filter(|(_, r)| r[0] & 0x80 != 0)
        .map(|(k, r)| {
            let number = (r[0] & 0x7f) as u64;
            let mut id = [0u8; 16];
            id[0] = number as u8;
            id[1] = r[1];
            Epoch { number, id, position: (base + k * REC) as u64 }
        })
        .collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Node {
    core: Core,
    /// The node's log: a follower's is durable as it is written (the shell flushes before
    /// reporting); a leader's client writes are durable only up to `durable`.
    log: Vec<u8>,
    /// How much of `log` is durable (a crash keeps only that).
    durable: usize,
    /// `proposal.chk`.
    proposal: u64,
    up: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct State {
    nodes: Vec<Node>,
    /// Messages in flight: (destination, message), sorted (a multiset).
    net: Vec<(usize, Envelope)>,
    budget: Budget,
    leaders: BTreeSet<(u64, usize)>,
    /// The longest prefix any node published.
    committed: Vec<u8>,
    /// The highest position a leader committed.
    leader_committed: usize,
    violation: Option<String>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Budget {
    writes: u8,
    crashes: u8,
    timeouts: u8,
    beats: u8,
    /// Messages delivered twice (the copy stays in flight).
    dups: u8,
    /// Leaders asked to resign.
    resigns: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Deliver(usize),
    Duplicate(usize),
    Timeout(usize),
    Heartbeat(usize),
    Write(usize),
    /// A leader's sync of what it wrote.
    Sync(usize),
    Crash(usize),
    Resign(usize),
}

struct ClusterModel {
    budget: Budget,
    bugs: Vec<Bug>,
}

impl ClusterModel {
    fn run(&self, s: &mut State, first: usize, input: Input) {
        let mut queue = VecDeque::from([(first, input)]);
        while let Some((i, input)) = queue.pop_front() {
            let effects = s.nodes[i].core.step(input);
            for e in effects {
                match e {
                    Effect::Send(to, env) => {
                        if !matches!(env.msg, Msg::Gossip(_)) {
                            let j = index_of(to);
                            let at = s.net.partition_point(|m| m < &(j, env.clone()));
                            s.net.insert(at, (j, env));
                        }
                    }
                    Effect::Persist { proposal } => s.nodes[i].proposal = proposal,
                    Effect::WriteEpoch { number } => {
                        let node = &mut s.nodes[i];
                        let position = node.log.len() as u64;
                        node.log.extend_from_slice(&[0x80 | number as u8, i as u8]);
                        node.durable = node.log.len();
                        let epoch = epochs_in(&node.log[position as usize..], position as usize)[0];
                        queue.push_back((i, Input::EpochWritten { epoch, end: node.log.len() as u64 }));
                    }
                    Effect::Truncate { to } => {
                        let node = &mut s.nodes[i];
                        node.log.truncate(to as usize);
                        node.durable = node.durable.min(node.log.len());
                    }
                    Effect::Write { from, end, data, .. } => {
                        let node = &mut s.nodes[i];
                        if from as usize != node.log.len() || end - from != data.len() as u64 {
                            s.violation =
                                Some(format!("node {i} told to write {from}..{end} at {}", node.log.len()));
                            return;
                        }
                        let epochs = epochs_in(&data, from as usize);
                        node.log.extend_from_slice(&data);
                        node.durable = node.log.len();
                        queue.push_back((i, Input::Durable { end: node.log.len() as u64, epochs }));
                    }
                    Effect::Ship { to, subscription, from, upto, commit } => {
                        let log = &s.nodes[i].log;
                        let end = (upto as usize).min(from as usize + SHIP_RECORDS * REC).min(log.len());
                        let data = Bytes::copy_from_slice(&log[from as usize..end]);
                        let env = Envelope {
                            from: id(i),
                            cluster_size: NODES as u32,
                            term: s.nodes[i].core.term(),
                            msg: Msg::Append {
                                subscription,
                                from,
                                end: end as u64,
                                data,
                                leader_end: s.nodes[i].durable as u64,
                                commit,
                                lease: s.nodes[i].core.now().as_micros() as u64,
                                part: None,
                            },
                        };
                        let j = index_of(to);
                        let at = s.net.partition_point(|m| m < &(j, env.clone()));
                        s.net.insert(at, (j, env));
                        queue.push_back((i, Input::Shipped { to, subscription, end: end as u64 }));
                    }
                    Effect::Commit { upto } => {
                        let log = &s.nodes[i].log;
                        let upto = upto as usize;
                        if s.nodes[i].core.is_leader() {
                            s.leader_committed = s.leader_committed.max(upto);
                        } else if upto > s.leader_committed {
                            s.violation = Some(format!(
                                "node {i} published {upto}, past what any leader committed ({})",
                                s.leader_committed
                            ));
                            return;
                        }
                        if upto > s.nodes[i].durable {
                            s.violation = Some(format!(
                                "node {i} published {upto} past what it holds durably ({})",
                                s.nodes[i].durable
                            ));
                            return;
                        }
                        let common = upto.min(s.committed.len());
                        if log[..common] != s.committed[..common] {
                            s.violation = Some(format!(
                                "node {i} published {:?} where {:?} was published before",
                                &log[..common],
                                &s.committed[..common]
                            ));
                            return;
                        }
                        if upto > s.committed.len() {
                            s.committed = log[..upto].to_vec();
                        }
                    }
                    Effect::Refused(_) => {}
                }
            }
            let node = &mut s.nodes[i];
            if !node.core.is_leader() && node.durable < node.log.len() {
                // A deposed leader's sync of what it wrote still completes (the node's writer
                // finishes it before a follower's write or truncation can run) and is reported
                // before anything else reaches the core.
                node.durable = node.log.len();
                queue.push_front((i, Input::Durable { end: node.durable as u64, epochs: Vec::new() }));
            }
            let node = &s.nodes[i];
            if node.core.is_leader() {
                s.leaders.insert((node.core.term(), i));
            }
            if node.core.is_master() && !node.log.starts_with(&s.committed) {
                s.violation = Some(format!(
                    "node {i} leads term {} without the committed records {:?} (its log {:?})",
                    node.core.term(),
                    s.committed,
                    node.log
                ));
            }
        }
    }

    fn tick(&self, s: &mut State, i: usize, by: Duration) {
        let now = s.nodes[i].core_now() + by;
        self.run(s, i, Input::Tick(now));
    }
}

impl Node {
    fn core_now(&self) -> Duration {
        // The model's clocks: each node's own, advanced only by its ticks.
        self.core.now()
    }
}

impl Model for ClusterModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let nodes = (0..NODES)
            .map(|i| Node {
                core: Core::new(settings(i), Persisted::default(), Duration::ZERO, i as u64),
                log: Vec::new(),
                durable: 0,
                proposal: 0,
                up: true,
            })
            .collect();
        vec![State {
            nodes,
            net: Vec::new(),
            budget: self.budget.clone(),
            leaders: BTreeSet::new(),
            committed: Vec::new(),
            leader_committed: 0,
            violation: None,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.violation.is_some() {
            return;
        }
        for (k, (to, _)) in s.net.iter().enumerate() {
            if k > 0 && s.net[k - 1] == s.net[k] {
                continue;
            }
            if s.nodes[*to].up {
                actions.push(Action::Deliver(k));
                if s.budget.dups > 0 {
                    actions.push(Action::Duplicate(k));
                }
            }
        }
        for (i, n) in s.nodes.iter().enumerate() {
            if !n.up {
                continue;
            }
            if s.budget.timeouts > 0 {
                actions.push(Action::Timeout(i));
            }
            if n.core.is_leader() && s.budget.beats > 0 {
                actions.push(Action::Heartbeat(i));
            }
            if n.core.is_master() && s.budget.writes > 0 {
                actions.push(Action::Write(i));
            }
            if n.durable < n.log.len() {
                actions.push(Action::Sync(i));
            }
            if n.core.is_leader() && s.budget.resigns > 0 {
                actions.push(Action::Resign(i));
            }
            if s.budget.crashes > 0 {
                actions.push(Action::Crash(i));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        set_bugs(&self.bugs);
        let mut s = last.clone();
        match action {
            Action::Deliver(k) => {
                let (to, env) = s.net.remove(k);
                self.run(&mut s, to, Input::Message(env));
            }
            Action::Duplicate(k) => {
                s.budget.dups -= 1;
                let (to, env) = s.net[k].clone();
                self.run(&mut s, to, Input::Message(env));
            }
            Action::Timeout(i) => {
                s.budget.timeouts -= 1;
                self.tick(&mut s, i, ELECTION * 3);
            }
            Action::Heartbeat(i) => {
                s.budget.beats -= 1;
                self.tick(&mut s, i, HEARTBEAT);
            }
            Action::Write(i) => {
                s.budget.writes -= 1;
                let node = &mut s.nodes[i];
                let term = node.core.term() as u8;
                let seq = self.budget.writes - s.budget.writes;
                node.log.extend_from_slice(&[term, seq]);
                let end = node.log.len() as u64;
                self.run(&mut s, i, Input::Written { end });
            }
            Action::Sync(i) => {
                let node = &mut s.nodes[i];
                node.durable = node.log.len();
                let end = node.durable as u64;
                self.run(&mut s, i, Input::Durable { end, epochs: Vec::new() });
            }
            Action::Resign(i) => {
                s.budget.resigns -= 1;
                self.run(&mut s, i, Input::Resign);
            }
            Action::Crash(i) => {
                s.budget.crashes -= 1;
                let node = &mut s.nodes[i];
                // What was written and not synced is lost.
                node.log.truncate(node.durable);
                let persisted = Persisted {
                    proposal: node.proposal,
                    epochs: epochs_in(&node.log, 0),
                    durable: node.log.len() as u64,
                    committed: 0,
                };
                let now = node.core.now();
                node.core = Core::new(settings(i), persisted, now, 99);
                // Messages to the crashed process are lost with its connections.
                s.net.retain(|(to, _)| *to != i);
            }
        }
        set_bugs(&[]);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("one leader per term", |_, s: &State| {
                s.leaders.iter().zip(s.leaders.iter().skip(1)).all(|(a, b)| a.0 != b.0)
            }),
            Property::always("committed records are never lost or changed", |_, s: &State| {
                s.violation.is_none()
            }),
            Property::sometimes("a client write is committed", |_, s: &State| {
                s.committed.chunks(REC).any(|r| r[0] & 0x80 == 0)
            }),
        ]
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// How a run explores.
#[derive(Clone, Copy, Debug)]
enum Search {
    /// Every state up to a depth (shortest counterexamples).
    Breadth(usize),
    /// Deep paths first, up to a depth.
    Depth(usize),
    /// Random walks from this seed.
    Walks(u64),
}

fn check(budget: Budget, bugs: Vec<Bug>, search: Search, states: usize) -> Box<dyn Checker<ClusterModel>> {
    let b = ClusterModel { budget, bugs }.checker().threads(1).target_state_count(states);
    match search {
        Search::Breadth(d) => Box::new(b.target_max_depth(d).spawn_bfs().join()),
        Search::Depth(d) => Box::new(b.target_max_depth(d).spawn_dfs().join()),
        Search::Walks(seed) => {
            Box::new(b.target_max_depth(60).spawn_simulation(seed, stateright::UniformChooser).join())
        }
    }
}

fn small() -> Budget {
    Budget { writes: 2, crashes: 1, timeouts: 3, beats: 1, dups: 1, resigns: 1 }
}

fn assert_safe(c: &dyn Checker<ClusterModel>, what: &str) {
    println!(
        "{what}: {} states ({} unique), depth {}",
        c.state_count(),
        c.unique_state_count(),
        c.max_depth()
    );
    for p in ["one leader per term", "committed records are never lost or changed"] {
        if let Some(path) = c.discovery(p) {
            panic!("{what}: {p:?} violated:\n{path:?}");
        }
    }
}

/// Losing a message is never delivering it, and the searches include every such state; any
/// message in flight may be delivered next, which reorders and delays them; one may be delivered
/// twice (a duplicate).
#[test]
fn bounded_three_nodes_are_safe() {
    let states = env_usize("ANNAL_MODEL_STATES", 300_000);
    let committed = |c: &dyn Checker<ClusterModel>| c.discovery("a client write is committed").is_some();
    let c = check(small(), Vec::new(), Search::Breadth(env_usize("ANNAL_MODEL_DEPTH", 9)), states);
    assert_safe(&*c, "breadth-first");
    let mut reached = committed(&*c);
    let c = check(small(), Vec::new(), Search::Depth(40), states);
    assert_safe(&*c, "depth-first");
    reached |= committed(&*c);
    for seed in 0..4 {
        let c = check(small(), Vec::new(), Search::Walks(seed), states / 4);
        assert_safe(&*c, &format!("random walks, seed {seed}"));
        reached |= committed(&*c);
    }
    assert!(reached, "the searches reach a committed write");
}

#[test]
#[ignore = "deep run: minutes to hours; see the module doc for the command"]
fn deep() {
    let depth = env_usize("ANNAL_MODEL_DEPTH", 14);
    let states = env_usize("ANNAL_MODEL_STATES", 50_000_000);
    let budget = Budget { writes: 2, crashes: 2, timeouts: 4, beats: 2, dups: 2, resigns: 1 };
    assert_safe(&*check(budget.clone(), Vec::new(), Search::Breadth(depth), states), "breadth-first");
    for seed in 0..64 {
        let c = check(budget.clone(), Vec::new(), Search::Walks(seed), states / 64);
        assert_safe(&*c, &format!("random walks, seed {seed}"));
    }
}

#[cfg(feature = "sim")]
fn caught(bug: Bug, property: &'static str, budget: Budget, search: Search) {
    let c = check(budget, vec![bug], search, 3_000_000);
    let path = c.discovery(property);
    assert!(path.is_some(), "{bug:?} is not caught by {property:?} ({} states)", c.unique_state_count());
}

#[cfg(feature = "sim")]
#[test]
fn a_vote_not_made_durable_is_caught() {
    caught(
        Bug::VoteNotDurable,
        "one leader per term",
        Budget { writes: 0, crashes: 1, timeouts: 2, beats: 0, dups: 0, resigns: 0 },
        Search::Breadth(30),
    );
}

#[cfg(feature = "sim")]
#[test]
fn acknowledging_before_a_quorum_is_caught() {
    caught(
        Bug::AckBeforeQuorum,
        "committed records are never lost or changed",
        Budget { writes: 1, crashes: 0, timeouts: 3, beats: 0, dups: 0, resigns: 0 },
        Search::Breadth(30),
    );
}

#[cfg(feature = "sim")]
#[test]
fn a_kept_divergent_tail_is_caught() {
    caught(
        Bug::KeepDivergentTail,
        "committed records are never lost or changed",
        Budget { writes: 2, crashes: 1, timeouts: 4, beats: 1, dups: 0, resigns: 0 },
        Search::Walks(1),
    );
}

#[cfg(feature = "sim")]
#[test]
fn a_follower_publishing_uncommitted_records_is_caught() {
    caught(
        Bug::FollowerPublishesUncommitted,
        "committed records are never lost or changed",
        Budget { writes: 1, crashes: 0, timeouts: 1, beats: 0, dups: 0, resigns: 0 },
        Search::Breadth(30),
    );
}
