//! Checkpoint files: `writer.chk`, `chaser.chk`, `epoch.chk`, `proposal.chk`, `truncate.chk`.
//!
//! Each holds one little-endian `i64` (8 bytes), as in the anchor, so the spec's backup and restore
//! procedures (copy `chaser.chk` to `truncate.chk`) work on our files unchanged. A checkpoint is
//! overwritten in place: an 8-byte write at offset 0 lies inside one disk sector and is atomic on
//! every device we target (the simulator's torn-write model tears at sector granularity too). It is
//! durable after [`Checkpoint::flush`]. `writer.chk`, synced at every commit, is written as one
//! whole 4 KiB block that bypasses the page cache ([`Checkpoint::open_direct`]); its value is the
//! first 8 bytes of that block, and the first sector holding it is written atomically.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::env::{Disk, File, OpenMode, DIRECT_BLOCK};

/// One checkpoint file and its cached value.
pub struct Checkpoint {
    path: PathBuf,
    file: Arc<dyn File>,
    value: AtomicI64,
    /// Written as a whole [`DIRECT_BLOCK`] (value first, zeros after) through
    /// [`Disk::open_direct`]: the checkpoint synced at every commit.
    block: bool,
}

impl Checkpoint {
    /// Opens `path`, creating it with `initial` (durably) when missing.
    pub fn open(disk: &dyn Disk, path: &Path, initial: i64) -> std::io::Result<Checkpoint> {
        if !disk.exists(path) {
            let f = disk.open(path, OpenMode::CreateNew)?;
            f.write_all_at(&initial.to_le_bytes(), 0)?;
            f.sync_data()?;
            disk.sync_dir(crate::env::parent(path))?;
            return Ok(Checkpoint {
                path: path.to_path_buf(),
                file: f,
                value: AtomicI64::new(initial),
                block: false,
            });
        }
        let f = disk.open(path, OpenMode::ReadWrite)?;
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, 0).map_err(|e| {
            std::io::Error::new(e.kind(), format!("{}: checkpoint unreadable: {e}", path.display()))
        })?;
        Ok(Checkpoint {
            path: path.to_path_buf(),
            file: f,
            value: AtomicI64::new(i64::from_le_bytes(b)),
            block: false,
        })
    }

    /// [`Checkpoint::open`], then later writes go to the file as whole blocks through
    /// [`Disk::open_direct`] (the file grows to one block at the first write; its first 8 bytes
    /// stay the value, so copying it still works as the backup procedures expect).
    pub fn open_direct(disk: &dyn Disk, path: &Path, initial: i64) -> std::io::Result<Checkpoint> {
        let c = Checkpoint::open(disk, path, initial)?;
        let file = disk.open_direct(path)?;
        Ok(Checkpoint { file, block: true, ..c })
    }

    /// The last value written (not necessarily durable).
    pub fn read(&self) -> i64 {
        self.value.load(Ordering::Acquire)
    }

    /// Writes a new value (visible to readers of the file at once, durable after [`Self::flush`]).
    pub fn write(&self, v: i64) -> std::io::Result<()> {
        if self.block {
            let mut b = [0u8; DIRECT_BLOCK];
            b[..8].copy_from_slice(&v.to_le_bytes());
            self.file.write_all_at(&b, 0)?;
        } else {
            self.file.write_all_at(&v.to_le_bytes(), 0)?;
        }
        self.value.store(v, Ordering::Release);
        Ok(())
    }

    /// Makes the last write durable.
    pub fn flush(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    /// Writes and flushes.
    pub fn write_durable(&self, v: i64) -> std::io::Result<()> {
        self.write(v)?;
        self.flush()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
