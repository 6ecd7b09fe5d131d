//! The header fields of one request, as the connection parsed them: name and value spans into
//! the request head's own bytes, in the order sent, without copying, hashing or re-validating
//! them (httparse already checked names as tokens and values for control bytes).
//!
//! Invariants: every span lies inside `head`; names are matched ASCII-case-insensitively, and a
//! lookup answers the first field of that name, as `HeaderMap::get` did. Requests carry a handful
//! of fields (at most [`super::wire::MAX_HEADERS`]), so lookups are linear scans.

use bytes::Bytes;

/// One field: byte ranges of its name and value in the head.
#[derive(Clone, Copy, Debug)]
struct Field {
    name: (u32, u32),
    value: (u32, u32),
}

/// A request's header fields.
#[derive(Clone, Debug, Default)]
pub struct Headers {
    head: Bytes,
    fields: Vec<Field>,
}

impl Headers {
    /// Fields over `head`, from `(name, value)` byte ranges; the caller guarantees the ranges lie
    /// inside `head` (the head is at most [`super::wire::MAX_HEAD`] bytes, so they fit in `u32`).
    pub(super) fn new(
        head: Bytes,
        spans: impl IntoIterator<Item = ((usize, usize), (usize, usize))>,
    ) -> Headers {
        let fields: Vec<Field> = spans
            .into_iter()
            .map(|((n0, n1), (v0, v1))| Field { name: (n0 as u32, n1 as u32), value: (v0 as u32, v1 as u32) })
            .collect();
        debug_assert!(fields
            .iter()
            .all(|f| f.name.1 as usize <= head.len() && f.value.1 as usize <= head.len()));
        Headers { head, fields }
    }

    /// Fields from name/value pairs (tests and tools that build requests by hand).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Headers {
        let mut head = Vec::new();
        let mut spans = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let n0 = head.len();
            head.extend_from_slice(name.as_bytes());
            let v0 = head.len();
            head.extend_from_slice(value.as_bytes());
            spans.push(((n0, v0), (v0, head.len())));
        }
        Headers::new(Bytes::from(head), spans)
    }

    fn slice(&self, (from, to): (u32, u32)) -> &[u8] {
        &self.head[from as usize..to as usize]
    }

    /// Fields as `(name, value)` bytes, in the order sent (names as the client spelled them).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|f| (self.slice(f.name), self.slice(f.value)))
    }

    /// The first value of the field `name` (any letter case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter().find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v)
    }

    /// [`Headers::get`] as text (`None` when absent or not UTF-8).
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_ignore_case_and_answer_the_first_field() {
        let h =
            Headers::from_pairs(&[("Host", "a"), ("ES-ExpectedVersion", "1"), ("es-expectedversion", "2")]);
        assert_eq!(h.get("host"), Some(&b"a"[..]));
        assert_eq!(h.get_str("es-expectedversion"), Some("1"));
        assert_eq!(h.get("accept"), None);
        let names: Vec<&[u8]> = h.iter().map(|(n, _)| n).collect();
        assert_eq!(names, [&b"Host"[..], b"ES-ExpectedVersion", b"es-expectedversion"]);
        let h = Headers::from_pairs(&[("x", "caf\u{e9}"), ("y", "")]);
        assert_eq!(h.get_str("x"), Some("caf\u{e9}"));
        assert_eq!(h.get_str("y"), Some(""));
        assert_eq!(Headers::default().iter().count(), 0);
    }
}
