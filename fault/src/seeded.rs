//! A disk that injects faults drawn from a seeded random stream ([`SeededDisk`]), for the
//! simulator.
//!
//! Per operation, while the current [`DiskRates`] say so: `EIO` on write, sync, directory sync or
//! read; a bit flip in the buffer a read returns (transient corruption); a *lost* write (reported
//! done, never stored); a *misdirected* write (stored 1–8 sectors away; the target keeps its old
//! bytes). Persistently: latent sector errors (reads of a marked 512-byte sector fail with `EIO`
//! until the sector is rewritten) and `ENOSPC` once a byte budget is spent.
//!
//! Silent faults (bit flips, lost and misdirected writes) hit only files whose contents carry
//! checksums — chunk files and index tables — never the 8-byte checkpoint files (`*.chk`), which
//! have no checksum in the EventStoreDB format: a flipped or lost `writer.chk` is undetectable by
//! design, so it is outside this fault model. Loud faults (`EIO`, `ENOSPC`) hit every file.
//!
//! Every injected fault is appended to a log that the simulator drains into its trace. All draws
//! come from one ChaCha stream, in the order the (single-threaded) simulation makes the calls.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use annal::env::{Clock, Disk, File, OpenMode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Sector size for latent errors and misdirected writes.
pub const SECTOR: u64 = 512;

/// Per-operation fault probabilities (0 = off).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DiskRates {
    /// `EIO` on a write.
    pub eio_write: f64,
    /// `EIO` on `sync_data` or `sync_dir`.
    pub eio_sync: f64,
    /// `EIO` on a read (transient).
    pub eio_read: f64,
    /// One flipped bit in the data a read returns (transient).
    pub read_flip: f64,
    /// A write that lands 1–8 sectors away from its offset.
    pub misdirect: f64,
    /// A write that is reported done but never stored.
    pub lost_write: f64,
}

impl DiskRates {
    /// Whether any silent, data-destroying fault (lost or misdirected write) is on.
    pub fn destructive(&self) -> bool {
        self.misdirect > 0.0 || self.lost_write > 0.0
    }
}

/// The shared state of a [`SeededDisk`]: rates, latent sectors, space budget, fault log.
pub struct SeededFaults {
    rng: Mutex<ChaCha8Rng>,
    rates: Mutex<DiskRates>,
    latent: Mutex<BTreeSet<(PathBuf, u64)>>,
    /// Bytes that may still be written before `ENOSPC`; `u64::MAX` = unlimited.
    space_left: AtomicU64,
    log: Mutex<Vec<String>>,
    injected: AtomicU64,
    clock: Mutex<Option<Arc<dyn Clock>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SeededFaults {
    /// No faults yet; draws come from `seed`.
    pub fn new(seed: u64) -> Arc<SeededFaults> {
        Arc::new(SeededFaults {
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            rates: Mutex::new(DiskRates::default()),
            latent: Mutex::new(BTreeSet::new()),
            space_left: AtomicU64::new(u64::MAX),
            log: Mutex::new(Vec::new()),
            injected: AtomicU64::new(0),
            clock: Mutex::new(None),
        })
    }

    /// Replaces the per-operation rates.
    pub fn set_rates(&self, r: DiskRates) {
        *lock(&self.rates) = r;
    }

    /// The current rates.
    pub fn rates(&self) -> DiskRates {
        *lock(&self.rates)
    }

    /// Sets the write budget (`u64::MAX`: unlimited).
    pub fn set_space_left(&self, bytes: u64) {
        self.space_left.store(bytes, Ordering::SeqCst);
    }

    /// Marks the sector holding `offset` of `path` unreadable until it is rewritten.
    pub fn add_latent(&self, path: &Path, offset: u64) {
        lock(&self.latent).insert((path.to_path_buf(), offset / SECTOR));
    }

    /// Forgets every latent sector error (the operator replaced the disk's bad blocks).
    pub fn clear_latent(&self) {
        lock(&self.latent).clear();
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    /// Takes the log of faults injected since the last call.
    pub fn drain_log(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.log))
    }

    /// Stamps log lines with `clock`'s monotonic time from now on.
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        *lock(&self.clock) = Some(clock);
    }

    fn note(&self, what: String) {
        self.injected.fetch_add(1, Ordering::SeqCst);
        let line = match &*lock(&self.clock) {
            Some(c) => format!("[at {:.6}] {what}", c.monotonic().as_secs_f64()),
            None => what,
        };
        lock(&self.log).push(line);
    }

    /// Draws `true` with probability `p`; no draw at all when `p` is 0.
    fn chance(&self, p: f64) -> bool {
        p > 0.0 && lock(&self.rng).gen_bool(p.min(1.0))
    }

    fn below(&self, n: u64) -> u64 {
        lock(&self.rng).gen_range(0..n.max(1))
    }
}

/// Whether silent faults may hit `name` (files with checksummed contents).
fn checksummed(name: &str) -> bool {
    !(name.ends_with(".chk") || name.ends_with(".chk.tmp"))
}

fn eio(what: &str, path: &Path) -> io::Error {
    io::Error::other(format!("injected EIO on {what} of {}", path.display()))
}

/// A disk wrapper injecting [`SeededFaults`].
pub struct SeededDisk {
    inner: Arc<dyn Disk>,
    faults: Arc<SeededFaults>,
}

impl SeededDisk {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Disk>, faults: Arc<SeededFaults>) -> SeededDisk {
        SeededDisk { inner, faults }
    }
}

struct SeededFile {
    inner: Arc<dyn File>,
    faults: Arc<SeededFaults>,
    path: PathBuf,
    silent_ok: bool,
}

impl SeededFile {
    fn latent_hit(&self, offset: u64, len: u64) -> Option<u64> {
        if len == 0 {
            return None;
        }
        let latent = lock(&self.faults.latent);
        let (first, last) = (offset / SECTOR, (offset + len - 1) / SECTOR);
        latent.range((self.path.clone(), first)..=(self.path.clone(), last)).next().map(|(_, s)| *s)
    }
}

impl File for SeededFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let f = &self.faults;
        if let Some(sector) = self.latent_hit(offset, buf.len() as u64) {
            f.note(format!("latent sector error: read of {} sector {sector}", self.path.display()));
            return Err(eio("read (latent sector error)", &self.path));
        }
        let r = f.rates();
        if f.chance(r.eio_read) {
            f.note(format!("EIO on read of {} at {offset}", self.path.display()));
            return Err(eio("read", &self.path));
        }
        let n = self.inner.read_at(buf, offset)?;
        if n > 0 && self.silent_ok && f.chance(r.read_flip) {
            let i = f.below(n as u64) as usize;
            let bit = f.below(8) as u8;
            buf[i] ^= 1 << bit;
            f.note(format!("bit flip on read of {} at {}", self.path.display(), offset + i as u64));
        }
        Ok(n)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let f = &self.faults;
        let r = f.rates();
        if f.chance(r.eio_write) {
            f.note(format!("EIO on write of {} at {offset}", self.path.display()));
            return Err(eio("write", &self.path));
        }
        let len = buf.len() as u64;
        let ok = f
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
            f.note(format!("ENOSPC on write of {} ({len} bytes)", self.path.display()));
            return Err(io::Error::from_raw_os_error(28));
        }
        // A rewrite repairs latent errors of the sectors it covers (the disk remaps them).
        if len > 0 {
            let mut latent = lock(&f.latent);
            for s in offset / SECTOR..=(offset + len - 1) / SECTOR {
                latent.remove(&(self.path.clone(), s));
            }
        }
        if self.silent_ok && f.chance(r.lost_write) {
            f.note(format!("lost write of {} at {offset} ({len} bytes)", self.path.display()));
            return Ok(());
        }
        if self.silent_ok && f.chance(r.misdirect) {
            let k = (1 + f.below(8)) * SECTOR;
            let to = if f.below(2) == 0 || offset < k { offset + k } else { offset - k };
            f.note(format!(
                "misdirected write of {} from {offset} to {to} ({len} bytes)",
                self.path.display()
            ));
            return self.inner.write_all_at(buf, to);
        }
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        let f = &self.faults;
        if f.chance(f.rates().eio_sync) {
            f.note(format!("EIO on fsync of {}", self.path.display()));
            return Err(eio("fsync", &self.path));
        }
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl Disk for SeededDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let inner = self.inner.open(path, mode)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Arc::new(SeededFile {
            inner,
            faults: self.faults.clone(),
            path: path.to_path_buf(),
            silent_ok: checksummed(&name),
        }))
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
        let f = &self.faults;
        if f.chance(f.rates().eio_sync) {
            f.note(format!("EIO on directory fsync of {}", dir.display()));
            return Err(eio("directory fsync", dir));
        }
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn space(&self, path: &Path) -> Option<(u64, u64)> {
        let left = self.faults.space_left.load(Ordering::SeqCst);
        self.inner.space(path).map(|(t, a)| (t, a.min(left)))
    }
}

#[cfg(test)]
mod tests {
    use annal::env::mem::MemDisk;

    use super::*;

    fn disk(seed: u64) -> (SeededDisk, Arc<SeededFaults>) {
        let mem = Arc::new(MemDisk::default());
        mem.create_dir_all(Path::new("/d")).unwrap();
        let faults = SeededFaults::new(seed);
        (SeededDisk::new(mem, faults.clone()), faults)
    }

    #[test]
    fn silent_faults_spare_checkpoints_and_loud_ones_do_not() {
        let (d, faults) = disk(1);
        faults.set_rates(DiskRates { lost_write: 1.0, read_flip: 1.0, ..DiskRates::default() });
        let chk = d.open(Path::new("/d/writer.chk"), OpenMode::CreateNew).unwrap();
        chk.write_all_at(&7i64.to_le_bytes(), 0).unwrap();
        let mut b = [0u8; 8];
        chk.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(i64::from_le_bytes(b), 7);
        let chunk = d.open(Path::new("/d/chunk-000000.000000"), OpenMode::CreateNew).unwrap();
        chunk.write_all_at(b"data", 0).unwrap();
        assert_eq!(chunk.len().unwrap(), 0, "the write was lost");
        faults.set_rates(DiskRates { eio_sync: 1.0, ..DiskRates::default() });
        assert!(chk.sync_data().is_err());
        assert_eq!(faults.drain_log().len(), 2);
    }

    #[test]
    fn latent_errors_persist_until_rewritten_and_space_runs_out() {
        let (d, faults) = disk(2);
        let f = d.open(Path::new("/d/chunk-000000.000000"), OpenMode::CreateNew).unwrap();
        f.write_all_at(&[1u8; 2048], 0).unwrap();
        faults.add_latent(Path::new("/d/chunk-000000.000000"), 1000);
        let mut b = [0u8; 100];
        assert!(f.read_exact_at(&mut b, 0).is_ok());
        assert!(f.read_exact_at(&mut b, 990).is_err());
        assert!(f.read_exact_at(&mut b, 990).is_err(), "persistent");
        f.write_all_at(&[2u8; 512], 512).unwrap();
        assert!(f.read_exact_at(&mut b, 990).is_ok());
        faults.set_space_left(10);
        assert_eq!(f.write_all_at(&[0u8; 11], 0).unwrap_err().raw_os_error(), Some(28));
        f.write_all_at(&[0u8; 10], 0).unwrap();
    }

    #[test]
    fn same_seed_same_faults() {
        let run = |seed| {
            let (d, faults) = disk(seed);
            faults.set_rates(DiskRates { misdirect: 0.5, eio_write: 0.2, ..DiskRates::default() });
            let f = d.open(Path::new("/d/chunk-000000.000000"), OpenMode::CreateNew).unwrap();
            for i in 0..50u64 {
                let _ = f.write_all_at(&[i as u8; 100], 4096 + i * 100);
            }
            faults.drain_log()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
