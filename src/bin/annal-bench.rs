//! `annal-bench`: benchmarks that print figures (never timed tests).
//!
//! `annal-bench storage [--seconds N] [--dir PATH] [--streams N]` measures the storage engine
//! directly (no HTTP) on the real disk: durable 1 KiB appends with 1 writer and 64 concurrent
//! writers (group commit), batches of 100, read-forward throughput from the page cache, and
//! index memory for many streams; it prints a table and peak RSS.

#![allow(clippy::disallowed_methods)] // a measurement tool, not node code: it uses threads, sleeps and /proc directly.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use annal::env::Env;
use annal::store::{NewEvent, Store, StoreConfig, ANY};

struct Args {
    mode: String,
    seconds: u64,
    dir: std::path::PathBuf,
    streams: usize,
    gib: f64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { mode: String::new(), seconds: 5, dir: "target/bench-data".into(), streams: 1_000_000, gib: 2.0 };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--seconds" => {
                a.seconds = it.next().and_then(|v| v.parse().ok()).ok_or("--seconds needs a number")?
            }
            "--dir" => a.dir = it.next().ok_or("--dir needs a path")?.into(),
            "--streams" => {
                a.streams = it.next().and_then(|v| v.parse().ok()).ok_or("--streams needs a number")?
            }
            "--gib" => a.gib = it.next().and_then(|v| v.parse().ok()).ok_or("--gib needs a number")?,
            m if !m.starts_with('-') && a.mode.is_empty() => a.mode = m.to_string(),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.mode.is_empty() {
        a.mode = "storage".into();
    }
    Ok(a)
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "annal-bench: {e}\nusage: annal-bench storage [--seconds N] [--dir PATH] [--streams N]\n       annal-bench scavenge [--gib G] [--dir PATH]"
            );
            std::process::exit(2);
        }
    };
    match args.mode.as_str() {
        "storage" => storage(&args),
        "scavenge" => scavenge(&args),
        other => {
            eprintln!("annal-bench: unknown mode {other} (known: storage, scavenge)");
            std::process::exit(2);
        }
    }
}

/// A JSON event of `size` bytes with a unique id. Payloads of one size share one buffer, so the
/// load generator spends its CPU on requests, not on building them.
fn event(i: u64, size: usize) -> NewEvent {
    use std::sync::OnceLock;
    static PAYLOADS: OnceLock<std::sync::Mutex<std::collections::HashMap<usize, bytes::Bytes>>> =
        OnceLock::new();
    let data = PAYLOADS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(size)
        .or_insert_with(|| {
            let mut d = b"{\"pad\":\"".to_vec();
            d.resize(size - 2, b'x');
            d.extend_from_slice(b"\"}");
            d.into()
        })
        .clone();
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&i.to_le_bytes());
    id[8] = 0xbe;
    NewEvent { id, event_type: "bench".into(), data, metadata: Default::default(), is_json: true }
}

/// Peak resident set size of this process (VmHWM), in bytes.
#[allow(clippy::disallowed_methods)]
fn peak_rss() -> u64 {
    read_status_kb("VmHWM:") * 1024
}

#[allow(clippy::disallowed_methods)]
fn read_status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

struct Run {
    events: u64,
    secs: f64,
    lat_us: Vec<u32>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }
    fn pct(&mut self, p: f64) -> u32 {
        if self.lat_us.is_empty() {
            return 0;
        }
        self.lat_us.sort_unstable();
        self.lat_us[((self.lat_us.len() - 1) as f64 * p) as usize]
    }
}

/// `writers` threads append batches of `batch` 1 KiB events for `secs` seconds.
fn appends(
    env: &Env,
    store: &Arc<Store>,
    writers: usize,
    batch: usize,
    secs: u64,
    streams_per_writer: bool,
) -> Run {
    let stop = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let start = env.clock.monotonic();
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (store, stop, counter, env) = (store.clone(), stop.clone(), counter.clone(), env.clone());
            std::thread::Builder::new()
                .name(format!("bench-writer-{w}"))
                .spawn(move || {
                    let mut lat = Vec::new();
                    let stream = if streams_per_writer {
                        format!("bench-{writers}-{batch}-{w}")
                    } else {
                        "bench-shared".into()
                    };
                    let mut expected = -1i64;
                    while !stop.load(Ordering::Relaxed) {
                        let base = counter.fetch_add(batch as u64, Ordering::Relaxed);
                        let evs: Vec<NewEvent> =
                            (0..batch as u64).map(|k| event(base + k + ((w as u64) << 40), 1024)).collect();
                        let t = env.clock.monotonic();
                        let exp = if streams_per_writer { expected } else { ANY };
                        match store.append(&stream, exp, evs) {
                            Ok(r) => expected = r.last_event_number,
                            Err(e) => panic!("append failed: {e}"),
                        }
                        lat.push((env.clock.monotonic() - t).as_micros() as u32);
                    }
                    lat
                })
                .unwrap_or_else(|e| panic!("cannot start a writer thread: {e}"))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let mut lat_us = Vec::new();
    let mut events = 0u64;
    for h in handles {
        let l = h.join().unwrap_or_default();
        events += l.len() as u64 * batch as u64;
        lat_us.extend(l);
    }
    Run { events, secs: (env.clock.monotonic() - start).as_secs_f64(), lat_us }
}

fn storage(args: &Args) {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let _guard = rt.enter();
    let env = annal::env::real::env();
    let dir = args.dir.join(format!("storage-{}", env.random_u64() % 1_000_000));
    let mut cfg = StoreConfig::new(&dir);
    cfg.chunk_size = 256 * 1024 * 1024;
    let store = Store::open(&env, cfg.clone()).expect("open store");
    println!(
        "# annal-bench storage: 1 KiB JSON events, durable (fdatasync before acknowledgement), {} s per row",
        args.seconds
    );
    println!("# data in {}", dir.display());
    println!("| workload | events/s | p50 µs | p99 µs | commits | events/commit |");
    println!("|---|---:|---:|---:|---:|---:|");
    let row = |name: &str, mut r: Run, store: &Store, flushes_before: u64| {
        let flushes = store.stats.flushes.load(Ordering::Relaxed) - flushes_before;
        println!(
            "| {name} | {:.0} | {} | {} | {flushes} | {:.1} |",
            r.rate(),
            r.pct(0.5),
            r.pct(0.99),
            r.events as f64 / flushes.max(1) as f64
        );
    };
    for (name, writers, batch) in [
        ("append, 1 writer, batch 1", 1, 1),
        ("append, 64 writers, batch 1", 64, 1),
        ("append, 1 writer, batch 100", 1, 100),
        ("append, 16 writers, batch 100", 16, 100),
    ] {
        let f0 = store.stats.flushes.load(Ordering::Relaxed);
        let r = appends(&env, &store, writers, batch, args.seconds, true);
        row(name, r, &store, f0);
    }
    // Read forward: one stream of 100,000 events, pages of 100 (the page cache is warm).
    let n = 100_000u64;
    for chunk in 0..(n / 1000) {
        let evs: Vec<NewEvent> = (0..1000).map(|k| event(chunk * 1000 + k + (1 << 50), 1024)).collect();
        store.append("bench-read", ANY, evs).expect("append");
    }
    let mut read = 0u64;
    let t = env.clock.monotonic();
    let deadline = Duration::from_secs(args.seconds);
    while env.clock.monotonic() - t < deadline {
        let mut from = 0;
        loop {
            let s = store.read_forward("bench-read", from, 100, false, 0).expect("read");
            read += s.events.len() as u64;
            if s.is_end_of_stream {
                break;
            }
            from = s.next_event_number;
        }
    }
    println!(
        "| read stream forward, pages of 100 | {:.0} | | | | |",
        read as f64 / (env.clock.monotonic() - t).as_secs_f64()
    );
    let mut read = 0u64;
    let t = env.clock.monotonic();
    let mut pos = 0;
    while env.clock.monotonic() - t < deadline {
        let s = store.read_all_forward(pos, 1000, false, 0).expect("read $all");
        read += s.events.len() as u64;
        pos = if s.is_end { 0 } else { s.next_position };
    }
    println!(
        "| read $all forward, pages of 1000 | {:.0} | | | | |",
        read as f64 / (env.clock.monotonic() - t).as_secs_f64()
    );
    store.close().expect("close");
    drop(store);

    // Index memory for many streams: one event in each of N streams, then the index's own
    // accounting and the process RSS growth.
    let mut cfg2 = StoreConfig::new(dir.join("streams"));
    cfg2.chunk_size = 256 * 1024 * 1024;
    let store = Store::open(&env, cfg2).expect("open store");
    let rss0 = read_status_kb("VmRSS:") * 1024;
    let total = args.streams;
    let per = total.div_ceil(32);
    let t = env.clock.monotonic();
    let handles: Vec<_> = (0..32)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in (w * per)..((w + 1) * per).min(total) {
                    let e = event(i as u64 | (3 << 56), 64);
                    store.append(&format!("stream-{i}"), -1, vec![e]).expect("append");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer");
    }
    let secs = (env.clock.monotonic() - t).as_secs_f64();
    let st = store.index().stats();
    let rss1 = read_status_kb("VmRSS:") * 1024;
    println!("| new streams, 32 writers, 1 event each | {:.0} | | | | |", total as f64 / secs);
    println!();
    println!(
        "index after {total} streams: {} memtable entries, {} tables, index memory {:.1} MiB = {:.1} bytes/stream (existence filter {} MiB included); RSS growth {:.1} MiB = {:.1} bytes/stream",
        st.memtable_entries,
        st.tables,
        st.memory_bytes as f64 / 1048576.0,
        st.memory_bytes as f64 / total as f64,
        cfg.existence_filter_bytes / 1048576,
        rss1.saturating_sub(rss0) as f64 / 1048576.0,
        rss1.saturating_sub(rss0) as f64 / total as f64,
    );
    println!("peak RSS: {:.1} MiB", peak_rss() as f64 / 1048576.0);
    store.close().expect("close");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `gib` GiB of 1 KiB events over 1,000 streams, then hard-deletes every other stream.
fn scavenge_dataset(env: &Env, dir: &std::path::Path, gib: f64) -> (Arc<Store>, u64) {
    let cfg = StoreConfig::new(dir);
    let store = Store::open(env, cfg).expect("open store");
    let target = (gib * 1024.0 * 1024.0 * 1024.0) as u64;
    let next = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..4u64)
        .map(|w| {
            let (store, next) = (store.clone(), next.clone());
            std::thread::spawn(move || loop {
                if store.log().committed() >= target {
                    break;
                }
                let n = next.fetch_add(1, Ordering::Relaxed);
                let evs: Vec<NewEvent> = (0..100).map(|k| event((n * 100 + k) | (w << 56) | (1 << 55), 1024)).collect();
                store.append(&format!("scav-{}", n % 1000), ANY, evs).expect("append");
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer");
    }
    for k in (0..1000).step_by(2) {
        store.delete(&format!("scav-{k}"), ANY, true).expect("delete");
    }
    let bytes = store.log().committed();
    (store, bytes)
}

fn scavenge(args: &Args) {
    use annal::scavenge::{ScavengeConfig, Scavenger, StartOptions};
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let _guard = rt.enter();
    let env = annal::env::real::env();
    let root = args.dir.join(format!("scavenge-{}", env.random_u64() % 1_000_000));
    let scfg = || ScavengeConfig {
        merge: true,
        history_max_age_days: 30,
        page_size: 16 * 1024,
        hash_users_capacity: 100_000,
        node_endpoint: "127.0.0.1:2113".into(),
    };
    println!("# annal-bench scavenge: {:.1} GiB log of 1 KiB events in 1,000 streams, every other stream hard-deleted", args.gib);
    println!("| run | log MB | time s | processed MB/s | reclaimed MB | reclaimed MB/s | disk MB before -> after |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for (label, throttle) in [("first run, full speed", 100u32), ("first run, throttlePercent 50", 50)] {
        let dir = root.join(format!("t{throttle}"));
        let t = env.clock.monotonic();
        let (store, bytes) = scavenge_dataset(&env, &dir, args.gib);
        eprintln!("dataset written in {:.1} s", (env.clock.monotonic() - t).as_secs_f64());
        let disk = |s: &Store| s.log().chunks().iter().map(|c| c.file_len()).sum::<u64>() as f64 / 1048576.0;
        let before = disk(&store);
        let sc = Scavenger::open(store.clone(), scfg()).expect("scavenger");
        let run = |opts: StartOptions| {
            let t = env.clock.monotonic();
            rt.block_on(async {
                sc.start(opts).await.expect("start");
                sc.wait().await;
            });
            (env.clock.monotonic() - t).as_secs_f64()
        };
        let saved0 = sc.progress.space_saved.load(Ordering::Relaxed);
        let secs = run(StartOptions { throttle_percent: throttle, ..StartOptions::default() });
        let saved = (sc.progress.space_saved.load(Ordering::Relaxed) - saved0) as f64 / 1048576.0;
        let mb = bytes as f64 / 1048576.0;
        println!("| {label} | {mb:.0} | {secs:.2} | {:.0} | {saved:.0} | {:.0} | {before:.0} -> {:.0} |", mb / secs, saved / secs, disk(&store));
        if throttle == 100 {
            let secs2 = run(StartOptions::default());
            println!("| second run (nothing new) | {mb:.0} | {secs2:.2} | | 0 | | |");
        }
        store.close().expect("close");
        drop((sc, store));
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!("peak RSS: {:.1} MiB", peak_rss() as f64 / 1048576.0);
}
