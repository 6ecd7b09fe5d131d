//! `annal-bench storage`: the storage engine measured directly (no HTTP).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use annal::env::Env;
use annal::store::{NewEvent, Store, StoreConfig, ANY};

use crate::{event, peak_rss, read_status_kb, Args, Run};

/// `writers` threads append batches of `batch` 1 KiB events for `secs` seconds.
fn appends(
    env: &Env,
    store: &Arc<Store>,
    writers: usize,
    batch: usize,
    secs: f64,
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
    std::thread::sleep(Duration::from_secs_f64(secs));
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

pub fn storage(args: &Args) {
    let seconds = args.seconds.unwrap_or(5.0);
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let _guard = rt.enter();
    let env = annal::env::real::env();
    let dir = args.dir.join(format!("storage-{}", env.random_u64() % 1_000_000));
    let mut cfg = StoreConfig::new(&dir);
    cfg.chunk_size = 256 * 1024 * 1024;
    let store = Store::open(&env, cfg.clone()).expect("open store");
    println!(
        "# annal-bench storage: 1 KiB JSON events, durable (fdatasync before acknowledgement), {seconds} s per row"
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
        let r = appends(&env, &store, writers, batch, seconds, true);
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
    let deadline = Duration::from_secs_f64(seconds);
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
