//! What a scavenge writes to the log that every node shares: its history (`$scavenges-{id}`,
//! linked from `$scavenges`) and new scavenge points (`$scavengePoints`).
//!
//! Each node scavenges its own copy of the log, but these records go through the normal write
//! path, so a cluster's leader writes them (as v5 does) and every node replicates them: a
//! follower's or a read-only replica's scavenge sends them to the leader ([`Leader`], which the
//! node provides), a leader or a single node writes them itself ([`SharedWrite::apply`]).
//!
//! Invariants: only these record kinds can be written this way (the type is closed and
//! [`SharedWrite::check`] refuses anything else: an unknown history event type, a scavenge id that
//! is not a UUID, a threshold below -1); a write that cannot reach a leader fails with
//! [`ScavengeError::NoLeader`], never silently.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::ScavengeError;
use crate::env::Env;
use crate::store::{NewEvent, Store, WriteOp, ANY};

/// The history event types a scavenge writes.
pub const HISTORY_TYPES: [&str; 5] = [
    "$scavengeStarted",
    "$scavengeChunksCompleted",
    "$scavengeMergeCompleted",
    "$scavengeIndexCompleted",
    "$scavengeCompleted",
];

/// The largest history event's data, in bytes.
pub const HISTORY_DATA_MAX_BYTES: usize = 16 << 10;

/// One shared write of a scavenge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum SharedWrite {
    /// A new `$scavengePoint` with this threshold.
    #[serde(rename_all = "camelCase")]
    Point {
        /// -1 all chunks, 0 any weight, >0 minimum weight.
        threshold: i64,
    },
    /// An event of `$scavenges-{scavenge_id}`, linked from `$scavenges` when `linked`.
    #[serde(rename_all = "camelCase")]
    History {
        /// The run's id (a UUID).
        scavenge_id: String,
        /// One of [`HISTORY_TYPES`].
        event_type: String,
        /// The event's JSON data.
        data: serde_json::Value,
        /// Whether `$scavenges` gets a link to it (start and completion only).
        linked: bool,
    },
}

/// What a shared write wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// The event's number in its stream.
    pub event_number: i64,
}

/// The credentials of the request that started the scavenge (its `Authorization` header), which a
/// follower presents to the leader for the run's shared writes.
pub type Credentials = Option<Bytes>;

/// A shared write in flight.
pub type Pending = Pin<Box<dyn Future<Output = Result<Written, ScavengeError>> + Send>>;

/// Where a node's shared writes go: the node decides per write (it may lead now and follow
/// later).
pub trait Leader: Send + Sync {
    /// Writes `w` on the leader (this node, when it leads) on behalf of `credentials`.
    fn write(&self, w: SharedWrite, credentials: Credentials) -> Pending;
}

impl SharedWrite {
    /// Refuses anything but what a scavenge writes.
    pub fn check(&self) -> Result<(), ScavengeError> {
        match self {
            SharedWrite::Point { threshold } if *threshold < -1 => {
                Err(ScavengeError::InvalidParameter("threshold must be -1 or more".into()))
            }
            SharedWrite::Point { .. } => Ok(()),
            SharedWrite::History { scavenge_id, event_type, data, .. } => {
                if uuid::Uuid::parse_str(scavenge_id).is_err() {
                    return Err(ScavengeError::InvalidParameter("scavengeId must be a UUID".into()));
                }
                if !HISTORY_TYPES.contains(&event_type.as_str()) {
                    return Err(ScavengeError::InvalidParameter(format!(
                        "eventType must be one of {}",
                        HISTORY_TYPES.join(", ")
                    )));
                }
                if !data.is_object() || data.to_string().len() > HISTORY_DATA_MAX_BYTES {
                    return Err(ScavengeError::InvalidParameter(format!(
                        "data must be a JSON object of at most {HISTORY_DATA_MAX_BYTES} bytes"
                    )));
                }
                Ok(())
            }
        }
    }

    /// Writes `self` to `store` (this node leads, or is a single node) and waits, without
    /// blocking its thread, until it is committed. History streams get their metadata (`$maxAge`
    /// of `history_max_age_days`, read by `$ops`) when they have none.
    pub async fn apply(
        &self,
        env: &Env,
        store: &Store,
        history_max_age_days: u64,
    ) -> Result<Written, ScavengeError> {
        self.check()?;
        match self {
            SharedWrite::Point { threshold } => {
                let w = store.write_async(WriteOp::ScavengePoint { threshold: *threshold }).await?;
                Ok(Written { event_number: w.first_event_number })
            }
            SharedWrite::History { scavenge_id, event_type, data, linked } => {
                let stream = format!("$scavenges-{scavenge_id}");
                let meta = Bytes::from(
                    serde_json::json!({"$maxAge": history_max_age_days * 86_400, "$acl": {"$r": "$ops"}})
                        .to_string(),
                );
                for st in [stream.as_str(), "$scavenges"] {
                    let metastream = format!("$${st}");
                    if store.stream_state(&metastream)?.last < 0 {
                        let ev = event(env, "$metadata", meta.clone(), true);
                        store.append_async(&metastream, ANY, vec![ev]).await?;
                    }
                }
                let ev = event(env, event_type, Bytes::from(data.to_string()), true);
                let w = store.append_async(&stream, ANY, vec![ev]).await?;
                if *linked {
                    let link = format!("{}@{stream}", w.first_event_number);
                    store
                        .append_async("$scavenges", ANY, vec![event(env, "$>", Bytes::from(link), false)])
                        .await?;
                }
                Ok(Written { event_number: w.first_event_number })
            }
        }
    }
}

fn event(env: &Env, event_type: &str, data: Bytes, is_json: bool) -> NewEvent {
    NewEvent {
        id: *env.new_uuid().as_bytes(),
        event_type: event_type.into(),
        data,
        metadata: Bytes::new(),
        is_json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_scavenge_writes_passes_the_check() {
        let id = "0b4f5a5e-6a7c-4d0e-9a3b-6a1f0c2d3e4f".to_string();
        let h = |ty: &str, data| SharedWrite::History {
            scavenge_id: id.clone(),
            event_type: ty.into(),
            data,
            linked: false,
        };
        assert!(h("$scavengeStarted", serde_json::json!({})).check().is_ok());
        assert!(h("$scavengeDeleted", serde_json::json!({})).check().is_err());
        assert!(h("$scavengeStarted", serde_json::json!([1])).check().is_err());
        let big = serde_json::json!({"x": "y".repeat(HISTORY_DATA_MAX_BYTES)});
        assert!(h("$scavengeStarted", big).check().is_err());
        let bad_id = SharedWrite::History {
            scavenge_id: "x/../y".into(),
            event_type: "$scavengeStarted".into(),
            data: serde_json::json!({}),
            linked: true,
        };
        assert!(bad_id.check().is_err());
        assert!(SharedWrite::Point { threshold: -1 }.check().is_ok());
        assert!(SharedWrite::Point { threshold: -2 }.check().is_err());
    }

    #[test]
    fn the_wire_form_is_tagged_json() {
        let w = SharedWrite::Point { threshold: 3 };
        let s = serde_json::to_string(&w).unwrap();
        assert_eq!(s, r#"{"kind":"point","threshold":3}"#);
        assert_eq!(serde_json::from_str::<SharedWrite>(&s).unwrap(), w);
        assert!(serde_json::from_str::<SharedWrite>(r#"{"kind":"append","stream":"x"}"#).is_err());
    }
}
