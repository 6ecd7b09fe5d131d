//! The maintenance scenarios: backups and redactions of a node under load and faults
//! ([`crate::scenario::Scenario::Backup`], [`crate::scenario::Scenario::Redact`]).
//!
//! **Backup.** A copier host runs the tool's own copy logic (`annal::backup::copy::backup`, with
//! the scavenge control over the node's HTTP API) on the node host's disk while the clients append,
//! a scavenge now and then runs (started by the copier before some backups, so the backup has one
//! to stop and resume) and the index flushes and merges (the seed picks small memtables). Backups
//! are full or differential. The copier dies at a seeded disk call of some runs
//! ([`CopierDisk`]), and a power loss of the machine kills it too; the next run is then a
//! differential one into the same directory, which must finish it. When a backup completes, what
//! a power loss would leave of its directory is kept ([`Taken`]); after the run each is restored
//! into a fresh node and checked ([`crate::checker::backup`]), and the last one also into a new
//! three-node cluster ([`restore_into_cluster`]).
//!
//! **Redaction.** At seeded times the harness redacts one event the clients appended, between two
//! steps of the simulation, with the tool's own steps (`annal::redact::tool::redact_copy` on the
//! node's disk) and the node's own answers (`annal::redact::server::{positions, switch}`, what the
//! unix socket serves). One attempt in four hands the node a bad candidate (another event
//! redacted too, a byte changed, a truncated file), which it must refuse. A [`Tap`] under the
//! node's disk records what a power loss would leave of `db/` before every disk call of the
//! attempt, so the checker ([`crate::checker::redaction`]) opens the database as it would be
//! after a crash at every step ([`Case`]).
//!
//! Both scenarios run the node's fault plan without the kinds that destroy committed data (bit
//! rot, latent sectors, lost and misdirected writes): their checks need the acknowledged log
//! intact, and the default scenario covers those faults.
//!
//! Invariant: every choice comes from the run's seed; the copier and the redactions act only
//! through the node's disk and HTTP API and the redaction socket's own functions.

// The copier runs on a turmoil client host, whose tokio clock is the simulation's paused clock.
#![allow(clippy::disallowed_methods)]

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use annal::backup::copy::{backup, BackupOptions};
use annal::backup::scavenge::HttpScavenge;
use annal::dblock::database_id;
use annal::env::mem::MemDisk;
use annal::env::{Disk, DiskLock, File, OpenMode};
use annal::redact::{Position, Reply};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::history::{OpKind, Outcome};
use crate::rig::Rig;
use crate::shared::now_us;
use crate::workload::PORT;

/// The files of a directory as a power loss would leave them.
pub type Files = Vec<(PathBuf, Vec<u8>)>;

/// A backup that completed.
#[derive(Debug)]
pub struct Taken {
    /// Its number in the run.
    pub n: u32,
    /// Its directory.
    pub dir: PathBuf,
    /// Whether it updated an earlier backup (or finished an interrupted one).
    pub differential: bool,
    /// When the run that completed it began (µs): every append acknowledged before is in it.
    pub began: u64,
    /// When it completed (µs).
    pub finished: u64,
    /// Its `chaser.chk`, as the tool reported it.
    pub chaser: i64,
    /// What a power loss right after it completed would leave of its directory.
    pub files: Files,
}

/// The copier's disk: the machine's disk without the node's fault layer, which stops working
/// (every call fails) from a seeded call on (the copier died there) or once the machine lost
/// power after the run began.
pub struct CopierDisk {
    inner: Arc<MemDisk>,
    calls: AtomicU64,
    die_at: AtomicU64,
    power: Arc<AtomicU64>,
    power_at_start: AtomicU64,
    died: AtomicBool,
}

impl CopierDisk {
    fn new(inner: Arc<MemDisk>, power: Arc<AtomicU64>) -> CopierDisk {
        CopierDisk {
            inner,
            calls: AtomicU64::new(0),
            die_at: AtomicU64::new(u64::MAX),
            power,
            power_at_start: AtomicU64::new(0),
            died: AtomicBool::new(false),
        }
    }

    /// A new run of the copier, which dies at call `die_at` (if any).
    fn begin(&self, die_at: Option<u64>) {
        self.calls.store(0, Ordering::SeqCst);
        self.die_at.store(die_at.unwrap_or(u64::MAX), Ordering::SeqCst);
        self.power_at_start.store(self.power.load(Ordering::SeqCst), Ordering::SeqCst);
        self.died.store(false, Ordering::SeqCst);
    }

    fn step(&self) -> io::Result<()> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n >= self.die_at.load(Ordering::SeqCst) {
            self.died.store(true, Ordering::SeqCst);
            return Err(io::Error::other("the copier died here"));
        }
        if self.power.load(Ordering::SeqCst) != self.power_at_start.load(Ordering::SeqCst) {
            self.died.store(true, Ordering::SeqCst);
            return Err(io::Error::other("the machine lost power under the copier"));
        }
        Ok(())
    }
}

/// A file of the copier: its calls die with the copier too.
struct CopierFile {
    inner: Arc<dyn File>,
    disk: Arc<CopierDisk>,
}

impl File for CopierFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.disk.step()?;
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.disk.step()?;
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.disk.step()?;
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.disk.step()?;
        self.inner.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

/// The copier's view of its disk (an `Arc` so that its files can reach it).
struct CopierView(Arc<CopierDisk>);

impl Disk for CopierView {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        self.0.step()?;
        let inner = self.0.inner.open(path, mode)?;
        Ok(Arc::new(CopierFile { inner, disk: self.0.clone() }))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.0.step()?;
        self.0.inner.create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.step()?;
        self.0.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.0.step()?;
        self.0.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.0.step()?;
        self.0.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.0.step()?;
        self.0.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.inner.exists(path)
    }
    fn space(&self, path: &Path) -> Option<(u64, u64)> {
        self.0.inner.space(path)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Option<DiskLock>> {
        self.0.inner.try_lock(path)
    }
}

/// The copier's host name.
pub const COPIER: &str = "copier";
/// Where the copier's backups go.
pub const BACKUPS: &str = "/backups";

/// Starts the copier host for `rig` (the run's one node); the backups it completes are pushed to
/// the returned list.
pub fn start_copier(sim: &mut turmoil::Sim, rig: &Rig, duration: Duration) -> Rc<RefCell<Vec<Taken>>> {
    let taken: Rc<RefCell<Vec<Taken>>> = Rc::default();
    let out = taken.clone();
    let disk = Arc::new(CopierDisk::new(rig.mem.clone(), rig.power_losses.clone()));
    let (mem, clock, shared, node) =
        (rig.mem.clone(), rig.clock.clone(), rig.shared.clone(), rig.name.clone());
    let seed = rig.seed;
    sim.client(COPIER, async move {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xb0c4_0000_0000_0008);
        // Copying takes time: up to 20 ms per file.
        let delay_rng = Mutex::new(ChaCha8Rng::seed_from_u64(seed ^ 0xb0c4_0000_0000_0009));
        let delay: annal::env::sim::IoDelay = Arc::new(move || {
            let mut r = delay_rng.lock().unwrap_or_else(|e| e.into_inner());
            Duration::from_micros(r.gen_range(0..20_000))
        });
        let env = annal::env::sim::env(Arc::new(CopierView(disk.clone())), clock, Some(delay), seed ^ 0xb0c4);
        let addr = std::net::SocketAddr::new(turmoil::lookup(node.as_str()), PORT);
        let end = duration.as_micros() as u64;
        let (mut n, mut dir, mut unfinished) = (0u32, None::<PathBuf>, false);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..1500))).await;
        while now_us() < end {
            if rng.gen_bool(0.4) {
                start_scavenge(&node).await;
            }
            let differential = unfinished || (dir.is_some() && rng.gen_bool(0.5));
            let target = match (&dir, differential) {
                (Some(d), true) => d.clone(),
                _ => {
                    n += 1;
                    PathBuf::from(format!("{BACKUPS}/{n}"))
                }
            };
            dir = Some(target.clone());
            let die_at = rng.gen_bool(0.5).then(|| rng.gen_range(0..400));
            disk.begin(die_at);
            let began = now_us();
            let opts = BackupOptions {
                source_db: "/db".into(),
                source_index: "/db/index".into(),
                dest: target.clone(),
                differential,
            };
            let result = match database_id(&env, Path::new("/db")) {
                Ok(id) => {
                    let mut control = HttpScavenge::new(env.clone(), addr, "admin", "changeit");
                    backup(&env, &opts, &id, &mut control, &mut |_| {}).await
                }
                Err(e) => Err(e.into()),
            };
            let what = if differential { "differential backup" } else { "full backup" };
            match result {
                Ok(s) => {
                    unfinished = false;
                    let files = mem.durable_files(&target);
                    shared.note_now(
                        "copier",
                        format!(
                            "{what} {} complete: {} files copied, {} kept, {} removed, chaser {}, writer {}, \
                             index moving {}, scavenge stopped {:?}",
                            target.display(),
                            s.files_copied,
                            s.files_kept,
                            s.files_removed,
                            s.chaser,
                            s.writer,
                            s.index_moving,
                            s.scavenge_stopped
                        ),
                    );
                    out.borrow_mut().push(Taken {
                        n,
                        dir: target,
                        differential,
                        began,
                        finished: now_us(),
                        chaser: s.chaser,
                        files,
                    });
                }
                Err(e) => {
                    // A run that died (or could not start) is finished by a differential run into
                    // the same directory, unless it never created the directory.
                    unfinished = mem.exists(&target);
                    let died = if disk.died.load(Ordering::SeqCst) { " (the copier died)" } else { "" };
                    shared.note_now("copier", format!("{what} {} failed{died}: {e}", target.display()));
                    if !unfinished {
                        dir = None;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(rng.gen_range(200..1500))).await;
        }
        Ok(())
    });
    taken
}

/// Asks the node for a scavenge (its answer does not matter: it may be down, or one may run).
async fn start_scavenge(node: &str) {
    let mut c = crate::client::Client::new(node, PORT, Duration::from_secs(2));
    let req = http::Request::post("/admin/scavenge")
        .header("authorization", "Basic YWRtaW46Y2hhbmdlaXQ=")
        .header("content-length", "0")
        .body(http_body_util::Full::new(bytes::Bytes::new()));
    if let Ok(req) = req {
        let _ = c.send(req).await;
    }
}

/// A disk that records, while armed, what a power loss would leave of one directory before each
/// of its calls (the node's disk in the redaction scenario).
pub struct Tap {
    inner: Arc<dyn Disk>,
    mem: Arc<MemDisk>,
    under: PathBuf,
    states: Mutex<Option<Vec<Files>>>,
}

impl Tap {
    /// A tap over `inner`, whose durable state is `mem`'s, recording `under`.
    pub fn new(inner: Arc<dyn Disk>, mem: Arc<MemDisk>, under: &Path) -> Tap {
        Tap { inner, mem, under: under.to_path_buf(), states: Mutex::new(None) }
    }

    fn snap(&self) {
        let mut s = self.states.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(states) = s.as_mut() {
            let now = self.mem.durable_files(&self.under);
            if states.last() != Some(&now) {
                states.push(now);
            }
        }
    }

    /// Starts recording (the first state is the one now).
    pub fn arm(&self) {
        *self.states.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
        self.snap();
    }

    /// Stops recording; returns the distinct states seen, the one now last.
    pub fn disarm(&self) -> Vec<Files> {
        self.snap();
        self.states.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default()
    }
}

impl Disk for Tap {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        self.snap();
        self.inner.open(path, mode)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.snap();
        self.inner.create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.snap();
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.snap();
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.snap();
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.snap();
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn space(&self, path: &Path) -> Option<(u64, u64)> {
        self.inner.space(path)
    }
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.snap();
        self.inner.open_direct(path)
    }
    fn create_zeroed(&self, path: &Path, len: u64) -> io::Result<Arc<dyn File>> {
        self.snap();
        self.inner.create_zeroed(path, len)
    }
    fn run_cached(&self, f: &mut dyn FnMut()) -> bool {
        self.inner.run_cached(f)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Option<DiskLock>> {
        self.inner.try_lock(path)
    }
}

/// How a redaction attempt's candidate was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidate {
    /// By the tool, for the one event named.
    Good,
    /// With a second event of the chunk redacted too (only one is named).
    ExtraEvent,
    /// With one byte changed after the tool made it.
    ByteChanged,
    /// Cut short after the tool made it.
    Truncated,
}

/// One redaction attempt, for the checker.
#[derive(Debug)]
pub struct Case {
    /// When (µs).
    pub at: u64,
    /// The event named: stream and event number.
    pub stream: String,
    /// Its number.
    pub number: i64,
    /// Its id.
    pub id: [u8; 16],
    /// Its log position.
    pub position: u64,
    /// The chunk file it lay in.
    pub file: String,
    /// How the candidate was made.
    pub candidate: Candidate,
    /// The node's answer to the switch.
    pub reply: Reply,
    /// What a power loss would leave of `db/` before every disk call of the attempt, and after
    /// it (last). The first is the state before the attempt.
    pub states: Vec<Files>,
}

/// Redacts one appended event of `rig`'s node now (see the module documentation); `None` when
/// the node is down or the event picked cannot be redacted (in the active chunk, deleted).
pub fn redact_once(rig: &Rig, rng: &mut ChaCha8Rng, now: u64) -> Option<Case> {
    let node = rig.shared.node.borrow().clone()?;
    let tap = rig.tap.as_ref()?;
    let appended: Vec<(String, i64, usize)> = rig
        .shared
        .history
        .borrow()
        .ops
        .iter()
        .filter_map(|o| match (&o.kind, &o.outcome) {
            (OpKind::Append { events, .. }, Outcome::Appended { first: Some(f) }) => {
                Some((o.stream.clone(), *f, events.len()))
            }
            _ => None,
        })
        .collect();
    if appended.is_empty() {
        return None;
    }
    // Older appends first (the newest lie in the active chunk, which cannot be redacted).
    let pick = rng.gen_range(0..appended.len()).min(rng.gen_range(0..appended.len()));
    let (stream, first, len) = appended[pick].clone();
    let number = first + rng.gen_range(0..len) as i64;
    let store = node.store().clone();
    let wall = annal::env::Clock::wall_micros(&*rig.clock);
    let id = store.read_event(&stream, number, false, wall).ok().flatten()?.event.id;
    let Reply::Positions { positions } = annal::redact::server::positions(&store, &stream, number, wall)
    else {
        return None;
    };
    let p = positions.into_iter().next()?;
    if !p.complete {
        rig.note(now, format!("redaction: {number}@{stream} lies in the active chunk {}", p.file));
        return None;
    }
    if let Some(refused) = annal::redact::server::refuse_switch(&node) {
        rig.note(now, format!("redaction refused: {refused:?}"));
        return None;
    }
    let mut candidate = match rng.gen_range(0..8) {
        0 => Candidate::ExtraEvent,
        1 => Candidate::ByteChanged,
        2 => Candidate::Truncated,
        _ => Candidate::Good,
    };
    let env = node.env().clone();
    let db = PathBuf::from("/db");
    let tmp_name = format!("{}.tmp", p.file);
    let tmp = db.join(&tmp_name);
    tap.arm();
    let mut named: Vec<(Position, ())> = vec![(p.clone(), ())];
    if candidate == Candidate::ExtraEvent {
        match other_event_in(&store, &p, rng) {
            Some(other) => named.push((other, ())),
            None => candidate = Candidate::Good,
        }
    }
    let made = annal::redact::tool::redact_copy(&env, &db.join(&p.file), &tmp, &named);
    let reply = match made {
        Err(e) => Reply::Error { message: format!("the tool could not make the candidate: {e}") },
        Ok(()) => {
            spoil(&env, &tmp, candidate, rng);
            annal::redact::server::switch(&store, &p.file, &tmp_name, &[p.log_position])
        }
    };
    if !matches!(reply, Reply::Switched { .. }) {
        let _ = env.disk.remove(&tmp);
    }
    let states = tap.disarm();
    rig.note(
        now,
        format!(
            "redaction of {number}@{stream} (position {}, {}) with a {candidate:?} candidate: {reply:?}; {} crash states",
            p.log_position,
            p.file,
            states.len()
        ),
    );
    Some(Case {
        at: now,
        stream,
        number,
        id,
        position: p.log_position,
        file: p.file,
        candidate,
        reply,
        states,
    })
}

/// Another event record of the chunk `p` lies in, if there is one.
fn other_event_in(store: &annal::store::Store, p: &Position, rng: &mut ChaCha8Rng) -> Option<Position> {
    let others: Vec<Position> = store
        .log()
        .scan(0)
        .filter_map(Result::ok)
        .filter(|r| matches!(r, annal::log::record::Record::Event(_)) && r.log_position() != p.log_position)
        .filter_map(|r| {
            let q = r.log_position();
            let l = store.log().locate(q).filter(|l| l.file == p.file)?;
            Some(Position { log_position: q, file: l.file, file_offset: l.file_offset, complete: l.complete })
        })
        .collect();
    (!others.is_empty()).then(|| others[rng.gen_range(0..others.len())].clone())
}

/// Spoils a candidate the tool made, as `how` says (a good one is left alone).
fn spoil(env: &annal::env::Env, tmp: &Path, how: Candidate, rng: &mut ChaCha8Rng) {
    let Ok(f) = env.disk.open(tmp, OpenMode::ReadWrite) else { return };
    let Ok(len) = f.len() else { return };
    match how {
        Candidate::Good | Candidate::ExtraEvent => return,
        Candidate::ByteChanged => {
            let at = rng.gen_range(0..len.max(1));
            let mut b = [0u8; 1];
            if f.read_exact_at(&mut b, at).is_ok() {
                let _ = f.write_all_at(&[b[0] ^ 0x5a], at);
            }
        }
        Candidate::Truncated => {
            let _ = f.set_len(len - rng.gen_range(1..=len.clamp(1, 4096)));
        }
    }
    let _ = f.sync_data();
}

/// What one node serves of the workload's streams, by stream name.
pub type Served = Vec<(String, crate::checker::reopen::Stream)>;

/// How long a cluster restored from a backup may take to elect a leader and publish everything
/// on every member (simulated).
const CLUSTER_SETTLE: Duration = Duration::from_secs(30);

/// Restores the backup `files` (held in `dir`) onto the disks of a new three-node cluster, with
/// `chunk_size` (the source's), starts it in a simulation of its own (no clients, no faults) and
/// waits until a leader leads and every member published as far as it; returns what each member
/// then serves of the workload's `streams` streams, or why the cluster did not come up.
pub fn restore_into_cluster(
    seed: u64,
    files: &Files,
    dir: &Path,
    chunk_size: u64,
    streams: usize,
) -> Result<Vec<(String, Served)>, String> {
    use annal::backup::restore::{restore, RestoreOptions};
    let opts = crate::Options { duration: CLUSTER_SETTLE, ..crate::Options::cluster(seed, 3) };
    let trace = Rc::new(crate::shared::Trace::default());
    let mut rigs: Vec<Rig> = (0..3).map(|k| Rig::new(seed, k, 3, &opts, trace.clone())).collect();
    rigs[0].config.chunk_size = chunk_size;
    crate::scenario::form_cluster(&mut rigs, 3, 0);
    for r in &rigs {
        for (path, bytes) in files {
            let parent = annal::env::parent(path);
            let f = r.mem.create_dir_all(parent).and_then(|()| r.mem.open(path, OpenMode::CreateTruncate));
            f.and_then(|f| f.write_all_at(bytes, 0).and_then(|()| f.sync_data()))
                .and_then(|()| r.mem.sync_dir(parent))
                .map_err(|e| format!("{}: cannot lay out {}: {e}", r.name, path.display()))?;
        }
        let (base, _, _) = annal::env::mem::env(1);
        let env =
            annal::env::Env::new(r.mem.clone(), base.clock.clone(), base.net.clone(), base.rt.clone(), 1);
        let o = RestoreOptions {
            from: dir.to_path_buf(),
            db: r.config.db.clone(),
            index: r.config.index.clone(),
            overwrite: false,
        };
        restore(&env, &o, &mut |_, _| {}).map_err(|e| format!("{}: the restore failed: {e}", r.name))?;
    }
    let mut sim = crate::scenario::sim_builder(&opts, seed, rigs[0].base_latency).build();
    for r in &rigs {
        r.start(&mut sim);
    }
    // turmoil runs while a client host runs: one that only waits.
    sim.client("observer", async {
        tokio::time::sleep(CLUSTER_SETTLE).await;
        Ok(())
    });
    let nodes = |rigs: &[Rig]| -> Vec<Option<Arc<annal::node::Node>>> {
        rigs.iter().map(|r| r.shared.node.borrow().clone()).collect()
    };
    let settled = |nodes: &[Option<Arc<annal::node::Node>>]| {
        let up: Vec<&Arc<annal::node::Node>> = nodes.iter().flatten().collect();
        let lead = up
            .iter()
            .find(|n| n.cluster().is_some_and(|c| c.status().state == annal::cluster::VNodeState::Master));
        match lead {
            Some(l) if up.len() == 3 => {
                let p = l.store().log().committed();
                up.iter().all(|n| n.store().log().committed() == p)
            }
            _ => false,
        }
    };
    loop {
        match sim.step() {
            Ok(_) if settled(&nodes(&rigs)) => break,
            Ok(_) if sim.elapsed() < CLUSTER_SETTLE => {}
            Ok(_) => {
                let states: Vec<String> = nodes(&rigs)
                    .iter()
                    .zip(&rigs)
                    .map(|(n, r)| {
                        match n
                            .as_ref()
                            .and_then(|n| n.cluster().map(|c| (c.status(), n.store().log().committed())))
                        {
                            Some((st, p)) => {
                                format!("{} {} in term {} at {p}", r.name, st.state.name(), st.term)
                            }
                            None => format!("{} down", r.name),
                        }
                    })
                    .collect();
                return Err(format!(
                    "no leader with every member caught up within {CLUSTER_SETTLE:?} ({})",
                    states.join(", ")
                ));
            }
            Err(e) => return Err(format!("the simulation stopped: {e}")),
        }
    }
    let out = nodes(&rigs)
        .into_iter()
        .zip(&rigs)
        .map(|(n, r)| {
            let reads = n.map(|n| crate::checker::reopen::read_streams(&n, streams)).unwrap_or_default();
            (r.name.clone(), reads)
        })
        .collect();
    drop(sim);
    Ok(out)
}
