//! SierraDB (`cargo install sierradb-server`), its defaults (durable: acknowledged after its
//! timer-driven group sync), single node, over RESP3 with the `redis` crate (event ids are left to
//! the server: they must embed the partition hash). `EAPPEND` with
//! `EXPECTED_VERSION`, `EMAPPEND` for a batch (one transaction), `ESCAN` for stream reads. Events
//! are ordered per partition (32), not globally, so the catch-up row is n/a; live subscriptions
//! (`ESUB`, RESP3 push) are not driven here.

use std::path::Path;
use std::process::{Child, Command};

use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::Value;

use super::{Driver, Subscriber};
use crate::gen::{self, BoxFut, Op};

/// SierraDB's namespace of default partition keys (`sierradb::id::NAMESPACE_PARTITION_KEY`).
const NAMESPACE_PARTITION_KEY: uuid::Uuid = uuid::Uuid::from_u128(0x219bd637_e279_53e9_9e2b_eabe5d9120cc);

pub struct Sierra {
    child: Child,
    url: String,
    payload: Bytes,
}

pub async fn start(dir: &Path) -> Result<Box<dyn Driver>, String> {
    let port = super::free_port()?;
    let bin = super::umadb::which("sierradb")?;
    let config = dir.join("sierra.toml");
    std::fs::write(
        &config,
        format!(
            "dir = \"{}\"\n\n[network]\nclient_address = \"127.0.0.1:{port}\"\ncluster_enabled = false\ncluster_address = \"/ip4/127.0.0.1/tcp/0\"\nmdns = false\n",
            dir.join("data").display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut child = super::spawn(Command::new(bin).arg("--config").arg(&config), dir)?;
    if let Err(e) = super::wait_port(port, &mut child).await {
        super::stop_child(&mut child);
        return Err(format!("{e}: {}", super::log_tail(dir)));
    }
    let url = format!("redis://127.0.0.1:{port}/?protocol=resp3");
    // The server opens its port before its partitions are ready: wait for an append to work.
    let mut conn = match super::redis::connect(&url).await {
        Ok(c) => c,
        Err(e) => {
            super::stop_child(&mut child);
            return Err(e);
        }
    };
    let start = std::time::Instant::now();
    for attempt in 0u32.. {
        let r: Result<Value, _> = redis::cmd("EAPPEND")
            .arg(format!("ready-probe-{attempt}"))
            .arg("probe")
            .arg("EXPECTED_VERSION")
            .arg("empty")
            .arg("PAYLOAD")
            .arg("{}")
            .query_async(&mut conn)
            .await;
        match r {
            Ok(_) => break,
            Err(e) if start.elapsed().as_secs() > 60 => {
                super::stop_child(&mut child);
                return Err(format!("not ready after 60 s: {e}"));
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
    Ok(Box::new(Sierra { child, url, payload: gen::payload(1024) }))
}

fn version_arg(v: i64) -> String {
    if v < 0 {
        "empty".into()
    } else {
        v.to_string()
    }
}

struct Append {
    conn: MultiplexedConnection,
    streams: Vec<String>,
    versions: Vec<i64>,
    batch: usize,
    payload: Bytes,
    rng: gen::Rng,
}

impl Op for Append {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let k = self.rng.pick(self.streams.len());
            let s = &self.streams[k];
            let v = self.versions[k];
            if self.batch == 1 {
                let _: Value = redis::cmd("EAPPEND")
                    .arg(s)
                    .arg("bench")
                    .arg("EXPECTED_VERSION")
                    .arg(version_arg(v))
                    .arg("PAYLOAD")
                    .arg(&self.payload[..])
                    .query_async(&mut self.conn)
                    .await
                    .map_err(|e| format!("EAPPEND: {e}"))?;
            } else {
                let mut c = redis::cmd("EMAPPEND");
                // The partition EAPPEND and ESCAN pick for the stream by default.
                c.arg(uuid::Uuid::new_v5(&NAMESPACE_PARTITION_KEY, s.as_bytes()).to_string());
                for i in 0..self.batch as i64 {
                    c.arg(s)
                        .arg("bench")
                        .arg("EXPECTED_VERSION")
                        .arg(version_arg(v + i))
                        .arg("PAYLOAD")
                        .arg(&self.payload[..]);
                }
                let _: Value = c.query_async(&mut self.conn).await.map_err(|e| format!("EMAPPEND: {e}"))?;
            }
            self.versions[k] += self.batch as i64;
            Ok(self.batch as u64)
        })
    }
}

/// Events of an ESCAN reply (`{has_more, events}`) and `has_more`.
fn scan_reply(v: &Value) -> (usize, bool) {
    let Value::Map(m) = v else { return (0, false) };
    let mut n = 0;
    let mut more = false;
    for (k, val) in m {
        let key = match k {
            Value::SimpleString(s) => s.as_str(),
            Value::BulkString(b) => std::str::from_utf8(b).unwrap_or(""),
            _ => "",
        };
        match (key, val) {
            ("events", Value::Array(a)) => n = a.len(),
            ("has_more", Value::Boolean(b)) => more = *b,
            _ => {}
        }
    }
    (n, more)
}

struct Scan {
    conn: MultiplexedConnection,
    stream: String,
    next: u64,
    page: usize,
}

impl Op for Scan {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let v: Value = redis::cmd("ESCAN")
                .arg(&self.stream)
                .arg(self.next)
                .arg("+")
                .arg("COUNT")
                .arg(self.page)
                .query_async(&mut self.conn)
                .await
                .map_err(|e| format!("ESCAN: {e}"))?;
            let (n, more) = scan_reply(&v);
            self.next = if more && n > 0 { self.next + n as u64 } else { 0 };
            Ok(n as u64)
        })
    }
}

impl Driver for Sierra {
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
                    conn: super::redis::connect(&self.url).await?,
                    streams: gen::own_streams(prefix, c, streams_each),
                    versions: vec![-1; streams_each],
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
            let mut done = 0;
            let mut a = Append {
                conn: super::redis::connect(&self.url).await?,
                streams: vec![stream.to_owned()],
                versions: vec![-1],
                batch: 100,
                payload: self.payload.clone(),
                rng: gen::Rng(1),
            };
            while done < n {
                done += a.call().await?;
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
            Ok(Box::new(Scan {
                conn: super::redis::connect(&self.url).await?,
                stream: stream.into(),
                next: 0,
                page,
            }) as Box<dyn Op>)
        })
    }
    fn all_read(&self, _page: usize) -> BoxFut<'_, Result<Option<Box<dyn Op>>, String>> {
        Box::pin(async { Ok(None) })
    }
    fn subscribe<'a>(&'a self, _stream: &'a str) -> BoxFut<'a, Result<Option<Box<dyn Subscriber>>, String>> {
        Box::pin(async { Ok(None) })
    }
    fn stop(&mut self) {
        super::stop_child(&mut self.child);
    }
}
