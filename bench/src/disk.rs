//! `annal-bench disk`: what one 1 KiB append plus `fdatasync` costs on this disk, depending on how
//! the file's space was prepared and whether the write runs to the end of its page. These are the
//! figures behind the chunk writer's choices (docs/durability.md, rules 5 and 6): chunks are
//! zeroed ahead of the writer, and its writes are padded to the page end so the kernel never reads
//! a page before writing it.
//!
//! A second table measures the device under overlap: two flushes issued at once from two threads
//! (std threads meeting at a barrier) against the same two flushes one after the other, the pair's
//! wall time at p50 and p99 and the ratio concurrent ÷ serial. The two modes alternate in runs of
//! 8 back-to-back pairs for `--seconds` (the first pair of each run not counted), so a slow phase
//! of the disk hits both. Rows: two 4 KiB page writes, each followed by `fdatasync`, into two
//! different files zeroed ahead (as the log's chunk writes); a chunk-like flush (a 1 KiB event
//! written to the end of its page, 1–4 KiB, plus `fdatasync`) with a 4 KiB `O_DIRECT` block write
//! plus `fdatasync` of a checkpoint-like file (as `writer.chk` is written), in that order when
//! serial, as a commit does; and two empty sides, the threads' hand-off alone, which the
//! concurrent figures include.

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use crate::gen::pct;

const FILE_BYTES: u64 = 64 << 20;
const EVENT: u64 = 1024;
const PAGE: u64 = 4096;

#[derive(Clone, Copy)]
enum Space {
    /// Zeros written through the page cache (pages stay cached).
    ZeroedCached,
    /// Zeros written, then dropped from the page cache (as `O_DIRECT` zeroing leaves a chunk).
    ZeroedUncached,
    /// `posix_fallocate` (unwritten extents).
    Fallocated,
    /// An empty file that grows with every append.
    Growing,
}

fn prepare(path: &Path, space: Space) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(path)?;
    match space {
        Space::ZeroedCached | Space::ZeroedUncached => {
            let zeros = vec![0u8; 1 << 20];
            for i in 0..FILE_BYTES >> 20 {
                f.write_all_at(&zeros, i << 20)?;
            }
        }
        Space::Fallocated => {
            // SAFETY: a plain system call on a descriptor this function owns.
            let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, FILE_BYTES as libc::off_t) };
            if rc != 0 {
                return Err(std::io::Error::from_raw_os_error(rc));
            }
        }
        Space::Growing => {}
    }
    f.sync_all()?;
    if let Space::ZeroedUncached = space {
        annal::env::real::drop_cached(path)?;
    }
    Ok(f)
}

/// Bytes this process has read from storage so far (`/proc/self/io`).
fn device_read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("read_bytes: ").and_then(|v| v.trim().parse().ok()))
        })
        .unwrap_or(0)
}

/// Appends for `secs`: (appends, p50 µs, p99 µs, bytes read from the device).
fn run(dir: &Path, space: Space, padded: bool, secs: f64) -> std::io::Result<(usize, u32, u32, u64)> {
    let path = dir.join("disk-probe");
    let f = prepare(&path, space)?;
    let event = vec![0x5au8; EVENT as usize];
    let mut buf = Vec::with_capacity(2 * PAGE as usize);
    let (mut lat, mut at) = (Vec::new(), 0u64);
    let read0 = device_read_bytes();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(secs) && at + PAGE < FILE_BYTES {
        buf.clear();
        buf.extend_from_slice(&event);
        if padded {
            let end = at + EVENT;
            buf.resize((end.next_multiple_of(PAGE) - at) as usize, 0);
        }
        let t = Instant::now();
        f.write_all_at(&buf, at)?;
        f.sync_data()?;
        lat.push(t.elapsed().as_micros() as u32);
        at += EVENT;
    }
    let read = device_read_bytes().saturating_sub(read0);
    drop(f);
    let _ = std::fs::remove_file(&path);
    lat.sort_unstable();
    Ok((lat.len(), pct(&lat, 0.5), pct(&lat, 0.99), read))
}

/// One side of an overlap pair: a write and its `fdatasync`, each call at a fresh place.
enum Side {
    /// Writes of `event` bytes run on to the end of their page, at increasing offsets of a file
    /// zeroed ahead and dropped from the page cache (a chunk).
    Chunk { f: std::fs::File, at: u64, event: u64, buf: Vec<u8> },
    /// One 4 KiB block rewritten at offset 0 through `O_DIRECT` from an aligned buffer (a
    /// checkpoint; through the page cache where the file system has no `O_DIRECT`).
    Block { f: std::fs::File, buf: Vec<u8>, value: u64 },
    /// Nothing: the pair then measures the threads' hand-off alone.
    Nothing,
}

impl Side {
    fn chunk(path: &Path, event: u64) -> std::io::Result<Side> {
        let f = prepare(path, Space::ZeroedUncached)?;
        Ok(Side::Chunk { f, at: 0, event, buf: Vec::with_capacity(PAGE as usize) })
    }

    /// The block file and whether it is open with `O_DIRECT`.
    fn block(path: &Path) -> std::io::Result<(Side, bool)> {
        let f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).open(path)?;
        f.write_all_at(&[0u8; PAGE as usize], 0)?;
        f.sync_all()?;
        drop(f);
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(true);
        let (f, direct) = match o.clone().custom_flags(libc::O_DIRECT).open(path) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (o.open(path)?, false),
            Err(e) => return Err(e),
        };
        Ok((Side::Block { f, buf: vec![0; 2 * PAGE as usize], value: 0 }, direct))
    }

    /// Whether the next write would run past the file's zeroed space.
    fn full(&self) -> bool {
        matches!(self, Side::Chunk { at, .. } if at + PAGE >= FILE_BYTES)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Side::Chunk { f, at, event, buf } => {
                buf.clear();
                buf.resize(((*at + *event).next_multiple_of(PAGE) - *at) as usize, 0);
                buf[..*event as usize].fill(0x5a);
                f.write_all_at(buf, *at)?;
                f.sync_data()?;
                *at += *event;
            }
            Side::Block { f, buf, value } => {
                *value += 1;
                let skew = buf.as_ptr().align_offset(PAGE as usize);
                let block = &mut buf[skew..skew + PAGE as usize];
                block[..8].copy_from_slice(&value.to_le_bytes());
                f.write_all_at(block, 0)?;
                f.sync_data()?;
            }
            Side::Nothing => {}
        }
        Ok(())
    }
}

/// Pairs run back to back in one mode before switching to the other; the first pair of each run
/// is not counted, as it starts in the other mode's rhythm.
const RUN: usize = 8;

/// Pair wall times in µs, sorted: one after the other, and concurrently.
struct Overlap {
    serial: Vec<u32>,
    concurrent: Vec<u32>,
}

/// Runs pairs of `a` and `b` for `secs`, in alternating runs of [`RUN`] pairs: one after the other
/// (`a` first, both on this thread), then concurrently (`a` on this thread, `b` on a helper; both
/// start at a barrier and the pair ends when both have met at a second one).
fn overlap(mut a: Side, b: Side, secs: f64) -> std::io::Result<Overlap> {
    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
    let b = Mutex::new(b);
    let (start, done) = (Barrier::new(2), Barrier::new(2));
    let stop = AtomicBool::new(false);
    let b_failed: Mutex<Option<std::io::Error>> = Mutex::new(None);
    let (mut serial, mut concurrent) = (Vec::new(), Vec::new());
    let mut result = Ok(());
    std::thread::scope(|s| {
        s.spawn(|| loop {
            start.wait();
            if stop.load(Ordering::Acquire) {
                return;
            }
            let r = lock(&b).flush();
            if let Err(e) = r {
                *lock(&b_failed) = Some(e);
            }
            done.wait();
        });
        let begin = Instant::now();
        'run: while begin.elapsed() < Duration::from_secs_f64(secs) {
            for concurrent_mode in [false, true] {
                for i in 0..RUN {
                    if a.full() || lock(&b).full() {
                        break 'run;
                    }
                    let t = Instant::now();
                    let r = if concurrent_mode {
                        start.wait();
                        let r = a.flush();
                        done.wait();
                        r.and_then(|()| lock(&b_failed).take().map_or(Ok(()), Err))
                    } else {
                        a.flush().and_then(|()| lock(&b).flush())
                    };
                    let us = t.elapsed().as_micros() as u32;
                    if let Err(e) = r {
                        result = Err(e);
                        break 'run;
                    }
                    if i > 0 {
                        if concurrent_mode { &mut concurrent } else { &mut serial }.push(us);
                    }
                }
            }
        }
        stop.store(true, Ordering::Release);
        start.wait();
    });
    result?;
    serial.sort_unstable();
    concurrent.sort_unstable();
    Ok(Overlap { serial, concurrent })
}

fn overlap_rows(dir: &Path, secs: f64) {
    println!();
    println!(
        "# Two flushes per pair, concurrent (two threads, a barrier) vs serial, alternating runs of {RUN} (first not counted), {secs} s per row, in {}",
        dir.display()
    );
    println!("| pair | pairs of each | serial p50 µs | serial p99 µs | concurrent p50 µs | concurrent p99 µs | concurrent ÷ serial, p50 | p99 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let paths = [dir.join("overlap-chunk-a"), dir.join("overlap-chunk-b"), dir.join("overlap-checkpoint")];
    let names = [
        "4 KiB + fdatasync on two zeroed files",
        "chunk 1 KiB to the page end + fdatasync, checkpoint 4 KiB block + fdatasync",
        "nothing (the threads' hand-off alone)",
    ];
    let sides = |row: usize| -> std::io::Result<(Side, Side, &'static str)> {
        Ok(match row {
            0 => (Side::chunk(&paths[0], PAGE)?, Side::chunk(&paths[1], PAGE)?, ""),
            1 => {
                let (block, direct) = Side::block(&paths[2])?;
                let note = if direct { " (O_DIRECT)" } else { " (no O_DIRECT here: page cache)" };
                (Side::chunk(&paths[0], EVENT)?, block, note)
            }
            _ => (Side::Nothing, Side::Nothing, ""),
        })
    };
    for (row, name) in names.into_iter().enumerate() {
        let r = sides(row).and_then(|(a, b, note)| Ok((overlap(a, b, secs)?, note)));
        match r {
            Ok((o, note)) => {
                let (s50, s99) = (pct(&o.serial, 0.5), pct(&o.serial, 0.99));
                let (c50, c99) = (pct(&o.concurrent, 0.5), pct(&o.concurrent, 0.99));
                let ratio = |c: u32, s: u32| {
                    if s == 0 {
                        "–".to_string()
                    } else {
                        format!("{:.2}", c as f64 / s as f64)
                    }
                };
                println!(
                    "| {name}{note} | {} | {s50} | {s99} | {c50} | {c99} | {} | {} |",
                    o.serial.len(),
                    ratio(c50, s50),
                    ratio(c99, s99)
                );
            }
            Err(e) => println!("| {name} | failed: {e} | | | | | | |"),
        }
        for p in &paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

pub fn disk(args: &crate::Args) {
    let secs = args.seconds.unwrap_or(2.0);
    let dir = args.dir.join("disk");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("annal-bench disk: {}: {e}", dir.display());
        std::process::exit(1);
    }
    println!(
        "# 1 KiB appends at increasing offsets, each followed by fdatasync, {secs} s per row, in {}",
        dir.display()
    );
    println!("| file space | write | appends | p50 µs | p99 µs | read from disk |");
    println!("|---|---|---:|---:|---:|---:|");
    let rows = [
        (Space::ZeroedCached, false, "zeroed, pages cached"),
        (Space::ZeroedUncached, false, "zeroed around the page cache"),
        (Space::ZeroedUncached, true, "zeroed around the page cache"),
        (Space::Fallocated, true, "fallocate"),
        (Space::Growing, false, "growing file"),
    ];
    for (space, padded, name) in rows {
        let write = if padded { "to the page end" } else { "1 KiB" };
        match run(&dir, space, padded, secs) {
            Ok((n, p50, p99, read)) => {
                println!("| {name} | {write} | {n} | {p50} | {p99} | {:.1} MB |", read as f64 / 1e6)
            }
            Err(e) => println!("| {name} | {write} | failed: {e} | | | |"),
        }
    }
    overlap_rows(&dir, secs);
    let _ = std::fs::remove_dir(&dir);
}
