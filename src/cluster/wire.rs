//! Frames between nodes: `u32 length | u32 crc32 | payload`, little-endian, where the payload is
//! `u32 header length | header (JSON of the envelope) | data` and the data is the raw records of
//! a [`Msg::Append`] (empty for every other message).
//!
//! Invariants: a frame is at most [`MAX_FRAME_BYTES`]; the checksum covers the whole payload; a
//! frame that fails any check is refused whole (the connection that carried it is dropped by the
//! caller), never partly applied.

use bytes::Bytes;

use super::core::{Envelope, Msg};

/// The largest frame accepted: the largest record plus headroom for a batch.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// Why a frame was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// The length field is out of bounds.
    #[error("frame of {0} bytes is larger than the limit")]
    TooLarge(usize),
    /// The checksum does not match.
    #[error("frame checksum mismatch")]
    Checksum,
    /// The payload does not parse.
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// Encodes an envelope as one frame.
pub fn encode(env: &Envelope) -> Vec<u8> {
    let (head, data) = match &env.msg {
        Msg::Append { data, .. } => {
            let mut e = env.clone();
            if let Msg::Append { data, .. } = &mut e.msg {
                *data = Bytes::new();
            }
            (serde_json::to_vec(&e).unwrap_or_default(), data.clone())
        }
        _ => (serde_json::to_vec(env).unwrap_or_default(), Bytes::new()),
    };
    let payload_len = 4 + head.len() + data.len();
    let mut out = Vec::with_capacity(8 + payload_len);
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(&data);
    let crc = crc32fast::hash(&out[8..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The payload length a frame header announces, checked against the limit.
pub fn frame_len(header: [u8; 8]) -> Result<usize, WireError> {
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if !(4..=MAX_FRAME_BYTES).contains(&len) {
        return Err(WireError::TooLarge(len));
    }
    Ok(len)
}

/// Decodes a frame's payload, given its 8-byte header.
pub fn decode(header: [u8; 8], payload: Vec<u8>) -> Result<Envelope, WireError> {
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if crc32fast::hash(&payload) != crc {
        return Err(WireError::Checksum);
    }
    if payload.len() < 4 {
        return Err(WireError::Malformed("short payload".into()));
    }
    let head_len = u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]) as usize;
    let head_end = 4usize.checked_add(head_len).filter(|&e| e <= payload.len());
    let Some(head_end) = head_end else {
        return Err(WireError::Malformed("header length past the payload".into()));
    };
    let mut env: Envelope =
        serde_json::from_slice(&payload[4..head_end]).map_err(|e| WireError::Malformed(e.to_string()))?;
    let rest = payload.len() - head_end;
    match &mut env.msg {
        Msg::Append { data, .. } => {
            let mut payload = payload;
            *data = Bytes::from(payload.split_off(head_end));
        }
        _ if rest > 0 => return Err(WireError::Malformed("data after a message that carries none".into())),
        _ => {}
    }
    Ok(env)
}

/// Reads one frame from `r`.
pub async fn read_frame<R: tokio::io::AsyncRead + Unpin>(r: &mut R) -> Result<Envelope, ReadError> {
    use tokio::io::AsyncReadExt;
    let mut header = [0u8; 8];
    r.read_exact(&mut header).await.map_err(ReadError::Io)?;
    let len = frame_len(header).map_err(ReadError::Wire)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await.map_err(ReadError::Io)?;
    decode(header, payload).map_err(ReadError::Wire)
}

/// A failed [`read_frame`].
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The connection failed or closed.
    #[error("{0}")]
    Io(std::io::Error),
    /// The frame was refused.
    #[error("{0}")]
    Wire(WireError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::core::{Epoch, Msg};

    fn env(msg: Msg) -> Envelope {
        Envelope { from: "127.0.0.1:1112".parse().unwrap(), cluster_size: 3, term: 7, msg }
    }

    fn roundtrip(e: &Envelope) -> Result<Envelope, WireError> {
        let f = encode(e);
        let header: [u8; 8] = f[..8].try_into().unwrap();
        assert_eq!(frame_len(header).unwrap(), f.len() - 8);
        decode(header, f[8..].to_vec())
    }

    #[test]
    fn messages_roundtrip_with_their_data() {
        let a = env(Msg::Append {
            subscription: 3,
            from: 100,
            end: 110,
            data: Bytes::from_static(b"0123456789"),
            leader_end: 200,
            commit: 90,
            lease: 7,
            part: Some(crate::cluster::core::ChunkPart { start: 2, end: 3, last: false }),
        });
        assert_eq!(roundtrip(&a).unwrap(), a);
        let s = env(Msg::Subscribe {
            subscription: 1,
            durable: 5,
            epochs: vec![Epoch { number: 2, id: [9; 16], position: 0 }],
            complete: true,
            promotable: true,
        });
        assert_eq!(roundtrip(&s).unwrap(), s);
    }

    #[test]
    fn corrupted_and_oversized_frames_are_refused() {
        let a = env(Msg::Heartbeat { leader_end: 1, commit: 1, lease: 5, notice: false });
        let mut f = encode(&a);
        let last = f.len() - 1;
        f[last] ^= 1;
        let header: [u8; 8] = f[..8].try_into().unwrap();
        assert_eq!(decode(header, f[8..].to_vec()), Err(WireError::Checksum));
        let mut big = [0u8; 8];
        big[..4].copy_from_slice(&((MAX_FRAME_BYTES + 1) as u32).to_le_bytes());
        assert!(matches!(frame_len(big), Err(WireError::TooLarge(_))));
        // Valid checksum, garbage inside.
        let payload = b"\x03\x00\x00\x00abc".to_vec();
        let mut h = [0u8; 8];
        h[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        h[4..].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        assert!(matches!(decode(h, payload), Err(WireError::Malformed(_))));
    }
}
