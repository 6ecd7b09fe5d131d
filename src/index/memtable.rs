//! The index memtable: the newest entries, in memory, grouped by stream hash.
//!
//! Appends to one stream arrive in event-number order, so each hash keeps a vector sorted by
//! `(event number, position)` and an append is a hash lookup and a push, where an ordered set
//! would walk a tree of every entry (cache misses on each level once it holds many streams).
//! Reads ask for one hash at a time, so nothing needs a global order until a flush, which sorts
//! once ([`MemTable::sorted`]) on the background job.
//!
//! Invariants: every vector is sorted by `(event number, position)`, holds no duplicate and is
//! never empty; `len` is the sum of their lengths. The table behaves as the ordered set of
//! [`Entry`] it replaced: inserting an entry it holds changes nothing. Entries of colliding streams
//! (two names, one hash) share a vector and interleave in that order, as they did in the set.
//!
//! Hashes come from stream names that clients choose, so the map hashes them again under a
//! secret key ([`KeyedState`]): a client cannot aim names at one bucket of the map. No answer
//! depends on the key (the map is never iterated in its own order: a flush sorts).

use std::collections::HashMap;

use super::Entry;
use crate::keyed::KeyedState;

/// Bytes of memory per entry (its vector slot), for statistics.
const ENTRY_BYTES: usize = 16;
/// Bytes of memory per stream (map slot, vector header, allocator rounding), for statistics.
const STREAM_BYTES: usize = 64;

/// Entries by stream hash.
#[derive(Debug, Default)]
pub struct MemTable {
    by_hash: HashMap<u64, Vec<(i64, u64)>, KeyedState>,
    len: usize,
}

impl MemTable {
    /// An empty table under a fresh secret key.
    pub fn new() -> MemTable {
        MemTable::default()
    }

    /// An empty table whose map is keyed by `key`.
    pub fn with_key(key: u64) -> MemTable {
        MemTable { by_hash: HashMap::with_hasher(KeyedState::with_key(key)), len: 0 }
    }

    /// An empty table with the same map key.
    pub fn empty_like(&self) -> MemTable {
        MemTable { by_hash: HashMap::with_hasher(*self.by_hash.hasher()), len: 0 }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Approximate memory held, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.len * ENTRY_BYTES + self.by_hash.len() * STREAM_BYTES
    }

    /// Adds `e` unless the table holds it already.
    pub fn insert(&mut self, e: Entry) {
        let key = (e.event_number, e.position);
        let v = self.by_hash.entry(e.hash).or_insert_with(|| Vec::with_capacity(1));
        match v.last() {
            None => v.push(key),
            Some(last) if *last < key => v.push(key),
            // Out of order: colliding streams, or an entry seen again.
            Some(_) => match v.binary_search(&key) {
                Ok(_) => return,
                Err(at) => v.insert(at, key),
            },
        }
        self.len += 1;
    }

    /// Entries of `hash` with event numbers in `from..=to`, ascending (reverse for descending).
    pub fn range(&self, hash: u64, from: i64, to: i64) -> impl DoubleEndedIterator<Item = Entry> + '_ {
        let v: &[(i64, u64)] = self.by_hash.get(&hash).map_or(&[], Vec::as_slice);
        let lo = v.partition_point(|&(n, _)| n < from);
        let hi = v.partition_point(|&(n, _)| n <= to).max(lo);
        v[lo..hi].iter().map(move |&(event_number, position)| Entry { hash, event_number, position })
    }

    /// Keeps only the entries for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&Entry) -> bool) {
        let mut len = 0;
        self.by_hash.retain(|&hash, v| {
            v.retain(|&(event_number, position)| keep(&Entry { hash, event_number, position }));
            len += v.len();
            !v.is_empty()
        });
        self.len = len;
    }

    /// Every entry, in [`Entry`] order (hash, event number, position): what a table is written
    /// from.
    pub fn sorted(&self) -> Vec<Entry> {
        let mut hashes: Vec<u64> = self.by_hash.keys().copied().collect();
        hashes.sort_unstable();
        let mut out = Vec::with_capacity(self.len);
        for hash in hashes {
            out.extend(self.range(hash, i64::MIN, i64::MAX));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn entry() -> impl Strategy<Value = Entry> {
        // Few hashes and numbers, so collisions, repeats and out-of-order inserts are common.
        (0u64..4, -2i64..12, 0u64..40).prop_map(|(hash, event_number, position)| Entry {
            hash: hash.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            event_number,
            position,
        })
    }

    proptest! {
        /// The table answers as the ordered set it replaced, for every operation the index uses.
        #[test]
        fn behaves_as_the_ordered_set(
            inserts in prop::collection::vec(entry(), 0..200),
            queries in prop::collection::vec((0u64..4, -3i64..13, -3i64..13), 1..20),
            drop_position in 0u64..40,
            key in any::<u64>(),
        ) {
            let mut t = MemTable::with_key(key);
            let mut set = BTreeSet::new();
            for e in &inserts {
                t.insert(*e);
                set.insert(*e);
                prop_assert_eq!(t.len(), set.len());
            }
            let check = |t: &MemTable, set: &BTreeSet<Entry>| -> Result<(), TestCaseError> {
                prop_assert_eq!(t.sorted(), set.iter().copied().collect::<Vec<_>>());
                for &(h, from, to) in &queries {
                    let hash = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let lo = Entry { hash, event_number: from, position: 0 };
                    let hi = Entry { hash, event_number: to, position: u64::MAX };
                    let want: Vec<Entry> =
                        if from <= to { set.range(lo..=hi).copied().collect() } else { Vec::new() };
                    prop_assert_eq!(t.range(hash, from, to).collect::<Vec<_>>(), want.clone());
                    let back: Vec<Entry> = t.range(hash, from, to).rev().collect();
                    prop_assert_eq!(back, want.into_iter().rev().collect::<Vec<_>>());
                }
                Ok(())
            };
            check(&t, &set)?;
            t.retain(|e| e.position != drop_position);
            set.retain(|e| e.position != drop_position);
            prop_assert_eq!(t.len(), set.len());
            check(&t, &set)?;
            prop_assert_eq!(t.is_empty(), set.is_empty());
        }
    }

    #[test]
    fn the_key_does_not_change_the_answers() {
        let e = Entry { hash: 42, event_number: 0, position: 7 };
        for key in [1, 2] {
            let mut t = MemTable::with_key(key);
            t.insert(e);
            assert_eq!(t.range(42, 0, 0).collect::<Vec<_>>(), vec![e]);
            assert!(t.empty_like().is_empty());
        }
    }
}
