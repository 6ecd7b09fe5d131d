//! The events feed of `POST /projections/read-events`: one page of the events a query source
//! selects ([`Selector`]: `fromAll`, `fromStream(s)`, `fromCategory`, an event type filter,
//! links resolved or included), read from a log position, as a projection with that source
//! would be handed them.
//!
//! Positions are log positions, as every projection's position is here: a page starts at a
//! record start (or the end of the log), each event it returns carries the position just past
//! its record, and the page the position where its scan stopped. Either, given back, goes on
//! right after what was read, so pages never repeat or skip an event.
//!
//! Invariants: a page reads only committed records, at most [`READ_EVENTS_MAX`] events and a
//! scan of at most [`READ_EVENTS_SCAN_MAX`] records (a sparse source may answer fewer events
//! than asked, even none, before the end of the log: its position has moved on all the same);
//! the page's position is at or past every event's.

use super::js::{Selected, Selector};
use crate::log::record::{EventRecord, Record};
use crate::log::LogError;
use crate::store::{StorageError, Store};

/// The most events one page returns (`maxEvents`), as a stream page.
pub const READ_EVENTS_MAX: usize = 4096;
/// Events one page returns when the request does not say.
pub const READ_EVENTS_DEFAULT: usize = 10;
/// Log records one page scans at most, so a request over a sparse source stays bounded.
pub const READ_EVENTS_SCAN_MAX: usize = 100_000;

/// One event of a page.
#[derive(Debug)]
pub struct FeedEvent {
    /// The event (a link's target when the link was resolved).
    pub event: EventRecord,
    /// The link it was read through, when resolved.
    pub link: Option<EventRecord>,
    /// The position just past the record read: a page from it continues after this event.
    pub next: u64,
}

/// A page of events.
#[derive(Debug)]
pub struct FeedPage {
    /// The events, in log order.
    pub events: Vec<FeedEvent>,
    /// Where the scan stopped: the next page starts here.
    pub next: u64,
}

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The position is not a record's start.
    #[error("position {0} is not the start of a record in the log")]
    NotARecord(u64),
    /// The position lies past the committed end of the log.
    #[error("position {position} is past the end of the log ({end})")]
    PastEnd {
        /// The position asked for.
        position: u64,
        /// The committed end.
        end: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A link's target could not be read.
    #[error("{0}")]
    Target(String),
}

/// Reads up to `max` events that `selector` selects from log position `from` (links' targets
/// read at `now_us`). Blocking: run it on the blocking pool.
pub fn read_page(
    store: &Store,
    selector: &Selector,
    from: u64,
    max: usize,
    now_us: i64,
) -> Result<FeedPage, FeedError> {
    scan_page(store, selector, from, max, READ_EVENTS_SCAN_MAX, now_us)
}

/// [`read_page`], scanning at most `scan_max` records.
fn scan_page(
    store: &Store,
    selector: &Selector,
    from: u64,
    max: usize,
    scan_max: usize,
    now_us: i64,
) -> Result<FeedPage, FeedError> {
    let end = store.log().committed();
    if from > end {
        return Err(FeedError::PastEnd { position: from, end });
    }
    let max = max.clamp(1, READ_EVENTS_MAX);
    let mut scan = store.log().scan(from);
    let mut events = Vec::new();
    let mut scanned = 0usize;
    while events.len() < max && scanned < scan_max {
        let record = match scan.next() {
            None => break,
            Some(Ok(r)) => r,
            Some(Err(LogError::Corrupt { .. } | LogError::OutOfRange(_))) if scanned == 0 => {
                return Err(FeedError::NotARecord(from))
            }
            Some(Err(e)) => return Err(StorageError::from(e).into()),
        };
        scanned += 1;
        let Record::Event(e) = record else { continue };
        let next = scan.position();
        match selector.select(&e, store, now_us).map_err(FeedError::Target)? {
            Selected::No => {}
            Selected::Event => events.push(FeedEvent { event: e, link: None, next }),
            Selected::Target(target) => events.push(FeedEvent { event: target, link: Some(e), next }),
        }
    }
    Ok(FeedPage { events, next: scan.position() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewEvent, StoreConfig};
    use annal_js::Source;
    use bytes::Bytes;
    use std::sync::Arc;

    fn store() -> Arc<Store> {
        let (env, _disk, _clock) = crate::env::mem::env(11);
        let mut cfg = StoreConfig::new("/db");
        cfg.chunk_size = 1 << 20;
        cfg.existence_filter_bytes = 4096;
        Store::open(&env, cfg).unwrap()
    }

    fn append(store: &Store, stream: &str, event_type: &str, n: u8) {
        let e = NewEvent {
            id: [n; 16],
            event_type: event_type.into(),
            data: Bytes::from(format!("{{\"n\":{n}}}")),
            metadata: Bytes::new(),
            is_json: true,
        };
        store.append(stream, crate::store::ANY, vec![e]).unwrap();
    }

    /// `stream/number` of each event read `max` at a time with a scan bound of `scan_max`, each
    /// page from the one before's position, until a page comes back empty at the end of the log.
    fn read_all(store: &Store, sel: &Selector, max: usize, scan_max: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut from = 0;
        loop {
            let page = scan_page(store, sel, from, max, scan_max, 0).unwrap();
            assert!(page.events.len() <= max);
            assert!(page.events.iter().all(|e| e.next <= page.next && e.next > from));
            let at_end = page.next == store.log().committed();
            out.extend(page.events.iter().map(|e| format!("{}/{}", e.event.stream, e.event.event_number)));
            if page.events.is_empty() && at_end {
                return out;
            }
            assert!(page.next > from || !page.events.is_empty(), "a page moves on");
            from = page.next;
        }
    }

    #[test]
    fn pages_go_on_from_their_position_within_the_scan_bound() {
        let store = store();
        for n in 0..4 {
            append(&store, "a-1", "A", n);
        }
        append(&store, "b-1", "B", 10);
        append(&store, "a-2", "A", 11);
        append(&store, "b-1", "C", 12);
        let b = Selector::new(Source::Categories(vec!["b".into()]), None, false);
        // The first two records are not of `b`: the page is empty, its position has moved on.
        let page = scan_page(&store, &b, 0, 10, 2, 0).unwrap();
        assert!(page.events.is_empty() && page.next > 0);
        for scan_max in [1, 2, 3, READ_EVENTS_SCAN_MAX] {
            assert_eq!(read_all(&store, &b, 1, scan_max), ["b-1/0", "b-1/1"], "{scan_max}");
        }
        let a = Selector::new(Source::Categories(vec!["a".into()]), Some(vec!["A".into()]), false);
        assert_eq!(read_all(&store, &a, 2, 3), ["a-1/0", "a-1/1", "a-1/2", "a-1/3", "a-2/0"]);
        // An event's own position reads on right after it.
        let all = Selector::new(Source::All, None, false);
        let first = scan_page(&store, &all, 0, 1, 10, 0).unwrap();
        let next = scan_page(&store, &all, first.events[0].next, 1, 10, 0).unwrap();
        assert_eq!((next.events[0].event.stream.as_str(), next.events[0].event.event_number), ("a-1", 1));
    }

    #[test]
    fn positions_off_records_or_past_the_end_are_refused() {
        let store = store();
        append(&store, "a-1", "A", 0);
        let all = Selector::new(Source::All, None, false);
        let end = store.log().committed();
        assert!(matches!(read_page(&store, &all, 1, 10, 0), Err(FeedError::NotARecord(1))));
        assert!(matches!(read_page(&store, &all, end + 1, 10, 0), Err(FeedError::PastEnd { .. })));
        let page = read_page(&store, &all, end, 10, 0).unwrap();
        assert!(page.events.is_empty());
        assert_eq!(page.next, end);
    }
}
