//! BUGGIFY sites and test-only bug switches, for the deterministic simulator (`sim/`).
//!
//! [`buggify!`](crate::buggify!) marks a place in node code where the simulator may push a rare
//! but *correct* path (a smaller commit group, an early chunk completion, an early index flush).
//! It is the constant `false` unless the crate is built with the `sim` feature **and** the
//! simulation enabled it for the current run ([`enable`]). Within a run, each site is switched on
//! or off once, when first reached (25% of sites on), and an active site fires with a small
//! probability (5%); every draw comes from the run's seed, so a seed replays exactly.
//!
//! [`Bug`] switches deliberately break a durability or safety rule (acknowledge before fsync,
//! skip the record checksum, …). They exist only to prove that the simulator's invariants catch
//! such bugs; nothing turns them on except a simulation run that asks for them ([`set_bugs`]).
//! Without the `sim` feature [`bug`] is the constant `false`.
//!
//! [`acknowledged`] tells the simulator, through a hook it installs ([`on_acknowledged`]), each
//! group of writes a single node acknowledges, so a checker can compare it with what the simulated
//! disk holds durably at that instant. Without the `sim` feature it does nothing.
//!
//! Invariants: the state is per thread (the simulator runs a whole seed on one thread, and several
//! seeds may run at once on different threads), and a run that did not call [`enable`] or
//! [`set_bugs`] sees neither buggify sites nor bugs.

/// Whether this BUGGIFY site fires now (always `false` outside an enabled simulation).
#[cfg(feature = "sim")]
#[macro_export]
macro_rules! buggify {
    () => {
        $crate::buggify::fire(concat!(file!(), ":", line!()))
    };
}

/// Whether this BUGGIFY site fires now (always `false` outside an enabled simulation).
#[cfg(not(feature = "sim"))]
#[macro_export]
macro_rules! buggify {
    () => {
        false
    };
}

/// A deliberately injected bug, each breaking one rule the simulator checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Bug {
    /// The log acknowledges a commit without syncing the chunk data (only `writer.chk` is synced).
    AckBeforeFsync,
    /// Record checksums are not verified on read.
    SkipCrc,
    /// The `db/` directory is not synced after a new chunk file is renamed into place.
    SkipChunkDirFsync,
    /// An append with an explicit expected version below the current one is answered as an
    /// idempotent retry without comparing the event ids.
    IdempotentWithoutIds,
    /// A failed background index flush panics instead of being retried later.
    PanicOnIndexFlushError,
    /// Recovery takes the end of the log from `chaser.chk` (not synced per commit) instead of
    /// `writer.chk`, silently dropping acknowledged appends after a power loss.
    RecoverToChaser,
    /// Online truncation zeroes the dropped tail but leaves `writer.chk` where it was, so a
    /// crash before the next commit leaves a checkpoint that names zeroed bytes.
    TruncateKeepsWriterChk,
    /// A cluster leader commits what it holds durably itself, without waiting for a quorum.
    AckBeforeQuorum,
    /// A vote is sent without `proposal.chk` being written first, so a restarted node may vote
    /// twice in one term.
    VoteNotDurable,
    /// A follower keeps a divergent tail instead of truncating it when it joins a leader.
    KeepDivergentTail,
    /// A follower publishes (serves) everything it holds durably, committed or not.
    FollowerPublishesUncommitted,
    /// The new-cluster exception of the fresh-node voting rule is lost: a node whose database
    /// was created empty votes only after it has followed a leader, so a cluster whose members
    /// all start empty never elects anyone.
    NewClusterNeverVotes,
    /// A backup copies the log's chunks before its checkpoints, so `chaser.chk` may name log
    /// data the copied chunks do not hold.
    BackupChunksBeforeCheckpoints,
    /// A redaction switch installs the candidate chunk without comparing it with the redaction
    /// the log computes itself.
    SwitchWithoutValidation,
    /// Connections from other nodes accept any client certificate: the chain to the trusted
    /// roots is not checked (the reserved common name still is).
    PeerTrustsAnyClient,
    /// A certificate reload puts the new set in force for the HTTP API and accepted node
    /// connections but keeps dialling other nodes with the old certificate.
    ReloadKeepsPeerClient,
    /// A persistent subscription drops a message it should retry (after a nack with Retry, a
    /// time-out or a lapsed consumer) as if it had been handled.
    SubRetryDrops,
    /// A persistent subscription parks a message only after `maxRetryCount + 1` retries, one
    /// delivery more than allowed.
    SubRetryCountOffByOne,
    /// `replayParked` truncates the parked stream without delivering its messages again.
    SubReplayDrops,
    /// A persistent subscription's checkpoint is the last event read, whether or not every
    /// message below it is done.
    SubCheckpointAhead,
    /// Pinned gives a stream's messages to the consumer its bucket falls to, even while another
    /// consumer still holds messages of that stream.
    SubPinnedIgnoresHolder,
    /// The commit pipeline's checkpoint stage, after a failed flush of `writer.chk`, still
    /// acknowledges the groups that waited behind the one it was for.
    AckAfterFailedCheckpoint,
    /// A projection that restarts from an older checkpoint writes again the emits its output
    /// streams already hold (it ignores their last tags).
    ProjectionReemitsCovered,
    /// A JavaScript partition loaded from a checkpoint that a newer one follows does not write
    /// the loaded one again before its next checkpoint (`$maxCount` may then drop the only
    /// checkpoint a restart can use).
    PartitionCheckpointNotKept,
    /// Recovery of a cluster node's log adopts every whole record synced past `writer.chk`,
    /// also the first records of an atomic write whose last ones did not reach the disk.
    AdoptPartialWrite,
    /// A cluster leader's group that wrote nothing (every write refused), queued behind a
    /// waiting group, ends at the committed position instead of where it starts: the checkpoint
    /// stage's target falls below the waiting group, which is never counted durable.
    EmptyGroupEndsAtCommitted,
    /// A scavenge answers its start before recording it, and records its history in this
    /// node's own store, as a leader or single node would: on a follower the run fails at once
    /// and its `$scavengeStarted` is never written.
    ScavengeHistoryLocal,
}

impl Bug {
    /// Every bug switch.
    pub const ALL: [Bug; 27] = [
        Bug::AckBeforeFsync,
        Bug::SkipCrc,
        Bug::SkipChunkDirFsync,
        Bug::IdempotentWithoutIds,
        Bug::PanicOnIndexFlushError,
        Bug::RecoverToChaser,
        Bug::TruncateKeepsWriterChk,
        Bug::AckBeforeQuorum,
        Bug::VoteNotDurable,
        Bug::KeepDivergentTail,
        Bug::FollowerPublishesUncommitted,
        Bug::NewClusterNeverVotes,
        Bug::BackupChunksBeforeCheckpoints,
        Bug::SwitchWithoutValidation,
        Bug::PeerTrustsAnyClient,
        Bug::ReloadKeepsPeerClient,
        Bug::SubRetryDrops,
        Bug::SubRetryCountOffByOne,
        Bug::SubReplayDrops,
        Bug::SubCheckpointAhead,
        Bug::SubPinnedIgnoresHolder,
        Bug::AckAfterFailedCheckpoint,
        Bug::ProjectionReemitsCovered,
        Bug::PartitionCheckpointNotKept,
        Bug::AdoptPartialWrite,
        Bug::EmptyGroupEndsAtCommitted,
        Bug::ScavengeHistoryLocal,
    ];

    /// The switch's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Bug::AckBeforeFsync => "ack-before-fsync",
            Bug::SkipCrc => "skip-crc",
            Bug::SkipChunkDirFsync => "skip-chunk-dir-fsync",
            Bug::IdempotentWithoutIds => "idempotent-without-ids",
            Bug::PanicOnIndexFlushError => "panic-on-index-flush-error",
            Bug::RecoverToChaser => "recover-to-chaser",
            Bug::TruncateKeepsWriterChk => "truncate-keeps-writer-chk",
            Bug::AckBeforeQuorum => "ack-before-quorum",
            Bug::VoteNotDurable => "vote-not-durable",
            Bug::KeepDivergentTail => "keep-divergent-tail",
            Bug::FollowerPublishesUncommitted => "follower-publishes-uncommitted",
            Bug::NewClusterNeverVotes => "new-cluster-never-votes",
            Bug::BackupChunksBeforeCheckpoints => "backup-chunks-before-checkpoints",
            Bug::SwitchWithoutValidation => "switch-without-validation",
            Bug::PeerTrustsAnyClient => "peer-trusts-any-client",
            Bug::ReloadKeepsPeerClient => "reload-keeps-peer-client",
            Bug::SubRetryDrops => "sub-retry-drops",
            Bug::SubRetryCountOffByOne => "sub-retry-count-off-by-one",
            Bug::SubReplayDrops => "sub-replay-drops",
            Bug::SubCheckpointAhead => "sub-checkpoint-ahead",
            Bug::SubPinnedIgnoresHolder => "sub-pinned-ignores-holder",
            Bug::AckAfterFailedCheckpoint => "ack-after-failed-checkpoint",
            Bug::ProjectionReemitsCovered => "projection-reemits-covered",
            Bug::PartitionCheckpointNotKept => "partition-checkpoint-not-kept",
            Bug::AdoptPartialWrite => "adopt-partial-write",
            Bug::EmptyGroupEndsAtCommitted => "empty-group-ends-at-committed",
            Bug::ScavengeHistoryLocal => "scavenge-history-local",
        }
    }

    /// Parses a [`Bug::name`].
    pub fn parse(s: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == s)
    }

    #[cfg(feature = "sim")]
    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// Whether the bug switch `b` is on (always `false` without the `sim` feature).
#[cfg(not(feature = "sim"))]
#[inline(always)]
pub const fn bug(_b: Bug) -> bool {
    false
}

/// Reports that a single node acknowledged the group of writes at log positions `start..end`
/// (nothing without the `sim` feature).
#[cfg(not(feature = "sim"))]
#[inline(always)]
pub fn acknowledged(_start: u64, _end: u64) {}

#[cfg(feature = "sim")]
pub use self::sim::*;

#[cfg(feature = "sim")]
mod sim {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::Bug;

    /// Share of sites switched on per run.
    const SITE_ACTIVE: f64 = 0.25;
    /// Probability that an active site fires when reached.
    const SITE_FIRES: f64 = 0.05;

    struct State {
        rng: ChaCha8Rng,
        sites: BTreeMap<&'static str, bool>,
        fired: u64,
    }

    /// What the simulator runs for each acknowledged group ([`on_acknowledged`]).
    pub type AckHook = Box<dyn Fn(u64, u64)>;

    thread_local! {
        static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
        static BUGS: Cell<u32> = const { Cell::new(0) };
        static ACK_HOOK: RefCell<Option<AckHook>> = const { RefCell::new(None) };
    }

    /// Installs (or, with `None`, removes) this thread's hook for [`acknowledged`].
    pub fn on_acknowledged(hook: Option<AckHook>) {
        ACK_HOOK.with(|h| *h.borrow_mut() = hook);
    }

    /// Reports that a single node acknowledged the group of writes at log positions
    /// `start..end`: runs this thread's hook, if one is installed.
    pub fn acknowledged(start: u64, end: u64) {
        ACK_HOOK.with(|h| {
            if let Some(f) = &*h.borrow() {
                f(start, end)
            }
        });
    }

    /// Enables BUGGIFY on this thread for a run with `seed` (resets the sites).
    pub fn enable(seed: u64) {
        let rng = ChaCha8Rng::seed_from_u64(seed ^ 0xb066_1f7e_5eed_0001);
        STATE.with(|s| *s.borrow_mut() = Some(State { rng, sites: BTreeMap::new(), fired: 0 }));
    }

    /// Disables BUGGIFY on this thread.
    pub fn disable() {
        STATE.with(|s| *s.borrow_mut() = None);
    }

    /// Whether the site `site` fires now. Called by [`buggify!`](crate::buggify!).
    pub fn fire(site: &'static str) -> bool {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            let Some(st) = s.as_mut() else { return false };
            let active = match st.sites.get(site) {
                Some(&a) => a,
                None => {
                    let a = st.rng.gen_bool(SITE_ACTIVE);
                    st.sites.insert(site, a);
                    a
                }
            };
            let fires = active && st.rng.gen_bool(SITE_FIRES);
            st.fired += fires as u64;
            fires
        })
    }

    /// Sites reached so far in this run, with whether each is active, and how often sites fired.
    pub fn report() -> (Vec<(&'static str, bool)>, u64) {
        STATE.with(|s| match &*s.borrow() {
            Some(st) => (st.sites.iter().map(|(k, v)| (*k, *v)).collect(), st.fired),
            None => (Vec::new(), 0),
        })
    }

    /// Turns on exactly the bug switches in `bugs` on this thread (empty: all off).
    pub fn set_bugs(bugs: &[Bug]) {
        BUGS.with(|b| b.set(bugs.iter().fold(0, |m, x| m | x.bit())));
    }

    /// Bug switches on for every thread of the process: a deliberately broken build of the real
    /// node (built with the `sim` feature), for the real-process fault harness to catch.
    static PROCESS_BUGS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    /// Turns on exactly the bug switches in `bugs` for every thread of this process.
    pub fn set_process_bugs(bugs: &[Bug]) {
        let bits = bugs.iter().fold(0, |m, x| m | x.bit());
        PROCESS_BUGS.store(bits, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the bug switch `b` is on for this thread's run (or for the whole process).
    pub fn bug(b: Bug) -> bool {
        let process = PROCESS_BUGS.load(std::sync::atomic::Ordering::Relaxed);
        (BUGS.with(|x| x.get()) | process) & b.bit() != 0
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    use super::*;

    #[test]
    fn off_unless_enabled_and_replays_per_seed() {
        disable();
        assert!(!(0..1000).any(|_| crate::buggify!()));
        let run = |seed| {
            enable(seed);
            let v: Vec<bool> = (0..2000).map(|i| fire(["a:1", "b:2", "c:3", "d:4"][i % 4])).collect();
            disable();
            v
        };
        assert_eq!(run(7), run(7));
        assert!((0..20).any(|s| run(s).iter().any(|&f| f)), "some seed fires some site");
        set_bugs(&[Bug::SkipCrc]);
        assert!(bug(Bug::SkipCrc) && !bug(Bug::AckBeforeFsync));
        set_bugs(&[]);
        assert!(!bug(Bug::SkipCrc));
        assert_eq!(Bug::parse("skip-crc"), Some(Bug::SkipCrc));
    }
}
