//! Forward scans over the committed log ([`Log::scan`]): records in log order, read in large
//! pieces and decoded without copying, across chunk boundaries, padding and scavenged chunks.
//!
//! Invariant: a scan never returns a record at or past [`Log::committed`] (a durable scan:
//! [`Log::durable`]; a written scan: what the writer handed to the files), nor past its own
//! limit; after an error it ends.

use std::sync::Arc;

use bytes::Bytes;

use super::record::{self, FrameError, Record};
use super::{Chunk, Log, LogError, SCAN_READ_BYTES};

impl Log {
    /// Scans committed records forward from `from` (a record start or chunk boundary).
    pub fn scan(&self, from: u64) -> Scan<'_> {
        Scan {
            log: self,
            pos: from,
            buf: Bytes::new(),
            buf_off: 0,
            chunk: None,
            limit: None,
            horizon: Horizon::Committed,
        }
    }

    /// Scans durable records forward from `from`, committed or not: what a cluster's leader
    /// ships and what a node publishes once a quorum holds it. Readers use [`Log::scan`].
    pub fn scan_durable(&self, from: u64) -> Scan<'_> {
        Scan { horizon: Horizon::Durable, ..self.scan(from) }
    }

    /// Scans records forward from `from` up to `end`, durable or not, but never past what the
    /// writer handed to the files: what a cluster's leader ships while its own sync of those
    /// records runs. Records past the durable end may still be lost (a crash, a failed sync)
    /// and must not be counted as this node's: only the durable ones are.
    pub fn scan_written(&self, from: u64, end: u64) -> Scan<'_> {
        Scan { horizon: Horizon::Written, ..self.scan(from) }.until(end)
    }
}

/// How far a scan may read.
#[derive(Clone, Copy)]
enum Horizon {
    /// The committed end (readers).
    Committed,
    /// The durable end (`writer.chk`).
    Durable,
    /// What the writer handed to the files.
    Written,
}

/// A forward scan over committed records (see [`Log::scan`]).
pub struct Scan<'a> {
    log: &'a Log,
    pos: u64,
    buf: Bytes,
    /// Data offset (in the current chunk) of `buf[0]`.
    buf_off: u64,
    chunk: Option<Arc<Chunk>>,
    limit: Option<u64>,
    /// Which end the scan reaches.
    horizon: Horizon,
}

impl Scan<'_> {
    /// Position of the next record to be returned.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Stops the scan at `end` (exclusive) even if more is committed.
    pub fn until(mut self, end: u64) -> Self {
        self.limit = Some(end);
        self
    }

    /// The next record together with its encoded frame (shared, not copied).
    pub fn next_with_frame(&mut self) -> Option<Result<(Record, Bytes), LogError>> {
        match self.next_framed() {
            Ok(Some(x)) => Some(Ok(x)),
            Ok(None) => None,
            Err(e) => {
                self.limit = Some(0);
                Some(Err(e))
            }
        }
    }

    fn next_record(&mut self) -> Result<Option<Record>, LogError> {
        Ok(self.next_framed()?.map(|(r, _)| r))
    }

    fn next_framed(&mut self) -> Result<Option<(Record, Bytes)>, LogError> {
        let size = self.log.cfg.chunk_size;
        loop {
            let horizon = match self.horizon {
                Horizon::Committed => self.log.committed(),
                Horizon::Durable => self.log.durable(),
                Horizon::Written => {
                    self.log.handed.load(std::sync::atomic::Ordering::Acquire).max(self.log.durable())
                }
            };
            let stop = self.limit.unwrap_or(u64::MAX).min(horizon);
            if self.pos >= stop {
                return Ok(None);
            }
            let c = match &self.chunk {
                Some(c)
                    if c.header.start as u64 * size <= self.pos
                        && self.pos < (c.header.end as u64 + 1) * size =>
                {
                    c.clone()
                }
                _ => {
                    let c = self.log.chunk_for(self.pos).ok_or(LogError::OutOfRange(self.pos))?;
                    self.chunk = Some(c.clone());
                    self.buf = Bytes::new();
                    c
                }
            };
            let base = c.header.start as u64 * size;
            let span_end = (c.header.end as u64 + 1) * size;
            let end = self.log.readable_end_to(&c, horizon).min(stop);
            let next = c.first_from(base, self.pos).filter(|(p, _)| *p < end);
            let Some((pos, off)) = next else {
                if end < stop || span_end <= stop {
                    // The rest of this chunk is padding (or was scavenged away): next chunk.
                    self.pos = span_end;
                    self.chunk = None;
                    continue;
                }
                return Ok(None);
            };
            self.pos = pos;
            let avail = c.readable_from(base, off, end);
            let in_buf = off >= self.buf_off && off < self.buf_off + self.buf.len() as u64;
            if !in_buf {
                self.fill(&c, off, avail, SCAN_READ_BYTES)?;
            }
            let at = (off - self.buf_off) as usize;
            match record::decode_shared(&self.buf, at, pos, self.log.max_body) {
                Ok((r, len)) => {
                    self.pos = c.after(pos, len as u64, span_end);
                    return Ok(Some((r, self.buf.slice(at..at + len))));
                }
                Err(FrameError::Short { needed })
                    if needed as u64 <= avail && (at > 0 || self.buf.len() < needed) =>
                {
                    self.fill(&c, off, avail, SCAN_READ_BYTES.max(needed))?;
                }
                Err(e) => return Err(c.corrupt(off, e)),
            }
        }
    }

    fn fill(&mut self, c: &Chunk, off: u64, avail: u64, want: usize) -> Result<(), LogError> {
        let n = (avail as usize).min(want);
        self.buf = Bytes::from(c.read_vec(n, off)?);
        self.buf_off = off;
        Ok(())
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<Record, LogError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => None,
            Err(e) => {
                self.limit = Some(0);
                Some(Err(e))
            }
        }
    }
}
