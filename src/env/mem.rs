//! An in-memory environment: a disk with a crash model, a manual clock and an in-process network.
//!
//! The disk keeps, per file, the bytes every reader sees and the bytes that would survive a crash.
//! `sync_data` makes a file's current bytes durable; directory entries (creations, renames,
//! removals) become durable on `sync_dir` of their directory. [`MemDisk::crash`] throws away
//! everything not durable, exactly what a power loss does to a well-behaved disk.
//! [`MemDisk::crash_torn`] is the seeded variant the simulator uses: of each write not yet synced,
//! a random prefix of its 512-byte sectors survives (torn writes), and unsynced length changes
//! survive or not. The fault injection layer (`fault/`) adds misdirected and lost writes, bit rot
//! and latent sector errors on top of this.
//!
//! Per file, `durable` plus the `pending` operations (every change since the last `sync_data`,
//! in order) always equals `current`; `sync_data` applies `pending` to `durable`, so a sync costs
//! the bytes written since the last one, not the file size.
//!
//! Everything here is deterministic: no threads, no OS calls; background work runs inline.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::{BoxFuture, Clock, Conn, Disk, Env, File, Listener, Net, OpenMode, Runtime};

/// Builds an in-memory environment from a seed. The clock starts at a fixed wall time.
pub fn env(seed: u64) -> (Env, Arc<MemDisk>, Arc<ManualClock>) {
    let disk = Arc::new(MemDisk::default());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    let env =
        Env::new(disk.clone(), clock.clone(), Arc::new(MemNet::default()), Arc::new(InlineRuntime), seed);
    (env, disk, clock)
}

/// Sector size of the torn-write model.
pub const SECTOR: u64 = 512;

/// A change to a file that is not durable yet.
enum PendingOp {
    Write { off: u64, data: Vec<u8> },
    SetLen(u64),
}

impl PendingOp {
    fn apply(&self, to: &mut Vec<u8>) {
        match self {
            PendingOp::Write { off, data } => write_into(to, *off as usize, data),
            PendingOp::SetLen(len) => to.resize(*len as usize, 0),
        }
    }
}

fn write_into(to: &mut Vec<u8>, off: usize, data: &[u8]) {
    let end = off + data.len();
    if to.len() < end {
        to.resize(end, 0);
    }
    to[off..end].copy_from_slice(data);
}

#[derive(Default)]
struct FileData {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<PendingOp>,
}

/// What [`MemDisk::crash_torn`] did to the unsynced writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TornReport {
    /// Unsynced writes that vanished entirely.
    pub lost: u64,
    /// Unsynced writes of which only a prefix of sectors survived.
    pub torn: u64,
    /// Unsynced writes that survived whole.
    pub kept: u64,
}

#[derive(Default)]
struct DiskState {
    /// Visible names → file id.
    names: BTreeMap<PathBuf, u64>,
    /// Names as they would be after a crash.
    durable_names: BTreeMap<PathBuf, u64>,
    /// Directories (durable on creation: a simplification the real code never depends on, since
    /// it syncs the parent after creating a directory).
    dirs: BTreeMap<PathBuf, ()>,
    files: BTreeMap<u64, Arc<Mutex<FileData>>>,
    next_id: u64,
}

/// The in-memory disk.
#[derive(Default)]
pub struct MemDisk {
    state: Mutex<DiskState>,
    /// No crash model: nothing durable is tracked, syncs are free (`--mem-db`, where the data
    /// dies with the process anyway and a second copy of every chunk would only cost memory).
    volatile: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{}: not found", path.display()))
}

impl MemDisk {
    /// A disk without a crash model (see the `volatile` field), for `--mem-db`.
    pub fn volatile() -> MemDisk {
        MemDisk { volatile: true, ..MemDisk::default() }
    }

    /// Simulates a power loss: unsynced bytes and unsynced directory changes vanish.
    pub fn crash(&self) {
        let mut st = lock(&self.state);
        st.names = st.durable_names.clone();
        let live: Vec<u64> = st.names.values().copied().collect();
        st.files.retain(|id, _| live.contains(id));
        for f in st.files.values() {
            let mut f = lock(f);
            f.current = f.durable.clone();
            f.pending.clear();
        }
    }

    /// Simulates a power loss with torn writes, drawing every choice from `rng`: each unsynced
    /// write (in order, per file) vanishes, survives whole, or survives as a random prefix of its
    /// 512-byte sectors; each unsynced length change survives or not. Unsynced directory changes
    /// vanish, as in [`MemDisk::crash`].
    pub fn crash_torn(&self, rng: &mut dyn rand::RngCore) -> TornReport {
        let mut report = TornReport::default();
        let mut st = lock(&self.state);
        st.names = st.durable_names.clone();
        let live: Vec<u64> = st.names.values().copied().collect();
        st.files.retain(|id, _| live.contains(id));
        for f in st.files.values() {
            let mut guard = lock(f);
            let f = &mut *guard;
            for op in std::mem::take(&mut f.pending) {
                match op {
                    PendingOp::Write { off, data } => {
                        // Sector boundaries are absolute: the first piece ends at the next one.
                        let mut cuts = vec![0usize];
                        let mut at = (off / SECTOR + 1) * SECTOR;
                        while at < off + data.len() as u64 {
                            cuts.push((at - off) as usize);
                            at += SECTOR;
                        }
                        cuts.push(data.len());
                        let pieces = cuts.len() - 1;
                        let keep = match rng.next_u32() % 3 {
                            0 => 0,
                            1 => pieces,
                            _ => (rng.next_u32() as usize) % (pieces + 1),
                        };
                        match keep {
                            0 => report.lost += 1,
                            k if k == pieces => report.kept += 1,
                            _ => report.torn += 1,
                        }
                        if keep > 0 {
                            write_into(&mut f.durable, off as usize, &data[..cuts[keep]]);
                        }
                    }
                    PendingOp::SetLen(len) => {
                        if rng.next_u32() % 2 == 0 {
                            f.durable.resize(len as usize, 0);
                        }
                    }
                }
            }
            f.current = f.durable.clone();
        }
        report
    }

    /// Visible files and their current lengths, in path order.
    pub fn files(&self) -> Vec<(PathBuf, u64)> {
        let st = lock(&self.state);
        st.names.iter().map(|(p, id)| (p.clone(), lock(&st.files[id]).current.len() as u64)).collect()
    }

    /// Flips one bit of the durable and current contents of `path` at `offset` (a latent error).
    pub fn flip_bit(&self, path: &Path, offset: u64, bit: u8) -> io::Result<()> {
        let st = lock(&self.state);
        let id = st.names.get(path).ok_or_else(|| not_found(path))?;
        let mut f = lock(&st.files[id]);
        let i = offset as usize;
        if i >= f.current.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "offset past end"));
        }
        f.current[i] ^= 1 << (bit % 8);
        if i < f.durable.len() {
            f.durable[i] ^= 1 << (bit % 8);
        }
        // Keep `durable` + `pending` == `current`: pending writes over the byte carry the flip too.
        for op in f.pending.iter_mut() {
            if let PendingOp::Write { off, data } = op {
                if (*off as usize..*off as usize + data.len()).contains(&i) {
                    data[i - *off as usize] ^= 1 << (bit % 8);
                }
            }
        }
        Ok(())
    }

    /// What a power loss now would leave below `under`: each durable name with its durable bytes,
    /// in path order. The disk is not changed (the simulator checks such states on other disks).
    pub fn durable_files(&self, under: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let st = lock(&self.state);
        st.durable_names
            .iter()
            .filter(|(p, _)| p.starts_with(under))
            .map(|(p, id)| (p.clone(), lock(&st.files[id]).durable.clone()))
            .collect()
    }

    /// Whether bytes `offset..offset + len` of the file at `path` would survive a power loss now
    /// as they read now: its name is durable and its durable bytes there equal its current ones.
    /// `None` when no durable name `path` exists. The disk is not changed.
    pub fn durable_matches(&self, path: &Path, offset: u64, len: u64) -> Option<bool> {
        let st = lock(&self.state);
        let id = st.durable_names.get(path)?;
        let f = lock(&st.files[id]);
        let range = |v: &Vec<u8>| {
            let from = (offset as usize).min(v.len());
            let to = ((offset + len) as usize).min(v.len());
            v[from..to].to_vec()
        };
        let (durable, current) = (range(&f.durable), range(&f.current));
        Some(durable.len() as u64 == len && durable == current)
    }

    /// A disk holding `files`, every one durable.
    pub fn with_files(files: &[(PathBuf, Vec<u8>)]) -> io::Result<MemDisk> {
        let disk = MemDisk::default();
        for (path, bytes) in files {
            let dir = super::parent(path);
            disk.create_dir_all(dir)?;
            let f = disk.open(path, OpenMode::CreateTruncate)?;
            f.write_all_at(bytes, 0)?;
            f.sync_data()?;
            disk.sync_dir(dir)?;
        }
        Ok(disk)
    }

    /// Total bytes held (current contents).
    pub fn used_bytes(&self) -> u64 {
        let st = lock(&self.state);
        st.files.values().map(|f| lock(f).current.len() as u64).sum()
    }
}

struct MemFile {
    data: Arc<Mutex<FileData>>,
    writable: bool,
    volatile: bool,
}

impl File for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let f = lock(&self.data);
        let off = offset as usize;
        if off >= f.current.len() {
            return Ok(0);
        }
        let n = buf.len().min(f.current.len() - off);
        buf[..n].copy_from_slice(&f.current[off..off + n]);
        Ok(n)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "file opened read-only"));
        }
        let mut f = lock(&self.data);
        write_into(&mut f.current, offset as usize, buf);
        if !self.volatile {
            f.pending.push(PendingOp::Write { off: offset, data: buf.to_vec() });
        }
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        if self.volatile {
            return Ok(());
        }
        let mut guard = lock(&self.data);
        let f = &mut *guard;
        for op in f.pending.drain(..) {
            op.apply(&mut f.durable);
        }
        debug_assert_eq!(f.durable.len(), f.current.len());
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "file opened read-only"));
        }
        let mut f = lock(&self.data);
        f.current.resize(len as usize, 0);
        if !self.volatile {
            f.pending.push(PendingOp::SetLen(len));
        }
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(lock(&self.data).current.len() as u64)
    }
}

impl Disk for MemDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let mut st = lock(&self.state);
        let parent = super::parent(path).to_path_buf();
        let existing = st.names.get(path).copied();
        let id = match (mode, existing) {
            (OpenMode::Read | OpenMode::ReadWrite, None) => return Err(not_found(path)),
            (OpenMode::Read | OpenMode::ReadWrite, Some(id)) => id,
            (OpenMode::CreateNew, Some(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: exists", path.display()),
                ))
            }
            (OpenMode::CreateTruncate, Some(id)) => {
                let mut f = lock(&st.files[&id]);
                f.current.clear();
                f.pending.push(PendingOp::SetLen(0));
                drop(f);
                id
            }
            (OpenMode::CreateNew | OpenMode::CreateTruncate, None) => {
                if !st.dirs.contains_key(&parent) && parent != Path::new(".") {
                    return Err(not_found(&parent));
                }
                st.next_id += 1;
                let id = st.next_id;
                st.files.insert(id, Arc::default());
                st.names.insert(path.to_path_buf(), id);
                id
            }
        };
        Ok(Arc::new(MemFile {
            data: st.files[&id].clone(),
            writable: mode != OpenMode::Read,
            volatile: self.volatile,
        }))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        let mut p = Some(path);
        while let Some(d) = p {
            if d.as_os_str().is_empty() {
                break;
            }
            st.dirs.insert(d.to_path_buf(), ());
            p = d.parent();
        }
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        let id = st.names.remove(from).ok_or_else(|| not_found(from))?;
        st.names.insert(to.to_path_buf(), id);
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.names.remove(path).ok_or_else(|| not_found(path))?;
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = lock(&self.state);
        let in_dir = |p: &Path| super::parent(p) == dir;
        let keep: Vec<(PathBuf, u64)> =
            st.durable_names.iter().filter(|(p, _)| !in_dir(p)).map(|(p, i)| (p.clone(), *i)).collect();
        let now: Vec<(PathBuf, u64)> =
            st.names.iter().filter(|(p, _)| in_dir(p)).map(|(p, i)| (p.clone(), *i)).collect();
        st.durable_names = keep.into_iter().chain(now).collect();
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = lock(&self.state);
        if !st.dirs.contains_key(dir) {
            return Err(not_found(dir));
        }
        let mut out: Vec<String> = st
            .names
            .keys()
            .map(|p| p.as_path())
            .chain(st.dirs.keys().map(|p| p.as_path()))
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
    fn exists(&self, path: &Path) -> bool {
        let st = lock(&self.state);
        st.names.contains_key(path) || st.dirs.contains_key(path)
    }
    fn space(&self, _path: &Path) -> Option<(u64, u64)> {
        let used = self.used_bytes();
        Some((1 << 40, (1u64 << 40).saturating_sub(used)))
    }
}

/// A clock that moves only when told to.
pub struct ManualClock {
    mono_us: AtomicU64,
    wall_us: AtomicI64,
}

impl ManualClock {
    /// A clock at monotonic zero and the given wall time.
    pub fn new(wall_us: i64) -> ManualClock {
        ManualClock { mono_us: AtomicU64::new(0), wall_us: AtomicI64::new(wall_us) }
    }
    /// Moves both clocks forward.
    pub fn advance(&self, d: Duration) {
        self.mono_us.fetch_add(d.as_micros() as u64, Ordering::SeqCst);
        self.wall_us.fetch_add(d.as_micros() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn monotonic(&self) -> Duration {
        Duration::from_micros(self.mono_us.load(Ordering::SeqCst))
    }
    fn wall_micros(&self) -> i64 {
        self.wall_us.load(Ordering::SeqCst)
    }
}

/// A connection handed from `connect` to the listener: the server end and the client's address.
type Incoming = (tokio::io::DuplexStream, SocketAddr);

/// An in-process network of tokio duplex pipes.
#[derive(Default)]
pub struct MemNet {
    listeners: Arc<Mutex<BTreeMap<SocketAddr, tokio::sync::mpsc::Sender<Incoming>>>>,
    next_port: AtomicU64,
}

struct MemListener {
    addr: SocketAddr,
    rx: tokio::sync::mpsc::Receiver<Incoming>,
}

impl Listener for MemListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(Box<dyn Conn>, SocketAddr)>> {
        Box::pin(async move {
            match self.rx.recv().await {
                Some((s, a)) => Ok((Box::new(s) as Box<dyn Conn>, a)),
                None => Err(io::Error::new(io::ErrorKind::BrokenPipe, "listener closed")),
            }
        })
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

impl Net for MemNet {
    fn listen(&self, mut addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            if addr.port() == 0 {
                addr.set_port(40_000 + (self.next_port.fetch_add(1, Ordering::SeqCst) % 20_000) as u16);
            }
            let (tx, rx) = tokio::sync::mpsc::channel(128);
            let mut l = lock(&self.listeners);
            if l.contains_key(&addr) {
                return Err(io::Error::new(io::ErrorKind::AddrInUse, addr.to_string()));
            }
            l.insert(addr, tx);
            Ok(Box::new(MemListener { addr, rx }) as Box<dyn Listener>)
        })
    }
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Conn>>> {
        Box::pin(async move {
            let tx = lock(&self.listeners).get(&addr).cloned();
            let tx = tx.ok_or_else(|| io::Error::new(io::ErrorKind::ConnectionRefused, addr.to_string()))?;
            let (a, b) = tokio::io::duplex(64 * 1024);
            let from: SocketAddr = ([127, 0, 0, 2], 1).into();
            tx.send((b, from))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::ConnectionRefused, addr.to_string()))?;
            Ok(Box::new(a) as Box<dyn Conn>)
        })
    }
}

/// Runs blocking and background work inline; spawns on the ambient tokio runtime.
pub struct InlineRuntime;

impl Runtime for InlineRuntime {
    fn spawn(&self, fut: BoxFuture<'static, ()>) {
        tokio::spawn(fut);
    }
    // Timers follow the ambient tokio clock, which tests pause and advance (`start_paused`).
    #[allow(clippy::disallowed_methods)]
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
    fn blocking(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        f();
        Box::pin(async {})
    }
    fn background(&self, _name: &'static str, f: Box<dyn FnOnce() + Send>) {
        f();
    }
    fn lane(&self, _name: &'static str) -> Box<dyn super::Lane> {
        Box::new(InlineRuntime)
    }
}

impl super::Lane for InlineRuntime {
    fn run(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        self.blocking(f)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn file(d: &MemDisk, p: &str) -> Arc<dyn File> {
        d.create_dir_all(Path::new("/d")).unwrap();
        let f = d.open(Path::new(p), OpenMode::CreateNew).unwrap();
        d.sync_dir(Path::new("/d")).unwrap();
        f
    }

    fn contents(d: &MemDisk, p: &str) -> Vec<u8> {
        let f = d.open(Path::new(p), OpenMode::Read).unwrap();
        let mut b = vec![0u8; f.len().unwrap() as usize];
        f.read_exact_at(&mut b, 0).unwrap();
        b
    }

    #[test]
    fn crash_keeps_exactly_what_was_synced() {
        let d = MemDisk::default();
        let f = file(&d, "/d/a");
        f.write_all_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        f.write_all_at(b"J", 0).unwrap();
        f.set_len(2).unwrap();
        d.crash();
        assert_eq!(contents(&d, "/d/a"), b"hello");
        // A file whose name was never made durable vanishes.
        d.open(Path::new("/d/b"), OpenMode::CreateNew).unwrap().sync_data().unwrap();
        d.crash();
        assert!(!d.exists(Path::new("/d/b")));
    }

    #[test]
    fn torn_crash_keeps_a_sector_prefix_of_each_unsynced_write() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..64u64 {
            let d = MemDisk::default();
            let f = file(&d, "/d/a");
            f.write_all_at(&[1u8; 2048], 0).unwrap();
            f.sync_data().unwrap();
            // Spans sectors 0..=3 starting mid-sector: pieces of 412, 512, 512, 100 bytes.
            f.write_all_at(&[7u8; 1536], 100).unwrap();
            let r = d.crash_torn(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
            assert_eq!(r.lost + r.torn + r.kept, 1);
            let c = contents(&d, "/d/a");
            let sevens = c.iter().filter(|&&b| b == 7).count();
            assert!([0, 412, 924, 1436, 1536].contains(&sevens), "{sevens}");
            assert!(c[..100].iter().all(|&b| b == 1));
            assert!(c[100..100 + sevens].iter().all(|&b| b == 7));
            assert!(c[100 + sevens..].iter().all(|&b| b == 1));
            seen.insert(sevens);
        }
        assert!(seen.len() >= 4, "prefixes seen: {seen:?}");
    }

    #[test]
    fn sync_applies_pending_changes_in_order() {
        let d = MemDisk::default();
        let f = file(&d, "/d/a");
        f.write_all_at(b"abcdef", 0).unwrap();
        f.set_len(3).unwrap();
        f.write_all_at(b"Z", 4).unwrap();
        d.flip_bit(Path::new("/d/a"), 0, 0).unwrap();
        f.sync_data().unwrap();
        let want = contents(&d, "/d/a");
        assert_eq!(want, b"`bc\0Z");
        d.crash();
        assert_eq!(contents(&d, "/d/a"), want);
    }
}
