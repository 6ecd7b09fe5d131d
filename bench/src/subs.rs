//! `annal-bench subs`: persistent subscriptions over HTTP.
//!
//! A stream of `--events` events (256-byte JSON) is written first. Then, for 1 and for 4
//! consumers (each its own keep-alive connection and `?consumer=` name, all in one group created
//! for the row, RoundRobin, `readBatchSize` 100), every consumer loops: take a page of up to 100
//! messages with their data (`GET /subscriptions/{s}/{g}/100?embed=body`), acknowledge the whole page with one `POST` of the
//! feed's `ackAll` link (`ack?ids=…`). The row ends when every event was acknowledged; it reports
//! events acknowledged per second and the latency of one take-and-acknowledge cycle.
//!
//! Then the redelivery latency after a nack: one consumer takes one message, nacks it
//! (`action=retry`) and takes again; the time from sending the nack to having the same message
//! back is one sample.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use crate::gen;
use crate::http::{preload, unique, Client, ADMIN_AUTH};
use crate::Args;

const ACCEPT: (&str, &str) = ("accept", "application/vnd.eventstore.competingatom+json");
const AUTH: (&str, &str) = ("authorization", ADMIN_AUTH);
/// Messages per page.
const PAGE: usize = 100;
/// Nack round trips measured.
const NACK_SAMPLES: usize = 2000;

/// The `uri` of the feed link with `relation`, as a path (the scheme and host cut off).
fn link(body: &[u8], relation: &str) -> Option<String> {
    let key = format!("\"relation\":\"{relation}\"");
    let at = memchr::memmem::find(body, key.as_bytes())?;
    let head = &body[..at];
    let uri_at = memchr::memmem::rfind(head, b"\"uri\":\"")? + 7;
    let end = uri_at + head[uri_at..].iter().position(|&c| c == b'"')?;
    let uri = std::str::from_utf8(&head[uri_at..end]).ok()?;
    let path_at = uri.find("://").map(|i| i + 3).and_then(|i| uri[i..].find('/').map(|j| i + j))?;
    Some(uri[path_at..].to_owned())
}

/// Entries of a competing feed page (each has one `ack` link).
fn entries(body: &[u8]) -> usize {
    memchr::memmem::find_iter(body, b"\"relation\":\"ack\"").count()
}

async fn create(c: &mut Client, stream: &str, group: &str, settings: &str) -> Result<(), String> {
    let r = c
        .request(
            http::Method::PUT,
            &format!("/subscriptions/{stream}/{group}"),
            &[AUTH, ("content-type", "application/json")],
            Bytes::from(settings.to_owned()),
        )
        .await?;
    if r.status != 201 {
        return Err(format!("create {stream}/{group}: {} {}", r.status, r.reason));
    }
    Ok(())
}

async fn take(c: &mut Client, path: &str) -> Result<Bytes, String> {
    let r = c.request(http::Method::GET, path, &[AUTH, ACCEPT], Bytes::new()).await?;
    if r.status != 200 {
        return Err(format!("GET {path}: {} {}", r.status, r.reason));
    }
    Ok(r.body)
}

async fn post(c: &mut Client, path: &str) -> Result<(), String> {
    let r = c.request(http::Method::POST, path, &[AUTH], Bytes::new()).await?;
    if r.status != 202 {
        return Err(format!("POST {path}: {} {}", r.status, r.reason));
    }
    Ok(())
}

/// One consumer: takes and acknowledges pages until `total` events are acknowledged by all.
async fn consume(
    addr: SocketAddr,
    stream: String,
    group: String,
    name: String,
    done: std::sync::Arc<std::sync::atomic::AtomicU64>,
    total: u64,
) -> Result<Vec<u32>, String> {
    use std::sync::atomic::Ordering;
    let mut c = Client::connect(addr).await?;
    let path = format!("/subscriptions/{stream}/{group}/{PAGE}?consumer={name}&embed=body");
    let mut lat = Vec::new();
    let mut idle = 0u32;
    while done.load(Ordering::Relaxed) < total {
        let t = Instant::now();
        let body = take(&mut c, &path).await?;
        let n = entries(&body);
        if n == 0 {
            // The others hold what is left; a long run of empty pages means something is lost.
            idle += 1;
            if idle > 20_000 {
                return Err(format!(
                    "{name}: no messages for 20000 polls at {}",
                    done.load(Ordering::Relaxed)
                ));
            }
            tokio::task::yield_now().await;
            continue;
        }
        idle = 0;
        let ack = link(&body, "ackAll").ok_or("a page without an ackAll link")?;
        post(&mut c, &ack).await?;
        lat.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        done.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(lat)
}

/// Creates `group` over `stream` (from its start) and runs `consumers` consumers of it, each on
/// its own connection, until `total` events are acknowledged; returns the take-and-acknowledge
/// cycle times (µs) of every page. The group's own count of acknowledged events must agree.
pub(crate) async fn competing(
    addr: SocketAddr,
    stream: &str,
    group: &str,
    consumers: usize,
    total: u64,
) -> Result<Vec<u32>, String> {
    let mut admin = Client::connect(addr).await?;
    create(&mut admin, stream, group, r#"{"readBatchSize":100,"bufferSize":1000,"liveBufferSize":1000}"#)
        .await?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let each = (0..consumers)
        .map(|i| consume(addr, stream.to_owned(), group.to_owned(), format!("c{i}"), done.clone(), total));
    let mut lat = Vec::new();
    for r in futures_join(each.collect()).await {
        lat.extend(r?);
    }
    // Every event was acknowledged exactly as counted: the group's own figure agrees.
    let processed = processed(&mut admin, stream, group).await?;
    if processed != total {
        return Err(format!("the group counts {processed} acknowledged events, not {total}"));
    }
    Ok(lat)
}

/// Runs every future of `all` to completion on this task, concurrently; their outputs in order.
async fn futures_join<F: std::future::Future>(all: Vec<F>) -> Vec<F::Output> {
    let mut all: Vec<std::pin::Pin<Box<F>>> = all.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = all.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in all.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// Creates `group` over `stream` and measures `samples` redeliveries after a nack: take one
/// message, `nack?action=retry` it, take again (it must be the same message); each sample is the
/// time from sending the nack to having the message back (µs).
pub(crate) async fn redeliveries(
    c: &mut Client,
    stream: &str,
    group: &str,
    samples: usize,
) -> Result<Vec<u32>, String> {
    create(c, stream, group, r#"{"messageTimeoutMilliseconds":60000}"#).await?;
    let path = format!("/subscriptions/{stream}/{group}/1");
    let mut lat = Vec::new();
    for _ in 0..samples {
        let body = take(c, &path).await?;
        let nack = link(&body, "nack").ok_or("an empty page")?;
        let t = Instant::now();
        post(c, &format!("{nack}?action=retry")).await?;
        let again = take(c, &path).await?;
        lat.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        if link(&again, "nack") != Some(nack) {
            return Err("the nacked message did not come back first".into());
        }
        post(c, &link(&again, "ack").ok_or("no ack link")?).await?;
    }
    Ok(lat)
}

/// The group's `totalItemsProcessed`.
async fn processed(c: &mut Client, stream: &str, group: &str) -> Result<u64, String> {
    let path = format!("/subscriptions/{stream}/{group}/info");
    let r =
        c.request(http::Method::GET, &path, &[AUTH, ("accept", "application/json")], Bytes::new()).await?;
    let v: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| format!("{path}: {e}"))?;
    v["totalItemsProcessed"].as_u64().ok_or_else(|| format!("{path}: no totalItemsProcessed"))
}

fn pct(v: &mut [u32], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    f64::from(v[((v.len() - 1) as f64 * p) as usize]) / 1000.0
}

async fn run(addr: SocketAddr, events: u64) -> Result<(), String> {
    let run = unique() % 1_000_000;
    let stream = format!("subs-{run}");
    let t = Instant::now();
    preload(addr, &stream, events, &gen::payload(256)).await?;
    println!("# {events} events written in {:.1} s", t.elapsed().as_secs_f64());
    println!("| workload | events acked/s | p50 ms per page | p99 ms per page |");
    println!("|---|---:|---:|---:|");
    let mut admin = Client::connect(addr).await?;
    for consumers in [1usize, 4] {
        let t = Instant::now();
        let mut lat = competing(addr, &stream, &format!("g{consumers}"), consumers, events).await?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "| {consumers} consumer(s), pages of {PAGE} (embed=body), one ack?ids= per page | {:.0} | {:.2} | {:.2} |",
            events as f64 / secs,
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99)
        );
    }
    // Redelivery after a nack.
    let mut lat = redeliveries(&mut admin, &stream, "nack", NACK_SAMPLES).await?;
    println!(
        "| redelivery after a nack (nack sent → the same message taken again), {NACK_SAMPLES} samples | - | {:.3} | {:.3} |",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99)
    );
    Ok(())
}

/// `annal-bench subs [--url URL] [--events N]`.
pub fn subs_mode(args: &Args) {
    let events = args.events;
    let (local, addr) = crate::http::target_node(args, "subs");
    println!(
        "# annal-bench subs: {} ({addr}), {events} events of 256 bytes; machine: {} cores; load average before: {}",
        args.url.as_deref().unwrap_or("in-process node"),
        annal::env::real::cores(),
        gen::load_avg()
    );
    // The load generator: one thread, one task per consumer connection.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let local_set = tokio::task::LocalSet::new();
    let result = local_set.block_on(&rt, run(addr, events));
    println!("# load average after: {}", gen::load_avg());
    if let Err(e) = result {
        eprintln!("annal-bench subs: {e}");
    }
    drop(rt);
    if let Some((n, dir)) = local {
        n.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
