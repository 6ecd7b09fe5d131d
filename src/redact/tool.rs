//! `annal redact --db PATH --events N@stream,...`: the client side of redaction.
//!
//! Order: parse every event; ask the node where each lies (an event that does not exist, or
//! lies in the active chunk, stops the run before anything changed); then for each affected chunk
//! copy it to `<chunk>.tmp` in `db/`, redact the events in the copy, sync it, and ask the node to
//! switch it in. A refused switch removes the copy.
//!
//! Exit codes: 0 done, 1 refused or failed, 2 a bad command line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{Position, Reply, Request, SOCKET};
use crate::env::{Env, OpenMode};
use crate::log::chunk::{ChunkHeader, HEADER_SIZE};

const HELP: &str = "\
Usage: annal redact --db PATH --events N@STREAM[,N@STREAM...]

Blanks the data of the named events (each data byte becomes 0xFF, the length and every other
field stay) in a running node started with --enable-unix-socket, through the socket in PATH.
Run it on every node of a cluster: each redacts its own copy. The active chunk cannot be
redacted.
";

/// Why a redaction failed.
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    /// A bad command line.
    #[error("{0}")]
    Usage(String),
    /// The node refused, or an event is not there.
    #[error("{0}")]
    Refused(String),
    /// I/O with the node or the files.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Parses `N@stream,...`.
pub fn parse_events(s: &str) -> Result<Vec<(i64, String)>, RedactError> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (n, stream) =
            item.split_once('@').ok_or_else(|| RedactError::Usage(format!("{item:?} is not N@stream")))?;
        let n: i64 = n
            .parse()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| RedactError::Usage(format!("{item:?}: {n:?} is not an event number")))?;
        if stream.is_empty() || stream.contains('@') {
            return Err(RedactError::Usage(format!(
                "{item:?}: stream names that are empty or hold '@' cannot be named here"
            )));
        }
        out.push((n, stream.to_string()));
    }
    if out.is_empty() {
        return Err(RedactError::Usage("--events names no event".into()));
    }
    Ok(out)
}

/// Runs `annal redact` with `args` (after the command's name).
pub fn main(args: &[String]) -> ExitCode {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("annal: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(RedactError::Usage(m)) => {
            eprintln!("annal: {m}\n\n{HELP}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("annal: {e}");
            ExitCode::FAILURE
        }
    }
}

/// An event as the command line names it: number and stream.
type Named = (i64, String);

struct Conn {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<Box<dyn crate::env::Conn>>>>,
    w: tokio::io::WriteHalf<Box<dyn crate::env::Conn>>,
}

impl Conn {
    async fn ask(&mut self, req: &Request) -> Result<Reply, RedactError> {
        let io = |what: &str| {
            let what = what.to_string();
            move |source| RedactError::Io { what, source }
        };
        let text = format!("{}\n", serde_json::to_string(req).unwrap_or_default());
        if let Err(source) = self.w.write_all(text.as_bytes()).await {
            // A node that refuses the connection answers and closes without reading: its answer,
            // already on the way, says why better than the broken pipe.
            if let Ok(Some(line)) = self.lines.next_line().await {
                if let Ok(Reply::Error { message }) = serde_json::from_str(&line) {
                    return Err(RedactError::Refused(message));
                }
            }
            return Err(io("send to the node")(source));
        }
        let line = self
            .lines
            .next_line()
            .await
            .map_err(io("read from the node"))?
            .ok_or_else(|| RedactError::Refused("the node closed the socket".into()))?;
        let reply: Reply = serde_json::from_str(&line)
            .map_err(|e| RedactError::Refused(format!("the node sent an unexpected reply: {e}")))?;
        match reply {
            Reply::Error { message } => Err(RedactError::Refused(message)),
            r => Ok(r),
        }
    }
}

async fn run(args: &[String]) -> Result<(), RedactError> {
    let (mut db, mut events) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| RedactError::Usage(format!("{name} needs a value")))
        };
        match name {
            "--db" => db = Some(PathBuf::from(value()?)),
            "--events" => events = Some(value()?),
            _ => return Err(RedactError::Usage(format!("unknown argument {a}"))),
        }
    }
    let db = db.ok_or_else(|| RedactError::Usage("--db is required".into()))?;
    let events = parse_events(&events.ok_or_else(|| RedactError::Usage("--events is required".into()))?)?;
    let sock = db.join(SOCKET);
    let env = crate::env::real::env();
    let conn = env.net.connect_local(&sock).await.map_err(|source| RedactError::Io {
        what: format!("connect to {} (is the node running with --enable-unix-socket?)", sock.display()),
        source,
    })?;
    let (r, w) = tokio::io::split(conn);
    let mut conn = Conn { lines: BufReader::new(r).lines(), w };
    println!("Database: {}", db.display());
    let mut by_chunk: BTreeMap<String, Vec<(Position, Named)>> = BTreeMap::new();
    for (n, stream) in &events {
        let Reply::Positions { positions } =
            conn.ask(&Request::Positions { stream: stream.clone(), event_number: *n }).await?
        else {
            return Err(RedactError::Refused("the node sent an unexpected reply".into()));
        };
        if positions.is_empty() {
            return Err(RedactError::Refused(format!(
                "event {n}@{stream} does not exist (nothing was changed)"
            )));
        }
        for p in positions {
            if !p.complete {
                return Err(RedactError::Refused(format!(
                    "event {n}@{stream} is in the active chunk {}, which cannot be redacted (nothing was changed)",
                    p.file
                )));
            }
            by_chunk.entry(p.file.clone()).or_default().push((p, (*n, stream.clone())));
        }
    }
    println!("Event positions retrieved");
    for (file, evs) in by_chunk {
        let tmp = db.join(format!("{file}.tmp"));
        let positions: Vec<u64> = evs.iter().map(|(p, _)| p.log_position).collect();
        let r = redact_copy(&env, &db.join(&file), &tmp, &evs);
        let r = match r {
            Ok(()) => {
                conn.ask(&Request::Switch {
                    target: file.clone(),
                    candidate: format!("{file}.tmp"),
                    positions,
                })
                .await
            }
            Err(e) => Err(e),
        };
        match r {
            Ok(Reply::Switched { file: new }) => {
                println!("{new} redacted");
                for (_, (n, s)) in &evs {
                    println!("Event {n} in stream {s} redacted");
                }
            }
            Ok(_) => return Err(RedactError::Refused("the node sent an unexpected reply".into())),
            Err(e) => {
                let _ = env.disk.remove(&tmp);
                return Err(e);
            }
        }
    }
    println!("Redaction complete");
    Ok(())
}

/// Copies chunk `from` to `tmp` with the events at `evs` redacted, synced (the tool's step
/// before it asks for the switch).
pub fn redact_copy<T>(env: &Env, from: &Path, tmp: &Path, evs: &[(Position, T)]) -> Result<(), RedactError> {
    let io = |what: String| move |source| RedactError::Io { what, source };
    let mut bytes = env.read_file(from).map_err(io(format!("read {}", from.display())))?;
    let header =
        ChunkHeader::decode(&bytes).map_err(|d| RedactError::Refused(format!("{}: {d}", from.display())))?;
    let offsets: BTreeMap<u64, u64> =
        evs.iter().map(|(p, _)| (p.log_position, p.file_offset - HEADER_SIZE)).collect();
    let positions: Vec<u64> = offsets.keys().copied().collect();
    crate::log::redact_chunk_bytes(&mut bytes, header.chunk_size, &positions, |p| offsets.get(&p).copied())
        .map_err(|e| RedactError::Refused(e.to_string()))?;
    let f = env.disk.open(tmp, OpenMode::CreateTruncate).map_err(io(format!("create {}", tmp.display())))?;
    f.write_all_at(&bytes, 0).map_err(io(format!("write {}", tmp.display())))?;
    f.sync_data().map_err(io(format!("sync {}", tmp.display())))?;
    Ok(())
}
