//! Stream metadata: the latest event of `$$stream`, parsed.
//!
//! Reserved keys, as in EventStoreDB v5: `$maxAge` (seconds), `$maxCount`, `$tb`
//! (truncate before), `$cacheControl` (seconds), `$acl`. A reserved key of the wrong type, or JSON
//! that does not parse, makes the whole metadata count as empty (as in the anchor); the raw bytes
//! are kept either way. Values that are not positive (`$tb`: negative) are ignored.

use serde_json::Value;

/// `$tb` value that marks a soft-deleted stream.
pub const SOFT_DELETED_TB: i64 = i64::MAX;

/// Access control list: role lists per operation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acl {
    /// Read roles.
    pub read: Option<Vec<String>>,
    /// Write roles.
    pub write: Option<Vec<String>>,
    /// Delete roles.
    pub delete: Option<Vec<String>>,
    /// Metadata read roles.
    pub meta_read: Option<Vec<String>>,
    /// Metadata write roles.
    pub meta_write: Option<Vec<String>>,
}

/// Parsed stream metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamMetadata {
    /// Events older than this many seconds are hidden.
    pub max_age_secs: Option<i64>,
    /// Only the last N events are visible.
    pub max_count: Option<i64>,
    /// Events below this number are hidden; `i64::MAX` means soft-deleted.
    pub truncate_before: Option<i64>,
    /// `Cache-Control: max-age` for head pages.
    pub cache_control_secs: Option<i64>,
    /// Access control.
    pub acl: Option<Acl>,
    /// Raw bytes of the latest metadata event, if any.
    pub raw: Option<bytes::Bytes>,
}

impl StreamMetadata {
    /// Whether the stream is soft-deleted.
    pub fn is_soft_deleted(&self) -> bool {
        self.truncate_before == Some(SOFT_DELETED_TB)
    }

    /// Parses metadata event data (`is_json` events only; anything else is empty metadata).
    pub fn parse(data: &[u8]) -> StreamMetadata {
        let raw = Some(bytes::Bytes::copy_from_slice(data));
        let empty = StreamMetadata { raw: raw.clone(), ..StreamMetadata::default() };
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(data) else { return empty };
        let int = |k: &str| -> Result<Option<i64>, ()> {
            match map.get(k) {
                None => Ok(None),
                Some(v) => v.as_i64().map(Some).ok_or(()),
            }
        };
        let (Ok(max_age), Ok(max_count), Ok(tb), Ok(cc)) =
            (int("$maxAge"), int("$maxCount"), int("$tb"), int("$cacheControl"))
        else {
            return empty;
        };
        let acl = match map.get("$acl") {
            None => None,
            Some(Value::Object(a)) => {
                let roles = |k: &str| -> Result<Option<Vec<String>>, ()> {
                    match a.get(k) {
                        None => Ok(None),
                        Some(Value::String(s)) => Ok(Some(vec![s.clone()])),
                        Some(Value::Array(xs)) => xs
                            .iter()
                            .map(|x| x.as_str().map(str::to_owned).ok_or(()))
                            .collect::<Result<_, _>>()
                            .map(Some),
                        Some(_) => Err(()),
                    }
                };
                match (roles("$r"), roles("$w"), roles("$d"), roles("$mr"), roles("$mw")) {
                    (Ok(read), Ok(write), Ok(delete), Ok(meta_read), Ok(meta_write)) => {
                        Some(Acl { read, write, delete, meta_read, meta_write })
                    }
                    _ => return empty,
                }
            }
            Some(_) => return empty,
        };
        StreamMetadata {
            max_age_secs: max_age.filter(|v| *v > 0),
            max_count: max_count.filter(|v| *v > 0),
            truncate_before: tb.filter(|v| *v >= 0),
            cache_control_secs: cc.filter(|v| *v > 0),
            acl,
            raw,
        }
    }
}

/// The metadata JSON written when a soft-deleted stream is written again: the current raw object
/// with `$tb` set to `first_new` (other keys kept, in order), or `{"$tb":first_new}`.
pub fn recreate_json(raw: Option<&[u8]>, first_new: i64) -> Vec<u8> {
    let mut obj = match raw.map(serde_json::from_slice::<Value>) {
        Some(Ok(Value::Object(m))) => m,
        _ => serde_json::Map::new(),
    };
    obj.insert("$tb".into(), Value::from(first_new));
    serde_json::to_vec(&Value::Object(obj)).unwrap_or_default()
}

/// When new metadata is posted for a soft-deleted stream without its own `$tb`, the stream is
/// undeleted with its old events hidden: `$tb` is appended. Returns `None` to keep `data` as is.
pub fn undelete_json(data: &[u8], first_new: i64) -> Option<Vec<u8>> {
    match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(mut m)) if !m.contains_key("$tb") => {
            m.insert("$tb".into(), Value::from(first_new));
            serde_json::to_vec(&Value::Object(m)).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_reserved_keys_and_acl() {
        let m = StreamMetadata::parse(
            br#"{"$maxAge":10,"$maxCount":0,"$tb":3,"$acl":{"$r":"$all","$w":["a","b"]},"x":1}"#,
        );
        assert_eq!(m.max_age_secs, Some(10));
        assert_eq!(m.max_count, None);
        assert_eq!(m.truncate_before, Some(3));
        let acl = m.acl.unwrap();
        assert_eq!(acl.read, Some(vec!["$all".to_string()]));
        assert_eq!(acl.write, Some(vec!["a".to_string(), "b".to_string()]));
    }

    #[test]
    fn wrong_types_empty_everything() {
        let m = StreamMetadata::parse(br#"{"$maxAge":"10","$tb":3}"#);
        assert_eq!(m.truncate_before, None);
        assert!(m.raw.is_some());
        assert_eq!(StreamMetadata::parse(b"not json").max_count, None);
    }

    #[test]
    fn recreate_keeps_other_keys_in_order() {
        let j = recreate_json(Some(br#"{"a":1,"$tb":9223372036854775807,"b":2}"#), 5);
        assert_eq!(j, br#"{"a":1,"$tb":5,"b":2}"#);
        assert_eq!(recreate_json(None, 2), br#"{"$tb":2}"#);
        assert_eq!(undelete_json(br#"{"$maxCount":3}"#, 4).unwrap(), br#"{"$maxCount":3,"$tb":4}"#);
        assert_eq!(undelete_json(br#"{"$tb":1}"#, 4), None);
    }
}
