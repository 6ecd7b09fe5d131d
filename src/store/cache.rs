//! The stream-state cache: committed [`StreamState`]s by stream name, and the recently written
//! event ids (idempotent retries with `-2`/`-4`), both bounded first-in-first-out maps.
//!
//! Invariants: the cache only holds committed states. Only [`Store::apply_committed`] changes it
//! for writes (it bumps the generation); a reader that computed a state while a batch was
//! published does not insert it, because the generation moved.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::engine::{self, StreamState};
use super::metadata::StreamMetadata;
use super::{lock, StorageError, Store};

/// Where a recently written event id went: its stream and event number.
pub(super) type RecentId = (Arc<str>, i64);

/// A bounded map with first-in-first-out eviction.
pub(super) struct Fifo<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: std::hash::Hash + Eq + Clone, V> Fifo<K, V> {
    pub(super) fn new(cap: usize) -> Self {
        Fifo { map: HashMap::new(), order: VecDeque::new(), cap: cap.max(1) }
    }
    pub(super) fn get<Q: std::hash::Hash + Eq + ?Sized>(&self, k: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
    {
        self.map.get(k)
    }
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }
    pub(super) fn capacity(&self) -> usize {
        self.cap
    }
    pub(super) fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
            while self.order.len() > self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

impl<K: std::hash::Hash + Eq, V> Fifo<K, V> {
    /// Forgets `k`. Its place in the eviction order stays until it comes up (a cache may evict an
    /// entry early, never keep one past its capacity).
    pub(super) fn remove<Q: std::hash::Hash + Eq + ?Sized>(&mut self, k: &Q)
    where
        K: std::borrow::Borrow<Q>,
    {
        self.map.remove(k);
    }
}

impl Store {
    /// Entries in the stream-info cache, and its capacity (for metrics).
    pub fn stream_cache_usage(&self) -> (usize, usize) {
        let cache = lock(&self.streams);
        (cache.1.len(), cache.1.capacity())
    }

    /// `f` of the committed state of a stream, if cached (no storage read, no copy of the state).
    pub fn with_cached_state<R>(&self, name: &str, f: impl FnOnce(&StreamState) -> R) -> Option<R> {
        let cache = lock(&self.streams);
        let r = f(cache.1.get(name)?);
        self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
        Some(r)
    }

    /// The committed state of a stream (cached).
    pub fn stream_state(&self, name: &str) -> Result<StreamState, StorageError> {
        let generation = {
            let cache = lock(&self.streams);
            if let Some(s) = cache.1.get(name) {
                self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(s.clone());
            }
            cache.0
        };
        self.stats.cache_misses.fetch_add(1, Ordering::Relaxed);
        let last = self.last_event_number(name)?;
        let mut st = StreamState { last, meta: StreamMetadata::default(), meta_last: -1 };
        if engine::meta_target(name).is_none() {
            let meta = format!("$${name}");
            st.meta_last = self.last_event_number(&meta)?;
            if st.meta_last >= 0 {
                if let Some(e) = self.event_at(&meta, st.meta_last)? {
                    st.meta = if e.is_json() && !e.data.is_empty() {
                        StreamMetadata::parse(&e.data)
                    } else {
                        StreamMetadata { raw: Some(e.data.clone()), ..StreamMetadata::default() }
                    };
                }
            }
        }
        let mut cache = lock(&self.streams);
        if cache.0 == generation {
            cache.1.insert(name.to_owned(), st.clone());
        }
        Ok(st)
    }
}
