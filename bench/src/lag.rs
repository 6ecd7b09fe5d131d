//! `annal-bench projections-lag [--seconds N]`: how far `$ce-` trails the appends. An in-process
//! node (default, durable settings) runs the system projections (`System`, started at once);
//! 16 HTTP connections append single 1 KiB events to streams of one category (`lag-{c}-0`) for
//! `N` seconds (default 10) after a second of warm-up; a cursor on the node's committed-record
//! feed notes when each appended event is committed and when its link in `$ce-lag` is, and the
//! difference is the event's lag. Printed: appends/s, links seen, lag p50/p99/max.
//!
//! Both times come from the same cursor, so its own delay (how soon it sees a commit) cancels
//! out; the source event becomes visible there when it is acknowledged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use annal::log::record::Record;

use crate::gen;
use crate::http::{self, LocalNode};
use crate::Args;

/// Connections appending.
const CONNS: usize = 16;
/// The appends' category (their streams are `lag-{connection}-0`).
const CATEGORY: &str = "lag";
/// How long the links may take to catch up after the load stops.
const CATCH_UP: Duration = Duration::from_secs(20);

pub fn lag_mode(args: &Args) {
    if let Err(e) = run(args) {
        eprintln!("annal-bench projections-lag: {e}");
        std::process::exit(1);
    }
}

/// Lags seen so far, µs, and the sources whose links are still due: (stream, number) → when the
/// cursor saw the source committed.
#[derive(Default)]
struct Seen {
    lags_us: Vec<u32>,
    due: HashMap<(String, i64), Instant>,
}

fn run(args: &Args) -> Result<(), String> {
    let secs = args.seconds.unwrap_or(10.0);
    let dir = args.dir.join(format!("lag-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let node = LocalNode::start_with(&dir, 0, |c| {
        c.run_projections = annal::config::RunProjections::System;
        c.start_standard_projections = true;
    })?;
    println!(
        "# annal-bench projections-lag: in-process node {} (durable), system projections running; {CONNS} connections append single 1 KiB events to category {CATEGORY:?} for {secs} s after 1 s of warm-up",
        node.addr
    );
    println!("# machine: {} cores; load average before: {}", annal::env::real::cores(), gen::load_avg());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (store, seen, done) = (node.node.store().clone(), seen.clone(), done.clone());
        let ce = format!("$ce-{CATEGORY}");
        let prefix = format!("{CATEGORY}-");
        std::thread::spawn(move || -> Result<(), String> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async move {
                let mut follow = store.follow_new();
                while !done.load(Ordering::Relaxed) {
                    let batch = tokio::time::timeout(Duration::from_millis(200), follow.next(4096)).await;
                    let Ok(records) = batch else { continue };
                    let records = records.map_err(|e| e.to_string())?;
                    let now = Instant::now();
                    let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
                    for r in records {
                        let Record::Event(e) = r else { continue };
                        if e.stream.starts_with(&prefix) {
                            s.due.insert((e.stream, e.event_number), now);
                        } else if e.stream == ce {
                            let target = String::from_utf8_lossy(&e.data).into_owned();
                            let Some((n, stream)) = target.split_once('@') else { continue };
                            let Ok(n) = n.parse::<i64>() else { continue };
                            if let Some(t) = s.due.remove(&(stream.to_string(), n)) {
                                let us = now.duration_since(t).as_micros().min(u32::MAX as u128) as u32;
                                s.lags_us.push(us);
                            }
                        }
                    }
                }
                Ok(())
            })
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let payload = gen::payload(1024);
    let m = rt.block_on(async {
        let ops = http::append_ops_with(node.addr, None, CATEGORY, CONNS, 1, 1, &payload).await?;
        Ok::<_, String>(
            gen::closed_loop_cpu(ops, Duration::from_secs(1), Duration::from_secs_f64(secs), None).await,
        )
    })?;
    // The links of the last appends.
    let stop = Instant::now() + CATCH_UP;
    while Instant::now() < stop && !seen.lock().unwrap_or_else(|e| e.into_inner()).due.is_empty() {
        std::thread::sleep(Duration::from_millis(50));
    }
    done.store(true, Ordering::Relaxed);
    watcher.join().map_err(|_| "the watcher panicked".to_string())??;
    let s = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    let mut lags = s.lags_us;
    lags.sort_unstable();
    let ms = |p: f64| f64::from(gen::pct(&lags, p)) / 1000.0; // p: a fraction
    println!("| appends/s | links seen | links missing after {CATCH_UP:?} | lag p50 ms | lag p99 ms | lag max ms |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {:.0} | {} | {} | {:.2} | {:.2} | {:.2} |",
        m.rate(),
        lags.len(),
        s.due.len(),
        ms(0.50),
        ms(0.99),
        lags.last().map_or(0.0, |&x| f64::from(x) / 1000.0)
    );
    if m.errors > 0 {
        println!("# {} failed requests; first: {}", m.errors, m.first_error.unwrap_or_default());
    }
    node.stop();
    let _ = std::fs::remove_dir_all(&dir);
    if !s.due.is_empty() {
        return Err(format!("{} appended events never got their $ce- link", s.due.len()));
    }
    Ok(())
}
