//! The cluster: several nodes replicating one log, with elections and quorum writes.
//!
//! [`core`] holds every decision (membership, elections, replication, commit) as a synchronous
//! state machine free of I/O; the same code runs in the node, in the simulator and under the
//! model checker. [`wire`] frames the messages between nodes (length, checksum). [`shell`]
//! runs a core against the store and the `Env` network: it carries out the core's effects
//! (persisting `proposal.chk`, writing epoch records and the leader's records, truncating a
//! divergent tail, shipping records, publishing what is committed) and feeds it messages,
//! timer ticks and the log's progress. [`discovery`] resolves the names a node is reached by
//! and, with DNS discovery, the members' name.
//!
//! A single node (cluster size 1, not a replica) runs none of this: it is its own leader.

pub mod core;
pub mod discovery;
pub mod replica;
pub mod shell;
pub mod wire;

pub use self::core::{
    Core, Effect, Envelope, Epoch, Input, MemberView, Msg, NodeId, Persisted, Settings, VNodeState,
};
