//! Not an invariant: opening a database held as files (a restored backup, or what a power loss
//! would leave of a node's `db/`) in a fresh node on its own in-memory disk, and reading the
//! workload's streams from it, for [`super::backup`] and [`super::redaction`].

use std::path::PathBuf;
use std::sync::Arc;

use annal::config::Config;
use annal::env::mem::MemDisk;
use annal::env::Env;
use annal::node::Node;
use annal::store::ReadError;

use crate::workload::stream_name;

/// An environment whose disk holds `files` (each durable).
pub fn env_with(files: &[(PathBuf, Vec<u8>)]) -> Result<Env, String> {
    let disk = MemDisk::with_files(files).map_err(|e| format!("cannot lay out the files: {e}"))?;
    let (base, _, _) = annal::env::mem::env(1);
    Ok(Env::new(Arc::new(disk), base.clock.clone(), base.net.clone(), base.rt.clone(), 1))
}

/// One event as a fresh node serves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// Event number.
    pub number: i64,
    /// Event id.
    pub id: [u8; 16],
    /// Data.
    pub data: Vec<u8>,
    /// Whether it is marked redacted.
    pub redacted: bool,
    /// Log position.
    pub position: u64,
}

/// What a node serves of one stream: its events, or why none (`"no stream"`, `"deleted"`), or a
/// read that failed (`Err`).
pub type Stream = Result<Result<Vec<Served>, &'static str>, String>;

/// Runs `f` inside a runtime of its own (a node's background work may spawn tasks).
pub fn in_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Builder::new_current_thread().enable_time().build() {
        Ok(rt) => {
            let _guard = rt.enter();
            f()
        }
        Err(_) => f(),
    }
}

/// Opens a node on `env` with `config` (its `db/` and index at the simulated node's paths).
pub fn open(env: &Env, config: &Config) -> Result<Arc<Node>, String> {
    Node::open(env.clone(), config.clone()).map_err(|e| e.to_string())
}

/// Reads the workload's `streams` streams in full from `node`.
pub fn read_streams(node: &Node, streams: usize) -> Vec<(String, Stream)> {
    let store = node.store();
    let now = annal::env::Clock::wall_micros(&*node.env().clock);
    (0..streams)
        .map(|i| {
            let name = stream_name(i);
            let r = match store.read_forward(&name, 0, 1 << 20, false, now) {
                Ok(slice) => Ok(Ok(slice
                    .events
                    .into_iter()
                    .map(|e| {
                        let e = e.event;
                        Served {
                            number: e.event_number,
                            id: e.id,
                            data: e.data.to_vec(),
                            redacted: e.is_redacted,
                            position: e.position,
                        }
                    })
                    .collect())),
                Err(ReadError::NoStream) => Ok(Err("no stream")),
                Err(ReadError::StreamDeleted) => Ok(Err("deleted")),
                Err(e) => Err(format!("{e:?}")),
            };
            (name, r)
        })
        .collect()
}
