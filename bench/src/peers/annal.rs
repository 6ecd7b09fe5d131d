//! Annal over its HTTP API, as a separate process (this binary's `node` mode: the same node as
//! `annal`, default settings, so durable), so its CPU and memory are measured apart from the
//! load generator.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};

use bytes::Bytes;

use super::{CommitCounts, Driver, Subscriber};
use crate::gen::{self, BoxFut, Op};
use crate::http::{self, Client};

pub struct Annal {
    addr: SocketAddr,
    child: Child,
    payload: Bytes,
}

pub async fn start(dir: &Path) -> Result<Box<dyn Driver>, String> {
    let port = super::free_port()?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = super::spawn(
        Command::new(exe).arg("node").arg("--dir").arg(dir.join("data")).arg("--port").arg(port.to_string()),
        dir,
    )?;
    if let Err(e) = super::wait_port(port, &mut child).await {
        super::stop_child(&mut child);
        return Err(format!("{e}: {}", super::log_tail(dir)));
    }
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    // The default users are created before the first request is served.
    let mut c = Client::connect(addr).await?;
    c.request(::http::Method::GET, "/ping", &[], Bytes::new()).await?;
    Ok(Box::new(Annal { addr, child, payload: gen::payload(1024) }))
}

struct AllOp {
    client: Client,
    pos: String,
    page: usize,
}

const START: &str = "00000000000000000000000000000000";

impl Op for AllOp {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let (n, next) = self.client.read_all_forward(&self.pos, self.page).await?;
            self.pos = next.unwrap_or_else(|| START.into());
            Ok(n as u64)
        })
    }
}

struct LongPoll {
    client: Client,
    stream: String,
    next: i64,
}

impl Subscriber for LongPoll {
    fn next(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let (n, _) =
                self.client.read_forward(&self.stream, self.next, 100, Some(5)).await.or_else(|e| {
                    // Before the writer's first event the stream does not exist yet.
                    if e.contains(": 404 ") {
                        Ok((0, Bytes::new()))
                    } else {
                        Err(e)
                    }
                })?;
            self.next += n as i64;
            Ok(n as u64)
        })
    }
}

impl Driver for Annal {
    fn server_pid(&self) -> u32 {
        self.child.id()
    }
    fn commit_counts(&self) -> BoxFut<'_, Option<CommitCounts>> {
        Box::pin(async move {
            let mut c = Client::connect(self.addr).await.ok()?;
            let r = c.request(::http::Method::GET, "/stats/es", &[], Bytes::new()).await.ok()?;
            let es: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
            let w = &es["writer"];
            let ms = |k: &str| w[k].as_f64();
            Some(CommitCounts {
                writes: es["queue"]["storageWriterQueue"]["totalItemsProcessed"].as_u64()?,
                groups: w["totalFlushes"].as_u64()?,
                fsyncs: w["fsyncs"].as_u64()?,
                phase_ms: [
                    ms("totalStageMs")?,
                    ms("totalDataSyncMs")?,
                    ms("totalCheckpointSyncMs")?,
                    ms("totalPublishMs")?,
                ],
                span_s: 0.0,
            })
        })
    }
    fn append_ops<'a>(
        &'a self,
        prefix: &'a str,
        conns: usize,
        streams_each: usize,
        batch: usize,
    ) -> BoxFut<'a, Result<Vec<Box<dyn Op>>, String>> {
        Box::pin(http::append_ops(self.addr, prefix, conns, streams_each, batch, &self.payload))
    }
    fn preload<'a>(&'a self, stream: &'a str, n: u64) -> BoxFut<'a, Result<(), String>> {
        Box::pin(http::preload(self.addr, stream, n, &self.payload))
    }
    fn stream_read<'a>(
        &'a self,
        stream: &'a str,
        len: u64,
        page: usize,
    ) -> BoxFut<'a, Result<Box<dyn Op>, String>> {
        Box::pin(async move {
            Ok(Box::new(http::FeedOp {
                client: Client::connect(self.addr).await?,
                stream: stream.to_owned(),
                len: len as i64,
                count: page,
                rng: gen::Rng(1),
                sequential: true,
                next: 0,
            }) as Box<dyn Op>)
        })
    }
    fn all_read(&self, page: usize) -> BoxFut<'_, Result<Option<Box<dyn Op>>, String>> {
        Box::pin(async move {
            let client = Client::connect(self.addr).await?;
            Ok(Some(Box::new(AllOp { client, pos: START.into(), page }) as Box<dyn Op>))
        })
    }
    fn subscribe<'a>(&'a self, stream: &'a str) -> BoxFut<'a, Result<Option<Box<dyn Subscriber>>, String>> {
        Box::pin(async move {
            let client = Client::connect(self.addr).await?;
            Ok(Some(Box::new(LongPoll { client, stream: stream.to_owned(), next: 0 }) as Box<dyn Subscriber>))
        })
    }
    fn competing<'a>(
        &'a self,
        stream: &'a str,
        len: u64,
        consumers: usize,
        _page: usize,
    ) -> BoxFut<'a, Result<Option<Vec<u32>>, String>> {
        // Pages of 100: the most one poll takes (`annal::subscriptions::POLL_COUNT_MAX`).
        Box::pin(async move {
            crate::subs::competing(self.addr, stream, &format!("peers{consumers}"), consumers, len)
                .await
                .map(Some)
        })
    }
    fn redelivery<'a>(
        &'a self,
        stream: &'a str,
        samples: usize,
    ) -> BoxFut<'a, Result<Option<Vec<u32>>, String>> {
        Box::pin(async move {
            let mut c = Client::connect(self.addr).await?;
            crate::subs::redeliveries(&mut c, stream, "peers-nack", samples).await.map(Some)
        })
    }
    fn stop(&mut self) {
        super::stop_child(&mut self.child);
    }
}
