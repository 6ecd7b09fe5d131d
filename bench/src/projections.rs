//! `annal-bench projections`: `$by_category` and `$by_event_type` together over a log written
//! beforehand (`--events N`, default 1,000,000): events processed per second from enabling both
//! until both have linked the whole log, checked against the link counts.

use std::sync::Arc;
use std::time::Duration;

use annal::config::RunProjections;
use annal::projections::{Command, Projections};
use annal::store::{NewEvent, Store, StoreConfig, ANY};

use crate::{peak_rss, Args};

const STREAMS: u64 = 1000;
const CATEGORIES: u64 = 10;
const TYPES: u64 = 20;
const BATCH: u64 = 500;

fn write_log(store: &Arc<Store>, events: u64) {
    let writers = 4;
    let per = events.div_ceil(writers);
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                let (from, to) = (w * per, ((w + 1) * per).min(events));
                let mut i = from;
                while i < to {
                    let n = BATCH.min(to - i);
                    let s = (i / BATCH) % STREAMS;
                    let evs: Vec<NewEvent> = (i..i + n)
                        .map(|k| {
                            let mut e = crate::event(k | (1 << 54), 100);
                            e.event_type = format!("type{}", k % TYPES);
                            e
                        })
                        .collect();
                    store.append(&format!("cat{}-{s}", s % CATEGORIES), ANY, evs).expect("append");
                    i += n;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer");
    }
}

/// CPU time this process used so far (user and system), in seconds.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with ')'), from the state on: utime and stime
    // are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    let ticks = field(11) + field(12);
    ticks as f64 / 100.0
}

fn links(store: &Store, prefix: &str, n: u64) -> u64 {
    (0..n).map(|k| (store.stream_state(&format!("{prefix}{k}")).expect("state").last + 1).max(0) as u64).sum()
}

pub fn projections_mode(args: &Args) {
    let events = if args.events_given { args.events } else { 1_000_000 };
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let _guard = rt.enter();
    let env = annal::env::real::env();
    let dir = args.dir.join(format!("projections-{}", env.random_u64() % 1_000_000));
    let store = Store::open(&env, StoreConfig::new(&dir)).expect("open store");
    let t = env.clock.monotonic();
    write_log(&store, events);
    let log_mb = store.log().committed() as f64 / 1048576.0;
    eprintln!(
        "log of {events} events ({log_mb:.0} MB) written in {:.1} s",
        (env.clock.monotonic() - t).as_secs_f64()
    );
    let p = Projections::new(env.clone(), store.clone(), RunProjections::System, false);
    let rss_before = peak_rss();
    let log0 = store.log().committed();
    let cpu0 = cpu_secs();
    let secs = rt.block_on(async {
        p.start().await.expect("start projections");
        let t = env.clock.monotonic();
        p.command("$by_category", Command::Enable).await.expect("enable $by_category");
        p.command("$by_event_type", Command::Enable).await.expect("enable $by_event_type");
        assert!(p.wait_caught_up(Duration::from_secs(3600)).await, "caught up");
        (env.clock.monotonic() - t).as_secs_f64()
    });
    let cpu = cpu_secs() - cpu0;
    let link_bytes = (store.log().committed() - log0) as f64;
    let ce = links(&store, "$ce-cat", CATEGORIES);
    let et = links(&store, "$et-type", TYPES);
    assert_eq!((ce, et), (events, events), "every event linked once by each projection");
    println!("# annal-bench projections: $by_category and $by_event_type over a log of {events} events of 100 bytes ({log_mb:.0} MB), {STREAMS} streams in {CATEGORIES} categories, {TYPES} event types");
    println!("| events | links written | log MB written | time s | events/s (each event by both projections) | CPU s (cores busy) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {events} | {} | {:.0} | {secs:.2} | {:.0} | {cpu:.2} ({:.2}) |",
        ce + et,
        link_bytes / 1048576.0,
        events as f64 / secs,
        cpu / secs
    );
    println!(
        "peak RSS: {:.1} MiB (before the projections ran: {:.1} MiB)",
        peak_rss() as f64 / 1048576.0,
        rss_before as f64 / 1048576.0
    );
    rt.block_on(async { p.stop() });
    store.close().expect("close");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
