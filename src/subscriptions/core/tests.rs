//! The core's rules on explicit clock values: timeouts, retries and parking, nack actions,
//! strategies, checkpoints.

use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::store::RecordedEvent;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn event(stream: &str, n: i64) -> ResolvedEvent {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&n.to_le_bytes());
    id[8] = stream.len() as u8;
    id[9..9 + stream.len().min(7)].copy_from_slice(&stream.as_bytes()[..stream.len().min(7)]);
    ResolvedEvent {
        event: RecordedEvent {
            stream: stream.into(),
            event_number: n,
            id,
            event_type: "t".into(),
            data: Bytes::new(),
            metadata: Bytes::new(),
            is_json: false,
            is_redacted: false,
            timestamp_us: 0,
            position: 0,
        },
        link: None,
    }
}

fn group(settings: Settings) -> Group {
    Group::new("s".into(), "g".into(), settings, None, -1, Duration::ZERO)
}

/// Feeds `n` events of stream `s` (numbers from the group's read position) through one read.
fn feed(g: &mut Group, streams: &[&str]) {
    let req = g.read_request().expect("a read is wanted");
    let events: Vec<_> = streams
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut e = event(s, req.from + i as i64);
            e.event.stream = "s".into();
            // The source stream for Pinned is the resolved event's: model links to `s`.
            if *s != "s" {
                let target = event(s, req.from + i as i64);
                e.link = Some(e.event.clone());
                e.event = target.event;
            }
            e
        })
        .collect();
    let next = req.from + events.len() as i64;
    g.on_read(PageResult::Page { events, next, last: next - 1, end: true });
}

fn ids(ms: &[Message]) -> Vec<i64> {
    ms.iter().map(|m| m.number).collect()
}

#[test]
fn timeouts_retry_then_park_after_max_retries() {
    let mut g = group(Settings { message_timeout_ms: 1000, max_retry_count: 2, ..Settings::default() });
    feed(&mut g, &["s"]);
    let mut deliveries = 0;
    let mut now = Duration::ZERO;
    loop {
        let got = g.take("c", "u", 10, now).unwrap();
        if got.is_empty() {
            break;
        }
        deliveries += 1;
        // Not yet late: nothing comes back.
        assert!(g.take("c", "u", 10, now + ms(999)).unwrap().is_empty());
        now += ms(1000);
    }
    // maxRetryCount + 1 deliveries, then parked.
    assert_eq!(deliveries, 3);
    let parks = g.parks_due();
    assert_eq!(parks.len(), 1);
    assert_eq!(parks[0].reason, "Reached retry count of 2");
    // The checkpoint waits for the parked link to be written.
    assert_eq!(g.checkpoint_candidate(), -1);
    g.on_parked(parks[0].message.id, false);
    assert_eq!(g.checkpoint_candidate(), -1);
    let again = g.parks_due();
    assert_eq!(again.len(), 1);
    g.on_parked(again[0].message.id, true);
    assert_eq!(g.checkpoint_candidate(), 0);
    assert_eq!(g.figures.parked, 1);
    assert_eq!(g.figures.timed_out, 3);
}

#[test]
fn zero_timeout_never_expires() {
    let mut g = group(Settings { message_timeout_ms: 0, ..Settings::default() });
    feed(&mut g, &["s"]);
    assert_eq!(g.take("c", "u", 1, Duration::ZERO).unwrap().len(), 1);
    assert!(g.take("c", "u", 1, Duration::from_secs(29)).unwrap().is_empty());
    // Only a lapsed consumer gives its messages back.
    assert_eq!(g.take("d", "u", 1, Duration::from_secs(59)).unwrap().len(), 1);
}

#[test]
fn nack_actions() {
    let mut g = group(Settings { max_retry_count: 1, ..Settings::default() });
    feed(&mut g, &["s", "s", "s", "s"]);
    let got = g.take("c", "u", 4, Duration::ZERO).unwrap();
    assert_eq!(ids(&got), [0, 1, 2, 3]);
    let id = |i: usize| got[i].id;
    g.nack(&[id(0)], NackAction::Park, ms(1));
    g.nack(&[id(1)], NackAction::Retry, ms(1));
    g.nack(&[id(2)], NackAction::Skip, ms(1));
    g.nack(&[id(3)], NackAction::Stop, ms(1));
    let parks = g.parks_due();
    assert_eq!((parks.len(), parks[0].reason.as_str()), (1, PARK_NACK_REASON));
    // Retried: delivered again first; a second retry parks it (maxRetryCount 1).
    let again = g.take("c", "u", 4, ms(2)).unwrap();
    assert_eq!(ids(&again), [1]);
    g.nack(&[id(1)], NackAction::Retry, ms(3));
    assert_eq!(g.parks_due()[0].reason, "Reached retry count of 1");
    // Stop left 3 in flight; skip counted as processed.
    assert_eq!(g.figures.processed, 1);
    g.ack(&[id(3)], ms(4));
    assert_eq!(g.figures.processed, 2);
    // 0 and 1 are parking: the checkpoint stays below them.
    assert_eq!(g.checkpoint_candidate(), -1);
    g.on_parked(id(0), true);
    g.on_parked(id(1), true);
    assert_eq!(g.checkpoint_candidate(), 3);
}

#[test]
fn checkpoint_never_passes_an_unacked_message_and_follows_the_counts() {
    let mut g = group(Settings {
        min_check_point_count: 2,
        max_check_point_count: 5,
        check_point_after_ms: 1000,
        ..Settings::default()
    });
    feed(&mut g, &["s"; 10]);
    let got = g.take("c", "u", 10, Duration::ZERO).unwrap();
    // Everything but event 1 acknowledged: the candidate stays at 0.
    let all_but_1: Vec<_> = got.iter().filter(|m| m.number != 1).map(|m| m.id).collect();
    g.ack(&all_but_1, ms(10));
    assert_eq!(g.checkpoint_candidate(), 0);
    // diff 1 < min: not even on the timer.
    assert_eq!(g.checkpoint_due(ms(5000), true), None);
    g.ack(&[got[1].id], ms(20));
    assert_eq!(g.checkpoint_candidate(), 9);
    // diff 10 >= max: due at once, one write at a time.
    assert_eq!(g.checkpoint_due(ms(20), false), Some(9));
    assert_eq!(g.checkpoint_due(ms(20), false), None);
    g.on_checkpoint(9, true, ms(30));
    assert_eq!(g.checkpoint(), 9);
    // The timer rule: min count and the interval.
    let mut g = group(Settings {
        min_check_point_count: 2,
        max_check_point_count: 100,
        check_point_after_ms: 1000,
        ..Settings::default()
    });
    feed(&mut g, &["s"; 3]);
    let got = g.take("c", "u", 3, Duration::ZERO).unwrap();
    g.ack(&got.iter().map(|m| m.id).collect::<Vec<_>>(), ms(1));
    assert_eq!(g.checkpoint_due(ms(999), true), None);
    assert_eq!(g.checkpoint_due(ms(1000), false), None);
    assert_eq!(g.checkpoint_due(ms(1000), true), Some(2));
    // A failed write is asked for again.
    g.on_checkpoint(2, false, ms(1001));
    assert_eq!(g.checkpoint_due(ms(1001), true), Some(2));
}

#[test]
fn resumes_after_the_checkpoint_or_at_start_from() {
    let g = Group::new("s".into(), "g".into(), Settings::default(), Some(41), 100, Duration::ZERO);
    assert_eq!(g.checkpoint_candidate(), 41);
    let mut g = Group::new(
        "s".into(),
        "g".into(),
        Settings { start_from: -1, ..Settings::default() },
        None,
        100,
        Duration::ZERO,
    );
    assert_eq!(g.read_request().unwrap().from, 101);
    let mut g = Group::new(
        "s".into(),
        "g".into(),
        Settings { start_from: 7, ..Settings::default() },
        None,
        100,
        Duration::ZERO,
    );
    assert_eq!(g.read_request().unwrap().from, 7);
}

#[test]
fn buffers_are_bounded_and_reads_resume_when_written() {
    let mut g =
        group(Settings { buffer_size: 30, read_batch_size: 20, live_buffer_size: 25, ..Settings::default() });
    let r = g.read_request().unwrap();
    assert_eq!(r.count, 20);
    // One read at a time.
    assert!(g.read_request().is_none());
    let events: Vec<_> = (0..20).map(|i| event("s", i)).collect();
    g.on_read(PageResult::Page { events, next: 20, last: 50, end: false });
    assert_eq!(g.read_request().unwrap().count, 10);
    g.on_read(PageResult::Page {
        events: (20..30).map(|i| event("s", i)).collect(),
        next: 30,
        last: 50,
        end: false,
    });
    assert!(g.read_request().is_none(), "the buffer is full");
    // A read that reached the end stops reading until the stream is written again, even when a
    // write arrives while the read is out.
    let mut g = group(Settings::default());
    g.read_request().unwrap();
    g.written();
    g.on_read(PageResult::Page { events: vec![], next: 0, last: -1, end: true });
    assert!(g.read_request().is_some());
    g.on_read(PageResult::NoStream);
    assert!(g.read_request().is_none());
    g.written();
    assert!(g.read_request().is_some());
    g.on_read(PageResult::Deleted);
    assert_eq!(g.take("c", "u", 1, Duration::ZERO).unwrap_err(), TakeError::StreamDeleted);
    assert_eq!(g.status(), "NotReady");
}

#[test]
fn dispatch_to_single_fills_the_first_consumer_first() {
    let mut g = group(Settings { strategy: Strategy::DispatchToSingle, ..Settings::default() });
    feed(&mut g, &["s"; 10]);
    let a = g.take("a", "u", 3, Duration::ZERO).unwrap();
    assert_eq!(ids(&a), [0, 1, 2]);
    // a holds its 3 slots: b may take.
    assert_eq!(ids(&g.take("b", "u", 2, ms(1)).unwrap()), [3, 4]);
    g.ack(&[a[0].id], ms(2));
    // a has room again: b waits.
    assert!(g.take("b", "u", 2, ms(3)).unwrap().is_empty());
    assert_eq!(ids(&g.take("a", "u", 3, ms(4)).unwrap()), [5, 6, 7]);
}

#[test]
fn pinned_gives_each_stream_to_one_consumer_at_a_time() {
    let mut g = group(Settings { strategy: Strategy::Pinned, message_timeout_ms: 0, ..Settings::default() });
    let streams = ["a", "b", "c", "d", "e", "f", "a", "b", "c", "d", "e", "f"];
    feed(&mut g, &streams);
    // One consumer: everything, in order.
    let one = g.take("x", "u", 3, Duration::ZERO).unwrap();
    assert_eq!(ids(&one), [0, 1, 2]);
    // y joins: buckets are split, but streams x holds stay with x while it holds them.
    let y = g.take("y", "u", 12, ms(1)).unwrap();
    let held: std::collections::HashSet<u64> = one.iter().map(|m| m.bucket).collect();
    assert!(y.iter().all(|m| !held.contains(&m.bucket)), "a stream went to two consumers");
    let x = g.take("x", "u", 12, ms(2)).unwrap();
    let ys: std::collections::HashSet<u64> = y.iter().map(|m| m.bucket).collect();
    assert!(x.iter().all(|m| !ys.contains(&m.bucket)));
    // Each stream's events in order per consumer.
    for got in [&x, &y] {
        for w in got.windows(2) {
            if w[0].bucket == w[1].bucket {
                assert!(w[0].number < w[1].number);
            }
        }
    }
}

#[test]
fn lapsed_consumers_leave_and_their_messages_come_back() {
    let mut g = group(Settings { message_timeout_ms: 0, ..Settings::default() });
    feed(&mut g, &["s"; 2]);
    let a = g.take("a", "u", 2, Duration::ZERO).unwrap();
    assert_eq!(a.len(), 2);
    assert!(g.take("b", "u", 2, Duration::from_secs(29)).unwrap().is_empty());
    // a lapses after 30 s without polling or acking; b polled at 29 s and lives on.
    let b = g.take("b", "u", 2, Duration::from_secs(30)).unwrap();
    assert_eq!(ids(&b), [0, 1]);
    assert!(b.iter().all(|m| m.retries == 1));
    let snap = g.snapshot(Duration::from_secs(30), false);
    assert_eq!(snap.consumers.len(), 1);
    assert_eq!(snap.consumers[0].name, "b");
}

#[test]
fn max_subscriber_count_refuses_new_consumers() {
    let mut g = group(Settings { max_subscriber_count: 1, ..Settings::default() });
    g.take("a", "u", 1, Duration::ZERO).unwrap();
    assert_eq!(g.take("b", "u", 1, Duration::ZERO).unwrap_err(), TakeError::TooManyConsumers);
    assert!(g.take("a", "u", 1, Duration::ZERO).is_ok());
}

#[test]
fn replayed_parked_messages_come_first_and_do_not_hold_the_checkpoint() {
    let mut g = group(Settings::default());
    feed(&mut g, &["s"; 3]);
    assert!(g.begin_replay());
    assert!(!g.begin_replay());
    let mut old = Message::new(event("s", 0), true);
    old.id = [9; 16];
    g.add_replayed(vec![old]);
    let got = g.take("c", "u", 1, Duration::ZERO).unwrap();
    assert_eq!(got[0].id, [9; 16]);
    assert!(got[0].replayed);
    g.end_replay();
    assert!(g.status().contains("Live"));
    let rest = g.take("c", "u", 3, Duration::ZERO).unwrap();
    g.ack(&rest.iter().map(|m| m.id).collect::<Vec<_>>(), ms(1));
    // The replayed message is still in flight, yet the checkpoint may pass it.
    assert_eq!(g.checkpoint_candidate(), 2);
}

#[test]
fn figures_and_status() {
    let mut g = group(Settings::default());
    assert_eq!(g.status(), "Behind");
    feed(&mut g, &["s"; 4]);
    assert_eq!(g.status(), "Live");
    let got = g.take("c", "u", 4, Duration::ZERO).unwrap();
    g.ack(&got.iter().map(|m| m.id).collect::<Vec<_>>(), ms(1));
    let s = g.snapshot(Duration::from_secs(2), true);
    assert_eq!((s.processed, s.count_since, s.average_per_second), (4, 4, 2.0));
    assert_eq!(s.last_known, 3);
    let s = g.snapshot(Duration::from_secs(3), false);
    assert_eq!(s.count_since, 0);
}

// ---- random histories across crashes, with the invariant checkers ----
//
// Each checker was shown to catch a deliberate fault of the core: a checkpoint from the highest
// pending number (the checkpoint checker), parking one retry late (the delivery count), Pinned
// without its holder rule (two consumers on one stream), a retried nack dropped (healing leaves
// events never done).

mod histories {
    use std::collections::{BTreeMap, BTreeSet, HashMap};

    use proptest::prelude::{any, prop_oneof, proptest, Just, ProptestConfig};
    use proptest::strategy::Strategy as Gen;

    use super::*;

    const TIMEOUT_MS: u64 = 1000;
    const MAX_RETRY: u32 = 2;
    const SOURCES: [&str; 4] = ["a", "b", "c", "d"];

    #[derive(Clone, Debug)]
    enum Op {
        /// Append events from these source streams.
        Write(Vec<usize>),
        /// Consumer polls for up to n.
        Poll(usize, usize),
        /// Consumer answers the k-th oldest message it holds.
        Answer(usize, usize, u8),
        /// Time passes.
        Advance(u64),
        /// The timer: expiries, parks written (or failing), checkpoints written (or failing).
        Tick(bool),
        /// The node restarts: memory is lost, the checkpoint and parked links stay.
        Crash,
    }

    fn op() -> impl Gen<Value = Op> {
        prop_oneof![
            2 => proptest::collection::vec(0..SOURCES.len(), 1..6).prop_map(Op::Write),
            4 => (0..3usize, 1..6usize).prop_map(|(c, n)| Op::Poll(c, n)),
            4 => (0..3usize, 0..4usize, 0..5u8).prop_map(|(c, k, a)| Op::Answer(c, k, a)),
            2 => (1..1500u64).prop_map(Op::Advance),
            2 => any::<bool>().prop_map(Op::Tick),
            1 => Just(Op::Crash),
        ]
    }

    /// What the checkers know: the stream, every delivery, every answer, what is durable.
    struct World {
        stream: Vec<ResolvedEvent>,
        group: Group,
        strategy: Strategy,
        now: Duration,
        /// Event numbers acknowledged, skipped or parked (durably) in some incarnation.
        done: BTreeSet<i64>,
        /// Deliveries of each number in this incarnation.
        deliveries: HashMap<i64, u32>,
        /// Messages each consumer holds: id → (number, bucket, deadline).
        held: BTreeMap<usize, Vec<(MessageId, i64, u64, Duration)>>,
        last_seen: HashMap<usize, Duration>,
        checkpoint: Option<i64>,
        parked: Vec<i64>,
    }

    fn settings(strategy: Strategy) -> Settings {
        Settings {
            message_timeout_ms: TIMEOUT_MS,
            max_retry_count: MAX_RETRY,
            min_check_point_count: 1,
            max_check_point_count: 3,
            check_point_after_ms: 500,
            buffer_size: 30,
            live_buffer_size: 30,
            read_batch_size: 10,
            strategy,
            ..Settings::default()
        }
    }

    fn ev(n: i64, source: &str) -> ResolvedEvent {
        let mut link = event("s", n).event;
        link.event_type = "$>".into();
        let mut target = event(source, n).event;
        target.id[15] = 0xee;
        ResolvedEvent { event: target, link: Some(link) }
    }

    impl World {
        fn new(strategy: Strategy) -> World {
            World {
                stream: Vec::new(),
                group: Group::new("s".into(), "g".into(), settings(strategy), None, -1, Duration::ZERO),
                strategy,
                now: Duration::ZERO,
                done: BTreeSet::new(),
                deliveries: HashMap::new(),
                held: BTreeMap::new(),
                last_seen: HashMap::new(),
                checkpoint: None,
                parked: Vec::new(),
            }
        }

        /// The shell's reads.
        fn fill(&mut self) {
            while let Some(r) = self.group.read_request() {
                let from = r.from.max(0) as usize;
                let events: Vec<_> = self.stream.iter().skip(from).take(r.count).cloned().collect();
                let next = (from + events.len()) as i64;
                let last = self.stream.len() as i64 - 1;
                self.group.on_read(PageResult::Page { events, next, last, end: next > last });
            }
        }

        /// Drops what a consumer no longer holds in the core's eyes (timed out, or it lapsed).
        fn forget_expired(&mut self) {
            let now = self.now;
            let lapse = self.group.consumer_lapse();
            let seen = self.last_seen.clone();
            for (c, msgs) in self.held.iter_mut() {
                if seen.get(c).is_some_and(|t| *t + lapse <= now) {
                    msgs.clear();
                }
                msgs.retain(|m| m.3 > now);
            }
        }

        fn poll(&mut self, c: usize, n: usize) {
            self.fill();
            self.forget_expired();
            let name = format!("c{c}");
            let Ok(got) = self.group.take(&name, "u", n, self.now) else { return };
            self.last_seen.insert(c, self.now);
            for m in &got {
                if !m.replayed {
                    let d = self.deliveries.entry(m.number).or_default();
                    *d += 1;
                    // Checker: at most maxRetryCount + 1 deliveries before parking.
                    assert!(*d <= MAX_RETRY + 1, "event {} delivered {} times", m.number, d);
                }
                if self.strategy == Strategy::Pinned {
                    // Checker: no stream with two live consumers at once.
                    for (other, msgs) in &self.held {
                        assert!(
                            *other == c || msgs.iter().all(|h| h.2 != m.bucket),
                            "bucket {} given to c{c} while c{other} holds it",
                            m.bucket
                        );
                    }
                }
                let deadline = self.now + Duration::from_millis(TIMEOUT_MS);
                self.held.entry(c).or_default().push((m.id, m.number, m.bucket, deadline));
            }
        }

        fn answer(&mut self, c: usize, k: usize, action: u8) {
            self.forget_expired();
            let Some(msgs) = self.held.get_mut(&c) else { return };
            if msgs.is_empty() {
                return;
            }
            let (id, number, _, _) = msgs.remove(k % msgs.len());
            self.last_seen.insert(c, self.now);
            match action {
                0 | 1 => {
                    self.group.ack(&[id], self.now);
                    self.done.insert(number);
                }
                2 => {
                    self.group.nack(&[id], NackAction::Skip, self.now);
                    self.done.insert(number);
                }
                3 => self.group.nack(&[id], NackAction::Retry, self.now),
                _ => self.group.nack(&[id], NackAction::Park, self.now),
            }
        }

        fn tick(&mut self, ok: bool) {
            self.group.expire(self.now);
            self.forget_expired();
            for p in self.group.parks_due() {
                self.group.on_parked(p.message.id, ok);
                if ok {
                    self.parked.push(p.message.number);
                    self.done.insert(p.message.number);
                }
            }
            if let Some(n) = self.group.checkpoint_due(self.now, true) {
                if ok {
                    // Checker: the checkpoint never passes a message that is not done.
                    if let Some(missing) = (0..=n).find(|i| !self.done.contains(i)) {
                        panic!("checkpoint {n} passes event {missing}, which was never done");
                    }
                    self.checkpoint = Some(n);
                }
                self.group.on_checkpoint(n, ok, self.now);
            }
        }

        fn crash(&mut self) {
            let last = self.stream.len() as i64 - 1;
            self.group =
                Group::new("s".into(), "g".into(), settings(self.strategy), self.checkpoint, last, self.now);
            self.deliveries.clear();
            self.held.clear();
            self.last_seen.clear();
        }

        fn apply(&mut self, op: &Op) {
            match op {
                Op::Write(sources) => {
                    for s in sources {
                        let n = self.stream.len() as i64;
                        self.stream.push(ev(n, SOURCES[*s]));
                    }
                    self.group.written();
                }
                Op::Poll(c, n) => self.poll(*c, *n),
                Op::Answer(c, k, a) => self.answer(*c, *k, *a),
                Op::Advance(ms) => self.now += Duration::from_millis(*ms),
                Op::Tick(ok) => self.tick(*ok),
                Op::Crash => self.crash(),
            }
        }

        /// Healing: one consumer polls and acknowledges everything, timers run, writes succeed.
        /// Checker: every event of the stream ends acknowledged, skipped or parked.
        fn drain(&mut self) {
            for _ in 0..200 {
                self.now += Duration::from_millis(TIMEOUT_MS * 3);
                self.tick(true);
                self.poll(0, 100);
                while self.held.get(&0).is_some_and(|m| !m.is_empty()) {
                    self.answer(0, 0, 0);
                }
                self.tick(true);
                if (0..self.stream.len() as i64).all(|n| self.done.contains(&n)) {
                    return;
                }
            }
            let missing: Vec<i64> =
                (0..self.stream.len() as i64).filter(|n| !self.done.contains(n)).collect();
            panic!("events never done after healing: {missing:?}");
        }
    }

    fn run(strategy: Strategy, ops: &[Op]) {
        let mut w = World::new(strategy);
        for op in ops {
            w.apply(op);
        }
        w.drain();
        // Checker: a parked message comes back on a replay (to a consumer alone in the group). A
        // restart may have read it again from the stream before the replay (its parked link
        // outlived a checkpoint that was lost): then the replay leaves that copy to be delivered.
        if let Some(&n) = w.parked.first() {
            assert!(w.group.begin_replay());
            w.group.add_replayed(vec![Message::new(w.stream[n as usize].clone(), true)]);
            w.group.end_replay();
            w.now += w.group.consumer_lapse();
            let got = w.group.take("c9", "u", 1000, w.now).unwrap();
            assert!(got.iter().any(|m| m.number == n), "parked event {n} not replayed");
        }
    }

    /// Found by CI: an event parked, the checkpoint not yet past it, a restart: the event is read
    /// from the stream again and is still buffered when its parked copy is replayed.
    #[test]
    fn a_parked_event_read_again_after_a_restart_is_replayed() {
        use Op::*;
        let ops = [
            Poll(0, 1),
            Write(vec![1]),
            Write(vec![0]),
            Poll(1, 1),
            Answer(1, 0, 4),
            Tick(true),
            Crash,
            Poll(0, 1),
            Poll(1, 1),
        ];
        run(Strategy::Pinned, &ops);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        #[test]
        fn round_robin_histories_keep_the_invariants(ops in proptest::collection::vec(op(), 1..80)) {
            run(Strategy::RoundRobin, &ops);
        }

        #[test]
        fn pinned_histories_keep_the_invariants(ops in proptest::collection::vec(op(), 1..80)) {
            run(Strategy::Pinned, &ops);
        }

        #[test]
        fn dispatch_to_single_histories_keep_the_invariants(ops in proptest::collection::vec(op(), 1..80)) {
            run(Strategy::DispatchToSingle, &ops);
        }
    }
}
