//! UmaDB (`cargo install umadb`), its durable default, over gRPC with the `umadb-client` crate. A
//! stream is a tag; the expected-version check is UmaDB's append condition: fail if any event
//! with the stream's tag exists after the last position this connection wrote to that stream.
//! Batches of 100 are one atomic append. Reads: by tag (stream) and unfiltered (global order).

use std::path::Path;
use std::process::{Child, Command};

use bytes::Bytes;
use umadb_client::{AsyncUmaDbClient, UmaDbClient};
use umadb_dcb::{DcbAppendCondition, DcbEvent, DcbEventStoreAsync, DcbQuery, DcbQueryItem};

use super::{Driver, Subscriber};
use crate::gen::{self, BoxFut, Op};

pub struct Uma {
    child: Child,
    url: String,
    payload: Bytes,
}

pub async fn start(dir: &Path) -> Result<Box<dyn Driver>, String> {
    let port = super::free_port()?;
    let bin = which("umadb")?;
    let mut child = super::spawn(
        Command::new(bin)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--db-path")
            .arg(dir.join("uma.db")),
        dir,
    )?;
    if let Err(e) = super::wait_port(port, &mut child).await {
        super::stop_child(&mut child);
        return Err(format!("{e}: {}", super::log_tail(dir)));
    }
    Ok(Box::new(Uma { child, url: format!("http://127.0.0.1:{port}"), payload: gen::payload(1024) }))
}

/// A binary on `PATH` or in `~/.cargo/bin`.
pub fn which(name: &str) -> Result<std::path::PathBuf, String> {
    let home = std::env::var("HOME").unwrap_or_default();
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(std::iter::once(Path::new(&home).join(".cargo/bin")))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{name} not found"))
}

async fn connect(url: &str) -> Result<AsyncUmaDbClient, String> {
    UmaDbClient::new(url.to_owned()).connect_async().await.map_err(|e| e.to_string())
}

fn query(stream: &str) -> DcbQuery {
    DcbQuery::new().item(DcbQueryItem::new().tags([stream.to_owned()]))
}

fn event(stream: &str, conn: u64, seq: u64, payload: &Bytes) -> DcbEvent {
    DcbEvent::default()
        .event_type("bench")
        .tags([stream.to_owned()])
        .data(payload.to_vec())
        .uuid(uuid::Uuid::from_u64_pair(conn, seq))
}

struct Append {
    client: AsyncUmaDbClient,
    streams: Vec<String>,
    last: Vec<Option<u64>>,
    batch: usize,
    conn: u64,
    seq: u64,
    payload: Bytes,
    rng: gen::Rng,
}

impl Op for Append {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let k = self.rng.pick(self.streams.len());
            let s = &self.streams[k];
            let events: Vec<DcbEvent> =
                (0..self.batch as u64).map(|i| event(s, self.conn, self.seq + i, &self.payload)).collect();
            self.seq += self.batch as u64;
            let cond = DcbAppendCondition { fail_if_events_match: query(s), after: self.last[k] };
            let pos = self.client.append(events, Some(cond), None).await.map_err(|e| e.to_string())?;
            self.last[k] = Some(pos);
            Ok(self.batch as u64)
        })
    }
}

struct Read {
    client: AsyncUmaDbClient,
    stream: Option<String>,
    start: Option<u64>,
    page: u32,
}

impl Op for Read {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let q = self.stream.as_deref().map(query);
            let mut r =
                self.client.read(q, self.start, false, Some(self.page)).await.map_err(|e| e.to_string())?;
            let mut n = 0u64;
            let mut last = None;
            loop {
                let b = r.next_batch().await.map_err(|e| e.to_string())?;
                if b.is_empty() {
                    break;
                }
                for e in &b {
                    std::hint::black_box(e.event.data.len());
                    last = Some(e.position);
                }
                n += b.len() as u64;
            }
            self.start = match last {
                Some(p) if n == self.page as u64 => Some(p + 1),
                _ => None,
            };
            Ok(n)
        })
    }
}

struct Sub {
    _client: AsyncUmaDbClient,
    sub: Box<dyn umadb_dcb::DcbSubscriptionAsync + Send + 'static>,
}

impl Subscriber for Sub {
    fn next(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            match tokio::time::timeout(std::time::Duration::from_secs(1), self.sub.next_batch()).await {
                Ok(Ok(b)) => Ok(b.len() as u64),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Ok(0),
            }
        })
    }
}

impl Driver for Uma {
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
                    client: connect(&self.url).await?,
                    streams: gen::own_streams(prefix, c, streams_each),
                    last: vec![None; streams_each],
                    batch,
                    conn: crate::http::unique(),
                    seq: 0,
                    payload: self.payload.clone(),
                    rng: gen::Rng(0x5EED + c as u64),
                }));
            }
            Ok(ops)
        })
    }
    fn preload<'a>(&'a self, stream: &'a str, n: u64) -> BoxFut<'a, Result<(), String>> {
        Box::pin(async move {
            let client = connect(&self.url).await?;
            let id = crate::http::unique();
            let mut done = 0;
            while done < n {
                let k = (n - done).min(1000);
                let events: Vec<DcbEvent> =
                    (0..k).map(|i| event(stream, id, done + i, &self.payload)).collect();
                client.append(events, None, None).await.map_err(|e| e.to_string())?;
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
            let client = connect(&self.url).await?;
            Ok(Box::new(Read { client, stream: Some(stream.into()), start: None, page: page as u32 })
                as Box<dyn Op>)
        })
    }
    fn all_read(&self, page: usize) -> BoxFut<'_, Result<Option<Box<dyn Op>>, String>> {
        Box::pin(async move {
            let client = connect(&self.url).await?;
            Ok(Some(Box::new(Read { client, stream: None, start: None, page: page as u32 }) as Box<dyn Op>))
        })
    }
    fn subscribe<'a>(&'a self, stream: &'a str) -> BoxFut<'a, Result<Option<Box<dyn Subscriber>>, String>> {
        Box::pin(async move {
            let client = connect(&self.url).await?;
            let sub = client.subscribe(Some(query(stream)), None).await.map_err(|e| e.to_string())?;
            Ok(Some(Box::new(Sub { _client: client, sub }) as Box<dyn Subscriber>))
        })
    }
    fn stop(&mut self) {
        super::stop_child(&mut self.child);
    }
}
