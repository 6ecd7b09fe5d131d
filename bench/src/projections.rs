//! `annal-bench projections`: `$by_category` and `$by_event_type` together over a log written
//! beforehand (`--events N`, default 1,000,000): events processed per second from enabling both
//! until both have linked the whole log, checked against the link counts. Then a JavaScript
//! projection that partitions by stream and sums a field of each event's data, over a fresh log
//! of the same shape: events per second from its creation until it has processed the whole log,
//! checked against the sums; and the memory 10,000 partitions of that projection hold in its
//! engine.

use std::sync::Arc;
use std::time::Duration;

use annal::config::RunProjections;
use annal::projections::definition::{Mode, RunAs};
use annal::projections::{Command, Create, Projections};
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
                            e.data = amount_data(k);
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

/// The summed field of event `k`.
fn amount(k: u64) -> u64 {
    k % 100
}

/// 100 bytes of JSON with the event's `amount`.
fn amount_data(k: u64) -> bytes::Bytes {
    let mut d = format!("{{\"amount\":{},\"pad\":\"", amount(k)).into_bytes();
    d.resize(98, b'x');
    d.extend_from_slice(b"\"}");
    d.into()
}

/// The sum of the amounts of stream `s`'s events in a log of `events` (see [`write_log`]).
fn stream_sum(events: u64, s: u64) -> u64 {
    (0..events).filter(|k| (k / BATCH) % STREAMS == s).map(amount).sum()
}

/// The JavaScript projection measured: one partition per stream, the sum of a field.
const SUM_BY_STREAM: &str = r#"fromAll().foreachStream().when({
    $init: function () { return { sum: 0, count: 0 }; },
    $any: function (s, e) { s.sum += e.body.amount; s.count += 1; }
})"#;

/// Partitions the memory figure is taken for.
const MEMORY_PARTITIONS: u64 = 10_000;

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
    js_projection(args, &rt, events);
    js_partition_memory();
}

/// A JavaScript projection summing a field by stream over a fresh log of `events`.
fn js_projection(args: &Args, rt: &tokio::runtime::Runtime, events: u64) {
    let env = annal::env::real::env();
    let dir = args.dir.join(format!("projections-js-{}", env.random_u64() % 1_000_000));
    let store = Store::open(&env, StoreConfig::new(&dir)).expect("open store");
    write_log(&store, events);
    let log_mb = store.log().committed() as f64 / 1048576.0;
    let p = Projections::new(env.clone(), store.clone(), RunProjections::All, false);
    let cpu0 = cpu_secs();
    let secs = rt.block_on(async {
        p.start().await.expect("start projections");
        let t = env.clock.monotonic();
        let create = Create {
            name: "sum-by-stream".into(),
            mode: Mode::Continuous,
            query: SUM_BY_STREAM.into(),
            enabled: true,
            emit: false,
            checkpoints: true,
            track_emitted_streams: false,
            run_as: RunAs { name: "admin".into(), roles: vec!["$admins".into()] },
        };
        p.create(create).await.expect("create the projection");
        assert!(p.wait_caught_up(Duration::from_secs(3600)).await, "caught up");
        (env.clock.monotonic() - t).as_secs_f64()
    });
    let cpu = cpu_secs() - cpu0;
    let view = p.get("sum-by-stream").expect("the projection");
    assert_eq!(view.status(), "Running", "{}", view.reason);
    let streams = STREAMS.min(events.div_ceil(BATCH));
    for s in [0, streams / 2, streams - 1] {
        let name = format!("cat{}-{s}", s % CATEGORIES);
        let state = rt.block_on(p.state("sum-by-stream", &name, false)).expect("state").expect("a partition");
        let v: serde_json::Value = serde_json::from_str(&state).expect("JSON state");
        assert_eq!(v["sum"].as_u64(), Some(stream_sum(events, s)), "{name}: {state}");
    }
    println!();
    println!("# annal-bench projections: a JavaScript projection (foreachStream, summing a field) over a log of {events} events of 100 bytes ({log_mb:.0} MB), {streams} streams");
    println!("| events | partitions | time s | events/s | CPU s (cores busy) |");
    println!("|---:|---:|---:|---:|---:|");
    println!(
        "| {events} | {} | {secs:.2} | {:.0} | {cpu:.2} ({:.2}) |",
        view.partitions,
        events as f64 / secs,
        cpu / secs
    );
    rt.block_on(async { p.stop_and_wait().await });
    store.close().expect("close");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The engine memory of the same projection's state for [`MEMORY_PARTITIONS`] partitions: the
/// engine's own allocation count before and after one event of each of that many streams.
fn js_partition_memory() {
    use annal_js::{Engine, Event, Limits};
    let mut engine = Engine::compile(SUM_BY_STREAM, Limits::default(), false).expect("compile");
    let data = amount_data(7);
    let streams: Vec<String> = (0..MEMORY_PARTITIONS).map(|s| format!("cat{}-{s}", s % CATEGORIES)).collect();
    let before = engine.memory_used();
    for (i, stream) in streams.iter().enumerate() {
        let ev = Event {
            stream_id: stream,
            sequence_number: 0,
            event_type: "bench",
            data: &data,
            metadata: b"",
            link_metadata: b"",
            is_json: true,
            timestamp_ms: 0.0,
            event_id: "00000000-0000-0000-0000-000000000000",
            position: i as u64,
            deleted: None,
        };
        engine.process(&ev, &mut |_| None).expect("process");
    }
    let after = engine.memory_used();
    let held = engine.partitions().expect("partitions");
    println!();
    println!("# annal-bench projections: engine memory of the JavaScript projection's partitions (state `{{sum, count}}` each)");
    println!("| partitions | engine memory before KiB | after KiB | per 10,000 partitions KiB | bytes per partition |");
    println!("|---:|---:|---:|---:|---:|");
    let delta = after.saturating_sub(before) as f64;
    println!(
        "| {held} | {:.0} | {:.0} | {:.0} | {:.0} |",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        delta / 1024.0 * (10_000.0 / MEMORY_PARTITIONS as f64),
        delta / MEMORY_PARTITIONS as f64
    );
}
