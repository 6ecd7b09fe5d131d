use super::*;

fn ev<'a>(stream: &'a str, n: i64, ty: &'a str, data: &'a str, pos: u64) -> Event<'a> {
    Event {
        stream_id: stream,
        sequence_number: n,
        event_type: ty,
        data: data.as_bytes(),
        metadata: b"",
        link_metadata: b"",
        is_json: true,
        timestamp_ms: 1_700_000_000_000.0,
        event_id: "00000000-0000-0000-0000-000000000001",
        position: pos,
        deleted: None,
    }
}

fn none(_: &str) -> Option<String> {
    None
}

#[test]
fn counts_by_event_type() {
    let q = r#"
        fromAll().when({
            $init: function () { return { count: 0, types: {} }; },
            $any: function (s, e) { s.count += 1; s.types[e.eventType] = (s.types[e.eventType] || 0) + 1; }
        })"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    assert_eq!(e.definition().source, Source::All);
    assert_eq!(e.definition().events, None);
    for (i, t) in ["A", "B", "A"].iter().enumerate() {
        let o = e.process(&ev("s-1", i as i64, t, "{}", i as u64 * 10), &mut none).unwrap();
        assert!(o.handled);
    }
    assert_eq!(e.state("").unwrap().unwrap(), r#"{"count":3,"types":{"A":2,"B":1}}"#);
}

#[test]
fn syntax_errors_have_their_line() {
    let q = "fromAll()\n.when({\n  $any: function (s, e) { return s +; }\n})";
    let Err(JsError::Script { message, line }) = Engine::compile(q, Limits::default(), false) else {
        panic!("a syntax error compiles")
    };
    assert!(message.starts_with("SyntaxError"), "{message}");
    assert_eq!(line, Some(3));
    let Err(e) = Engine::compile("options({ nope: 1 }); fromAll();", Limits::default(), false) else {
        panic!()
    };
    assert!(e.to_string().contains("Unrecognized option: nope"), "{e}");
    assert_eq!(e.line(), Some(1));
    let Err(e) = Engine::compile("options({ biState: 'yes' }); fromAll();", Limits::default(), false) else {
        panic!()
    };
    assert!(e.to_string().contains("biState must be a boolean"), "{e}");
    let Err(e) = Engine::compile("var x = 1;", Limits::default(), false) else { panic!() };
    assert!(e.to_string().contains("no source"), "{e}");
    let Err(e) = Engine::compile("fromAll(); fromStream('a');", Limits::default(), false) else { panic!() };
    assert!(e.to_string().contains("Only one source"), "{e}");
    let Err(e) = Engine::compile("fromAll().when({$deleted: function(s){}})", Limits::default(), false)
    else {
        panic!()
    };
    assert!(e.to_string().contains("foreachStream"), "{e}");
    let Err(e) = Engine::compile("fromAll().when({A: 3})", Limits::default(), false) else { panic!() };
    assert!(e.to_string().contains("not a function"), "{e}");
    let Err(e) = Engine::compile(
        "options({reorderEvents: true, processingLag: 100}); fromAll()",
        Limits::default(),
        false,
    ) else {
        panic!()
    };
    assert!(e.to_string().contains("fromAll"), "{e}");
}

#[test]
fn partitions_ask_for_stored_state_once() {
    let q = r#"
        fromCategory('order').foreachStream().when({
            $init: function () { return { total: 0 }; },
            Paid: function (s, e) { s.total += e.body.amount; }
        })"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    let d = e.definition().clone();
    assert_eq!(d.source, Source::Categories(vec!["order".into()]));
    assert!(d.by_stream && d.partitioned());
    assert_eq!(d.events, Some(vec!["Paid".to_string()]));
    let mut asked = Vec::new();
    let mut load = |p: &str| {
        asked.push(p.to_owned());
        (p == "order-2").then(|| r#"{"total":100}"#.to_owned())
    };
    let o = e.process(&ev("order-1", 0, "Paid", r#"{"amount":5}"#, 10), &mut load).unwrap();
    assert_eq!(o.new_partitions, ["order-1"]);
    e.process(&ev("order-1", 1, "Paid", r#"{"amount":7}"#, 20), &mut load).unwrap();
    let o = e.process(&ev("order-2", 0, "Paid", r#"{"amount":1}"#, 30), &mut load).unwrap();
    assert!(o.new_partitions.is_empty(), "a stored partition is not new");
    let o = e.process(&ev("order-2", 1, "Placed", r#"{}"#, 40), &mut load).unwrap();
    assert!(!o.handled);
    assert_eq!(asked, ["order-1", "order-2"]);
    assert_eq!(e.state("order-1").unwrap().unwrap(), r#"{"total":12}"#);
    assert_eq!(e.state("order-2").unwrap().unwrap(), r#"{"total":101}"#);
    assert_eq!(e.state("order-3").unwrap(), None);
    let snap = e.checkpoint().unwrap();
    assert_eq!(snap.partitions.len(), 2);
    assert!(e.checkpoint().unwrap().partitions.is_empty(), "nothing changed since");
    assert_eq!(e.partitions().unwrap(), 3);
}

#[test]
fn emits_and_links() {
    let q = r#"
        fromStreams(['a', 'b']).when({
            Ping: function (s, e) {
                emit('out-' + e.streamId, 'Pong', { n: e.sequenceNumber }, { by: 'test' });
                linkTo('links', e);
                linkStreamTo('streams', e.streamId);
                copyTo('copies', e, { extra: 1 });
                log('seen', e.sequenceNumber);
            }
        })"#;
    let mut e = Engine::compile(q, Limits::default(), true).unwrap();
    let mut x = ev("a", 4, "Ping", r#"{"v":1}"#, 10);
    x.metadata = br#"{"keep":true,"$drop":1,"$correlationId":"c"}"#;
    let o = e.process(&x, &mut none).unwrap();
    let got: Vec<(&str, &str, &str, Option<&str>, bool)> = o
        .emits
        .iter()
        .map(|m| {
            (m.stream.as_str(), m.event_type.as_str(), m.data.as_str(), m.metadata.as_deref(), m.is_json)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("out-a", "Pong", r#"{"n":4}"#, Some(r#"{"by":"test"}"#), true),
            ("links", "$>", "4@a", None, false),
            ("streams", "$@", "a", None, false),
            ("copies", "Ping", r#"{"v":1}"#, Some(r#"{"keep":true,"$correlationId":"c","extra":1}"#), true),
        ]
    );
    assert_eq!(o.logs, ["seen 4"]);
    // Emitting without emitEnabled faults.
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    let err = e.process(&ev("a", 0, "Ping", "{}", 1), &mut none).unwrap_err();
    assert!(err.to_string().contains("'emit' is not allowed"), "{err}");
    assert_eq!(err.line(), Some(4));
    assert!(e.is_spent());
}

#[test]
fn a_transform_that_changes_its_argument_changes_the_result_not_the_state() {
    // An independent client's test: the transform sets a field of the state it is given.
    for q in [
        r#"fromAll().when({ $init: function () { return { data: 1 }; }, Hit: function (s, e) { s.n = (s.n || 0) + 1; return s; } })
            .transformBy(function (state) { state.data = 321; return state; })"#,
        r#"fromAll().partitionBy(function (e) { return "p"; }).when({ $init: function () { return { data: 1 }; }, Hit: function (s, e) { s.n = (s.n || 0) + 1; return s; } })
            .transformBy(function (state) { state.data = 321; return state; })"#,
    ] {
        let mut e = Engine::compile(q, Limits::default(), false).unwrap();
        let partition = if e.definition().by_custom_partitions { "p" } else { "" };
        let mut results = Vec::new();
        for i in 0..2 {
            let o = e.process(&ev("s", i, "Hit", "{}", i as u64), &mut none).unwrap();
            results.extend(o.results);
        }
        assert_eq!(e.state(partition).unwrap().unwrap(), r#"{"data":1,"n":2}"#, "{q}");
        assert_eq!(e.result(partition).unwrap().unwrap(), r#"{"data":321,"n":2}"#, "{q}");
        assert_eq!(results.last().unwrap().1.as_deref(), Some(r#"{"data":321,"n":2}"#), "{q}");
        // What a checkpoint keeps is the state.
        let snap = e.checkpoint().unwrap();
        let kept = if partition.is_empty() { snap.root.clone() } else { snap.partitions[0].1.clone() };
        assert_eq!(kept, r#"{"data":1,"n":2}"#, "{q}");
    }
}

#[test]
fn bi_state_and_results() {
    let q = r#"
        options({ biState: true });
        fromAll().partitionBy(function (e) { return e.body.user; }).when({
            $init: function () { return { n: 0 }; },
            $initShared: function () { return { total: 0 }; },
            Hit: function (s, e) { s[0].n += 1; s[1].total += 1; return s; }
        }).transformBy(function (s) { return { hits: s.n }; }).filterBy(function (s) { return s.hits < 3; })"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    let d = e.definition().clone();
    assert!(d.bi_state && d.produces_results && d.by_custom_partitions && d.defines_state_transform);
    let mut results = Vec::new();
    for i in 0..4 {
        let o = e.process(&ev("s", i, "Hit", r#"{"user":"u1"}"#, i as u64), &mut none).unwrap();
        results.extend(o.results);
    }
    assert_eq!(
        results,
        [
            ("u1".to_string(), Some(r#"{"hits":1}"#.to_string())),
            ("u1".to_string(), Some(r#"{"hits":2}"#.to_string())),
            ("u1".to_string(), None),
        ]
    );
    assert_eq!(e.state("").unwrap().unwrap(), r#"[{"n":0},{"total":4}]"#);
    assert_eq!(e.result("u1").unwrap(), None, "filtered out");
    // The root (with the shared state) restores.
    let snap = e.checkpoint().unwrap();
    let mut again = Engine::compile(q, Limits::default(), false).unwrap();
    again.restore(Some(&snap.root)).unwrap();
    assert_eq!(again.state("").unwrap().unwrap(), r#"[{"n":0},{"total":4}]"#);
}

#[test]
fn no_handlers_keeps_the_body_and_deleted_notifications() {
    let mut e = Engine::compile("fromStream('x')", Limits::default(), false).unwrap();
    assert!(!e.definition().defines_fold, "no handler: no fold");
    e.process(&ev("x", 0, "A", r#"{"a":1}"#, 1), &mut none).unwrap();
    assert_eq!(e.state("").unwrap().unwrap(), r#"{"a":1}"#);
    let mut raw = ev("x", 1, "A", "plain", 2);
    raw.is_json = false;
    e.process(&raw, &mut none).unwrap();
    assert_eq!(e.state("").unwrap().unwrap(), r#"{"$e":"plain"}"#);

    let q = r#"fromAll().foreachStream().when({
        $init: function () { return { n: 0, gone: false }; },
        $any: function (s, e) { s.n += 1; },
        $deleted: function (s, d) { s.gone = d.isSoftDeleted ? 'soft' : 'hard'; }
    })"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    e.process(&ev("a-1", 0, "A", "{}", 1), &mut none).unwrap();
    let mut del = ev("a-1", 0, "", "", 2);
    del.deleted = Some(true);
    assert!(e.process(&del, &mut none).unwrap().handled);
    assert_eq!(e.state("a-1").unwrap().unwrap(), r#"{"n":1,"gone":"soft"}"#);
}

#[test]
fn sandbox_clock_and_randomness_are_the_events() {
    let q = r#"fromAll().when({ $any: function (s, e) {
        s.now = Date.now(); s.made = new Date().getTime(); s.r = Math.random();
        s.perf = typeof performance; s.weak = typeof WeakRef; s.req = typeof require;
    }})"#;
    let run = || {
        let mut e = Engine::compile(q, Limits::default(), false).unwrap();
        e.process(&ev("a", 0, "A", "{}", 77), &mut none).unwrap();
        e.state("").unwrap().unwrap()
    };
    let s = run();
    let v: Json = serde_json::from_str(&s).unwrap();
    assert_eq!(v["now"], 1_700_000_000_000i64);
    assert_eq!(v["made"], 1_700_000_000_000i64);
    assert_eq!(v["perf"], "undefined");
    assert_eq!(v["weak"], "undefined");
    assert_eq!(v["req"], "undefined");
    assert_eq!(run(), s, "the same event draws the same random number");
}

#[test]
fn loops_memory_bombs_and_throws_fail_the_call() {
    let limits = Limits { memory_bytes: 16 << 20, call_ticks: 200 };
    let q = "fromAll().when({\n A: function (s, e) {\n while (true) {}\n }\n})";
    let mut e = Engine::compile(q, limits, false).unwrap();
    let err = e.process(&ev("a", 0, "A", "{}", 1), &mut none).unwrap_err();
    assert!(matches!(err, JsError::TimeLimit { ticks: 200, .. }), "{err:?}");
    assert!(e.process(&ev("a", 1, "A", "{}", 2), &mut none).is_err(), "a failed engine stays failed");

    let q = "fromAll().when({ A: function (s, e) { var a = []; for (;;) { a.push(new Array(10000).fill(1)); } } })";
    let mut e = Engine::compile(q, Limits { call_ticks: 1_000_000, ..limits }, false).unwrap();
    let err = e.process(&ev("a", 0, "A", "{}", 1), &mut none).unwrap_err();
    assert!(matches!(err, JsError::Memory(_)), "{err:?}");

    let q = "fromAll().when({\n A: function (s, e) {\n throw new TypeError('bad ' + e.streamId);\n }\n})";
    let mut e = Engine::compile(q, limits, false).unwrap();
    let err = e.process(&ev("a", 0, "A", "{}", 1), &mut none).unwrap_err();
    assert_eq!(err, JsError::Script { message: "TypeError: bad a".into(), line: Some(3) });

    let q = "function f(n) { return f(n + 1) + 1; }\nfromAll().when({ A: function (s, e) { f(0); } })";
    let mut e = Engine::compile(q, limits, false).unwrap();
    let err = e.process(&ev("a", 0, "A", "{}", 1), &mut none).unwrap_err();
    assert!(err.to_string().contains("stack"), "{err}");

    // A top-level loop is stopped at compile time.
    let err = Engine::compile("while (true) {}", limits, false).err().unwrap();
    assert!(matches!(err, JsError::TimeLimit { .. }), "{err:?}");
}

#[test]
fn on_any_and_on_event_combine_with_when() {
    // Handlers from `when` and from the global functions share one registry: every `$any` and
    // `on_any` handler runs, in registration order, before the one handler named for the type.
    let q = r#"
        fromAll().when({
            $init: function () { return { seen: [] }; },
            $any: function (s, e) { s.seen.push('when-any:' + e.eventType); },
            A: function (s, e) { s.seen.push('when-A'); }
        });
        on_any(function (s, e) { s.seen.push('on_any:' + e.body.n); return s; });
        on_event('B', function (s, e) { s.seen.push('on_event-B'); });"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    assert_eq!(e.definition().events, None, "an on_any handler takes every type");
    assert!(e.definition().defines_fold);
    e.process(&ev("s", 0, "A", r#"{"n":1}"#, 1), &mut none).unwrap();
    e.process(&ev("s", 1, "B", r#"{"n":2}"#, 2), &mut none).unwrap();
    e.process(&ev("s", 2, "C", r#"{"n":3}"#, 3), &mut none).unwrap();
    assert_eq!(
        e.state("").unwrap().unwrap(),
        r#"{"seen":["when-any:A","on_any:1","when-A","when-any:B","on_any:2","on_event-B","when-any:C","on_any:3"]}"#
    );

    // `on_event` alone: only its types reach the query; a later handler for a type replaces
    // the earlier one.
    let q = r#"
        fromStream('s');
        on_event('Paid', function (s, e) { return { paid: 1 }; });
        on_event('Paid', function (s, e) { return { paid: (s.paid || 0) + e.body.amount }; });
        on_event('Refunded', function (s, e) { return { paid: s.paid - e.body.amount }; });"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    assert_eq!(e.definition().events, Some(vec!["Paid".to_string(), "Refunded".to_string()]));
    e.process(&ev("s", 0, "Paid", r#"{"amount":5}"#, 1), &mut none).unwrap();
    assert!(!e.process(&ev("s", 1, "Other", r#"{"amount":50}"#, 2), &mut none).unwrap().handled);
    e.process(&ev("s", 2, "Paid", r#"{"amount":7}"#, 3), &mut none).unwrap();
    e.process(&ev("s", 3, "Refunded", r#"{"amount":2}"#, 4), &mut none).unwrap();
    assert_eq!(e.state("").unwrap().unwrap(), r#"{"paid":10}"#);

    // A `when` with `$init` alone registers no event handler: the state becomes each body.
    let mut e = Engine::compile(
        "fromAll().when({ $init: function () { return { z: 0 }; } })",
        Limits::default(),
        false,
    )
    .unwrap();
    assert_eq!(e.state("").unwrap().unwrap(), r#"{"z":0}"#);
    assert!(e.process(&ev("s", 0, "A", r#"{"a":1}"#, 1), &mut none).unwrap().handled);
    assert_eq!(e.state("").unwrap().unwrap(), r#"{"a":1}"#);
}

#[test]
fn on_raw_sees_the_unparsed_event_first() {
    let q = r#"
        fromAll().partitionBy(function (e) { return e.body.who; }).when({
            $init: function () { return { log: [] }; },
            $any: function (s, e) { s.log.push(['any', e.isJson, e.body.who]); }
        });
        on_raw(function (s, e) {
            s.log.push(['raw', e.isJson, e.body, e.data, e.bodyRaw, e.eventType, e.streamId,
                        e.sequenceNumber, e.metadata.m, e.partition]);
        });"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    assert_eq!(e.definition().events, None);
    let mut x = ev("s-1", 4, "T", r#"{"who":"ann"}"#, 1);
    x.metadata = br#"{"m":7}"#;
    assert!(e.process(&x, &mut none).unwrap().handled);
    assert_eq!(
        e.state("ann").unwrap().unwrap(),
        r#"{"log":[["raw",false,null,null,"{\"who\":\"ann\"}","T","s-1",4,7,"ann"],["any",true,"ann"]]}"#
    );

    // An `on_raw` handler alone takes every event, JSON or not, and turns the default off.
    let q = r#"fromStream('s'); on_raw(function (s, e) { return { last: e.bodyRaw, n: (s.n || 0) + 1 }; });"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    let mut plain = ev("s", 0, "A", "not json", 1);
    plain.is_json = false;
    e.process(&plain, &mut none).unwrap();
    e.process(&ev("s", 1, "B", "{broken", 2), &mut none).unwrap();
    assert_eq!(e.state("").unwrap().unwrap(), r#"{"last":"{broken","n":2}"#);
}

/// Compiles `q`, which must be refused with an error that says `says`; returns the error.
fn refused(q: &str, says: &str) -> JsError {
    let Err(err) = Engine::compile(q, Limits::default(), false) else { panic!("{q} compiles") };
    assert!(err.to_string().contains(says), "{q}: {err}");
    err
}

#[test]
fn on_functions_check_their_arguments() {
    for (q, says) in [
        ("fromAll(); on_event(3, function () {});", "on_event needs an event type"),
        ("fromAll(); on_event('', function () {});", "on_event needs an event type"),
        ("fromAll(); on_event('A', {});", "on_event needs a function"),
        ("fromAll(); on_any('x');", "on_any needs a function"),
        ("fromAll();\non_raw();", "on_raw needs a function"),
    ] {
        let err = refused(q, says);
        assert!(err.line().is_some(), "{q}: {err:?}");
    }
}

#[test]
fn from_stream_catalog_defines_its_source_and_names_streams() {
    let q = r#"fromStreamCatalog('$catalog').foreachStream().when({ $any: function (s, e) { return { n: (s.n || 0) + 1 }; } })"#;
    let e = Engine::compile(q, Limits::default(), false).unwrap();
    let d = e.definition();
    assert_eq!(d.source, Source::Catalog { stream: "$catalog".into(), transform: false });
    assert!(d.by_stream);

    let q = r#"
        fromStreamCatalog('lists', function (e) { log('dropped'); return e.body.stream === 'skip' ? null : 'orders-' + e.body.stream; })
            .foreachStream().when({ $any: function (s, e) { } })"#;
    let mut e = Engine::compile(q, Limits::default(), false).unwrap();
    assert_eq!(e.definition().source, Source::Catalog { stream: "lists".into(), transform: true });
    assert_eq!(
        e.catalog_entry(&ev("lists", 0, "Add", r#"{"stream":"a"}"#, 1)).unwrap(),
        Some("orders-a".into())
    );
    assert_eq!(e.catalog_entry(&ev("lists", 1, "Add", r#"{"stream":"skip"}"#, 2)).unwrap(), None);
    // What the function logs is not taken with the next event's effects.
    let o = e.process(&ev("orders-a", 0, "X", "{}", 3), &mut none).unwrap();
    assert!(o.logs.is_empty(), "{o:?}");

    for (q, says) in [
        ("fromStreamCatalog('c').when({})", "not a function"),
        ("fromStreamCatalog('c')", "fromStreamCatalog needs foreachStream()"),
        ("fromStreamCatalog('').foreachStream()", "fromStreamCatalog needs a stream name"),
        ("fromStreamCatalog('c', 5).foreachStream()", "needs a function"),
    ] {
        refused(q, says);
    }
    // A catalog without a function has no catalog entry point.
    let mut e = Engine::compile("fromStreamCatalog('c').foreachStream()", Limits::default(), false).unwrap();
    assert!(e.catalog_entry(&ev("c", 0, "$@", "a", 1)).is_err());
}
