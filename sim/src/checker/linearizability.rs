//! Linearizability: **every stream is linearizable against `annal_model::Model`**. There is an
//! order of the stream's operations that respects real time (an operation that completed before
//! another was invoked comes first) in which the model gives every operation the answer the node
//! gave. Writes whose outcome is unknown (timeout, dropped connection, 5xx) may take effect at any
//! point after their invocation, or never. Node restarts are operations too: they make the model
//! forget recently written event ids, as the node does.
//!
//! # How the search is split
//!
//! Linearizability is local (Herlihy & Wing): a history is linearizable iff each object's
//! sub-history is. Streams are the objects here: every operation the workload sends touches one
//! stream (event ids are never shared between streams, and restarts act on every stream alike, so
//! each stream's sub-history gets all of them). So each stream is checked alone.
//!
//! Reads of `$all` would span every stream and break that split. The workload sends none today
//! ([`OpKind`] has no such operation, so this cannot change unnoticed). When it does, the choice
//! is to keep the per-stream searches as they are and check each `$all` read afterwards against
//! their results (its projection on each stream must be a prefix of that stream's events, and
//! positions must order the events as the per-stream witnesses do), with one combined search under
//! the same step budget only for the `$all` reads that this cannot settle; an exhausted budget is
//! inconclusive, as below. A combined search over all streams from the start would multiply the
//! per-stream state spaces and make every seed pay for the few that read `$all`.
//!
//! # Unknown writes, narrowed down
//!
//! Before the search, answers settle many unknown writes. From every completed operation the
//! checker knows the id at each event number it showed (reads, acknowledged appends) and when an
//! answer first showed the stream ending at or past each number. Each rule below keeps some
//! linearization whenever there is one (a write that changes nothing is as good as never made):
//!
//! - A write with an exact expected version takes effect only while the stream ends there: by
//!   the time an answer shows the stream past it, or never.
//! - An append whose ids no other operation carries took effect by the time an answer shows them
//!   (or shows the stream past where they are): it must be linearized by then.
//! - The final read (after healing), when every other completed operation of the stream came
//!   before it, settles more (an unknown write after it is as good as never made). If it shows
//!   events: a hard delete never took effect; a soft delete did, if ever, while the stream ended
//!   before the first event it shows. An append with an id the stream does not hold at the end
//!   (every event number known) never took effect, and one with an id the final read does not
//!   show was written before the first event it shows, if ever. A batch whose every carrier
//!   carries it whole (an append and its retries) and that the stream holds once was written
//!   once, by one of them, by the time an answer shows it.
//! - Otherwise, in a stream never deleted, an append whose events the final read lacks never took
//!   effect.
//!
//! A write dropped by these is left out. One that took effect "by t, or never" is linearized by
//! t or skipped; one with no such bound stays optional to the end of the history.
//!
//! # Segments
//!
//! A stream's history is cut at quiescent points: times no operation spans (every one completed
//! before or is invoked after; a restart is a point, an unknown write spans to its bound, or to
//! the end without one). Real time orders every segment's operations before the next one's, so
//! the search goes segment by segment. A segment can end in several states: the search yields
//! them one at a time (each distinct by its exact [`stream_model::Key`]) and searches the next
//! segment from each in turn, resuming the segment for another end state when the rest fails
//! from this one (a depth-first search over segments; each segment keeps one memo for all its
//! start states and the start states from which the rest failed). A segment searched from more
//! than [`MAX_END_STATES`] states makes the stream inconclusive. The witness is the segments'
//! linearizations, chained.
//!
//! # The search in a segment
//!
//! Wing & Gong's depth-first search over the history's call and return entries in a
//! doubly-linked list (Lowe's and Porcupine's formulation): the candidates are the operations
//! invoked before the first pending return; linearizing one unlinks its entries, backtracking
//! relinks them. Completed operations are tried first, then skipping the unknown write whose
//! bound is that first return, then unknown-outcome operations. Around it:
//!
//! - **Memoisation** (Lowe; Porcupine's cache): a (linearized set, model state) pair already
//!   explored is never explored again. The pair is hashed (Zobrist hashing of the set, xor the
//!   state's hash) and collisions are resolved by equality: the set is stored exactly (as its
//!   all-ones prefix length and the rest), the state by its exact [`stream_model::Key`] (the log
//!   prefix is interned in a trie, so equal logs have equal ids).
//! - **One mutable state, undone on backtrack**: the search runs [`stream_model`], a model of one
//!   stream with `annal_model::Model`'s rules, changed in place and undone in O(1) per event; no
//!   state is ever cloned (a segment's end state is kept as a snapshot, restored to resume it).
//! - **Pruning**, each sound because event numbers are permanent (the stream only grows, a hard
//!   delete is forever, and only a delete still to come can hide events again):
//!   - an append that would write at a number some read showed with another id is dead on the
//!     spot, and so is one that makes the stream end past where an operation of the segment
//!     still to be linearized saw it end (a read that reached the end, an append refused with the
//!     current version, a delete with an exact expected version);
//!   - a completed operation that fails in a state from which no remaining operation of the
//!     segment can lead to one where it succeeds ends the branch at once.
//!
//!   Without these, a dead end behind many unknown appends is explored in every order of them
//!   before the search backtracks past it (seeds 700280 and 700778 ran for minutes). An
//!   unknown-outcome write that changes nothing in the current state is not linearized there
//!   (never writing it is as good), and of two identical unknown writes with the same bound (a
//!   retry) the earlier is always decided first.
//! - **Budget**: the search takes at most `budget` steps (model evaluations) per stream, over all
//!   its segments. A stream whose search runs out is *inconclusive*: not a pass and not a
//!   failure; the run reports it and campaigns count it. Steps, not time, so the verdict is
//!   deterministic.
//! - **Witness**: a linearization found is replayed on `annal_model::Model` itself, answer by
//!   answer (data included); a disagreement is reported as a checker bug, so a pass always rests
//!   on the reference model.
//!
//! A history that is not linearizable is explained: the segment that fails (the last one the
//! search reaches; its time range, and from how many start states it was searched), the longest
//! prefix of completed operations that could be ordered, the operations none of which could come
//! next (with the model's answer for each), and the segment's history with the operations just
//! before it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};

use annal_model::{AppendError, Model, NewEvent, ReadError, StreamSlice};

use super::stream_model::{self, Answer, MOp, Snapshot, StreamState, Undo};
use crate::history::{short_id, History, Op, OpKind, Outcome, ReadEv};
use crate::workload::FULL_READ;

/// What the search found over all streams.
#[derive(Debug, Default)]
pub struct Findings {
    /// Streams that are not linearizable, each explained.
    pub failures: Vec<String>,
    /// Streams whose search ran out of budget.
    pub inconclusive: Vec<String>,
    /// Steps taken, over all streams.
    pub steps: u64,
}

/// Checks every stream of `h`; `final_reads` (ids of the reads after healing) narrow unknown
/// appends down; `budget` bounds each stream's steps.
pub fn check(h: &History, final_reads: &[usize], budget: u64) -> Findings {
    let mut f = Findings::default();
    let mut names: Vec<&str> =
        h.ops.iter().filter(|o| !o.stream.is_empty()).map(|o| o.stream.as_str()).collect();
    names.sort();
    names.dedup();
    for s in names {
        match search(h, s, final_reads, budget) {
            Verdict::Ok(n) => f.steps += n,
            Verdict::Inconclusive(n) => {
                f.steps += n;
                f.inconclusive.push(s.to_owned());
            }
            Verdict::Fail(n, msg) => {
                f.steps += n;
                f.failures.push(msg);
            }
        }
    }
    f
}

/// The verdict on one stream, with the steps taken.
#[derive(Debug)]
pub enum Verdict {
    /// Linearizable.
    Ok(u64),
    /// The budget ran out, or a segment needed more than [`MAX_END_STATES`] start states.
    Inconclusive(u64),
    /// Not linearizable (or the witness failed on the reference model): why.
    Fail(u64, String),
}

/// One operation as the search sees it.
struct COp<'a> {
    op: &'a Op,
    inv: u64,
    /// Completion time, or for an unknown outcome the time by which it took effect if it ever
    /// did; `u64::MAX`: unknown outcome, optional, unbounded.
    ret: u64,
    /// An unknown outcome that took effect by `ret` or never: by then it is linearized, or
    /// skipped (left out).
    skip: bool,
    mop: MOp,
    /// For reads: every event returned carries the data its id was written with.
    data_ok: bool,
}

impl COp<'_> {
    fn optional(&self) -> bool {
        self.ret == u64::MAX
    }

    /// Whether it must be linearized (its outcome is known, or it surely took effect by `ret`).
    fn completed(&self) -> bool {
        !self.optional() && !self.skip
    }
}

/// The ids of an append (empty for other operations).
fn ids_of(kind: &OpKind) -> Vec<[u8; 16]> {
    match kind {
        OpKind::Append { events, .. } => events.iter().map(|e| e.id).collect(),
        _ => Vec::new(),
    }
}

fn model_op(kind: &OpKind) -> MOp {
    match kind {
        OpKind::Append { expected, .. } => MOp::Append { expected: *expected, ids: ids_of(kind) },
        OpKind::Delete { expected, hard } => MOp::Delete { expected: *expected, hard: *hard },
        OpKind::ReadForward { from, count } => MOp::ReadForward { from: *from, count: *count as i64 },
        OpKind::ReadBackward { count } => MOp::ReadBackward { count: *count as i64 },
        OpKind::Restart => MOp::Restart,
    }
}

/// What completed operations show of a stream, for narrowing unknown writes down.
struct Shown {
    /// The id at each event number: what reads showed and where acknowledged appends wrote
    /// (`None`: two of them disagree, which the search explains).
    at: Option<HashMap<i64, [u8; 16]>>,
    /// `by[k]`: when an operation completed that showed the stream ending at `k` or later.
    by: Vec<u64>,
    /// When an operation completed that showed an id in the stream (a read, or an acknowledged
    /// append carrying it).
    seen: HashMap<[u8; 16], u64>,
    /// The lowest number at which `at` has each id.
    pos: HashMap<[u8; 16], i64>,
}

impl Shown {
    fn new<'a>(mine: impl Iterator<Item = &'a Op>) -> Shown {
        let mut sh =
            Shown { at: Some(HashMap::new()), by: Vec::new(), seen: HashMap::new(), pos: HashMap::new() };
        for o in mine {
            let place = |sh: &mut Shown, n: i64, id: [u8; 16]| {
                let t = sh.seen.entry(id).or_insert(u64::MAX);
                *t = (*t).min(o.complete);
                if let Some(at) = &mut sh.at {
                    if *at.entry(n).or_insert(id) != id {
                        sh.at = None;
                    }
                }
            };
            let end = match (&o.kind, &o.outcome) {
                (_, Outcome::Read { events }) => {
                    for e in events {
                        place(&mut sh, e.number, e.id);
                    }
                    events.last().map(|e| e.number)
                }
                (OpKind::Append { events, .. }, Outcome::Appended { first: Some(first) }) => {
                    for (e, n) in events.iter().zip(*first..) {
                        place(&mut sh, n, e.id);
                    }
                    Some(first + events.len() as i64 - 1)
                }
                (OpKind::Append { events, .. }, Outcome::Appended { first: None }) => {
                    for e in events {
                        let t = sh.seen.entry(e.id).or_insert(u64::MAX);
                        *t = (*t).min(o.complete);
                    }
                    None
                }
                (OpKind::Append { .. }, Outcome::WrongVersion { current }) => *current,
                _ => None,
            };
            if let Some(k) = end.and_then(|k| usize::try_from(k).ok()) {
                if sh.by.len() <= k {
                    sh.by.resize(k + 1, u64::MAX);
                }
                sh.by[k] = sh.by[k].min(o.complete);
            }
        }
        for k in (1..sh.by.len()).rev() {
            sh.by[k - 1] = sh.by[k - 1].min(sh.by[k]);
        }
        for (n, id) in sh.at.iter().flatten() {
            let p = sh.pos.entry(*id).or_insert(*n);
            *p = (*p).min(*n);
        }
        sh
    }

    /// When an operation completed that showed the stream ending at `k` or later.
    fn by(&self, k: i64) -> u64 {
        match usize::try_from(k) {
            Err(_) => 0,
            Ok(k) => self.by.get(k).copied().unwrap_or(u64::MAX),
        }
    }

    /// When an operation completed that showed the batch `ids` in the stream, given that only
    /// one write of it can be there: seen, or the stream shown past where it is.
    fn written_by(&self, ids: &[[u8; 16]]) -> Option<u64> {
        let seen = ids.iter().filter_map(|id| self.seen.get(id)).min().copied();
        let past = ids.first().and_then(|id| self.pos.get(id)).map(|n| self.by(*n));
        seen.into_iter().chain(past).min().filter(|t| *t != u64::MAX)
    }
}

/// What the final read of a stream settles, when it came after every other completed operation
/// of the stream: after it, an unknown write is as good as never written.
struct Settled {
    /// The first and last event numbers it showed, and the ids (`None`: no stream).
    shown: Option<(i64, i64, HashSet<[u8; 16]>)>,
    /// How many times each id is in the stream at the end, when every number is known.
    log: Option<HashMap<[u8; 16], u32>>,
}

impl Settled {
    fn new(last: &Op, deleted: bool, shown: &Shown) -> Option<Settled> {
        let seen = match &last.outcome {
            Outcome::Read { events } if !events.is_empty() => Some((
                events[0].number,
                events[events.len() - 1].number,
                events.iter().map(|e| e.id).collect(),
            )),
            Outcome::NoStream => None,
            _ => return None,
        };
        let log = match (&seen, &shown.at) {
            (Some((_, end, _)), Some(at)) => {
                (0..=*end).map(|n| at.get(&n)).collect::<Option<Vec<_>>>().map(|ids| {
                    let mut n = HashMap::new();
                    for id in ids {
                        *n.entry(*id).or_default() += 1;
                    }
                    n
                })
            }
            (None, _) if !deleted => Some(HashMap::new()),
            _ => None,
        };
        Some(Settled { shown: seen, log })
    }
}

/// The operations of `stream` the search needs, with unknown writes narrowed down where reads
/// settle them (see the module doc), in invocation order.
fn stream_ops<'a>(h: &'a History, stream: &str, final_reads: &[usize]) -> Vec<COp<'a>> {
    let mine = || h.ops.iter().filter(move |o| o.stream == stream);
    let deleted = mine().any(|o| matches!(o.kind, OpKind::Delete { .. }));
    // Only a read that reached the end of the stream shows everything it holds.
    let last =
        final_reads.iter().map(|&i| &h.ops[i]).filter(|o| o.stream == stream).find(|o| match &o.outcome {
            Outcome::Read { events } => events.len() < FULL_READ,
            Outcome::NoStream => true,
            _ => false,
        });
    let final_ids: Option<HashSet<[u8; 16]>> = last.filter(|_| !deleted).map(|o| match &o.outcome {
        Outcome::Read { events } => events.iter().map(|e| e.id).collect(),
        _ => HashSet::new(),
    });
    let shown = Shown::new(mine());
    let settled = last
        .filter(|f| matches!(f.kind, OpKind::ReadForward { from: 0, .. }))
        .filter(|f| {
            mine().all(|o| {
                o.id == f.id
                    || o.complete == u64::MAX
                    || o.complete < f.invoke
                    || matches!(o.outcome, Outcome::Refused(_) | Outcome::Unexpected(_))
            })
        })
        .and_then(|f| Settled::new(f, deleted, &shown));
    let mut carriers: BTreeMap<[u8; 16], usize> = BTreeMap::new();
    let mut batches: HashMap<Vec<[u8; 16]>, usize> = HashMap::new();
    let mut data: HashMap<[u8; 16], &str> = HashMap::new();
    for o in mine() {
        if let OpKind::Append { events, .. } = &o.kind {
            for e in events {
                *carriers.entry(e.id).or_default() += 1;
                data.insert(e.id, e.data.as_str());
            }
            *batches.entry(ids_of(&o.kind)).or_default() += 1;
        }
    }
    let mut ops: Vec<COp> = h
        .ops
        .iter()
        .filter(|o| o.stream == stream || o.kind == OpKind::Restart)
        .filter(|o| match &o.outcome {
            Outcome::Refused(_) | Outcome::Unexpected(_) => false,
            Outcome::Pending | Outcome::Unknown(_) => o.kind.is_write(),
            _ => true,
        })
        .filter_map(|o| {
            let data_ok = match &o.outcome {
                Outcome::Read { events } => events.iter().all(|e| data.get(&e.id) == Some(&e.data.as_str())),
                _ => true,
            };
            let c = |ret, skip| COp { op: o, inv: o.invoke, ret, skip, mop: model_op(&o.kind), data_ok };
            // An unknown operation that took effect by `t` if ever; none if `t` is before it.
            let by = |t: u64| (t >= o.invoke).then(|| c(t, t != u64::MAX));
            if o.complete != u64::MAX {
                return Some(c(o.complete, false));
            }
            let ids = ids_of(&o.kind);
            // A write with an exact expected version takes effect only while the stream ends
            // there (an append with an older one is at most an idempotent repeat).
            let exact = match o.kind {
                OpKind::Append { expected, .. } if expected >= 0 => shown.by(expected + 1),
                OpKind::Delete { expected, .. } if expected >= -1 => shown.by(expected + 1),
                _ => u64::MAX,
            };
            if let OpKind::Delete { hard, .. } = o.kind {
                return match settled.as_ref().map(|s| &s.shown) {
                    Some(_) if hard => None,
                    Some(Some((first, ..))) => by(shown.by(*first).min(exact)),
                    _ => by(exact),
                };
            }
            if ids.is_empty() {
                return Some(c(u64::MAX, false));
            }
            // By when it took effect, if it ever did.
            let mut until = exact;
            match (&settled, &final_ids) {
                // Never written (before the final read: after it, as good as never).
                (Some(Settled { log: Some(log), .. }), _) if ids.iter().any(|id| !log.contains_key(id)) => {
                    return None;
                }
                // Never written, or written where the final read does not show (before `first`).
                (Some(Settled { log: None, shown: Some((first, _, seen)) }), _)
                    if ids.iter().any(|id| !seen.contains(id)) =>
                {
                    if *first == 0 {
                        return None;
                    }
                    until = until.min(shown.by(first - 1));
                }
                (None, Some(f)) if ids.iter().all(|id| !f.contains(id)) => return None,
                _ => {}
            }
            let unique = ids.iter().all(|id| carriers.get(id) == Some(&1));
            // Every op carrying these ids carries the whole batch, and the stream holds each id
            // once at the end: the batch was written once, by one of them.
            let once = settled.as_ref().and_then(|s| s.log.as_ref()).is_some_and(|log| {
                ids.iter().all(|id| carriers.get(id) == batches.get(&ids) && log.get(id) == Some(&1))
            });
            match shown.written_by(&ids).map(|t| t.min(until)) {
                Some(t) if unique => Some(c(t.max(o.invoke), false)),
                Some(t) if once => by(t),
                _ => by(until),
            }
        })
        .collect();
    ops.sort_by_key(|o| (o.inv, o.op.id));
    ops
}

/// Where no operation is in progress, in invocation order: the operations `ops[r]` of each
/// range `r` all end before the next range's first is invoked (see [`COp::ret`]).
fn segments(ops: &[COp]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut end) = (0, 0u64);
    for (k, o) in ops.iter().enumerate() {
        if k > start && end < o.inv {
            out.push(start..k);
            start = k;
        }
        end = end.max(o.ret);
    }
    out.push(start..ops.len());
    out
}

/// The doubly-linked list of call and return entries (entry 0 is the head, and the list is
/// circular), with the dancing-links unlink and relink of an operation's entries.
struct Entries {
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Per entry: its operation, and whether it is the call.
    op: Vec<u32>,
    call: Vec<bool>,
    /// Per operation: its call entry and its return entry (0: none, an optional operation).
    of: Vec<(u32, u32)>,
}

impl Entries {
    fn new(ops: &[COp]) -> Entries {
        // Calls before returns at the same instant: such operations count as concurrent.
        let mut ev: Vec<(u64, u8, u32)> = Vec::with_capacity(2 * ops.len());
        for (i, o) in ops.iter().enumerate() {
            ev.push((o.inv, 0, i as u32));
            if !o.optional() {
                ev.push((o.ret, 1, i as u32));
            }
        }
        ev.sort();
        let n = ev.len() + 1;
        let mut e = Entries {
            next: (0..n as u32).map(|i| (i + 1) % n as u32).collect(),
            prev: (0..n as u32).map(|i| (i + n as u32 - 1) % n as u32).collect(),
            op: vec![u32::MAX; n],
            call: vec![false; n],
            of: vec![(0, 0); ops.len()],
        };
        for (k, &(_, kind, i)) in ev.iter().enumerate() {
            let x = k + 1;
            e.op[x] = i;
            e.call[x] = kind == 0;
            if kind == 0 {
                e.of[i as usize].0 = x as u32;
            } else {
                e.of[i as usize].1 = x as u32;
            }
        }
        e
    }

    fn unlink(&mut self, x: u32) {
        let (p, n) = (self.prev[x as usize], self.next[x as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }

    fn relink(&mut self, x: u32) {
        let (p, n) = (self.prev[x as usize], self.next[x as usize]);
        self.next[p as usize] = x;
        self.prev[n as usize] = x;
    }

    fn lift(&mut self, i: usize) {
        let (c, r) = self.of[i];
        self.unlink(c);
        if r != 0 {
            self.unlink(r);
        }
    }

    fn unlift(&mut self, i: usize) {
        let (c, r) = self.of[i];
        if r != 0 {
            self.relink(r);
        }
        self.relink(c);
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A (linearized set, state) pair: hashed by `hash`, compared exactly.
#[derive(PartialEq, Eq)]
struct Memo {
    hash: u64,
    state: stream_model::Key,
    /// Leading words of the set that are all ones.
    full: u32,
    /// The set's words after those, without trailing zero words.
    rest: Box<[u64]>,
}

impl Hash for Memo {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

/// The memo's hash is already mixed: use it as is.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

fn memo(bits: &[u64], zobrist: u64, state: stream_model::Key) -> Memo {
    let full = bits.iter().take_while(|w| **w == u64::MAX).count();
    let end = bits.iter().rposition(|w| *w != 0).map_or(0, |i| i + 1).max(full);
    let mut sh = std::collections::hash_map::DefaultHasher::new();
    state.hash(&mut sh);
    Memo { hash: zobrist ^ splitmix(sh.finish()), state, full: full as u32, rest: bits[full..end].into() }
}

/// Whether the node's answer to `o` is the model's `a` (on state `st`, for reads).
fn agrees(o: &COp, a: Answer, st: &StreamState) -> bool {
    let append = matches!(o.op.kind, OpKind::Append { .. });
    match (&o.op.outcome, a) {
        (Outcome::Unknown(_) | Outcome::Pending, _) | (_, Answer::Restarted) => true,
        (Outcome::Appended { first }, Answer::Appended { first: f }) => first.is_none_or(|x| x == f),
        (Outcome::WrongVersion { current }, Answer::Wrong { current: c }) => {
            !append || current.is_none_or(|x| x == c)
        }
        (Outcome::Deleted, Answer::Deleted)
        | (Outcome::DeleteDone, Answer::DeleteDone)
        | (Outcome::NoStream, Answer::NoStream) => true,
        (Outcome::Read { events }, Answer::Range { lo, hi }) => {
            o.data_ok
                && events.len() as i64 == (hi - lo + 1).max(0)
                && events.iter().zip(lo..).all(|(e, n)| e.number == n && st.id_at(n) == Some(&e.id))
        }
        _ => false,
    }
}

fn describe(a: Answer, st: &StreamState) -> String {
    match a {
        Answer::Appended { first } => format!("model: 201 first={first}"),
        Answer::Wrong { current } => format!("model: 400 wrong-version current={current}"),
        Answer::Deleted => "model: 410 deleted".into(),
        Answer::DeleteDone => "model: 204 deleted".into(),
        Answer::NoStream => "model: 404 no stream".into(),
        Answer::Range { lo, hi } => {
            let ev: Vec<String> = (lo..=hi)
                .take(12)
                .map(|n| format!("{n}:{}", st.id_at(n).map(short_id).unwrap_or_default()))
                .collect();
            let more = if hi - lo >= 12 { format!(" .. {hi}") } else { String::new() };
            format!("model: 200 [{}{more}]", ev.join(" "))
        }
        Answer::Restarted => String::new(),
    }
}

struct Frame {
    op: u32,
    undo: Undo,
    /// Where the scan of the frame below resumes.
    resume: u32,
    phase: u8,
    /// The operation was skipped (left out), not linearized.
    skipped: bool,
}

/// The longest prefix of completed operations ordered, and what failed right after it.
#[derive(Default)]
struct Deepest {
    done: usize,
    tried: Vec<String>,
}

impl Deepest {
    fn note(&mut self, done: usize, why: impl FnOnce() -> String) {
        if done > self.done {
            *self = Deepest { done, tried: Vec::new() };
        }
        if done == self.done && self.tried.len() < 64 {
            self.tried.push(why());
        }
    }
}

/// The most distinct states the earlier segments can end in that the search of one segment
/// starts from; a segment that needs more makes the stream inconclusive.
pub const MAX_END_STATES: usize = 256;

/// Searches a linearization of `stream`, segment by segment.
pub fn search(h: &History, stream: &str, final_reads: &[usize], budget: u64) -> Verdict {
    search_with(h, stream, final_reads, budget, true)
}

/// [`search`], or (`split` false, for comparison in tests) one search over the whole history,
/// where an unknown write that took effect by some time or never stays a candidate to the end.
fn search_with(h: &History, stream: &str, final_reads: &[usize], budget: u64, split: bool) -> Verdict {
    // Event numbers are permanent: once any read showed id Y at number n, a linearization that
    // writes anything else at n is dead (that read cannot be explained on either side of it).
    let mut observed: HashMap<i64, [u8; 16]> = HashMap::new();
    for o in h.ops.iter().filter(|o| o.stream == stream) {
        if let Outcome::Read { events } = &o.outcome {
            for e in events {
                if let Some(prev) = observed.insert(e.number, e.id) {
                    if prev != e.id {
                        return Verdict::Fail(0, format!(
                            "stream {stream}: event number {} was served with two different ids ({} and {}), last by {o}",
                            e.number,
                            uuid::Uuid::from_bytes(prev),
                            uuid::Uuid::from_bytes(e.id)
                        ));
                    }
                }
            }
        }
    }
    let mut ops = stream_ops(h, stream, final_reads);
    if !split {
        for o in ops.iter_mut().filter(|o| o.skip) {
            (o.ret, o.skip) = (u64::MAX, false);
        }
    }
    let segs = if split { segments(&ops) } else { std::iter::once(0..ops.len()).collect() };
    let debug = std::env::var_os("ANNAL_SIM_CHECK_DEBUG").is_some();
    if debug {
        let unknown = ops.iter().filter(|o| !o.completed()).count();
        eprintln!(
            "checking {stream}: {} ops, {unknown} of unknown outcome, {} segments",
            ops.len(),
            segs.len()
        );
        for (k, r) in segs.iter().enumerate() {
            eprintln!("  segment {}:", k + 1);
            for o in &ops[r.clone()] {
                let by = format!("{:.4}", o.ret as f64 / 1e6);
                let note = match (o.optional(), o.skip) {
                    (true, _) => "   (optional)".into(),
                    (false, true) => format!("   (by {by} or never)"),
                    (false, false) if o.ret == o.op.complete => String::new(),
                    (false, false) => format!("   (by {by})"),
                };
                eprintln!("    {}{note}", o.op);
            }
        }
    }
    let pins: Vec<Option<i64>> = ops.iter().map(pin).collect();
    let mut st = StreamState::default();
    let mut steps = 0u64;
    // The searches of the segments reached so far; `at[k]`: the state segment `k` ended in when
    // the search went on to segment `k + 1` (where it resumes if that one fails).
    let mut level: Vec<Segment> = vec![Segment::new(&ops, segs[0].clone(), &pins)];
    let mut at: Vec<Snapshot> = Vec::new();
    level[0].begin(&mut st);
    let mut k = 0;
    loop {
        match level[k].next(&ops, &observed, &mut st, &mut steps, budget) {
            Next::Budget => {
                if debug {
                    eprintln!("inconclusive: budget spent in segment {}", k + 1);
                    eprintln!("{}", explain(stream, &ops, &segs, &level, k));
                }
                return Verdict::Inconclusive(steps);
            }
            Next::End if k + 1 == segs.len() => break,
            Next::End => {
                let key = st.key();
                if level.len() == k + 1 {
                    level.push(Segment::new(&ops, segs[k + 1].clone(), &pins));
                }
                let next = &mut level[k + 1];
                if next.failed.contains(&key) {
                    continue;
                }
                if next.starts == MAX_END_STATES {
                    if debug {
                        eprintln!(
                            "inconclusive: segment {} needs more than {MAX_END_STATES} start states",
                            k + 2
                        );
                    }
                    return Verdict::Inconclusive(steps);
                }
                at.truncate(k);
                at.push(st.snapshot());
                k += 1;
                level[k].begin(&mut st);
            }
            Next::Exhausted if k == 0 => {
                let culprit = level.len() - 1;
                return Verdict::Fail(steps, explain(stream, &ops, &segs, &level, culprit));
            }
            Next::Exhausted => {
                let key = level[k].start;
                level[k].failed.insert(key);
                k -= 1;
                st.restore(&at[k]);
            }
        }
    }
    if debug {
        for (k, l) in level.iter().enumerate() {
            eprintln!("  segment {}: searched from {} states", k + 1, l.starts);
        }
        eprintln!("{stream}: linearizable, {steps} steps");
    }
    // The witness: each segment's linearization, in turn.
    let order: Vec<&COp> = level
        .iter()
        .flat_map(|l| l.stack.iter().filter(|f| !f.skipped).map(|f| &ops[l.range.start + f.op as usize]))
        .collect();
    match replay_on_model(stream, &order) {
        Ok(()) => Verdict::Ok(steps),
        Err(e) => Verdict::Fail(steps, e),
    }
}

/// What [`Segment::next`] found.
enum Next {
    /// A linearization of the segment: the model state is the one it ends in, the segment's
    /// stack holds it.
    End,
    /// No other linearization from this start state.
    Exhausted,
    /// The budget ran out.
    Budget,
}

/// The search of one segment, resumable: it yields each linearization it finds (from its current
/// start state) and goes on from there when asked, so the segments after it are searched from
/// one of its end states at a time. Its memo is kept across start states: a (set, state) pair
/// already explored led only to end states from which the later segments failed.
struct Segment {
    range: std::ops::Range<usize>,
    /// Operations to linearize or skip for a full linearization (all but the optional ones).
    finite: usize,
    zob: Vec<u64>,
    /// For each unknown operation, the one invoked last before it that is the same operation
    /// with the same deadline (a retry): of such twins, the earlier is always decided first.
    twin: Vec<Option<u32>>,
    pins: Vec<Option<i64>>,
    list: Entries,
    bits: Vec<u64>,
    zobrist: u64,
    left: Left,
    /// Where operations of the segment still to come saw the stream end.
    bound: BTreeMap<i64, u32>,
    seen: HashSet<Memo, BuildHasherDefault<IdHasher>>,
    stack: Vec<Frame>,
    /// Operations linearized or skipped, and of them the completed ones linearized.
    done: usize,
    ordered: usize,
    cursor: u32,
    phase: u8,
    /// The search just reached a new (set, state) pair.
    arrived: bool,
    /// The current start state, how many start states were searched, and those from which the
    /// segments from this one on cannot be linearized.
    start: stream_model::Key,
    starts: usize,
    failed: HashSet<stream_model::Key>,
    deepest: Deepest,
}

impl Segment {
    fn new(all: &[COp], range: std::ops::Range<usize>, pins: &[Option<i64>]) -> Segment {
        let ops = &all[range.clone()];
        let mut last: HashMap<(&MOp, u64), u32> = HashMap::new();
        let twin = ops
            .iter()
            .enumerate()
            .map(|(i, o)| (!o.completed()).then(|| last.insert((&o.mop, o.ret), i as u32)).flatten())
            .collect();
        let pins = pins[range.clone()].to_vec();
        let mut bound: BTreeMap<i64, u32> = BTreeMap::new();
        for p in pins.iter().flatten() {
            *bound.entry(*p).or_default() += 1;
        }
        let mut left = Left::default();
        for o in ops {
            left.count(o, 1);
        }
        Segment {
            finite: ops.iter().filter(|o| !o.optional()).count(),
            zob: (0..ops.len() as u64).map(|i| splitmix(i ^ 0x5eed_0f11_ea72)).collect(),
            twin,
            pins,
            list: Entries::new(ops),
            bits: vec![0u64; ops.len().div_ceil(64).max(1)],
            zobrist: 0,
            left,
            bound,
            seen: HashSet::default(),
            stack: Vec::new(),
            done: 0,
            ordered: 0,
            cursor: 0,
            phase: 0,
            arrived: false,
            start: StreamState::default().key(),
            starts: 0,
            failed: HashSet::new(),
            deepest: Deepest::default(),
            range,
        }
    }

    /// Starts the search from the state `st` is in (the previous search from here is over).
    fn begin(&mut self, st: &mut StreamState) {
        self.start = st.key();
        self.starts += 1;
        (self.done, self.ordered) = (0, 0);
        (self.cursor, self.phase) = (self.list.next[0], 0);
        // A start state already reached is explored already: nothing new from it.
        self.arrived = self.seen.insert(memo(&self.bits, self.zobrist, st.key()));
        if !self.arrived {
            (self.cursor, self.phase) = (0, 2);
        }
    }

    fn has(&self, i: usize) -> bool {
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// Goes on to the next linearization of the segment (`all[self.range]`), on `st`.
    fn next(
        &mut self,
        all: &[COp],
        observed: &HashMap<i64, [u8; 16]>,
        st: &mut StreamState,
        steps: &mut u64,
        budget: u64,
    ) -> Next {
        let ops = &all[self.range.clone()];
        loop {
            if self.arrived {
                self.arrived = false;
                if self.done == self.finite {
                    return Next::End;
                }
            }
            // The next candidate, among the calls before the first return still in the list:
            // completed operations first (phase 0); then skipping the operation of that first
            // return, if it may never take effect (phase 1); then unknown ones (phase 2).
            if self.cursor == 0 || !self.list.call[self.cursor as usize] {
                if self.phase == 0 {
                    self.cursor = self.list.next[0];
                    let mut r = self.list.next[0];
                    while r != 0 && self.list.call[r as usize] {
                        r = self.list.next[r as usize];
                    }
                    let i = self.list.op[r as usize] as usize;
                    self.phase = 2;
                    if r == 0 || !ops[i].skip || self.twin[i].is_some_and(|t| !self.has(t as usize)) {
                        continue;
                    }
                    *steps += 1;
                    if *steps > budget {
                        return Next::Budget;
                    }
                    if !self.mark(i, st) {
                        continue;
                    }
                    self.list.lift(i);
                    self.left.count(&ops[i], -1);
                    self.done += 1;
                    let f = Frame {
                        op: i as u32,
                        undo: Undo::Nothing,
                        resume: self.cursor,
                        phase: 2,
                        skipped: true,
                    };
                    self.stack.push(f);
                    (self.cursor, self.phase, self.arrived) = (self.list.next[0], 0, true);
                    continue;
                }
                let Some(f) = self.stack.pop() else {
                    return Next::Exhausted;
                };
                let i = f.op as usize;
                self.list.unlift(i);
                self.left.count(&ops[i], 1);
                if let Some(p) = self.pins[i] {
                    *self.bound.entry(p).or_default() += 1;
                }
                self.bits[i / 64] &= !(1 << (i % 64));
                self.zobrist ^= self.zob[i];
                st.undo(f.undo);
                self.done -= !ops[i].optional() as usize;
                self.ordered -= (ops[i].completed() && !f.skipped) as usize;
                (self.cursor, self.phase) = (f.resume, f.phase);
                continue;
            }
            let e = self.cursor;
            self.cursor = self.list.next[e as usize];
            let i = self.list.op[e as usize] as usize;
            let o = &ops[i];
            if o.completed() == (self.phase == 2) || self.twin[i].is_some_and(|t| !self.has(t as usize)) {
                continue;
            }
            *steps += 1;
            if *steps > budget {
                return Next::Budget;
            }
            let before = st.cur();
            let (answer, undo) = st.apply(&o.mop);
            if !agrees(o, answer, st) {
                self.deepest.note(self.ordered, || format!("{}   <- {}", o.op, describe(answer, st)));
                st.undo(undo);
                if o.completed() && dead(o, st, &self.left) {
                    // It must still come, and nothing left can make it succeed: backtrack now.
                    (self.cursor, self.phase) = (0, 2);
                }
                continue;
            }
            if !o.completed() && undo == Undo::Nothing {
                // Changes nothing here: as good as never happening (it stays a candidate).
                continue;
            }
            if let Undo::Events { .. } = undo {
                let clash = (before + 1..=st.cur())
                    .find(|n| observed.get(n).is_some_and(|seen| Some(seen) != st.id_at(*n)));
                if let Some(n) = clash {
                    self.deepest.note(self.ordered, || {
                        format!("{}   <- would write event {n}, which reads showed with another id", o.op)
                    });
                    st.undo(undo);
                    continue;
                }
                // An operation still to come saw the stream end at `max`: it cannot grow past that.
                if let Some((&max, _)) = self.bound.first_key_value().filter(|(max, _)| st.cur() > **max) {
                    self.deepest.note(self.ordered, || {
                        format!("{}   <- would make the stream end past {max}, where a later operation saw it end", o.op)
                    });
                    st.undo(undo);
                    continue;
                }
            }
            if !self.mark(i, st) {
                st.undo(undo);
                continue;
            }
            self.list.lift(i);
            self.left.count(o, -1);
            if let Some(p) = self.pins[i] {
                if let Some(c) = self.bound.get_mut(&p) {
                    *c -= 1;
                    if *c == 0 {
                        self.bound.remove(&p);
                    }
                }
            }
            self.done += !o.optional() as usize;
            self.ordered += o.completed() as usize;
            self.stack.push(Frame {
                op: i as u32,
                undo,
                resume: self.cursor,
                phase: self.phase,
                skipped: false,
            });
            (self.cursor, self.phase, self.arrived) = (self.list.next[0], 0, true);
        }
    }

    /// Adds operation `i` to the set: whether the (set, state) pair is new (if not, the set is
    /// left as it was).
    fn mark(&mut self, i: usize, st: &StreamState) -> bool {
        self.bits[i / 64] |= 1 << (i % 64);
        self.zobrist ^= self.zob[i];
        if self.seen.insert(memo(&self.bits, self.zobrist, st.key())) {
            return true;
        }
        self.bits[i / 64] &= !(1 << (i % 64));
        self.zobrist ^= self.zob[i];
        false
    }
}

/// The deletes not linearized yet (unknown-outcome ones included).
#[derive(Default)]
struct Left {
    soft: i64,
    hard: i64,
}

impl Left {
    fn count(&mut self, o: &COp, by: i64) {
        if let OpKind::Delete { hard, .. } = o.op.kind {
            *if hard { &mut self.hard } else { &mut self.soft } += by;
        }
    }
}

/// Whether the completed operation `o`, which does not agree with the model in state `st`, can
/// never agree in a state reachable from `st` with the operations `left`: the stream only grows
/// (event numbers are never taken back), a hard delete is forever, and only a delete still to
/// come can hide events again (a soft delete, then the append that recreates the stream).
fn dead(o: &COp, st: &StreamState, left: &Left) -> bool {
    let (hard, cur) = (st.is_hard_deleted(), st.cur());
    let deleted = matches!(o.op.outcome, Outcome::Deleted);
    if hard {
        return !deleted;
    }
    let is_read = matches!(o.op.kind, OpKind::ReadForward { .. } | OpKind::ReadBackward { .. });
    if deleted && (is_read || matches!(o.op.kind, OpKind::Delete { .. })) {
        return left.hard == 0;
    }
    if let (OpKind::Append { .. }, Outcome::WrongVersion { current: Some(c) }) = (&o.op.kind, &o.op.outcome) {
        return cur > *c;
    }
    if left.soft > 0 || left.hard > 0 {
        return false;
    }
    match (&o.op.kind, &o.op.outcome) {
        // Not soft-deleted now, no delete to come: it never will be again.
        (_, Outcome::NoStream) => cur >= 0 && !st.is_soft_deleted(),
        // Visible events only get more: a read that shows too many already shows too many forever.
        (OpKind::ReadForward { .. } | OpKind::ReadBackward { .. }, Outcome::Read { events })
            if events.is_empty() =>
        {
            !st.is_soft_deleted()
                && matches!(st.apply_read(&o.mop), stream_model::Answer::Range { lo, hi } if lo <= hi)
        }
        _ => false,
    }
}

/// For a completed operation whose answer says where the stream ended when it took effect: that
/// event number. Until the operation is linearized, the stream cannot grow past it, since event
/// numbers are never taken back. A read whose last event is the stream's last says so, and so do
/// an append refused with the current version and a delete that passed an exact expected version.
fn pin(o: &COp) -> Option<i64> {
    match (&o.op.kind, &o.op.outcome) {
        (OpKind::Append { .. }, Outcome::WrongVersion { current }) => *current,
        (OpKind::Delete { expected, .. }, Outcome::DeleteDone) if *expected >= -1 => Some(*expected),
        (OpKind::ReadBackward { .. }, Outcome::Read { events }) => Some(events.last()?.number),
        (OpKind::ReadForward { from, count }, Outcome::Read { events }) => {
            let last = events.last()?.number;
            (last < from.saturating_add(*count as i64 - 1)).then_some(last)
        }
        _ => None,
    }
}

/// How many operations before a failing segment its explanation shows.
const CONTEXT: usize = 20;

/// Explains a failure (or, for debugging, how far an inconclusive search got) in segment `k` of
/// `segs`, whose search is `level[k]`.
fn explain(
    stream: &str,
    ops: &[COp],
    segs: &[std::ops::Range<usize>],
    level: &[Segment],
    k: usize,
) -> String {
    let seg = &ops[segs[k].clone()];
    let l = &level[k];
    let completed = |r: &[COp]| r.iter().filter(|o| o.completed()).count();
    let before = completed(&ops[..segs[k].start]);
    let mut s = format!(
        "stream {stream} is not linearizable: at best {} of its {} completed operations can be ordered",
        before + l.deepest.done,
        completed(ops)
    );
    if segs.len() > 1 {
        let t = |us: u64| format!("{:.4}", us as f64 / 1e6);
        let (first, last) = (seg.first().map_or(0, |o| o.inv), seg.last().map_or(0, |o| o.inv));
        s.push_str(&format!(
            " (in segment {} of {}, the operations invoked from {} to {} s: {} of its {} completed \
             operations, from any of the {} states the segments before it can end in)",
            k + 1,
            segs.len(),
            t(first),
            t(last),
            l.deepest.done,
            completed(seg),
            l.starts
        ));
    }
    s.push_str("; then none of these can come next:\n");
    let mut tried = l.deepest.tried.clone();
    tried.sort();
    tried.dedup();
    for t in tried.iter().take(12) {
        s.push_str(&format!("    {t}\n"));
    }
    if segs.len() > 1 {
        // The end of the segments before it, for context.
        let earlier = &ops[segs[k].start.saturating_sub(CONTEXT)..segs[k].start];
        if !earlier.is_empty() {
            s.push_str(&format!(
                "  history of {stream} just before it (last {} operations):\n",
                earlier.len()
            ));
            for o in earlier {
                s.push_str(&format!("    {}\n", o.op));
            }
        }
        s.push_str(&format!("  history of {stream} in segment {} ({} operations):\n", k + 1, seg.len()));
    } else {
        s.push_str(&format!("  history of {stream} ({} operations):\n", seg.len()));
    }
    for o in seg.iter().filter(|o| o.op.kind != OpKind::Restart || seg.len() < 400).take(400) {
        s.push_str(&format!("    {}\n", o.op));
    }
    s
}

// ---- The witness, replayed on the reference model ---------------------------------------------

enum ModelOut {
    Append(Result<annal_model::AppendOk, AppendError>),
    Delete(Result<(), AppendError>),
    Read(Result<StreamSlice, ReadError>),
    Restart,
}

fn apply(m: &mut Model, stream: &str, kind: &OpKind) -> ModelOut {
    match kind {
        OpKind::Append { expected, events, .. } => {
            let evs = events
                .iter()
                .map(|e| NewEvent {
                    id: e.id,
                    event_type: e.ty.clone(),
                    data: e.data.as_bytes().to_vec(),
                    metadata: Vec::new(),
                    is_json: true,
                })
                .collect();
            ModelOut::Append(m.append(stream, *expected, evs, 0))
        }
        OpKind::Delete { expected, hard } => ModelOut::Delete(m.delete(stream, *expected, *hard, 0)),
        OpKind::ReadForward { from, count } => {
            ModelOut::Read(m.read_forward(stream, *from, *count, false, 0))
        }
        OpKind::ReadBackward { count } => ModelOut::Read(m.read_backward(stream, -1, *count, false, 0)),
        OpKind::Restart => {
            m.forget_recent_ids();
            ModelOut::Restart
        }
    }
}

/// The events an HTTP read shows of the model's slice (the HTTP layer trims pages to
/// `from ..= from + count - 1` forward and to `last - count + 1 ..` backward).
fn shown(kind: &OpKind, s: &StreamSlice) -> Vec<ReadEv> {
    let keep = |n: i64| match kind {
        OpKind::ReadForward { from, count } => n <= from.saturating_add(*count as i64 - 1),
        OpKind::ReadBackward { count } => n >= s.last_event_number.saturating_sub(*count as i64 - 1).max(0),
        _ => true,
    };
    let mut v: Vec<ReadEv> = s
        .events
        .iter()
        .map(|e| &e.event)
        .filter(|e| keep(e.event_number))
        .map(|e| ReadEv {
            number: e.event_number,
            id: e.id,
            data: String::from_utf8_lossy(&e.data).into_owned(),
        })
        .collect();
    v.sort_by_key(|e| e.number);
    v
}

/// Whether the node's answer `out` is the model's `m` for `kind`.
fn consistent(kind: &OpKind, out: &Outcome, m: &ModelOut) -> bool {
    match (out, m) {
        (Outcome::Unknown(_) | Outcome::Pending, _) | (_, ModelOut::Restart) => true,
        (Outcome::Appended { first }, ModelOut::Append(Ok(a))) => {
            first.is_none_or(|f| f == a.first_event_number)
        }
        (
            Outcome::WrongVersion { current },
            ModelOut::Append(Err(AppendError::WrongExpectedVersion { current: c })),
        ) => current.is_none_or(|x| x == *c),
        (Outcome::WrongVersion { .. }, ModelOut::Delete(Err(AppendError::WrongExpectedVersion { .. })))
        | (Outcome::Deleted, ModelOut::Append(Err(AppendError::StreamDeleted)))
        | (Outcome::Deleted, ModelOut::Delete(Err(AppendError::StreamDeleted)))
        | (Outcome::Deleted, ModelOut::Read(Err(ReadError::StreamDeleted)))
        | (Outcome::DeleteDone, ModelOut::Delete(Ok(())))
        | (Outcome::NoStream, ModelOut::Read(Err(ReadError::NoStream))) => true,
        (Outcome::Read { events }, ModelOut::Read(Ok(s))) => *events == shown(kind, s),
        _ => false,
    }
}

/// Replays a linearization on `annal_model::Model`: every answer must be the node's.
fn replay_on_model(stream: &str, order: &[&COp]) -> Result<(), String> {
    let mut m = Model::new();
    for (k, o) in order.iter().enumerate() {
        let out = apply(&mut m, stream, &o.op.kind);
        if !consistent(&o.op.kind, &o.op.outcome, &out) {
            return Err(format!(
                "checker bug: stream {stream}: the search's model accepted a linearization that \
                 annal_model::Model rejects at its step {k}: {}",
                o.op
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Ev;

    fn ev(b: u8) -> Ev {
        Ev { id: [b; 16], ty: "t".into(), data: format!("{{\"b\":{b}}}") }
    }

    fn append(h: &mut History, c: usize, expected: i64, ids: &[u8], at: u64) -> usize {
        let events = ids.iter().map(|b| ev(*b)).collect();
        h.invoke(c, "s", OpKind::Append { expected, events, retry_of: None }, at)
    }

    fn shows(ids: &[u8]) -> Outcome {
        Outcome::Read {
            events: ids
                .iter()
                .enumerate()
                .map(|(n, b)| ReadEv { number: n as i64, id: ev(*b).id, data: ev(*b).data })
                .collect(),
        }
    }

    fn read(h: &mut History, c: usize, at: u64) -> usize {
        h.invoke(c, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, at)
    }

    /// Two concurrent appends with `any`, acknowledged in the opposite order of their effect,
    /// and reads that pin the order: linearizable only by placing the one invoked second first.
    /// Swapping what one read saw makes the history non-linearizable (a stale read: the write it
    /// misses had completed before the read began).
    #[test]
    fn needs_reordering_and_catches_a_stale_read() {
        let build = |stale: bool| {
            let mut h = History::default();
            let a = append(&mut h, 0, -2, &[1], 0);
            let b = append(&mut h, 1, -2, &[2], 10);
            let r1 = read(&mut h, 2, 20);
            h.complete(r1, shows(&[2]), 30);
            h.complete(b, Outcome::Appended { first: Some(0) }, 40);
            h.complete(a, Outcome::Appended { first: Some(1) }, 50);
            let r2 = read(&mut h, 2, 60);
            h.complete(r2, if stale { shows(&[2]) } else { shows(&[2, 1]) }, 70);
            h
        };
        let Verdict::Ok(steps) = search(&build(false), "s", &[], 1000) else {
            panic!("a linearizable history was rejected: {:?}", search(&build(false), "s", &[], 1000));
        };
        assert!(steps >= 4, "the search took {steps} steps");
        match search(&build(true), "s", &[], 1000) {
            Verdict::Fail(_, why) => {
                assert!(why.contains("not linearizable"), "{why}");
                assert!(why.contains("#3 "), "the stale read is named: {why}");
            }
            v => panic!("a stale read passed: {v:?}"),
        }
    }

    /// Lost write: an acknowledged append that a later read does not show, with an unknown write
    /// in between that could have been anywhere.
    #[test]
    fn catches_a_lost_write_among_unknown_ones() {
        let mut h = History::default();
        let a = append(&mut h, 0, -2, &[1], 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        let u = append(&mut h, 1, -2, &[2], 5);
        h.complete(u, Outcome::Unknown("timeout".into()), 0);
        let r = read(&mut h, 2, 20);
        h.complete(r, shows(&[2]), 30);
        assert!(matches!(search(&h, "s", &[], 1000), Verdict::Fail(..)));
    }

    /// A retried unknown append with `any` after a restart may write twice; before a restart it is
    /// idempotent. The budget makes a search that cannot finish inconclusive, not a failure.
    #[test]
    fn restarts_and_budget() {
        let mut h = History::default();
        let a = append(&mut h, 0, -2, &[1], 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        h.restart(20);
        let b = append(&mut h, 0, -2, &[1], 30);
        h.complete(b, Outcome::Appended { first: Some(1) }, 40);
        assert!(matches!(search(&h, "s", &[], 1000), Verdict::Ok(_)));
        assert!(matches!(search(&h, "s", &[], 2), Verdict::Inconclusive(3)));
        let mut h = History::default();
        let a = append(&mut h, 0, -2, &[1], 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        let b = append(&mut h, 0, -2, &[1], 30);
        h.complete(b, Outcome::Appended { first: Some(1) }, 40);
        assert!(matches!(search(&h, "s", &[], 1000), Verdict::Fail(..)));
    }

    /// Many concurrent unknown appends with `any` and a stale read: the search must still end
    /// with a failure, not wander through every order of the unknown appends (they cannot
    /// lengthen the stream past what the final read shows).
    #[test]
    fn a_stale_read_among_many_unknown_writes_fails_fast() {
        let mut h = History::default();
        let a = append(&mut h, 0, -2, &[1], 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        for k in 0..24u8 {
            let u = append(&mut h, 1 + k as usize, -2, &[10 + k], 5);
            h.complete(u, Outcome::Unknown("500".into()), 0);
        }
        let r = read(&mut h, 0, 20);
        h.complete(r, Outcome::NoStream, 30);
        let f = read(&mut h, 0, 100);
        h.complete(f, shows(&[1]), 110);
        match search(&h, "s", &[], 100_000) {
            Verdict::Fail(steps, why) => {
                assert!(steps < 10_000, "{steps} steps");
                assert!(why.contains("#25 "), "{why}");
            }
            v => panic!("{v:?}"),
        }
    }

    /// A read that must come before an append concurrent with it, behind many unknown appends
    /// that could go anywhere: once the search has put the append first, the read can never
    /// succeed again (the stream only grows), and the search must backtrack at once instead of
    /// trying every order of the unknown appends.
    #[test]
    fn backtracks_at_once_from_a_dead_end() {
        let mut h = History::default();
        let a = append(&mut h, 0, -2, &[1], 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        for k in 0..10u8 {
            let u = append(&mut h, 1 + k as usize, -2, &[10 + k], 1);
            h.complete(u, Outcome::Unknown("500".into()), 0);
        }
        let b = append(&mut h, 0, -2, &[2], 15);
        let r = h.invoke(20, "s", OpKind::ReadForward { from: 1, count: 5 }, 20);
        h.complete(b, Outcome::Appended { first: Some(1) }, 40);
        let f = read(&mut h, 0, 50);
        h.complete(f, shows(&[1, 2]), 60);
        h.complete(r, Outcome::Read { events: Vec::new() }, 200);
        match search(&h, "s", &[], 1_000_000) {
            Verdict::Ok(steps) => assert!(steps < 1000, "{steps} steps"),
            v => panic!("{v:?}"),
        }
    }

    /// The node's answer, as the workload records it, for the model's `out`.
    fn outcome(kind: &OpKind, out: ModelOut) -> Outcome {
        match out {
            ModelOut::Append(Ok(a)) => Outcome::Appended { first: Some(a.first_event_number) },
            ModelOut::Append(Err(AppendError::WrongExpectedVersion { current })) => {
                Outcome::WrongVersion { current: Some(current) }
            }
            ModelOut::Append(Err(_)) | ModelOut::Delete(Err(_)) => Outcome::Deleted,
            ModelOut::Delete(Ok(())) => Outcome::DeleteDone,
            ModelOut::Read(Ok(sl)) => Outcome::Read { events: shown(kind, &sl) },
            ModelOut::Read(Err(ReadError::NoStream)) => Outcome::NoStream,
            ModelOut::Read(Err(_)) => Outcome::Deleted,
            ModelOut::Restart => unreachable!("restarts are recorded apart"),
        }
    }

    /// A linearizable history of stream `s`: `rounds` rounds (apart in time) of `clients`
    /// concurrent operations, run on `annal_model::Model` at random points within their
    /// intervals: appends with `any` and with the version current when the round began, full
    /// and backward reads, and appends answered 503 that took effect or not, each retried in
    /// the same round and answered (a read or the retry's answer settles it); a node restart
    /// every 40 rounds; then a final read. With `stale`, the last round also has a full read that
    /// misses an append acknowledged before it began. Returns the history, the final read and
    /// the stale read.
    fn long_history(seed: u64, rounds: u64, clients: usize, stale: bool) -> (History, usize, usize) {
        use rand::{Rng, SeedableRng};
        struct Spec {
            client: usize,
            kind: OpKind,
            inv: u64,
            ret: u64,
            /// When it takes effect (`None`: never).
            at: Option<u64>,
            /// The spec it retries.
            retries: Option<usize>,
            out: Outcome,
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut m = Model::new();
        let mut next_id = 0u32;
        let mut batch = |rng: &mut rand_chacha::ChaCha8Rng| -> Vec<Ev> {
            (0..rng.gen_range(1..=2))
                .map(|_| {
                    next_id += 1;
                    let mut id = [0u8; 16];
                    id[..4].copy_from_slice(&next_id.to_be_bytes());
                    id[15] = 0xee;
                    Ev { id, ty: "t".into(), data: format!("{{\"n\":{next_id}}}") }
                })
                .collect()
        };
        let full = OpKind::ReadForward { from: 0, count: FULL_READ };
        let mut specs: Vec<Spec> = Vec::new();
        let mut restarts = Vec::new();
        let mut stale_spec = usize::MAX;
        for r in 0..rounds {
            let t = r * 1000;
            let cur = m.read_backward("s", -1, 1, false, 0).map_or(-1, |sl| sl.last_event_number);
            let first = specs.len();
            for client in 0..clients {
                let inv = t + rng.gen_range(0..100);
                let ret = inv + rng.gen_range(20..400);
                let at = Some(rng.gen_range(inv + 1..ret));
                let (kind, ret, at) = match rng.gen_range(0..100) {
                    0..=34 => {
                        (OpKind::Append { expected: -2, events: batch(&mut rng), retry_of: None }, ret, at)
                    }
                    35..=49 => {
                        (OpKind::Append { expected: cur, events: batch(&mut rng), retry_of: None }, ret, at)
                    }
                    50..=69 => {
                        let kind = OpKind::Append { expected: -2, events: batch(&mut rng), retry_of: None };
                        let inv2 = t + 450 + rng.gen_range(0..50);
                        let ret2 = inv2 + rng.gen_range(20..300);
                        specs.push(Spec {
                            client,
                            kind: kind.clone(),
                            inv: inv2,
                            ret: ret2,
                            at: Some(rng.gen_range(inv2 + 1..ret2)),
                            retries: Some(specs.len() + 1),
                            out: Outcome::Pending,
                        });
                        let at = rng.gen_bool(0.5).then(|| rng.gen_range(inv + 1..inv + 400));
                        (kind, u64::MAX, at)
                    }
                    70..=79 => (OpKind::ReadBackward { count: 3 }, ret, at),
                    _ => (full.clone(), ret, at),
                };
                specs.push(Spec { client, kind, inv, ret, at, retries: None, out: Outcome::Pending });
            }
            if stale && r + 1 == rounds {
                let kind = OpKind::Append { expected: -2, events: batch(&mut rng), retry_of: None };
                specs.push(Spec {
                    client: clients,
                    kind,
                    inv: t,
                    ret: t + 4,
                    at: Some(t + 2),
                    retries: None,
                    out: Outcome::Pending,
                });
                stale_spec = specs.len();
                specs.push(Spec {
                    client: clients,
                    kind: full.clone(),
                    inv: t + 700,
                    ret: t + 710,
                    at: Some(t + 705),
                    retries: None,
                    out: Outcome::Pending,
                });
            }
            let mut order: Vec<usize> = (first..specs.len()).filter(|&i| specs[i].at.is_some()).collect();
            order.sort_by_key(|&i| specs[i].at);
            for i in order {
                let out = apply(&mut m, "s", &specs[i].kind);
                specs[i].out = if specs[i].ret == u64::MAX {
                    Outcome::Unknown("503".into())
                } else {
                    outcome(&specs[i].kind, out)
                };
            }
            for sp in &mut specs[first..] {
                if sp.at.is_none() {
                    sp.out = Outcome::Unknown("503".into());
                }
            }
            if stale_spec != usize::MAX && r + 1 == rounds {
                // The stale read: without the events of the append acknowledged before it began.
                let OpKind::Append { events, .. } = &specs[stale_spec - 1].kind else { unreachable!() };
                let gone: Vec<[u8; 16]> = events.iter().map(|e| e.id).collect();
                if let Outcome::Read { events } = &mut specs[stale_spec].out {
                    events.retain(|e| !gone.contains(&e.id));
                }
            }
            if r % 40 == 39 {
                m.forget_recent_ids();
                restarts.push(t + 990);
            }
        }
        let t = rounds * 1000;
        let out = outcome(&full, apply(&mut m, "s", &full));
        specs.push(Spec { client: 0, kind: full, inv: t, ret: t + 10, at: None, retries: None, out });
        // Recorded in invocation order, as the workload does.
        let mut by_inv: Vec<usize> = (0..specs.len()).collect();
        by_inv.sort_by_key(|&i| specs[i].inv);
        let mut h = History::default();
        let mut id_of = vec![0; specs.len()];
        let mut restarts = restarts.into_iter().peekable();
        for i in by_inv {
            while let Some(at) = restarts.next_if(|at| *at < specs[i].inv) {
                h.restart(at);
            }
            let mut kind = specs[i].kind.clone();
            if let (OpKind::Append { retry_of, .. }, Some(j)) = (&mut kind, specs[i].retries) {
                *retry_of = Some(id_of[j]);
            }
            id_of[i] = h.invoke(specs[i].client, "s", kind, specs[i].inv);
        }
        for (i, sp) in specs.iter().enumerate() {
            h.complete(id_of[i], sp.out.clone(), sp.ret);
        }
        let stale_id = if stale_spec == usize::MAX { usize::MAX } else { id_of[stale_spec] };
        (h, id_of[specs.len() - 1], stale_id)
    }

    /// A long history (thousands of operations from six clients, hundreds of them answered 503
    /// and settled by later answers) is decided segment by segment within a budget that one
    /// search over the whole history, where those writes stay candidates to the end, runs out of.
    #[test]
    fn decides_a_long_history_segment_by_segment() {
        let (h, last, _) = long_history(1, 600, 6, false);
        assert!(h.ops.len() > 4000, "{} operations", h.ops.len());
        let unknown = h.ops.iter().filter(|o| matches!(o.outcome, Outcome::Unknown(_))).count();
        assert!(unknown > 500, "{unknown} unknown outcomes");
        let ops = stream_ops(&h, "s", &[last]);
        assert!(segments(&ops).len() > 500, "{} segments", segments(&ops).len());
        let budget = 20_000;
        assert!(matches!(search(&h, "s", &[last], budget), Verdict::Ok(_)));
        assert!(matches!(search_with(&h, "s", &[last], budget, false), Verdict::Inconclusive(_)));
    }

    /// A stale read in the last round of a long history: rejected, with the failing segment (the
    /// last one) and the read named.
    #[test]
    fn rejects_a_long_history_and_names_the_failing_segment() {
        let (h, last, stale) = long_history(2, 600, 6, true);
        let ops = stream_ops(&h, "s", &[last]);
        let segs = segments(&ops);
        let at = ops.iter().position(|o| o.op.id == stale).unwrap_or(usize::MAX);
        let k = segs.iter().position(|r| r.contains(&at)).unwrap_or(usize::MAX);
        assert!(k + 4 >= segs.len() && segs.len() > 500, "segment {k} of {}", segs.len());
        match search(&h, "s", &[last], 200_000) {
            Verdict::Fail(steps, why) => {
                assert!(steps < 50_000, "{steps} steps");
                assert!(why.contains("not linearizable"), "{why}");
                assert!(why.contains(&format!("in segment {} of {}", k + 1, segs.len())), "{why}");
                assert!(why.contains(&format!("#{stale} ")), "{why}");
            }
            v => panic!("{v:?}"),
        }
        assert!(matches!(search_with(&h, "s", &[last], 200_000, false), Verdict::Inconclusive(_)));
    }

    /// An unknown append that nothing settles (no final read, no read of its event) may take
    /// effect at any point after it was sent: no segment starts after it, so it can still explain
    /// an answer long after (here: an append acknowledged at number 2 where only one event was
    /// ever read). Leaving it behind at a cut would reject this linearizable history.
    #[test]
    fn an_unsettled_unknown_write_keeps_later_operations_in_one_segment() {
        let build = |first: i64| {
            let mut h = History::default();
            let a = append(&mut h, 0, -2, &[1], 0);
            h.complete(a, Outcome::Appended { first: Some(0) }, 10);
            let r = read(&mut h, 1, 20);
            h.complete(r, shows(&[1]), 30);
            let u = append(&mut h, 2, -2, &[9], 40);
            h.complete(u, Outcome::Unknown("timeout".into()), 0);
            for k in 0..5 {
                let r = read(&mut h, 1, 100 + 100 * k);
                h.complete(r, shows(&[1]), 110 + 100 * k);
            }
            let b = append(&mut h, 0, -2, &[2], 1000);
            h.complete(b, Outcome::Appended { first: Some(first) }, 1010);
            let r = h.invoke(1, "s", OpKind::ReadBackward { count: 1 }, 1100);
            h.complete(
                r,
                Outcome::Read { events: vec![ReadEv { number: first, id: ev(2).id, data: ev(2).data }] },
                1110,
            );
            (h, u)
        };
        for first in [1, 2] {
            let (h, u) = build(first);
            let ops = stream_ops(&h, "s", &[]);
            let segs = segments(&ops);
            let at = ops.iter().position(|o| o.op.id == u).unwrap_or(usize::MAX);
            let last = segs.last().cloned().unwrap_or_default();
            assert!(last.contains(&at) && last.end == ops.len(), "{segs:?}, the unknown write is #{at}");
            assert!(matches!(search(&h, "s", &[], 10_000), Verdict::Ok(_)), "first={first}");
        }
        // Only the cuts before it remain (the first append, and the first read, are segments).
        let (h, _) = build(2);
        assert_eq!(segments(&stream_ops(&h, "s", &[])).len(), 3);
    }

    /// What the final read and the answers settle: an unknown soft delete took effect before the
    /// stream had events or never, a 503 append retried and answered took effect by the answer or
    /// never, an append of an id the stream never held and an unknown hard delete never did.
    #[test]
    fn narrows_unknown_writes_down() {
        let mut h = History::default();
        let a = append(&mut h, 0, -2, &[1], 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        let d = h.invoke(1, "s", OpKind::Delete { expected: -2, hard: false }, 5);
        h.complete(d, Outcome::Unknown("503".into()), 0);
        let u = append(&mut h, 2, -2, &[2], 20);
        h.complete(u, Outcome::Unknown("503".into()), 0);
        let events = vec![ev(2)];
        let r = h.invoke(2, "s", OpKind::Append { expected: -2, events, retry_of: Some(u) }, 30);
        h.complete(r, Outcome::Appended { first: Some(1) }, 40);
        let never = append(&mut h, 3, -2, &[9], 50);
        h.complete(never, Outcome::Unknown("503".into()), 0);
        let hard = h.invoke(4, "s", OpKind::Delete { expected: -2, hard: true }, 60);
        h.complete(hard, Outcome::Unknown("503".into()), 0);
        let f = read(&mut h, 0, 100);
        h.complete(f, shows(&[1, 2]), 110);
        let ops = stream_ops(&h, "s", &[f]);
        let of = |id: usize| ops.iter().find(|o| o.op.id == id).map(|o| (o.ret, o.skip));
        assert_eq!(of(d), Some((10, true)));
        assert_eq!(of(u), Some((40, true)));
        assert_eq!((of(never), of(hard)), (None, None));
        assert_eq!(segments(&ops).len(), 3, "cut after the retry and before the final read");
        assert!(matches!(search(&h, "s", &[f], 1000), Verdict::Ok(_)));
    }
}
