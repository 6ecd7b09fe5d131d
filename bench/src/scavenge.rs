//! `annal-bench scavenge`: a scavenge of a log with half of its streams hard-deleted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use annal::env::Env;
use annal::store::{NewEvent, Store, StoreConfig, ANY};

use crate::{event, peak_rss, Args};

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
                let evs: Vec<NewEvent> =
                    (0..100).map(|k| event((n * 100 + k) | (w << 56) | (1 << 55), 1024)).collect();
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

pub fn scavenge(args: &Args) {
    use annal::scavenge::{ScavengeConfig, Scavenger, StartOptions};
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
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
        println!(
            "| {label} | {mb:.0} | {secs:.2} | {:.0} | {saved:.0} | {:.0} | {before:.0} -> {:.0} |",
            mb / secs,
            saved / secs,
            disk(&store)
        );
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
