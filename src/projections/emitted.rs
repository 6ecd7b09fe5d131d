//! Emitted streams: what a projection has written to each stream it emits to, and so what is
//! left to write, free of I/O.
//!
//! Exactly-once output rests on two facts: a projection writes to each emitted stream in the
//! order of its source positions, each write atomic; and every emitted event carries its tag
//! (see [`super::checkpoint`]). So the last event of an emitted stream tells how far that
//! stream's output goes. A projection that restarts from its last checkpoint processes again
//! the events after it; for each stream, the emits its last event covers are dropped, and the
//! rest is written with the stream's last event number as the expected version. A write refused
//! for its expected version (someone else wrote the stream) or left unconfirmed makes the
//! projection read that stream's last event again and decide anew.
//!
//! [`Emitted`] keeps the head (last event number and last tag) of streams it wrote or read,
//! at most [`EMITTED_HEADS_MAX`] (it forgets them all past that and reads them again).

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use super::checkpoint::{ProjectionVersion, Tag};
use super::system::Emit;
use crate::store::{NewEvent, WriteOp};

/// Emitted-stream heads kept at most.
pub const EMITTED_HEADS_MAX: usize = 65_536;

/// What a stream's last event says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// The stream's last event number (`-1`: none).
    pub last: i64,
    /// The tag of its last event, if it has one.
    pub tag: Option<Tag>,
}

/// The emits of one batch still to be written, by stream in first-emit order.
#[derive(Debug, Default)]
pub struct Pending {
    streams: Vec<(String, VecDeque<Emit>)>,
}

impl Pending {
    /// Groups `emits` by stream (each stream's emits stay in order).
    pub fn new(emits: Vec<Emit>) -> Pending {
        let mut at: HashMap<String, usize> = HashMap::new();
        let mut streams: Vec<(String, VecDeque<Emit>)> = Vec::new();
        for e in emits {
            match at.get(&e.stream) {
                Some(&i) => streams[i].1.push_back(e),
                None => {
                    at.insert(e.stream.clone(), streams.len());
                    streams.push((e.stream.clone(), VecDeque::from([e])));
                }
            }
        }
        Pending { streams }
    }

    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.streams.iter().all(|(_, q)| q.is_empty())
    }

    /// Streams with emits left.
    pub fn streams(&self) -> impl Iterator<Item = &str> {
        self.streams.iter().filter(|(_, q)| !q.is_empty()).map(|(s, _)| s.as_str())
    }
}

/// One write the projection is to make.
#[derive(Debug)]
pub struct Write {
    /// The stream.
    pub stream: String,
    /// Expected version.
    pub expected: i64,
    /// How many emits of the stream's queue come before it (earlier writes of the same round).
    pub skip: usize,
    /// How many emits of the stream's queue it writes.
    pub count: usize,
    /// The position of the last one.
    pub last_position: u64,
}

/// Emitted-stream heads of one projection (see the module doc).
#[derive(Debug)]
pub struct Emitted {
    version: ProjectionVersion,
    heads: HashMap<String, Head>,
    max_batch: usize,
}

impl Emitted {
    /// For a projection of `version`, writing at most `max_batch` events at once.
    pub fn new(version: ProjectionVersion, max_batch: usize) -> Emitted {
        Emitted { version, heads: HashMap::new(), max_batch: max_batch.max(1) }
    }

    /// The version output is tagged with.
    pub fn version(&self) -> &ProjectionVersion {
        &self.version
    }

    /// Streams of `pending` whose head must be read first.
    pub fn unknown(&self, pending: &Pending) -> Vec<String> {
        pending.streams().filter(|s| !self.heads.contains_key(*s)).map(str::to_owned).collect()
    }

    /// A head read from the store.
    pub fn learn(&mut self, stream: String, head: Head) {
        if self.heads.len() >= EMITTED_HEADS_MAX {
            self.heads.clear();
        }
        self.heads.insert(stream, head);
    }

    /// Forgets a stream's head (it is read again before the next write).
    pub fn forget(&mut self, stream: &str) {
        self.heads.remove(stream);
    }

    /// Drops the emits already written and decides the writes of every stream with a known head
    /// and emits left: a stream's emits in writes of at most `max_batch` events, each expecting
    /// the version the one before it leaves, so one group commit can take them all (in order).
    pub fn next_writes(&self, pending: &mut Pending) -> Vec<Write> {
        let mut out = Vec::new();
        for (stream, queue) in &mut pending.streams {
            let Some(head) = self.heads.get(stream) else { continue };
            let tag =
                head.tag.filter(|_| !crate::buggify::bug(crate::buggify::Bug::ProjectionReemitsCovered));
            if let Some(tag) = tag {
                while queue.front().is_some_and(|e| tag.covers(&self.version, e.position)) {
                    queue.pop_front();
                }
            }
            let mut expected = head.last;
            let mut skip = 0;
            while skip < queue.len() {
                let count = (queue.len() - skip).min(self.max_batch);
                out.push(Write {
                    stream: stream.clone(),
                    expected,
                    skip,
                    count,
                    last_position: queue[skip + count - 1].position,
                });
                expected += count as i64;
                skip += count;
            }
        }
        out
    }

    /// The write `w` of `pending` as an operation; `new_id` gives each event its id.
    pub fn op(&self, pending: &Pending, w: &Write, mut new_id: impl FnMut() -> [u8; 16]) -> WriteOp {
        let queue = pending.streams.iter().find(|(s, _)| *s == w.stream).map(|(_, q)| q);
        let events = queue
            .into_iter()
            .flatten()
            .skip(w.skip)
            .take(w.count)
            .map(|e| NewEvent {
                id: new_id(),
                event_type: e.event_type.to_string(),
                data: Bytes::from(e.data.clone()),
                metadata: Bytes::from(e.metadata(&self.version)),
                is_json: e.is_json,
            })
            .collect();
        WriteOp::Append { stream: w.stream.clone(), expected: w.expected, events }
    }

    /// `w` was written, its last event numbered `last`: its emits leave `pending`. The writes of
    /// a round are reported in order, and only while the stream's earlier ones succeeded.
    pub fn written(&mut self, pending: &mut Pending, w: &Write, last: i64) {
        if let Some((_, q)) = pending.streams.iter_mut().find(|(s, _)| *s == w.stream) {
            q.drain(..w.count.min(q.len()));
        }
        let tag = Tag { version: self.version, position: w.last_position };
        self.learn(w.stream.clone(), Head { last, tag: Some(tag) });
    }

    /// Drops a stream's emits (it cannot be written: hard-deleted).
    pub fn drop_stream(&mut self, pending: &mut Pending, stream: &str) {
        if let Some((_, q)) = pending.streams.iter_mut().find(|(s, _)| s == stream) {
            q.clear();
        }
        self.forget(stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emit(stream: &str, pos: u64) -> Emit {
        Emit {
            stream: stream.into(),
            event_type: "$>".into(),
            is_json: false,
            data: format!("{pos}@src"),
            extra: String::new(),
            position: pos,
            caused_by: [0; 16],
        }
    }

    const V: ProjectionVersion = ProjectionVersion { id: 1, epoch: -1, version: 1 };

    #[test]
    fn a_restart_skips_what_each_stream_has() {
        let mut e = Emitted::new(V, 2);
        let mut p =
            Pending::new(vec![emit("a", 10), emit("b", 20), emit("a", 30), emit("a", 40), emit("b", 50)]);
        assert_eq!(e.unknown(&p), ["a", "b"]);
        assert!(e.next_writes(&mut p).is_empty(), "nothing is written before the heads are known");
        // `a` got its first two links before the crash; `b` nothing.
        e.learn("a".into(), Head { last: 7, tag: Some(Tag { version: V, position: 30 }) });
        e.learn("b".into(), Head { last: -1, tag: None });
        let w = e.next_writes(&mut p);
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].stream.as_str(), w[0].expected, w[0].count, w[0].last_position), ("a", 7, 1, 40));
        assert_eq!((w[1].stream.as_str(), w[1].expected, w[1].count, w[1].last_position), ("b", -1, 2, 50));
        assert_eq!((w[0].skip, w[1].skip), (0, 0));
        let WriteOp::Append { events, expected, .. } = e.op(&p, &w[1], || [9; 16]) else { panic!() };
        assert_eq!(expected, -1);
        assert_eq!(events.len(), 2);
        assert_eq!(&events[0].data[..], b"20@src");
        assert!(std::str::from_utf8(&events[1].metadata)
            .unwrap()
            .starts_with(r#"{"$v":"1:-1:1:4","$c":50,"$p":50"#));
        e.written(&mut p, &w[0], 8);
        e.written(&mut p, &w[1], 1);
        assert!(p.is_empty());
        assert!(e.next_writes(&mut p).is_empty());
        // The same emits again (a second restart from the same checkpoint): nothing to write.
        let mut again = Pending::new(vec![emit("a", 10), emit("b", 50)]);
        assert!(e.next_writes(&mut again).is_empty());
        assert!(again.is_empty());
    }

    #[test]
    fn batches_older_epochs_and_forgetting() {
        let mut e = Emitted::new(ProjectionVersion { epoch: 2, version: 2, ..V }, 2);
        let mut p = Pending::new((1..=5).map(|i| emit("a", i * 10)).collect());
        // Output of the epoch before the reset does not count.
        e.learn("a".into(), Head { last: 4, tag: Some(Tag { version: V, position: 50 }) });
        // Five emits in writes of two: each write expects the version the one before leaves.
        let w = e.next_writes(&mut p);
        let shape: Vec<(i64, usize, usize, u64)> =
            w.iter().map(|w| (w.expected, w.skip, w.count, w.last_position)).collect();
        assert_eq!(shape, [(4, 0, 2, 20), (6, 2, 2, 40), (8, 4, 1, 50)]);
        let WriteOp::Append { events, .. } = e.op(&p, &w[1], || [0; 16]) else { panic!() };
        assert_eq!(&events[0].data[..], b"30@src");
        // The first write went through, the second was refused: the rest is decided again.
        e.written(&mut p, &w[0], 5);
        e.forget("a");
        assert_eq!(e.unknown(&p), ["a"]);
        e.learn("a".into(), Head { last: 5, tag: Some(Tag { version: *e.version(), position: 20 }) });
        let w = e.next_writes(&mut p);
        assert_eq!((w[0].expected, w[0].skip, w[0].count, w[0].last_position), (5, 0, 2, 40));
        e.forget("a");
        assert_eq!(e.unknown(&p), ["a"]);
        e.drop_stream(&mut p, "a");
        assert!(p.is_empty());
    }
}
