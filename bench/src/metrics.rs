//! `annal-bench metrics`: the cost of one `/metrics` scrape on a node with many persistent
//! subscription groups and projections (by default 1,000 groups and 20 projections).
//!
//! An in-process node gets `--groups` groups (over 100 streams, 10 events each) and `--projections`
//! continuous JavaScript projections over `$all`. Then:
//! - the document is built 50 times directly (what a scrape costs the node: every figure read and
//!   written out), reporting its size and the p50 and maximum time;
//! - the document is built 5 times as a scrape builds it (the operating-system figures sampled,
//!   gzip-compressed), each after the one-second document cache expired;
//! - `GET /metrics` is asked 5 times over HTTP with gzip (as Prometheus asks) and 5 times
//!   without, each after the cache expired: the bytes on the wire and the time from request to
//!   last byte.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::http::{Client, LocalNode, ADMIN_AUTH};
use crate::Args;

const AUTH: (&str, &str) = ("authorization", ADMIN_AUTH);
/// Streams the groups subscribe to.
const STREAMS: usize = 100;

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn setup(c: &mut Client, groups: usize, projections: usize) -> Result<(), String> {
    for s in 0..STREAMS {
        let body = format!(
            "[{}]",
            (0..10)
                .map(|i| format!(
                    r#"{{"eventId":"{:08x}-0000-4000-8000-{:012x}","eventType":"t","data":{{"i":{i}}}}}"#,
                    s,
                    crate::http::unique() & 0xffff_ffff_ffff
                ))
                .collect::<Vec<_>>()
                .join(",")
        );
        let r = c
            .request(
                http::Method::POST,
                &format!("/streams/metrics-{s}"),
                &[AUTH, ("content-type", "application/vnd.eventstore.events+json")],
                Bytes::from(body),
            )
            .await?;
        if r.status != 201 {
            return Err(format!("append: {} {}", r.status, r.reason));
        }
    }
    for g in 0..groups {
        let path = format!("/subscriptions/metrics-{}/group-{g}", g % STREAMS);
        let r = c
            .request(
                http::Method::PUT,
                &path,
                &[AUTH, ("content-type", "application/json")],
                Bytes::from("{}"),
            )
            .await?;
        if r.status != 201 {
            return Err(format!("PUT {path}: {} {}", r.status, r.reason));
        }
    }
    for p in 0..projections {
        let path = format!("/projections/continuous?name=count-{p}&type=JS&enabled=true");
        let query = "fromAll().when({$init: function() { return {n: 0}; }, $any: function(s, e) { s.n += 1; return s; }})";
        let r = c.request(http::Method::POST, &path, &[AUTH], Bytes::from(query)).await?;
        if r.status != 201 {
            return Err(format!("POST {path}: {} {}", r.status, r.reason));
        }
    }
    Ok(())
}

/// `annal-bench metrics`.
pub fn metrics_mode(args: &Args) {
    let groups = args.groups;
    let projections = args.projections;
    let dir = args.dir.join(format!("metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let node = LocalNode::start_with(&dir, 0, |c| c.run_projections = annal::config::RunProjections::All)
        .unwrap_or_else(|e| {
            eprintln!("annal-bench metrics: cannot start a node: {e}");
            std::process::exit(1)
        });
    println!(
        "# annal-bench metrics: {groups} persistent subscription groups, {projections} projections; machine: {} cores",
        annal::env::real::cores()
    );
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let addr = node.addr;
    let result: Result<(), String> = rt.block_on(async {
        let mut c = Client::connect(addr).await?;
        setup(&mut c, groups, projections).await?;
        // Let the projections start and the groups read their streams.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let n = &node.node;
        let sample = annal::metrics::scrape::Sample {
            os: n.env().rt.os_stats(),
            space: n.env().disk.space(&n.config().db),
        };
        let mut took = Vec::new();
        let mut size = 0;
        let mut text = String::new();
        for _ in 0..50 {
            let t = Instant::now();
            text = annal::metrics::scrape::scrape(n, annal::metrics::Format::Prometheus, &sample, n.env().clock.monotonic());
            took.push(t.elapsed());
            size = text.len();
        }
        took.sort();
        let subs = text.lines().filter(|l| l.starts_with("kurrentdb_persistent_sub_connections{")).count();
        let projs = text.lines().filter(|l| l.starts_with("kurrentdb_projection_running{")).count();
        let series = text.lines().filter(|l| !l.starts_with('#')).count();
        println!(
            "document: {:.1} KiB, {series} series ({subs} groups, {projs} projections); built in p50 {:.2} ms, max {:.2} ms (50 builds)",
            size as f64 / 1024.0,
            pct(&took, 0.5).as_secs_f64() * 1e3,
            took.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
        );
        let t = Instant::now();
        for _ in 0..20 {
            std::hint::black_box(n.env().rt.os_stats());
        }
        let os = t.elapsed() / 20;
        let t = Instant::now();
        for _ in 0..20 {
            std::hint::black_box(n.env().disk.space(&n.config().db));
        }
        println!(
            "operating-system figures: process and system {:.2} ms, drive space {:.3} ms (mean of 20)",
            os.as_secs_f64() * 1e3,
            (t.elapsed() / 20).as_secs_f64() * 1e3
        );
        let groups_now = n.subscriptions().groups(None, false).unwrap_or_default();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let t = Instant::now();
        for g in &groups_now {
            std::hint::black_box(n.subscriptions().parked_now(&g.stream, &g.group).ok());
        }
        println!("parked counts of {} groups, after a pause: {:.2} ms", groups_now.len(), t.elapsed().as_secs_f64() * 1e3);
        let mut doc_took = Vec::new();
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(1100)).await;
            let t = Instant::now();
            let d = annal::metrics::scrape::document(n, annal::metrics::Format::Prometheus, true);
            doc_took.push(t.elapsed());
            assert!(!d.is_empty());
        }
        doc_took.sort();
        println!(
            "document with the OS figures sampled and gzip (cache expired): p50 {:.2} ms, max {:.2} ms (5 scrapes)",
            pct(&doc_took, 0.5).as_secs_f64() * 1e3,
            doc_took.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
        );
        // As Prometheus asks (gzip), then as curl does (plain).
        for (label, headers) in [
            ("gzip, as Prometheus asks", &[("accept-encoding", "gzip")][..]),
            ("plain", &[][..]),
        ] {
            let mut http_took = Vec::new();
            let mut wire = 0;
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(1100)).await;
                let t = Instant::now();
                let r = c.request(http::Method::GET, "/metrics", headers, Bytes::new()).await?;
                http_took.push(t.elapsed());
                if r.status != 200 {
                    return Err(format!("GET /metrics: {} {}", r.status, r.reason));
                }
                wire = r.body.len();
            }
            http_took.sort();
            println!(
                "GET /metrics ({label}; cache expired, OS figures sampled): {:.1} KiB on the wire; p50 {:.2} ms, max {:.2} ms (5 scrapes)",
                wire as f64 / 1024.0,
                pct(&http_took, 0.5).as_secs_f64() * 1e3,
                http_took.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        eprintln!("annal-bench metrics: {e}");
    }
    drop(rt);
    node.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
