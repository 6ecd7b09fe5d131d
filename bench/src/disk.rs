//! `annal-bench disk`: what one 1 KiB append plus `fdatasync` costs on this disk, depending on how
//! the file's space was prepared and whether the write runs to the end of its page. These are the
//! figures behind the chunk writer's choices (docs/durability.md, rules 5 and 6): chunks are
//! zeroed ahead of the writer, and its writes are padded to the page end so the kernel never reads
//! a page before writing it.

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
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
    let _ = std::fs::remove_dir(&dir);
}
