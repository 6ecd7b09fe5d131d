//! One simulated run: one or more node hosts, each a real node (`annal::node::Node`, HTTP API and
//! all) with the simulated Env and its own disk, clock, fault plan and client hosts
//! ([`crate::rig`]); the fault plans carried out step by step; then the checkers, per node host.
//!
//! The seed decides everything: each host's fault plan (`annal_fault::FaultPlan`), node knobs and
//! workload shape, turmoil's own randomness, the nodes' entropy, BUGGIFY and the torn-write
//! choices. A run on one thread with the same seed and options replays exactly; [`Options`] also
//! carries the test-only bug switches. A run of one node (the default) is exactly the simulator's
//! historic single-node run, host names and trace included, so old seeds replay the same runs.
//!
//! Several nodes ([`Options::nodes`]) are independent single nodes unless [`Options::cluster`]:
//! each gets its own clients and its checks run on its own history; faults hit hosts
//! independently; and partitions between node hosts are scheduled too.
//!
//! A cluster ([`Options::cluster`]): the node hosts are the members of one cluster (cluster size
//! `nodes`, replication port [`crate::rig::REPLICATION_PORT`], gossip seeds the other members,
//! resolved at each boot), plus a read-only replica with [`Options::replica`]. All clients record
//! into one history (rig 0's), numbered apart, on the same streams; each starts at its own
//! member, follows `307`s to the leader, moves on to the next member after a failure, and reads
//! with `ES-RequireMaster: True`, so reads are linearizable. Faults: each host's plan, the
//! network faults between members ([`crate::network`]), and kills of a member that just took part
//! in an election (a vote must survive them). After every step the harness observes each
//! member's state, term, published and commit positions ([`crate::checker::Observation`]); a new
//! leader's term is a restart in the history (its idempotency memory is not its predecessor's).
//! After the clients finish, the cluster settles (followers catch up, bounded) and each member's
//! committed log is read; then the history checks run once, and the cluster checks
//! ([`crate::checker::check_cluster`]).
//!
//! Process-global state: the hosts of a run share its thread, and BUGGIFY, the bug switches and
//! the halt after a panic are per thread. So they are per run: BUGGIFY is on for every host when
//! the first host's plan turns it on, bug switches apply to every node, and a panic anywhere fails
//! the run (and stops every host's blocking work, as it must: the run is over).
//!
//! Phases: the workload phase (faults as scheduled; a supervisor restarts a node that went
//! read-only after a storage failure), then healing (every window closed, disk faults off, one
//! last power loss and restart, per host), then the final reads, then the checks. Liveness (the
//! final reads answered) is required of a host unless its plan destroys committed data.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use annal::buggify::Bug;
use annal_fault::{FaultKind, FaultPlan};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::rig::{Action, Rig};
use crate::shared::Trace;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The seed.
    pub seed: u64,
    /// Length of the workload phase (simulated).
    pub duration: Duration,
    /// Clients per node host.
    pub clients: usize,
    /// Client hosts per node host (its clients are spread over them; partitions act per host).
    pub client_hosts: usize,
    /// turmoil's tick.
    pub tick: Duration,
    /// Test-only bug switches to turn on.
    pub bugs: Vec<Bug>,
    /// Steps (model evaluations) the linearizability search may take per stream.
    pub budget: u64,
    /// Node hosts: independent single nodes, or the members of one cluster ([`Options::cluster`]).
    pub nodes: usize,
    /// The node hosts form one cluster of `nodes` members (one history, clients spread over the
    /// members, network faults between them, the cluster checks).
    pub cluster: bool,
    /// With `cluster`: one more node host, a read-only replica.
    pub replica: bool,
    /// With `cluster`: the members find each other only through DNS, listening on 0.0.0.0 and
    /// advertising their names, and are stopped gracefully and restarted now and then
    /// ([`crate::deploy`]).
    pub deploy: bool,
    /// What runs besides the clients and the faults.
    pub scenario: Scenario,
}

/// What a run exercises besides the clients and the faults (one node only, except `Faults`, and
/// `Certs`, which needs a cluster).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// The clients and the fault plan alone (every seed's historic run).
    Faults,
    /// Backups by the tool's copy logic, each restored into a fresh node and checked
    /// ([`crate::maintenance`], [`crate::checker::backup`]).
    Backup,
    /// Redactions with a crash at every step of the switch ([`crate::maintenance`],
    /// [`crate::checker::redaction`]).
    Redact,
    /// A TLS cluster whose certificates are rolled under load and again after healing, with bad
    /// reloads and an intruder ([`crate::rollover`]; a cluster of three).
    Certs,
    /// Competing consumers of a persistent subscription group that ack, nack, time out and
    /// vanish ([`crate::subs`], [`crate::checker::subscriptions`]); one node or a cluster.
    Subs,
    /// The system projections run while a producer writes streams of a few categories; their
    /// output must be what the reference fold computes from the log ([`crate::projections`],
    /// [`crate::checker::projections`]); one node or a cluster.
    Projections,
    /// A cluster of three through seeded rounds of kills and pauses, each ending in a recovery
    /// after which a write must be acknowledged ([`crate::survivor`],
    /// [`crate::checker::writes_resume`]); the rounds replace the hosts' fault plans.
    Survivor,
    /// A cluster of three whose members, followers as well as the leader, are asked for scavenges
    /// under the cluster's faults ([`crate::scavenges`], [`crate::checker::scavenges`]).
    Scavenge,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 8] = [
        Scenario::Faults,
        Scenario::Backup,
        Scenario::Redact,
        Scenario::Certs,
        Scenario::Subs,
        Scenario::Projections,
        Scenario::Survivor,
        Scenario::Scavenge,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Faults => "faults",
            Scenario::Backup => "backup",
            Scenario::Redact => "redact",
            Scenario::Certs => "certs",
            Scenario::Subs => "subs",
            Scenario::Projections => "projections",
            Scenario::Survivor => "survivor",
            Scenario::Scavenge => "scavenge",
        }
    }

    /// Parses a [`Scenario::name`].
    pub fn parse(s: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Whether the scenario's checks need the acknowledged log intact (its runs leave out the
    /// fault kinds that destroy committed data).
    pub fn keeps_data(self) -> bool {
        self != Scenario::Faults
    }

    /// Whether the scenario runs on one node or, with `--cluster`, on a cluster (backup and
    /// redact run one node; certs, survivor and scavenge always run a cluster of three).
    pub fn clusters(self) -> bool {
        matches!(self, Scenario::Faults | Scenario::Subs | Scenario::Projections)
    }
}

impl Options {
    /// The campaign's quick run: 8 s of workload, 8 clients on 4 hosts, one node.
    pub fn quick(seed: u64) -> Options {
        Options {
            seed,
            duration: Duration::from_secs(8),
            clients: 8,
            client_hosts: 4,
            tick: Duration::from_millis(5),
            bugs: Vec::new(),
            budget: 1_000_000,
            nodes: 1,
            cluster: false,
            replica: false,
            deploy: false,
            scenario: Scenario::Faults,
        }
    }

    /// The quick run of `scenario`: one node, or for [`Scenario::Certs`] and
    /// [`Scenario::Survivor`] a cluster of three.
    pub fn with_scenario(seed: u64, scenario: Scenario) -> Options {
        match scenario {
            Scenario::Certs | Scenario::Scavenge => Options { scenario, ..Options::cluster(seed, 3) },
            // Room for two or three rounds, each with its recovery; four clients a member keep
            // the writes coming and the linearizability search within its budget.
            Scenario::Survivor => Options {
                scenario,
                duration: Duration::from_secs(30),
                clients: 4,
                client_hosts: 2,
                ..Options::cluster(seed, 3)
            },
            _ => Options { scenario, ..Options::quick(seed) },
        }
    }

    /// The quick run as one cluster of `n` members: 10 s of workload, 8 clients on 4 hosts per
    /// member.
    pub fn cluster(seed: u64, n: usize) -> Options {
        Options { nodes: n, cluster: true, duration: Duration::from_secs(10), ..Options::quick(seed) }
    }

    /// The quick run on three node hosts, each with its own clients (8 on 4 hosts).
    pub fn three_nodes(seed: u64) -> Options {
        Options { nodes: 3, ..Options::quick(seed) }
    }

    /// The standard scenario: 60 s of workload, 16 clients on 4 hosts.
    pub fn standard(seed: u64) -> Options {
        Options { duration: Duration::from_secs(60), clients: 16, ..Options::quick(seed) }
    }

    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        let mut s = format!(
            "cargo run --release -p annal-sim -- run --seed {} --duration {} --clients {} --hosts {} --tick-ms {}",
            self.seed,
            self.duration.as_secs(),
            self.clients,
            self.client_hosts,
            self.tick.as_millis()
        );
        if self.cluster {
            s.push_str(&format!(" --cluster {}", self.nodes));
            if self.replica {
                s.push_str(" --replica");
            }
            if self.deploy {
                s.push_str(" --deploy");
            }
        } else if self.nodes != 1 {
            s.push_str(&format!(" --nodes {}", self.nodes));
        }
        if self.scenario != Scenario::Faults {
            s.push_str(&format!(" --scenario {}", self.scenario.name()));
        }
        if self.budget != Options::quick(self.seed).budget {
            s.push_str(&format!(" --budget {}", self.budget));
        }
        for b in &self.bugs {
            s.push_str(&format!(" --bug {}", b.name()));
        }
        s
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct RunResult {
    /// The options.
    pub options: Options,
    /// Each node host's name and fault plan.
    pub plans: Vec<(String, FaultPlan)>,
    /// Violations (empty: the seed passed); with several nodes, each names its host.
    pub failures: Vec<String>,
    /// The trace.
    pub trace: Vec<String>,
    /// Client operations completed.
    pub ops: u64,
    /// Node starts (attempts included).
    pub boots: u64,
    /// Disk faults injected.
    pub disk_faults: u64,
    /// Simulated time at the end.
    pub sim_time: Duration,
    /// Streams whose linearizability search ran out of budget (`node2/s1` with several nodes):
    /// the run is then neither a pass nor a failure of that check (every other check still
    /// counts).
    pub inconclusive: Vec<String>,
    /// Steps the linearizability search took, over all streams.
    pub check_steps: u64,
    /// Wall-clock time of the checks (not part of the trace).
    pub check_wall: Duration,
}

impl RunResult {
    /// Whether the seed passed (no violation found; see [`RunResult::inconclusive`]).
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The verdict in a few words: "passed", "passed the other checks; linearizability
    /// inconclusive …" or "FAILED".
    pub fn verdict(&self) -> String {
        match (self.passed(), self.inconclusive.is_empty()) {
            (false, _) => "FAILED".into(),
            (true, true) => "passed".into(),
            (true, false) => format!(
                "passed the other checks; linearizability inconclusive (search budget of {} steps \
                 per stream spent) on {}",
                self.options.budget,
                self.inconclusive.join(" ")
            ),
        }
    }

    /// The failure report: replay command, failures, fault schedules.
    pub fn report(&self) -> String {
        let mut s = format!("FAILED seed {}; replay: {}\n", self.options.seed, self.options.replay_command());
        for f in &self.failures {
            s.push_str(&format!("  * {f}\n"));
        }
        for (host, plan) in &self.plans {
            if self.plans.len() == 1 {
                s.push_str(&format!("fault plan of seed {}:\n{plan}", self.options.seed));
            } else {
                s.push_str(&format!("fault plan of {host} (seed {}):\n{plan}", self.options.seed));
            }
        }
        s
    }
}

/// Something scheduled: an action of one node host, or a partition between two node hosts.
enum Item {
    Node(usize, Action),
    Cut(usize, usize, Duration),
    Mend(usize, usize),
    MendAll,
    NetBegin(crate::network::NetFault),
    NetEnd(Vec<crate::network::LinkFault>),
    NetHeal,
    /// The operator asks whoever leads to resign (`POST /admin/node/resign`).
    Resign,
    /// The operator stops a member gracefully (`POST /admin/shutdown`): the leader if `true` and
    /// there is one, else a follower (the deploy runs).
    Stop(bool),
    /// A redaction attempt on node 0 (the redaction scenario).
    Redact,
    /// Node `k` is rolled to the second generation of certificates (the rollover scenario).
    Roll(usize),
    /// A bad certificate reload of node `k` (the rollover scenario).
    BadReload(usize, crate::rollover::Bad),
}

/// The partitions between node hosts of a run of `nodes`: a few, each between two random hosts,
/// for up to 3 s, inside the workload phase (none with one node).
fn cuts(seed: u64, nodes: usize, duration: Duration) -> Vec<(u64, Item)> {
    if nodes < 2 {
        return Vec::new();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc075_0000_0000_0005);
    let end = duration.as_micros() as u64;
    (0..rng.gen_range(1..=4))
        .map(|_| {
            let a = rng.gen_range(0..nodes);
            let b = (a + rng.gen_range(1..nodes)) % nodes;
            let span = Duration::from_millis(rng.gen_range(100..3000));
            (rng.gen_range(0..end), Item::Cut(a.min(b), a.max(b), span))
        })
        .collect()
}

/// The hook through which a single node reports each acknowledged group
/// ([`crate::checker::acks`]): records what a power loss would leave of `writer.chk` and of the
/// group's bytes at that instant.
fn ack_hook(rig: &Rig, acks: Rc<RefCell<Vec<crate::checker::acks::Ack>>>) -> annal::buggify::AckHook {
    let (mem, shared, chunk) = (rig.mem.clone(), rig.shared.clone(), rig.config.chunk_size);
    let (dir, header) = (rig.config.db.clone(), annal::log::chunk::HEADER_SIZE);
    Box::new(move |start: u64, end: u64| {
        let checkpoint = mem
            .durable_files(&dir.join("writer.chk"))
            .first()
            .and_then(|(_, b)| b.get(..8).map(|v| i64::from_le_bytes(v.try_into().unwrap_or_default())));
        let mut data_durable = Some(true);
        let mut pos = start;
        while pos < end && data_durable == Some(true) {
            let n = pos / chunk;
            let upto = end.min((n + 1) * chunk);
            let path = dir.join(annal::log::chunk::file_name(n as u32, 0));
            data_durable = mem.durable_matches(&path, header + pos - n * chunk, upto - pos);
            pos = upto;
        }
        let at = turmoil::sim_elapsed().map_or(0, |d| d.as_micros() as u64);
        acks.borrow_mut().push(crate::checker::acks::Ack {
            at,
            boot: shared.boots.get(),
            start,
            end,
            checkpoint,
            data_durable,
        });
    })
}

/// Runs one seed on this thread.
pub fn run(opts: &Options) -> RunResult {
    let seed = opts.seed;
    let nodes = opts.nodes.max(1);
    let hosts = nodes + usize::from(opts.cluster && opts.replica);
    let trace = Rc::new(Trace::default());
    let mut rigs: Vec<Rig> = (0..hosts).map(|k| Rig::new(seed, k, hosts, opts, trace.clone())).collect();
    if opts.cluster {
        form_cluster(&mut rigs, nodes, opts.clients);
    }
    let deploy = opts.cluster && opts.deploy;
    if deploy {
        for m in rigs.iter_mut().filter_map(|r| r.membership.as_mut()) {
            m.dns = true;
        }
    }
    let mut rollover =
        (opts.scenario == Scenario::Certs).then(|| crate::rollover::Rollover::new(seed, nodes));
    if let Some(roll) = &rollover {
        for r in rigs.iter_mut() {
            r.config.tls = Some(crate::rollover::settings());
            r.workload.tls = Some(roll.client_config());
        }
    }
    let names: Vec<String> = rigs.iter().map(|r| r.name.clone()).collect();
    annal::env::sim::set_dns(deploy.then(|| crate::deploy::resolver(seed, names.clone())));
    crate::panics::begin();
    let buggify = rigs[0].plan.has(FaultKind::Buggify);
    if buggify {
        annal::buggify::enable(seed);
    } else {
        annal::buggify::disable();
    }
    annal::buggify::set_bugs(&opts.bugs);
    // A single node reports each group it acknowledges: what the disk holds durably then.
    let acks: Rc<RefCell<Vec<crate::checker::acks::Ack>>> = Rc::default();
    if hosts == 1 {
        annal::buggify::on_acknowledged(Some(ack_hook(&rigs[0], acks.clone())));
    }

    let mut sim = sim_builder(opts, seed, rigs[0].base_latency).build();
    for r in &rigs {
        r.start(&mut sim);
    }
    for r in &rigs {
        r.start_clients(&mut sim, opts.clients);
        r.set_base_latency(&sim);
    }
    if let Some(roll) = &mut rollover {
        roll.install(&sim, &rigs);
        roll.start_intruder(&mut sim, &rigs, opts.duration.as_micros() as u64);
    }
    let stops = deploy.then(|| {
        let stops = crate::deploy::Stops::default();
        crate::deploy::start(&mut sim, names.clone(), stops.clone(), rigs[0].shared.clone());
        stops
    });
    let backups = (opts.scenario == Scenario::Backup)
        .then(|| crate::maintenance::start_copier(&mut sim, &rigs[0], opts.duration));
    let subs = (opts.scenario == Scenario::Subs).then(|| crate::subs::start(&mut sim, &rigs, opts.duration));
    let scavenges = (opts.scenario == Scenario::Scavenge)
        .then(|| crate::scavenges::start(&mut sim, &rigs, opts.duration));
    let js_seen = (opts.scenario == Scenario::Projections)
        .then(|| crate::projections::start(&mut sim, &rigs, opts.duration));
    let mut redactions = Vec::new();
    let mut redactor = ChaCha8Rng::seed_from_u64(seed ^ 0x4ed4_0000_0000_000a);

    let mut queue: BTreeMap<(u64, u64), Item> = BTreeMap::new();
    let mut seq = 0u64;
    let mut at = |queue: &mut BTreeMap<(u64, u64), Item>, t: u64, item: Item| {
        seq += 1;
        queue.insert((t, seq), item);
    };
    for (k, r) in rigs.iter().enumerate() {
        for (t, ev) in &r.plan.events {
            at(&mut queue, t.as_micros() as u64, Item::Node(k, Action::Fault(ev.clone())));
        }
    }
    let end = opts.duration.as_micros() as u64;
    let survivor = opts.scenario == Scenario::Survivor;
    // The recovery scenario runs its pipelines' stages late now and then (one in eight, by up to
    // 40 ms), so that syncs and wake-ups meet elections, truncations and restarts in every order.
    annal::env::sim::late_jobs(
        survivor.then(|| {
            crate::rig::random_delays(seed ^ 0x1a7e_0000_0000_000e, 0.125, Duration::from_millis(40))
        }),
    );
    let mut rounds = survivor.then(|| crate::survivor::Rounds::new(seed, opts.duration));
    if opts.cluster && !survivor {
        for (t, f) in crate::network::plan(seed, &names, opts.duration) {
            at(&mut queue, t, Item::NetBegin(f));
        }
        at(&mut queue, end, Item::NetHeal);
        // One seed in three: the leader is asked to resign, once or twice, during the workload.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7e51_6000_0000_0009);
        if rng.gen_ratio(1, 3) {
            for _ in 0..rng.gen_range(1..=2) {
                at(&mut queue, rng.gen_range(0..end), Item::Resign);
            }
        }
    } else if opts.cluster {
        at(&mut queue, end, Item::NetHeal);
    } else {
        for (t, cut) in cuts(seed, nodes, opts.duration) {
            at(&mut queue, t, cut);
        }
        if nodes > 1 {
            at(&mut queue, end, Item::MendAll);
        }
    }
    for k in 0..hosts {
        at(&mut queue, end, Item::Node(k, Action::Heal));
    }
    if deploy {
        for (t, leader) in crate::deploy::plan(seed, opts.duration) {
            at(&mut queue, t, Item::Stop(leader));
        }
    }
    let mut stopper = ChaCha8Rng::seed_from_u64(seed ^ 0xd25d_0000_0000_0012);
    if rollover.is_some() {
        // Roll 1: every member in a seeded order, from a seeded time in the workload's first half;
        // and a few bad reloads.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xce27_0000_0000_000b);
        let mut order: Vec<usize> = (0..nodes).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.gen_range(0..=i));
        }
        let mut t = rng.gen_range(end / 8..end / 2);
        for k in order {
            at(&mut queue, t, Item::Roll(k));
            t += rng.gen_range(300_000..2_000_000);
        }
        for _ in 0..rng.gen_range(2..=4) {
            let bad = [
                crate::rollover::Bad::MissingKey,
                crate::rollover::Bad::KeyMismatch,
                crate::rollover::Bad::Expired,
                crate::rollover::Bad::WrongCa,
            ][rng.gen_range(0..4)];
            at(&mut queue, rng.gen_range(0..end), Item::BadReload(rng.gen_range(0..nodes), bad));
        }
    }
    if opts.scenario == Scenario::Redact {
        let mut t = 0u64;
        loop {
            t += redactor.gen_range(300_000..1_500_000);
            if t >= end {
                break;
            }
            at(&mut queue, t, Item::Redact);
        }
    }
    let mut cut_count: BTreeMap<(usize, usize), u32> = BTreeMap::new();
    let mut links = crate::network::Links::default();
    let mut election_crashes = ChaCha8Rng::seed_from_u64(seed ^ 0xe1ec_0000_0000_0007);
    let mut watch = Watch::default();
    let mut failures = Vec::new();
    let mut next_check = 1_000_000u64;
    loop {
        let now = sim.elapsed().as_micros() as u64;
        while let Some(entry) = queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            match entry.remove() {
                Item::Node(k, a) => {
                    if matches!(a, Action::Heal) {
                        // Pending restarts and window ends of this host are dropped: it restarts now.
                        queue.retain(|_, i| !matches!(i, Item::Node(j, _) if *j == k));
                    }
                    if let Some((t, next)) = rigs[k].apply(&mut sim, now, a) {
                        at(&mut queue, t, Item::Node(k, next));
                    }
                }
                Item::Cut(a, b, span) => {
                    let n = cut_count.entry((a, b)).or_default();
                    *n += 1;
                    if *n == 1 {
                        sim.partition(rigs[a].name.as_str(), rigs[b].name.as_str());
                    }
                    trace.at(
                        now,
                        "net",
                        format!("{} and {} partitioned for {span:?}", rigs[a].name, rigs[b].name),
                    );
                    at(&mut queue, now + span.as_micros() as u64, Item::Mend(a, b));
                }
                Item::Mend(a, b) => {
                    let n = cut_count.entry((a, b)).or_default();
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        sim.repair(rigs[a].name.as_str(), rigs[b].name.as_str());
                        trace.at(now, "net", format!("{} and {} reconnected", rigs[a].name, rigs[b].name));
                    }
                }
                Item::MendAll => {
                    for (&(a, b), n) in cut_count.iter_mut() {
                        if *n > 0 {
                            sim.repair(rigs[a].name.as_str(), rigs[b].name.as_str());
                            *n = 0;
                        }
                    }
                    queue.retain(|_, i| !matches!(i, Item::Mend(..) | Item::Cut(..)));
                }
                Item::NetBegin(f) => {
                    let applied = links.begin(&mut sim, &names, &f);
                    trace.at(now, "net", format!("{} for {:?}", f.what, f.span));
                    at(&mut queue, now + f.span.as_micros() as u64, Item::NetEnd(applied));
                }
                Item::NetEnd(applied) => {
                    links.end(&mut sim, &names, &applied);
                    trace.at(now, "net", format!("link faults over: {applied:?}"));
                }
                Item::Resign => {
                    for r in &rigs {
                        let Some(node) = r.shared.node.borrow().clone() else { continue };
                        let Some(cluster) = node.cluster() else { continue };
                        if cluster.status().state == annal::cluster::VNodeState::Master {
                            let answer = cluster.resign();
                            r.note(now, format!("operator: resign the leadership -> {answer:?}"));
                        }
                    }
                }
                Item::Roll(k) => {
                    if let Some(roll) = &mut rollover {
                        if !roll.roll(&rigs[k], k, 1, now) {
                            at(&mut queue, now + 300_000, Item::Roll(k));
                        }
                    }
                }
                Item::BadReload(k, bad) => {
                    if let Some(roll) = &mut rollover {
                        roll.bad_reload(&rigs[k], k, bad, now);
                    }
                }
                Item::Stop(want_leader) => {
                    let leads = |r: &Rig| {
                        r.node_up
                            && r.shared
                                .node
                                .borrow()
                                .as_ref()
                                .and_then(|n| n.cluster())
                                .is_some_and(|c| c.status().state == annal::cluster::VNodeState::Master)
                    };
                    let leader = rigs[..nodes].iter().position(leads);
                    let up: Vec<usize> =
                        (0..nodes).filter(|k| rigs[*k].node_up && Some(*k) != leader).collect();
                    let pick = match (want_leader, leader) {
                        (true, Some(k)) => Some(k),
                        _ if up.is_empty() => None,
                        _ => Some(up[stopper.gen_range(0..up.len())]),
                    };
                    let what = if want_leader { "the leader" } else { "a follower" };
                    trace.at(now, "deploy", format!("stop {what}: leader {leader:?}, chosen {pick:?}"));
                    if let (Some(k), Some(stops)) = (pick, &stops) {
                        stops.ask(k, Some(k) == leader, rigs[k].shared.boots.get());
                    }
                }
                Item::Redact => {
                    if let Some(case) = crate::maintenance::redact_once(&rigs[0], &mut redactor, now) {
                        redactions.push(case);
                    }
                }
                Item::NetHeal => {
                    links.heal(&mut sim, &names);
                    queue.retain(|_, i| !matches!(i, Item::NetBegin(..) | Item::NetEnd(..)));
                    trace.at(now, "net", "healing: every link between members is healthy");
                }
            }
        }
        if now >= next_check && rigs.iter().any(|r| !r.shared.healed.get()) {
            next_check = now + 1_000_000;
            for (k, r) in rigs.iter_mut().enumerate() {
                if !r.shared.healed.get() && r.node_up && r.poisoned() {
                    r.note(now, "supervisor: the node is read-only after a storage failure; restarting it");
                    r.crash(&mut sim, now, false, false);
                    at(&mut queue, now + 200_000, Item::Node(k, Action::Restart));
                }
            }
        }
        let step = sim.step();
        for r in &rigs {
            r.drain_disk_log(now);
        }
        if let Some(stops) = &stops {
            // A member whose process ended after a graceful stop comes back after a moment.
            let at_now = sim.elapsed().as_micros() as u64;
            for (k, r) in rigs.iter_mut().enumerate() {
                stops.interrupted(k, r.node_up, r.shared.boots.get());
                if r.node_up && !sim.is_host_running(r.name.as_str()) {
                    r.node_up = false;
                    *r.shared.node.borrow_mut() = None;
                    r.note(at_now, "the process ended (graceful stop)");
                    stops.ended(k, at_now);
                    at(
                        &mut queue,
                        at_now + stopper.gen_range(300_000..2_000_000),
                        Item::Node(k, Action::Restart),
                    );
                }
            }
        }
        if let Some(rec) = &subs {
            crate::subs::observe(&rigs, rec, sim.elapsed().as_micros() as u64);
        }
        if opts.cluster {
            let at_now = sim.elapsed().as_micros() as u64;
            let electing = watch.observe(&rigs, at_now);
            for k in electing.into_iter().filter(|_| !survivor) {
                // Election-time crashes: a member that just took part in an election is killed
                // and restarted at once, now and then (a vote must survive that).
                if at_now < end && rigs[k].node_up && election_crashes.gen_ratio(1, 4) {
                    rigs[k].note(at_now, "killed during an election");
                    rigs[k].crash(&mut sim, at_now, false, false);
                    let back = at_now + election_crashes.gen_range(5_000..300_000);
                    at(&mut queue, back, Item::Node(k, Action::Restart));
                }
            }
        }
        // After the observation: what a member showed in this step is recorded before a round
        // kills it.
        if let Some(r) = &mut rounds {
            let at_now = sim.elapsed().as_micros() as u64;
            if at_now < end {
                r.step(&mut sim, &mut rigs, at_now);
            } else {
                r.finish(&mut sim, &mut rigs, at_now);
            }
        }
        if crate::panics::seen() > 0 {
            break;
        }
        match step {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                failures.push(format!("the simulation stopped: {e}"));
                break;
            }
        }
    }
    let subs_stream = subs.as_ref().and_then(|_| crate::subs::final_stream(&rigs));
    let projected = (opts.scenario == Scenario::Projections && crate::panics::seen() == 0)
        .then(|| crate::projections::Outcome::read(&rigs));
    let mut logs = Vec::new();
    if opts.cluster && failures.is_empty() && crate::panics::seen() == 0 {
        // Let followers catch up with the leader (bounded), then read every member's committed log.
        let settle = sim.elapsed() + SETTLE;
        while sim.elapsed() < settle && !watch.settled(&rigs) && crate::panics::seen() == 0 {
            if let Err(e) = sim.step() {
                failures.push(format!("the simulation stopped while the cluster settled: {e}"));
                break;
            }
            let _ = watch.observe(&rigs, sim.elapsed().as_micros() as u64);
        }
        if let Some(roll) = &mut rollover {
            if watch.settled(&rigs) {
                failures.extend(roll_after_healing(roll, &rigs, &mut sim, &mut watch, seed));
            }
        }
        // Past the newest scavenge point (0 without scavenges), where no member's scavenge has
        // removed anything.
        let from = if scavenges.is_some() { crate::scavenges::frontier(&rigs) } else { 0 };
        logs = rigs.iter().filter_map(|r| committed_log(r, from)).collect();
    }
    // Members that may vote at the end: intact ones, except those that never voted nor received a
    // record (to the protocol they look wiped, and a wiped member votes only after it has
    // followed a leader, so they cannot help elect the first one) — unless every member looks
    // so: that is a new cluster, whose members vote for each other.
    // (A member that is not running counts as a voter that kept its data, unless it is a new
    // cluster's: then only the running members are asked whether they are all empty.)
    let used = |r: &&crate::rig::Rig| match r.shared.node.borrow().as_ref() {
        Some(n) => n.store().log().durable() > 0 || n.store().log().checkpoints.proposal.read() > 0,
        None => true,
    };
    let new_cluster = !rigs[..nodes].iter().filter(|r| r.shared.node.borrow().is_some()).any(|r| used(&r));
    let voters =
        rigs[..nodes].iter().filter(|r| !r.plan.destructive()).filter(|r| new_cluster || used(r)).count();
    let scavenged = scavenges.as_ref().map(|rec| {
        let asked = rec.borrow().clone();
        let outcome = crate::scavenges::Outcome::read(&rigs, &asked);
        (asked, outcome)
    });
    let sim_time = sim.elapsed();
    drop(sim);
    if let Some(stops) = &stops {
        let done = stops.done.borrow();
        let acked = |s: &&crate::deploy::Stop| s.answer.is_some_and(|a| (200..300).contains(&a));
        let count =
            |f: &dyn Fn(&&crate::deploy::Stop) -> bool| done.iter().filter(|s| acked(s) && f(s)).count();
        trace.at(
            sim_time.as_micros() as u64,
            "deploy",
            format!(
                "graceful stops: {} asked, {} acknowledged, {} ended ({} of a leader), {} cut short by a kill",
                done.len(),
                count(&|_| true),
                count(&|s| s.ended.is_some()),
                count(&|s| s.ended.is_some() && s.leader),
                count(&|s| s.interrupted),
            ),
        );
        failures.extend(crate::deploy::check(&done, &names, sim_time.as_micros() as u64));
    }
    let mut panicked = crate::checker::no_panic::check(&crate::panics::end());
    panicked.append(&mut failures);
    failures = panicked;
    let (sites, fired) = annal::buggify::report();
    if buggify {
        let active: Vec<&str> = sites.iter().filter(|(_, a)| *a).map(|(s, _)| *s).collect();
        trace.at(
            sim_time.as_micros() as u64,
            "sim",
            format!("buggify: {} sites reached, active {active:?}, fired {fired} times", sites.len()),
        );
    }
    annal::buggify::disable();
    annal::env::sim::late_jobs(None);
    annal::env::sim::set_dns(None);
    annal::buggify::set_bugs(&[]);
    annal::buggify::on_acknowledged(None);
    failures.extend(crate::checker::acks::check(&acks.borrow()));
    crate::checker::redaction::accept_redacted(&mut rigs[0].shared.history.borrow_mut(), &redactions);
    let (mut inconclusive, mut check_steps) = (Vec::new(), 0);
    let ((), check_wall) = timed(|| {
        if opts.cluster {
            // One history for the cluster: check it once, then the cluster's own invariants.
            let r = &rigs[0];
            let history = r.shared.history.borrow();
            let finals = r.shared.final_reads.borrow();
            // A leader after healing is required while a quorum of voters kept its data; answered
            // final reads only when every member did (a member whose index was destroyed may be elected
            // and then rightly refuse to serve).
            let destroyed = rigs.iter().filter(|r| r.plan.destructive()).count();
            let electable = voters > nodes / 2; // a quorum
            let report =
                crate::checker::check(&history, &finals, r.workload.streams, destroyed == 0, opts.budget);
            failures.extend(report.failures);
            inconclusive.extend(report.inconclusive);
            check_steps += report.steps;
            // Every running member ready after healing, unless a member's data was destroyed (a
            // leader with an unreadable sector cannot ship it to a follower that needs it), or
            // members scavenged (a follower whose log ends inside a chunk its leader scavenged
            // is refused, by design, until an operator restores it from a backup).
            let running: std::collections::BTreeSet<String> = rigs[..nodes]
                .iter()
                .filter(|r| r.shared.node.borrow().is_some())
                .map(|r| r.name.clone())
                .collect();
            let ready_after = (destroyed == 0 && scavenged.is_none()).then_some(&running);
            failures.extend(crate::checker::check_cluster(&watch.seen, &logs, end, electable, ready_after));
            if let Some(rounds) = &rounds {
                r.shared.note(
                    sim_time.as_micros() as u64,
                    "sim",
                    format!("rounds: {:?}; {} recoveries", rounds.begun, rounds.recoveries.len()),
                );
                failures.extend(crate::checker::writes_resume::check(&history, &rounds.recoveries, end));
            }
            if let Some((asked, outcome)) = &scavenged {
                let started = outcome.histories.len();
                let completed = outcome
                    .histories
                    .iter()
                    .filter(|h| h.types.iter().any(|t| t == "$scavengeCompleted"))
                    .count();
                let on_followers = asked
                    .iter()
                    .filter(|a| matches!(a.answer, Some((200, _))))
                    .filter(|a| {
                        let name = &rigs[a.member].name;
                        let seen = watch.seen.iter().rev().find(|o| o.at <= a.at && &o.node == name);
                        seen.is_some_and(|o| !o.master)
                    })
                    .count();
                r.shared.note(
                    sim_time.as_micros() as u64,
                    "sim",
                    format!(
                        "scavenges: {} asked, {started} started, {on_followers} on members that did not lead, \
                         {completed} completed",
                        asked.len()
                    ),
                );
                failures.extend(crate::checker::scavenges::check(asked, outcome, destroyed == 0));
            }
            if let Some(roll) = &rollover {
                failures.extend(crate::rollover::check_intruder(&watch.seen));
                failures.extend(roll.failures.iter().cloned());
                r.shared.note(
                    sim_time.as_micros() as u64,
                    "sim",
                    format!("certificates: {} reloads, {} bad reloads refused", roll.reloads, roll.refused),
                );
            }
            return;
        }
        for r in &rigs {
            let history = r.shared.history.borrow();
            let finals = r.shared.final_reads.borrow();
            let report = crate::checker::check(
                &history,
                &finals,
                r.workload.streams,
                !r.plan.destructive(),
                opts.budget,
            );
            let tag = |s: String| if nodes == 1 { s } else { format!("{}: {s}", r.name) };
            failures.extend(report.failures.into_iter().map(tag));
            inconclusive.extend(report.inconclusive.into_iter().map(|s| {
                if nodes == 1 {
                    s
                } else {
                    format!("{}/{s}", r.name)
                }
            }));
            check_steps += report.steps;
        }
    });
    if let Some(rec) = &subs {
        let restarts: Vec<u64> = rigs[0]
            .shared
            .history
            .borrow()
            .ops
            .iter()
            .filter(|o| matches!(o.kind, crate::history::OpKind::Restart))
            .map(|o| o.invoke)
            .collect();
        let report = crate::checker::subscriptions::check(&rec.borrow(), subs_stream.as_deref(), &restarts);
        trace.at(sim_time.as_micros() as u64, "sim", &report.summary);
        failures.extend(report.failures);
    }
    match projected {
        Some(Ok(outcome)) => {
            let report = crate::checker::projections::check(&outcome.log, &outcome.outputs);
            trace.at(sim_time.as_micros() as u64, "sim", &report.summary);
            failures.extend(report.failures);
            if let Some(seen) = &js_seen {
                let report =
                    crate::checker::projections::check_js(&outcome.log, &seen.borrow(), &outcome.emitted);
                trace.at(sim_time.as_micros() as u64, "sim", &report.summary);
                failures.extend(report.failures);
            }
        }
        Some(Err(e)) => failures.push(format!("projections: the node could not be read at the end: {e}")),
        None => {}
    }
    {
        // The maintenance scenarios' own checks, on node 0 (their runs have one node).
        let r = &rigs[0];
        let history = r.shared.history.borrow();
        let source = r.shared.node.borrow().clone();
        if let Some(taken) = &backups {
            let taken = taken.borrow();
            let report =
                crate::checker::backup::check(&taken, &history, &r.config, r.workload.streams, source);
            trace.at(sim_time.as_micros() as u64, "sim", &report.summary);
            failures.extend(report.failures);
        } else if opts.scenario == Scenario::Redact {
            let report = crate::checker::redaction::check(&redactions, &r.config, r.workload.streams);
            trace.at(sim_time.as_micros() as u64, "sim", &report.summary);
            failures.extend(report.failures);
        }
    }
    RunResult {
        options: opts.clone(),
        plans: rigs.iter().map(|r| (r.name.clone(), r.plan.clone())).collect(),
        failures,
        trace: trace.lines(),
        ops: if opts.cluster {
            rigs[0].shared.ops_done.get()
        } else {
            rigs.iter().map(|r| r.shared.ops_done.get()).sum()
        },
        boots: rigs.iter().map(|r| r.shared.boots.get()).sum(),
        disk_faults: rigs.iter().map(|r| r.faults.injected()).sum(),
        sim_time,
        inconclusive,
        check_steps,
        check_wall,
    }
}

/// Roll 2 of the rollover scenario, on the settled cluster after healing: every member in a
/// seeded order to the third generation; then, after the reset interval, the cluster must
/// converge within [`crate::rollover::CONVERGE_WITHIN`].
fn roll_after_healing(
    roll: &mut crate::rollover::Rollover,
    rigs: &[Rig],
    sim: &mut turmoil::Sim,
    watch: &mut Watch,
    seed: u64,
) -> Vec<String> {
    use crate::rollover::{CONVERGE_FROM, CONVERGE_WITHIN, PEER_RESET};
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xce27_0000_0000_000c);
    let mut order: Vec<usize> = (0..roll.generation.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    let step_until =
        |sim: &mut turmoil::Sim, watch: &mut Watch, until: Duration, stop: &dyn Fn(&Watch) -> bool| {
            while sim.elapsed() < until {
                if let Err(e) = sim.step() {
                    return Err(format!("the simulation stopped during the certificate rollover: {e}"));
                }
                let _ = watch.observe(rigs, sim.elapsed().as_micros() as u64);
                if stop(watch) {
                    break;
                }
            }
            Ok(())
        };
    for k in order {
        loop {
            let now = sim.elapsed().as_micros() as u64;
            if roll.roll(&rigs[k], k, 2, now) {
                break;
            }
            let until = sim.elapsed() + Duration::from_millis(300);
            if let Err(e) = step_until(sim, watch, until, &|_| false) {
                return vec![e];
            }
        }
        let until = sim.elapsed() + Duration::from_millis(rng.gen_range(50..400));
        if let Err(e) = step_until(sim, watch, until, &|_| false) {
            return vec![e];
        }
    }
    let last = sim.elapsed();
    let from = last + PEER_RESET + CONVERGE_FROM;
    if let Err(e) = step_until(sim, watch, from, &|_| false) {
        return vec![e];
    }
    let deadline = last + PEER_RESET + CONVERGE_WITHIN;
    if let Err(e) = step_until(sim, watch, deadline, &|w| w.settled(rigs)) {
        return vec![e];
    }
    let at = sim.elapsed();
    if watch.settled(rigs) {
        rigs[0].shared.note(
            at.as_micros() as u64,
            "sim",
            format!(
                "certificates: rolled everywhere after healing; converged {:?} after the last reload",
                at - last
            ),
        );
        Vec::new()
    } else {
        vec![format!(
            "converges after the rollover: every member reloaded the third generation by {:.3} s, and by {:.3} s \
             (the reset interval of {PEER_RESET:?} plus {CONVERGE_WITHIN:?}) no leader was followed by every member",
            last.as_secs_f64(),
            deadline.as_secs_f64()
        )]
    }
}

/// How long a cluster run may go on after its clients are done, for followers to catch up.
const SETTLE: Duration = Duration::from_secs(10);

/// Makes `rigs` one cluster of `size` members (any further rig is a read-only replica): one
/// history (rig 0's), the same streams and chunk size everywhere, client numbers that do not
/// collide, each member's peers.
pub(crate) fn form_cluster(rigs: &mut [Rig], size: usize, clients: usize) {
    let names: Vec<String> = rigs.iter().map(|r| r.name.clone()).collect();
    let first = rigs[0].shared.clone();
    let (streams, chunk) = (rigs[0].workload.streams, rigs[0].config.chunk_size);
    for (k, r) in rigs.iter_mut().enumerate() {
        let peers =
            names.iter().take(size).enumerate().filter(|(j, _)| *j != k).map(|(_, n)| n.clone()).collect();
        r.config.chunk_size = chunk;
        let m = crate::rig::Membership { size, peers, replica: k >= size, dns: false };
        r.join(m, &first, k * clients.max(1), streams, names.clone());
    }
}

/// A member as last seen: master, leading, term, published, commit, ready, ready as the leader.
type Seen = (bool, bool, u64, u64, u64, bool, bool);

/// What the harness sees of a cluster's members after every step: the observations the cluster
/// checkers run on (recorded when a member's state, term or published position changes), and the
/// terms seen led (a new leader forgets the ids its predecessor's idempotency memory held, so the
/// shared history records a restart then, as it does for a crash).
#[derive(Default)]
struct Watch {
    seen: Vec<crate::checker::Observation>,
    last: BTreeMap<usize, Seen>,
    terms: std::collections::BTreeSet<u64>,
}

impl Watch {
    /// Records what changed; returns the members whose term rose while they were not leading
    /// (they just voted, or heard of an election).
    fn observe(&mut self, rigs: &[Rig], at: u64) -> Vec<usize> {
        let mut electing = Vec::new();
        for (k, r) in rigs.iter().enumerate() {
            let Some(node) = r.shared.node.borrow().clone() else {
                // A member that is down answers no probe: no longer ready (the rest as last seen).
                if let Some(last) = self.last.get_mut(&k).filter(|l| l.5) {
                    (last.5, last.6) = (false, false);
                    let (master, leading, term, published, commit, _, _) = *last;
                    self.seen.push(crate::checker::Observation {
                        at,
                        node: r.name.clone(),
                        master,
                        leading,
                        term,
                        published,
                        commit,
                        ready: false,
                        ready_leader: false,
                        stopped: false,
                    });
                }
                continue;
            };
            let Some(cluster) = node.cluster() else { continue };
            let st = cluster.status();
            let master = st.state == annal::cluster::VNodeState::Master;
            let leading = master
                || matches!(
                    st.state,
                    annal::cluster::VNodeState::PreMaster | annal::cluster::VNodeState::ResigningLeader
                );
            let (ready, serving) = annal::http::node_info::readiness(&node);
            let ready_leader = ready && serving == annal::cluster::VNodeState::Master;
            let now =
                (master, leading, st.term, node.store().log().committed(), st.committed, ready, ready_leader);
            let before = self.last.insert(k, now);
            if before == Some(now) {
                continue;
            }
            if !leading && before.is_some_and(|(_, _, t, _, _, _, _)| t < st.term) {
                electing.push(k);
            }
            if before.is_none_or(|(_, l, t, _, _, _, _)| (l, t) != (leading, st.term)) {
                r.shared.note(at, "sim", format!("{} {} in term {}", r.name, st.state.name(), st.term));
            }
            if master && self.terms.insert(st.term) {
                r.shared.note(at, "sim", format!("{} leads term {}", r.name, st.term));
                r.shared.history.borrow_mut().restart(at);
            }
            self.seen.push(crate::checker::Observation {
                at,
                node: r.name.clone(),
                master,
                leading,
                term: st.term,
                published: now.3,
                commit: now.4,
                ready,
                ready_leader,
                stopped: st.state == annal::cluster::VNodeState::ShuttingDown,
            });
        }
        electing
    }

    /// Whether a leader exists and every running member published as far as it and is ready
    /// (or stopped after a local failure: it waits for an operator).
    fn settled(&self, rigs: &[Rig]) -> bool {
        let up: Vec<(bool, u64, bool)> = rigs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.shared.node.borrow().as_ref().is_some_and(|n| n.cluster().is_some()))
            .filter_map(|(k, _)| self.last.get(&k).map(|&(m, _, _, p, _, ready, _)| (m, p, ready)))
            .collect();
        let Some(lead) = up.iter().find(|(m, _, _)| *m).map(|&(_, p, _)| p) else { return false };
        let stopped = |r: &Rig| {
            r.shared.node.borrow().as_ref().and_then(|n| n.cluster().map(|c| c.state()))
                == Some(annal::cluster::VNodeState::ShuttingDown)
        };
        up.iter().all(|&(_, p, _)| p == lead)
            && rigs.iter().enumerate().all(|(k, r)| {
                r.shared.node.borrow().is_none() || stopped(r) || self.last.get(&k).is_none_or(|l| l.5)
            })
    }
}

/// A running member's committed log: its records' frames from 0 to its published position.
fn committed_log(r: &Rig, from: u64) -> Option<crate::checker::convergence::Committed> {
    let node = r.shared.node.borrow().clone()?;
    node.cluster()?;
    let log = node.store().log();
    let published = log.committed();
    let mut scan = log.scan_durable(from.min(published)).until(published);
    let mut frames = Vec::new();
    let mut error = None;
    while let Some(rec) = scan.next_with_frame() {
        match rec {
            Ok((_, f)) => frames.extend_from_slice(&f),
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    Some(crate::checker::convergence::Committed {
        node: r.name.clone(),
        published,
        frames: error.map_or(Ok(frames), Err),
    })
}

// Measures how long the checks take (a figure for the operator, never part of the trace).
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = std::time::Instant::now();
    let r = f();
    (r, t.elapsed())
}

pub(crate) fn sim_builder(opts: &Options, seed: u64, latency: Duration) -> turmoil::Builder {
    let mut b = turmoil::Builder::new();
    b.tick_duration(opts.tick)
        .simulation_duration(opts.duration + Duration::from_secs(90))
        .rng_seed(seed)
        .epoch(fixed_epoch())
        .min_message_latency(Duration::ZERO)
        .max_message_latency(latency);
    b
}

// turmoil's builder wants a `SystemTime`; a fixed one keeps runs independent of the real clock.
#[allow(clippy::disallowed_types)]
fn fixed_epoch() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}
