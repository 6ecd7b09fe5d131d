//! `annal-bench backup`: backup, restore and verify speed on a database of `--gib` GiB, beside
//! `cp -r` of the same files in the same run, and what backups cost a concurrent append load of
//! 16 HTTP connections.
//!
//! Every copy measured here ends durable: the backup and the restore sync each file, so `cp -r`
//! is shown both alone and followed by `sync` (the fair comparison). All runs read a warm page
//! cache (the dataset was just written, and `cp` reads it first); every timed run starts after a
//! `sync`, so none pays for the write-back of the one before.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use annal::backup::copy::{backup, BackupOptions};
use annal::backup::restore::{restore, RestoreOptions};
use annal::backup::scavenge::NoNode;
use annal::dblock::database_id;
use annal::env::Env;
use annal::store::{NewEvent, Store, StoreConfig, ANY};

use crate::gen;
use crate::http::{append_ops, unique, LocalNode};
use crate::{event, Args};

/// Writes `gib` GiB of 1 KiB events over 1,000 streams with 4 writers.
fn dataset(env: &Env, dir: &Path, gib: f64) -> u64 {
    let store = Store::open(env, StoreConfig::new(dir)).expect("open store");
    let target = (gib * 1024.0 * 1024.0 * 1024.0) as u64;
    let next = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..4u64)
        .map(|w| {
            let (store, next) = (store.clone(), next.clone());
            std::thread::spawn(move || {
                while store.log().committed() < target {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let evs: Vec<NewEvent> =
                        (0..100).map(|k| event((n * 100 + k) | (w << 56) | (1 << 54), 1024)).collect();
                    store.append(&format!("bk-{}", n % 1000), ANY, evs).expect("append");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer");
    }
    store.close().expect("close");
    store.log().committed()
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        dir_bytes(&e.path())
                    } else {
                        e.metadata().map(|m| m.len()).unwrap_or(0)
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn mbs(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs.max(1e-9)
}

/// Appends per second of 16 HTTP connections, each appending single 1 KiB events to a stream
/// of its own, against `node` for `secs` seconds (after a second of warm-up); with `backups`,
/// while full backups of the node's database run back to back on another thread. Returns the
/// rate and the backups completed in the window.
fn load(node: &LocalNode, secs: f64, backups: Option<&(dyn Fn(&AtomicBool) -> u64 + Sync)>) -> (f64, u64) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let payload = gen::payload(1024);
    let prefix = format!("load-{}", unique() % 1_000_000);
    let ops = rt.block_on(append_ops(node.addr, &prefix, 16, 1, 1, &payload)).expect("connect");
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let copier = backups.map(|f| s.spawn(|| f(&stop)));
        let m = rt.block_on(gen::closed_loop_cpu(
            ops,
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs_f64(secs),
            None,
        ));
        stop.store(true, Ordering::SeqCst);
        assert_eq!(m.errors, 0, "appends failed: {:?}", m.first_error);
        let done = copier.map_or(0, |c| c.join().expect("backups"));
        (m.events as f64 / m.secs.max(1e-9), done)
    })
}

/// Rounds of the three copies (see [`backup_bench`]).
const ROUNDS: usize = 8;

/// Runs the backup benchmark.
pub fn backup_bench(args: &Args) {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let _guard = rt.enter();
    let env = annal::env::real::env();
    let root = args.dir.join(format!("backup-{}", env.random_u64() % 1_000_000));
    let db = root.join("db");
    println!("# annal-bench backup: a {:.1} GiB database of 1 KiB events in 1,000 streams", args.gib);
    let t = Instant::now();
    let log = dataset(&env, &db, args.gib);
    let bytes = dir_bytes(&db);
    println!(
        "dataset: log {:.0} MB, {:.0} MB of files, written in {:.1} s",
        log as f64 / 1e6,
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    // Rounds of four runs: `cp -r` of the database (+ sync), `cp -r` of the backup (+ sync: the
    // files a restore reads), backup and restore; each row is the median round (this machine's
    // disk is shared and its speed varies from second to second).
    let id = database_id(&env, &db).expect("identity");
    let dest = root.join("backup");
    let target = root.join("restored");
    let cp_dest = root.join("cp");
    let cpb_dest = root.join("cp-backup");
    let opts = BackupOptions {
        source_db: db.clone(),
        source_index: db.join("index"),
        dest: dest.clone(),
        differential: false,
    };
    let ro = RestoreOptions {
        from: dest.clone(),
        db: target.clone(),
        index: target.join("index"),
        overwrite: false,
    };
    let mut times: [Vec<f64>; 4] = Default::default();
    let mut cp_syncs: [Vec<f64>; 2] = Default::default();
    let (mut sum, mut rs) = (None, None);
    let sync = || {
        std::process::Command::new("sync").status().expect("sync");
    };
    let cp = |from: &Path, to: &Path| {
        let ok = std::process::Command::new("cp").arg("-r").arg(from).arg(to).status().expect("cp").success();
        assert!(ok, "cp -r failed");
    };
    // On this kind of shared virtual disk the same copy runs at very different speeds depending
    // on what ran just before it (a copy right after another one's `sync` was up to 4x slower than
    // the next), so the rounds follow a balanced square: each run comes first once in four rounds
    // and follows each of the other three once. (Rotating one order would not do: the run before
    // each would always be the same one.) A warm-up copy and backup absorb the write-back of the
    // dataset and give the first restore its backup.
    let _ = std::fs::remove_dir_all(&cp_dest);
    sync();
    cp(&db, &cp_dest);
    rt.block_on(backup(&env, &opts, &id, &mut NoNode, &mut |_| {})).expect("backup");
    sync();
    const NAMES: [&str; 4] = ["cp -r", "cp -r of the backup", "backup", "restore"];
    const SQUARE: [[usize; 4]; 4] = [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]];
    for round in 0..ROUNDS {
        let mut line = Vec::new();
        for op in SQUARE[round % SQUARE.len()] {
            let d = [&cp_dest, &cpb_dest, &dest, &target][op];
            let _ = std::fs::remove_dir_all(d);
            sync();
            let t = Instant::now();
            match op {
                0 | 1 => {
                    cp(if op == 0 { &db } else { &dest }, d);
                    let copied = t.elapsed().as_secs_f64();
                    sync();
                    let synced = t.elapsed().as_secs_f64();
                    times[op].push(copied);
                    cp_syncs[op].push(synced);
                    line.push(format!("{} {copied:.2} s (+ sync {synced:.2} s)", NAMES[op]));
                }
                2 => {
                    sum = Some(
                        rt.block_on(backup(&env, &opts, &id, &mut NoNode, &mut |_| {})).expect("backup"),
                    );
                    times[op].push(t.elapsed().as_secs_f64());
                    line.push(format!("backup {:.2} s", t.elapsed().as_secs_f64()));
                }
                _ => {
                    rs = Some(restore(&env, &ro, &mut |_, _| {}).expect("restore"));
                    times[op].push(t.elapsed().as_secs_f64());
                    line.push(format!("restore {:.2} s", t.elapsed().as_secs_f64()));
                }
            }
        }
        println!("round {round}: {}", line.join(", "));
    }
    // Of an even count, the mean of the two middle rounds.
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 0 {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        } else {
            v[n / 2]
        }
    };
    let [mut t_cp, mut t_cpb, mut t_bk, mut t_rest] = times;
    let [mut s_cp, mut s_cpb] = cp_syncs;
    let (cp_t, cp_sync, cpb_t, cpb_sync) =
        (median(&mut t_cp), median(&mut s_cp), median(&mut t_cpb), median(&mut s_cpb));
    let (bk, rest) = (median(&mut t_bk), median(&mut t_rest));
    let (sum, rs) = (sum.expect("a round ran"), rs.expect("a round ran"));
    let backup_bytes = dir_bytes(&dest);
    let t = Instant::now();
    let r = annal::backup::verify::verify(&env, &dest).expect("verify");
    let vf = t.elapsed().as_secs_f64();

    println!("| run | MB | time s | MB/s | vs cp -r + sync | vs cp -r of its source + sync |");
    println!("|---|---:|---:|---:|---:|---:|");
    let row = |name: &str, b: u64, s: f64, source: Option<f64>| {
        println!(
            "| {name} | {:.0} | {s:.2} | {:.0} | {:.2}x | {} |",
            b as f64 / 1e6,
            mbs(b, s),
            mbs(b, s) / mbs(bytes, cp_sync),
            source.map_or("".to_string(), |x| format!("{:.2}x", mbs(b, s) / x)),
        );
    };
    row("cp -r", bytes, cp_t, None);
    row("cp -r, then sync", bytes, cp_sync, None);
    row("cp -r of the backup", backup_bytes, cpb_t, None);
    row("cp -r of the backup, then sync", backup_bytes, cpb_sync, None);
    row("annal backup (full)", sum.bytes_copied, bk, Some(mbs(bytes, cp_sync)));
    row("annal restore", rs.bytes, rest, Some(mbs(backup_bytes, cpb_sync)));
    row("annal backup verify (reads)", r.chunk_bytes, vf, None);
    println!(
        "verify: {} events in {} streams, last event at {:?}",
        r.events, r.streams, r.last_event_position
    );

    // The cost to a concurrent append load: 16 HTTP connections appending to a node serving the
    // database, alone, then while full backups of it run back to back.
    let node = LocalNode::start(&db, 0).expect("start a node on the dataset");
    let secs = args.seconds.unwrap_or(10.0);
    sync();
    let (alone, _) = load(&node, secs, None);
    sync();
    let dest2 = root.join("backup-under-load");
    let backups = |stop: &AtomicBool| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let benv = rt.block_on(async { annal::env::real::env() });
        let mut done = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let _ = std::fs::remove_dir_all(&dest2);
            let o = BackupOptions { dest: dest2.clone(), ..opts.clone() };
            rt.block_on(backup(&benv, &o, &id, &mut NoNode, &mut |_| {})).expect("backup under load");
            done += 1;
        }
        done
    };
    let (with, done) = load(&node, secs, Some(&backups));
    node.stop();
    println!(
        "16 HTTP connections appending 1 KiB events: {alone:.0} appends/s alone, {with:.0} appends/s while \
         {done} full backups ran back to back: {:.0}% of the throughput",
        with * 100.0 / alone.max(1.0)
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// `annal-bench redact`: the time `annal redact` takes for 100 events spread over 10 completed
/// chunks of 16 MiB, against a node serving in this process with `--enable-unix-socket`.
pub fn redact_bench(args: &Args) {
    use annal::log::record::Record;
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let env = rt.block_on(async { annal::env::real::env() });
    let root = args.dir.join(format!("redact-{}", env.random_u64() % 1_000_000));
    let mut config = annal::config::Config::for_dir(&root);
    config.chunk_size = 16 << 20;
    config.enable_unix_socket = true;
    let chunk = config.chunk_size;
    let node = annal::node::Node::open(env.clone(), config).expect("open node");
    let (_, serve) = rt.block_on(node.bind()).expect("bind");
    let serving = rt.spawn(serve);
    let store = node.store().clone();
    let mut n = 0u64;
    while store.log().committed() < 10 * chunk + chunk / 2 {
        let evs: Vec<NewEvent> = (0..100).map(|k| event((n * 100 + k) | (1 << 52), 1024)).collect();
        store.append(&format!("r-{}", n % 10), ANY, evs).expect("append");
        n += 1;
    }
    // Ten events of the r- streams in each of the first ten chunks.
    let mut picked: Vec<Vec<String>> = vec![Vec::new(); 10];
    for rec in store.log().scan(0) {
        if let Ok(Record::Event(e)) = rec {
            let c = (e.log_position / chunk) as usize;
            if c < 10 && e.stream.starts_with("r-") && picked[c].len() < 10 {
                picked[c].push(format!("{}@{}", e.event_number, e.stream));
            }
        }
    }
    let list = picked.concat().join(",");
    let t = Instant::now();
    let code =
        annal::redact::tool::main(&["--db".into(), root.display().to_string(), "--events".into(), list]);
    let secs = t.elapsed().as_secs_f64();
    println!("# annal-bench redact: 100 events over 10 completed chunks of 16 MiB: {secs:.2} s ({code:?})");
    node.request_shutdown();
    let _ = rt.block_on(serving);
    drop(store);
    drop(node);
    let _ = std::fs::remove_dir_all(&root);
}
