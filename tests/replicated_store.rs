//! The store as a cluster's leader, without the network (the test plays the cluster): writes are
//! held until [`Store::release`] says a quorum has them, up to the pipeline's depth of groups wait
//! at once and later groups are decided against the states and ids of the waiting ones, an
//! idempotent retry of a waiting write is answered only when the original commits, and losing
//! leadership answers everything waiting with a commit timeout.

use std::sync::Arc;
use std::time::Duration;

use annal::env::mem::{InlineRuntime, ManualClock, MemDisk, MemNet};
use annal::env::{BoxFuture, Env, Lane, Runtime};
use annal::store::{NewEvent, Store, StoreConfig, WriteError, ANY};

fn env() -> Env {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    Env::new(Arc::new(MemDisk::default()), clock, Arc::new(MemNet::default()), Arc::new(InlineRuntime), 5)
}

fn ev(i: u8) -> NewEvent {
    NewEvent {
        id: [i; 16],
        event_type: "t".into(),
        data: vec![i; 10].into(),
        metadata: Default::default(),
        is_json: false,
    }
}

fn leader() -> Arc<Store> {
    let mut c = StoreConfig::new("/db");
    c.chunk_size = 1 << 16;
    c.existence_filter_bytes = 4096;
    c.replicated = true;
    c.commit_timeout = Duration::from_secs(3600);
    let store = Store::recover(&env(), c).unwrap();
    // The term's epoch record, committed (as a quorum's acknowledgement would), then writes.
    store.write_epoch(1, [1; 16]).unwrap();
    store.release(store.log().durable()).unwrap();
    store.set_leading(true);
    store
}

/// Lets the spawned writes and the leader run as far as they can.
async fn let_run() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

fn last(store: &Store, stream: &str) -> i64 {
    store.stream_state(stream).unwrap().last
}

#[tokio::test(flavor = "current_thread")]
async fn held_writes_are_pipelined_and_answered_in_order_on_release() {
    let store = leader();
    let s = store.clone();
    let a = tokio::spawn(async move { s.append_async("s", -1, vec![ev(1)]).await });
    tokio::task::yield_now().await;
    let s = store.clone();
    // Decided against the waiting group's state: the stream is at 0 there.
    let b = tokio::spawn(async move { s.append_async("s", 0, vec![ev(2)]).await });
    tokio::task::yield_now().await;
    let s = store.clone();
    // A retry of the first write (same id, any version) while it waits: no second copy.
    let retry = tokio::spawn(async move { s.append_async("s", ANY, vec![ev(1)]).await });
    let_run().await;
    assert!(
        !a.is_finished() && !b.is_finished() && !retry.is_finished(),
        "nothing is answered before a quorum"
    );
    assert_eq!(last(&store, "s"), -1, "nothing is visible before a quorum");
    // The quorum reaches the first group only: it alone is answered.
    let first_end = {
        let log = store.log();
        let mut scan = log.scan_durable(0);
        let mut end = 0;
        while let Some(r) = scan.next() {
            if let annal::log::record::Record::Event(e) = r.unwrap() {
                if e.event_number == 0 {
                    end = scan.position();
                }
            }
        }
        end
    };
    store.release(first_end).unwrap();
    let ra = a.await.unwrap().unwrap();
    assert_eq!((ra.first_event_number, ra.last_event_number), (0, 0));
    let_run().await;
    assert!(!b.is_finished() && !retry.is_finished());
    assert_eq!(last(&store, "s"), 0);
    store.release(store.log().durable()).unwrap();
    let rb = b.await.unwrap().unwrap();
    assert_eq!((rb.first_event_number, rb.last_event_number), (1, 1));
    let rr = retry.await.unwrap().unwrap();
    assert_eq!((rr.first_event_number, rr.position), (0, None), "the retry is idempotent");
    assert_eq!(last(&store, "s"), 1, "two events, no duplicate");
}

#[tokio::test(flavor = "current_thread")]
async fn losing_leadership_answers_waiting_writes_with_a_commit_timeout() {
    let store = leader();
    let s = store.clone();
    let a = tokio::spawn(async move { s.append_async("t", -1, vec![ev(3)]).await });
    let_run().await;
    store.set_leading(false);
    assert_eq!(a.await.unwrap(), Err(WriteError::CommitTimeout));
    // A follower takes no writes.
    assert_eq!(store.append_async("t", ANY, vec![ev(4)]).await, Err(WriteError::NotLeader));
    assert_eq!(last(&store, "t"), -1, "nothing was published");
}

#[tokio::test(flavor = "current_thread")]
async fn a_retry_in_the_same_group_as_its_original_is_idempotent_with_an_expected_version() {
    // Found by the simulator (corpus: seed 137, a cluster of three): while the pipeline was full,
    // a write forwarded by a follower and the client's retry of it waited in the leader's queue
    // and went out in one group; the retry, with the same expected version, was refused as a
    // wrong version.
    let store = leader();
    let mut fill = Vec::new();
    for i in 0..8u8 {
        let s = store.clone();
        fill.push(tokio::spawn(async move { s.append_async(&format!("f{i}"), -1, vec![ev(100 + i)]).await }));
        tokio::task::yield_now().await;
    }
    let op = |expected: i64, i: u8| annal::store::WriteOp::Append {
        stream: "g".into(),
        expected,
        events: vec![ev(i), ev(i + 1)],
    };
    let s = store.clone();
    let all =
        tokio::spawn(async move { s.write_all_async(vec![op(-1, 7), op(-1, 7), op(1, 9), op(1, 9)]).await });
    let_run().await;
    assert!(!all.is_finished(), "the writes wait behind the full pipeline");
    // Quorums come: the waiting groups leave, and the queued writes follow.
    for _ in 0..20 {
        store.release(store.log().durable()).unwrap();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
    let r = all.await.unwrap();
    let numbers: Vec<(i64, i64)> =
        r.iter().map(|r| r.as_ref().map(|w| (w.first_event_number, w.last_event_number)).unwrap()).collect();
    assert_eq!(numbers, vec![(0, 1), (0, 1), (2, 3), (2, 3)]);
    assert_eq!(last(&store, "g"), 3, "no duplicate");
    for f in fill {
        f.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_leader_counts_its_synced_groups_durable_and_moves_writer_chk_at_most_every_interval() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    let mem = Arc::new(MemDisk::default());
    let env = Env::new(mem.clone(), clock.clone(), Arc::new(MemNet::default()), Arc::new(InlineRuntime), 5);
    let config = || {
        let mut c = StoreConfig::new("/db");
        c.chunk_size = 1 << 16;
        c.existence_filter_bytes = 4096;
        c.replicated = true;
        c.commit_timeout = Duration::from_secs(3600);
        c
    };
    let store = Store::recover(&env, config()).unwrap();
    store.write_epoch(1, [1; 16]).unwrap();
    store.release(store.log().durable()).unwrap();
    store.set_leading(true);
    let mut ends = Vec::new();
    let mut pending = Vec::new();
    for i in 1..=3u8 {
        let s = store.clone();
        pending.push(tokio::spawn(async move { s.append_async(&format!("s{i}"), ANY, vec![ev(i)]).await }));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        ends.push(store.durable_watermark().get());
        if i == 2 {
            assert!(
                store.log().checkpoints.writer.read() < ends[1] as i64,
                "within an interval a group is adopted, writer.chk stays behind"
            );
        }
        // A quorum holds it (the pipeline takes two groups at once).
        store.release(ends[ends.len() - 1]).unwrap();
        if i == 2 {
            clock.advance(annal::log::ADOPTED_CHECKPOINT_INTERVAL);
        }
    }
    assert!(ends[0] < ends[1] && ends[1] < ends[2], "each group counts as durable once synced: {ends:?}");
    // Once the interval has passed, the next group moves writer.chk.
    assert_eq!(store.log().checkpoints.writer.read(), ends[2] as i64);
    for p in pending {
        assert!(p.await.unwrap().is_ok());
    }
    // What the second group's sync made durable survives a power loss without writer.chk.
    let s = store.clone();
    let fourth = tokio::spawn(async move { s.append_async("s4", ANY, vec![ev(4)]).await });
    let_run().await;
    let end = store.durable_watermark().get();
    assert!(end > ends[2]);
    assert_eq!(store.log().checkpoints.writer.read(), ends[2] as i64, "adopted, not checkpointed");
    fourth.abort();
    drop(store);
    mem.crash();
    let store = Store::recover(&env, config()).unwrap();
    assert_eq!(store.log().durable(), end, "recovery adopts the synced group");
    assert_eq!(store.recovery.adopted_bytes, end - ends[2]);
}

/// [`InlineRuntime`], but the jobs of its side lanes (the checkpoint stage) wait until the test
/// runs them ([`Deferred::run_all`]), as on a thread the scheduler runs late.
#[derive(Clone, Default)]
struct Deferred {
    jobs: Arc<std::sync::Mutex<Vec<Job>>>,
}

type Job = Box<dyn FnOnce() + Send>;

impl Deferred {
    fn run_all(&self) -> usize {
        let jobs: Vec<_> = std::mem::take(&mut *self.jobs.lock().unwrap());
        let n = jobs.len();
        for j in jobs {
            j();
        }
        n
    }
}

impl Lane for Deferred {
    fn run(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        self.jobs.lock().unwrap().push(f);
        Box::pin(async {})
    }
}

impl Runtime for Deferred {
    fn spawn(&self, fut: BoxFuture<'static, ()>) {
        InlineRuntime.spawn(fut)
    }
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        InlineRuntime.sleep(d)
    }
    fn blocking(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        InlineRuntime.blocking(f)
    }
    fn background(&self, name: &'static str, f: Box<dyn FnOnce() + Send>) {
        InlineRuntime.background(name, f)
    }
    fn lane(&self, name: &'static str) -> Box<dyn Lane> {
        InlineRuntime.lane(name)
    }
    fn side_lane(&self, _name: &'static str) -> Box<dyn Lane> {
        Box::new(self.clone())
    }
}

/// A leader (its term's epoch committed) whose checkpoint stage runs only when the test says so.
fn deferred_leader() -> (Deferred, Arc<Store>) {
    let deferred = Deferred::default();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    let runtime = Arc::new(deferred.clone());
    let env = Env::new(Arc::new(MemDisk::default()), clock, Arc::new(MemNet::default()), runtime, 5);
    let mut c = StoreConfig::new("/db");
    c.chunk_size = 1 << 16;
    c.existence_filter_bytes = 4096;
    c.replicated = true;
    c.commit_timeout = Duration::from_secs(3600);
    let store = Store::recover(&env, c).unwrap();
    store.write_epoch(1, [1; 16]).unwrap();
    store.release(store.log().durable()).unwrap();
    store.set_leading(true);
    (deferred, store)
}

#[tokio::test(flavor = "current_thread")]
async fn a_group_of_refused_writes_behind_a_waiting_group_does_not_hide_it_from_the_checkpoint_stage() {
    // Found by the simulator (the survivor scenario, seed 1) and seen on real processes: a new
    // leader's first group waited for its quorum; the next group's writes were all refused
    // (wrong expected version), so it wrote nothing, and it ended at the committed position,
    // below the first group. The checkpoint stage, running after both were queued, took that
    // end as its target, found it durable already and did nothing; the first group was never
    // counted durable, never committed, and the leader stopped committing for good.
    let (deferred, store) = deferred_leader();
    let epoch_end = store.durable_watermark().get();

    let s = store.clone();
    let first = tokio::spawn(async move { s.append_async("s", -1, vec![ev(1)]).await });
    let_run().await;
    let written = store.log().scan_written(0, u64::MAX).count();
    assert!(written >= 2, "the first group is written (epoch record and event)");
    // A write refused at once: its group writes nothing and waits behind the first.
    let s = store.clone();
    let refused = tokio::spawn(async move { s.append_async("s", 5, vec![ev(2)]).await });
    let_run().await;
    assert_eq!(store.durable_watermark().get(), epoch_end, "the checkpoint stage has not run yet");
    // Now the checkpoint stage runs (once per group queued).
    assert_eq!(deferred.run_all(), 2);
    let durable = store.durable_watermark().get();
    assert!(durable > epoch_end, "the first group is counted durable: {durable} (epoch ends at {epoch_end})");
    // The quorum holds it: both groups are answered, in order.
    store.release(durable).unwrap();
    let r = first.await.unwrap().unwrap();
    assert_eq!(r.first_event_number, 0);
    assert_eq!(refused.await.unwrap(), Err(WriteError::WrongExpectedVersion { current: 0 }));
}

#[tokio::test(flavor = "current_thread")]
async fn a_former_leader_drops_the_groups_it_never_counted_when_its_new_leader_ships_over_them() {
    // Seen on three processes (a leader paused, then a follower of the next one): the paused
    // leader had written and synced a group whose checkpoint stage had not run when it lost
    // its leadership; its core counted its log as ending before that group, so the new leader
    // shipped from there, and writing those records failed ("cannot place the log"): the node
    // stopped taking part until restarted.
    let (deferred, store) = deferred_leader();
    let counted = store.durable_watermark().get();
    let s = store.clone();
    let w = tokio::spawn(async move { s.append_async("s", -1, vec![ev(1)]).await });
    let_run().await;
    let frame = {
        let log = store.log();
        let mut scan = log.scan_written(counted, u64::MAX);
        scan.next_with_frame().unwrap().unwrap().1.to_vec()
    };
    // Leadership goes before the group was counted; the stage has nothing left to count.
    store.set_leading(false);
    assert_eq!(w.await.unwrap(), Err(WriteError::CommitTimeout));
    deferred.run_all();
    assert_eq!(store.durable_watermark().get(), counted);
    // The new leader's records start where this node's core counts its log's end.
    let staged = store.stage_replicated(&frame, counted + frame.len() as u64).unwrap();
    assert_eq!(staged.closes, Some(true));
    let end = store.sync_replicated().unwrap();
    assert_eq!(end, counted + frame.len() as u64, "the uncounted group gave way to the leader's records");
}
