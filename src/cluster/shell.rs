//! Runs a [`Core`] for real: one driver task owns the core and feeds it, one input at a time,
//! messages from other nodes, timer ticks and the local log's durable end; it carries out the
//! effects in order against the store (`proposal.chk`, epoch records, a follower's writes and
//! truncation, shipping records, publishing) and the `Env` network. Connections carry
//! [`wire`](super::wire) frames one way each: this node listens on its replication endpoint for
//! what others send and keeps one outgoing connection per member, reconnecting after
//! [`RECONNECT_DELAY`].
//!
//! A follower's writes of the leader's records go to the [`replica`](super::replica) pipeline,
//! which reports the durable end back; the driver goes on taking messages meanwhile.
//!
//! Invariants: an effect's disk work completes before the next effect runs (a vote leaves only
//! after `proposal.chk` holds it), a follower's writes aside: they complete, and their durable
//! end reaches the core, before any other effect that touches the log and before the core reads
//! a subscription's answer (where the leader's log and this one part), so the core decides it
//! knowing its log's exact end and no stale report follows a truncation; a frame that fails its
//! checks drops the connection that carried it and reaches the core never; a full outgoing queue
//! drops messages (the protocol recovers from loss), it never blocks the driver.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::core::{
    ChunkPart, Core, Effect, Envelope, Input, MemberView, Msg, NodeId, Persisted, Settings, VNodeState,
};
use super::discovery;
use super::replica::{epoch_of, Replica};
use super::wire;
use crate::config::ClusterConfig;
use crate::env::Env;
use crate::log::record::Record;
use crate::store::Store;

/// Between reconnection attempts to a member.
pub const RECONNECT_DELAY: Duration = Duration::from_millis(500);
/// Frames queued per outgoing connection before new ones are dropped.
pub const OUTGOING_FRAMES: usize = 4096;
/// Bytes of records per [`Msg::Append`].
pub const SHIP_BATCH_BYTES: usize = 512 << 10;
/// Between checks that a resigning leader's store stopped staging.
const RESIGN_DRAIN_POLL: Duration = Duration::from_millis(2);
/// The most a resignation waits for the group being staged (a slow disk's sync).
const RESIGN_DRAIN_MAX: Duration = Duration::from_secs(2);
/// The core's clock resolution.
const TICK: Duration = Duration::from_millis(20);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the HTTP API needs to know of the cluster, kept current by the driver.
#[derive(Clone, Debug)]
pub struct Status {
    /// This node's state.
    pub state: VNodeState,
    /// The leader's client HTTP endpoint, when known.
    pub leader_http: Option<SocketAddr>,
    /// Every member (this node first), with whether it is alive.
    pub members: Vec<(NodeId, Option<MemberView>, bool)>,
    /// The term.
    pub term: u64,
    /// The commit position this node's core knows: on a leader, what a quorum holds durably (its
    /// store publishes up to it once it has read it back); on a follower, what its leader said.
    pub committed: u64,
    /// The last refusal (a reason the node protects its data), if any.
    pub refusal: Option<String>,
    /// Until when (monotonic) this node surely leads ([`Core::lease_until`]).
    pub lease_until: Option<Duration>,
    /// What this node has seen of elections.
    pub elections: crate::cluster::core::Elections,
}

/// A running cluster node.
pub struct Cluster {
    env: Env,
    store: Arc<Store>,
    cfg: ClusterConfig,
    inbox: mpsc::UnboundedSender<Input>,
    outgoing: Mutex<BTreeMap<NodeId, mpsc::Sender<Vec<u8>>>>,
    status: Mutex<Status>,
    mastered: crate::env::Watermark,
    /// Set by [`Cluster::fatal`]: the driver stops and incoming messages are dropped.
    stopped: std::sync::atomic::AtomicBool,
    /// Where committed records are published ([`Effect::Commit`]), one release after another
    /// in the order the core decided them.
    release_lane: Box<dyn crate::env::Lane>,
    /// The release lane's figures, for metrics.
    pub release_stats: Arc<crate::metrics::lane::LaneStats>,
    /// A follower's writes of the leader's records.
    replica: Arc<Replica>,
    /// Members already reported as not replication endpoints, with whether they answered HTTP
    /// ([`Cluster::warn_foreign`]: once per member and cause).
    foreign: Mutex<std::collections::BTreeSet<(NodeId, bool)>>,
}

/// [`Input::EpochGaps`] of the epoch records at `positions`: those whose chunk starts after padding.
fn epoch_gaps(store: &Store, positions: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let log = store.log();
    positions.filter_map(|p| Some((p, log.records_end_before(p))).filter(|(p, end)| end < p)).collect()
}

/// Queues `next` and, when it brings epoch records, where the records before them end
/// ([`Input::EpochGaps`]) right after it, before any message is taken in.
fn queue(store: &Store, pending: &mut std::collections::VecDeque<Input>, next: Input) {
    let gaps = match &next {
        Input::EpochWritten { epoch, .. } => epoch_gaps(store, std::iter::once(epoch.position)),
        Input::Durable { epochs, .. } => epoch_gaps(store, epochs.iter().map(|e| e.position)),
        _ => Vec::new(),
    };
    pending.push_back(next);
    if !gaps.is_empty() {
        pending.push_back(Input::EpochGaps(gaps));
    }
}

impl Cluster {
    /// Starts the cluster side of a node whose store was recovered (not opened: nothing is
    /// written before an election). `http` is this node's client endpoint, `fresh` whether its
    /// database was created empty at this start.
    pub async fn start(
        env: Env,
        store: Arc<Store>,
        cfg: ClusterConfig,
        http: SocketAddr,
        instance: [u8; 16],
        fresh: bool,
    ) -> std::io::Result<Arc<Cluster>> {
        let listener = env.net.listen(cfg.replication_addr).await?;
        let bound = listener.local_addr()?;
        let me =
            discovery::advertised(&env, &cfg.advertise_replication, bound, None, "the replication endpoint")
                .await?;
        let http = discovery::advertised(&env, &cfg.advertise_http, http, Some(me.ip()), "the HTTP endpoint")
            .await?;
        let s2 = store.clone();
        let (epochs, proposal) = env
            .blocking(move || {
                let epochs = s2.load_epochs();
                (epochs, s2.log().checkpoints.proposal.read())
            })
            .await;
        let epochs = epochs.map_err(|e| std::io::Error::other(e.to_string()))?;
        let log = store.log();
        let persisted = Persisted {
            proposal: proposal.max(0) as u64,
            epochs: epochs.iter().map(epoch_of).collect(),
            durable: log.durable(),
            committed: log.committed(),
        };
        let settings = Settings {
            me,
            peers: cfg.gossip_seeds.iter().copied().filter(|p| *p != me).collect(),
            cluster_size: cfg.cluster_size,
            read_only: cfg.read_only_replica,
            priority: cfg.node_priority,
            election_timeout: cfg.election_timeout,
            heartbeat_interval: cfg.heartbeat_interval,
            max_truncation: cfg.max_truncation,
            gossip_interval: cfg.gossip_interval,
            gossip_timeout: cfg.gossip_timeout,
            dead_member_removal: cfg.dead_member_removal,
            http: Some(http),
            instance,
            allow_surplus: cfg.allow_surplus_nodes,
            fresh,
        };
        tracing::info!(
            me = %me,
            size = cfg.cluster_size,
            epochs = persisted.epochs.len(),
            durable = persisted.durable,
            committed = persisted.committed,
            "starting the cluster node"
        );
        let mut core = Core::new(settings, persisted, env.clock.monotonic(), env.random_u64());
        let gaps = epoch_gaps(&store, epochs.iter().map(|e| e.log_position));
        if !gaps.is_empty() {
            let effects = core.step(Input::EpochGaps(gaps));
            debug_assert!(effects.is_empty(), "telling the epoch gaps has no effect");
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let replica_store = store.clone();
        let (release_lane, release_stats) =
            crate::metrics::lane::metered(&env, "release", env.rt.lane("annal-release"));
        let cluster = Arc::new_cyclic(|me: &Weak<Cluster>| Cluster {
            status: Mutex::new(Status {
                state: core.state(),
                leader_http: None,
                members: core.gossip_members(),
                term: core.term(),
                committed: core.committed(),
                refusal: None,
                lease_until: None,
                elections: core.elections(),
            }),
            env: env.clone(),
            store,
            cfg,
            inbox: tx,
            outgoing: Mutex::new(BTreeMap::new()),
            mastered: crate::env::Watermark::new(0),
            stopped: std::sync::atomic::AtomicBool::new(false),
            release_lane,
            release_stats,
            foreign: Mutex::default(),
            replica: {
                let me = me.clone();
                Replica::new(
                    &env,
                    replica_store,
                    Box::new(move |why| {
                        if let Some(me) = me.upgrade() {
                            me.fatal(why)
                        }
                    }),
                )
            },
        });
        env.rt.spawn(Box::pin(cluster.clone().accept(listener)));
        env.rt.spawn(Box::pin(cluster.clone().ticks()));
        env.rt.spawn(Box::pin(cluster.clone().watch_durable()));
        env.rt.spawn(Box::pin(cluster.clone().watch_written()));
        env.rt.spawn(Box::pin(cluster.clone().drive(core, rx)));
        if let Some(dns) = cluster.cfg.dns.clone() {
            let (seeds, every) = (cluster.cfg.gossip_seeds.clone(), cluster.cfg.gossip_interval);
            let to = Arc::downgrade(&cluster);
            let tell = move |peers| {
                to.upgrade().is_some_and(|c| !c.is_stopped() && c.inbox.send(Input::Peers(peers)).is_ok())
            };
            env.rt.spawn(Box::pin(discovery::discover(env.clone(), dns, seeds, me, every, tell)));
        }
        Ok(cluster)
    }

    /// The cluster as the HTTP API sees it.
    pub fn status(&self) -> Status {
        lock(&self.status).clone()
    }

    /// The follower side's write pipeline (its figures, for metrics).
    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }

    /// This node's state (without copying the rest of [`Cluster::status`]).
    pub fn state(&self) -> VNodeState {
        lock(&self.status).state
    }

    /// Asks this node to resign its leadership (`POST /admin/node/resign`): refused unless it
    /// is the leader; the hand-over happens in the background.
    pub fn resign(&self) -> Result<(), String> {
        let state = self.status().state;
        match state {
            VNodeState::Master | VNodeState::PreMaster | VNodeState::ResigningLeader => {
                // The store stages nothing new from now on; the driver lets what it was staging
                // be written before the core resigns (`wait_for_staging`).
                self.store.set_resigning();
                let _ = self.inbox.send(Input::Resign);
                Ok(())
            }
            other => Err(format!("only the leader can resign; this node is {}", other.name())),
        }
    }

    /// The node is stopping: it never stands for election again ([`Input::Leave`]), and says
    /// so in gossip (`ShuttingDown`), so a leader handing over does not name it.
    pub fn leave(&self) {
        let _ = self.inbox.send(Input::Leave);
    }

    /// Changes this node's priority in elections until it restarts
    /// (`POST /admin/node/priority/{n}`); gossip carries it to the others.
    pub fn set_priority(&self, priority: i64) {
        let _ = self.inbox.send(Input::SetPriority(priority));
    }

    /// The configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    async fn ticks(self: Arc<Self>) {
        loop {
            self.env.rt.sleep(TICK).await;
            if self.is_stopped() || self.inbox.send(Input::Tick(self.env.clock.monotonic())).is_err() {
                return;
            }
        }
    }

    /// Tells the core of a leader's groups once its store counts them durable
    /// ([`Input::Synced`]: the core counts them only while it leads).
    async fn watch_durable(self: Arc<Self>) {
        let mut seen = self.store.durable_watermark().get();
        loop {
            seen = self.store.durable_watermark().wait_until(|v| v > seen).await;
            if self.is_stopped() || self.inbox.send(Input::Synced { end: seen }).is_err() {
                return;
            }
        }
    }

    /// Tells the core of a leader's groups as soon as they are written, before their sync, so
    /// it ships them to the followers while the leader syncs them.
    async fn watch_written(self: Arc<Self>) {
        let mut seen = self.store.written_watermark().get();
        loop {
            seen = self.store.written_watermark().wait_until(|v| v > seen).await;
            if self.is_stopped() || self.inbox.send(Input::Written { end: seen }).is_err() {
                return;
            }
        }
    }

    async fn accept(self: Arc<Self>, mut listener: Box<dyn crate::env::Listener>) {
        loop {
            match listener.accept().await {
                Ok((conn, peer)) => {
                    let me = self.clone();
                    self.env.rt.spawn(Box::pin(async move {
                        let Ok(conn) = crate::tls::peer::accept(&me.env, &me.cfg.transport, conn, peer).await
                        else {
                            return;
                        };
                        me.read_conn(conn, peer).await
                    }));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a replication connection failed");
                    self.env.rt.sleep(RECONNECT_DELAY).await;
                }
            }
        }
    }

    async fn read_conn(self: Arc<Self>, mut conn: Box<dyn crate::env::Conn>, peer: SocketAddr) {
        loop {
            match wire::read_frame(&mut conn).await {
                Ok(env) => {
                    if self.is_stopped() || self.inbox.send(Input::Message(env)).is_err() {
                        return;
                    }
                }
                Err(wire::ReadError::Io(_)) => return,
                Err(wire::ReadError::Wire(e)) => {
                    tracing::warn!(peer = %peer, error = %e, "refusing a frame from another node; dropping its connection");
                    return;
                }
            }
        }
    }

    /// Queues a frame for `to`, starting its connection on first use.
    fn send(self: &Arc<Self>, to: NodeId, frame: Vec<u8>) {
        let tx = {
            let mut out = lock(&self.outgoing);
            out.entry(to)
                .or_insert_with(|| {
                    let (tx, rx) = mpsc::channel(OUTGOING_FRAMES);
                    self.env.rt.spawn(Box::pin(self.clone().write_conn(to, rx)));
                    tx
                })
                .clone()
        };
        // A full queue drops the message: the protocol recovers from loss.
        let _ = tx.try_send(frame);
    }

    /// Warns, once per member and cause, that `to` is not a replication endpoint: an outgoing
    /// connection carries frames one way, so a member never writes on it; whatever answers
    /// (an HTTP server's error page, say) is something else listening at that address.
    fn warn_foreign(&self, to: NodeId, answer: &[u8]) {
        let http = answer.starts_with(b"HTTP/");
        if !lock(&self.foreign).insert((to, http)) {
            return;
        }
        if http {
            tracing::warn!(
                peer = %to,
                "the cluster member at {to} answered with HTTP: it is not a replication endpoint; \
                 is this gossip seed a node's HTTP port instead of its replication port?"
            );
        } else {
            tracing::warn!(
                peer = %to,
                bytes = answer.len(),
                "the cluster member at {to} sent bytes on a connection that carries frames one way: \
                 it is not an Annal replication endpoint; check the gossip seeds"
            );
        }
    }

    async fn write_conn(self: Arc<Self>, to: NodeId, mut rx: mpsc::Receiver<Vec<u8>>) {
        let mut reported = false;
        loop {
            let conn =
                match crate::tls::peer::connect(&self.env, &self.cfg.transport, to, self.cfg.peer_name())
                    .await
                {
                    Ok(c) => {
                        if reported {
                            tracing::info!(peer = %to, "reached a cluster member again");
                        }
                        reported = false;
                        c
                    }
                    Err(e) => {
                        if !reported {
                            tracing::warn!(peer = %to, error = %e, "cannot reach a cluster member; retrying");
                            reported = true;
                        }
                        // What queued meanwhile is stale: drop it.
                        while rx.try_recv().is_ok() {}
                        self.env.rt.sleep(RECONNECT_DELAY).await;
                        continue;
                    }
                };
            // Nothing comes back on this connection from a member: read what does, to say so,
            // until the connection is given up (`_closing` drops).
            let (mut back, mut conn) = tokio::io::split(conn);
            let (_closing, closed) = tokio::sync::oneshot::channel::<()>();
            let me = self.clone();
            self.env.rt.spawn(Box::pin(async move {
                use tokio::io::AsyncReadExt;
                let mut buf = [0u8; 64];
                tokio::select! {
                    biased;
                    _ = closed => {}
                    r = back.read(&mut buf) => {
                        if let Ok(n @ 1..) = r {
                            me.warn_foreign(to, &buf[..n]);
                        }
                    }
                }
            }));
            loop {
                let Some(frame) = rx.recv().await else { return };
                if conn.write_all(&frame).await.is_err() {
                    break;
                }
                // The simulator may send a frame twice, as a retransmitting network could: the
                // protocol takes duplicates (stale positions and subscriptions are ignored).
                if crate::buggify!() && conn.write_all(&frame).await.is_err() {
                    break;
                }
                // Send what queued meanwhile in the same flush.
                let mut failed = false;
                while let Ok(more) = rx.try_recv() {
                    if conn.write_all(&more).await.is_err() {
                        failed = true;
                        break;
                    }
                }
                if failed || conn.flush().await.is_err() {
                    break;
                }
            }
        }
    }

    async fn drive(self: Arc<Self>, mut core: Core, mut rx: mpsc::UnboundedReceiver<Input>) {
        let mut was = core.state();
        let mut pending: std::collections::VecDeque<Input> = std::collections::VecDeque::new();
        let mut drained = false;
        loop {
            if self.is_stopped() {
                return;
            }
            let input = match pending.pop_front() {
                Some(i) => i,
                None => match self.replica.take_report() {
                    Some(report) => {
                        queue(&self.store, &mut pending, report);
                        continue;
                    }
                    None => match rx.try_recv() {
                        Ok(i) => i,
                        Err(_) => tokio::select! {
                            biased;
                            () = self.replica.ready() => continue,
                            i = rx.recv() => match i {
                                Some(i) => i,
                                None => return,
                            },
                        },
                    },
                },
            };
            if self.is_stopped() {
                return;
            }
            // A leader resigns knowing where its writes end (`wait_for_staging`).
            if matches!(input, Input::Resign) && core.is_leader() && !std::mem::take(&mut drained) {
                self.wait_for_staging().await;
                pending.push_front(Input::Resign);
                pending.push_front(Input::Written { end: self.store.written_watermark().get() });
                drained = true;
                continue;
            }
            // Where the leader's log and this one part is decided knowing this log's exact end.
            if matches!(&input, Input::Message(Envelope { msg: Msg::Subscribed { .. }, .. }))
                && self.settle(&mut pending, None).await
            {
                // The durable end of the writes in flight reaches the core first.
                pending.push_back(input);
                continue;
            }
            let effects = core.step(input);
            for e in effects {
                if self.is_stopped() {
                    // Nothing that depends on a failed write may leave.
                    return;
                }
                match &e {
                    // A follower's write joins the pipeline; a send or a release does not touch
                    // the log's end (a follower publishes only what its core knows is durable).
                    Effect::Send(..) | Effect::Refused(_) | Effect::Commit { .. } => {}
                    Effect::Write { part: None, .. } => {}
                    Effect::Truncate { to } => {
                        self.settle(&mut pending, Some(*to)).await;
                    }
                    _ => {
                        self.settle(&mut pending, None).await;
                    }
                }
                if self.is_stopped() {
                    return;
                }
                if let Some(next) = self.carry_out(&core, e).await {
                    queue(&self.store, &mut pending, next);
                }
            }
            if self.is_stopped() {
                return;
            }
            let state = core.state();
            if state != was {
                tracing::info!(
                    term = core.term(),
                    from = was.name(),
                    to = state.name(),
                    "node state changed"
                );
                // A resigning leader still leads its store: what it took before resigning
                // commits (the HTTP gate takes nothing new); it stops leading when it hands over.
                let leads = |s: VNodeState| matches!(s, VNodeState::Master | VNodeState::ResigningLeader);
                if state == VNodeState::Master {
                    self.store.set_leading(true);
                    self.mastered.raise(core.term());
                } else if leads(was) && !leads(state) {
                    self.store.set_leading(false);
                }
                was = state;
            }
            // The members' views are built once per input (this runs for every message).
            let members = core.gossip_members();
            let leader_http = core.leader().and_then(|l| {
                if l == core.settings().me {
                    core.settings().http
                } else {
                    members.iter().find(|(id, _, _)| *id == l).and_then(|(_, v, _)| v.as_ref()?.http)
                }
            });
            let mut st = lock(&self.status);
            st.state = state;
            st.term = core.term();
            st.committed = core.committed();
            st.leader_http = leader_http;
            st.members = members;
            st.lease_until = core.lease_until();
            st.elections = core.elections();
        }
    }

    /// Raised to the term each time this node becomes `Master` (the node then sees to what only
    /// a leader writes, such as the default users).
    pub fn master_terms(&self) -> &crate::env::Watermark {
        &self.mastered
    }

    /// Carries out one effect; returns the input it produces, if any.
    async fn carry_out(self: &Arc<Self>, core: &Core, e: Effect) -> Option<Input> {
        match e {
            Effect::Send(to, env) => {
                self.send(to, wire::encode(&env));
                None
            }
            Effect::Persist { proposal } => {
                let store = self.store.clone();
                let r = self
                    .env
                    .blocking(move || store.log().checkpoints.proposal.write_durable(proposal as i64))
                    .await;
                if let Err(e) = r {
                    // Without the vote on disk nothing that depends on it may leave: stop.
                    self.fatal(format!("cannot write proposal.chk: {e}"));
                }
                None
            }
            Effect::WriteEpoch { number } => {
                let store = self.store.clone();
                let leader = core.settings().instance;
                match self.env.blocking(move || store.write_epoch(number, leader)).await {
                    Ok((rec, end)) => {
                        tracing::info!(number, position = rec.log_position, "wrote the term's epoch record");
                        Some(Input::EpochWritten { epoch: epoch_of(&rec), end })
                    }
                    Err(e) => {
                        self.fatal(format!("cannot write the epoch record: {e}"));
                        None
                    }
                }
            }
            Effect::Truncate { to } => {
                let store = self.store.clone();
                if let Err(e) = self.env.blocking(move || store.truncate_tail(to)).await {
                    self.fatal(format!("cannot truncate the log to {to}: {e}"));
                }
                None
            }
            Effect::Write { end, data, part: None, .. } => {
                self.replica.push(data, end);
                None
            }
            Effect::Write { from, end, data, part: Some(p) } => {
                let store = self.store.clone();
                match self.env.blocking(move || store.replicate_chunk(p.start, p.end, p.last, &data)).await {
                    Ok(Some((durable, epochs))) => {
                        tracing::info!(from, end = durable, "received a whole chunk from the leader");
                        Some(Input::Durable { end: durable, epochs: epochs.iter().map(epoch_of).collect() })
                    }
                    Ok(None) => None,
                    Err(e) => {
                        tracing::error!(from, end, error = %e, "receiving a whole chunk from the leader failed");
                        self.fatal(format!("cannot write a chunk received from the leader: {e}"));
                        None
                    }
                }
            }
            Effect::Ship { to, subscription, from, upto, commit } => {
                let store = self.store.clone();
                // What was just written is in memory: read on this task then, without two thread
                // hand-offs; on the blocking pool when a read would wait for the device.
                let read = self.env.read_job(move || read_shipment(&store, from, upto)).await;
                match read {
                    Ok(shipment) => {
                        let end = shipment.end;
                        for (data, part, piece_end) in shipment.pieces {
                            let env = Envelope {
                                from: core.settings().me,
                                cluster_size: core.settings().cluster_size as u32,
                                term: core.term(),
                                msg: Msg::Append {
                                    subscription,
                                    from,
                                    end: piece_end,
                                    data,
                                    leader_end: core.durable(),
                                    commit,
                                    lease: core.now().as_micros() as u64,
                                    part,
                                },
                            };
                            self.send(to, wire::encode(&env));
                        }
                        Some(Input::Shipped { to, subscription, end })
                    }
                    Err(e @ crate::log::LogError::Corrupt { .. }) => {
                        // A leader whose own log is damaged below its end cannot bring anyone up
                        // to date (its log only looked longest): it stops taking part, so the
                        // others elect a member that can, instead of waiting on it for good.
                        self.fatal(format!("cannot ship records from {from}: {e}"));
                        None
                    }
                    Err(e) => {
                        tracing::error!(to = %to, from, error = %e, "cannot read records to ship; retrying");
                        // Nothing was shipped: the core tries again after a pause (a read error
                        // may pass; without this report it would wait for this shipment forever).
                        let (me, pause) = (self.clone(), RECONNECT_DELAY);
                        self.env.rt.spawn(Box::pin(async move {
                            me.env.rt.sleep(pause).await;
                            let _ = me.inbox.send(Input::Shipped { to, subscription, end: from });
                        }));
                        None
                    }
                }
            }
            Effect::Commit { upto } => {
                // The status shows the commit before any message that carries it can leave.
                {
                    let mut st = lock(&self.status);
                    st.committed = st.committed.max(upto);
                }
                let store = self.store.clone();
                let released = self.release_lane.run(Box::new(move || {
                    if let Err(e) = store.release(upto) {
                        tracing::error!(upto, error = %e, "publishing committed records failed");
                    }
                }));
                // A leader waits: its answers and its opening for writes (once its epoch record
                // commits) come after the release. A follower goes on staging, flushing and
                // acknowledging the leader's records while it publishes: its acknowledgements
                // are on the path of every write; its publishing only on that of its own readers.
                // (Releases stay in order on their lane; a truncation never reaches below what
                // the core committed, so it never meets a release.)
                if core.is_leader() {
                    released.await;
                } else {
                    drop(released);
                }
                None
            }
            Effect::Refused(why) => {
                tracing::error!("{why}");
                lock(&self.status).refusal = Some(why);
                None
            }
        }
    }

    /// Before a leader resigns: waits until its store, which stages nothing new any more
    /// ([`Store::set_resigning`]), has written the group it was staging; the driver then tells
    /// the core where its writes end, so the core hands over only once all of them committed
    /// and no write it took is cut off with its leadership.
    async fn wait_for_staging(&self) {
        let mut waited = Duration::ZERO;
        while self.store.is_staging() && waited < RESIGN_DRAIN_MAX {
            self.env.rt.sleep(RESIGN_DRAIN_POLL).await;
            waited += RESIGN_DRAIN_POLL;
        }
    }

    /// Waits for the follower's writes in flight to be durable and queues their report for the
    /// core; returns whether it queued one. Before a truncation to `truncating`, a report past
    /// it is dropped: it names records the truncation removes (none can be there: the core
    /// learnt its exact end before it read the answer that truncates).
    async fn settle(&self, pending: &mut std::collections::VecDeque<Input>, truncating: Option<u64>) -> bool {
        self.replica.settle().await;
        match self.replica.take_report() {
            Some(Input::Durable { end, .. }) if truncating.is_some_and(|to| end > to) => false,
            Some(report) => {
                queue(&self.store, pending, report);
                true
            }
            None => false,
        }
    }

    /// A local failure the node cannot vouch past (its disk failed): it stops taking part in
    /// the cluster (no votes, no acknowledgements, no candidacy), keeps its data as it is, and
    /// says why; the others go on with their quorum. A restart brings it back.
    fn fatal(&self, why: String) {
        tracing::error!("{why}; this node stops taking part in the cluster until it is restarted");
        self.stopped.store(true, std::sync::atomic::Ordering::Release);
        {
            let mut st = lock(&self.status);
            st.refusal = Some(why);
            st.state = VNodeState::ShuttingDown;
            st.leader_http = None;
        }
        self.store.set_leading(false);
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// What one [`Effect::Ship`] sends: pieces (records back to back, the chunk piece they are if
/// any, the `end` their message carries) and the position after all of them.
struct Shipment {
    pieces: Vec<(Bytes, Option<ChunkPart>, u64)>,
    end: u64,
}

/// Reads what to ship from `from`: whole written records, durable or not (at most
/// [`SHIP_BATCH_BYTES`], at least one record, none at or past `upto`); or, when `from` starts a chunk the leader scavenged,
/// every record that chunk kept, in pieces, to be put in service whole.
fn read_shipment(store: &Store, from: u64, upto: u64) -> Result<Shipment, crate::log::LogError> {
    let log = store.log();
    if let Some((chunk, lo, hi)) = log.chunk_range(from).filter(|(c, _, _)| c.is_scavenged()) {
        if from != lo {
            return Err(crate::log::LogError::Invalid(format!(
                "the follower's log ends at {from}, inside a chunk this node scavenged ({lo}..{hi}); \
                 restore that follower from a backup"
            )));
        }
        let (start, end) = (chunk.header.start, chunk.header.end);
        let mut pieces = Vec::new();
        let mut buf = Vec::new();
        let mut scan = log.scan_durable(lo).until(hi);
        while let Some(r) = scan.next_with_frame() {
            let (_, frame) = r?;
            if buf.len() + frame.len() > SHIP_BATCH_BYTES && !buf.is_empty() {
                pieces.push((
                    Bytes::from(std::mem::take(&mut buf)),
                    Some(ChunkPart { start, end, last: false }),
                    from,
                ));
            }
            buf.extend_from_slice(&frame);
        }
        pieces.push((Bytes::from(buf), Some(ChunkPart { start, end, last: true }), hi));
        return Ok(Shipment { pieces, end: hi });
    }
    // A leader ships what it wrote, synced or not (its own sync runs meanwhile).
    let mut scan = log.scan_written(from, upto);
    let mut out = Vec::new();
    let mut end = from;
    let mut expect = from;
    while let Some(r) = scan.next_with_frame() {
        let (rec, frame) = r?;
        let at = match &rec {
            Record::Event(e) => e.log_position,
            Record::Epoch(e) => e.log_position,
        };
        if at != expect && !(at > expect && at % log.chunk_size() == 0) {
            // The next chunk was scavenged: the next shipment sends it whole.
            break;
        }
        out.extend_from_slice(&frame);
        end = scan.position();
        expect = end;
        if out.len() >= SHIP_BATCH_BYTES {
            break;
        }
    }
    if out.is_empty() && end == from {
        // Nothing but the rest of a completed chunk lies before `upto` (or the next chunk starts
        // a scavenged one): move to the next chunk.
        let next = (from / log.chunk_size() + 1) * log.chunk_size();
        end = if log.chunk_range(from).is_some_and(|(c, _, _)| !c.is_scavenged()) && next <= upto {
            next
        } else {
            upto.max(from)
        };
    }
    let pieces = vec![(Bytes::from(out), None, end)];
    Ok(Shipment { pieces, end })
}
