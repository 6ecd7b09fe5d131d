//! The one seam between the node and the world.
//!
//! Time, randomness, disk, network and task spawning reach the node only through [`Env`]. Three
//! implementations exist: [`real`] (tokio and std, the only module allowed to touch the OS; clippy's
//! `disallowed-methods`/`disallowed-types` in `clippy.toml` enforce this), [`mem`] (an in-memory
//! disk with a crash model, a manual clock and an in-process network, for unit and model tests) and
//! [`sim`] (feature `sim` only: turmoil's network and clock, used by the simulator in `sim/`).
//!
//! Invariants every implementation keeps:
//! - disk calls are synchronous and positional (`read_at`/`write_all_at`); a write is durable only
//!   after `sync_data` on the file, and a create, rename or remove only after `sync_dir` on its
//!   parent directory;
//! - `Clock::monotonic` never goes backwards; the wall clock may jump;
//! - all randomness comes from one seeded ChaCha stream, so a seed reproduces a run;
//! - `Runtime::background` runs work that must not block the caller (chunk pre-allocation, index
//!   flushes and merges); the simulated runtimes run it inline, which keeps runs deterministic.

pub mod mem;
pub mod overlay;
pub mod real;
#[cfg(feature = "sim")]
pub mod sim;
mod watermark;

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
pub use watermark::Watermark;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use tokio::io::{AsyncRead, AsyncWrite};

/// A boxed, sendable future, the currency of the object-safe async traits below.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How [`Disk::open`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Read and write; the file is created, and must not exist yet.
    CreateNew,
    /// Read and write; created if missing, truncated to zero if present.
    CreateTruncate,
}

/// The unit of [`Disk::open_direct`] writes.
pub const DIRECT_BLOCK: usize = 4096;

/// An open file. Positional I/O only, so one handle can serve concurrent readers and a writer.
pub trait File: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every write so far (and the file length) durable.
    fn sync_data(&self) -> io::Result<()>;
    /// Starts writing the file's dirty pages to the disk and returns without waiting for them: a
    /// hint, which durability never rests on (only [`File::sync_data`] makes writes durable).
    /// A copy that calls it after each file lets the disk write one while the next is copied,
    /// instead of all of them at the sync. Files without a page cache ignore it.
    fn start_writeback(&self) {}
    /// Truncates or extends (with zeros) the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Reads exactly `buf.len()` bytes at `offset`, failing with `UnexpectedEof` on a short file.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read")),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }

    /// Reads exactly `len` bytes at `offset` into a new buffer (as [`File::read_exact_at`]). The
    /// real file reads into the buffer without zeroing it first: large reads of the log would
    /// otherwise spend as long clearing memory as copying the data in.
    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read_exact_at(&mut v, offset)?;
        Ok(v)
    }
}

/// A file system rooted wherever the paths point.
pub trait Disk: Send + Sync {
    /// Opens (or creates) a file.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>>;
    /// Creates a directory and its parents (durable after `sync_dir` of each parent).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes creations, renames and removals of entries in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of `dir` (files and directories), sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// `(total, available)` bytes of the volume holding `path`, when known.
    fn space(&self, path: &Path) -> Option<(u64, u64)>;

    /// Opens an existing file for overwrites of whole [`DIRECT_BLOCK`]s at block-aligned offsets
    /// that bypass the page cache (`O_DIRECT` on the real disk, where a 4 KiB overwrite plus
    /// `fdatasync` takes about 40 µs instead of 65 through the page cache). Other writes fail
    /// there; reads work as usual. The default is [`Disk::open`] for reading and writing.
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        self.open(path, OpenMode::ReadWrite)
    }

    /// Runs `f` on this thread with every file read served only from memory (the page cache): a
    /// read that would wait for the device fails at once instead. True when `f` ran and none of
    /// its reads had to fail; false when one did, or when this disk cannot tell (the default,
    /// which does not run `f`): the caller then runs the job where it may block.
    fn run_cached(&self, f: &mut dyn FnMut()) -> bool {
        let _ = f;
        false
    }

    /// Takes an exclusive advisory lock on the file at `path` (created if missing) for as long
    /// as the returned guard lives; `Ok(None)` when another holder has it. The lock tells
    /// processes apart (the real disk uses `flock`, released when its holder dies); disks that
    /// live inside one process (in-memory, simulated) have no processes to exclude and grant
    /// every request (the default).
    fn try_lock(&self, path: &Path) -> io::Result<Option<DiskLock>> {
        let _ = path;
        Ok(Some(DiskLock(Box::new(()))))
    }

    /// Copies the file `from` to `to` (created, or truncated), without syncing it; returns the
    /// bytes copied. Fails with `NotFound` when `from` does not exist. The default reads and writes
    /// 4 MiB pieces through [`Disk::open`]; the real disk copies inside the kernel
    /// (`copy_file_range`), as `cp` does, without passing the bytes through user space.
    fn copy_file(&self, from: &Path, to: &Path) -> io::Result<u64> {
        let src = self.open(from, OpenMode::Read)?;
        let dst = self.open(to, OpenMode::CreateTruncate)?;
        let len = src.len()?;
        let mut buf = vec![0u8; (4 << 20).min(len.max(1) as usize)];
        let mut at = 0u64;
        loop {
            let n = src.read_at(&mut buf, at)?;
            if n == 0 {
                return Ok(at);
            }
            dst.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
    }

    /// Creates `path` (truncating it) holding `len` zero bytes that are written and synced, so
    /// later writes overwrite allocated blocks. The default writes zeros in 1 MiB pieces; the real
    /// disk bypasses the page cache, which is several times faster for large files.
    fn create_zeroed(&self, path: &Path, len: u64) -> io::Result<Arc<dyn File>> {
        let f = self.open(path, OpenMode::CreateTruncate)?;
        write_zeros(&*f, 0, len)?;
        f.sync_data()?;
        Ok(f)
    }
}

/// A held [`Disk::try_lock`]: dropping it releases the lock.
pub struct DiskLock(pub Box<dyn std::any::Any + Send + Sync>);

/// Adds the time between two monotonic readings (`to` - `from`) to a counter of nanoseconds, for
/// statistics.
pub fn add_elapsed(counter: &std::sync::atomic::AtomicU64, from: Duration, to: Duration) {
    let ns = u64::try_from(to.saturating_sub(from).as_nanos()).unwrap_or(u64::MAX);
    counter.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
}

/// Monotonic and wall-clock time.
pub trait Clock: Send + Sync {
    /// Time since the environment started; never decreases.
    fn monotonic(&self) -> Duration;
    /// Microseconds since the Unix epoch (may jump).
    fn wall_micros(&self) -> i64;
}

/// A bidirectional byte stream.
pub trait Conn: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Conn for T {}

/// A bound listening socket.
pub trait Listener: Send {
    /// Waits for the next connection.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(Box<dyn Conn>, SocketAddr)>>;
    /// The address actually bound (useful with port 0).
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A connection to a local socket and the user id of the process at its other end (`None` when it
/// cannot be told).
pub type LocalConn = (Box<dyn Conn>, Option<u32>);

/// A listening local (unix domain) socket, for administration by processes of the same machine.
pub trait LocalListener: Send {
    /// Waits for the next connection.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<LocalConn>>;
    /// The user id the listening process runs as (`None` when it cannot be told).
    fn owner_uid(&self) -> Option<u32>;
}

/// The network.
pub trait Net: Send + Sync {
    /// Binds a listener.
    fn listen(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Listener>>>;
    /// Opens a connection.
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Conn>>>;

    /// Every address `host` names (its A and AAAA records, in the resolver's order, without
    /// repeats); an IP address names itself. An empty list is an answer (a name without
    /// records), an error is no answer. The default knows only IP addresses: environments
    /// without a resolver (in-memory) answer names with `NotFound`.
    fn resolve(&self, host: &str) -> BoxFuture<'_, io::Result<Vec<IpAddr>>> {
        let answer = match host.parse::<IpAddr>() {
            Ok(ip) => Ok(vec![ip]),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host}: this environment has no resolver"),
            )),
        };
        Box::pin(async move { answer })
    }

    /// Listens on a local socket at `path` (a stale socket file there is replaced) that only the
    /// listening process's own user may open: the real one is a unix domain socket made mode
    /// 0600. Environments without local sockets (the default: in-memory and simulated) refuse.
    fn listen_local(&self, path: &Path) -> BoxFuture<'_, io::Result<Box<dyn LocalListener>>> {
        let what = format!("{}: this environment has no local sockets", path.display());
        Box::pin(async move { Err(io::Error::new(io::ErrorKind::Unsupported, what)) })
    }

    /// Connects to the local socket at `path` (see [`Net::listen_local`]).
    fn connect_local(&self, path: &Path) -> BoxFuture<'_, io::Result<Box<dyn Conn>>> {
        let what = format!("{}: this environment has no local sockets", path.display());
        Box::pin(async move { Err(io::Error::new(io::ErrorKind::Unsupported, what)) })
    }
}

/// Task spawning, timers and blocking work.
pub trait Runtime: Send + Sync {
    /// Runs a future to completion in the background.
    fn spawn(&self, fut: BoxFuture<'static, ()>);
    /// Completes after `d` has passed on this environment's clock.
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()>;
    /// Runs blocking work (disk I/O, fsync) where it does not stall the async tasks, and completes
    /// when it is done.
    fn blocking(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()>;
    /// Runs blocking work without waiting for it. Simulated runtimes run it inline.
    fn background(&self, name: &'static str, f: Box<dyn FnOnce() + Send>);
    /// A [`Lane`] for one hot, serial kind of blocking work. Simulated and inline runtimes run its
    /// jobs as they run [`Runtime::blocking`].
    fn lane(&self, name: &'static str) -> Box<dyn Lane>;
    /// A [`Lane`] whose jobs run beside the work that queues them, not inside it: the commit
    /// leader (itself a lane job) queues a group's checkpoint flush there and goes on with the
    /// next group. The real runtime gives it a thread, as [`Runtime::lane`] (the default);
    /// the simulated one runs its jobs in order on a task of their own once the caller yields, each
    /// followed by the modelled I/O delay, so a crash can fall between a job and the work queued
    /// after it.
    fn side_lane(&self, name: &'static str) -> Box<dyn Lane> {
        self.lane(name)
    }
    /// Process and system figures for `/stats`; simulated runtimes report zeros.
    fn os_stats(&self) -> OsStats {
        OsStats::default()
    }
}

/// Blocking jobs run one after another, in the order given, on a thread that belongs to the lane.
/// For work that recurs thousands of times a second (the store's commit leader): unlike the
/// blocking pool, which wakes whichever idle thread waited longest, the same thread takes every job,
/// so its caches stay warm and a job costs one wake-up and no task allocation. A job that panics
/// is logged and the lane goes on with the next.
pub trait Lane: Send + Sync {
    /// Queues `f`; the future completes when it has run (dropping the future does not cancel it).
    fn run(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()>;
}

/// Process and system figures (`/stats`): zeros where unknown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OsStats {
    /// Process id.
    pub pid: u32,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Threads of the process.
    pub threads: u64,
    /// User plus system CPU time of the process, seconds.
    pub cpu_seconds: f64,
    /// Bytes the process read from storage.
    pub io_read_bytes: u64,
    /// Bytes the process wrote to storage.
    pub io_write_bytes: u64,
    /// Read calls.
    pub io_read_ops: u64,
    /// Write calls.
    pub io_write_ops: u64,
    /// Busy CPU ticks of the whole system since boot.
    pub sys_busy_ticks: u64,
    /// All CPU ticks of the whole system since boot.
    pub sys_total_ticks: u64,
    /// Available memory of the system, bytes.
    pub sys_free_bytes: u64,
    /// Memory of the system, bytes.
    pub sys_total_bytes: u64,
    /// Virtual memory of the process, bytes.
    pub virtual_bytes: u64,
    /// Open file descriptors of the process.
    pub open_fds: u64,
    /// The system's load average over 1, 5 and 15 minutes.
    pub load_avg: [f64; 3],
    /// Online CPUs.
    pub cpus: u32,
}

/// The environment handed to every part of the node.
#[derive(Clone)]
pub struct Env {
    /// Files and directories.
    pub disk: Arc<dyn Disk>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Sockets.
    pub net: Arc<dyn Net>,
    /// Tasks and timers.
    pub rt: Arc<dyn Runtime>,
    rng: Arc<Mutex<ChaCha20Rng>>,
}

impl Env {
    /// Builds an environment from its parts and an entropy seed.
    pub fn new(
        disk: Arc<dyn Disk>,
        clock: Arc<dyn Clock>,
        net: Arc<dyn Net>,
        rt: Arc<dyn Runtime>,
        seed: u64,
    ) -> Env {
        Env { disk, clock, net, rt, rng: Arc::new(Mutex::new(ChaCha20Rng::seed_from_u64(seed))) }
    }

    /// The next 64 random bits of this environment's seeded stream.
    pub fn random_u64(&self) -> u64 {
        self.rng.lock().unwrap_or_else(|e| e.into_inner()).next_u64()
    }

    /// Fills `buf` from the seeded stream.
    pub fn fill_random(&self, buf: &mut [u8]) {
        self.rng.lock().unwrap_or_else(|e| e.into_inner()).fill_bytes(buf)
    }

    /// A random (version 4) UUID from the seeded stream.
    pub fn new_uuid(&self) -> uuid::Uuid {
        let mut b = [0u8; 16];
        self.fill_random(&mut b);
        uuid::Builder::from_random_bytes(b).into_uuid()
    }

    /// Runs `f` through [`Runtime::blocking`] and returns its result.
    pub async fn blocking<R, F>(&self, f: F) -> R
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let slot: Arc<Mutex<Option<R>>> = Arc::new(Mutex::new(None));
        let out = slot.clone();
        self.rt
            .blocking(Box::new(move || {
                let r = f();
                *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            }))
            .await;
        let r = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        r.expect("blocking work completed without a result (it panicked)")
    }

    /// Runs `f`, a job that only reads, on the calling task when every read it makes is served
    /// from memory ([`Disk::run_cached`]), which saves two thread hand-offs; otherwise runs it
    /// (again) through [`Env::blocking`]. A run that met a read needing the device is discarded,
    /// so `f` must have no effect beyond its result and caches of what it read.
    pub async fn read_job<R, F>(&self, f: F) -> R
    where
        R: Send + 'static,
        F: Fn() -> R + Send + 'static,
    {
        let mut out = None;
        if self.disk.run_cached(&mut || out = Some(f())) {
            if let Some(r) = out {
                return r;
            }
        }
        self.blocking(f).await
    }

    /// Writes `bytes` to `path` atomically and durably: a `.tmp` sibling is written and synced, then
    /// renamed over `path`, then the directory is synced.
    pub fn write_file_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let tmp = tmp_path(path);
        let f = self.disk.open(&tmp, OpenMode::CreateTruncate)?;
        f.write_all_at(bytes, 0)?;
        f.sync_data()?;
        drop(f);
        self.disk.rename(&tmp, path)?;
        self.disk.sync_dir(parent(path))
    }

    /// Reads a whole file.
    pub fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        read_whole(&*self.disk, path)
    }
}

/// Reads the whole file at `path` of `disk`.
pub fn read_whole(disk: &dyn Disk, path: &Path) -> io::Result<Vec<u8>> {
    let f = disk.open(path, OpenMode::Read)?;
    let len = f.len()?;
    let mut buf = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
    f.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

/// Writes zeros over `[from, to)` of `f` in 1 MiB pieces (not synced).
pub fn write_zeros(f: &dyn File, from: u64, to: u64) -> io::Result<()> {
    const PIECE: usize = 1 << 20;
    let zeros = vec![0u8; PIECE.min(to.saturating_sub(from) as usize)];
    let mut off = from;
    while off < to {
        let n = (to - off).min(PIECE as u64) as usize;
        f.write_all_at(&zeros[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

/// The `.tmp` sibling used for atomic replacement.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// The parent directory of `path` (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
