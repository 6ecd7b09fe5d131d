//! The cluster's decisions, free of I/O: one [`Core`] per node, driven by [`Core::step`] with an
//! [`Input`] (a message, a timer tick, the local log's progress) and answering with [`Effect`]s the
//! shell carries out in order. The same code runs in the node, in the simulator and under the
//! model checker (`tests/cluster_model.rs`).
//!
//! The protocol follows Raft's rules in EventStoreDB's vocabulary:
//! - **Terms are epoch numbers.** A candidate takes the next number, persists it in
//!   `proposal.chk` ([`Effect::Persist`]) and asks for votes. A node grants at most one vote per
//!   number, persisted before the vote is sent, and only to a candidate whose log is at least as
//!   up to date as its own (last epoch number, then durable position); among equally up-to-date
//!   nodes a lower-priority candidate is refused by a higher-priority voter. A node that heard
//!   from a live leader within the election timeout refuses every vote (the leader's lease).
//! - **A leader writes an epoch record** at the end of its log as the first record of its term
//!   ([`Effect::WriteEpoch`]). Nothing is committed in its term before that record is held by a
//!   quorum; then everything before it is committed too, and the node is `Master`.
//! - **Replication** is a subscription: a follower sends its durable position and its epochs,
//!   newest first; the leader finds the newest epoch both logs share and answers the position
//!   where they part ([`Msg::Subscribed`]). The follower drops its tail past that point (never a
//!   committed record, never more than `max_truncation`) and the leader ships records from there
//!   ([`Effect::Ship`]). Followers acknowledge durable positions; the leader commits the highest
//!   position a quorum of voters holds durably ([`Effect::Commit`]) and tells the followers,
//!   which publish what they hold up to it.
//! - A leader that has not heard from a quorum within the election timeout steps down; a
//!   follower that has not heard from a leader within its (randomised) election timeout stands.
//!   A follower that the leader's heartbeats show behind, with nothing arriving for an election
//!   timeout (a shipment lost with its connection), subscribes again.
//! - A leader asked to resign ([`Input::Resign`]) is `ResigningLeader`: it takes no new requests,
//!   lets what it wrote commit (at most one election timeout), then tells the followers
//!   ([`Msg::Resign`]) and names its most up-to-date voter, which stands at once; the others
//!   drop the resigned leader's lease so they can vote for it.
//!
//! Invariants (checked by the model checker and the simulator): at most one leader per epoch
//! number; a committed position never moves back and every later leader's log holds the same
//! bytes up to it; a node never publishes past what a leader committed; a vote or candidacy is
//! persisted before any message that depends on it leaves.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// A node's identity in the cluster: its replication endpoint.
pub type NodeId = SocketAddr;

/// Epochs a follower sends per subscription request; older ones follow on demand.
pub const SUBSCRIBE_EPOCHS: usize = 32;
/// Bytes a leader ships to one follower beyond what it acknowledged.
pub const SHIP_WINDOW_BYTES: u64 = 8 << 20;
/// A follower within this many bytes of the leader's end is `Slave`, else `CatchingUp`.
pub const CATCHING_UP_BYTES: u64 = 1024;

/// One epoch record: the start of a leader's term in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Epoch {
    /// The term's number.
    pub number: u64,
    /// Unique per term and leader.
    pub id: [u8; 16],
    /// Where the record starts.
    pub position: u64,
}

/// A piece of a whole chunk shipped as one (the records a scavenged chunk kept, which cannot be
/// replayed one by one at the positions they left gaps between): the follower gathers the pieces
/// and puts the chunk in service with the last one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChunkPart {
    /// First chunk number the chunk covers.
    pub start: u32,
    /// Last chunk number it covers.
    pub end: u32,
    /// Whether this is the last piece.
    pub last: bool,
}

/// The node states clients see (`/gossip`, `/info`), with their v5 names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum VNodeState {
    /// Starting.
    Initializing,
    /// No leader known; an election may be running.
    Unknown,
    /// A leader is known; the subscription is not established yet.
    PreReplica,
    /// Subscribed, more than [`CATCHING_UP_BYTES`] behind the leader.
    CatchingUp,
    /// Subscribed and caught up: a follower.
    Slave,
    /// Elected; the term's epoch record is not yet held by a quorum.
    PreMaster,
    /// The leader.
    Master,
    /// A leader asked to resign: it takes no new requests, lets what it wrote commit, then
    /// hands over to the most up-to-date follower.
    ResigningLeader,
    /// A read-only replica that knows no leader.
    ReadOnlyLeaderless,
    /// A read-only replica subscribing to the leader.
    PreReadOnlyReplica,
    /// A subscribed read-only replica.
    ReadOnlyReplica,
    /// Stopping.
    ShuttingDown,
}

impl VNodeState {
    /// The name in `/gossip` (v5 spelling).
    pub fn name(self) -> &'static str {
        match self {
            VNodeState::Initializing => "Initializing",
            VNodeState::Unknown => "Unknown",
            VNodeState::PreReplica => "PreReplica",
            VNodeState::CatchingUp => "CatchingUp",
            VNodeState::Slave => "Slave",
            VNodeState::PreMaster => "PreMaster",
            VNodeState::Master => "Master",
            VNodeState::ResigningLeader => "ResigningLeader",
            VNodeState::ReadOnlyLeaderless => "ReadOnlyLeaderless",
            VNodeState::PreReadOnlyReplica => "PreReadOnlyReplica",
            VNodeState::ReadOnlyReplica => "ReadOnlyReplica",
            VNodeState::ShuttingDown => "ShuttingDown",
        }
    }
}

/// A message between nodes, with what every message carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Envelope {
    /// The sender.
    pub from: NodeId,
    /// The sender's configured cluster size (messages from a differently configured node are
    /// dropped).
    pub cluster_size: u32,
    /// The sender's term.
    pub term: u64,
    /// The message.
    pub msg: Msg,
}

/// One member as another sees it (the node's own entry travels in [`Msg::Gossip`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemberView {
    /// The node's instance id (new at each start).
    pub instance: [u8; 16],
    /// Its state.
    pub state: VNodeState,
    /// Its client HTTP endpoint.
    pub http: Option<SocketAddr>,
    /// The leader it follows (or is).
    pub leader: Option<NodeId>,
    /// Its durable position.
    pub durable: u64,
    /// Its committed position.
    pub committed: u64,
    /// Its last epoch.
    pub epoch: Option<Epoch>,
    /// Its priority.
    pub priority: i64,
    /// Whether it is a read-only replica.
    pub read_only: bool,
}

/// The messages of the protocol.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Msg {
    /// A candidate asks for a vote in the envelope's term.
    RequestVote {
        /// Number of the candidate's last epoch.
        last_epoch: Option<u64>,
        /// The candidate's durable position.
        durable: u64,
        /// The candidate's priority.
        priority: i64,
    },
    /// The answer to [`Msg::RequestVote`].
    Vote {
        /// Whether the vote is granted.
        granted: bool,
    },
    /// The leader's heartbeat, to every member.
    Heartbeat {
        /// The leader's durable position.
        leader_end: u64,
        /// The committed position.
        commit: u64,
        /// The leader's clock when it sent this (µs, monotonic), echoed in acknowledgements: the
        /// leader's lease runs from when it asked, not from when it heard back.
        lease: u64,
        /// Sent at once to tell a new commit, not on the heartbeat timer: no acknowledgement is
        /// asked (the lease is kept by the timer's heartbeats and by acknowledged shipments).
        #[serde(default)]
        notice: bool,
    },
    /// A follower asks to be fed from where its log and the leader's agree.
    Subscribe {
        /// Names this subscription in later messages.
        subscription: u64,
        /// The follower's durable position.
        durable: u64,
        /// The follower's epochs, newest first (at most [`SUBSCRIBE_EPOCHS`]).
        epochs: Vec<Epoch>,
        /// Whether `epochs` reaches the follower's first epoch.
        complete: bool,
        /// Whether the follower votes and counts toward a quorum (false: a read-only replica).
        promotable: bool,
    },
    /// The leader needs the follower's epochs older than `before`.
    OlderEpochs {
        /// The subscription.
        subscription: u64,
        /// Position of the oldest epoch the leader has seen.
        before: u64,
    },
    /// The leader feeds the subscription from `position`.
    Subscribed {
        /// The subscription.
        subscription: u64,
        /// Where the logs part: the follower drops everything past it.
        position: u64,
    },
    /// Records of the leader's log, exactly as stored, from `from` to `end`.
    Append {
        /// The subscription.
        subscription: u64,
        /// Position of the first record.
        from: u64,
        /// Position after the last record.
        end: u64,
        /// The records' frames (carried outside the JSON header by [`super::wire`]).
        #[serde(skip)]
        data: Bytes,
        /// The leader's durable position.
        leader_end: u64,
        /// The committed position.
        commit: u64,
        /// As in [`Msg::Heartbeat`]: the leader's clock when it shipped this.
        lease: u64,
        /// Set when the records are a piece of a whole chunk (`end` is then `from` until the
        /// last piece, whose `end` is the chunk's end).
        part: Option<ChunkPart>,
    },
    /// Who this node is and where it stands, to every member it knows, every gossip interval.
    Gossip(MemberView),
    /// The leader resigns: followers forget its lease at once, and `successor` (the most
    /// up-to-date follower) stands without waiting for its election timeout.
    Resign {
        /// Who should stand.
        successor: Option<NodeId>,
    },
    /// A follower's durable position.
    Ack {
        /// The subscription.
        subscription: u64,
        /// The follower's durable position.
        durable: u64,
        /// The `lease` of the last heartbeat the follower received (0: none yet).
        lease: u64,
    },
}

/// What a node is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Time passed (monotonic).
    Tick(Duration),
    /// A message arrived.
    Message(Envelope),
    /// The local log is durable up to `end`; `epochs` are the epoch records it wrote since the
    /// last report (a follower's, from the leader's records).
    Durable {
        /// The durable end.
        end: u64,
        /// New epoch records, oldest first.
        epochs: Vec<Epoch>,
    },
    /// A leader's own groups are durable up to `end` (its store's checkpoint stage reports them
    /// as it goes, not in order with what this core decides). Counted only while this node
    /// leads: a report that comes late, after it stepped down and truncated its log, must not
    /// stand for what the log now holds (a follower's durable end comes only from
    /// [`Input::Durable`], in order with its truncations).
    Synced {
        /// The durable end.
        end: u64,
    },
    /// A leader's records up to `end` are written to its log, not necessarily durable yet: they
    /// may be shipped (the leader's own sync runs meanwhile), but count for the leader in a
    /// quorum only once [`Input::Synced`] says so. Ignored by a node that does not lead.
    Written {
        /// The end of the written records.
        end: u64,
    },
    /// The epoch record [`Effect::WriteEpoch`] asked for is durable, ending at `end`.
    EpochWritten {
        /// The epoch.
        epoch: Epoch,
        /// Position after the record.
        end: u64,
    },
    /// Where the log's records end before epoch records that start a chunk after padding:
    /// `(the epoch record's position, the end of the records before it)`. A chunk never splits a
    /// record, so an epoch record may start the next chunk while the previous one ends in
    /// padding; another node's log may hold records in that padding, which this log does not
    /// have. Told for every such epoch record this log holds (at start and as they are written).
    EpochGaps(Vec<(u64, u64)>),
    /// The operator asks this leader to resign (`POST /admin/node/resign`).
    Resign,
    /// The operator changes this node's priority (`POST /admin/node/priority/{n}`; not persisted).
    SetPriority(i64),
    /// The node is stopping (after a leader's hand-over, or at once on a follower): it never
    /// stands for election again, so a member on its way out cannot become the leader the
    /// cluster then loses; it still follows, acknowledges and votes until it stops. A leader
    /// that is still leading steps down at once.
    Leave,
    /// The members to contact are now these (DNS discovery's latest answer, with the gossip
    /// seeds): they replace [`Settings::peers`]. This node's own endpoint and repeats are
    /// dropped; an empty list changes nothing (a node never forgets every member at once).
    Peers(Vec<NodeId>),
    /// A [`Effect::Ship`] went out, covering records up to `end`.
    Shipped {
        /// The follower.
        to: NodeId,
        /// The subscription.
        subscription: u64,
        /// Position after the records sent.
        end: u64,
    },
}

/// What the shell must do, in order: a persist or a log write completes before any later effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Send a message.
    Send(NodeId, Envelope),
    /// Write `proposal.chk` durably.
    Persist {
        /// The highest term this node stood or voted in.
        proposal: u64,
    },
    /// Write an epoch record with this number at the end of the log, make it durable and report
    /// [`Input::EpochWritten`].
    WriteEpoch {
        /// The term.
        number: u64,
    },
    /// Drop the log past `to` (a divergent tail, never committed records).
    Truncate {
        /// The new end.
        to: u64,
    },
    /// Write the leader's records, make them durable and report [`Input::Durable`] (for a
    /// piece of a whole chunk: gather it, and with the last piece put the chunk in service).
    Write {
        /// Position of the first record.
        from: u64,
        /// Position after the last record.
        end: u64,
        /// The frames.
        data: Bytes,
        /// The piece of a whole chunk these records are, if they are.
        part: Option<ChunkPart>,
    },
    /// Send `to` the durable records from `from` (whole records, at most `upto`) as
    /// [`Msg::Append`] and report [`Input::Shipped`].
    Ship {
        /// The follower.
        to: NodeId,
        /// The subscription.
        subscription: u64,
        /// Position of the first record.
        from: u64,
        /// The leader's durable end.
        upto: u64,
        /// The committed position to tell.
        commit: u64,
    },
    /// Records up to `upto` are committed: publish them (readers may see them).
    Commit {
        /// The committed position.
        upto: u64,
    },
    /// Something that must not happen was refused; the node keeps its data and says why.
    Refused(String),
}

/// The fixed settings of a node.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This node.
    pub me: NodeId,
    /// The other members to contact: the gossip seeds, and with DNS discovery the addresses
    /// the name last resolved to ([`Input::Peers`]). Only they get this node's vote (unless
    /// `allow_surplus`).
    pub peers: Vec<NodeId>,
    /// The configured number of voting members.
    pub cluster_size: usize,
    /// A read-only replica: never votes, never counts, never leads.
    pub read_only: bool,
    /// Election tie-breaker among equally up-to-date nodes.
    pub priority: i64,
    /// Base election timeout (a follower waits between one and one and a half of these).
    pub election_timeout: Duration,
    /// Between a leader's heartbeats.
    pub heartbeat_interval: Duration,
    /// The largest tail a follower drops to join a leader (`None`: no limit).
    pub max_truncation: Option<u64>,
    /// Between gossip rounds.
    pub gossip_interval: Duration,
    /// A member not heard from for this long is reported dead.
    pub gossip_timeout: Duration,
    /// A member not heard from for this long is forgotten (unless it is configured).
    pub dead_member_removal: Duration,
    /// This node's client HTTP endpoint, as gossip tells it.
    pub http: Option<SocketAddr>,
    /// This node's instance id.
    pub instance: [u8; 16],
    /// Members beyond the configured ones may vote (`UnsafeAllowSurplusNodes`): with it off, a
    /// node votes only for configured members, so a misconfigured extra node cannot form a
    /// second majority.
    pub allow_surplus: bool,
    /// The database was created empty at this start: the node votes only after it has followed
    /// a leader (a wiped node must not vote again in a term it voted in before).
    pub fresh: bool,
}

impl Settings {
    /// Votes needed: more than half of the configured cluster size.
    pub fn quorum(&self) -> usize {
        self.cluster_size / 2 + 1
    }
}

/// What a node holds durably when its core starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Persisted {
    /// `proposal.chk`: the highest term this node stood or voted in.
    pub proposal: u64,
    /// The log's epochs, oldest first.
    pub epochs: Vec<Epoch>,
    /// The durable end of the log (`writer.chk`).
    pub durable: u64,
    /// The highest position known committed (published).
    pub committed: u64,
}

/// A leader's view of one follower.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Progress {
    subscription: u64,
    promotable: bool,
    /// Next position to ship.
    next: u64,
    /// Durable on the follower (acknowledged).
    matched: u64,
    /// A shipment is out and not yet reported.
    shipping: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Role {
    Follower {
        leader: Option<NodeId>,
        /// Our subscription to `leader`, and whether it is established.
        subscription: Option<(u64, bool)>,
        /// The leader's durable end, as last told.
        leader_end: u64,
        /// The leader's committed position, as last told.
        leader_commit: u64,
    },
    Candidate {
        votes: BTreeSet<NodeId>,
    },
    Leader {
        /// The term's epoch record and its end, once durable.
        epoch: Option<(Epoch, u64)>,
        followers: BTreeMap<NodeId, Progress>,
        /// When each member was last heard from in this term.
        heard: BTreeMap<NodeId, Duration>,
        /// Set while resigning: the instant it hands over even if its writes are not all
        /// committed by then.
        resigning: Option<Duration>,
    },
}

/// One node's cluster state machine.
#[derive(Clone, Debug)]
pub struct Core {
    settings: Settings,
    term: u64,
    proposal: u64,
    voted_for: Option<NodeId>,
    epochs: Vec<Epoch>,
    /// [`Input::EpochGaps`]: epoch position → end of the records before it, where they differ.
    gaps: BTreeMap<u64, u64>,
    durable: u64,
    /// Position after the last record handed to the log (≥ durable): on a follower, what it
    /// staged; on a leader, what it wrote and may ship before it is durable.
    written: u64,
    committed: u64,
    role: Role,
    now: Duration,
    /// When a leader was last heard from (followers), or the election began (candidates).
    last_heard: Duration,
    election_deadline: Duration,
    next_heartbeat: Duration,
    has_followed: bool,
    /// The node is stopping ([`Input::Leave`]): it never stands again.
    leaving: bool,
    next_subscription: u64,
    next_gossip: Duration,
    /// Members known from gossip: their last view and when it arrived.
    known: BTreeMap<NodeId, (MemberView, Duration)>,
    /// The lease of the last heartbeat received (followers).
    last_lease: u64,
    /// A follower's `written` when it last moved, and when (see [`Core::on_heartbeat`]).
    progress: (u64, Duration),
    /// A refusal already reported, so it is not repeated every heartbeat.
    last_refusal: Option<String>,
    /// Election figures (for metrics; not part of the state that decides behaviour).
    elections: Elections,
    rng: ChaCha8Rng,
}

/// What a node has seen of elections since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Elections {
    /// Times this node stood as a candidate.
    pub started: u64,
    /// Times it was elected.
    pub won: u64,
    /// Elections it saw completed: a leader became known (itself or another) for a term newer
    /// than the last leader's it knew.
    pub completed: u64,
    /// The term of the last leader it knew.
    pub leader_term: u64,
}

impl Elections {
    fn leader_known(&mut self, term: u64) {
        if term > self.leader_term {
            self.completed += 1;
            self.leader_term = term;
        }
    }
}

impl Core {
    /// A core starting from what the node holds durably, at monotonic time `now`.
    pub fn new(settings: Settings, persisted: Persisted, now: Duration, seed: u64) -> Core {
        let last = persisted.epochs.last().map(|e| e.number).unwrap_or(0);
        let mut core = Core {
            term: persisted.proposal.max(last),
            proposal: persisted.proposal,
            voted_for: None,
            epochs: persisted.epochs,
            gaps: BTreeMap::new(),
            durable: persisted.durable,
            written: persisted.durable,
            committed: persisted.committed.min(persisted.durable),
            role: Role::Follower { leader: None, subscription: None, leader_end: 0, leader_commit: 0 },
            now,
            last_heard: now,
            election_deadline: now,
            next_heartbeat: now,
            next_gossip: now,
            known: BTreeMap::new(),
            last_lease: 0,
            progress: (persisted.durable, now),
            // A vote on disk means the node was not wiped: it remembers every term it voted in,
            // even with an empty log (a member that voted but never received a record).
            has_followed: !settings.fresh || persisted.proposal > 0,
            leaving: false,
            next_subscription: 1,
            last_refusal: None,
            elections: Elections::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            settings,
        };
        core.reset_election_timer();
        core
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The monotonic time of the last tick.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// What this node has seen of elections.
    pub fn elections(&self) -> Elections {
        self.elections
    }

    /// The committed position this node knows.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// The durable end of the local log.
    pub fn durable(&self) -> u64 {
        self.durable
    }

    /// The log's epochs, oldest first.
    pub fn epochs(&self) -> &[Epoch] {
        &self.epochs
    }

    /// The leader this node follows or is (None while unknown).
    pub fn leader(&self) -> Option<NodeId> {
        match &self.role {
            Role::Follower { leader, .. } => *leader,
            Role::Candidate { .. } => None,
            Role::Leader { .. } => Some(self.settings.me),
        }
    }

    /// Whether this node is the leader of its term and may take writes (its epoch record is
    /// committed).
    pub fn is_master(&self) -> bool {
        self.state() == VNodeState::Master
    }

    /// Whether this node leads (elected, maybe still `PreMaster`).
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader { .. })
    }

    /// The state clients see.
    pub fn state(&self) -> VNodeState {
        let ro = self.settings.read_only;
        match &self.role {
            Role::Follower { .. } if self.leaving => VNodeState::ShuttingDown,
            Role::Follower { leader: None, .. } if ro => VNodeState::ReadOnlyLeaderless,
            Role::Follower { leader: None, .. } => VNodeState::Unknown,
            Role::Follower { subscription: Some((_, true)), leader_end, .. } => {
                if ro {
                    VNodeState::ReadOnlyReplica
                } else if leader_end.saturating_sub(self.durable) > CATCHING_UP_BYTES {
                    VNodeState::CatchingUp
                } else {
                    VNodeState::Slave
                }
            }
            Role::Follower { .. } if ro => VNodeState::PreReadOnlyReplica,
            Role::Follower { .. } => VNodeState::PreReplica,
            Role::Candidate { .. } => VNodeState::Unknown,
            Role::Leader { resigning: Some(_), .. } => VNodeState::ResigningLeader,
            Role::Leader { epoch: Some((_, end)), .. } if self.committed >= *end => VNodeState::Master,
            Role::Leader { .. } => VNodeState::PreMaster,
        }
    }

    /// Until when (monotonic) this leader is sure no other node can lead: a quorum (itself
    /// included) acknowledged heartbeats it sent less than an election timeout before. `None`
    /// when it does not lead. Followers refuse to vote for an election timeout after they last
    /// heard from a leader, so no other leader can exist before this instant.
    pub fn lease_until(&self) -> Option<Duration> {
        let Role::Leader { heard, followers, .. } = &self.role else { return None };
        let mut at: Vec<Duration> = heard
            .iter()
            .filter(|(id, _)| followers.get(*id).is_none_or(|p| p.promotable))
            .map(|(_, t)| *t)
            .collect();
        // This node itself, from when it became leader onwards.
        at.push(self.now);
        at.sort_unstable_by(|a, b| b.cmp(a));
        at.get(self.settings.quorum() - 1).map(|t| *t + self.settings.election_timeout)
    }

    /// Followers' acknowledged durable positions (leader only), for statistics.
    pub fn follower_positions(&self) -> Vec<(NodeId, u64, bool)> {
        match &self.role {
            Role::Leader { followers, .. } => {
                followers.iter().map(|(id, p)| (*id, p.matched, p.promotable)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Takes one input; returns the effects to carry out, in order.
    pub fn step(&mut self, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        match input {
            Input::Tick(now) => {
                self.now = self.now.max(now);
                self.tick(&mut out);
            }
            Input::Message(env) => self.receive(env, &mut out),
            Input::Durable { end, epochs } => self.on_durable(end, epochs, &mut out),
            Input::Synced { end } if self.is_leader() => self.on_durable(end, Vec::new(), &mut out),
            Input::Synced { .. } => {}
            Input::Written { end } => self.on_written(end, &mut out),
            Input::EpochWritten { epoch, end } => self.on_epoch_written(epoch, end, &mut out),
            Input::EpochGaps(gaps) => {
                for (position, end) in gaps {
                    if end < position && self.epochs.iter().any(|e| e.position == position) {
                        self.gaps.insert(position, end);
                    }
                }
            }
            Input::Shipped { to, subscription, end } => self.on_shipped(to, subscription, end, &mut out),
            Input::Resign => self.resign(&mut out),
            Input::SetPriority(p) => self.settings.priority = p,
            Input::Peers(peers) => self.set_peers(peers),
            Input::Leave => self.leave(),
        }
        out
    }

    fn envelope(&self, msg: Msg) -> Envelope {
        Envelope {
            from: self.settings.me,
            cluster_size: self.settings.cluster_size as u32,
            term: self.term,
            msg,
        }
    }

    fn send(&self, to: NodeId, msg: Msg, out: &mut Vec<Effect>) {
        out.push(Effect::Send(to, self.envelope(msg)));
    }

    fn refuse(&mut self, why: String, out: &mut Vec<Effect>) {
        if self.last_refusal.as_deref() != Some(why.as_str()) {
            self.last_refusal = Some(why.clone());
            out.push(Effect::Refused(why));
        }
    }

    fn reset_election_timer(&mut self) {
        // Between one and one and a half timeouts: enough spread that three or five nodes
        // rarely stand at once, short enough that a failover takes about one timeout.
        let base = self.settings.election_timeout.as_micros() as u64;
        let jitter = if base > 1 { self.rng.gen_range(0..base / 2) } else { 0 };
        self.last_heard = self.now;
        self.election_deadline = self.now + Duration::from_micros(base + jitter);
    }

    fn last_epoch(&self) -> Option<u64> {
        self.epochs.last().map(|e| e.number)
    }

    /// Every member this node knows to contact.
    fn members(&self) -> BTreeSet<NodeId> {
        let mut m: BTreeSet<NodeId> = self.settings.peers.iter().copied().collect();
        m.extend(self.known.keys().copied());
        if let Role::Leader { followers, .. } = &self.role {
            m.extend(followers.keys().copied());
        }
        m.remove(&self.settings.me);
        m
    }

    /// This node's own gossip entry.
    pub fn view(&self) -> MemberView {
        MemberView {
            instance: self.settings.instance,
            state: self.state(),
            http: self.settings.http,
            leader: self.leader(),
            durable: self.durable,
            committed: self.committed,
            epoch: self.epochs.last().copied(),
            priority: self.settings.priority,
            read_only: self.settings.read_only,
        }
    }

    /// Every member: this node first, then the others known from gossip (or configured and not
    /// heard from yet), each with whether it is alive.
    pub fn gossip_members(&self) -> Vec<(NodeId, Option<MemberView>, bool)> {
        let dead_after = self.settings.gossip_interval * 3 + self.settings.gossip_timeout;
        let mut all = vec![(self.settings.me, Some(self.view()), true)];
        for id in self.members() {
            match self.known.get(&id) {
                Some((v, at)) => all.push((id, Some(v.clone()), self.now.saturating_sub(*at) < dead_after)),
                None => all.push((id, None, false)),
            }
        }
        all
    }

    fn tick(&mut self, out: &mut Vec<Effect>) {
        if self.now >= self.next_gossip {
            self.next_gossip = self.now + self.settings.gossip_interval;
            // Members that are not configured and have been silent long enough are forgotten.
            let (now, removal) = (self.now, self.settings.dead_member_removal);
            let peers = &self.settings.peers;
            self.known.retain(|id, (_, at)| peers.contains(id) || now.saturating_sub(*at) < removal);
            let view = self.view();
            for to in self.members() {
                self.send(to, Msg::Gossip(view.clone()), out);
            }
        }
        match &self.role {
            Role::Leader { .. } => {
                // Check quorum: a leader whose lease ran out (no quorum acknowledged a heartbeat
                // sent within the election timeout) steps down.
                let window = self.settings.election_timeout;
                let expired = self.lease_until().is_none_or(|t| t <= self.now);
                if expired && self.now.saturating_sub(self.last_heard) >= window {
                    tracing::warn!(term = self.term, "leader lost its quorum; stepping down");
                    self.become_follower(None);
                    return;
                }
                if self.now >= self.next_heartbeat {
                    self.heartbeat(out);
                }
                self.maybe_hand_over(out);
            }
            Role::Follower { .. } | Role::Candidate { .. } => {
                if self.settings.read_only || self.leaving {
                    // Replicas and leaving nodes never stand; a silent leader is forgotten.
                    if self.now >= self.election_deadline {
                        self.become_follower(None);
                        self.reset_election_timer();
                    }
                    return;
                }
                if self.now >= self.election_deadline {
                    if self.may_vote() {
                        self.stand(out);
                    } else {
                        // A fresh node does not stand or vote until it has followed a leader;
                        // it keeps listening.
                        self.become_follower(None);
                        self.reset_election_timer();
                    }
                }
            }
        }
    }

    /// Whether this node may stand and vote. A node whose database was created empty at this
    /// start may only once it has followed a leader, or when every member it heard from is as
    /// empty as itself and they are a quorum (a new cluster): a wiped member of a running cluster
    /// must not vote again in a term it voted in before it was wiped.
    fn may_vote(&self) -> bool {
        if self.has_followed {
            return true;
        }
        // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
        if crate::buggify::bug(crate::buggify::Bug::NewClusterNeverVotes) {
            return false;
        }
        let heard: Vec<&MemberView> = self.known.values().map(|(v, _)| v).filter(|v| !v.read_only).collect();
        heard.len() + 1 >= self.settings.quorum() && heard.iter().all(|v| v.epoch.is_none() && v.durable == 0)
    }

    fn heartbeat(&mut self, out: &mut Vec<Effect>) {
        // Often enough that the lease (an election timeout from a quorum's acknowledgement)
        // never runs out while the followers answer.
        let every = self.settings.heartbeat_interval.min(self.settings.election_timeout / 4);
        self.next_heartbeat = self.now + every;
        for to in self.members() {
            let lease = self.now.as_micros() as u64;
            let beat =
                Msg::Heartbeat { leader_end: self.durable, commit: self.committed, lease, notice: false };
            self.send(to, beat, out);
        }
    }

    fn stand(&mut self, out: &mut Vec<Effect>) {
        self.term = self.term.max(self.proposal).max(self.last_epoch().unwrap_or(0)) + 1;
        self.proposal = self.term;
        self.voted_for = Some(self.settings.me);
        self.role = Role::Candidate { votes: BTreeSet::from([self.settings.me]) };
        self.reset_election_timer();
        self.elections.started += 1;
        tracing::info!(term = self.term, "standing for election");
        out.push(Effect::Persist { proposal: self.proposal });
        if self.settings.quorum() <= 1 {
            self.become_leader(out);
            return;
        }
        let ask = Msg::RequestVote {
            last_epoch: self.last_epoch(),
            durable: self.durable,
            priority: self.settings.priority,
        };
        for to in self.settings.peers.clone() {
            if to != self.settings.me {
                self.send(to, ask.clone(), out);
            }
        }
    }

    fn become_leader(&mut self, out: &mut Vec<Effect>) {
        tracing::info!(term = self.term, "elected leader");
        self.elections.won += 1;
        self.elections.leader_known(self.term);
        self.written = self.durable;
        self.role =
            Role::Leader { epoch: None, followers: BTreeMap::new(), heard: BTreeMap::new(), resigning: None };
        self.last_heard = self.now;
        self.has_followed = true;
        self.last_refusal = None;
        out.push(Effect::WriteEpoch { number: self.term });
        self.heartbeat(out);
    }

    fn become_follower(&mut self, leader: Option<NodeId>) {
        if self.is_leader() {
            tracing::warn!(term = self.term, "no longer the leader");
        }
        self.written = self.durable;
        self.role = Role::Follower { leader, subscription: None, leader_end: 0, leader_commit: 0 };
    }

    /// Moves to a newer term learned from a message.
    fn observe_term(&mut self, term: u64) {
        if term > self.term {
            self.term = term;
            self.voted_for = None;
            if !matches!(self.role, Role::Follower { leader: None, .. }) {
                self.become_follower(None);
            }
        }
    }

    fn receive(&mut self, env: Envelope, out: &mut Vec<Effect>) {
        if env.from == self.settings.me {
            return;
        }
        if env.cluster_size as usize != self.settings.cluster_size {
            self.refuse(
                format!(
                    "ignoring {}: it is configured for a cluster of {} nodes, this node for {}",
                    env.from, env.cluster_size, self.settings.cluster_size
                ),
                out,
            );
            return;
        }
        let from = env.from;
        let term = env.term;
        match env.msg {
            Msg::RequestVote { last_epoch, durable, priority } => {
                self.on_request_vote(from, term, last_epoch, durable, priority, out)
            }
            Msg::Vote { granted } => self.on_vote(from, term, granted, out),
            Msg::Heartbeat { leader_end, commit, lease, notice } => {
                self.last_lease = lease;
                self.on_heartbeat(from, term, leader_end, commit, notice, out)
            }
            Msg::Subscribe { subscription, durable, epochs, complete, promotable } => {
                self.on_subscribe(from, term, subscription, durable, &epochs, complete, promotable, out)
            }
            Msg::OlderEpochs { subscription, before } => {
                self.on_older_epochs(from, term, subscription, before, out)
            }
            Msg::Subscribed { subscription, position } => {
                self.on_subscribed(from, term, subscription, position, out)
            }
            Msg::Append { subscription, from: start, end, data, leader_end, commit, lease, part } => {
                self.last_lease = self.last_lease.max(lease);
                self.on_append(from, term, subscription, (start, end, data, part), leader_end, commit, out)
            }
            Msg::Ack { subscription, durable, lease } => {
                self.on_ack(from, term, subscription, durable, lease, out)
            }
            Msg::Gossip(view) => {
                self.known.insert(from, (view, self.now));
            }
            Msg::Resign { successor } => self.on_resign(from, term, successor, out),
        }
    }

    fn leave(&mut self) {
        if self.leaving {
            return;
        }
        tracing::info!(term = self.term, "leaving: this node will not stand for election again");
        self.leaving = true;
        if !matches!(self.role, Role::Follower { .. }) {
            self.become_follower(None);
        }
    }

    fn set_peers(&mut self, mut peers: Vec<NodeId>) {
        peers.retain(|p| *p != self.settings.me);
        peers.sort();
        peers.dedup();
        if peers.is_empty() || peers == self.settings.peers {
            return;
        }
        tracing::debug!(members = ?peers, "the members to contact changed");
        self.settings.peers = peers;
    }

    /// Starts resigning (leaders only; elsewhere nothing happens). The leader stops taking
    /// requests (its state says so), keeps replicating until everything it wrote is committed
    /// or an election timeout passed, then hands over ([`Core::maybe_hand_over`]).
    fn resign(&mut self, out: &mut Vec<Effect>) {
        let deadline = self.now + self.settings.election_timeout;
        let Role::Leader { resigning, .. } = &mut self.role else { return };
        if resigning.is_none() {
            tracing::info!(term = self.term, "resigning the leadership");
            *resigning = Some(deadline);
        }
        self.maybe_hand_over(out);
    }

    /// A resigning leader whose writes are all committed (or whose time is up) tells the
    /// followers (checked at each tick, never in the step that commits: a commit and the
    /// hand-over are two inputs), names the most up-to-date voter as its successor and becomes a follower that
    /// does not stand for a while, so the successor wins the election it starts at once.
    fn maybe_hand_over(&mut self, out: &mut Vec<Effect>) {
        let Role::Leader { resigning: Some(deadline), followers, .. } = &self.role else { return };
        // Everything it wrote, synced here or not yet: a group written just before the
        // resignation is answered once it commits, not dropped with the leadership.
        if self.committed < self.durable.max(self.written) && self.now < *deadline {
            return;
        }
        let successor = followers
            .iter()
            .filter(|(id, p)| {
                // Not a member that is stopping too (a rolling restart's next).
                p.promotable && self.known.get(*id).is_none_or(|(v, _)| v.state != VNodeState::ShuttingDown)
            })
            .max_by_key(|(id, p)| {
                let priority = self.known.get(*id).map(|(v, _)| v.priority).unwrap_or(0);
                (p.matched, priority)
            })
            .map(|(id, _)| *id);
        let tell: Vec<NodeId> = followers.keys().copied().collect();
        tracing::info!(term = self.term, successor = ?successor, "handing the leadership over");
        for to in tell {
            self.send(to, Msg::Resign { successor }, out);
        }
        self.become_follower(None);
        // Stand only if nobody else was elected within two timeouts.
        self.last_heard = self.now;
        self.election_deadline = self.now + self.settings.election_timeout * 2;
    }

    fn on_resign(&mut self, from: NodeId, term: u64, successor: Option<NodeId>, out: &mut Vec<Effect>) {
        if term != self.term || self.settings.read_only {
            return;
        }
        if !matches!(self.role, Role::Follower { leader: Some(l), .. } if l == from) {
            return;
        }
        // The leader gave up its lease: this node may vote at once, and stands if named.
        self.become_follower(None);
        if successor == Some(self.settings.me) && self.may_vote() && !self.leaving {
            self.stand(out);
        }
    }

    fn on_request_vote(
        &mut self,
        from: NodeId,
        term: u64,
        last_epoch: Option<u64>,
        durable: u64,
        priority: i64,
        out: &mut Vec<Effect>,
    ) {
        if self.settings.read_only {
            return;
        }
        if !self.settings.allow_surplus && !self.settings.peers.contains(&from) {
            self.refuse(
                format!(
                    "refusing to vote for {from}: it is not one of this node's configured members (GossipSeed); \
                     a node beyond the cluster size could form a second majority"
                ),
                out,
            );
            return;
        }
        // The lease: while a leader is heard from, nobody else can be elected. A node that
        // stands again keeps its current term until the lease runs out.
        let leased = match &self.role {
            Role::Follower { leader: Some(_), .. } => {
                self.now.saturating_sub(self.last_heard) < self.settings.election_timeout
            }
            Role::Leader { .. } => true,
            _ => false,
        };
        if leased && term > self.term {
            self.send(from, Msg::Vote { granted: false }, out);
            return;
        }
        self.observe_term(term);
        let mine = (self.last_epoch(), self.durable);
        let theirs = (last_epoch, durable);
        // Priority among equally up-to-date nodes: refuse a candidate when a live member (as
        // gossip last showed it) is as up to date and has a higher priority; it will stand.
        let dead_after = self.settings.gossip_interval * 3 + self.settings.gossip_timeout;
        let better_alive = self.known.iter().any(|(id, (v, at))| {
            *id != from
                && !v.read_only
                && self.now.saturating_sub(*at) < dead_after
                && (v.epoch.map(|e| e.number), v.durable) == theirs
                && v.priority > priority
        });
        let grant = term == self.term
            && self.may_vote()
            && !better_alive
            && theirs >= mine
            && !(theirs == mine && self.settings.priority > priority)
            && (self.proposal < term || self.voted_for == Some(from));
        if theirs == mine && self.settings.priority > priority && term == self.term && self.may_vote() {
            // A better-placed node refuses and stands itself at once.
            self.election_deadline = self.now;
        }
        if grant {
            self.voted_for = Some(from);
            // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
            if self.proposal < term && !crate::buggify::bug(crate::buggify::Bug::VoteNotDurable) {
                out.push(Effect::Persist { proposal: term });
            }
            self.proposal = self.proposal.max(term);
            self.reset_election_timer();
        }
        self.send(from, Msg::Vote { granted: grant }, out);
    }

    fn on_vote(&mut self, from: NodeId, term: u64, granted: bool, out: &mut Vec<Effect>) {
        self.observe_term(term);
        if term != self.term || !granted {
            return;
        }
        let quorum = self.settings.quorum();
        if let Role::Candidate { votes } = &mut self.role {
            votes.insert(from);
            if votes.len() >= quorum {
                self.become_leader(out);
            }
        }
    }

    /// A message from the leader of `term`: follow it.
    fn follow(&mut self, from: NodeId, term: u64) -> bool {
        self.observe_term(term);
        if term < self.term {
            return false;
        }
        match &self.role {
            Role::Leader { .. } => {
                // Two leaders in one term cannot happen; refuse to follow rather than guess.
                return false;
            }
            Role::Follower { leader: Some(l), .. } if *l == from => {}
            _ => {
                self.become_follower(Some(from));
                self.has_followed = true;
                self.elections.leader_known(term);
                tracing::info!(term, leader = %from, "following the elected leader");
            }
        }
        self.reset_election_timer();
        true
    }

    fn subscribe(&mut self, to: NodeId, before: Option<u64>, out: &mut Vec<Effect>) {
        let id = match &self.role {
            Role::Follower { subscription: Some((id, _)), .. } if before.is_some() => *id,
            _ => {
                let id = self.next_subscription;
                self.next_subscription += 1;
                id
            }
        };
        if let Role::Follower { subscription, .. } = &mut self.role {
            *subscription = Some((id, false));
        }
        let older: Vec<Epoch> = self
            .epochs
            .iter()
            .rev()
            .filter(|e| before.is_none_or(|b| e.position < b))
            .take(SUBSCRIBE_EPOCHS)
            .copied()
            .collect();
        let complete = older.last().is_none_or(|e| Some(e) == self.epochs.first());
        let msg = Msg::Subscribe {
            subscription: id,
            durable: self.durable,
            epochs: older,
            complete,
            promotable: !self.settings.read_only,
        };
        self.send(to, msg, out);
    }

    fn on_heartbeat(
        &mut self,
        from: NodeId,
        term: u64,
        leader_end: u64,
        commit: u64,
        notice: bool,
        out: &mut Vec<Effect>,
    ) {
        if !self.follow(from, term) {
            if term < self.term {
                // A deposed leader learns the newer term from the answer.
                self.send(from, Msg::Vote { granted: false }, out);
            }
            return;
        }
        let Role::Follower { subscription, leader_end: le, leader_commit, .. } = &mut self.role else {
            return;
        };
        *le = leader_end;
        *leader_commit = (*leader_commit).max(commit);
        match *subscription {
            None => self.subscribe(from, None, out),
            Some((_, false)) => {
                // Still waiting for the answer; ask again (it may have been lost).
                self.subscribe(from, None, out);
            }
            Some((id, true)) => {
                // A shipment lost on the way (its connection broke) leaves a gap that no later
                // append reveals once writes stop (or once the leader's shipping window is full
                // of lost shipments): with the leader ahead and nothing arrived for an election
                // timeout, subscribe again from what is durable. (Not sooner: a slow but live
                // stream of shipments must not be restarted over and over.)
                if self.written != self.progress.0 {
                    self.progress = (self.written, self.now);
                }
                let stalled = self.now.saturating_sub(self.progress.1) >= self.settings.election_timeout;
                if leader_end > self.written && stalled {
                    self.progress = (self.written, self.now);
                    self.subscribe(from, None, out);
                    return;
                }
                self.publish_followed(out);
                if !notice {
                    self.send(
                        from,
                        Msg::Ack { subscription: id, durable: self.durable, lease: self.last_lease },
                        out,
                    );
                }
            }
        }
    }

    fn on_older_epochs(
        &mut self,
        from: NodeId,
        term: u64,
        subscription: u64,
        before: u64,
        out: &mut Vec<Effect>,
    ) {
        if !self.follow(from, term) {
            return;
        }
        if matches!(self.role, Role::Follower { subscription: Some((id, false)), .. } if id == subscription) {
            self.subscribe(from, Some(before), out);
        }
    }

    /// The leader's answer to a subscription: where the follower's log and ours part, or the
    /// position of the oldest epoch seen when older ones are needed.
    fn common_point(&self, durable: u64, epochs: &[Epoch], complete: bool) -> Result<u64, u64> {
        for (i, e) in epochs.iter().enumerate() {
            if let Some(k) = self.epochs.iter().position(|x| x == e) {
                let theirs = if i == 0 { durable } else { epochs[i - 1].position };
                // Where this log's records of the common epoch end: before the next epoch record,
                // or before the padding that precedes it.
                let ours = self
                    .epochs
                    .get(k + 1)
                    .map(|x| self.gaps.get(&x.position).copied().unwrap_or(x.position))
                    .unwrap_or(self.written.max(self.durable));
                return Ok(theirs.min(ours));
            }
        }
        match epochs.last() {
            Some(oldest) if !complete => Err(oldest.position),
            _ => Ok(0),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_subscribe(
        &mut self,
        from: NodeId,
        term: u64,
        subscription: u64,
        durable: u64,
        epochs: &[Epoch],
        complete: bool,
        promotable: bool,
        out: &mut Vec<Effect>,
    ) {
        self.observe_term(term);
        if term != self.term || !self.is_leader() {
            return;
        }
        let answer = self.common_point(durable, epochs, complete);
        let Role::Leader { followers, .. } = &mut self.role else { return };
        match answer {
            Err(before) => {
                self.send(from, Msg::OlderEpochs { subscription, before }, out);
            }
            Ok(position) => {
                followers.insert(
                    from,
                    Progress { subscription, promotable, next: position, matched: position, shipping: false },
                );
                self.send(from, Msg::Subscribed { subscription, position }, out);
                self.ship(from, out);
                self.advance_commit(out);
            }
        }
    }

    fn on_subscribed(&mut self, from: NodeId, term: u64, id: u64, position: u64, out: &mut Vec<Effect>) {
        if !self.follow(from, term) {
            return;
        }
        if !matches!(self.role, Role::Follower { subscription: Some((s, false)), .. } if s == id) {
            return;
        }
        if position > self.durable {
            self.refuse(
                format!(
                    "the leader {from} subscribed this node at {position}, past its log's end {}",
                    self.durable
                ),
                out,
            );
            return;
        }
        if position < self.durable {
            if position < self.committed {
                self.refuse(
                    format!(
                        "refusing to truncate committed records: the leader {from} (term {term}) parts from this \
                         log at {position}, below its committed position {}",
                        self.committed
                    ),
                    out,
                );
                return;
            }
            let drop = self.durable - position;
            if self.settings.max_truncation.is_some_and(|max| drop > max) {
                self.refuse(
                    format!(
                        "refusing to drop {drop} bytes past {position} to follow {from}: more than MaxTruncation ({} bytes)",
                        self.settings.max_truncation.unwrap_or(0)
                    ),
                    out,
                );
                return;
            }
            tracing::warn!(from = self.durable, to = position, leader = %from, "truncating a divergent tail");
            // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
            if crate::buggify::bug(crate::buggify::Bug::KeepDivergentTail) {
                // The tail stays and the leader's records are written after it.
            } else {
                out.push(Effect::Truncate { to: position });
                self.durable = position;
                self.epochs.retain(|e| e.position < position);
                self.gaps.retain(|p, _| *p < position);
            }
        }
        self.written = self.durable;
        self.progress = (self.written, self.now);
        self.last_refusal = None;
        if let Role::Follower { subscription, .. } = &mut self.role {
            *subscription = Some((id, true));
        }
        self.send(from, Msg::Ack { subscription: id, durable: self.durable, lease: self.last_lease }, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn on_append(
        &mut self,
        from: NodeId,
        term: u64,
        id: u64,
        (start, end, data, part): (u64, u64, Bytes, Option<ChunkPart>),
        leader_end: u64,
        commit: u64,
        out: &mut Vec<Effect>,
    ) {
        if !self.follow(from, term) {
            return;
        }
        let Role::Follower { subscription: Some((s, true)), leader_end: le, leader_commit, .. } =
            &mut self.role
        else {
            return;
        };
        if *s != id {
            return;
        }
        *le = leader_end;
        *leader_commit = (*leader_commit).max(commit);
        if start != self.written {
            if start > self.written {
                // A gap: something was lost. Subscribe again from what is durable.
                self.subscribe(from, None, out);
            }
            return;
        }
        if end > start || part.is_some() {
            // Pieces of a whole chunk move nothing until the last one.
            self.written = end;
            out.push(Effect::Write { from: start, end, data, part });
        }
        self.publish_followed(out);
    }

    /// A follower publishes what the leader committed and it holds durably.
    fn publish_followed(&mut self, out: &mut Vec<Effect>) {
        let Role::Follower { subscription: Some((_, true)), leader_commit, .. } = &self.role else { return };
        // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
        let upto = if crate::buggify::bug(crate::buggify::Bug::FollowerPublishesUncommitted) {
            self.durable
        } else {
            (*leader_commit).min(self.durable)
        };
        if upto > self.committed {
            self.committed = upto;
            out.push(Effect::Commit { upto });
        }
    }

    fn on_durable(&mut self, end: u64, epochs: Vec<Epoch>, out: &mut Vec<Effect>) {
        if end < self.durable {
            return;
        }
        self.durable = end;
        self.written = self.written.max(end);
        for e in epochs {
            if self.epochs.last().is_none_or(|l| l.position < e.position) {
                self.epochs.push(e);
            }
        }
        match &self.role {
            Role::Leader { .. } => {
                let ids: Vec<NodeId> = match &self.role {
                    Role::Leader { followers, .. } => followers.keys().copied().collect(),
                    _ => Vec::new(),
                };
                for id in ids {
                    self.ship(id, out);
                }
                self.advance_commit(out);
            }
            Role::Follower { leader: Some(l), subscription: Some((id, true)), .. } => {
                let (l, id) = (*l, *id);
                self.publish_followed(out);
                self.send(
                    l,
                    Msg::Ack { subscription: id, durable: self.durable, lease: self.last_lease },
                    out,
                );
            }
            _ => {}
        }
    }

    /// A leader's records are written (not yet durable): ship them.
    fn on_written(&mut self, end: u64, out: &mut Vec<Effect>) {
        if !self.is_leader() || end <= self.written {
            return;
        }
        self.written = end;
        let ids: Vec<NodeId> = match &self.role {
            Role::Leader { followers, .. } => followers.keys().copied().collect(),
            _ => Vec::new(),
        };
        for id in ids {
            self.ship(id, out);
        }
    }

    fn on_epoch_written(&mut self, epoch: Epoch, end: u64, out: &mut Vec<Effect>) {
        if epoch.number != self.term || !self.is_leader() {
            return;
        }
        if self.epochs.last().is_none_or(|l| l.position < epoch.position) {
            self.epochs.push(epoch);
        }
        if let Role::Leader { epoch: e, .. } = &mut self.role {
            *e = Some((epoch, end));
        }
        self.on_durable(end, Vec::new(), out);
    }

    /// Ships `to` what the leader wrote past what it sent before, durable or not (a follower
    /// makes it durable on its own; the leader counts it for itself only once it is durable
    /// here too).
    fn ship(&mut self, to: NodeId, out: &mut Vec<Effect>) {
        let (end, commit) = (self.written.max(self.durable), self.committed);
        let Role::Leader { followers, .. } = &mut self.role else { return };
        let Some(p) = followers.get_mut(&to) else { return };
        if p.shipping || p.next >= end || p.next - p.matched >= SHIP_WINDOW_BYTES {
            return;
        }
        p.shipping = true;
        out.push(Effect::Ship { to, subscription: p.subscription, from: p.next, upto: end, commit });
    }

    fn on_shipped(&mut self, to: NodeId, subscription: u64, end: u64, out: &mut Vec<Effect>) {
        let Role::Leader { followers, .. } = &mut self.role else { return };
        let Some(p) = followers.get_mut(&to) else { return };
        if p.subscription != subscription {
            return;
        }
        p.shipping = false;
        p.next = p.next.max(end);
        self.ship(to, out);
    }

    fn on_ack(&mut self, from: NodeId, term: u64, id: u64, durable: u64, lease: u64, out: &mut Vec<Effect>) {
        self.observe_term(term);
        if term != self.term {
            return;
        }
        let Role::Leader { followers, heard, .. } = &mut self.role else { return };
        if lease > 0 {
            let at = heard.entry(from).or_default();
            *at = (*at).max(Duration::from_micros(lease));
        }
        let Some(p) = followers.get_mut(&from) else { return };
        if p.subscription != id {
            return;
        }
        p.matched = p.matched.max(durable.min(self.written.max(self.durable)));
        self.ship(from, out);
        self.advance_commit(out);
    }

    /// The leader commits the highest position a quorum of voters holds durably, once its
    /// term's epoch record is among it, and never past its own durable end (followers may hold
    /// records durably that the leader is still syncing: it publishes only what it holds).
    fn advance_commit(&mut self, out: &mut Vec<Effect>) {
        let Role::Leader { epoch: Some((_, epoch_end)), followers, .. } = &self.role else { return };
        let mut held: Vec<u64> = followers.values().filter(|p| p.promotable).map(|p| p.matched).collect();
        held.push(self.durable);
        held.sort_unstable_by(|a, b| b.cmp(a));
        let q = self.settings.quorum();
        // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
        let position = if crate::buggify::bug(crate::buggify::Bug::AckBeforeQuorum) {
            Some(self.durable)
        } else {
            held.get(q - 1).map(|&p| p.min(self.durable))
        };
        if let Some(position) = position {
            if position >= *epoch_end && position > self.committed {
                self.committed = position;
                out.push(Effect::Commit { upto: position });
                // Followers learn the new commit at once, not at the next heartbeat.
                let tell: Vec<NodeId> = followers.keys().copied().collect();
                for to in tell {
                    let lease = self.now.as_micros() as u64;
                    let notice =
                        Msg::Heartbeat { leader_end: self.durable, commit: position, lease, notice: true };
                    self.send(to, notice, out);
                }
            }
        }
    }
}

/// States are hashed and compared by everything that decides behaviour, leaving out the fixed
/// settings and the random generator (it only draws timeouts), so the model checker can tell
/// explored states apart.
impl std::hash::Hash for Core {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.key().hash(h)
    }
}

impl PartialEq for Core {
    fn eq(&self, other: &Core) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Core {}

type CoreKey<'a> = (
    (u64, u64, Option<NodeId>, &'a [Epoch], &'a BTreeMap<u64, u64>, u64, u64, u64),
    &'a Role,
    (Duration, Duration, Duration, Duration, bool, bool, u64),
    (u64, Duration),
);

impl Core {
    fn key(&self) -> CoreKey<'_> {
        (
            (
                self.term,
                self.proposal,
                self.voted_for,
                &self.epochs,
                &self.gaps,
                self.durable,
                self.written,
                self.committed,
            ),
            &self.role,
            (
                self.now,
                self.last_heard,
                self.election_deadline,
                self.next_heartbeat,
                self.has_followed,
                self.leaving,
                self.next_subscription,
            ),
            self.progress,
        )
    }
}

#[cfg(test)]
mod tests {
    //! Behaviours the model check does not pin down (it checks safety): who wins, what is
    //! refused, when a leader steps down. A tiny synchronous cluster delivers messages in order
    //! and plays each node's log as a byte vector (every record two bytes, as in the model).
    use super::*;

    const ET: Duration = Duration::from_secs(1);

    fn id(i: usize) -> NodeId {
        SocketAddr::from(([10, 0, 0, i as u8 + 1], 1112))
    }

    fn index_of(n: NodeId) -> usize {
        match n {
            SocketAddr::V4(a) => a.ip().octets()[3] as usize - 1,
            SocketAddr::V6(_) => usize::MAX,
        }
    }

    fn settings(i: usize, n: usize, priority: i64) -> Settings {
        Settings {
            me: id(i),
            peers: (0..n).filter(|&j| j != i).map(id).collect(),
            cluster_size: n,
            read_only: false,
            priority,
            election_timeout: ET,
            heartbeat_interval: Duration::from_millis(100),
            max_truncation: Some(4),
            gossip_interval: Duration::from_secs(3600),
            gossip_timeout: Duration::from_secs(1),
            dead_member_removal: Duration::from_secs(1800),
            http: None,
            instance: [i as u8; 16],
            allow_surplus: false,
            fresh: false,
        }
    }

    struct Net {
        cores: Vec<Core>,
        logs: Vec<Vec<u8>>,
        queue: std::collections::VecDeque<(usize, Envelope)>,
        refusals: Vec<(usize, String)>,
        down: BTreeSet<usize>,
    }

    impl Net {
        fn new(priorities: &[i64]) -> Net {
            let n = priorities.len();
            Net {
                cores: (0..n)
                    .map(|i| {
                        Core::new(
                            settings(i, n, priorities[i]),
                            Persisted::default(),
                            Duration::ZERO,
                            i as u64,
                        )
                    })
                    .collect(),
                logs: vec![Vec::new(); n],
                queue: Default::default(),
                refusals: Vec::new(),
                down: BTreeSet::new(),
            }
        }

        fn input(&mut self, i: usize, input: Input) {
            let mut work = std::collections::VecDeque::from([(i, input)]);
            while let Some((i, input)) = work.pop_front() {
                for e in self.cores[i].step(input) {
                    match e {
                        Effect::Send(to, env) => self.queue.push_back((index_of(to), env)),
                        Effect::Persist { .. } | Effect::Commit { .. } => {}
                        Effect::WriteEpoch { number } => {
                            let position = self.logs[i].len() as u64;
                            self.logs[i].extend_from_slice(&[0x80 | number as u8, i as u8]);
                            let epoch = Epoch {
                                number,
                                id: [number as u8, i as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                                position,
                            };
                            work.push_back((i, Input::EpochWritten { epoch, end: position + 2 }));
                        }
                        Effect::Truncate { to } => self.logs[i].truncate(to as usize),
                        Effect::Write { from, data, .. } => {
                            let epochs = data
                                .chunks(2)
                                .enumerate()
                                .filter(|(_, r)| r[0] & 0x80 != 0)
                                .map(|(k, r)| Epoch {
                                    number: (r[0] & 0x7f) as u64,
                                    id: [r[0] & 0x7f, r[1], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                                    position: from + 2 * k as u64,
                                })
                                .collect();
                            self.logs[i].extend_from_slice(&data);
                            let end = self.logs[i].len() as u64;
                            work.push_back((i, Input::Durable { end, epochs }));
                        }
                        Effect::Ship { to, subscription, from, upto, commit } => {
                            let data = Bytes::copy_from_slice(&self.logs[i][from as usize..upto as usize]);
                            let env = Envelope {
                                from: id(i),
                                cluster_size: self.cores.len() as u32,
                                term: self.cores[i].term(),
                                msg: Msg::Append {
                                    subscription,
                                    from,
                                    end: upto,
                                    data,
                                    leader_end: upto,
                                    commit,
                                    lease: 0,
                                    part: None,
                                },
                            };
                            self.queue.push_back((index_of(to), env));
                            work.push_back((i, Input::Shipped { to, subscription, end: upto }));
                        }
                        Effect::Refused(why) => self.refusals.push((i, why)),
                    }
                }
            }
        }

        /// Delivers every message (and what they cause) to the nodes that are up.
        fn settle(&mut self) {
            let mut budget = 10_000;
            while let Some((to, env)) = self.queue.pop_front() {
                if !self.down.contains(&to) {
                    self.input(to, Input::Message(env));
                }
                budget -= 1;
                assert!(budget > 0, "messages never settle");
            }
        }

        fn tick(&mut self, i: usize, by: Duration) {
            let now = self.cores[i].now() + by;
            self.input(i, Input::Tick(now));
        }

        fn leaders(&self) -> Vec<usize> {
            (0..self.cores.len()).filter(|&i| !self.down.contains(&i) && self.cores[i].is_leader()).collect()
        }

        fn write(&mut self, i: usize, b: u8) {
            self.logs[i].extend_from_slice(&[1, b]);
            let end = self.logs[i].len() as u64;
            self.input(i, Input::Durable { end, epochs: Vec::new() });
        }
    }

    #[test]
    fn a_resigning_leader_drains_its_writes_then_hands_over() {
        let mut net = Net::new(&[0, 0, 0]);
        net.tick(0, ET * 2);
        net.settle();
        assert_eq!(net.leaders(), vec![0]);
        // A write no follower has yet: the resignation waits for it to commit.
        net.down.insert(1);
        net.down.insert(2);
        net.write(0, 1);
        net.settle();
        net.input(0, Input::Resign);
        assert_eq!(net.cores[0].state(), VNodeState::ResigningLeader);
        assert!(!net.cores[0].is_master(), "a resigning leader takes no new writes");
        net.down.clear();
        net.queue.clear();
        // The followers notice at the next heartbeats that they miss what was shipped while
        // they were away, and subscribe again; the write commits and the leader hands over.
        for _ in 0..8 {
            for i in [1, 2] {
                net.tick(i, Duration::from_millis(200));
            }
            net.tick(0, Duration::from_millis(200));
            net.settle();
        }
        let leaders = net.leaders();
        assert_eq!(leaders.len(), 1, "one successor: {leaders:?}");
        let successor = leaders[0];
        assert_ne!(successor, 0);
        assert_eq!(net.cores[successor].term(), 2);
        assert!(net.logs[successor].starts_with(&net.logs[0]), "the successor holds the drained write");
        net.tick(successor, Duration::from_millis(200));
        net.settle();
        assert!(net.cores[successor].is_master());
        assert_eq!(net.cores[0].state(), VNodeState::Slave);
    }

    #[test]
    fn a_resigning_leader_waits_for_what_it_wrote_before_its_own_sync() {
        let mut net = Net::new(&[0, 0, 0]);
        net.tick(0, ET * 2);
        net.settle();
        assert_eq!(net.leaders(), vec![0]);
        // A group written (and shipped) but not yet synced on the leader when it resigns.
        net.logs[0].extend_from_slice(&[1, 0]);
        let end = net.logs[0].len() as u64;
        net.input(0, Input::Written { end });
        net.settle();
        net.input(0, Input::Resign);
        for _ in 0..2 {
            net.tick(0, Duration::from_millis(100));
            net.settle();
        }
        assert_eq!(net.cores[0].state(), VNodeState::ResigningLeader, "it waits for its own sync");
        net.input(0, Input::Synced { end });
        net.settle();
        net.tick(0, Duration::from_millis(100));
        net.settle();
        assert!(net.cores[0].committed() >= end, "the group committed before the hand-over");
        assert!(!net.cores[0].is_leader(), "then it handed over");
    }

    #[test]
    fn only_a_leader_resigns_and_a_lone_follower_is_not_named_twice() {
        let mut net = Net::new(&[0, 0, 0]);
        net.tick(0, ET * 2);
        net.settle();
        net.input(1, Input::Resign);
        assert_eq!(net.cores[1].state(), VNodeState::Slave, "a follower ignores a resignation");
        // The leader names the follower that holds the most.
        net.down.insert(2);
        net.write(0, 1);
        net.settle();
        net.down.clear();
        net.input(0, Input::Resign);
        net.settle();
        assert_eq!(net.leaders(), vec![1], "the follower that holds every write takes over");
    }

    #[test]
    fn a_leader_ships_what_it_wrote_before_its_sync_and_commits_only_what_it_holds_durably() {
        let mut net = Net::new(&[0, 0, 0]);
        net.tick(0, ET * 2);
        net.settle();
        assert_eq!(net.leaders(), vec![0]);
        assert_eq!(net.cores[0].committed(), 2, "the epoch record");
        // Written, not yet synced: shipped at once, and both followers make it durable.
        net.logs[0].extend_from_slice(&[1, 9]);
        net.input(0, Input::Written { end: 4 });
        net.settle();
        assert_eq!(net.logs[1], net.logs[0], "the follower holds the unsynced write");
        assert_eq!(net.logs[2], net.logs[0]);
        assert_eq!(
            net.cores[0].committed(),
            2,
            "a quorum of followers, but the leader's own sync is not done"
        );
        // A restart would lose what is not durable: the follower's published position never
        // passes what the leader committed.
        assert_eq!(net.cores[1].committed(), 2);
        // The leader's sync completes: now it commits, and tells the followers.
        net.input(0, Input::Synced { end: 4 });
        net.settle();
        assert_eq!(net.cores[0].committed(), 4);
        assert_eq!(net.cores[1].committed(), 4);
        // Reports of a leader's written or synced records are ignored by a node that does not
        // lead (one that comes late, after a step-down, says nothing of the log it has now).
        assert!(net.cores[1].step(Input::Written { end: 100 }).is_empty());
        let before = net.cores[1].durable();
        assert!(net.cores[1].step(Input::Synced { end: 100 }).is_empty());
        assert_eq!(net.cores[1].durable(), before);
    }

    #[test]
    fn an_election_makes_one_master_and_followers_that_hold_its_writes() {
        let mut net = Net::new(&[0, 0, 0]);
        net.tick(1, ET * 2);
        net.settle();
        assert_eq!(net.leaders(), vec![1]);
        assert!(net.cores[1].is_master());
        net.write(1, 7);
        net.settle();
        assert_eq!(net.cores[1].committed(), 4, "the epoch record and the write");
        for i in [0, 2] {
            assert_eq!(net.cores[i].state(), VNodeState::Slave);
            assert_eq!(net.logs[i], net.logs[1], "the follower holds the leader's bytes");
            assert_eq!(net.cores[i].committed(), 4);
        }
    }

    #[test]
    fn the_higher_priority_wins_among_equally_up_to_date_nodes() {
        let mut net = Net::new(&[0, 5, 0]);
        // The nodes gossip once, so each knows the others' priorities and positions.
        for i in 0..3 {
            net.tick(i, Duration::from_millis(1));
        }
        net.settle();
        // Node 0 stands first, but node 1 (higher priority, as up to date) refuses and stands.
        net.tick(0, ET * 2);
        net.settle();
        for _ in 0..3 {
            net.tick(1, Duration::from_millis(1));
            net.tick(2, Duration::from_millis(1));
            net.settle();
        }
        assert_eq!(net.leaders(), vec![1]);
    }

    #[test]
    fn a_leader_cut_off_from_its_quorum_steps_down_and_rejoins_as_a_follower() {
        let mut net = Net::new(&[0, 0, 0]);
        net.tick(0, ET * 2);
        net.settle();
        net.write(0, 1);
        net.settle();
        net.down.insert(1);
        net.down.insert(2);
        // No acknowledgements come: the lease runs out and the leader stands down.
        net.tick(0, ET * 2);
        net.tick(0, ET * 2);
        assert!(!net.cores[0].is_leader(), "a leader without a quorum steps down");
        // Node 1 and 2 elect one of them; node 0 rejoins as a follower.
        net.down.clear();
        net.queue.clear();
        // Node 0 stood too when its own timeout ran out: the next round settles it.
        for _ in 0..3 {
            net.tick(2, ET * 3);
            net.settle();
            if !net.leaders().is_empty() {
                break;
            }
        }
        assert_eq!(net.leaders(), vec![2]);
        net.tick(2, Duration::from_millis(200));
        net.settle();
        assert_eq!(net.cores[0].state(), VNodeState::Slave);
        assert_eq!(net.logs[0], net.logs[2]);
    }

    #[test]
    fn a_node_that_is_not_a_configured_member_gets_no_vote() {
        let mut net = Net::new(&[0, 0, 0]);
        let stranger = SocketAddr::from(([10, 0, 0, 9], 1112));
        let env = Envelope {
            from: stranger,
            cluster_size: 3,
            term: 5,
            msg: Msg::RequestVote { last_epoch: Some(4), durable: 100, priority: 0 },
        };
        net.input(0, Input::Message(env));
        assert!(net.queue.is_empty(), "no vote for a surplus node");
        assert!(net.refusals.iter().any(|(_, w)| w.contains("not one of this node's configured members")));
    }

    #[test]
    fn members_found_through_dns_replace_the_seeds_and_get_the_vote() {
        let mut net = Net::new(&[0, 0, 0]);
        // Node 2 restarted with a new address; DNS now names it (and node 0 itself, and a repeat).
        let moved = SocketAddr::from(([10, 0, 0, 9], 1112));
        net.input(0, Input::Peers(vec![id(1), moved, id(0), moved]));
        assert_eq!(net.cores[0].settings().peers, vec![id(1), moved]);
        // An empty answer is no answer: the members stay.
        net.input(0, Input::Peers(Vec::new()));
        assert_eq!(net.cores[0].settings().peers, vec![id(1), moved]);
        let ask = Envelope {
            from: moved,
            cluster_size: 3,
            term: 5,
            msg: Msg::RequestVote { last_epoch: Some(4), durable: 100, priority: 0 },
        };
        net.input(0, Input::Message(ask));
        let vote = net.queue.iter().find(|(to, _)| *to == index_of(moved)).map(|(_, e)| e.msg.clone());
        assert_eq!(vote, Some(Msg::Vote { granted: true }), "the new address is a member now");
        assert!(net.refusals.is_empty(), "{:?}", net.refusals);
    }

    #[test]
    fn messages_from_a_differently_sized_cluster_are_refused() {
        let mut net = Net::new(&[0, 0, 0]);
        let env = Envelope {
            from: id(1),
            cluster_size: 5,
            term: 9,
            msg: Msg::RequestVote { last_epoch: None, durable: 0, priority: 0 },
        };
        net.input(0, Input::Message(env));
        assert!(net.queue.is_empty(), "no vote for a node of another configuration");
        assert_eq!(net.cores[0].term(), 0);
        assert!(net.refusals[0].1.contains("cluster of 5 nodes"), "{:?}", net.refusals);
    }

    #[test]
    fn a_follower_refuses_to_drop_committed_records_or_more_than_max_truncation() {
        // Node 0 holds three uncommitted records of an old term: more than MaxTruncation (4
        // bytes) to drop when a leader with a different history subscribes it.
        let mut net = Net::new(&[0, 0, 0]);
        let old = Epoch { number: 1, id: [9; 16], position: 0 };
        net.logs[0] = vec![0x81, 9, 1, 1, 1, 2, 1, 3];
        net.cores[0] = Core::new(
            settings(0, 3, 0),
            Persisted { proposal: 1, epochs: vec![old], durable: 8, committed: 0 },
            Duration::ZERO,
            0,
        );
        net.down.insert(0);
        net.tick(1, ET * 2);
        net.settle();
        assert_eq!(net.leaders(), vec![1]);
        net.down.clear();
        net.tick(1, Duration::from_millis(300));
        net.settle();
        assert!(
            net.refusals.iter().any(|(i, w)| *i == 0 && w.contains("MaxTruncation")),
            "{:?}",
            net.refusals
        );
        assert_eq!(net.logs[0].len(), 8, "nothing dropped");
        // With committed records in the way, the refusal names them.
        net.cores[0] = Core::new(
            settings(0, 3, 0),
            Persisted { proposal: 1, epochs: vec![old], durable: 8, committed: 4 },
            net.cores[0].now(),
            0,
        );
        net.refusals.clear();
        net.tick(1, Duration::from_millis(300));
        net.settle();
        assert!(net.refusals.iter().any(|(i, w)| *i == 0 && w.contains("committed")), "{:?}", net.refusals);
        assert_eq!(net.logs[0].len(), 8, "nothing dropped");
    }

    #[test]
    fn a_follower_parts_where_the_leaders_records_end_before_padding() {
        // The leader's epoch 1 records end at 40; its chunk ends in padding and epoch 8 starts
        // the next chunk at 100. A follower that holds epoch-1 records up to 60 (written under
        // an earlier leader) must drop 40..60: the leader has none of them.
        let e1 = Epoch { number: 1, id: [1; 16], position: 0 };
        let e8 = Epoch { number: 8, id: [8; 16], position: 100 };
        let persisted = Persisted { proposal: 8, epochs: vec![e1, e8], durable: 102, committed: 102 };
        let mut c = Core::new(settings(0, 3, 0), persisted, Duration::ZERO, 0);
        assert_eq!(c.common_point(60, &[e1], true), Ok(60), "unknown padding counts as the epoch's");
        assert!(c.step(Input::EpochGaps(vec![(100, 40)])).is_empty());
        assert_eq!(c.common_point(60, &[e1], true), Ok(40));
        assert_eq!(c.common_point(30, &[e1], true), Ok(30));
        assert_eq!(c.common_point(101, &[e8, e1], true), Ok(101));
        // A gap before an epoch record this log does not hold is not taken.
        assert!(c.step(Input::EpochGaps(vec![(200, 150)])).is_empty());
        assert!(!c.gaps.contains_key(&200));
    }
}
