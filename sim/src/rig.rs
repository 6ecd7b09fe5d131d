//! One node host of a run and everything that belongs to it alone: its in-memory disk behind
//! `fault/`'s seeded faults, its clock (a seeded wall-clock base, so hosts' clocks are skewed
//! against each other, plus the plan's jumps), its fault plan, its node knobs and workload, its
//! client hosts, and the carrying out of its faults (crashes with torn writes, partitions and held
//! messages between it and its clients, latency on its links, disk trouble, full disk, bit rot,
//! latent sectors), then its healing.
//!
//! Invariants: a rig's randomness comes from its own seed ([`node_seed`]): node `k` of a run with
//! seed `s` draws from `node_seed(s, k)`, and node 0's seed is `s` itself, with the draws in the
//! order the single-node simulator always made them, so a single-node run of seed `s` is the run
//! it always was. Faults act on the rig's own host and links only; the one thing hosts share is
//! the simulation thread (BUGGIFY, bug switches, the halt after a panic are per thread, so per
//! run: see [`crate::scenario`]).

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use annal::config::Config;
use annal::env::mem::MemDisk;
use annal::env::sim::{IoDelay, SimClock};
use annal::env::{Disk, OpenMode};
use annal::node::Node;
use annal_fault::{DiskRates, FaultEvent, FaultKind, FaultPlan, SeededDisk, SeededFaults};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::shared::{Shared, Trace};
use crate::workload::{WorkloadConfig, PORT};

/// The seed of node `k` of a run with `seed`: `seed` itself for node 0.
pub fn node_seed(seed: u64, k: usize) -> u64 {
    if k == 0 {
        return seed;
    }
    let mut x = seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The host name of node `k` in a run of `nodes` nodes (`node` when there is one).
pub fn node_host(nodes: usize, k: usize) -> String {
    if nodes == 1 {
        "node".into()
    } else {
        format!("node{}", k + 1)
    }
}

/// The host name of client host `h` of node `k` in a run of `nodes` nodes (`c{h}` when there is
/// one node).
pub fn client_host(nodes: usize, k: usize, h: usize) -> String {
    if nodes == 1 {
        format!("c{h}")
    } else {
        format!("node{}-c{h}", k + 1)
    }
}

/// Node knobs the seed chooses.
fn node_config(rng: &mut ChaCha8Rng) -> Config {
    let mut c = Config::for_dir("/db");
    c.index = PathBuf::from("/db/index");
    c.http_ip = std::net::IpAddr::from([0, 0, 0, 0]);
    c.http_port = PORT;
    c.chunk_size = [4096, 8192, 16384, 65536][rng.gen_range(0..4)];
    c.memtable_max = [4, 16, 64, 4096][rng.gen_range(0..4)];
    c.max_index_tables = rng.gen_range(1..5);
    c.existence_filter_bytes = 4096;
    c.stream_cache_capacity = [1, 4, 1000][rng.gen_range(0..3)];
    c.password_iterations = 1;
    c
}

/// The replication port of a cluster's node hosts.
pub const REPLICATION_PORT: u16 = 1112;

/// A node host's part in a cluster: the cluster's size, the other members' host names, and
/// whether it is a read-only replica. Addresses are resolved at each boot (`turmoil::lookup`).
#[derive(Clone, Debug)]
pub struct Membership {
    /// The cluster size (read-only replicas not counted).
    pub size: usize,
    /// The other members' host names (their replication endpoints are the gossip seeds).
    pub peers: Vec<String>,
    /// Whether this host is a read-only replica.
    pub replica: bool,
    /// Whether the members find each other only through DNS ([`crate::deploy`]).
    pub dns: bool,
}

/// Something a rig does at a scheduled time.
pub enum Action {
    /// A fault of the plan.
    Fault(FaultEvent),
    /// The node restarts after a crash.
    Restart,
    /// A partition from client host `h` ends.
    EndPartition(usize),
    /// Held messages from and to client host `h` are released.
    EndHold(usize),
    /// Latency on the node's links goes back to normal.
    EndLatency,
    /// Disk trouble ends.
    EndDiskTrouble,
    /// The disk has room again.
    EndDiskFull,
    /// Every fault window closes; a last power loss and restart.
    Heal,
}

/// One node host.
pub struct Rig {
    /// The host's name.
    pub name: String,
    /// Its client hosts' names.
    pub clients: Vec<String>,
    /// Its seed ([`node_seed`]).
    pub seed: u64,
    /// What it shares with its clients.
    pub shared: Rc<Shared>,
    /// Its fault plan.
    pub plan: FaultPlan,
    /// Its node's knobs.
    pub config: Config,
    /// Its clients' workload.
    pub workload: WorkloadConfig,
    /// Its network latency when no fault is active.
    pub base_latency: Duration,
    /// Its disk, with faults.
    pub disk: Arc<dyn Disk>,
    /// Its clock.
    pub clock: Arc<SimClock>,
    /// Its simulated I/O latency.
    pub io_delay: Option<IoDelay>,
    /// Its disk's faults.
    pub faults: Arc<SeededFaults>,
    /// The disk under the faults (what survives a power loss is decided here).
    pub mem: Arc<MemDisk>,
    /// Power losses so far (a copier on the same machine dies with each).
    pub power_losses: Arc<std::sync::atomic::AtomicU64>,
    /// The tap under the node's disk, in the redaction scenario.
    pub tap: Option<Arc<crate::maintenance::Tap>>,
    rng: ChaCha8Rng,
    /// Whether the node is up (not crashed).
    pub node_up: bool,
    partitions: Vec<u32>,
    holds: Vec<u32>,
    latency: u32,
    trouble: u32,
    full: u32,
    /// Whether latency is the whole network's (one node: the simulator's historic behaviour) or
    /// set per link of this host.
    alone: bool,
    /// Its part in a cluster (`None`: an independent node).
    pub membership: Option<Membership>,
    /// The number of its first client in the run (clients of a cluster share one history).
    pub client_base: usize,
}

impl Rig {
    /// Node `k` of `nodes` in a run with `seed`, writing to `trace`.
    pub fn new(seed: u64, k: usize, nodes: usize, opts: &crate::Options, trace: Rc<Trace>) -> Rig {
        let seed = node_seed(seed, k);
        let name = node_host(nodes, k);
        let hosts = opts.client_hosts.max(1);
        let mut plan = FaultPlan::from_seed(seed, opts.duration, opts.client_hosts);
        if opts.scenario.keeps_data() {
            // The maintenance scenarios check the acknowledged log itself: no fault may destroy it.
            plan.kinds.retain(|k| !k.destructive());
            plan.events
                .retain(|(_, e)| !matches!(e, FaultEvent::BitRot { .. } | FaultEvent::LatentSector { .. }));
            (plan.disk.lost_write, plan.disk.misdirect) = (0.0, 0.0);
        }
        if opts.scenario == crate::scenario::Scenario::Survivor {
            // Its rounds are the faults (src/survivor.rs): a recovery must be one. Slow I/O and
            // BUGGIFY stay, to reorder syncs and wake-ups.
            plan.kinds.retain(|k| matches!(k, FaultKind::SlowIo));
            plan.kinds.push(FaultKind::Buggify);
            plan.events.clear();
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4a55_0000_0000_0001);
        let mut config = node_config(&mut rng);
        if opts.scenario == crate::scenario::Scenario::Projections {
            config.run_projections = annal::config::RunProjections::All;
            config.start_standard_projections = true;
        }
        let workload = WorkloadConfig {
            node: name.clone(),
            streams: rng.gen_range(2..9),
            duration: opts.duration,
            timeout: Duration::from_secs(3),
            think_max: Duration::from_millis(rng.gen_range(5..200)),
            pad_max: [100, 1000, 3000][rng.gen_range(0..3)],
            delete_permille: [0, 5, 20][rng.gen_range(0..3)],
            cluster: false,
            members: Vec::new(),
            tls: None,
        };
        let mem = Arc::new(MemDisk::default());
        let faults = SeededFaults::new(seed ^ 0xd15c_0000_0000_0002);
        let mut disk: Arc<dyn Disk> = Arc::new(SeededDisk::new(mem.clone(), faults.clone()));
        let tap = (opts.scenario == crate::scenario::Scenario::Redact).then(|| {
            let t = Arc::new(crate::maintenance::Tap::new(
                disk.clone(),
                mem.clone(),
                std::path::Path::new("/db"),
            ));
            disk = t.clone();
            t
        });
        let clock = SimClock::new(1_700_000_000_000_000 + (rng.gen_range(0..1_000_000i64) * 1_000_000));
        faults.set_clock(clock.clone());
        let io_delay: Option<IoDelay> =
            plan.io_delay.map(|(p, max)| random_delays(seed ^ 0x510e_0000_0000_0003, p, max));
        let tag = if nodes == 1 { "" } else { name.as_str() };
        let shared = Rc::new(Shared::new(trace, tag));
        let base_latency = Duration::from_millis(rng.gen_range(1..30));
        Rig {
            clients: (0..hosts).map(|h| client_host(nodes, k, h)).collect(),
            name,
            seed,
            shared,
            plan,
            config,
            workload,
            base_latency,
            disk,
            clock,
            io_delay,
            faults,
            mem,
            power_losses: Arc::default(),
            tap,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x7042_0000_0000_0004),
            node_up: true,
            partitions: vec![0; hosts],
            holds: vec![0; hosts],
            latency: 0,
            trouble: 0,
            full: 0,
            alone: nodes == 1,
            membership: None,
            client_base: 0,
        }
    }

    /// Makes this host a member of a cluster whose clients record into `history_of`'s history
    /// (the harness's shared history) as clients `client_base ..`, on `streams` streams.
    pub fn join(
        &mut self,
        membership: Membership,
        history_of: &Shared,
        client_base: usize,
        streams: usize,
        members: Vec<String>,
    ) {
        let tag = self.shared.host.clone();
        self.shared = Rc::new(Shared::joined(self.shared.trace.clone(), &tag, history_of));
        self.workload.cluster = true;
        self.workload.streams = streams;
        self.workload.members = members;
        self.membership = Some(membership);
        self.client_base = client_base;
    }

    /// Starts the node host.
    pub fn start(&self, sim: &mut turmoil::Sim) {
        let (shared, disk, clock, io_delay, config, seed) = (
            self.shared.clone(),
            self.disk.clone(),
            self.clock.clone(),
            self.io_delay.clone(),
            self.config.clone(),
            self.seed,
        );
        let (name, membership) = (self.name.clone(), self.membership.clone());
        sim.host(self.name.as_str(), move || {
            let member = membership.clone().map(|m| (name.clone(), m));
            node_main(
                shared.clone(),
                disk.clone(),
                clock.clone(),
                io_delay.clone(),
                config.clone(),
                member,
                seed,
            )
        });
    }

    /// Starts the client hosts (with `clients` clients spread over them).
    pub fn start_clients(&self, sim: &mut turmoil::Sim, clients: usize) {
        let hosts = self.clients.len();
        for (h, host) in self.clients.iter().enumerate() {
            let shared = self.shared.clone();
            let wl = self.workload.clone();
            let seed = self.seed;
            let base = self.client_base;
            let mine: Vec<usize> = (0..clients.max(1)).filter(|c| c % hosts == h).map(|c| base + c).collect();
            sim.client(host.as_str(), async move {
                let tasks: Vec<_> = mine
                    .into_iter()
                    .map(|c| {
                        tokio::task::spawn_local(crate::workload::client(c, seed, wl.clone(), shared.clone()))
                    })
                    .collect();
                for t in tasks {
                    t.await?;
                }
                Ok(())
            });
        }
    }

    /// Sets this host's links to their normal latency (several nodes: each has its own).
    pub fn set_base_latency(&self, sim: &turmoil::Sim) {
        if !self.alone {
            self.link_latency(sim, self.base_latency);
        }
    }

    fn link_latency(&self, sim: &turmoil::Sim, max: Duration) {
        if self.alone {
            sim.set_max_message_latency(max);
        } else {
            for c in &self.clients {
                sim.set_link_max_message_latency(self.name.as_str(), c.as_str(), max);
            }
        }
    }

    /// A trace line of the harness about this host.
    pub fn note(&self, now: u64, what: impl std::fmt::Display) {
        self.shared.note(now, "fault", what);
    }

    /// Copies the disk's fault log into the trace.
    pub fn drain_disk_log(&self, now: u64) {
        for line in self.faults.drain_log() {
            self.shared.note(now, "disk", line);
        }
    }

    /// Whether the running node went read-only after a storage failure.
    pub fn poisoned(&self) -> bool {
        self.shared.node.borrow().as_ref().is_some_and(|n| n.store().log().is_poisoned())
    }

    /// Crashes the node (if up): a power loss (torn or not) or a kill.
    pub fn crash(&mut self, sim: &mut turmoil::Sim, now: u64, power_loss: bool, torn: bool) {
        if self.node_up {
            sim.crash(self.name.as_str());
            self.node_up = false;
            *self.shared.node.borrow_mut() = None;
            // A cluster member's crash makes no client forget: the leader that answers keeps its
            // memory, and a new leader (which remembers no recent ids) is recorded as a restart
            // when it takes its term (see the scenario's observer).
            if self.membership.is_none() {
                self.shared.history.borrow_mut().restart(now);
            }
        }
        if power_loss {
            self.power_losses.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if torn {
                let r = self.mem.crash_torn(&mut self.rng);
                self.note(now, format!("power loss with torn writes: {r:?}"));
            } else {
                self.mem.crash();
                self.note(now, "power loss: unsynced writes lost");
            }
        } else {
            self.note(now, "process killed (page cache survives)");
        }
    }

    /// A file with committed-looking content, and an offset inside its non-zero extent.
    fn pick_offset(&self, pick: u64, chunks_only: bool) -> Option<(PathBuf, u64)> {
        let files: Vec<(PathBuf, u64)> = self
            .mem
            .files()
            .into_iter()
            .filter(|(p, len)| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                *len > 0
                    && (name.starts_with("chunk-") && !name.ends_with(".tmp")
                        || !chunks_only
                            && uuid::Uuid::parse_str(name.trim_end_matches(".bloomfilter")).is_ok())
            })
            .collect();
        if files.is_empty() {
            return None;
        }
        let (path, len) = files[(pick % files.len() as u64) as usize].clone();
        let f = self.mem.open(&path, OpenMode::Read).ok()?;
        let mut buf = vec![0u8; len as usize];
        f.read_exact_at(&mut buf, 0).ok()?;
        let extent = buf.iter().rposition(|&b| b != 0).map_or(0, |i| i as u64 + 1);
        if extent == 0 {
            return None;
        }
        Some((path, (pick >> 16) % extent))
    }

    /// Carries out `a` at `now`; returns what to do later (at most one action).
    pub fn apply(&mut self, sim: &mut turmoil::Sim, now: u64, a: Action) -> Option<(u64, Action)> {
        let after = |span: Duration, a: Action| Some((now + span.as_micros() as u64, a));
        match a {
            Action::Fault(ev) => {
                self.note(now, format!("{ev:?}"));
                match ev {
                    FaultEvent::PowerLoss { torn, down } => {
                        let was_up = self.node_up;
                        self.crash(sim, now, true, torn);
                        if was_up {
                            return after(down, Action::Restart);
                        }
                    }
                    FaultEvent::Kill { down } => {
                        if self.node_up {
                            self.crash(sim, now, false, false);
                            return after(down, Action::Restart);
                        }
                    }
                    FaultEvent::Partition { host, span } => {
                        if self.holds[host] == 0 {
                            self.partitions[host] += 1;
                            sim.partition(self.name.as_str(), self.clients[host].as_str());
                            return after(span, Action::EndPartition(host));
                        }
                    }
                    FaultEvent::Hold { host, span } => {
                        if self.partitions[host] == 0 {
                            self.holds[host] += 1;
                            sim.hold(self.name.as_str(), self.clients[host].as_str());
                            return after(span, Action::EndHold(host));
                        }
                    }
                    FaultEvent::Latency { max, span } => {
                        self.latency += 1;
                        self.link_latency(sim, max);
                        return after(span, Action::EndLatency);
                    }
                    FaultEvent::ClockJump { delta_us } => self.clock.jump(delta_us),
                    FaultEvent::DiskTrouble { span } => {
                        self.trouble += 1;
                        self.faults.set_rates(self.plan.disk);
                        return after(span, Action::EndDiskTrouble);
                    }
                    FaultEvent::DiskFull { budget, span } => {
                        self.full += 1;
                        self.faults.set_space_left(budget);
                        return after(span, Action::EndDiskFull);
                    }
                    FaultEvent::BitRot { pick } => {
                        if let Some((p, off)) = self.pick_offset(pick, false) {
                            let bit = ((pick >> 8) % 8) as u8;
                            let _ = self.mem.flip_bit(&p, off, bit);
                            self.note(now, format!("bit rot: {} offset {off} bit {bit}", p.display()));
                        }
                    }
                    FaultEvent::LatentSector { pick } => {
                        if let Some((p, off)) = self.pick_offset(pick, true) {
                            self.faults.add_latent(&p, off);
                            self.note(now, format!("latent sector error: {} offset {off}", p.display()));
                        }
                    }
                }
            }
            Action::Restart => {
                if !self.node_up {
                    self.note(now, "node restarts");
                    sim.bounce(self.name.as_str());
                    self.node_up = true;
                }
            }
            Action::EndPartition(h) => {
                self.partitions[h] -= 1;
                if self.partitions[h] == 0 {
                    sim.repair(self.name.as_str(), self.clients[h].as_str());
                    self.note(now, format!("partition of c{h} healed"));
                }
            }
            Action::EndHold(h) => {
                self.holds[h] -= 1;
                if self.holds[h] == 0 {
                    sim.release(self.name.as_str(), self.clients[h].as_str());
                    self.note(now, format!("held messages of c{h} released"));
                }
            }
            Action::EndLatency => {
                self.latency -= 1;
                if self.latency == 0 {
                    self.link_latency(sim, self.base_latency);
                    self.note(now, "latency back to normal");
                }
            }
            Action::EndDiskTrouble => {
                self.trouble -= 1;
                if self.trouble == 0 {
                    self.faults.set_rates(DiskRates::default());
                    self.note(now, "disk trouble over");
                }
            }
            Action::EndDiskFull => {
                self.full -= 1;
                if self.full == 0 {
                    self.faults.set_space_left(u64::MAX);
                    self.note(now, "disk space freed");
                }
            }
            Action::Heal => {
                // The caller drops this rig's pending actions: the node restarts now.
                self.note(now, "healing: every fault window closes; final power loss and restart");
                for h in 0..self.clients.len() {
                    if self.partitions[h] > 0 {
                        sim.repair(self.name.as_str(), self.clients[h].as_str());
                    }
                    if self.holds[h] > 0 {
                        sim.release(self.name.as_str(), self.clients[h].as_str());
                    }
                }
                self.partitions.iter_mut().for_each(|p| *p = 0);
                self.holds.iter_mut().for_each(|p| *p = 0);
                self.link_latency(sim, self.base_latency);
                self.faults.set_rates(DiskRates::default());
                self.faults.set_space_left(u64::MAX);
                self.latency = 0;
                self.trouble = 0;
                self.full = 0;
                let torn = self.plan.has(FaultKind::TornWrites);
                self.crash(sim, now, true, torn);
                self.note(now, "node restarts");
                sim.bounce(self.name.as_str());
                self.node_up = true;
                self.shared.healed.set(true);
            }
        }
        None
    }
}

/// Delays drawn from their own stream seeded by `seed`: with probability `p`, up to `max`
/// (uniform); otherwise none. Slow I/O, and the recovery scenario's late side-lane jobs.
pub fn random_delays(seed: u64, p: f64, max: Duration) -> IoDelay {
    let r = Mutex::new(ChaCha8Rng::seed_from_u64(seed));
    Arc::new(move || {
        let mut r = r.lock().unwrap_or_else(|e| e.into_inner());
        if r.gen_bool(p) {
            Duration::from_micros(r.gen_range(0..=max.as_micros() as u64))
        } else {
            Duration::ZERO
        }
    })
}

/// `config` for the cluster member `name`: its HTTP and replication endpoints on its own address
/// (so the leader's HTTP endpoint in a redirect names it), the others' replication endpoints as
/// gossip seeds. Called at each boot, inside the simulation, where `turmoil::lookup` resolves.
fn cluster_config(mut config: Config, name: &str, m: &Membership) -> Config {
    let me = turmoil::lookup(name);
    config.http_ip = me;
    config.cluster.cluster_size = m.size;
    config.cluster.read_only_replica = m.replica;
    config.cluster.replication_addr = std::net::SocketAddr::new(me, REPLICATION_PORT);
    config.cluster.gossip_seeds = m
        .peers
        .iter()
        .map(|p| std::net::SocketAddr::new(turmoil::lookup(p.as_str()), REPLICATION_PORT))
        .collect();
    if m.dns {
        // As in a StatefulSet: listen everywhere, advertise the host's name, no seeds.
        let any = std::net::IpAddr::from([0, 0, 0, 0]);
        config.http_ip = any;
        config.cluster.replication_addr = std::net::SocketAddr::new(any, REPLICATION_PORT);
        config.cluster.advertise_replication.host = Some(name.to_string());
        config.cluster.gossip_seeds.clear();
        config.cluster.dns = Some(annal::config::DnsDiscovery {
            name: crate::deploy::CLUSTER_DNS.into(),
            port: REPLICATION_PORT,
        });
    }
    config
}

async fn node_main(
    shared: Rc<Shared>,
    disk: Arc<dyn Disk>,
    clock: Arc<SimClock>,
    io_delay: Option<IoDelay>,
    config: Config,
    member: Option<(String, Membership)>,
    seed: u64,
) -> turmoil::Result {
    let config = match &member {
        Some((name, m)) => cluster_config(config, name, m),
        None => config,
    };
    let boot = shared.boots.get() + 1;
    shared.boots.set(boot);
    let env = annal::env::sim::env(disk, clock, io_delay, seed ^ (boot << 40));
    loop {
        match Node::open(env.clone(), config.clone()) {
            Ok(node) => {
                let rec = &node.store().recovery;
                shared.note_now("node", format!("boot {boot}: opened; recovery {rec:?}"));
                *shared.node.borrow_mut() = Some(node.clone());
                match node.bind().await {
                    Ok((_, serve)) => {
                        let r = serve.await;
                        shared.note_now("node", format!("stopped: {r:?}"));
                    }
                    Err(e) => shared.note_now("node", format!("cannot listen: {e}")),
                }
                return Ok(());
            }
            Err(e) => {
                shared.note_now("node", format!("boot {boot}: refused to start: {e}"));
                env.rt.sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
