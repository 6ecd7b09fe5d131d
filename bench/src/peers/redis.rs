//! Redis Streams (Debian's `redis-server`), durable: `appendonly yes`, `appendfsync always`.
//! One XADD per event; no expected-version check exists (XADD with `*` ids), so the table says
//! "no optimistic concurrency". Batches of 100 are one MULTI/EXEC (one fsync). Redis has no
//! order across streams, so the catch-up row is n/a. Consumer groups: `XREADGROUP` pages and
//! one `XACK` per page; Redis Streams have no negative acknowledgement, so a redelivery is the
//! consumer claiming its pending entry again (`XCLAIM`, min-idle 0).

use std::path::Path;
use std::process::{Child, Command};

use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::Value;

use super::{Driver, Subscriber};
use crate::gen::{self, BoxFut, Op};

pub struct Redis {
    child: Child,
    url: String,
    payload: Bytes,
}

pub async fn start(dir: &Path) -> Result<Box<dyn Driver>, String> {
    let port = super::free_port()?;
    let data = dir.join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let mut child = super::spawn(
        Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--dir"])
            .arg(&data)
            .args(["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"]),
        dir,
    )?;
    if let Err(e) = super::wait_port(port, &mut child).await {
        super::stop_child(&mut child);
        return Err(format!("{e}: {}", super::log_tail(dir)));
    }
    Ok(Box::new(Redis { child, url: format!("redis://127.0.0.1:{port}/"), payload: gen::payload(1024) }))
}

/// One TCP connection of its own.
pub async fn connect(url: &str) -> Result<MultiplexedConnection, String> {
    let c = redis::Client::open(url).map_err(|e| e.to_string())?;
    c.get_multiplexed_async_connection().await.map_err(|e| e.to_string())
}

struct Append {
    conn: MultiplexedConnection,
    streams: Vec<String>,
    batch: usize,
    payload: Bytes,
    rng: gen::Rng,
}

impl Op for Append {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let k = self.rng.pick(self.streams.len());
            let s = &self.streams[k];
            if self.batch == 1 {
                let _: Value = redis::cmd("XADD")
                    .arg(s)
                    .arg("*")
                    .arg("d")
                    .arg(&self.payload[..])
                    .query_async(&mut self.conn)
                    .await
                    .map_err(|e| e.to_string())?;
            } else {
                let mut p = redis::pipe();
                p.atomic();
                for _ in 0..self.batch {
                    p.cmd("XADD").arg(s).arg("*").arg("d").arg(&self.payload[..]).ignore();
                }
                let _: Value = p.query_async(&mut self.conn).await.map_err(|e| e.to_string())?;
            }
            Ok(self.batch as u64)
        })
    }
}

/// Entries of an XRANGE reply and the id of the last one.
fn entries(v: &Value) -> (usize, Option<String>) {
    match v {
        Value::Array(items) => {
            let last = items.last().and_then(|e| match e {
                Value::Array(f) => match f.first() {
                    Some(Value::BulkString(id)) => Some(String::from_utf8_lossy(id).into_owned()),
                    Some(Value::SimpleString(id)) => Some(id.clone()),
                    _ => None,
                },
                _ => None,
            });
            (items.len(), last)
        }
        _ => (0, None),
    }
}

struct Range {
    conn: MultiplexedConnection,
    stream: String,
    from: String,
    page: usize,
}

impl Op for Range {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let v: Value = redis::cmd("XRANGE")
                .arg(&self.stream)
                .arg(&self.from)
                .arg("+")
                .arg("COUNT")
                .arg(self.page)
                .query_async(&mut self.conn)
                .await
                .map_err(|e| e.to_string())?;
            let (n, last) = entries(&v);
            self.from = match last {
                Some(id) if n == self.page => format!("({id}"),
                _ => "-".into(),
            };
            Ok(n as u64)
        })
    }
}

struct Xread {
    conn: MultiplexedConnection,
    stream: String,
    last: String,
}

impl Subscriber for Xread {
    fn next(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let v: Value = redis::cmd("XREAD")
                .arg("COUNT")
                .arg(1000)
                .arg("BLOCK")
                .arg(1000)
                .arg("STREAMS")
                .arg(&self.stream)
                .arg(&self.last)
                .query_async(&mut self.conn)
                .await
                .map_err(|e| e.to_string())?;
            // [[stream, [entries…]]] or nil after the block timeout.
            let Value::Array(streams) = v else { return Ok(0) };
            let Some(Value::Array(kv)) = streams.first() else { return Ok(0) };
            let Some(list) = kv.get(1) else { return Ok(0) };
            let (n, last) = entries(list);
            if let Some(l) = last {
                self.last = l;
            }
            Ok(n as u64)
        })
    }
}

/// The ids of a list of entries (`[[id, fields]…]`: an `XCLAIM` reply, or the entries of one
/// stream in an `XREADGROUP` reply).
fn ids(entries: &[Value]) -> Vec<Vec<u8>> {
    entries
        .iter()
        .filter_map(|e| match e {
            Value::Array(f) => match f.first() {
                Some(Value::BulkString(id)) => Some(id.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The entry ids of an `XREADGROUP` reply of one stream (`[[stream, entries]]`, nil when empty).
fn read_ids(v: &Value) -> Vec<Vec<u8>> {
    match v {
        Value::Array(streams) => match streams.first() {
            Some(Value::Array(kv)) => match kv.get(1) {
                Some(Value::Array(entries)) => ids(entries),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The entry ids of an `XCLAIM` reply.
fn claim_ids(v: &Value) -> Vec<Vec<u8>> {
    match v {
        Value::Array(entries) => ids(entries),
        _ => Vec::new(),
    }
}

async fn create_group(conn: &mut MultiplexedConnection, stream: &str, group: &str) -> Result<(), String> {
    let _: Value = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(group)
        .arg("0")
        .query_async(conn)
        .await
        .map_err(|e| format!("XGROUP CREATE: {e}"))?;
    Ok(())
}

/// Up to `count` new entries for `consumer` of `group` (`XREADGROUP … >`): their ids.
async fn read_group(
    conn: &mut MultiplexedConnection,
    stream: &str,
    group: &str,
    consumer: &str,
    count: usize,
) -> Result<Vec<Vec<u8>>, String> {
    let v: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(group)
        .arg(consumer)
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg(stream)
        .arg(">")
        .query_async(conn)
        .await
        .map_err(|e| format!("XREADGROUP: {e}"))?;
    Ok(read_ids(&v))
}

/// One competing consumer: `XREADGROUP … >` pages and one `XACK` per page, until the group has
/// nothing new left; returns its cycle times (µs) and the entries its XACKs acknowledged.
async fn consume(
    url: &str,
    stream: &str,
    group: &str,
    name: String,
    page: usize,
) -> Result<(Vec<u32>, u64), String> {
    let mut conn = connect(url).await?;
    let (mut lat, mut acked) = (Vec::new(), 0u64);
    loop {
        let t = std::time::Instant::now();
        let ids = read_group(&mut conn, stream, group, &name, page).await?;
        if ids.is_empty() {
            return Ok((lat, acked));
        }
        let mut ack = redis::cmd("XACK");
        ack.arg(stream).arg(group);
        for id in &ids {
            ack.arg(&id[..]);
        }
        let n: u64 = ack.query_async(&mut conn).await.map_err(|e| format!("XACK: {e}"))?;
        acked += n;
        lat.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
    }
}

impl Driver for Redis {
    fn competing<'a>(
        &'a self,
        stream: &'a str,
        len: u64,
        consumers: usize,
        page: usize,
    ) -> BoxFut<'a, Result<Option<Vec<u32>>, String>> {
        Box::pin(async move {
            let group = format!("peers{consumers}");
            create_group(&mut connect(&self.url).await?, stream, &group).await?;
            let each = (0..consumers).map(|i| consume(&self.url, stream, &group, format!("c{i}"), page));
            let (mut lat, mut acked) = (Vec::new(), 0);
            for r in futures_util::future::join_all(each).await {
                let (l, n) = r?;
                lat.extend(l);
                acked += n;
            }
            if acked != len {
                return Err(format!("XACK acknowledged {acked} entries, not {len}"));
            }
            Ok(Some(lat))
        })
    }
    fn redelivery<'a>(
        &'a self,
        stream: &'a str,
        samples: usize,
    ) -> BoxFut<'a, Result<Option<Vec<u32>>, String>> {
        Box::pin(async move {
            let group = "peers-nack";
            let mut conn = connect(&self.url).await?;
            create_group(&mut conn, stream, group).await?;
            let mut lat = Vec::new();
            for _ in 0..samples {
                let id = read_group(&mut conn, stream, group, "c", 1)
                    .await?
                    .pop()
                    .ok_or("XREADGROUP returned nothing")?;
                // No nack in Redis Streams: the pending entry is claimed again at once.
                let t = std::time::Instant::now();
                let again: Value = redis::cmd("XCLAIM")
                    .arg(stream)
                    .arg(group)
                    .arg("c")
                    .arg(0)
                    .arg(&id[..])
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| format!("XCLAIM: {e}"))?;
                lat.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                if claim_ids(&again).first() != Some(&id) {
                    return Err("XCLAIM did not return the entry".into());
                }
                let _: u64 = redis::cmd("XACK")
                    .arg(stream)
                    .arg(group)
                    .arg(&id[..])
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| format!("XACK: {e}"))?;
            }
            Ok(Some(lat))
        })
    }
    fn server_pid(&self) -> u32 {
        self.child.id()
    }
    fn append_ops<'a>(
        &'a self,
        prefix: &'a str,
        conns: usize,
        streams_each: usize,
        batch: usize,
    ) -> BoxFut<'a, Result<Vec<Box<dyn Op>>, String>> {
        Box::pin(async move {
            let mut ops: Vec<Box<dyn Op>> = Vec::new();
            for c in 0..conns {
                ops.push(Box::new(Append {
                    conn: connect(&self.url).await?,
                    streams: gen::own_streams(prefix, c, streams_each),
                    batch,
                    payload: self.payload.clone(),
                    rng: gen::Rng(0x5EED + c as u64),
                }));
            }
            Ok(ops)
        })
    }
    fn preload<'a>(&'a self, stream: &'a str, n: u64) -> BoxFut<'a, Result<(), String>> {
        Box::pin(async move {
            let mut conn = connect(&self.url).await?;
            let mut done = 0;
            while done < n {
                let k = (n - done).min(1000);
                let mut p = redis::pipe();
                p.atomic();
                for _ in 0..k {
                    p.cmd("XADD").arg(stream).arg("*").arg("d").arg(&self.payload[..]).ignore();
                }
                let _: Value = p.query_async(&mut conn).await.map_err(|e| e.to_string())?;
                done += k;
            }
            Ok(())
        })
    }
    fn stream_read<'a>(
        &'a self,
        stream: &'a str,
        _len: u64,
        page: usize,
    ) -> BoxFut<'a, Result<Box<dyn Op>, String>> {
        Box::pin(async move {
            Ok(Box::new(Range {
                conn: connect(&self.url).await?,
                stream: stream.into(),
                from: "-".into(),
                page,
            }) as Box<dyn Op>)
        })
    }
    fn all_read(&self, _page: usize) -> BoxFut<'_, Result<Option<Box<dyn Op>>, String>> {
        Box::pin(async { Ok(None) })
    }
    fn subscribe<'a>(&'a self, stream: &'a str) -> BoxFut<'a, Result<Option<Box<dyn Subscriber>>, String>> {
        Box::pin(async move {
            Ok(Some(Box::new(Xread {
                conn: connect(&self.url).await?,
                stream: stream.into(),
                last: "0-0".into(),
            }) as Box<dyn Subscriber>))
        })
    }
    fn stop(&mut self) {
        super::stop_child(&mut self.child);
    }
}
