//! PostgreSQL (Debian package) with a message store written here in the style of Message DB: one
//! `messages` table (global position, stream name, position in the stream, type, JSON data), a
//! write function that takes a per-stream advisory lock, checks the expected version against the
//! stream's current position and inserts (one round trip per append; a batch is one call with
//! arrays, one transaction), reads by stream and by global position. `synchronous_commit=on` and
//! `fsync=on`: a commit is acknowledged after the WAL is flushed.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;

use bytes::Bytes;
use tokio_postgres::{AsyncMessage, Client, NoTls, Statement};

use super::{Driver, Subscriber};
use crate::gen::{self, BoxFut, Op};

const SCHEMA: &str = r#"
CREATE TABLE messages (
  global_position bigserial PRIMARY KEY,
  position bigint NOT NULL,
  time timestamp without time zone NOT NULL DEFAULT (now() AT TIME ZONE 'utc'),
  stream_name text NOT NULL,
  type text NOT NULL,
  data jsonb,
  metadata jsonb,
  id uuid NOT NULL UNIQUE
);
CREATE UNIQUE INDEX messages_stream ON messages (stream_name, position);

CREATE FUNCTION write_message(_id text, _stream text, _type text, _data text, _expected bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  _pos bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(_stream, 0));
  SELECT max(position) INTO _pos FROM messages WHERE stream_name = _stream;
  _pos := coalesce(_pos, -1);
  IF _expected IS NOT NULL AND _expected <> _pos THEN
    RAISE EXCEPTION 'Wrong expected version: % (Stream: %, Stream Version: %)', _expected, _stream, _pos;
  END IF;
  _pos := _pos + 1;
  INSERT INTO messages (id, stream_name, position, type, data)
    VALUES (_id::uuid, _stream, _pos, _type, _data::jsonb);
  RETURN _pos;
END $$;

CREATE FUNCTION write_messages(_stream text, _expected bigint, _ids text[], _type text, _data text[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  _pos bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(_stream, 0));
  SELECT max(position) INTO _pos FROM messages WHERE stream_name = _stream;
  _pos := coalesce(_pos, -1);
  IF _expected IS NOT NULL AND _expected <> _pos THEN
    RAISE EXCEPTION 'Wrong expected version: % (Stream: %, Stream Version: %)', _expected, _stream, _pos;
  END IF;
  INSERT INTO messages (id, stream_name, position, type, data)
    SELECT i::uuid, _stream, _pos + o, _type, d::jsonb
    FROM unnest(_ids, _data) WITH ORDINALITY AS t(i, d, o);
  RETURN _pos + coalesce(array_length(_ids, 1), 0);
END $$;
"#;

const NOTIFY: &str = r#"
CREATE FUNCTION notify_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('messages', NEW.stream_name);
  RETURN NEW;
END $$;
CREATE TRIGGER messages_notify AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION notify_message();
"#;

pub struct Postgres {
    child: Child,
    pgdata: std::path::PathBuf,
    bin: std::path::PathBuf,
    conninfo: String,
    payload: Bytes,
    peak_pss: std::sync::atomic::AtomicU64,
}

/// The newest `/usr/lib/postgresql/<v>/bin`.
fn pg_bin() -> Result<std::path::PathBuf, String> {
    let mut versions: Vec<u32> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("/usr/lib/postgresql: {e}"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    versions.sort_unstable();
    let v = versions.last().ok_or("no PostgreSQL version under /usr/lib/postgresql")?;
    Ok(format!("/usr/lib/postgresql/{v}/bin").into())
}

fn as_postgres(bin: &Path, tool: &str) -> Command {
    let mut c = Command::new("runuser");
    c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
    c
}

pub async fn start(dir: &Path) -> Result<Box<dyn Driver>, String> {
    let bin = pg_bin()?;
    let pgdata = dir.join("pgdata");
    let sock = dir.join("sock");
    std::fs::create_dir_all(&sock).map_err(|e| e.to_string())?;
    let chown = Command::new("chown")
        .arg("-R")
        .arg("postgres:postgres")
        .arg(dir)
        .status()
        .map_err(|e| e.to_string())?;
    if !chown.success() {
        return Err("chown to postgres failed".into());
    }
    let out = as_postgres(&bin, "initdb")
        .arg("-D")
        .arg(&pgdata)
        .args(["--auth=trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
        ));
    }
    let port = super::free_port()?;
    let mut cmd = as_postgres(&bin, "postgres");
    cmd.arg("-D").arg(&pgdata).args(["-p", &port.to_string(), "-k"]).arg(&sock);
    for (k, v) in [
        ("listen_addresses", "127.0.0.1"),
        ("fsync", "on"),
        ("synchronous_commit", "on"),
        ("wal_sync_method", "fdatasync"),
        ("full_page_writes", "on"),
        ("shared_buffers", "1GB"),
        ("max_connections", "200"),
        ("wal_level", "minimal"),
        ("max_wal_senders", "0"),
        ("min_wal_size", "1GB"),
        ("max_wal_size", "8GB"),
        ("checkpoint_timeout", "30min"),
    ] {
        cmd.arg("-c").arg(format!("{k}={v}"));
    }
    let mut child = super::spawn(&mut cmd, dir)?;
    if let Err(e) = super::wait_port(port, &mut child).await {
        super::stop_child(&mut child);
        return Err(format!("{e}: {}", super::log_tail(dir)));
    }
    let conninfo = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
    let pg =
        Postgres { child, pgdata, bin, conninfo, payload: gen::payload(1024), peak_pss: Default::default() };
    let setup = async {
        let (c, _) = pg.connect().await?;
        c.batch_execute(SCHEMA).await.map_err(|e| format!("schema: {e}"))
    };
    match setup.await {
        Ok(()) => Ok(Box::new(pg)),
        Err(e) => {
            let mut pg = pg;
            pg.stop();
            Err(e)
        }
    }
}

impl Postgres {
    async fn connect(&self) -> Result<(Client, tokio::sync::mpsc::UnboundedReceiver<String>), String> {
        // Wait for the server to accept queries (it opens its port before recovery ends).
        let mut tries = 0;
        let (client, mut conn) = loop {
            match tokio_postgres::connect(&self.conninfo, NoTls).await {
                Ok(x) => break x,
                Err(e) if tries < 100 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e.to_string()),
            }
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(m) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                match m {
                    Ok(AsyncMessage::Notification(n)) => {
                        let _ = tx.send(n.payload().to_owned());
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        Ok((client, rx))
    }

    fn sample_pss(&self) {
        let total: u64 = gen::process_tree(self.child.id()).iter().map(|p| pss(*p)).sum();
        self.peak_pss.fetch_max(total, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Proportional set size of a process (shared buffers split among the processes mapping them).
fn pss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Pss:"))?.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

struct Append {
    client: Arc<Client>,
    one: Statement,
    many: Statement,
    streams: Vec<String>,
    versions: Vec<i64>,
    batch: usize,
    conn: u64,
    seq: u64,
    payload: String,
    rng: gen::Rng,
}

impl Op for Append {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let k = self.rng.pick(self.streams.len());
            let s = &self.streams[k];
            let v = self.versions[k];
            if self.batch == 1 {
                let id = gen::uuid_for(self.conn, self.seq);
                self.client
                    .query_one(&self.one, &[&id, s, &"bench", &self.payload, &v])
                    .await
                    .map_err(|e| format!("write_message: {e}"))?;
            } else {
                let ids: Vec<String> =
                    (0..self.batch as u64).map(|i| gen::uuid_for(self.conn, self.seq + i)).collect();
                let data: Vec<&str> = vec![self.payload.as_str(); self.batch];
                self.client
                    .query_one(&self.many, &[s, &v, &ids, &"bench", &data])
                    .await
                    .map_err(|e| format!("write_messages: {e}"))?;
            }
            self.seq += self.batch as u64;
            self.versions[k] += self.batch as i64;
            Ok(self.batch as u64)
        })
    }
}

struct StreamRead {
    client: Client,
    stmt: Statement,
    stream: String,
    next: i64,
    page: i64,
}

impl Op for StreamRead {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let rows = self
                .client
                .query(&self.stmt, &[&self.stream, &self.next, &self.page])
                .await
                .map_err(|e| e.to_string())?;
            let n = rows.len() as i64;
            let mut bytes = 0;
            for r in &rows {
                let d: &str = r.get(1);
                bytes += d.len();
            }
            std::hint::black_box(bytes);
            self.next = if n < self.page { 0 } else { self.next + n };
            Ok(n as u64)
        })
    }
}

struct AllRead {
    client: Client,
    stmt: Statement,
    after: i64,
    page: i64,
}

impl Op for AllRead {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let rows =
                self.client.query(&self.stmt, &[&self.after, &self.page]).await.map_err(|e| e.to_string())?;
            let n = rows.len() as i64;
            let last: Option<i64> = rows.last().map(|r| r.get(0));
            for r in &rows {
                let d: &str = r.get(4);
                std::hint::black_box(d.len());
            }
            self.after = if n < self.page { 0 } else { last.unwrap_or(0) };
            Ok(n as u64)
        })
    }
}

struct Listen {
    client: Client,
    notes: tokio::sync::mpsc::UnboundedReceiver<String>,
    stmt: Statement,
    stream: String,
    next: i64,
}

impl Subscriber for Listen {
    fn next(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            // Wait for a notification naming the stream (or 1 s), then read what is new.
            let wait = tokio::time::timeout(std::time::Duration::from_secs(1), async {
                while let Some(s) = self.notes.recv().await {
                    if s == self.stream {
                        break;
                    }
                }
            });
            let _ = wait.await;
            while self.notes.try_recv().is_ok() {}
            let rows = self
                .client
                .query(&self.stmt, &[&self.stream, &self.next, &1000i64])
                .await
                .map_err(|e| e.to_string())?;
            self.next += rows.len() as i64;
            Ok(rows.len() as u64)
        })
    }
}

const READ_STREAM: &str =
    "SELECT position, data::text FROM messages WHERE stream_name = $1 AND position >= $2 ORDER BY position LIMIT $3";
const READ_ALL: &str = "SELECT global_position, stream_name, position, type, data::text FROM messages \
     WHERE global_position > $1 ORDER BY global_position LIMIT $2";

impl Driver for Postgres {
    fn server_pid(&self) -> u32 {
        self.child.id()
    }
    fn cpu_secs(&self) -> f64 {
        self.sample_pss();
        gen::cpu_secs_of(&gen::process_tree(self.child.id()))
    }
    fn peak_rss(&self) -> u64 {
        self.sample_pss();
        self.peak_pss.load(std::sync::atomic::Ordering::Relaxed)
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
            let payload = String::from_utf8_lossy(&self.payload).into_owned();
            for c in 0..conns {
                let (client, _) = self.connect().await?;
                let one = client
                    .prepare("SELECT write_message($1, $2, $3, $4, $5)")
                    .await
                    .map_err(|e| e.to_string())?;
                let many = client
                    .prepare("SELECT write_messages($1, $2, $3, $4, $5)")
                    .await
                    .map_err(|e| e.to_string())?;
                ops.push(Box::new(Append {
                    client: Arc::new(client),
                    one,
                    many,
                    streams: gen::own_streams(prefix, c, streams_each),
                    versions: vec![-1; streams_each],
                    batch,
                    conn: crate::http::unique(),
                    seq: 0,
                    payload: payload.clone(),
                    rng: gen::Rng(0x5EED + c as u64),
                }));
            }
            Ok(ops)
        })
    }
    fn preload<'a>(&'a self, stream: &'a str, n: u64) -> BoxFut<'a, Result<(), String>> {
        Box::pin(async move {
            let (client, _) = self.connect().await?;
            let many = client
                .prepare("SELECT write_messages($1, $2, $3, $4, $5)")
                .await
                .map_err(|e| e.to_string())?;
            let payload = String::from_utf8_lossy(&self.payload).into_owned();
            let id = crate::http::unique();
            let mut done = 0u64;
            while done < n {
                let k = (n - done).min(1000);
                let ids: Vec<String> = (0..k).map(|i| gen::uuid_for(id, done + i)).collect();
                let data: Vec<&str> = vec![payload.as_str(); k as usize];
                let v = done as i64 - 1;
                client
                    .query_one(&many, &[&stream, &v, &ids, &"bench", &data])
                    .await
                    .map_err(|e| e.to_string())?;
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
            let (client, _) = self.connect().await?;
            let stmt = client.prepare(READ_STREAM).await.map_err(|e| e.to_string())?;
            Ok(Box::new(StreamRead { client, stmt, stream: stream.into(), next: 0, page: page as i64 })
                as Box<dyn Op>)
        })
    }
    fn all_read(&self, page: usize) -> BoxFut<'_, Result<Option<Box<dyn Op>>, String>> {
        Box::pin(async move {
            let (client, _) = self.connect().await?;
            let stmt = client.prepare(READ_ALL).await.map_err(|e| e.to_string())?;
            Ok(Some(Box::new(AllRead { client, stmt, after: 0, page: page as i64 }) as Box<dyn Op>))
        })
    }
    fn subscribe<'a>(&'a self, stream: &'a str) -> BoxFut<'a, Result<Option<Box<dyn Subscriber>>, String>> {
        Box::pin(async move {
            let (client, notes) = self.connect().await?;
            // The trigger exists only for this (last) workload, so it costs the others nothing.
            client.batch_execute(NOTIFY).await.map_err(|e| format!("trigger: {e}"))?;
            client.batch_execute("LISTEN messages").await.map_err(|e| e.to_string())?;
            let stmt = client.prepare(READ_STREAM).await.map_err(|e| e.to_string())?;
            Ok(Some(Box::new(Listen { client, notes, stmt, stream: stream.into(), next: 0 })
                as Box<dyn Subscriber>))
        })
    }
    fn stop(&mut self) {
        let _ = as_postgres(&self.bin, "pg_ctl")
            .arg("-D")
            .arg(&self.pgdata)
            .args(["stop", "-m", "fast", "-w"])
            .output();
        super::stop_child(&mut self.child);
    }
}
