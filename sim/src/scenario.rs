//! One simulated run: a real node (`annal::node::Node`, HTTP API and all) on a turmoil host with
//! the simulated Env, client hosts running the workload over turmoil TCP, and the fault plan of
//! the seed carried out step by step; then the checker.
//!
//! The seed decides everything: the fault plan (`annal_fault::FaultPlan`), the node's knobs
//! (chunk size, memtable size, caches), the workload's shape, turmoil's own randomness, the
//! node's entropy, BUGGIFY and the torn-write choices. A run on one thread with the same seed and
//! options replays exactly; [`Options`] also carries the test-only bug switches.
//!
//! Phases: the workload phase (faults as scheduled; a supervisor restarts a node that went
//! read-only after a storage failure), then healing (every window closed, disk faults off, one
//! last power loss and restart), then the final reads, then the checks. Liveness (the final reads
//! answered) is required unless the plan destroys committed data.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use annal::buggify::Bug;
use annal::config::Config;
use annal::env::mem::MemDisk;
use annal::env::sim::{IoDelay, SimClock};
use annal::env::{Disk, OpenMode};
use annal::node::Node;
use annal_fault::{DiskRates, FaultEvent, FaultKind, FaultPlan, SeededDisk, SeededFaults};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::shared::Shared;
use crate::workload::{self, WorkloadConfig, NODE, PORT};

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The seed.
    pub seed: u64,
    /// Length of the workload phase (simulated).
    pub duration: Duration,
    /// Clients in all.
    pub clients: usize,
    /// Client hosts (clients are spread over them; partitions act per host).
    pub client_hosts: usize,
    /// turmoil's tick.
    pub tick: Duration,
    /// Test-only bug switches to turn on.
    pub bugs: Vec<Bug>,
    /// Steps (model evaluations) the linearizability search may take per stream.
    pub budget: u64,
}

impl Options {
    /// The campaign's quick run: 8 s of workload, 8 clients on 4 hosts.
    pub fn quick(seed: u64) -> Options {
        Options {
            seed,
            duration: Duration::from_secs(8),
            clients: 8,
            client_hosts: 4,
            tick: Duration::from_millis(5),
            bugs: Vec::new(),
            budget: 1_000_000,
        }
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
    /// The fault plan.
    pub plan: FaultPlan,
    /// Violations (empty: the seed passed).
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
    /// Streams whose linearizability search ran out of budget: the run is then neither a pass
    /// nor a failure of that check (every other check still counts).
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

    /// The verdict in a few words: "passed", "passed, linearizability inconclusive on s1 s3" or
    /// "FAILED".
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

    /// The failure report: replay command, failures, fault schedule.
    pub fn report(&self) -> String {
        let mut s = format!("FAILED seed {}; replay: {}\n", self.options.seed, self.options.replay_command());
        for f in &self.failures {
            s.push_str(&format!("  * {f}\n"));
        }
        s.push_str(&format!("fault plan of seed {}:\n{}", self.options.seed, self.plan));
        s
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

enum Action {
    Fault(FaultEvent),
    Restart,
    EndPartition(usize),
    EndHold(usize),
    EndLatency,
    EndDiskTrouble,
    EndDiskFull,
    Heal,
}

struct Harness {
    shared: Rc<Shared>,
    mem: Arc<MemDisk>,
    faults: Arc<SeededFaults>,
    clock: Arc<SimClock>,
    plan: FaultPlan,
    rng: ChaCha8Rng,
    queue: BTreeMap<(u64, u64), Action>,
    seq: u64,
    node_up: bool,
    partitions: Vec<u32>,
    holds: Vec<u32>,
    latency: u32,
    trouble: u32,
    full: u32,
    base_latency: Duration,
    hosts: usize,
}

fn host_name(h: usize) -> String {
    format!("c{h}")
}

impl Harness {
    fn at(&mut self, t: u64, a: Action) {
        self.seq += 1;
        self.queue.insert((t, self.seq), a);
    }

    fn note(&self, now: u64, what: impl std::fmt::Display) {
        self.shared.trace.at(now, "fault", what);
    }

    fn crash(&mut self, sim: &mut turmoil::Sim, now: u64, power_loss: bool, torn: bool) {
        if self.node_up {
            sim.crash(NODE);
            self.node_up = false;
            *self.shared.node.borrow_mut() = None;
            self.shared.history.borrow_mut().restart(now);
        }
        if power_loss {
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

    fn apply(&mut self, sim: &mut turmoil::Sim, now: u64, a: Action) {
        match a {
            Action::Fault(ev) => {
                self.note(now, format!("{ev:?}"));
                match ev {
                    FaultEvent::PowerLoss { torn, down } => {
                        let was_up = self.node_up;
                        self.crash(sim, now, true, torn);
                        if was_up {
                            self.at(now + down.as_micros() as u64, Action::Restart);
                        }
                    }
                    FaultEvent::Kill { down } => {
                        if self.node_up {
                            self.crash(sim, now, false, false);
                            self.at(now + down.as_micros() as u64, Action::Restart);
                        }
                    }
                    FaultEvent::Partition { host, span } => {
                        if self.holds[host] == 0 {
                            self.partitions[host] += 1;
                            sim.partition(NODE, host_name(host).as_str());
                            self.at(now + span.as_micros() as u64, Action::EndPartition(host));
                        }
                    }
                    FaultEvent::Hold { host, span } => {
                        if self.partitions[host] == 0 {
                            self.holds[host] += 1;
                            sim.hold(NODE, host_name(host).as_str());
                            self.at(now + span.as_micros() as u64, Action::EndHold(host));
                        }
                    }
                    FaultEvent::Latency { max, span } => {
                        self.latency += 1;
                        sim.set_max_message_latency(max);
                        self.at(now + span.as_micros() as u64, Action::EndLatency);
                    }
                    FaultEvent::ClockJump { delta_us } => self.clock.jump(delta_us),
                    FaultEvent::DiskTrouble { span } => {
                        self.trouble += 1;
                        self.faults.set_rates(self.plan.disk);
                        self.at(now + span.as_micros() as u64, Action::EndDiskTrouble);
                    }
                    FaultEvent::DiskFull { budget, span } => {
                        self.full += 1;
                        self.faults.set_space_left(budget);
                        self.at(now + span.as_micros() as u64, Action::EndDiskFull);
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
                    sim.bounce(NODE);
                    self.node_up = true;
                }
            }
            Action::EndPartition(h) => {
                self.partitions[h] -= 1;
                if self.partitions[h] == 0 {
                    sim.repair(NODE, host_name(h).as_str());
                    self.note(now, format!("partition of c{h} healed"));
                }
            }
            Action::EndHold(h) => {
                self.holds[h] -= 1;
                if self.holds[h] == 0 {
                    sim.release(NODE, host_name(h).as_str());
                    self.note(now, format!("held messages of c{h} released"));
                }
            }
            Action::EndLatency => {
                self.latency -= 1;
                if self.latency == 0 {
                    sim.set_max_message_latency(self.base_latency);
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
                self.note(now, "healing: every fault window closes; final power loss and restart");
                for h in 0..self.hosts {
                    if self.partitions[h] > 0 {
                        sim.repair(NODE, host_name(h).as_str());
                    }
                    if self.holds[h] > 0 {
                        sim.release(NODE, host_name(h).as_str());
                    }
                }
                self.partitions.iter_mut().for_each(|p| *p = 0);
                self.holds.iter_mut().for_each(|p| *p = 0);
                sim.set_max_message_latency(self.base_latency);
                self.faults.set_rates(DiskRates::default());
                self.faults.set_space_left(u64::MAX);
                self.latency = 0;
                self.trouble = 0;
                self.full = 0;
                let torn = self.plan.has(FaultKind::TornWrites);
                self.crash(sim, now, true, torn);
                // Pending restarts and window ends are dropped: the node restarts now.
                self.queue.clear();
                self.note(now, "node restarts");
                sim.bounce(NODE);
                self.node_up = true;
                self.shared.healed.set(true);
            }
        }
    }
}

async fn node_main(
    shared: Rc<Shared>,
    disk: Arc<dyn Disk>,
    clock: Arc<SimClock>,
    io_delay: Option<IoDelay>,
    config: Config,
    seed: u64,
) -> turmoil::Result {
    let boot = shared.boots.get() + 1;
    shared.boots.set(boot);
    let env = annal::env::sim::env(disk, clock, io_delay, seed ^ (boot << 40));
    loop {
        match Node::open(env.clone(), config.clone()) {
            Ok(node) => {
                let rec = &node.store().recovery;
                shared.trace.now("node", format!("boot {boot}: opened; recovery {rec:?}"));
                *shared.node.borrow_mut() = Some(node.clone());
                match node.bind().await {
                    Ok((_, serve)) => {
                        let r = serve.await;
                        shared.trace.now("node", format!("stopped: {r:?}"));
                    }
                    Err(e) => shared.trace.now("node", format!("cannot listen: {e}")),
                }
                return Ok(());
            }
            Err(e) => {
                shared.trace.now("node", format!("boot {boot}: refused to start: {e}"));
                env.rt.sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Runs one seed on this thread.
pub fn run(opts: &Options) -> RunResult {
    let seed = opts.seed;
    let plan = FaultPlan::from_seed(seed, opts.duration, opts.client_hosts);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4a55_0000_0000_0001);
    let config = node_config(&mut rng);
    let wl = WorkloadConfig {
        streams: rng.gen_range(2..9),
        duration: opts.duration,
        timeout: Duration::from_secs(3),
        think_max: Duration::from_millis(rng.gen_range(5..200)),
        pad_max: [100, 1000, 3000][rng.gen_range(0..3)],
        delete_permille: [0, 5, 20][rng.gen_range(0..3)],
    };
    crate::panics::begin();
    if plan.has(FaultKind::Buggify) {
        annal::buggify::enable(seed);
    } else {
        annal::buggify::disable();
    }
    annal::buggify::set_bugs(&opts.bugs);

    let mem = Arc::new(MemDisk::default());
    let faults = SeededFaults::new(seed ^ 0xd15c_0000_0000_0002);
    let disk: Arc<dyn Disk> = Arc::new(SeededDisk::new(mem.clone(), faults.clone()));
    let clock = SimClock::new(1_700_000_000_000_000 + (rng.gen_range(0..1_000_000i64) * 1_000_000));
    faults.set_clock(clock.clone());
    let io_delay: Option<IoDelay> = plan.io_delay.map(|(p, max)| {
        let r = Mutex::new(ChaCha8Rng::seed_from_u64(seed ^ 0x510e_0000_0000_0003));
        let f: IoDelay = Arc::new(move || {
            let mut r = r.lock().unwrap_or_else(|e| e.into_inner());
            if r.gen_bool(p) {
                Duration::from_micros(r.gen_range(0..=max.as_micros() as u64))
            } else {
                Duration::ZERO
            }
        });
        f
    });
    let shared = Rc::new(Shared::default());
    let base_latency = Duration::from_millis(rng.gen_range(1..30));
    let mut sim = sim_builder(opts, seed, base_latency).build();
    {
        let (shared, disk, clock, io_delay, config) =
            (shared.clone(), disk.clone(), clock.clone(), io_delay.clone(), config.clone());
        sim.host(NODE, move || {
            node_main(shared.clone(), disk.clone(), clock.clone(), io_delay.clone(), config.clone(), seed)
        });
    }
    let hosts = opts.client_hosts.max(1);
    for h in 0..hosts {
        let shared = shared.clone();
        let wl = wl.clone();
        let mine: Vec<usize> = (0..opts.clients.max(1)).filter(|c| c % hosts == h).collect();
        sim.client(host_name(h).as_str(), async move {
            let tasks: Vec<_> = mine
                .into_iter()
                .map(|c| tokio::task::spawn_local(workload::client(c, seed, wl.clone(), shared.clone())))
                .collect();
            for t in tasks {
                t.await?;
            }
            Ok(())
        });
    }

    let mut h = Harness {
        shared: shared.clone(),
        mem: mem.clone(),
        faults: faults.clone(),
        clock,
        plan: plan.clone(),
        rng: ChaCha8Rng::seed_from_u64(seed ^ 0x7042_0000_0000_0004),
        queue: BTreeMap::new(),
        seq: 0,
        node_up: true,
        partitions: vec![0; hosts],
        holds: vec![0; hosts],
        latency: 0,
        trouble: 0,
        full: 0,
        base_latency,
        hosts,
    };
    for (t, ev) in &plan.events {
        h.at(t.as_micros() as u64, Action::Fault(ev.clone()));
    }
    h.at(opts.duration.as_micros() as u64, Action::Heal);
    let mut failures = Vec::new();
    let next_check = Cell::new(1_000_000u64);
    loop {
        let now = sim.elapsed().as_micros() as u64;
        while let Some(entry) = h.queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let a = entry.remove();
            h.apply(&mut sim, now, a);
        }
        if now >= next_check.get() && !shared.healed.get() {
            next_check.set(now + 1_000_000);
            let poisoned = shared.node.borrow().as_ref().is_some_and(|n| n.store().log().is_poisoned());
            if poisoned && h.node_up {
                h.note(now, "supervisor: the node is read-only after a storage failure; restarting it");
                h.crash(&mut sim, now, false, false);
                h.at(now + 200_000, Action::Restart);
            }
        }
        let step = sim.step();
        for line in faults.drain_log() {
            shared.trace.at(now, "disk", line);
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
    let sim_time = sim.elapsed();
    drop(sim);
    let mut panicked = crate::checker::no_panic::check(&crate::panics::end());
    panicked.append(&mut failures);
    failures = panicked;
    let (sites, fired) = annal::buggify::report();
    if plan.has(FaultKind::Buggify) {
        let active: Vec<&str> = sites.iter().filter(|(_, a)| *a).map(|(s, _)| *s).collect();
        shared.trace.at(
            sim_time.as_micros() as u64,
            "sim",
            format!("buggify: {} sites reached, active {active:?}, fired {fired} times", sites.len()),
        );
    }
    annal::buggify::disable();
    annal::buggify::set_bugs(&[]);
    let history = shared.history.borrow();
    let finals = shared.final_reads.borrow().clone();
    let report =
        timed(|| crate::checker::check(&history, &finals, wl.streams, !plan.destructive(), opts.budget));
    let (report, check_wall) = report;
    failures.extend(report.failures);
    let trace = shared.trace.lines();
    RunResult {
        options: opts.clone(),
        plan,
        failures,
        trace,
        ops: shared.ops_done.get(),
        boots: shared.boots.get(),
        disk_faults: faults.injected(),
        sim_time,
        inconclusive: report.inconclusive,
        check_steps: report.steps,
        check_wall,
    }
}

// Measures how long the checks take (a figure for the operator, never part of the trace).
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = std::time::Instant::now();
    let r = f();
    (r, t.elapsed())
}

fn sim_builder(opts: &Options, seed: u64, latency: Duration) -> turmoil::Builder {
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
