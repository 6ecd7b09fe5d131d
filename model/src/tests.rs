//! Scenario tests: one group per rule of the model's specification.

use super::*;

const T0: i64 = 1_000_000_000;
const SEC: i64 = 1_000_000;

fn id(n: u8) -> EventId {
    [n; 16]
}

fn ev(n: u8) -> NewEvent {
    NewEvent {
        id: id(n),
        event_type: "thing".into(),
        data: format!("{{\"n\":{n}}}").into_bytes(),
        metadata: b"m".to_vec(),
        is_json: true,
    }
}

fn evs(ns: &[u8]) -> Vec<NewEvent> {
    ns.iter().copied().map(ev).collect()
}

fn link(number: i64, stream: &str, n: u8) -> NewEvent {
    NewEvent {
        id: id(n),
        event_type: "$>".into(),
        data: format!("{number}@{stream}").into_bytes(),
        metadata: vec![],
        is_json: false,
    }
}

fn ok(first: i64, last: i64) -> Result<AppendOk, AppendError> {
    Ok(AppendOk { first_event_number: first, last_event_number: last })
}

fn wrong(current: i64) -> AppendError {
    AppendError::WrongExpectedVersion { current }
}

fn numbers(slice: &StreamSlice) -> Vec<i64> {
    slice.events.iter().map(|e| e.event.event_number).collect()
}

/// A model with stream `s` holding events 0..n (ids 1..=n) written at `T0`.
fn with_stream(n: u8) -> Model {
    let mut m = Model::new();
    let ids: Vec<u8> = (1..=n).collect();
    m.append("s", NO_STREAM, evs(&ids), T0).unwrap();
    m
}

fn forward(m: &Model, stream: &str) -> Vec<i64> {
    numbers(&m.read_forward(stream, 0, 1000, false, T0).unwrap())
}

// ---- Appending ---------------------------------------------------------------------------------

#[test]
fn append_numbers_timestamps_and_positions() {
    let mut m = Model::new();
    assert_eq!(m.append("a", NO_STREAM, evs(&[1, 2]), 10), ok(0, 1));
    assert_eq!(m.append("b", ANY, evs(&[3]), 20), ok(0, 0));
    assert_eq!(m.append("a", 1, evs(&[4]), 30), ok(2, 2));
    let all = m.read_all_forward(None, 100);
    let summary: Vec<(&str, i64, i64, u64)> =
        all.iter().map(|e| (e.stream.as_str(), e.event_number, e.timestamp_us, e.position)).collect();
    assert_eq!(summary, [("a", 0, 10, 0), ("a", 1, 10, 1), ("b", 0, 20, 2), ("a", 2, 30, 3)]);
    assert_eq!(all[0].id, id(1));
    assert_eq!(all[0].event_type, "thing");
    assert_eq!(all[0].metadata, b"m");
    assert_eq!(m.last_event_number("a"), 2);
    assert_eq!(m.last_event_number("nope"), -1);
}

#[test]
fn invalid_stream_names() {
    let mut m = Model::new();
    let long = "x".repeat(2001);
    let max = "x".repeat(2000);
    for name in ["", long.as_str()] {
        assert_eq!(m.append(name, ANY, evs(&[1]), T0), Err(AppendError::InvalidStreamName));
        assert_eq!(m.delete(name, ANY, false, T0), Err(AppendError::InvalidStreamName));
        assert_eq!(m.delete(name, ANY, true, T0), Err(AppendError::InvalidStreamName));
        assert_eq!(m.set_metadata(name, ANY, id(9), b"{}".to_vec(), T0), Err(AppendError::InvalidStreamName));
        assert_eq!(m.read_event(name, 0, false, T0), Err(ReadError::NoStream));
        assert_eq!(m.read_forward(name, 0, 10, false, T0), Err(ReadError::NoStream));
        assert_eq!(m.read_backward(name, -1, 10, false, T0), Err(ReadError::NoStream));
    }
    assert!(m.read_all_forward(None, 10).is_empty());
    assert_eq!(m.append(&max, ANY, evs(&[1]), T0), ok(0, 0));
}

#[test]
fn expected_version_matrix_on_missing_stream() {
    let cases = [
        (NO_STREAM, ok(0, 0)),
        (ANY, ok(0, 0)),
        (STREAM_EXISTS, Err(wrong(-1))),
        (0, Err(wrong(-1))),
        (5, Err(wrong(-1))),
        (-3, Err(wrong(-1))),
        (-5, Err(wrong(-1))),
        (i64::MIN, Err(wrong(-1))),
    ];
    for (expected, result) in cases {
        let mut m = Model::new();
        assert_eq!(m.append("s", expected, evs(&[1]), T0), result, "expected {expected}");
    }
}

#[test]
fn expected_version_matrix_on_existing_stream() {
    // Stream s holds 0,1,2 with ids 1,2,3; the new event (id 9) is unknown.
    let cases = [
        (NO_STREAM, Err(wrong(2))),
        (ANY, ok(3, 3)),
        (STREAM_EXISTS, ok(3, 3)),
        (0, Err(wrong(2))),
        (1, Err(wrong(2))),
        (2, ok(3, 3)),
        (3, Err(wrong(2))),
        (-3, Err(wrong(2))),
        (-7, Err(wrong(2))),
    ];
    for (expected, result) in cases {
        let mut m = with_stream(3);
        assert_eq!(m.append("s", expected, evs(&[9]), T0), result, "expected {expected}");
    }
}

#[test]
fn stream_exists_accepts_a_stream_with_only_metadata() {
    let mut m = Model::new();
    m.set_metadata("s", ANY, id(50), b"{\"$maxCount\":3}".to_vec(), T0).unwrap();
    assert_eq!(m.append("s", STREAM_EXISTS, evs(&[1]), T0), ok(0, 0));
}

#[test]
fn explicit_version_idempotency() {
    let mut m = with_stream(3);
    let before = m.read_all_forward(None, 100);
    // A repeat of the whole first batch, of a middle slice, and of a prefix.
    assert_eq!(m.append("s", NO_STREAM, evs(&[1, 2, 3]), T0), ok(0, 2));
    assert_eq!(m.append("s", 0, evs(&[2, 3]), T0), ok(1, 2));
    assert_eq!(m.append("s", NO_STREAM, evs(&[1]), T0), ok(0, 0));
    // Mismatched ids or running past the end are conflicts.
    assert_eq!(m.append("s", 0, evs(&[3]), T0), Err(wrong(2)));
    assert_eq!(m.append("s", 1, evs(&[3, 4]), T0), Err(wrong(2)));
    assert_eq!(m.read_all_forward(None, 100), before, "nothing written");
}

#[test]
fn any_version_idempotency() {
    let mut m = with_stream(3);
    let before = m.read_all_forward(None, 100);
    assert_eq!(m.append("s", ANY, evs(&[1, 2, 3]), T0), ok(0, 2));
    assert_eq!(m.append("s", ANY, evs(&[2, 3]), T0), ok(1, 2));
    assert_eq!(m.append("s", STREAM_EXISTS, evs(&[3]), T0), ok(2, 2));
    // First id known here but the rest does not line up.
    assert_eq!(m.append("s", ANY, evs(&[2, 9]), T0), Err(wrong(2)));
    assert_eq!(m.append("s", ANY, evs(&[1, 3]), T0), Err(wrong(2)));
    assert_eq!(m.append("s", ANY, evs(&[3, 4]), T0), Err(wrong(2)));
    assert_eq!(m.read_all_forward(None, 100), before, "nothing written");
    // First id unknown: a normal append, even if later ids are known.
    assert_eq!(m.append("s", ANY, evs(&[9, 1]), T0), ok(3, 4));
}

#[test]
fn any_idempotency_is_per_stream_and_latest_write_wins() {
    let mut m = with_stream(1);
    // Id 1 was written to s, not to t: a normal append to t.
    assert_eq!(m.append("t", ANY, evs(&[1]), T0), ok(0, 0));
    // Now the latest write of id 1 is in t, so s no longer recognises it.
    assert_eq!(m.append("s", ANY, evs(&[1]), T0), ok(1, 1));
    // And now it is s:1 again.
    assert_eq!(m.append("s", ANY, evs(&[1]), T0), ok(1, 1));
    assert_eq!(m.last_event_number("s"), 1);
}

#[test]
fn duplicate_ids_within_a_batch() {
    let mut m = Model::new();
    assert_eq!(m.append("s", ANY, evs(&[1, 1]), T0), ok(0, 1));
    // The id memory holds s:1 for id 1, so an ANY repeat does not line up...
    assert_eq!(m.append("s", ANY, evs(&[1, 1]), T0), Err(wrong(1)));
    // ...but an explicit-version repeat compares the raw events.
    assert_eq!(m.append("s", NO_STREAM, evs(&[1, 1]), T0), ok(0, 1));
}

#[test]
fn empty_batches() {
    let mut m = Model::new();
    assert_eq!(m.append("s", ANY, vec![], T0), ok(0, -1));
    assert_eq!(m.append("s", NO_STREAM, vec![], T0), ok(0, -1));
    assert_eq!(m.append("s", STREAM_EXISTS, vec![], T0), Err(wrong(-1)));
    assert_eq!(m.append("s", 0, vec![], T0), Err(wrong(-1)));
    assert_eq!(m.last_event_number("s"), -1);
    assert_eq!(m.read_forward("s", 0, 10, false, T0), Err(ReadError::NoStream));
    let mut m = with_stream(3);
    assert_eq!(m.append("s", ANY, vec![], T0), ok(3, 2));
    assert_eq!(m.append("s", 2, vec![], T0), ok(3, 2));
    assert_eq!(m.append("s", 0, vec![], T0), ok(3, 2), "explicit older version, vacuous repeat");
    assert_eq!(m.append("s", 5, vec![], T0), Err(wrong(2)));
    assert_eq!(m.read_all_forward(None, 100).len(), 3);
}

// ---- Hard delete -------------------------------------------------------------------------------

#[test]
fn hard_delete_writes_a_tombstone_and_blocks_everything() {
    let mut m = with_stream(2);
    m.set_metadata("s", ANY, id(50), b"{}".to_vec(), T0).unwrap();
    assert_eq!(m.delete("s", 1, true, T0 + 5), Ok(()));
    let tombstone = m.read_all_backward(None, 1).remove(0);
    assert_eq!(
        tombstone,
        RecordedEvent {
            stream: "s".into(),
            event_number: TOMBSTONE_EVENT_NUMBER,
            id: [0; 16],
            event_type: "$streamDeleted".into(),
            data: vec![],
            metadata: vec![],
            is_json: true,
            timestamp_us: T0 + 5,
            position: 3,
        }
    );
    assert_eq!(m.last_event_number("s"), TOMBSTONE_EVENT_NUMBER);
    for expected in [ANY, NO_STREAM, STREAM_EXISTS, 1, TOMBSTONE_EVENT_NUMBER] {
        assert_eq!(m.append("s", expected, evs(&[9]), T0), Err(AppendError::StreamDeleted));
        assert_eq!(m.append("$$s", expected, evs(&[9]), T0), Err(AppendError::StreamDeleted));
        assert_eq!(m.delete("s", expected, true, T0), Err(AppendError::StreamDeleted));
        assert_eq!(m.delete("s", expected, false, T0), Err(AppendError::StreamDeleted));
        assert_eq!(
            m.set_metadata("s", expected, id(51), b"{}".to_vec(), T0),
            Err(AppendError::StreamDeleted)
        );
    }
    // Idempotent-looking repeats are refused too.
    assert_eq!(m.append("s", NO_STREAM, evs(&[1, 2]), T0), Err(AppendError::StreamDeleted));
    for stream in ["s", "$$s"] {
        assert_eq!(m.read_event(stream, -1, false, T0), Err(ReadError::StreamDeleted));
        assert_eq!(m.read_forward(stream, 0, 10, true, T0), Err(ReadError::StreamDeleted));
        assert_eq!(m.read_backward(stream, -1, 10, false, T0), Err(ReadError::StreamDeleted));
    }
    assert_eq!(m.read_all_forward(None, 100).len(), 4, "old events and the tombstone stay in $all");
}

#[test]
fn hard_delete_of_missing_stream() {
    let mut m = Model::new();
    assert_eq!(m.delete("s", NO_STREAM, true, T0), Ok(()));
    assert_eq!(m.last_event_number("s"), TOMBSTONE_EVENT_NUMBER);
    assert_eq!(m.read_event("s", 0, false, T0), Err(ReadError::StreamDeleted));
    assert_eq!(m.read_all_forward(None, 10).len(), 1);
}

#[test]
fn delete_expected_version_has_no_idempotency() {
    let cases = [
        (ANY, Ok(())),
        (STREAM_EXISTS, Ok(())),
        (2, Ok(())),
        (NO_STREAM, Err(wrong(2))),
        (1, Err(wrong(2))),
        (3, Err(wrong(2))),
        (-3, Err(wrong(2))),
    ];
    for hard in [false, true] {
        for (expected, result) in cases.clone() {
            let mut m = with_stream(3);
            assert_eq!(m.delete("s", expected, hard, T0), result, "expected {expected}, hard {hard}");
        }
    }
    for hard in [false, true] {
        let mut m = Model::new();
        assert_eq!(m.delete("s", STREAM_EXISTS, hard, T0), Err(wrong(-1)));
        assert_eq!(m.delete("s", 0, hard, T0), Err(wrong(-1)));
        assert_eq!(m.delete("s", ANY, hard, T0), Ok(()));
        let mut m = Model::new();
        assert_eq!(m.delete("s", NO_STREAM, hard, T0), Ok(()));
    }
}

// ---- Soft delete and recreate ------------------------------------------------------------------

#[test]
fn soft_delete_writes_metadata_and_hides_the_stream() {
    let mut m = with_stream(3);
    assert_eq!(m.delete("s", 2, false, T0 + 1), Ok(()));
    let written = m.read_all_backward(None, 1).remove(0);
    assert_eq!(written.stream, "$$s");
    assert_eq!(written.event_number, 0);
    assert_eq!(written.event_type, "$metadata");
    assert_eq!(written.data, b"{\"$tb\":9223372036854775807}");
    assert!(written.is_json);
    assert_eq!(
        written.id,
        [0, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB]
    );
    assert_eq!(written.timestamp_us, T0 + 1);
    assert_eq!(m.stream_metadata("s").truncate_before, Some(SOFT_DELETE_TB));
    assert_eq!(m.last_event_number("s"), 2);
    assert_eq!(m.read_event("s", 0, false, T0), Err(ReadError::NoStream));
    assert_eq!(m.read_forward("s", 0, 10, false, T0), Err(ReadError::NoStream));
    assert_eq!(m.read_backward("s", -1, 10, false, T0), Err(ReadError::NoStream));
    assert_eq!(forward(&m, "$$s"), [0], "the metastream stays readable");
    // Soft delete again: the id's first byte follows the metadata event number.
    assert_eq!(m.delete("s", ANY, false, T0), Ok(()));
    assert_eq!(m.read_all_backward(None, 1)[0].id[0], 1);
    // STREAM_EXISTS refuses a soft-deleted stream.
    assert_eq!(m.append("s", STREAM_EXISTS, evs(&[9]), T0), Err(AppendError::StreamDeleted));
    // A soft-deleted stream can still be hard-deleted.
    assert_eq!(m.delete("s", 2, true, T0), Ok(()));
}

#[test]
fn recreate_after_soft_delete_with_no_stream() {
    let mut m = with_stream(3);
    m.delete("s", ANY, false, T0).unwrap();
    assert_eq!(m.append("s", NO_STREAM, evs(&[7, 8]), T0 + 2), ok(3, 4));
    let tail: Vec<(String, i64, Vec<u8>)> =
        m.read_all_backward(None, 3).into_iter().rev().map(|e| (e.stream, e.event_number, e.data)).collect();
    assert_eq!(
        tail,
        [
            ("$$s".to_owned(), 1, b"{\"$tb\":3}".to_vec()),
            ("s".to_owned(), 3, ev(7).data),
            ("s".to_owned(), 4, ev(8).data)
        ]
    );
    let metadata_event = m.read_event("$$s", -1, false, T0).unwrap().unwrap().event;
    assert_eq!(metadata_event.id[0], 1);
    assert_eq!(metadata_event.event_type, "$metadata");
    assert_eq!(m.stream_metadata("s").truncate_before, Some(3));
    assert_eq!(forward(&m, "s"), [3, 4]);
    // The stream is live again: no second recreate.
    assert_eq!(m.append("s", 4, evs(&[9]), T0), ok(5, 5));
    assert_eq!(m.read_all_forward(None, 100).len(), 8);
}

#[test]
fn recreate_after_soft_delete_with_any_or_exact_version() {
    for expected in [ANY, 2] {
        let mut m = with_stream(3);
        m.delete("s", ANY, false, T0).unwrap();
        assert_eq!(m.append("s", expected, evs(&[7]), T0), ok(3, 3));
        assert_eq!(forward(&m, "s"), [3]);
    }
    // A wrong explicit version is still a conflict, and writes nothing.
    let mut m = with_stream(3);
    m.delete("s", ANY, false, T0).unwrap();
    assert_eq!(m.append("s", 0, evs(&[7]), T0), Err(wrong(2)));
    assert_eq!(m.append("s", ANY, vec![], T0), ok(3, 2), "empty batch does not recreate");
    assert_eq!(m.read_forward("s", 0, 10, false, T0), Err(ReadError::NoStream));
    // An idempotent repeat does not recreate either.
    assert_eq!(m.append("s", ANY, evs(&[1]), T0), ok(0, 0));
    assert_eq!(m.read_forward("s", 0, 10, false, T0), Err(ReadError::NoStream));
}

#[test]
fn recreate_of_never_written_soft_deleted_stream() {
    let mut m = Model::new();
    assert_eq!(m.delete("s", ANY, false, T0), Ok(()));
    assert_eq!(m.read_forward("s", 0, 10, false, T0), Err(ReadError::NoStream));
    assert_eq!(m.append("s", NO_STREAM, evs(&[1]), T0), ok(0, 0));
    assert_eq!(m.read_event("$$s", -1, false, T0).unwrap().unwrap().event.data, b"{\"$tb\":0}");
    assert_eq!(forward(&m, "s"), [0]);
}

#[test]
fn recreate_keeps_other_metadata_members() {
    let mut m = with_stream(3);
    let json = b"{ \"$maxCount\" : 10, \"$tb\": 9223372036854775807, \"x\": {\"y\": [1, \"}\"]} }".to_vec();
    m.set_metadata("s", ANY, id(50), json, T0).unwrap();
    assert_eq!(m.append("s", ANY, evs(&[7]), T0), ok(3, 3));
    let metadata = m.stream_metadata("s");
    assert_eq!(metadata.raw.as_deref(), Some(&b"{\"$maxCount\":10,\"$tb\":3,\"x\":{\"y\": [1, \"}\"]}}"[..]));
    assert_eq!((metadata.max_count, metadata.truncate_before), (Some(10), Some(3)));
}

#[test]
fn recreate_replaces_non_object_metadata() {
    assert_eq!(with_tb(b"[1]", 4), b"{\"$tb\":4}");
    assert_eq!(with_tb(b"not json", 4), b"{\"$tb\":4}");
    assert_eq!(with_tb(b"{}", 4), b"{\"$tb\":4}");
    assert_eq!(with_tb(b"{\"a\":1}", 4), b"{\"a\":1,\"$tb\":4}");
}

#[test]
fn set_metadata_on_soft_deleted_stream_adds_tb() {
    let mut m = with_stream(3);
    m.delete("s", ANY, false, T0).unwrap();
    assert_eq!(m.set_metadata("s", 0, id(50), b"{\"$maxCount\":5}".to_vec(), T0), ok(1, 1));
    assert_eq!(m.stream_metadata("s").raw.as_deref(), Some(&b"{\"$maxCount\":5,\"$tb\":3}"[..]));
    assert_eq!(m.read_forward("s", 0, 10, false, T0).unwrap().events, vec![], "old events stay hidden");
    assert_eq!(m.append("s", 2, evs(&[7]), T0), ok(3, 3), "no recreate metadata needed");
    assert_eq!(forward(&m, "s"), [3]);
    assert_eq!(m.last_event_number("$$s"), 1);
}

#[test]
fn set_metadata_on_soft_deleted_stream_written_as_given() {
    // A $tb of its own is kept.
    let mut m = with_stream(3);
    m.delete("s", ANY, false, T0).unwrap();
    m.set_metadata("s", ANY, id(50), b"{\"$tb\":1}".to_vec(), T0).unwrap();
    assert_eq!(m.stream_metadata("s").raw.as_deref(), Some(&b"{\"$tb\":1}"[..]));
    assert_eq!(forward(&m, "s"), [1, 2]);
    // Not an object: as given.
    let mut m = with_stream(3);
    m.delete("s", ANY, false, T0).unwrap();
    m.set_metadata("s", ANY, id(50), b"[]".to_vec(), T0).unwrap();
    assert_eq!(m.stream_metadata("s").raw.as_deref(), Some(&b"[]"[..]));
    assert_eq!(forward(&m, "s"), [0, 1, 2]);
    // No events in s: as given.
    let mut m = Model::new();
    m.delete("s", ANY, false, T0).unwrap();
    m.set_metadata("s", ANY, id(50), b"{}".to_vec(), T0).unwrap();
    assert_eq!(m.stream_metadata("s").raw.as_deref(), Some(&b"{}"[..]));
}

#[test]
fn set_metadata_versions_and_idempotency() {
    let mut m = Model::new();
    let json = b"{\"$maxCount\":2}".to_vec();
    assert_eq!(m.set_metadata("s", STREAM_EXISTS, id(50), json.clone(), T0), Err(wrong(-1)));
    assert_eq!(m.set_metadata("s", 0, id(50), json.clone(), T0), Err(wrong(-1)));
    assert_eq!(m.set_metadata("s", NO_STREAM, id(50), json.clone(), T0), ok(0, 0));
    assert_eq!(m.set_metadata("s", NO_STREAM, id(50), json.clone(), T0), ok(0, 0), "explicit repeat");
    assert_eq!(m.set_metadata("s", ANY, id(50), json.clone(), T0), ok(0, 0), "ANY repeat");
    assert_eq!(m.set_metadata("s", NO_STREAM, id(51), json.clone(), T0), Err(wrong(0)));
    assert_eq!(m.set_metadata("s", 0, id(51), json.clone(), T0), ok(1, 1));
    assert_eq!(m.set_metadata("s", STREAM_EXISTS, id(52), json, T0), ok(2, 2));
    let written = m.read_event("$$s", 2, false, T0).unwrap().unwrap().event;
    assert_eq!((written.id, written.event_type.as_str(), written.is_json), (id(52), "$metadata", true));
    assert_eq!(m.last_event_number("s"), -1);
}

// ---- Metadata parsing --------------------------------------------------------------------------

#[test]
fn metadata_fields() {
    let md =
        parse_metadata(b"{\"$maxAge\":60,\"$maxCount\":3,\"$tb\":0,\"$cacheControl\":5,\"other\":\"x\"}");
    assert_eq!(
        (md.max_age_secs, md.max_count, md.truncate_before, md.cache_control_secs),
        (Some(60), Some(3), Some(0), Some(5))
    );
    assert!(md.raw.is_some());
    let md = parse_metadata(b"{\"$maxAge\":0,\"$maxCount\":-1,\"$tb\":-1,\"$cacheControl\":0}");
    assert_eq!(
        (md.max_age_secs, md.max_count, md.truncate_before, md.cache_control_secs),
        (None, None, None, None)
    );
    // Escaped keys, nesting, whitespace.
    let md = parse_metadata(b" { \"\\u0024maxCount\" : 4 , \"$acl\": {\"$r\": [\"a\", null, true]} } ");
    assert_eq!(md.max_count, Some(4));
    // Keys below the top level are not read.
    assert_eq!(parse_metadata(b"{\"x\":{\"$maxCount\":4}}").max_count, None);
    // Last duplicate wins.
    assert_eq!(parse_metadata(b"{\"$maxCount\":4,\"$maxCount\":6}").max_count, Some(6));
}

#[test]
fn metadata_with_non_integer_field_counts_as_empty() {
    for json in [
        &b"{\"$maxCount\":3,\"$maxAge\":\"60\"}"[..],
        b"{\"$maxCount\":3,\"$tb\":1.0}",
        b"{\"$maxCount\":3,\"$tb\":1e2}",
        b"{\"$maxCount\":3,\"$cacheControl\":null}",
        b"{\"$maxCount\":3,\"$tb\":9223372036854775808}",
        b"{\"$maxCount\":3,\"$maxAge\":[1]}",
        b"{\"$maxCount\":3,",
        b"[{\"$maxCount\":3}]",
        b"",
    ] {
        let md = parse_metadata(json);
        let expected = StreamMetadata { raw: Some(json.to_vec()), ..StreamMetadata::default() };
        assert_eq!(md, expected, "{}", String::from_utf8_lossy(json));
    }
}

#[test]
fn stream_metadata_uses_latest_json_event() {
    let mut m = Model::new();
    assert_eq!(m.stream_metadata("s"), StreamMetadata::default());
    m.set_metadata("s", ANY, id(50), b"{\"$maxCount\":2}".to_vec(), T0).unwrap();
    assert_eq!(m.stream_metadata("s").max_count, Some(2));
    // A later non-JSON or empty metadata event resets to default (raw kept).
    let raw = NewEvent {
        id: id(51),
        event_type: "$metadata".into(),
        data: b"{\"$maxCount\":2}".to_vec(),
        metadata: vec![],
        is_json: false,
    };
    m.append("$$s", ANY, vec![raw], T0).unwrap();
    assert_eq!(
        m.stream_metadata("s"),
        StreamMetadata { raw: Some(b"{\"$maxCount\":2}".to_vec()), ..StreamMetadata::default() }
    );
    m.set_metadata("s", ANY, id(52), vec![], T0).unwrap();
    assert_eq!(m.stream_metadata("s"), StreamMetadata { raw: Some(vec![]), ..StreamMetadata::default() });
}

// ---- Visibility --------------------------------------------------------------------------------

#[test]
fn no_events_means_no_stream_even_with_metadata() {
    let mut m = Model::new();
    assert_eq!(m.read_forward("s", 0, 10, false, T0), Err(ReadError::NoStream));
    m.set_metadata("s", ANY, id(50), b"{\"$maxCount\":2}".to_vec(), T0).unwrap();
    assert_eq!(m.read_event("s", -1, false, T0), Err(ReadError::NoStream));
    assert_eq!(m.read_backward("s", -1, 10, false, T0), Err(ReadError::NoStream));
}

#[test]
fn max_count_visibility() {
    let mut m = with_stream(5);
    m.set_metadata("s", ANY, id(50), b"{\"$maxCount\":2}".to_vec(), T0).unwrap();
    assert_eq!(forward(&m, "s"), [3, 4]);
    assert_eq!(m.read_event("s", 2, false, T0), Ok(None));
    assert_eq!(m.read_event("s", 3, false, T0).unwrap().unwrap().event.event_number, 3);
    assert_eq!(m.read_event("s", -1, false, T0).unwrap().unwrap().event.event_number, 4);
}

#[test]
fn truncate_before_visibility() {
    let mut m = with_stream(5);
    m.set_metadata("s", ANY, id(50), b"{\"$tb\":3}".to_vec(), T0).unwrap();
    assert_eq!(forward(&m, "s"), [3, 4]);
    m.set_metadata("s", ANY, id(51), b"{\"$tb\":10}".to_vec(), T0).unwrap();
    assert_eq!(forward(&m, "s"), Vec::<i64>::new());
    assert_eq!(m.read_event("s", -1, false, T0), Ok(None));
    // Metadata is not retroactive history: the latest event decides.
    m.set_metadata("s", ANY, id(52), b"{}".to_vec(), T0).unwrap();
    assert_eq!(forward(&m, "s"), [0, 1, 2, 3, 4]);
}

#[test]
fn max_age_visibility() {
    let mut m = Model::new();
    m.append("s", ANY, evs(&[1]), T0).unwrap();
    m.append("s", ANY, evs(&[2]), T0 + 10 * SEC).unwrap();
    m.set_metadata("s", ANY, id(50), b"{\"$maxAge\":5}".to_vec(), T0).unwrap();
    let at = |m: &Model, now| numbers(&m.read_forward("s", 0, 10, false, now).unwrap());
    assert_eq!(at(&m, T0 + 5 * SEC), [0, 1], "age exactly maxAge is still visible");
    assert_eq!(at(&m, T0 + 5 * SEC + 1), [1]);
    assert_eq!(at(&m, T0 + 15 * SEC), [1]);
    assert_eq!(at(&m, T0 + 15 * SEC + 1), Vec::<i64>::new());
    // Huge maxAge does not overflow.
    m.set_metadata("s", ANY, id(51), format!("{{\"$maxAge\":{}}}", i64::MAX).into_bytes(), T0).unwrap();
    assert_eq!(at(&m, T0), [0, 1]);
}

#[test]
fn visibility_rules_combine() {
    let mut m = with_stream(6);
    m.set_metadata("s", ANY, id(50), b"{\"$maxCount\":4,\"$tb\":1}".to_vec(), T0).unwrap();
    assert_eq!(forward(&m, "s"), [2, 3, 4, 5]);
    m.set_metadata("s", ANY, id(51), b"{\"$maxCount\":4,\"$tb\":3}".to_vec(), T0).unwrap();
    assert_eq!(forward(&m, "s"), [3, 4, 5]);
    // An invalid field voids the whole metadata.
    m.set_metadata("s", ANY, id(52), b"{\"$maxCount\":4,\"$tb\":\"3\"}".to_vec(), T0).unwrap();
    assert_eq!(forward(&m, "s"), [0, 1, 2, 3, 4, 5]);
}

#[test]
fn metastreams_show_only_their_latest_event() {
    let mut m = Model::new();
    assert_eq!(m.read_forward("$$s", 0, 10, false, T0), Err(ReadError::NoStream));
    for n in 0..3 {
        m.set_metadata("s", ANY, id(50 + n), format!("{{\"v\":{n}}}").into_bytes(), T0).unwrap();
    }
    assert_eq!(m.last_event_number("$$s"), 2);
    assert_eq!(forward(&m, "$$s"), [2]);
    assert_eq!(m.read_event("$$s", 1, false, T0), Ok(None));
    assert_eq!(m.read_event("$$s", -1, false, T0).unwrap().unwrap().event.data, b"{\"v\":2}");
    let back = m.read_backward("$$s", -1, 10, false, T0).unwrap();
    assert_eq!((numbers(&back), back.next_event_number, back.is_end_of_stream), (vec![2], 1, true));
    // A metastream's own metadata is ignored.
    m.set_metadata("$$s", ANY, id(60), b"{\"$tb\":9223372036854775807}".to_vec(), T0).unwrap();
    assert_eq!(forward(&m, "$$s"), [2]);
    assert_eq!(m.append("$$s", STREAM_EXISTS, evs(&[9]), T0), ok(3, 3));
}

// ---- Paging ------------------------------------------------------------------------------------

#[test]
fn forward_paging_fields() {
    let m = with_stream(5);
    let page = |from, count| {
        let slice = m.read_forward("s", from, count, false, T0).unwrap();
        (numbers(&slice), slice.next_event_number, slice.last_event_number, slice.is_end_of_stream)
    };
    assert_eq!(page(0, 2), (vec![0, 1], 2, 4, false));
    assert_eq!(page(2, 2), (vec![2, 3], 4, 4, false));
    assert_eq!(page(4, 2), (vec![4], 5, 4, true));
    assert_eq!(page(3, 2), (vec![3, 4], 5, 4, true));
    assert_eq!(page(5, 2), (vec![], 5, 4, true));
    assert_eq!(page(9, 2), (vec![], 9, 4, true));
    assert_eq!(page(1, 0), (vec![], 1, 4, false));
}

#[test]
fn forward_paging_with_hidden_events() {
    let mut m = with_stream(5);
    m.set_metadata("s", ANY, id(50), b"{\"$tb\":3}".to_vec(), T0).unwrap();
    let slice = m.read_forward("s", 0, 1, false, T0).unwrap();
    assert_eq!((numbers(&slice), slice.next_event_number, slice.is_end_of_stream), (vec![3], 4, false));
    m.set_metadata("s", ANY, id(51), b"{\"$tb\":8}".to_vec(), T0).unwrap();
    let slice = m.read_forward("s", 0, 10, false, T0).unwrap();
    assert_eq!((numbers(&slice), slice.next_event_number, slice.is_end_of_stream), (vec![], 0, false));
}

#[test]
fn backward_paging_fields() {
    let m = with_stream(5);
    let page = |from, count| {
        let slice = m.read_backward("s", from, count, false, T0).unwrap();
        (numbers(&slice), slice.next_event_number, slice.last_event_number, slice.is_end_of_stream)
    };
    assert_eq!(page(-1, 2), (vec![4, 3], 2, 4, false));
    assert_eq!(page(2, 2), (vec![2, 1], 0, 4, false));
    assert_eq!(page(0, 2), (vec![0], -1, 4, true));
    assert_eq!(page(1, 2), (vec![1, 0], -1, 4, true));
    assert_eq!(page(9, 2), (vec![4, 3], 2, 4, false));
    assert_eq!(page(-1, 0), (vec![], -1, 4, true));
    assert_eq!(page(-5, 3), (vec![], -1, 4, true));
}

#[test]
fn backward_paging_stops_at_first_visible() {
    let mut m = with_stream(5);
    m.set_metadata("s", ANY, id(50), b"{\"$maxCount\":3}".to_vec(), T0).unwrap();
    let slice = m.read_backward("s", -1, 2, false, T0).unwrap();
    assert_eq!((numbers(&slice), slice.next_event_number, slice.is_end_of_stream), (vec![4, 3], 2, false));
    let slice = m.read_backward("s", 2, 2, false, T0).unwrap();
    assert_eq!((numbers(&slice), slice.next_event_number, slice.is_end_of_stream), (vec![2], 1, true));
    let slice = m.read_backward("s", 1, 2, false, T0).unwrap();
    assert_eq!((numbers(&slice), slice.next_event_number, slice.is_end_of_stream), (vec![], -1, true));
}

// ---- Links -------------------------------------------------------------------------------------

#[test]
fn links_resolve_to_their_target() {
    let mut m = with_stream(3);
    m.append("l", ANY, vec![link(1, "s", 20)], T0).unwrap();
    let resolved = m.read_event("l", 0, true, T0).unwrap().unwrap();
    assert_eq!(resolved.event.stream, "s");
    assert_eq!(resolved.event.event_number, 1);
    assert_eq!(resolved.event.id, id(2));
    let link_event = resolved.link.unwrap();
    assert_eq!((link_event.stream.as_str(), link_event.event_type.as_str()), ("l", "$>"));
    // Without resolution the link comes back as is.
    let raw = m.read_event("l", 0, false, T0).unwrap().unwrap();
    assert_eq!((raw.event.stream.as_str(), raw.link), ("l", None));
    // Same through paged reads.
    let forward = m.read_forward("l", 0, 10, true, T0).unwrap();
    assert_eq!(forward.events[0].event.stream, "s");
    let backward = m.read_backward("l", -1, 10, true, T0).unwrap();
    assert_eq!(backward.events[0].event.stream, "s");
}

#[test]
fn links_that_cannot_resolve_come_back_unresolved() {
    let mut m = with_stream(3);
    m.append("gone", ANY, evs(&[30]), T0).unwrap();
    m.delete("gone", ANY, true, T0).unwrap();
    m.append("soft", ANY, evs(&[31]), T0).unwrap();
    m.delete("soft", ANY, false, T0).unwrap();
    m.append("capped", ANY, evs(&[32, 33]), T0).unwrap();
    m.set_metadata("capped", ANY, id(34), b"{\"$maxCount\":1}".to_vec(), T0).unwrap();
    let bad_data = |data: &[u8], n| NewEvent {
        id: id(n),
        event_type: "$>".into(),
        data: data.to_vec(),
        metadata: vec![],
        is_json: false,
    };
    let links = vec![
        link(7, "s", 40),        // missing event
        link(0, "missing", 41),  // missing stream
        link(0, "gone", 42),     // hard-deleted
        link(0, "soft", 43),     // soft-deleted
        link(0, "capped", 44),   // invisible (maxCount)
        link(-1, "s", 45),       // negative number
        bad_data(b"1s", 46),     // no @
        bad_data(b"x@s", 47),    // not a number
        bad_data(b"1@", 48),     // empty stream name
        bad_data(b"\xff@s", 49), // not UTF-8
        bad_data(b" 1@s", 50),   // whitespace is not allowed
    ];
    let count = links.len();
    m.append("l", ANY, links, T0).unwrap();
    let slice = m.read_forward("l", 0, 100, true, T0).unwrap();
    assert_eq!(slice.events.len(), count);
    for resolved in slice.events {
        assert_eq!((resolved.event.stream.as_str(), resolved.link), ("l", None));
    }
    // Sanity: the visible event of "capped" and a signed number do resolve.
    m.append("l2", ANY, vec![link(1, "capped", 60), bad_data(b"+1@s", 61)], T0).unwrap();
    let slice = m.read_forward("l2", 0, 10, true, T0).unwrap();
    assert!(slice.events.iter().all(|e| e.link.is_some()));
}

#[test]
fn links_respect_target_max_age_at_read_time() {
    let mut m = with_stream(1);
    m.set_metadata("s", ANY, id(50), b"{\"$maxAge\":1}".to_vec(), T0).unwrap();
    m.append("l", ANY, vec![link(0, "s", 20)], T0 + 10 * SEC).unwrap();
    assert!(m.read_event("l", 0, true, T0).unwrap().unwrap().link.is_some());
    let late = m.read_event("l", 0, true, T0 + 2 * SEC).unwrap().unwrap();
    assert_eq!((late.event.stream.as_str(), late.link), ("l", None));
}

#[test]
fn links_are_not_followed_recursively() {
    let mut m = with_stream(1);
    m.append("l1", ANY, vec![link(0, "s", 20)], T0).unwrap();
    m.append("l2", ANY, vec![link(0, "l1", 21)], T0).unwrap();
    let resolved = m.read_event("l2", 0, true, T0).unwrap().unwrap();
    assert_eq!((resolved.event.stream.as_str(), resolved.event.event_type.as_str()), ("l1", "$>"));
    assert_eq!(resolved.link.unwrap().stream, "l2");
}

#[test]
fn links_into_metastreams_follow_metastream_visibility() {
    let mut m = Model::new();
    m.set_metadata("s", ANY, id(50), b"{}".to_vec(), T0).unwrap();
    m.set_metadata("s", ANY, id(51), b"{\"a\":1}".to_vec(), T0).unwrap();
    m.append("l", ANY, vec![link(0, "$$s", 20), link(1, "$$s", 21)], T0).unwrap();
    let slice = m.read_forward("l", 0, 10, true, T0).unwrap();
    assert_eq!(slice.events[0].link, None);
    assert_eq!(slice.events[1].event.stream, "$$s");
}

// ---- $all --------------------------------------------------------------------------------------

#[test]
fn all_reads_return_every_record_in_log_order() {
    let mut m = with_stream(2);
    m.set_metadata("s", ANY, id(50), b"{\"$maxCount\":1}".to_vec(), T0).unwrap();
    m.append("t", ANY, evs(&[3]), T0).unwrap();
    m.delete("t", ANY, false, T0).unwrap();
    m.append("u", ANY, vec![link(0, "s", 4)], T0).unwrap();
    m.delete("u", ANY, true, T0).unwrap();
    let all = m.read_all_forward(None, 100);
    let streams: Vec<&str> = all.iter().map(|e| e.stream.as_str()).collect();
    assert_eq!(streams, ["s", "s", "$$s", "t", "$$t", "u", "u"]);
    assert!(all.iter().enumerate().all(|(i, e)| e.position == i as u64));
    assert_eq!(all[5].event_type, "$>", "links are not resolved");
    assert_eq!(all[6].event_number, TOMBSTONE_EVENT_NUMBER);

    let positions = |records: Vec<RecordedEvent>| records.iter().map(|e| e.position).collect::<Vec<_>>();
    assert_eq!(positions(m.read_all_forward(Some(2), 3)), [2, 3, 4]);
    assert_eq!(positions(m.read_all_forward(Some(6), 3)), [6]);
    assert_eq!(positions(m.read_all_forward(Some(7), 3)), Vec::<u64>::new());
    assert_eq!(positions(m.read_all_forward(Some(u64::MAX), 3)), Vec::<u64>::new());
    assert_eq!(positions(m.read_all_forward(None, 0)), Vec::<u64>::new());
    assert_eq!(positions(m.read_all_backward(None, 3)), [6, 5, 4]);
    assert_eq!(positions(m.read_all_backward(Some(2), 5)), [1, 0]);
    assert_eq!(positions(m.read_all_backward(Some(0), 5)), Vec::<u64>::new());
    assert_eq!(positions(m.read_all_backward(Some(u64::MAX), 2)), [6, 5]);
}
