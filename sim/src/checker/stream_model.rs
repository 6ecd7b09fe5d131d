//! The state of one stream as the linearizability search sees it: `annal_model::Model`'s rules
//! for the operations the workload sends (appends with every expected-version kind, soft and
//! hard deletes, forward and backward reads, node restarts), on a state small enough to change in
//! place and undo in O(1) per event, and to compare exactly in O(1).
//!
//! What it owns: the stream's event ids by event number, its `$tb` (the only metadata the
//! workload causes: a soft delete writes `$tb = i64::MAX`, the next append writes `$tb = first
//! new number`), whether it is hard-deleted, and the idempotency memory (ids written since the
//! last restart, each at its latest number), kept as the number of events the stream had at the
//! last restart. Every log prefix reached is interned in a trie, so two states are equal exactly
//! when their [`StreamState::key`]s are. A [`Snapshot`] of a state is restored in place, keeping
//! the trie, so keys stay comparable across the segments of a search.
//!
//! Invariants: [`StreamState::undo`] of the [`Undo`] an apply returned restores the state before
//! it (undos are applied last-in first-out); an operation that returns [`Undo::Nothing`] changed
//! nothing observable. The search's witness is replayed on `annal_model::Model` itself
//! ([`super::linearizability`]), and a unit test compares this model with it on random
//! operation sequences, so the two cannot drift apart silently.

use std::collections::HashMap;

use annal_model::{ANY, SOFT_DELETE_TB, STREAM_EXISTS};

/// What the model answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Appended (or an idempotent repeat): the numbers of the batch.
    Appended { first: i64 },
    /// Wrong expected version; the raw current version.
    Wrong { current: i64 },
    /// The stream is (hard or, for `STREAM_EXISTS`, soft) deleted.
    Deleted,
    /// A delete was carried out.
    DeleteDone,
    /// A read found no stream (no events, or soft-deleted).
    NoStream,
    /// A read shows the events `lo ..= hi` (none when `lo > hi`).
    Range { lo: i64, hi: i64 },
    /// A restart.
    Restarted,
}

/// How to take an applied operation back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Undo {
    /// Nothing observable changed.
    Nothing,
    /// `count` events were appended; `$tb` was `tb` before.
    Events { count: u32, tb: Option<i64> },
    /// The stream was hard-deleted.
    Tombstone,
    /// `$tb` was set; it was `tb` before.
    Meta { tb: Option<i64> },
    /// A restart; the idempotency memory started at `mem_from` before.
    Restart { mem_from: u32 },
}

/// An operation, as the model takes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MOp {
    /// Append the ids with an expected version.
    Append { expected: i64, ids: Vec<[u8; 16]> },
    /// Delete (hard or soft) with an expected version.
    Delete { expected: i64, hard: bool },
    /// Read forward `count` events from `from` (the HTTP layer trims to `from ..= from+count-1`).
    ReadForward { from: i64, count: i64 },
    /// Read backward `count` events from the head.
    ReadBackward { count: i64 },
    /// A node restart: recently written ids are forgotten.
    Restart,
}

/// Exact identity of a state (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    prefix: u32,
    tb: Option<i64>,
    hard: bool,
    mem_from: u32,
}

/// A stream's state, kept apart from the trie (see [`StreamState::restore`]).
#[derive(Clone, Debug)]
pub struct Snapshot {
    evs: Vec<[u8; 16]>,
    tb: Option<i64>,
    hard: bool,
    mem_from: u32,
}

/// One stream's state.
#[derive(Debug)]
pub struct StreamState {
    evs: Vec<[u8; 16]>,
    /// `nodes[k]`: the interned id of `evs[..k]`.
    nodes: Vec<u32>,
    trie: HashMap<(u32, [u8; 16]), u32>,
    /// Numbers at which each id was written, ascending.
    pos: HashMap<[u8; 16], Vec<u32>>,
    tb: Option<i64>,
    hard: bool,
    mem_from: u32,
}

impl Default for StreamState {
    fn default() -> Self {
        StreamState {
            evs: Vec::new(),
            nodes: vec![0],
            trie: HashMap::new(),
            pos: HashMap::new(),
            tb: None,
            hard: false,
            mem_from: 0,
        }
    }
}

impl StreamState {
    /// The state's exact identity.
    pub fn key(&self) -> Key {
        Key { prefix: self.nodes[self.evs.len()], tb: self.tb, hard: self.hard, mem_from: self.mem_from }
    }

    /// The raw last event number (-1 without events).
    pub fn cur(&self) -> i64 {
        self.evs.len() as i64 - 1
    }

    /// The id at event number `n`.
    pub fn id_at(&self, n: i64) -> Option<&[u8; 16]> {
        usize::try_from(n).ok().and_then(|n| self.evs.get(n))
    }

    fn soft(&self) -> bool {
        self.tb == Some(SOFT_DELETE_TB)
    }

    /// Whether the stream is soft-deleted (and not recreated since).
    pub fn is_soft_deleted(&self) -> bool {
        self.soft()
    }

    /// Whether the stream is hard-deleted.
    pub fn is_hard_deleted(&self) -> bool {
        self.hard
    }

    /// The answer to a read, without a mutable borrow (reads change nothing).
    pub fn apply_read(&self, op: &MOp) -> Answer {
        match op {
            MOp::ReadForward { from, count } => {
                self.read(|tb0, cur| ((*from).max(tb0), cur.min(from.saturating_add(count - 1))))
            }
            MOp::ReadBackward { count } => self.read(|tb0, cur| (tb0.max(cur - count + 1).max(0), cur)),
            _ => unreachable!("apply_read of a write"),
        }
    }

    /// The latest number `id` was written at since the last restart.
    fn remembered(&self, id: &[u8; 16]) -> Option<i64> {
        let p = *self.pos.get(id)?.last()?;
        (p >= self.mem_from).then_some(p as i64)
    }

    /// Applies `op`; returns the model's answer and how to undo it.
    pub fn apply(&mut self, op: &MOp) -> (Answer, Undo) {
        match op {
            MOp::Append { expected, ids } => self.append(*expected, ids),
            MOp::Delete { expected, hard } => {
                if self.hard {
                    return (Answer::Deleted, Undo::Nothing);
                }
                let cur = self.cur();
                let e = *expected;
                if !(e == ANY || (e == STREAM_EXISTS && cur >= 0) || e == cur) {
                    return (Answer::Wrong { current: cur }, Undo::Nothing);
                }
                if *hard {
                    self.hard = true;
                    (Answer::DeleteDone, Undo::Tombstone)
                } else if self.soft() {
                    // Another `$tb = max` metadata event: nothing observable changes.
                    (Answer::DeleteDone, Undo::Nothing)
                } else {
                    let tb = self.tb.replace(SOFT_DELETE_TB);
                    (Answer::DeleteDone, Undo::Meta { tb })
                }
            }
            MOp::ReadForward { .. } | MOp::ReadBackward { .. } => (self.apply_read(op), Undo::Nothing),
            MOp::Restart => {
                let mem_from = std::mem::replace(&mut self.mem_from, self.evs.len() as u32);
                let undo = if mem_from == self.mem_from { Undo::Nothing } else { Undo::Restart { mem_from } };
                (Answer::Restarted, undo)
            }
        }
    }

    fn read(&self, range: impl Fn(i64, i64) -> (i64, i64)) -> Answer {
        if self.hard {
            return Answer::Deleted;
        }
        let cur = self.cur();
        if cur < 0 || self.soft() {
            return Answer::NoStream;
        }
        let (lo, hi) = range(self.tb.unwrap_or(0).max(0), cur);
        Answer::Range { lo, hi }
    }

    fn append(&mut self, expected: i64, ids: &[[u8; 16]]) -> (Answer, Undo) {
        if self.hard {
            return (Answer::Deleted, Undo::Nothing);
        }
        let cur = self.cur();
        let wrong = (Answer::Wrong { current: cur }, Undo::Nothing);
        match expected {
            ANY | STREAM_EXISTS => {
                if expected == STREAM_EXISTS {
                    if self.soft() {
                        return (Answer::Deleted, Undo::Nothing);
                    }
                    if cur < 0 && self.tb.is_none() {
                        return (Answer::Wrong { current: -1 }, Undo::Nothing);
                    }
                }
                if let Some(f) = ids.first().and_then(|id| self.remembered(id)) {
                    let repeated = ids.iter().zip(f..).all(|(id, n)| self.remembered(id) == Some(n));
                    return if repeated { (Answer::Appended { first: f }, Undo::Nothing) } else { wrong };
                }
            }
            n if n >= -1 => {
                if !((n == -1 && self.soft()) || n == cur) {
                    if n > cur {
                        return wrong;
                    }
                    let repeated = ids.iter().zip(n + 1..).all(|(id, m)| self.id_at(m) == Some(id));
                    return if repeated { (Answer::Appended { first: n + 1 }, Undo::Nothing) } else { wrong };
                }
            }
            _ => return wrong,
        }
        if ids.is_empty() {
            return (Answer::Appended { first: cur + 1 }, Undo::Nothing);
        }
        let tb = self.tb;
        if self.soft() {
            self.tb = Some(cur + 1);
        }
        for id in ids {
            self.push(*id);
        }
        (Answer::Appended { first: cur + 1 }, Undo::Events { count: ids.len() as u32, tb })
    }

    fn push(&mut self, id: [u8; 16]) {
        let n = self.evs.len() as u32;
        let parent = self.nodes[n as usize];
        let next = self.trie.len() as u32 + 1;
        let node = *self.trie.entry((parent, id)).or_insert(next);
        self.evs.push(id);
        self.nodes.push(node);
        self.pos.entry(id).or_default().push(n);
    }

    fn pop(&mut self) {
        let id = self.evs.pop().unwrap_or_else(|| unreachable!("undo of events never applied"));
        self.nodes.pop();
        if let Some(p) = self.pos.get_mut(&id) {
            p.pop();
        }
    }

    /// The state, to come back to with [`StreamState::restore`].
    pub fn snapshot(&self) -> Snapshot {
        Snapshot { evs: self.evs.clone(), tb: self.tb, hard: self.hard, mem_from: self.mem_from }
    }

    /// Makes the state the one `s` was taken of. The trie is kept, so keys stay comparable with
    /// those of every state reached before; the common prefix of the logs is kept too.
    pub fn restore(&mut self, s: &Snapshot) {
        let common = self.evs.iter().zip(&s.evs).take_while(|(a, b)| a == b).count();
        while self.evs.len() > common {
            self.pop();
        }
        for id in &s.evs[common..] {
            self.push(*id);
        }
        (self.tb, self.hard, self.mem_from) = (s.tb, s.hard, s.mem_from);
    }

    /// Takes back an apply (last in, first out).
    pub fn undo(&mut self, u: Undo) {
        match u {
            Undo::Nothing => {}
            Undo::Events { count, tb } => {
                for _ in 0..count {
                    self.pop();
                }
                self.tb = tb;
            }
            Undo::Tombstone => self.hard = false,
            Undo::Meta { tb } => self.tb = tb,
            Undo::Restart { mem_from } => self.mem_from = mem_from,
        }
    }
}

#[cfg(test)]
mod tests {
    use annal_model::{AppendError, Model, NewEvent, ReadError};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn on_model(m: &mut Model, op: &MOp) -> Answer {
        let wrong = |e| match e {
            AppendError::WrongExpectedVersion { current } => Answer::Wrong { current },
            AppendError::StreamDeleted => Answer::Deleted,
            AppendError::InvalidStreamName => unreachable!("valid name"),
        };
        let read = |r: Result<annal_model::StreamSlice, ReadError>, keep: &dyn Fn(i64, i64) -> bool| match r {
            Err(ReadError::NoStream) => Answer::NoStream,
            Err(ReadError::StreamDeleted) => Answer::Deleted,
            Ok(s) => {
                let mut n: Vec<i64> = s
                    .events
                    .iter()
                    .map(|e| e.event.event_number)
                    .filter(|n| keep(*n, s.last_event_number))
                    .collect();
                n.sort();
                match (n.first(), n.last()) {
                    (Some(&lo), Some(&hi)) => {
                        assert_eq!(hi - lo + 1, n.len() as i64, "visible events are contiguous");
                        Answer::Range { lo, hi }
                    }
                    _ => Answer::Range { lo: 1, hi: 0 },
                }
            }
        };
        match op {
            MOp::Append { expected, ids } => {
                let evs = ids
                    .iter()
                    .map(|id| NewEvent {
                        id: *id,
                        event_type: "t".into(),
                        data: b"{}".to_vec(),
                        metadata: Vec::new(),
                        is_json: true,
                    })
                    .collect();
                match m.append("s", *expected, evs, 0) {
                    Ok(a) => Answer::Appended { first: a.first_event_number },
                    Err(e) => wrong(e),
                }
            }
            MOp::Delete { expected, hard } => match m.delete("s", *expected, *hard, 0) {
                Ok(()) => Answer::DeleteDone,
                Err(e) => wrong(e),
            },
            MOp::ReadForward { from, count } => {
                read(m.read_forward("s", *from, *count as usize, false, 0), &|n, _| n < from + count)
            }
            MOp::ReadBackward { count } => {
                read(m.read_backward("s", -1, *count as usize, false, 0), &|n, last| {
                    n >= (last - count + 1).max(0)
                })
            }
            MOp::Restart => {
                m.forget_recent_ids();
                Answer::Restarted
            }
        }
    }

    fn norm(a: Answer) -> Answer {
        match a {
            Answer::Range { lo, hi } if lo > hi => Answer::Range { lo: 1, hi: 0 },
            a => a,
        }
    }

    /// A random operation on a stream whose last event number is `cur`: appends (a third of
    /// them retry one of `batches`) with every expected-version kind, deletes, reads, restarts.
    fn random_op(rng: &mut ChaCha8Rng, cur: i64, batches: &mut Vec<Vec<[u8; 16]>>) -> MOp {
        match rng.gen_range(0..100) {
            0..=49 => {
                let ids = if !batches.is_empty() && rng.gen_ratio(1, 3) {
                    batches[rng.gen_range(0..batches.len())].clone()
                } else {
                    let k = rng.gen_range(1..4);
                    let b: Vec<[u8; 16]> = (0..k).map(|_| rng.gen()).collect();
                    batches.push(b.clone());
                    b
                };
                let expected = [ANY, -1, STREAM_EXISTS, cur, cur - rng.gen_range(1..4), cur + 1, -3]
                    [rng.gen_range(0..7)];
                MOp::Append { expected, ids }
            }
            50..=54 => MOp::Delete {
                expected: [ANY, STREAM_EXISTS, cur, -1][rng.gen_range(0..4)],
                hard: rng.gen_ratio(1, 4),
            },
            55..=74 => {
                MOp::ReadForward { from: rng.gen_range(0..cur.max(0) + 3), count: rng.gen_range(1..6) }
            }
            75..=89 => MOp::ReadBackward { count: rng.gen_range(1..6) },
            _ => MOp::Restart,
        }
    }

    /// Restoring a snapshot gives back the state it was taken of: the same key (the trie is
    /// kept), and the same answers afterwards as a fresh state restored to it.
    #[test]
    fn restore_gives_back_the_state() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for _ in 0..200 {
            let mut s = StreamState::default();
            let mut batches = Vec::new();
            let mut snaps = Vec::new();
            for _ in 0..rng.gen_range(1..40) {
                let op = random_op(&mut rng, s.cur(), &mut batches);
                s.apply(&op);
                if rng.gen_ratio(1, 4) {
                    snaps.push((s.snapshot(), s.key()));
                }
            }
            for _ in 0..snaps.len() {
                let (snap, key) = &snaps[rng.gen_range(0..snaps.len())];
                s.restore(snap);
                assert_eq!(s.key(), *key);
                let mut fresh = StreamState::default();
                fresh.restore(snap);
                for _ in 0..rng.gen_range(1..10) {
                    let op = random_op(&mut rng, s.cur(), &mut batches);
                    assert_eq!(norm(s.apply(&op).0), norm(fresh.apply(&op).0), "{op:?}");
                }
            }
        }
    }

    /// The search's model answers exactly as `annal_model::Model` on random operation sequences
    /// (with retries of earlier batches, stale and future expected versions, deletes and
    /// restarts), and undoing every operation in reverse order gives back the empty state.
    #[test]
    fn agrees_with_annal_model() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut checked = 0;
        for _ in 0..300 {
            let mut m = Model::new();
            let mut s = StreamState::default();
            let mut undos = Vec::new();
            let mut batches: Vec<Vec<[u8; 16]>> = Vec::new();
            for _ in 0..rng.gen_range(1..60) {
                let cur = s.cur();
                let op = random_op(&mut rng, cur, &mut batches);
                let want = norm(on_model(&mut m, &op));
                let before = s.key();
                let (got, undo) = s.apply(&op);
                assert_eq!(norm(got), want, "{op:?}");
                if undo == Undo::Nothing {
                    assert_eq!(s.key(), before, "{op:?} changed the state but says it did not");
                }
                undos.push(undo);
                checked += 1;
            }
            while let Some(u) = undos.pop() {
                s.undo(u);
            }
            assert_eq!(s.key(), StreamState::default().key());
            assert!(s.evs.is_empty() && s.pos.values().all(Vec::is_empty));
        }
        assert!(checked > 3000);
    }
}
