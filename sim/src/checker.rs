//! The invariant checker: runs over a finished history and reports every violation.
//!
//! 1. **No corruption served**: every event a read returned carries an id some append sent to
//!    that stream, with exactly the data sent with it.
//! 2. **No acknowledged append lost** (streams never deleted): a full read that starts after an
//!    append was acknowledged contains its events.
//! 3. **Per-stream linearizability** against [`annal_model::Model`]: there is an order of the
//!    stream's operations that respects real time (an operation that completed before another
//!    was invoked comes first) in which the model gives every operation the answer the node gave.
//!    Writes with an unknown outcome may take effect at any point after their invocation, or
//!    never. Node restarts are operations too: they make the model forget recent event ids, as
//!    the node does. Streams are independent (event ids are never shared between streams), so
//!    each is checked alone (P-compositionality). The search is Wing & Gong's with Lowe's
//!    memoisation of (linearized set, model state).
//! 4. **Liveness** (when asked): after all faults are healed, the final full read of every
//!    stream is answered.
//! 5. Nothing unexpected: no answer outside the protocol (a harness or protocol bug).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};

use annal_model::{AppendError, Model, NewEvent, ReadError, StreamSlice};

use crate::history::{History, Op, OpKind, Outcome, ReadEv};
use crate::workload::FULL_READ;

/// What the checker found.
#[derive(Debug, Default)]
pub struct Report {
    /// Violations, each a self-contained explanation.
    pub failures: Vec<String>,
    /// Streams whose linearizability search ran out of budget.
    pub inconclusive: Vec<String>,
    /// Search states explored, over all streams.
    pub explored: u64,
}

/// Checks `history`. `final_reads` are the ids of the final reads; `liveness` requires them to
/// have been answered. `budget` bounds the states explored per stream.
pub fn check(
    history: &History,
    final_reads: &[usize],
    streams: usize,
    liveness: bool,
    budget: u64,
) -> Report {
    let mut r = Report::default();
    integrity(history, &mut r);
    acked_not_lost(history, &mut r);
    for op in &history.ops {
        if let Outcome::Unexpected(w) = &op.outcome {
            r.failures.push(format!("unexpected answer: {op} ({w})"));
        }
    }
    if liveness {
        if final_reads.len() < streams {
            r.failures.push(format!(
                "liveness: only {} of {streams} final reads ran after every fault was healed",
                final_reads.len()
            ));
        }
        for &id in final_reads {
            let op = &history.ops[id];
            if !matches!(op.outcome, Outcome::Read { .. } | Outcome::NoStream | Outcome::Deleted) {
                r.failures
                    .push(format!("liveness: the node did not serve after every fault was healed: {op}"));
            }
        }
    }
    let mut names: Vec<&str> =
        history.ops.iter().filter(|o| !o.stream.is_empty()).map(|o| o.stream.as_str()).collect();
    names.sort();
    names.dedup();
    for s in names {
        let verbose = std::env::var_os("ANNAL_SIM_CHECK_DEBUG").is_some();
        if verbose {
            let ops = stream_ops(history, s, final_reads);
            let unknown = ops.iter().filter(|o| o.ret == u64::MAX).count();
            eprintln!("checking {s}: {} ops, {unknown} optional", ops.len());
        }
        match linearize(history, s, final_reads, budget) {
            Search::Ok(n) => r.explored += n,
            Search::Inconclusive(n) => {
                r.explored += n;
                r.inconclusive.push(s.to_owned());
            }
            Search::Fail(msg) => r.failures.push(msg),
        }
    }
    r
}

fn integrity(h: &History, r: &mut Report) {
    let mut sent: BTreeMap<[u8; 16], (&str, &str)> = BTreeMap::new();
    for op in &h.ops {
        if let OpKind::Append { events, .. } = &op.kind {
            for e in events {
                sent.insert(e.id, (op.stream.as_str(), e.data.as_str()));
            }
        }
    }
    for op in &h.ops {
        let Outcome::Read { events } = &op.outcome else { continue };
        for (i, e) in events.iter().enumerate() {
            let bad = match sent.get(&e.id) {
                None => Some("an event id no client ever sent".to_owned()),
                Some((s, _)) if *s != op.stream => Some(format!("an event sent to stream {s}")),
                Some((_, d)) if *d != e.data => Some(format!("data {:?}, but {:?} was written", e.data, d)),
                _ => None,
            };
            if let Some(why) = bad {
                r.failures.push(format!("corrupted data served: {op}: event {} is {why}", e.number));
            }
            if i > 0 && events[i - 1].number >= e.number {
                r.failures.push(format!("read returned event numbers out of order or repeated: {op}"));
            }
        }
    }
}

fn acked_not_lost(h: &History, r: &mut Report) {
    let deleted: HashSet<&str> =
        h.ops.iter().filter(|o| matches!(o.kind, OpKind::Delete { .. })).map(|o| o.stream.as_str()).collect();
    for read in &h.ops {
        if deleted.contains(read.stream.as_str())
            || read.kind != (OpKind::ReadForward { from: 0, count: FULL_READ })
        {
            continue;
        }
        let got: HashSet<[u8; 16]> = match &read.outcome {
            Outcome::Read { events } if events.len() < FULL_READ => events.iter().map(|e| e.id).collect(),
            Outcome::NoStream => HashSet::new(),
            _ => continue,
        };
        for ack in h.ops.iter().filter(|o| o.stream == read.stream && o.complete < read.invoke) {
            if let (OpKind::Append { events, .. }, Outcome::Appended { .. }) = (&ack.kind, &ack.outcome) {
                if let Some(e) = events.iter().find(|e| !got.contains(&e.id)) {
                    r.failures.push(format!(
                        "acknowledged append lost: {ack} (event {}) is missing from later read {read}",
                        crate::history::short_id(&e.id)
                    ));
                    return;
                }
            }
        }
    }
}

enum Search {
    Ok(u64),
    Inconclusive(u64),
    Fail(String),
}

/// One operation as the search sees it.
struct COp<'a> {
    op: &'a Op,
    inv: u64,
    ret: u64,
}

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

/// Whether the node's answer `out` is the model's `m` for `kind`; on mismatch, what the model said.
fn consistent(kind: &OpKind, out: &Outcome, m: &ModelOut) -> Result<(), String> {
    let ok = match (out, m) {
        (Outcome::Unknown(_) | Outcome::Pending, _) | (_, ModelOut::Restart) => true,
        (Outcome::Appended { first }, ModelOut::Append(Ok(a))) => {
            first.is_none_or(|f| f == a.first_event_number)
        }
        (
            Outcome::WrongVersion { current },
            ModelOut::Append(Err(AppendError::WrongExpectedVersion { current: c })),
        ) => current.is_none_or(|x| x == *c),
        (Outcome::WrongVersion { .. }, ModelOut::Delete(Err(AppendError::WrongExpectedVersion { .. }))) => {
            true
        }
        (Outcome::Deleted, ModelOut::Append(Err(AppendError::StreamDeleted)))
        | (Outcome::Deleted, ModelOut::Delete(Err(AppendError::StreamDeleted)))
        | (Outcome::Deleted, ModelOut::Read(Err(ReadError::StreamDeleted)))
        | (Outcome::DeleteDone, ModelOut::Delete(Ok(())))
        | (Outcome::NoStream, ModelOut::Read(Err(ReadError::NoStream))) => true,
        (Outcome::Read { events }, ModelOut::Read(Ok(s))) => *events == shown(kind, s),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(match m {
        ModelOut::Append(r) => format!("model: {r:?}"),
        ModelOut::Delete(r) => format!("model: {r:?}"),
        ModelOut::Read(Ok(s)) => {
            let ev: Vec<String> = shown(kind, s)
                .iter()
                .map(|e| format!("{}:{}", e.number, crate::history::short_id(&e.id)))
                .collect();
            format!("model: 200 [{}]", ev.join(" "))
        }
        ModelOut::Read(Err(e)) => format!("model: {e:?}"),
        ModelOut::Restart => String::new(),
    })
}

fn log_len(m: &Model) -> u64 {
    m.read_all_backward(None, 1).first().map_or(0, |r| r.position + 1)
}

/// Mixes one applied operation into a frame's fingerprint: the model's state is a function of the
/// sequence of operations that changed it (and of the restarts between them).
fn mix(fp: u64, i: usize) -> u64 {
    let mut x = fp ^ (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn bits_hash(bits: &[u64]) -> u64 {
    let mut h = DefaultHasher::new();
    bits.hash(&mut h);
    h.finish()
}

/// Cheap necessary conditions for `out` to be the model's answer to a write, checked before the
/// model is cloned to apply it (unknown outcomes are never rejected).
fn quick_reject(m: &Model, stream: &str, kind: &OpKind, out: &Outcome) -> bool {
    let last = m.last_event_number(stream);
    let tomb = last == annal_model::TOMBSTONE_EVENT_NUMBER;
    match (kind, out) {
        (OpKind::Append { .. }, Outcome::WrongVersion { current: Some(c) }) => tomb || last != *c,
        (OpKind::Append { .. }, Outcome::Appended { first: Some(f) }) => tomb || *f > last + 1,
        (OpKind::Append { .. }, Outcome::Appended { .. }) => tomb,
        (OpKind::Delete { .. }, Outcome::DeleteDone) => tomb,
        _ => false,
    }
}

struct Frame {
    model: std::rc::Rc<Model>,
    bits: Vec<u64>,
    done: usize,
    fp: u64,
    cands: Vec<usize>,
    next: usize,
}

fn candidates(ops: &[COp], bits: &[u64]) -> Vec<usize> {
    let open = |i: usize| bits[i / 64] & (1 << (i % 64)) == 0;
    let min_ret = (0..ops.len()).filter(|&i| open(i)).map(|i| ops[i].ret).min().unwrap_or(u64::MAX);
    let mut c: Vec<usize> = (0..ops.len()).filter(|&i| open(i) && ops[i].inv <= min_ret).collect();
    c.sort_by_key(|&i| (ops[i].ret == u64::MAX, ops[i].inv));
    c
}

/// The ids of an append (empty for other operations).
fn ids_of(kind: &OpKind) -> Vec<[u8; 16]> {
    match kind {
        OpKind::Append { events, .. } => events.iter().map(|e| e.id).collect(),
        _ => Vec::new(),
    }
}

/// The operations of `stream` the search needs, with unknown writes narrowed down where reads
/// settle them: in a stream that is never deleted, an unknown append whose events are missing
/// from the final read (after every fault was healed and the node restarted, so no request can
/// still be in flight) never took effect and is dropped; one whose events some read returned, and
/// whose ids no other operation carries, took effect before that read completed.
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
    for o in mine() {
        for id in ids_of(&o.kind) {
            *carriers.entry(id).or_default() += 1;
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
    h.ops
        .iter()
        .filter(|o| o.stream == stream || o.kind == OpKind::Restart)
        .filter(|o| match &o.outcome {
            Outcome::Refused(_) | Outcome::Unexpected(_) => false,
            Outcome::Pending | Outcome::Unknown(_) => o.kind.is_write(),
            _ => true,
        })
        .filter_map(|o| {
            let unknown = o.complete == u64::MAX;
            let ids = ids_of(&o.kind);
            if !unknown || ids.is_empty() {
                return Some(COp { op: o, inv: o.invoke, ret: o.complete });
            }
            if let Some(f) = &final_ids {
                if ids.iter().all(|id| !f.contains(id)) {
                    return None;
                }
            }
            let unique = ids.iter().all(|id| carriers.get(id) == Some(&1));
            let seen = ids.iter().filter_map(|id| seen_by.get(id)).min().copied();
            let ret = match seen {
                Some(t) if unique => t.max(o.invoke),
                _ => u64::MAX,
            };
            Some(COp { op: o, inv: o.invoke, ret })
        })
        .collect()
}

fn linearize(h: &History, stream: &str, final_reads: &[usize], budget: u64) -> Search {
    let ops = stream_ops(h, stream, final_reads);
    // Event numbers are permanent: once any read showed id Y at number n, a linearization that
    // writes anything else at n is dead (that read cannot be explained on either side of it).
    let mut observed: BTreeMap<i64, [u8; 16]> = BTreeMap::new();
    for o in h.ops.iter().filter(|o| o.stream == stream) {
        if let Outcome::Read { events } = &o.outcome {
            for e in events {
                if let Some(prev) = observed.insert(e.number, e.id) {
                    if prev != e.id {
                        return Search::Fail(format!(
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
    let finite = ops.iter().filter(|o| o.ret != u64::MAX).count();
    let words = ops.len().div_ceil(64).max(1);
    let bits = vec![0u64; words];
    let mut stack = vec![Frame {
        model: std::rc::Rc::new(Model::new()),
        cands: candidates(&ops, &bits),
        bits,
        done: 0,
        fp: 0,
        next: 0,
    }];
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut explored = 0u64;
    let mut work = 0u64;
    let mut deepest: (usize, Vec<String>) = (0, Vec::new());
    loop {
        let Some(top) = stack.last_mut() else {
            return Search::Fail(explain(stream, &ops, finite, deepest));
        };
        if top.done == finite {
            return Search::Ok(explored);
        }
        if top.next >= top.cands.len() {
            stack.pop();
            continue;
        }
        let i = top.cands[top.next];
        top.next += 1;
        let o = &ops[i];
        let reject = |deepest: &mut (usize, Vec<String>), done: usize, why: String| {
            if done >= deepest.0 {
                if done > deepest.0 {
                    *deepest = (done, Vec::new());
                }
                deepest.1.push(format!("{}   <- {why}", o.op));
            }
        };
        let is_read = matches!(o.op.kind, OpKind::ReadForward { .. } | OpKind::ReadBackward { .. });
        if !is_read && quick_reject(&top.model, stream, &o.op.kind, &o.op.outcome) {
            let last = top.model.last_event_number(stream);
            reject(&mut deepest, top.done, format!("model: current version {last}"));
            continue;
        }
        // Reads do not change the model: evaluate them on the frame's model without a copy.
        let (model, out, before, after) = if is_read {
            let m = top.model.clone();
            let out = match &o.op.kind {
                OpKind::ReadForward { from, count } => {
                    ModelOut::Read(m.read_forward(stream, *from, *count, false, 0))
                }
                OpKind::ReadBackward { count } => {
                    ModelOut::Read(m.read_backward(stream, -1, *count, false, 0))
                }
                _ => unreachable!("is_read"),
            };
            (m, out, 0, 0)
        } else {
            let mut m = (*top.model).clone();
            let before = log_len(&m);
            let out = apply(&mut m, stream, &o.op.kind);
            let after = log_len(&m);
            (std::rc::Rc::new(m), out, before, after)
        };
        if let Err(why) = consistent(&o.op.kind, &o.op.outcome, &out) {
            reject(&mut deepest, top.done, why);
            continue;
        }
        // An optional write that changes nothing here is as good as one that never happens: skip it
        // (it stays a candidate for later).
        if o.ret == u64::MAX && after == before {
            continue;
        }
        if let (ModelOut::Append(Ok(a)), true) = (&out, after > before) {
            let ids = ids_of(&o.op.kind);
            let clash = (a.first_event_number..=a.last_event_number)
                .zip(&ids)
                .find(|(n, id)| observed.get(n).is_some_and(|seen| seen != *id));
            if let Some((n, _)) = clash {
                reject(
                    &mut deepest,
                    top.done,
                    format!("would write event {n}, which reads showed with another id"),
                );
                continue;
            }
        }
        let mut bits = top.bits.clone();
        bits[i / 64] |= 1 << (i % 64);
        let fp = if after > before || o.op.kind == OpKind::Restart { mix(top.fp, i) } else { top.fp };
        if !seen.insert((fp, bits_hash(&bits))) {
            continue;
        }
        explored += 1;
        // The budget counts copies of the model, weighted by its size, so long streams do not
        // make the search slow before it gives up (deterministically).
        work += 1 + after / 64;
        if explored > budget || work > budget.saturating_mul(16) {
            return Search::Inconclusive(explored);
        }
        let done = top.done + (o.ret != u64::MAX) as usize;
        let cands = candidates(&ops, &bits);
        stack.push(Frame { model, bits, done, fp, cands, next: 0 });
    }
}

fn explain(stream: &str, ops: &[COp], finite: usize, deepest: (usize, Vec<String>)) -> String {
    let mut s = format!(
        "stream {stream} is not linearizable: at best {} of its {finite} completed operations can be ordered; \
         then none of these can come next:\n",
        deepest.0
    );
    let mut tried = deepest.1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Ev;

    fn ev(b: u8) -> Ev {
        Ev { id: [b; 16], ty: "t".into(), data: format!("{{\"b\":{b}}}") }
    }

    fn read(h: &History, id: usize) -> Vec<ReadEv> {
        let OpKind::Append { events, .. } = &h.ops[id].kind else { unreachable!() };
        events
            .iter()
            .enumerate()
            .map(|(i, e)| ReadEv { number: i as i64, id: e.id, data: e.data.clone() })
            .collect()
    }

    #[test]
    fn accepts_a_linearizable_history_with_an_unknown_write() {
        let mut h = History::default();
        let a = h.invoke(0, "s", OpKind::Append { expected: -1, events: vec![ev(1)], retry_of: None }, 0);
        h.complete(a, Outcome::Unknown("timeout".into()), 50);
        let b = h.invoke(1, "s", OpKind::Append { expected: -1, events: vec![ev(2)], retry_of: None }, 10);
        h.complete(b, Outcome::WrongVersion { current: Some(0) }, 40);
        let evs = read(&h, a);
        let r = h.invoke(1, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, 60);
        h.complete(r, Outcome::Read { events: evs }, 70);
        let rep = check(&h, &[], 1, false, 100_000);
        assert!(rep.failures.is_empty(), "{:?}", rep.failures);
    }

    #[test]
    fn finds_a_lost_ack_a_stale_read_and_corruption() {
        let mut h = History::default();
        let a = h.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: None }, 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        h.restart(15);
        let r = h.invoke(1, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, 20);
        h.complete(r, Outcome::NoStream, 30);
        let rep = check(&h, &[], 1, false, 100_000);
        assert!(rep.failures.iter().any(|f| f.contains("acknowledged append lost")), "{:?}", rep.failures);
        assert!(rep.failures.iter().any(|f| f.contains("not linearizable")), "{:?}", rep.failures);

        let mut h = History::default();
        let a = h.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: None }, 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        let mut evs = read(&h, a);
        evs[0].data = "{\"b\":3}".into();
        let r = h.invoke(1, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, 20);
        h.complete(r, Outcome::Read { events: evs }, 30);
        let rep = check(&h, &[], 1, false, 100_000);
        assert!(rep.failures.iter().any(|f| f.contains("corrupted data served")), "{:?}", rep.failures);
    }

    #[test]
    fn restarts_make_any_retries_write_again() {
        // Before a restart a retry with `any` is idempotent; after one it writes a duplicate.
        let mut h = History::default();
        let a = h.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: None }, 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        h.restart(20);
        let b = h.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: Some(a) }, 30);
        h.complete(b, Outcome::Appended { first: Some(1) }, 40);
        assert!(check(&h, &[], 1, false, 100_000).failures.is_empty());
        let mut h2 = History::default();
        let a = h2.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: None }, 0);
        h2.complete(a, Outcome::Appended { first: Some(0) }, 10);
        let b =
            h2.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: Some(a) }, 30);
        h2.complete(b, Outcome::Appended { first: Some(1) }, 40);
        assert!(!check(&h2, &[], 1, false, 100_000).failures.is_empty());
    }

    #[test]
    fn liveness_requires_answered_final_reads() {
        let mut h = History::default();
        let r = h.invoke(0, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, 0);
        h.complete(r, Outcome::Refused("503".into()), 10);
        assert!(check(&h, &[r], 1, true, 1000).failures.iter().any(|f| f.contains("liveness")));
        assert!(check(&h, &[r], 1, false, 1000).failures.is_empty());
    }
}
