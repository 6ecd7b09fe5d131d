//! Redaction: blanking the data of single events in place, for a node that runs.
//!
//! With `--enable-unix-socket` the node listens on `annal.sock` in its `db/` directory
//! ([`server`]), a socket only processes of the node's own user may use (the file is mode 0600
//! and the node checks each peer's uid). `annal redact --db PATH --events N@stream,...`
//! ([`tool`]) asks the node for each event's chunk file and offset, copies each affected chunk to
//! a `.tmp` file in `db/`, overwrites the events' data with `0xFF` bytes of the same length (the
//! record's redacted flag set, its checksum and the footer's recomputed) and asks the node to
//! switch the chunk in. The node switches only a candidate identical to the redaction it computes
//! itself ([`crate::log::Log::switch_redacted`]), so the tool cannot change anything else.
//!
//! The protocol is one JSON object per line each way ([`Request`], [`Reply`]).
//!
//! Invariants: every lookup is done before anything changes, so bad input changes nothing; a
//! switch never runs while a scavenge runs; the active chunk is never redacted.

pub mod server;
pub mod tool;

use serde::{Deserialize, Serialize};

/// The socket's file name in `db/`.
pub const SOCKET: &str = "annal.sock";

/// A request to the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Where the records of event `event_number` of `stream` lie.
    Positions {
        /// Stream.
        stream: String,
        /// Event number.
        event_number: i64,
    },
    /// Switch `target` to `candidate` with the events at `positions` redacted.
    Switch {
        /// The chunk file in service.
        target: String,
        /// The redacted copy, a `.tmp` file in `db/`.
        candidate: String,
        /// Log positions of the redacted events.
        positions: Vec<u64>,
    },
}

/// Where one record of an event lies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// Log position.
    pub log_position: u64,
    /// Chunk file name.
    pub file: String,
    /// Offset of the record's frame in the file.
    pub file_offset: u64,
    /// Whether the chunk is complete.
    pub complete: bool,
}

/// The node's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Reply {
    /// The event's records (none: no such event).
    Positions {
        /// Records.
        positions: Vec<Position>,
    },
    /// The chunk was switched; the new file's name.
    Switched {
        /// New file.
        file: String,
    },
    /// Refused.
    Error {
        /// Why.
        message: String,
    },
}
