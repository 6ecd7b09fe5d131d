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
    let end = store.log().committed();
    if from > end {
        return Err(FeedError::PastEnd { position: from, end });
    }
    let max = max.clamp(1, READ_EVENTS_MAX);
    let mut scan = store.log().scan(from);
    let mut events = Vec::new();
    let mut scanned = 0usize;
    while events.len() < max && scanned < READ_EVENTS_SCAN_MAX {
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
