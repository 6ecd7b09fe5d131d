//! Fault injection over Annal's [`Env`](annal::env::Env) seam.
//!
//! Three parts:
//! - [`FaultyDisk`] wraps any [`Disk`] and fails or corrupts operations according to a shared,
//!   mutable [`DiskFaults`] set of knobs: `EIO` on a chosen sync or write, `ENOSPC` once a byte
//!   budget is spent, bit flips on read, syncs that take time on a manual clock. Tests flip the
//!   knobs directly. Every injected fault is counted, so a test can assert that it actually
//!   happened.
//! - [`seeded`]: [`SeededDisk`], the simulator's disk wrapper, draws its faults (EIO, bit flips,
//!   lost and misdirected writes, latent sector errors, ENOSPC) from a seeded stream.
//! - [`plan`]: [`FaultPlan`], derived from a seed: which fault kinds a run has (swarm testing),
//!   their rates and a timed schedule (crashes, torn writes, partitions, clock jumps, …).

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use annal::env::mem::ManualClock;
use annal::env::{Disk, File, OpenMode};

pub mod plan;
pub mod seeded;

pub use plan::{FaultEvent, FaultKind, FaultPlan};
pub use seeded::{DiskRates, SeededDisk, SeededFaults};

/// The knobs of a [`FaultyDisk`]. All counters are shared, so a test can change them while the
/// node runs.
#[derive(Debug, Default)]
pub struct DiskFaults {
    /// Fail the n-th `sync_data` from now (1 = the next one) with `EIO`; 0 = never.
    pub fail_sync_after: AtomicU64,
    /// Fail every `sync_data` with `EIO` while set.
    pub fail_all_syncs: AtomicBool,
    /// Bytes that may still be written before writes fail with `ENOSPC`; `u64::MAX` = unlimited.
    pub space_left: AtomicU64,
    /// Fail the n-th write from now with `EIO`; 0 = never.
    pub fail_write_after: AtomicU64,
    /// Flip the lowest bit of the first byte of every read whose file name contains this text
    /// (empty = off).
    pub flip_reads_of: std::sync::Mutex<String>,
    /// Faults injected so far.
    pub injected: AtomicU64,
    /// Bytes read through the disk (to check that start-up does not re-read the log).
    pub bytes_read: AtomicU64,
    /// A slow disk under a manual clock (None = off).
    pub slow_syncs: std::sync::Mutex<Option<SlowSyncs>>,
}

/// Every sync (of a file or a directory) first moves `clock` forward by `by`: a slow disk under a
/// [`ManualClock`], for tests that time what the node does around its syncs.
#[derive(Clone)]
pub struct SlowSyncs {
    /// The node's clock.
    pub clock: Arc<ManualClock>,
    /// How long one sync takes.
    pub by: Duration,
}

impl std::fmt::Debug for SlowSyncs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlowSyncs").field("by", &self.by).finish_non_exhaustive()
    }
}

impl DiskFaults {
    /// A plan with no faults.
    pub fn none() -> Arc<DiskFaults> {
        let f = DiskFaults::default();
        f.space_left.store(u64::MAX, Ordering::SeqCst);
        Arc::new(f)
    }

    /// Lets one sync's time pass (see [`SlowSyncs`]).
    fn sync_time(&self) {
        if let Some(slow) = &*self.slow_syncs.lock().unwrap_or_else(|e| e.into_inner()) {
            slow.clock.advance(slow.by);
        }
    }

    fn countdown(counter: &AtomicU64) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| if n == 0 { None } else { Some(n - 1) })
            .map(|prev| prev == 1)
            .unwrap_or(false)
    }
}

fn eio(what: &str) -> io::Error {
    io::Error::other(format!("injected EIO on {what}"))
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(28)
}

/// A disk that injects faults.
pub struct FaultyDisk {
    inner: Arc<dyn Disk>,
    faults: Arc<DiskFaults>,
}

impl FaultyDisk {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Disk>, faults: Arc<DiskFaults>) -> FaultyDisk {
        FaultyDisk { inner, faults }
    }
}

struct FaultyFile {
    inner: Arc<dyn File>,
    faults: Arc<DiskFaults>,
    name: String,
}

impl File for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let n = self.inner.read_at(buf, offset)?;
        self.faults.bytes_read.fetch_add(n as u64, Ordering::SeqCst);
        let pattern = self.faults.flip_reads_of.lock().map(|p| p.clone()).unwrap_or_default();
        if n > 0 && !pattern.is_empty() && self.name.contains(&pattern) {
            buf[0] ^= 1;
            self.faults.injected.fetch_add(1, Ordering::SeqCst);
        }
        Ok(n)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if DiskFaults::countdown(&self.faults.fail_write_after) {
            self.faults.injected.fetch_add(1, Ordering::SeqCst);
            return Err(eio("write"));
        }
        let len = buf.len() as u64;
        let ok = self
            .faults
            .space_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                if s == u64::MAX {
                    Some(s)
                } else {
                    s.checked_sub(len)
                }
            })
            .is_ok();
        if !ok {
            self.faults.injected.fetch_add(1, Ordering::SeqCst);
            return Err(enospc());
        }
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        if self.faults.fail_all_syncs.load(Ordering::SeqCst)
            || DiskFaults::countdown(&self.faults.fail_sync_after)
        {
            self.faults.injected.fetch_add(1, Ordering::SeqCst);
            return Err(eio("fsync"));
        }
        self.faults.sync_time();
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl Disk for FaultyDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let inner = self.inner.open(path, mode)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Arc::new(FaultyFile { inner, faults: self.faults.clone(), name }))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if self.faults.fail_all_syncs.load(Ordering::SeqCst) {
            self.faults.injected.fetch_add(1, Ordering::SeqCst);
            return Err(eio("directory fsync"));
        }
        self.faults.sync_time();
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn space(&self, path: &Path) -> Option<(u64, u64)> {
        self.inner.space(path)
    }
}
