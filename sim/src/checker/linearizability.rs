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
//! # The search
//!
//! Wing & Gong's depth-first search over the history's call and return entries in a
//! doubly-linked list (Lowe's and Porcupine's formulation): the candidates are the operations
//! invoked before the first pending return; linearizing one unlinks its entries, backtracking
//! relinks them. Completed operations are tried before unknown-outcome ones. Around it:
//!
//! - **Memoisation** (Lowe; Porcupine's cache): a (linearized set, model state) pair already
//!   explored is never explored again. The pair is hashed (Zobrist hashing of the set, xor the
//!   state's hash) and collisions are resolved by equality: the set is stored exactly (as its
//!   all-ones prefix length and the rest), the state by its exact [`stream_model::Key`] (the log
//!   prefix is interned in a trie, so equal logs have equal ids).
//! - **One mutable state, undone on backtrack**: the search runs [`stream_model`], a model of one
//!   stream with `annal_model::Model`'s rules, changed in place and undone in O(1) per event; no
//!   state is ever cloned.
//! - **Pruning**, each sound because event numbers are permanent (the stream only grows, a hard
//!   delete is forever, and only a delete still to come can hide events again):
//!   - an append that would write at a number some read showed with another id is dead on the
//!     spot, and so is one that makes the stream end past where an operation still to be
//!     linearized saw it end (a read that reached the end, an append refused with the current
//!     version, a delete with an exact expected version);
//!   - a completed operation that fails in a state from which no remaining operation can lead to
//!     one where it succeeds ends the branch at once.
//!
//!   Without these, a dead end behind many unknown appends is explored in every order of them
//!   before the search backtracks past it (seeds 700280 and 700778 ran for minutes). An
//!   unknown-outcome write that changes nothing in the current state is skipped (never writing it
//!   is as good). And unknown appends are narrowed down before the search where reads settle
//!   them: in a stream never deleted, one whose events the final read (after healing) lacks never
//!   took effect and is dropped; one whose events a read returned (and whose ids no other
//!   operation carries) took effect before that read completed.
//! - **Budget**: the search takes at most `budget` steps (model evaluations) per stream. A stream
//!   whose search runs out is *inconclusive*: not a pass and not a failure; the run reports it
//!   and campaigns count it. Steps, not time, so the verdict is deterministic.
//! - **Witness**: a linearization found is replayed on `annal_model::Model` itself, answer by
//!   answer (data included); a disagreement is reported as a checker bug, so a pass always rests
//!   on the reference model.
//!
//! A history that is not linearizable is explained: the longest prefix of completed operations
//! that could be ordered, the operations none of which could come next (with the model's answer
//! for each), and the stream's history.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};

use annal_model::{AppendError, Model, NewEvent, ReadError, StreamSlice};

use super::stream_model::{self, Answer, MOp, StreamState, Undo};
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
    /// The budget ran out.
    Inconclusive(u64),
    /// Not linearizable (or the witness failed on the reference model): why.
    Fail(u64, String),
}

/// One operation as the search sees it.
struct COp<'a> {
    op: &'a Op,
    inv: u64,
    /// Completion time; `u64::MAX`: unknown outcome, optional.
    ret: u64,
    mop: MOp,
    /// For reads: every event returned carries the data its id was written with.
    data_ok: bool,
}

impl COp<'_> {
    fn optional(&self) -> bool {
        self.ret == u64::MAX
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

/// The operations of `stream` the search needs, with unknown writes narrowed down where reads
/// settle them (see the module doc), in invocation order.
fn stream_ops<'a>(h: &'a History, stream: &str, final_reads: &[usize]) -> Vec<COp<'a>> {
    let mine = || h.ops.iter().filter(move |o| o.stream == stream);
    let deleted = mine().any(|o| matches!(o.kind, OpKind::Delete { .. }));
    let final_ids: Option<HashSet<[u8; 16]>> = final_reads
        .iter()
        .map(|&i| &h.ops[i])
        .filter(|o| o.stream == stream)
        .find_map(|o| match &o.outcome {
            // Only a read that reached the end of the stream shows everything it holds.
            Outcome::Read { events } if events.len() < FULL_READ => {
                Some(events.iter().map(|e| e.id).collect())
            }
            Outcome::NoStream => Some(HashSet::new()),
            _ => None,
        })
        .filter(|_| !deleted);
    let mut carriers: BTreeMap<[u8; 16], usize> = BTreeMap::new();
    let mut data: HashMap<[u8; 16], &str> = HashMap::new();
    for o in mine() {
        if let OpKind::Append { events, .. } = &o.kind {
            for e in events {
                *carriers.entry(e.id).or_default() += 1;
                data.insert(e.id, e.data.as_str());
            }
        }
    }
    let mut seen_by: BTreeMap<[u8; 16], u64> = BTreeMap::new();
    for o in mine() {
        if let Outcome::Read { events } = &o.outcome {
            for e in events {
                let t = seen_by.entry(e.id).or_insert(u64::MAX);
                *t = (*t).min(o.complete);
            }
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
            let c = |ret| COp { op: o, inv: o.invoke, ret, mop: model_op(&o.kind), data_ok };
            let unknown = o.complete == u64::MAX;
            let ids = ids_of(&o.kind);
            if !unknown || ids.is_empty() {
                return Some(c(o.complete));
            }
            if let Some(f) = &final_ids {
                if ids.iter().all(|id| !f.contains(id)) {
                    return None;
                }
            }
            let unique = ids.iter().all(|id| carriers.get(id) == Some(&1));
            let seen = ids.iter().filter_map(|id| seen_by.get(id)).min().copied();
            Some(c(match seen {
                Some(t) if unique => t.max(o.invoke),
                _ => u64::MAX,
            }))
        })
        .collect();
    ops.sort_by_key(|o| (o.inv, o.op.id));
    ops
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

/// Searches a linearization of `stream`.
pub fn search(h: &History, stream: &str, final_reads: &[usize], budget: u64) -> Verdict {
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
    let ops = stream_ops(h, stream, final_reads);
    let finite = ops.iter().filter(|o| !o.optional()).count();
    if std::env::var_os("ANNAL_SIM_CHECK_DEBUG").is_some() {
        eprintln!("checking {stream}: {} ops, {} optional", ops.len(), ops.len() - finite);
        for o in &ops {
            eprintln!("    {}{}", o.op, if o.optional() { "   (optional)" } else { "" });
        }
    }
    let pins: Vec<Option<i64>> = ops.iter().map(pin).collect();
    let mut left = Left::default();
    for o in &ops {
        left.count(o, 1);
    }
    let mut bound: BTreeMap<i64, u32> = BTreeMap::new();
    for p in pins.iter().flatten() {
        *bound.entry(*p).or_default() += 1;
    }
    let zob: Vec<u64> = (0..ops.len() as u64).map(|i| splitmix(i ^ 0x5eed_0f11_ea72)).collect();
    let mut list = Entries::new(&ops);
    let mut bits = vec![0u64; ops.len().div_ceil(64).max(1)];
    let mut zobrist = 0u64;
    let mut st = StreamState::default();
    let mut seen: HashSet<Memo, BuildHasherDefault<IdHasher>> = HashSet::default();
    seen.insert(memo(&bits, zobrist, st.key()));
    let mut stack: Vec<Frame> = Vec::new();
    let mut done = 0usize;
    let mut steps = 0u64;
    let mut deepest = Deepest::default();
    let (mut cursor, mut phase) = (list.next[0], 0u8);
    loop {
        if done == finite {
            let order: Vec<&COp> = stack.iter().map(|f| &ops[f.op as usize]).collect();
            return match replay_on_model(stream, &order) {
                Ok(()) => Verdict::Ok(steps),
                Err(e) => Verdict::Fail(steps, e),
            };
        }
        // The next candidate: completed operations first (phase 0), then optional ones (phase 1),
        // each among the calls before the first return still in the list.
        if cursor == 0 || !list.call[cursor as usize] {
            if phase == 0 {
                (cursor, phase) = (list.next[0], 1);
                continue;
            }
            let Some(f) = stack.pop() else {
                return Verdict::Fail(steps, explain(stream, &ops, finite, deepest));
            };
            let i = f.op as usize;
            list.unlift(i);
            left.count(&ops[i], 1);
            if let Some(p) = pins[i] {
                *bound.entry(p).or_default() += 1;
            }
            bits[i / 64] &= !(1 << (i % 64));
            zobrist ^= zob[i];
            st.undo(f.undo);
            done -= !ops[i].optional() as usize;
            (cursor, phase) = (f.resume, f.phase);
            continue;
        }
        let e = cursor;
        cursor = list.next[e as usize];
        let i = list.op[e as usize] as usize;
        let o = &ops[i];
        if o.optional() != (phase == 1) {
            continue;
        }
        steps += 1;
        if steps > budget {
            if std::env::var_os("ANNAL_SIM_CHECK_DEBUG").is_some() {
                eprintln!("{}", explain(stream, &ops, finite, deepest));
            }
            return Verdict::Inconclusive(steps);
        }
        let before = st.cur();
        let (answer, undo) = st.apply(&o.mop);
        if !agrees(o, answer, &st) {
            deepest.note(done, || format!("{}   <- {}", o.op, describe(answer, &st)));
            st.undo(undo);
            if !o.optional() && dead(o, &st, &left) {
                // It must still come, and nothing left can make it succeed: backtrack now.
                (cursor, phase) = (0, 1);
            }
            continue;
        }
        if o.optional() && undo == Undo::Nothing {
            // Changes nothing here: as good as never happening (it stays a candidate).
            continue;
        }
        if let Undo::Events { .. } = undo {
            let clash = (before + 1..=st.cur())
                .find(|n| observed.get(n).is_some_and(|seen| Some(seen) != st.id_at(*n)));
            if let Some(n) = clash {
                deepest.note(done, || {
                    format!("{}   <- would write event {n}, which reads showed with another id", o.op)
                });
                st.undo(undo);
                continue;
            }
            // An operation still to come saw the stream end at `max`: it cannot grow past that.
            if let Some((&max, _)) = bound.first_key_value().filter(|(max, _)| st.cur() > **max) {
                deepest.note(done, || {
                    format!(
                        "{}   <- would make the stream end past {max}, where a later operation saw it end",
                        o.op
                    )
                });
                st.undo(undo);
                continue;
            }
        }
        bits[i / 64] |= 1 << (i % 64);
        zobrist ^= zob[i];
        if !seen.insert(memo(&bits, zobrist, st.key())) {
            bits[i / 64] &= !(1 << (i % 64));
            zobrist ^= zob[i];
            st.undo(undo);
            continue;
        }
        list.lift(i);
        left.count(o, -1);
        if let Some(p) = pins[i] {
            if let Some(c) = bound.get_mut(&p) {
                *c -= 1;
                if *c == 0 {
                    bound.remove(&p);
                }
            }
        }
        done += !o.optional() as usize;
        stack.push(Frame { op: i as u32, undo, resume: cursor, phase });
        (cursor, phase) = (list.next[0], 0);
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

fn explain(stream: &str, ops: &[COp], finite: usize, deepest: Deepest) -> String {
    let mut s = format!(
        "stream {stream} is not linearizable: at best {} of its {finite} completed operations can be ordered; \
         then none of these can come next:\n",
        deepest.done
    );
    let mut tried = deepest.tried;
    tried.sort();
    tried.dedup();
    for t in tried.iter().take(12) {
        s.push_str(&format!("    {t}\n"));
    }
    s.push_str(&format!("  history of {stream} ({} operations):\n", ops.len()));
    for o in ops.iter().filter(|o| o.op.kind != OpKind::Restart || ops.len() < 400).take(400) {
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
}
