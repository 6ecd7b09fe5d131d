//! Byte format of log records: framing, checksums and the two record kinds.
//!
//! Every record is framed as
//!
//! ```text
//! u32 len | u32 crc32(len ++ body) | body (len bytes) | u32 len
//! body = u8 kind | u8 format version | u64 log position | payload
//! ```
//!
//! All integers are little-endian. The length is repeated after the body so the log can be read
//! backwards. The checksum covers the leading length and the body, and the body carries its own log
//! position, so a torn, bit-flipped or misdirected record (one written at the wrong place) is
//! detected on every read. A zero length marks unwritten (pre-zeroed) space.
//!
//! Event payload (kind 0, "prepare" in the anchor's vocabulary):
//!
//! ```text
//! u16 flags | u64 transaction position | u32 transaction offset | i64 event number
//! [16] event id | i64 timestamp (µs since the Unix epoch)
//! u16 len + stream | u16 len + event type | u32 len + data | u32 len + metadata
//! ```
//!
//! System payload (kind 2) is an epoch: `i64 epoch number | [16] epoch id | i64 previous epoch
//! position | i64 timestamp | [16] leader instance id`.

use bytes::Bytes;

/// Size of the frame around a body: two lengths and a checksum.
pub const FRAME_OVERHEAD: u64 = 12;
/// Fixed part of a body: kind, version, position.
pub const BODY_HEADER: usize = 10;
/// Record format version written by this build.
pub const RECORD_VERSION: u8 = 1;
/// Kind byte of an event record.
pub const KIND_EVENT: u8 = 0;
/// Kind byte of a system (epoch) record.
pub const KIND_SYSTEM: u8 = 2;
/// Fixed part of an event payload (before the variable fields' bytes).
const EVENT_FIXED: usize = 2 + 8 + 4 + 8 + 16 + 8 + 2 + 2 + 4 + 4;

/// Event flags, as in the anchor's prepare flags.
pub mod flags {
    /// Carries event data.
    pub const DATA: u16 = 0x1;
    /// First event of an atomic write.
    pub const TX_BEGIN: u16 = 0x2;
    /// Last event of an atomic write.
    pub const TX_END: u16 = 0x4;
    /// A hard-delete tombstone.
    pub const STREAM_DELETE: u16 = 0x8;
    /// Self-committed (always set: appends are atomic without commit records).
    pub const IS_COMMITTED: u16 = 0x20;
    /// Data and metadata are JSON.
    pub const IS_JSON: u16 = 0x100;
    /// Data was blanked by redaction.
    pub const IS_REDACTED: u16 = 0x200;
}

/// An event as stored in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    /// Where the record starts in the log.
    pub log_position: u64,
    /// See [`flags`].
    pub flags: u16,
    /// Position of the first record of the atomic write this event belongs to.
    pub transaction_position: u64,
    /// Index of this event within its atomic write.
    pub transaction_offset: u32,
    /// Number of the event in its stream (`i64::MAX` for a tombstone).
    pub event_number: i64,
    /// Client-supplied (or server-generated) id.
    pub event_id: [u8; 16],
    /// Commit time, µs since the Unix epoch.
    pub timestamp_us: i64,
    /// Stream name.
    pub stream: String,
    /// Event type.
    pub event_type: String,
    /// Payload.
    pub data: Bytes,
    /// Event metadata.
    pub metadata: Bytes,
}

impl EventRecord {
    /// Whether data and metadata are JSON.
    pub fn is_json(&self) -> bool {
        self.flags & flags::IS_JSON != 0
    }
    /// Whether this is a hard-delete tombstone.
    pub fn is_tombstone(&self) -> bool {
        self.flags & flags::STREAM_DELETE != 0
    }
}

/// An epoch: the start of a leadership term in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochRecord {
    /// Where the record starts in the log.
    pub log_position: u64,
    /// Term number, from 0.
    pub epoch_number: i64,
    /// Unique id of the epoch.
    pub epoch_id: [u8; 16],
    /// Position of the previous epoch record, -1 for the first.
    pub prev_epoch_position: i64,
    /// Time written, µs since the Unix epoch.
    pub timestamp_us: i64,
    /// The node that led the term.
    pub leader_id: [u8; 16],
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// An event (or tombstone).
    Event(EventRecord),
    /// An epoch.
    Epoch(EpochRecord),
}

impl Record {
    /// Where the record starts in the log.
    pub fn log_position(&self) -> u64 {
        match self {
            Record::Event(e) => e.log_position,
            Record::Epoch(e) => e.log_position,
        }
    }
}

/// Why bytes did not decode as a record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Zero length: unwritten space.
    #[error("no record here (zero length)")]
    Empty,
    /// The buffer ends before the frame does; `needed` bytes in total are required.
    #[error("frame needs {needed} bytes")]
    Short {
        /// Total frame size announced by the length prefix.
        needed: usize,
    },
    /// Length out of bounds or prefix and suffix disagree.
    #[error("bad record length {0}")]
    BadLength(u32),
    /// Checksum mismatch.
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    BadChecksum {
        /// Stored value.
        stored: u32,
        /// Computed value.
        computed: u32,
    },
    /// A valid record that claims another position (a misdirected write).
    #[error("record claims position {found}, expected {expected}")]
    WrongPosition {
        /// Position inside the record.
        found: u64,
        /// Position it was read from.
        expected: u64,
    },
    /// Checksum fine but the body makes no sense (unknown kind or version, bad UTF-8).
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}

/// Encoded size of an event's frame.
pub fn event_frame_len(stream: &str, event_type: &str, data_len: usize, meta_len: usize) -> u64 {
    (BODY_HEADER + EVENT_FIXED + stream.len() + event_type.len() + data_len + meta_len) as u64
        + FRAME_OVERHEAD
}

/// A borrowed view of an event for encoding (the write path allocates nothing per event).
#[derive(Clone, Copy, Debug)]
pub struct EventFrame<'a> {
    /// Where the record starts in the log.
    pub log_position: u64,
    /// See [`flags`].
    pub flags: u16,
    /// Position of the first record of the atomic write.
    pub transaction_position: u64,
    /// Index within the atomic write.
    pub transaction_offset: u32,
    /// Event number.
    pub event_number: i64,
    /// Event id.
    pub event_id: [u8; 16],
    /// Commit time, µs since the Unix epoch.
    pub timestamp_us: i64,
    /// Stream name.
    pub stream: &'a str,
    /// Event type.
    pub event_type: &'a str,
    /// Payload.
    pub data: &'a [u8],
    /// Event metadata.
    pub metadata: &'a [u8],
}

impl EventRecord {
    /// The borrowed view of this record.
    pub fn frame(&self) -> EventFrame<'_> {
        EventFrame {
            log_position: self.log_position,
            flags: self.flags,
            transaction_position: self.transaction_position,
            transaction_offset: self.transaction_offset,
            event_number: self.event_number,
            event_id: self.event_id,
            timestamp_us: self.timestamp_us,
            stream: &self.stream,
            event_type: &self.event_type,
            data: &self.data,
            metadata: &self.metadata,
        }
    }
}

impl EventFrame<'_> {
    /// Encoded frame length.
    pub fn len(&self) -> u64 {
        event_frame_len(self.stream, self.event_type, self.data.len(), self.metadata.len())
    }
    /// Never empty (a frame has a fixed header); present for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Appends the frame of `rec` to `out`.
pub fn encode_event(rec: &EventRecord, out: &mut Vec<u8>) {
    encode_frame(&rec.frame(), out)
}

/// Appends the frame of a borrowed event to `out`.
pub fn encode_frame(rec: &EventFrame<'_>, out: &mut Vec<u8>) {
    debug_assert!(rec.stream.len() <= u16::MAX as usize && rec.event_type.len() <= u16::MAX as usize);
    let body_len = BODY_HEADER
        + EVENT_FIXED
        + rec.stream.len()
        + rec.event_type.len()
        + rec.data.len()
        + rec.metadata.len();
    let start = out.len();
    out.reserve(body_len + FRAME_OVERHEAD as usize);
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(KIND_EVENT);
    out.push(RECORD_VERSION);
    out.extend_from_slice(&rec.log_position.to_le_bytes());
    out.extend_from_slice(&rec.flags.to_le_bytes());
    out.extend_from_slice(&rec.transaction_position.to_le_bytes());
    out.extend_from_slice(&rec.transaction_offset.to_le_bytes());
    out.extend_from_slice(&rec.event_number.to_le_bytes());
    out.extend_from_slice(&rec.event_id);
    out.extend_from_slice(&rec.timestamp_us.to_le_bytes());
    out.extend_from_slice(&(rec.stream.len() as u16).to_le_bytes());
    out.extend_from_slice(rec.stream.as_bytes());
    out.extend_from_slice(&(rec.event_type.len() as u16).to_le_bytes());
    out.extend_from_slice(rec.event_type.as_bytes());
    out.extend_from_slice(&(rec.data.len() as u32).to_le_bytes());
    out.extend_from_slice(rec.data);
    out.extend_from_slice(&(rec.metadata.len() as u32).to_le_bytes());
    out.extend_from_slice(rec.metadata);
    seal(out, start, body_len);
}

/// Appends the frame of an epoch record to `out`.
pub fn encode_epoch(rec: &EpochRecord, out: &mut Vec<u8>) {
    let body_len = BODY_HEADER + 8 + 16 + 8 + 8 + 16;
    let start = out.len();
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(KIND_SYSTEM);
    out.push(RECORD_VERSION);
    out.extend_from_slice(&rec.log_position.to_le_bytes());
    out.extend_from_slice(&rec.epoch_number.to_le_bytes());
    out.extend_from_slice(&rec.epoch_id);
    out.extend_from_slice(&rec.prev_epoch_position.to_le_bytes());
    out.extend_from_slice(&rec.timestamp_us.to_le_bytes());
    out.extend_from_slice(&rec.leader_id);
    seal(out, start, body_len);
}

fn seal(out: &mut Vec<u8>, start: usize, body_len: usize) {
    debug_assert_eq!(out.len(), start + 8 + body_len);
    let mut h = crc32fast::Hasher::new();
    h.update(&out[start..start + 4]);
    h.update(&out[start + 8..]);
    let crc = h.finalize();
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
}

/// Decodes the frame at the start of `buf`, which was read from log position `expected`.
/// Returns the record and the frame length. `max_body` bounds the length prefix. Data and
/// metadata are copied out of `buf`.
pub fn decode(buf: &[u8], expected: u64, max_body: u32) -> Result<(Record, usize), FrameError> {
    decode_with(buf, expected, max_body, Bytes::copy_from_slice)
}

/// As [`decode`], for a frame at `offset` in a shared buffer: data and metadata are slices of
/// `buf`, not copies.
pub fn decode_shared(
    buf: &Bytes,
    offset: usize,
    expected: u64,
    max_body: u32,
) -> Result<(Record, usize), FrameError> {
    decode_with(&buf[offset..], expected, max_body, |s| buf.slice_ref(s))
}

fn decode_with(
    buf: &[u8],
    expected: u64,
    max_body: u32,
    bytes: impl Fn(&[u8]) -> Bytes,
) -> Result<(Record, usize), FrameError> {
    if buf.len() < 4 {
        return Err(FrameError::Short { needed: 4 });
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().unwrap_or_default());
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > max_body || (len as usize) < BODY_HEADER {
        return Err(FrameError::BadLength(len));
    }
    let total = len as usize + FRAME_OVERHEAD as usize;
    if buf.len() < total {
        return Err(FrameError::Short { needed: total });
    }
    let stored = u32::from_le_bytes(buf[4..8].try_into().unwrap_or_default());
    let body = &buf[8..8 + len as usize];
    let mut h = crc32fast::Hasher::new();
    h.update(&buf[0..4]);
    h.update(body);
    let computed = h.finalize();
    // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
    if stored != computed && !crate::buggify::bug(crate::buggify::Bug::SkipCrc) {
        return Err(FrameError::BadChecksum { stored, computed });
    }
    let suffix = u32::from_le_bytes(buf[total - 4..total].try_into().unwrap_or_default());
    if suffix != len {
        return Err(FrameError::BadLength(suffix));
    }
    let mut r = Reader { b: body, at: 0 };
    let kind = r.u8()?;
    let version = r.u8()?;
    if version != RECORD_VERSION {
        return Err(FrameError::Malformed("unknown record version"));
    }
    let log_position = r.u64()?;
    if log_position != expected {
        return Err(FrameError::WrongPosition { found: log_position, expected });
    }
    let rec = match kind {
        KIND_EVENT => {
            let flags = r.u16()?;
            let transaction_position = r.u64()?;
            let transaction_offset = r.u32()?;
            let event_number = r.u64()? as i64;
            let event_id = r.id()?;
            let timestamp_us = r.u64()? as i64;
            let n = r.u16()? as usize;
            let stream = r.string(n)?;
            let n = r.u16()? as usize;
            let event_type = r.string(n)?;
            let n = r.u32()? as usize;
            let data = bytes(r.bytes(n)?);
            let n = r.u32()? as usize;
            let metadata = bytes(r.bytes(n)?);
            if r.at != r.b.len() {
                return Err(FrameError::Malformed("trailing bytes in event record"));
            }
            Record::Event(EventRecord {
                log_position,
                flags,
                transaction_position,
                transaction_offset,
                event_number,
                event_id,
                timestamp_us,
                stream,
                event_type,
                data,
                metadata,
            })
        }
        KIND_SYSTEM => Record::Epoch(EpochRecord {
            log_position,
            epoch_number: r.u64()? as i64,
            epoch_id: r.id()?,
            prev_epoch_position: r.u64()? as i64,
            timestamp_us: r.u64()? as i64,
            leader_id: r.id()?,
        }),
        _ => return Err(FrameError::Malformed("unknown record kind")),
    };
    Ok((rec, total))
}

/// Reads the length suffix that ends at `buf.len()`, for backward reads: returns the frame length.
pub fn frame_len_before(buf: &[u8], max_body: u32) -> Result<usize, FrameError> {
    if buf.len() < 4 {
        return Err(FrameError::Short { needed: 4 });
    }
    let len = u32::from_le_bytes(buf[buf.len() - 4..].try_into().unwrap_or_default());
    if len == 0 || len > max_body || (len as usize) < BODY_HEADER {
        return Err(FrameError::BadLength(len));
    }
    Ok(len as usize + FRAME_OVERHEAD as usize)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let end = self.at.checked_add(n).ok_or(FrameError::Malformed("length overflow"))?;
        let s = self.b.get(self.at..end).ok_or(FrameError::Malformed("field runs past the record"))?;
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, FrameError> {
        Ok(u16::from_le_bytes(self.bytes(2)?.try_into().unwrap_or_default()))
    }
    fn u32(&mut self) -> Result<u32, FrameError> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().unwrap_or_default()))
    }
    fn u64(&mut self) -> Result<u64, FrameError> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().unwrap_or_default()))
    }
    fn id(&mut self) -> Result<[u8; 16], FrameError> {
        Ok(self.bytes(16)?.try_into().unwrap_or_default())
    }
    fn string(&mut self, n: usize) -> Result<String, FrameError> {
        String::from_utf8(self.bytes(n)?.to_vec()).map_err(|_| FrameError::Malformed("invalid UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ev(pos: u64, stream: String, ty: String, data: Vec<u8>, meta: Vec<u8>, n: i64) -> EventRecord {
        EventRecord {
            log_position: pos,
            flags: flags::IS_JSON | flags::IS_COMMITTED,
            transaction_position: pos,
            transaction_offset: 0,
            event_number: n,
            event_id: [7; 16],
            timestamp_us: 42,
            stream,
            event_type: ty,
            data: data.into(),
            metadata: meta.into(),
        }
    }

    proptest! {
        #[test]
        fn event_round_trips(pos in any::<u64>(), s in ".{0,40}", t in ".{0,20}",
                             d in proptest::collection::vec(any::<u8>(), 0..300),
                             m in proptest::collection::vec(any::<u8>(), 0..50), n in any::<i64>()) {
            let rec = ev(pos, s.clone(), t.clone(), d.clone(), m.clone(), n);
            let mut buf = Vec::new();
            encode_event(&rec, &mut buf);
            prop_assert_eq!(buf.len() as u64, event_frame_len(&s, &t, d.len(), m.len()));
            let (got, len) = decode(&buf, pos, u32::MAX).unwrap();
            prop_assert_eq!(len, buf.len());
            prop_assert_eq!(got, Record::Event(rec));
            prop_assert_eq!(frame_len_before(&buf, u32::MAX).unwrap(), buf.len());
        }

        #[test]
        fn any_single_bit_flip_is_detected(bit in 0usize..(8 * 120)) {
            let rec = ev(4096, "stream-1".into(), "type".into(), vec![1; 40], vec![], 3);
            let mut buf = Vec::new();
            encode_event(&rec, &mut buf);
            let bit = bit % (buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(decode(&buf, 4096, 1 << 20).is_err());
        }
    }

    #[test]
    fn misdirected_record_is_detected() {
        let rec = ev(100, "s".into(), "t".into(), vec![], vec![], 0);
        let mut buf = Vec::new();
        encode_event(&rec, &mut buf);
        assert_eq!(decode(&buf, 200, 1 << 20), Err(FrameError::WrongPosition { found: 100, expected: 200 }));
    }

    #[test]
    fn zeroes_are_empty_space() {
        assert_eq!(decode(&[0; 64], 0, 1 << 20), Err(FrameError::Empty));
    }

    #[test]
    fn epoch_round_trips() {
        let rec = EpochRecord {
            log_position: 9,
            epoch_number: 2,
            epoch_id: [1; 16],
            prev_epoch_position: -1,
            timestamp_us: 5,
            leader_id: [3; 16],
        };
        let mut buf = Vec::new();
        encode_epoch(&rec, &mut buf);
        assert_eq!(decode(&buf, 9, 1 << 20).unwrap(), (Record::Epoch(rec), buf.len()));
    }
}
