//! The history of a run: every client operation with its invocation and completion times
//! (simulated µs) and its outcome, plus the node restarts, which the checker needs because a
//! restart makes the node forget recently written event ids.
//!
//! Invariants: operations are recorded in invocation order (ids ascending); an outcome is
//! classified once, when the client gets its answer (or gives up), and never changes; a write
//! whose effect is unknown (timeout, dropped connection, server error) is [`Outcome::Unknown`],
//! never a failure.

use std::fmt;

/// An event as the workload sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ev {
    /// Event id.
    pub id: [u8; 16],
    /// Event type.
    pub ty: String,
    /// JSON data, as sent.
    pub data: String,
}

/// What a client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// `POST /streams/{s}` with `ES-ExpectedVersion`.
    Append {
        /// Expected version.
        expected: i64,
        /// The batch.
        events: Vec<Ev>,
        /// Index of the operation this one retries (same events, same expected version).
        retry_of: Option<usize>,
    },
    /// `DELETE /streams/{s}`.
    Delete {
        /// Expected version.
        expected: i64,
        /// `ES-HardDelete`.
        hard: bool,
    },
    /// `GET /streams/{s}/{from}/forward/{count}`.
    ReadForward {
        /// First event number.
        from: i64,
        /// Page size.
        count: usize,
    },
    /// `GET /streams/{s}/head/backward/{count}`.
    ReadBackward {
        /// Page size.
        count: usize,
    },
    /// The node restarted (recently written ids are forgotten); not a client operation.
    Restart,
}

impl OpKind {
    /// Whether the operation can change the stream.
    pub fn is_write(&self) -> bool {
        matches!(self, OpKind::Append { .. } | OpKind::Delete { .. })
    }
}

/// An event as a read returned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadEv {
    /// Event number.
    pub number: i64,
    /// Event id.
    pub id: [u8; 16],
    /// Data as returned (the JSON text).
    pub data: String,
}

/// What came back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not answered yet.
    Pending,
    /// The effect is unknown (timeout, dropped connection, server-side failure of a write).
    Unknown(String),
    /// The request was certainly not carried out (connection refused), or a read failed: nothing
    /// to check.
    Refused(String),
    /// 201: appended (the number of the first event, from `Location`).
    Appended {
        /// First event number.
        first: Option<i64>,
    },
    /// 400 `Wrong expected EventNumber` (`ES-CurrentVersion`, when sent).
    WrongVersion {
        /// The current version.
        current: Option<i64>,
    },
    /// 410.
    Deleted,
    /// 204 on a delete.
    DeleteDone,
    /// 200 on a read: the events in event-number order.
    Read {
        /// Events.
        events: Vec<ReadEv>,
    },
    /// 404 on a read.
    NoStream,
    /// Anything the workload never expects (a harness or protocol bug).
    Unexpected(String),
}

/// One operation.
#[derive(Clone, Debug)]
pub struct Op {
    /// Index in the history.
    pub id: usize,
    /// Client number (`usize::MAX` for the node's restarts).
    pub client: usize,
    /// Stream (empty for restarts).
    pub stream: String,
    /// What.
    pub kind: OpKind,
    /// Invocation time, µs of simulated time.
    pub invoke: u64,
    /// Completion time (µs), `u64::MAX` while pending or for unknown outcomes.
    pub complete: u64,
    /// The outcome.
    pub outcome: Outcome,
}

/// All operations of a run.
#[derive(Debug, Default)]
pub struct History {
    /// In invocation order.
    pub ops: Vec<Op>,
}

impl History {
    /// Records an invocation; returns its id.
    pub fn invoke(&mut self, client: usize, stream: &str, kind: OpKind, at: u64) -> usize {
        let id = self.ops.len();
        self.ops.push(Op {
            id,
            client,
            stream: stream.to_owned(),
            kind,
            invoke: at,
            complete: u64::MAX,
            outcome: Outcome::Pending,
        });
        id
    }

    /// Records the outcome of `id` at `at`.
    pub fn complete(&mut self, id: usize, outcome: Outcome, at: u64) {
        let op = &mut self.ops[id];
        op.complete = match outcome {
            Outcome::Unknown(_) | Outcome::Pending => u64::MAX,
            _ => at,
        };
        op.outcome = outcome;
    }

    /// Records a node restart at `at`.
    pub fn restart(&mut self, at: u64) {
        let id = self.ops.len();
        self.ops.push(Op {
            id,
            client: usize::MAX,
            stream: String::new(),
            kind: OpKind::Restart,
            invoke: at,
            complete: at,
            outcome: Outcome::DeleteDone,
        });
    }
}

/// Short hex of an event id (its first 4 bytes), for traces.
pub fn short_id(id: &[u8; 16]) -> String {
    id[..4].iter().map(|b| format!("{b:02x}")).collect()
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpKind::Append { expected, events, retry_of } => {
                let ids: Vec<String> = events.iter().map(|e| short_id(&e.id)).collect();
                write!(f, "append exp={expected} ids=[{}]", ids.join(","))?;
                if let Some(r) = retry_of {
                    write!(f, " retry-of=#{r}")?;
                }
                Ok(())
            }
            OpKind::Delete { expected, hard } => {
                write!(f, "{} exp={expected}", if *hard { "hard-delete" } else { "soft-delete" })
            }
            OpKind::ReadForward { from, count } => write!(f, "read-forward from={from} count={count}"),
            OpKind::ReadBackward { count } => write!(f, "read-backward count={count}"),
            OpKind::Restart => write!(f, "node restart"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pending => write!(f, "pending"),
            Outcome::Unknown(w) => write!(f, "unknown ({w})"),
            Outcome::Refused(w) => write!(f, "refused ({w})"),
            Outcome::Appended { first } => write!(f, "201 first={first:?}"),
            Outcome::WrongVersion { current } => write!(f, "400 wrong-version current={current:?}"),
            Outcome::Deleted => write!(f, "410 deleted"),
            Outcome::DeleteDone => write!(f, "204 deleted"),
            Outcome::Read { events } if events.len() <= 8 => {
                let evs: Vec<String> =
                    events.iter().map(|e| format!("{}:{}", e.number, short_id(&e.id))).collect();
                write!(f, "200 [{}]", evs.join(" "))
            }
            Outcome::Read { events } => {
                // Long reads: the range and a digest of every (number, id, data), so traces still
                // differ whenever the answers do.
                let mut h = std::collections::hash_map::DefaultHasher::new();
                for e in events {
                    std::hash::Hash::hash(&(e.number, e.id, &e.data), &mut h);
                }
                let (a, b) = (&events[0], &events[events.len() - 1]);
                write!(
                    f,
                    "200 [{}:{} .. {}:{}] {} events, digest {:016x}",
                    a.number,
                    short_id(&a.id),
                    b.number,
                    short_id(&b.id),
                    events.len(),
                    std::hash::Hasher::finish(&h)
                )
            }
            Outcome::NoStream => write!(f, "404 no stream"),
            Outcome::Unexpected(w) => write!(f, "UNEXPECTED {w}"),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = |us: u64| if us == u64::MAX { "∞".to_owned() } else { format!("{:.4}", us as f64 / 1e6) };
        write!(
            f,
            "#{} [{}..{}] c{} {} {} -> {}",
            self.id,
            t(self.invoke),
            t(self.complete),
            if self.client == usize::MAX { "-".to_owned() } else { self.client.to_string() },
            self.stream,
            self.kind,
            self.outcome
        )
    }
}
