//! One subscription group's decisions, free of I/O: which messages it holds, who holds them, when
//! they are retried or parked, and when a checkpoint is due. The shell ([`super`]) performs what
//! the core asks for (reading a page, writing a parked link or a checkpoint) and reports back.
//!
//! A message is one event of the subscribed stream (its *original* record; with `resolveLinktos`
//! the link's target rides along). Its id for `ack`/`nack` is the original record's event id.
//! Every message is in exactly one place until it is done:
//! - the **buffer** (read, not yet handed out, in event-number order),
//! - the **retry list** (handed out before and coming back, by event number; also parked
//!   messages being replayed),
//! - **in flight** (handed to a consumer, with a deadline on the `Env` clock when
//!   `messageTimeoutMilliseconds` is not 0),
//! - **parking** (its parked link is being written).
//!
//! A message is done when acknowledged, skipped, or its parked link is written.
//!
//! **Consumers over HTTP.** A consumer is a name a poll gives (`?consumer=`, by default the
//! caller's login), within one group. It joins with its first poll and lives while it polls or
//! acknowledges at least once every [`Group::consumer_lapse`]; when it lapses its in-flight
//! messages are retried at once and it leaves (Pinned streams move to the others). Its slots are
//! the page size of its last poll. Strategies decide which buffered messages a poll may take:
//! RoundRobin any; DispatchToSingle only when every consumer that joined before it holds as many
//! messages as its slots; Pinned only the streams whose bucket (a hash of the source stream, mod
//! [`PINNED_BUCKETS`]) falls to it (bucket mod the number of live consumers, in joining order), and
//! never while another consumer holds a message of that bucket.
//!
//! Invariants: the checkpoint never passes a message that is not done (the lowest event number
//! of any message of the stream that is not done, minus one, or the last event read when none is
//! left); a message is delivered at most `maxRetryCount + 1` times before it is parked; one
//! message id is in flight at most once; under Pinned, no bucket's messages are in flight with two
//! consumers at once.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::settings::{Settings, Strategy};
use crate::store::ResolvedEvent;

/// Buckets of the Pinned strategy.
pub const PINNED_BUCKETS: u64 = 1024;
/// Shortest time a consumer lives without polling or acknowledging.
pub const CONSUMER_LAPSE_MIN: Duration = Duration::from_secs(30);
/// Fewest events a page read asks for (as v5 reads at least ten).
pub const READ_BATCH_MIN: usize = 10;
/// Reason of a message parked by a client's nack.
pub const PARK_NACK_REASON: &str = "Client explicitly NAK'ed message.";

/// A message id: the original record's event id.
pub type MessageId = [u8; 16];

/// A message of the subscription.
#[derive(Clone, Debug)]
pub struct Message {
    /// The event as read (original record, and its target when a link was resolved).
    pub event: Arc<ResolvedEvent>,
    /// Event number of the original record in the subscribed stream.
    pub number: i64,
    /// The id acknowledgements name.
    pub id: MessageId,
    /// Times it came back after a delivery.
    pub retries: u32,
    /// Replayed from the parked stream (it does not hold the checkpoint back).
    pub replayed: bool,
    /// Pinned bucket.
    pub bucket: u64,
}

impl Message {
    /// A message of `event` (an event of the subscribed stream as read).
    pub fn new(event: ResolvedEvent, replayed: bool) -> Message {
        let original = event.original();
        let (number, id) = (original.event_number, original.id);
        let bucket = crate::index::stream_hash(source_stream(&event), u64::MAX) % PINNED_BUCKETS;
        Message { event: Arc::new(event), number, id, retries: 0, replayed, bucket }
    }
}

/// The stream an event comes from for Pinned: the resolved event's, or for a link that did not
/// resolve, the stream its data names.
fn source_stream(ev: &ResolvedEvent) -> &str {
    if ev.link.is_none() && ev.event.event_type == "$>" {
        if let Some((_, s)) = std::str::from_utf8(&ev.event.data).ok().and_then(|d| d.split_once('@')) {
            return s;
        }
    }
    &ev.event.stream
}

/// How a nack wants a message handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NackAction {
    /// Park it now.
    Park,
    /// Deliver it again (parked once the retries are used up).
    Retry,
    /// Drop it as if handled.
    Skip,
    /// Leave it in flight (v5 does nothing either): it times out as usual.
    Stop,
}

impl NackAction {
    /// Parses `?action=` (case-insensitive; absent or unknown is Retry, as v5's `Unknown`).
    pub fn parse(v: Option<&str>) -> NackAction {
        match v.map(str::to_ascii_lowercase).as_deref() {
            Some("park") => NackAction::Park,
            Some("skip") => NackAction::Skip,
            Some("stop") => NackAction::Stop,
            _ => NackAction::Retry,
        }
    }
}

/// A page the shell should read: `count` events of the stream from `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// First event number.
    pub from: i64,
    /// Events at most.
    pub count: usize,
}

/// The outcome of a page read.
#[derive(Clone, Debug)]
pub enum PageResult {
    /// Events (in order), where the next page starts, the stream's last event number, and
    /// whether the read reached the end.
    Page {
        /// Events.
        events: Vec<ResolvedEvent>,
        /// Next event number.
        next: i64,
        /// The stream's last event number.
        last: i64,
        /// End of stream.
        end: bool,
    },
    /// The stream does not exist (yet, or soft-deleted): nothing to read.
    NoStream,
    /// The stream was hard-deleted: the group has nothing more to deliver.
    Deleted,
    /// The read failed; it is tried again later.
    Failed,
}

/// A parked link to write.
#[derive(Clone, Debug)]
pub struct ParkRequest {
    /// The message.
    pub message: Message,
    /// Why.
    pub reason: String,
}

/// Why a poll gets nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeError {
    /// The group has `maxSubscriberCount` live consumers and this is not one of them.
    TooManyConsumers,
    /// The stream was hard-deleted.
    StreamDeleted,
}

/// A live consumer.
#[derive(Clone, Debug)]
pub struct Consumer {
    /// Its name.
    pub name: String,
    /// The login of its last poll.
    pub user: String,
    /// Page size of its last poll.
    pub slots: usize,
    /// Messages it holds.
    pub in_flight: usize,
    /// When it last polled or acknowledged.
    pub last_seen: Duration,
    /// Messages it acknowledged or skipped.
    pub processed: u64,
    /// `processed` at the last measurement.
    pub processed_measured: u64,
}

struct InFlight {
    msg: Message,
    deadline: Option<Duration>,
    consumer: String,
}

/// A group's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Messages acknowledged or skipped.
    pub processed: u64,
    /// Deliveries (first and later).
    pub delivered: u64,
    /// Messages retried (timeouts, nacks, lapsed consumers).
    pub retried: u64,
    /// Messages parked.
    pub parked: u64,
    /// Time-outs.
    pub timed_out: u64,
}

/// One subscription group (see the module doc).
pub struct Group {
    /// Subscribed stream.
    pub stream: String,
    /// Group name.
    pub group: String,
    /// Settings.
    pub settings: Settings,
    next_read: i64,
    at_end: bool,
    written_since_read: bool,
    reading: bool,
    deleted: bool,
    last_known: i64,
    buffer: VecDeque<Message>,
    retry: BTreeMap<(i64, MessageId), Message>,
    in_flight: HashMap<MessageId, InFlight>,
    parking: HashMap<MessageId, ParkRequest>,
    park_queue: Vec<MessageId>,
    /// Event numbers of the messages not done (replays excepted), with multiplicity.
    pending: BTreeMap<i64, u32>,
    /// Pinned buckets with messages in flight: who holds them and how many.
    holders: HashMap<u64, (String, usize)>,
    consumers: Vec<Consumer>,
    checkpoint: i64,
    checkpoint_writing: Option<i64>,
    checkpoint_at: Duration,
    replaying: bool,
    /// Figures.
    pub figures: Figures,
    processed_measured: u64,
    measured_at: Duration,
}

impl Group {
    /// A group that resumes after `checkpoint` (the last checkpointed event number, if any),
    /// else starts at `startFrom`, or when that is negative, after `stream_last` (live only).
    pub fn new(
        stream: String,
        group: String,
        settings: Settings,
        checkpoint: Option<i64>,
        stream_last: i64,
        now: Duration,
    ) -> Group {
        let next_read = match checkpoint {
            Some(c) => c + 1,
            None if settings.start_from >= 0 => settings.start_from,
            None => stream_last.max(-1) + 1,
        };
        Group {
            stream,
            group,
            settings,
            next_read,
            at_end: false,
            written_since_read: false,
            reading: false,
            deleted: false,
            last_known: -1,
            buffer: VecDeque::new(),
            retry: BTreeMap::new(),
            in_flight: HashMap::new(),
            parking: HashMap::new(),
            park_queue: Vec::new(),
            pending: BTreeMap::new(),
            holders: HashMap::new(),
            consumers: Vec::new(),
            checkpoint: checkpoint.unwrap_or(-1),
            checkpoint_writing: None,
            checkpoint_at: now,
            replaying: false,
            figures: Figures::default(),
            processed_measured: 0,
            measured_at: now,
        }
    }

    /// How long a consumer lives without polling or acknowledging.
    pub fn consumer_lapse(&self) -> Duration {
        CONSUMER_LAPSE_MIN.max(Duration::from_millis(self.settings.message_timeout_ms.saturating_mul(2)))
    }

    fn cap(&self) -> usize {
        if self.at_end {
            self.settings.live_buffer_size
        } else {
            self.settings.buffer_size
        }
    }

    // ---- reading ----

    /// The stream (or its metadata) was written: there may be more to read.
    pub fn written(&mut self) {
        self.written_since_read = true;
        self.at_end = false;
    }

    /// The page to read next, if the buffer has room and the stream may have more. Only one
    /// read is outstanding at a time.
    pub fn read_request(&mut self) -> Option<ReadRequest> {
        if self.reading || self.deleted || self.at_end {
            return None;
        }
        let held = self.buffer.len() + self.retry.len();
        let free = self.cap().saturating_sub(held);
        if free == 0 {
            return None;
        }
        self.reading = true;
        self.written_since_read = false;
        Some(ReadRequest {
            from: self.next_read,
            count: free.min(self.settings.read_batch_size.max(READ_BATCH_MIN)),
        })
    }

    /// Takes in the outcome of the read [`Group::read_request`] asked for.
    pub fn on_read(&mut self, result: PageResult) {
        self.reading = false;
        match result {
            PageResult::Page { events, next, last, end } => {
                self.last_known = self.last_known.max(last);
                for ev in events {
                    let m = Message::new(ev, false);
                    if m.number < self.next_read {
                        continue;
                    }
                    self.next_read = m.number + 1;
                    *self.pending.entry(m.number).or_default() += 1;
                    self.buffer.push_back(m);
                }
                self.next_read = self.next_read.max(next);
                self.at_end = end && !self.written_since_read;
            }
            PageResult::NoStream => self.at_end = !self.written_since_read,
            PageResult::Deleted => {
                self.deleted = true;
                self.at_end = true;
            }
            PageResult::Failed => {}
        }
    }

    /// Whether the stream was hard-deleted under the group.
    pub fn stream_deleted(&self) -> bool {
        self.deleted
    }

    // ---- consumers and delivery ----

    fn consumer_index(&self, name: &str) -> Option<usize> {
        self.consumers.iter().position(|c| c.name == name)
    }

    fn full(c: &Consumer) -> bool {
        c.in_flight >= c.slots.max(1)
    }

    /// Gives consumer `name` (polling as `user`) up to `count` messages: the retry list first,
    /// then the buffer, as the strategy allows. They are in flight from `now`.
    pub fn take(
        &mut self,
        name: &str,
        user: &str,
        count: usize,
        now: Duration,
    ) -> Result<Vec<Message>, TakeError> {
        self.expire(now);
        let me = match self.consumer_index(name) {
            Some(i) => i,
            None => {
                let max = self.settings.max_subscriber_count as usize;
                if max > 0 && self.consumers.len() >= max {
                    return Err(TakeError::TooManyConsumers);
                }
                self.consumers.push(Consumer {
                    name: name.to_owned(),
                    user: user.to_owned(),
                    slots: count,
                    in_flight: 0,
                    last_seen: now,
                    processed: 0,
                    processed_measured: 0,
                });
                self.consumers.len() - 1
            }
        };
        {
            let c = &mut self.consumers[me];
            c.user = user.to_owned();
            c.slots = count;
            c.last_seen = now;
        }
        if self.deleted && self.buffer.is_empty() && self.retry.is_empty() {
            return Err(TakeError::StreamDeleted);
        }
        if self.settings.strategy == Strategy::DispatchToSingle
            && !self.consumers[..me].iter().all(Group::full)
        {
            return Ok(Vec::new());
        }
        let live = self.consumers.len() as u64;
        let strategy = self.settings.strategy;
        let allowed = |m: &Message, holders: &HashMap<u64, (String, usize)>| match strategy {
            Strategy::RoundRobin | Strategy::DispatchToSingle => true,
            Strategy::Pinned => {
                (m.bucket % live) as usize == me
                    && (holders.get(&m.bucket).is_none_or(|(h, _)| h == name)
                        || crate::buggify::bug(crate::buggify::Bug::SubPinnedIgnoresHolder))
            }
        };
        let mut out = Vec::new();
        let keys: Vec<(i64, MessageId)> = self.retry.keys().copied().collect();
        for k in keys {
            if out.len() >= count {
                break;
            }
            let ok = self.retry.get(&k).is_some_and(|m| allowed(m, &self.holders));
            if ok {
                if let Some(m) = self.retry.remove(&k) {
                    out.push(m);
                }
            }
        }
        let mut i = 0;
        while out.len() < count && i < self.buffer.len() {
            if allowed(&self.buffer[i], &self.holders) {
                if let Some(m) = self.buffer.remove(i) {
                    if self.in_flight.contains_key(&m.id) || out.iter().any(|o: &Message| o.id == m.id) {
                        // The same id twice (a duplicate event id): the second copy is dropped.
                        tracing::warn!(stream = %self.stream, group = %self.group, "duplicate message id skipped");
                        self.done_number(&m);
                        continue;
                    }
                    out.push(m);
                }
            } else {
                i += 1;
            }
        }
        let deadline = (self.settings.message_timeout_ms > 0)
            .then(|| now + Duration::from_millis(self.settings.message_timeout_ms));
        for m in &out {
            self.figures.delivered += 1;
            let h = self.holders.entry(m.bucket).or_insert_with(|| (name.to_owned(), 0));
            h.1 += 1;
            self.in_flight.insert(m.id, InFlight { msg: m.clone(), deadline, consumer: name.to_owned() });
        }
        self.consumers[me].in_flight += out.len();
        Ok(out)
    }

    /// Removes `id` from flight (or from the retry list, for a late answer), with its holder.
    fn take_back(&mut self, id: &MessageId, now: Duration) -> Option<Message> {
        if let Some(f) = self.in_flight.remove(id) {
            if let Some(h) = self.holders.get_mut(&f.msg.bucket) {
                h.1 -= 1;
                if h.1 == 0 {
                    self.holders.remove(&f.msg.bucket);
                }
            }
            if let Some(i) = self.consumer_index(&f.consumer) {
                let c = &mut self.consumers[i];
                c.in_flight = c.in_flight.saturating_sub(1);
                c.last_seen = c.last_seen.max(now);
            }
            return Some(f.msg);
        }
        let key = self.retry.keys().find(|(_, i)| i == id).copied()?;
        self.retry.remove(&key)
    }

    fn done_number(&mut self, m: &Message) {
        if m.replayed {
            return;
        }
        if let Some(n) = self.pending.get_mut(&m.number) {
            *n -= 1;
            if *n == 0 {
                self.pending.remove(&m.number);
            }
        }
    }

    fn processed_by(&mut self, m: &Message, holder: Option<String>) {
        self.done_number(m);
        self.figures.processed += 1;
        if let Some(i) = holder.and_then(|h| self.consumer_index(&h)) {
            self.consumers[i].processed += 1;
        }
    }

    fn holder_of(&self, id: &MessageId) -> Option<String> {
        self.in_flight.get(id).map(|f| f.consumer.clone())
    }

    /// Acknowledges messages (unknown ids are ignored).
    pub fn ack(&mut self, ids: &[MessageId], now: Duration) {
        for id in ids {
            let holder = self.holder_of(id);
            if let Some(m) = self.take_back(id, now) {
                self.processed_by(&m, holder);
            }
        }
    }

    /// Answers messages negatively (unknown ids are ignored).
    pub fn nack(&mut self, ids: &[MessageId], action: NackAction, now: Duration) {
        for id in ids {
            if action == NackAction::Stop {
                continue;
            }
            let holder = self.holder_of(id);
            let Some(m) = self.take_back(id, now) else { continue };
            match action {
                NackAction::Park => self.park(m, PARK_NACK_REASON.to_owned()),
                NackAction::Retry => self.retry_or_park(m),
                NackAction::Skip => self.processed_by(&m, holder),
                NackAction::Stop => {}
            }
        }
    }

    fn retry_or_park(&mut self, mut m: Message) {
        if crate::buggify::bug(crate::buggify::Bug::SubRetryDrops) {
            self.done_number(&m);
            return;
        }
        let off_by_one = u32::from(crate::buggify::bug(crate::buggify::Bug::SubRetryCountOffByOne));
        if m.retries >= self.settings.max_retry_count.saturating_add(off_by_one) {
            let reason = format!("Reached retry count of {}", self.settings.max_retry_count);
            self.park(m, reason);
        } else {
            m.retries += 1;
            self.figures.retried += 1;
            self.retry.insert((m.number, m.id), m);
        }
    }

    fn park(&mut self, m: Message, reason: String) {
        self.park_queue.push(m.id);
        self.parking.insert(m.id, ParkRequest { message: m, reason });
    }

    /// Retries the in-flight messages past their deadline and lets lapsed consumers go (their
    /// messages are retried).
    pub fn expire(&mut self, now: Duration) {
        let late: Vec<MessageId> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            if let Some(m) = self.take_back(&id, Duration::ZERO) {
                self.figures.timed_out += 1;
                self.retry_or_park(m);
            }
        }
        let lapse = self.consumer_lapse();
        let gone: Vec<String> =
            self.consumers.iter().filter(|c| c.last_seen + lapse <= now).map(|c| c.name.clone()).collect();
        for name in gone {
            let held: Vec<MessageId> =
                self.in_flight.iter().filter(|(_, f)| f.consumer == name).map(|(id, _)| *id).collect();
            for id in held {
                if let Some(m) = self.take_back(&id, Duration::ZERO) {
                    self.retry_or_park(m);
                }
            }
            self.consumers.retain(|c| c.name != name);
        }
    }

    // ---- parking ----

    /// The parked links to write now (each is asked for once until its outcome is reported).
    pub fn parks_due(&mut self) -> Vec<ParkRequest> {
        std::mem::take(&mut self.park_queue).iter().filter_map(|id| self.parking.get(id).cloned()).collect()
    }

    /// A parked link was written (`ok`) or failed (it is asked for again).
    pub fn on_parked(&mut self, id: MessageId, ok: bool) {
        if !ok {
            if self.parking.contains_key(&id) {
                self.park_queue.push(id);
            }
            return;
        }
        if let Some(p) = self.parking.remove(&id) {
            self.figures.parked += 1;
            self.done_number(&p.message);
        }
    }

    /// Whether a replay of parked messages is under way.
    pub fn replaying(&self) -> bool {
        self.replaying
    }

    /// Starts a replay; false when one is under way already.
    pub fn begin_replay(&mut self) -> bool {
        !std::mem::replace(&mut self.replaying, true)
    }

    /// Adds replayed parked messages to the retry list (ids already held are left out).
    pub fn add_replayed(&mut self, msgs: Vec<Message>) {
        if crate::buggify::bug(crate::buggify::Bug::SubReplayDrops) {
            return;
        }
        for m in msgs {
            let held = self.in_flight.contains_key(&m.id)
                || self.parking.contains_key(&m.id)
                || self.retry.keys().any(|(_, i)| *i == m.id)
                || self.buffer.iter().any(|b| b.id == m.id);
            if !held {
                self.retry.insert((m.number, m.id), m);
            }
        }
    }

    /// The replay ended.
    pub fn end_replay(&mut self) {
        self.replaying = false;
    }

    // ---- checkpoints ----

    /// The highest event number below which every message is done.
    pub fn checkpoint_candidate(&self) -> i64 {
        if crate::buggify::bug(crate::buggify::Bug::SubCheckpointAhead) {
            return self.next_read - 1;
        }
        match self.pending.keys().next() {
            Some(low) => low - 1,
            None => self.next_read - 1,
        }
    }

    /// The checkpoint to write now, if one is due: at once when `maxCheckPointCount` messages
    /// are done past the last one, or on the timer (`on_timer`) when `minCheckPointCount` are
    /// and `checkPointAfterMilliseconds` passed. One write at a time.
    pub fn checkpoint_due(&mut self, now: Duration, on_timer: bool) -> Option<i64> {
        if self.checkpoint_writing.is_some() {
            return None;
        }
        let low = self.checkpoint_candidate();
        let diff = low - self.checkpoint;
        if low < 0 || diff <= 0 {
            return None;
        }
        let s = &self.settings;
        let after = Duration::from_millis(s.check_point_after_ms);
        let due = diff >= s.max_check_point_count
            || (on_timer
                && s.check_point_after_ms > 0
                && diff >= s.min_check_point_count
                && now.saturating_sub(self.checkpoint_at) >= after);
        if due {
            self.checkpoint_writing = Some(low);
            return Some(low);
        }
        None
    }

    /// The checkpoint write asked for ended.
    pub fn on_checkpoint(&mut self, n: i64, ok: bool, now: Duration) {
        if self.checkpoint_writing == Some(n) {
            self.checkpoint_writing = None;
        }
        if ok {
            self.checkpoint = self.checkpoint.max(n);
            self.checkpoint_at = now;
        }
    }

    /// The last checkpoint written.
    pub fn checkpoint(&self) -> i64 {
        self.checkpoint
    }

    // ---- figures ----

    /// The status flags' name (v5's `Behind`, `Live`, `OutstandingPageRequest`,
    /// `ReplayingParkedMessages`, comma-joined in that order of value).
    pub fn status(&self) -> String {
        let mut parts = Vec::new();
        if self.deleted {
            return "NotReady".into();
        }
        if !self.at_end {
            parts.push("Behind");
        }
        if self.reading {
            parts.push("OutstandingPageRequest");
        }
        if self.replaying {
            parts.push("ReplayingParkedMessages");
        }
        if self.at_end {
            parts.push("Live");
        }
        parts.join(", ")
    }

    /// A snapshot of the group's figures; `measure` starts a new measurement (the rate covers
    /// the time since the previous one).
    pub fn snapshot(&mut self, now: Duration, measure: bool) -> Snapshot {
        let secs = now.saturating_sub(self.measured_at).as_secs_f64();
        let rate =
            |done: u64, before: u64| if secs > 0.0 { ((done - before) as f64 / secs).floor() } else { 0.0 };
        let snap = Snapshot {
            status: self.status(),
            processed: self.figures.processed,
            count_since: self.figures.processed - self.processed_measured,
            average_per_second: rate(self.figures.processed, self.processed_measured),
            last_processed: self.checkpoint,
            last_known: self.last_known.max(self.next_read - 1),
            buffered: self.buffer.len(),
            live: self.at_end,
            retry: self.retry.len(),
            in_flight: self.in_flight.len(),
            parking: self.parking.len(),
            figures: self.figures.clone(),
            consumers: self
                .consumers
                .iter()
                .map(|c| ConsumerSnapshot {
                    name: c.name.clone(),
                    user: c.user.clone(),
                    processed: c.processed,
                    count_since: c.processed - c.processed_measured,
                    average_per_second: rate(c.processed, c.processed_measured),
                    available_slots: c.slots.saturating_sub(c.in_flight),
                    in_flight: c.in_flight,
                })
                .collect(),
        };
        if measure {
            self.processed_measured = self.figures.processed;
            self.measured_at = now;
            for c in &mut self.consumers {
                c.processed_measured = c.processed;
            }
        }
        snap
    }
}

/// A group's figures at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Status name.
    pub status: String,
    /// Messages done by consumers.
    pub processed: u64,
    /// Done since the previous measurement.
    pub count_since: u64,
    /// Rate since the previous measurement.
    pub average_per_second: f64,
    /// The last checkpoint.
    pub last_processed: i64,
    /// The highest event number seen.
    pub last_known: i64,
    /// Buffered messages.
    pub buffered: usize,
    /// Whether the group is live (the buffer is the live buffer).
    pub live: bool,
    /// Messages in the retry list.
    pub retry: usize,
    /// Messages in flight.
    pub in_flight: usize,
    /// Messages whose parked link is being written.
    pub parking: usize,
    /// Counters.
    pub figures: Figures,
    /// Live consumers.
    pub consumers: Vec<ConsumerSnapshot>,
}

/// A consumer's figures.
#[derive(Clone, Debug)]
pub struct ConsumerSnapshot {
    /// Name.
    pub name: String,
    /// Login of its last poll.
    pub user: String,
    /// Messages done.
    pub processed: u64,
    /// Done since the previous measurement.
    pub count_since: u64,
    /// Rate since the previous measurement.
    pub average_per_second: f64,
    /// Slots left.
    pub available_slots: usize,
    /// Messages held.
    pub in_flight: usize,
}

#[cfg(test)]
mod tests;
