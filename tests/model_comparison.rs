//! The stream engine against the reference model (`model/`), driven by the same random operations:
//! appends with every expected-version kind and reused event ids (idempotency), links, soft and hard
//! deletes, metadata ($maxCount, $maxAge, $tb), clock moves, reads of every kind, and crashes
//! (unsynced writes dropped) and clean restarts. Every answer must be identical.
//!
//! The engine runs with tiny chunks (constant rollovers), a tiny memtable (constant index flushes
//! and merges) and a 2-bit stream hash (constant collisions), on the in-memory disk and on a real
//! temporary directory.

use std::sync::Arc;
use std::time::Duration;

use annal::env::mem::{InlineRuntime, ManualClock, MemDisk, MemNet};
use annal::env::Env;
use annal::store::{self, ReadError, Store, StoreConfig, WriteError};
use annal_model as model;
use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

const STREAMS: &[&str] = &["orders", "users", "$system", "a-b", "link-target", "x"];

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
enum Op {
    Append { stream: usize, expected: i64, events: Vec<(u8, u8, bool)> },
    Link { stream: usize, target: usize, n: i64 },
    Delete { stream: usize, expected: i64, hard: bool },
    Meta { stream: usize, expected: i64, id: u8, json: usize },
    Tick(u64),
    ReadForward { stream: usize, from: i64, count: usize, resolve: bool, meta: bool },
    ReadBackward { stream: usize, from: i64, count: usize, resolve: bool },
    ReadEvent { stream: usize, n: i64, resolve: bool },
    ReadAll { page: usize, backward: bool },
    Crash,
    Restart,
}

const METAS: &[&str] = &[
    r#"{"$maxCount":2}"#,
    r#"{"$tb":2}"#,
    r#"{"$maxAge":5}"#,
    r#"{}"#,
    r#"{"$maxCount":"x"}"#,
    r#"{"custom":true,"$maxCount":3}"#,
    r#"not json"#,
];

fn expected_strategy() -> impl Strategy<Value = i64> {
    prop_oneof![Just(-2i64), Just(-1), Just(-4), Just(-3), 0i64..6]
}

fn id(b: u8) -> [u8; 16] {
    let mut x = [0x5au8; 16];
    x[0] = b;
    x
}

struct Ref;

impl ReferenceStateMachine for Ref {
    type State = (model::Model, i64);
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Self::State> {
        Just((model::Model::new(), 1_700_000_000_000_000)).boxed()
    }

    fn transitions(_: &Self::State) -> BoxedStrategy<Op> {
        let s = 0..STREAMS.len();
        prop_oneof![
            6 => (s.clone(), expected_strategy(), proptest::collection::vec((0u8..24, 0u8..4, any::<bool>()), 0..4))
                .prop_map(|(stream, expected, events)| Op::Append { stream, expected, events }),
            1 => (s.clone(), s.clone(), -1i64..4).prop_map(|(stream, target, n)| Op::Link { stream, target, n }),
            1 => (s.clone(), expected_strategy(), any::<bool>()).prop_map(|(stream, expected, hard)| Op::Delete { stream, expected, hard: hard && stream != 4 }),
            2 => (s.clone(), expected_strategy(), 24u8..40, 0..METAS.len()).prop_map(|(stream, expected, id, json)| Op::Meta { stream, expected, id, json }),
            1 => (1u64..4).prop_map(Op::Tick),
            3 => (s.clone(), -1i64..8, 0usize..5, any::<bool>(), any::<bool>()).prop_map(|(stream, from, count, resolve, meta)| Op::ReadForward { stream, from, count, resolve, meta }),
            2 => (s.clone(), -1i64..8, 0usize..5, any::<bool>()).prop_map(|(stream, from, count, resolve)| Op::ReadBackward { stream, from, count, resolve }),
            2 => (s.clone(), -1i64..8, any::<bool>()).prop_map(|(stream, n, resolve)| Op::ReadEvent { stream, n, resolve }),
            1 => (1usize..7, any::<bool>()).prop_map(|(page, backward)| Op::ReadAll { page, backward }),
            1 => Just(Op::Crash),
            1 => Just(Op::Restart),
        ]
        .boxed()
    }

    fn apply((mut m, now): Self::State, op: &Op) -> Self::State {
        let mut now = now;
        match op {
            Op::Append { stream, expected, events } => {
                let _ = m.append(STREAMS[*stream], *expected, model_events(events), now);
            }
            Op::Link { stream, target, n } => {
                let _ = m.append(STREAMS[*stream], -2, vec![link_event(*target, *n)], now);
            }
            Op::Delete { stream, expected, hard } => {
                let _ = m.delete(STREAMS[*stream], *expected, *hard, now);
            }
            Op::Meta { stream, expected, id: i, json } => {
                let _ = m.set_metadata(
                    STREAMS[*stream],
                    *expected,
                    id(*i),
                    METAS[*json].as_bytes().to_vec(),
                    now,
                );
            }
            Op::Tick(s) => now += *s as i64 * 1_000_000,
            _ => {}
        }
        (m, now)
    }
}

fn model_events(events: &[(u8, u8, bool)]) -> Vec<model::NewEvent> {
    events
        .iter()
        .map(|(i, ty, json)| model::NewEvent {
            id: id(*i),
            event_type: format!("type-{ty}"),
            data: if *json { format!("{{\"v\":{i}}}").into_bytes() } else { vec![*i; *i as usize * 3] },
            metadata: vec![*ty; *ty as usize],
            is_json: *json,
        })
        .collect()
}

fn link_event(target: usize, n: i64) -> model::NewEvent {
    let mut x = [0x11u8; 16];
    x[1] = target as u8;
    x[2] = n as u8;
    model::NewEvent {
        id: x,
        event_type: "$>".into(),
        data: format!("{n}@{}", STREAMS[target]).into_bytes(),
        metadata: vec![],
        is_json: false,
    }
}

fn store_events(events: Vec<model::NewEvent>) -> Vec<store::NewEvent> {
    events
        .into_iter()
        .map(|e| store::NewEvent {
            id: e.id,
            event_type: e.event_type,
            data: e.data.into(),
            metadata: e.metadata.into(),
            is_json: e.is_json,
        })
        .collect()
}

/// A recorded event reduced to what must agree (positions only by order; ids of server-written
/// metadata events are random in the engine).
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    stream: String,
    number: i64,
    id: Option<[u8; 16]>,
    event_type: String,
    data: Vec<u8>,
    metadata: Vec<u8>,
    is_json: bool,
    timestamp_us: i64,
}

fn server_written(stream: &str, ty: &str, data: &[u8]) -> bool {
    stream.starts_with("$$") && ty == "$metadata" && String::from_utf8_lossy(data).contains("\"$tb\"")
}

fn seen_m(e: &model::RecordedEvent) -> Seen {
    Seen {
        stream: e.stream.clone(),
        number: e.event_number,
        id: (!server_written(&e.stream, &e.event_type, &e.data)).then_some(e.id),
        event_type: e.event_type.clone(),
        data: e.data.clone(),
        metadata: e.metadata.clone(),
        is_json: e.is_json,
        timestamp_us: e.timestamp_us,
    }
}

fn seen_s(e: &store::RecordedEvent) -> Seen {
    Seen {
        stream: e.stream.clone(),
        number: e.event_number,
        id: (!server_written(&e.stream, &e.event_type, &e.data)).then_some(e.id),
        event_type: e.event_type.clone(),
        data: e.data.to_vec(),
        metadata: e.metadata.to_vec(),
        is_json: e.is_json,
        timestamp_us: e.timestamp_us,
    }
}

fn pair_m(e: &model::ResolvedEvent) -> (Seen, Option<Seen>) {
    (seen_m(&e.event), e.link.as_ref().map(seen_m))
}

fn pair_s(e: &store::ResolvedEvent) -> (Seen, Option<Seen>) {
    (seen_s(&e.event), e.link.as_ref().map(seen_s))
}

fn werr(e: WriteError) -> model::AppendError {
    match e {
        WriteError::WrongExpectedVersion { current } => model::AppendError::WrongExpectedVersion { current },
        WriteError::StreamDeleted => model::AppendError::StreamDeleted,
        WriteError::InvalidStreamName(_) => model::AppendError::InvalidStreamName,
        other => panic!("unexpected engine error {other:?}"),
    }
}

fn rerr(e: ReadError) -> model::ReadError {
    match e {
        ReadError::NoStream => model::ReadError::NoStream,
        ReadError::StreamDeleted => model::ReadError::StreamDeleted,
        other => panic!("unexpected engine read error {other:?}"),
    }
}

/// Where the engine under test keeps its files.
#[derive(Clone)]
enum Backing {
    Mem(Arc<MemDisk>),
    Real(Arc<tempfile::TempDir>),
}

struct Sut {
    env: Env,
    clock: Arc<ManualClock>,
    backing: Backing,
    store: Option<Arc<Store>>,
    /// The model, stepped in lock-step with the engine (the harness hands `apply` the reference
    /// state *after* the transition, so the comparison keeps its own copy from before).
    m: model::Model,
}

impl Sut {
    fn config(&self) -> StoreConfig {
        let dir = match &self.backing {
            Backing::Mem(_) => std::path::PathBuf::from("/data"),
            Backing::Real(t) => t.path().join("data"),
        };
        let mut c = StoreConfig::new(dir);
        c.chunk_size = 4096;
        c.memtable_max = 8;
        c.max_index_tables = 2;
        c.existence_filter_bytes = 256;
        c.hash_mask = 0x3;
        c.stream_cache_capacity = 3;
        c
    }
    fn open(&mut self) {
        let cfg = self.config();
        self.store = Some(Store::open(&self.env, cfg).expect("store opens"));
    }
    fn store(&self) -> &Store {
        self.store.as_deref().expect("store open")
    }
}

fn now(s: &Sut) -> i64 {
    s.clock.wall_micros()
}

use annal::env::Clock;

fn run_op(mut sut: Sut, after: &(model::Model, i64), op: Op) -> Sut {
    let t = now(&sut);
    let m = sut.m.clone();
    let m = &m;
    match op {
        Op::Append { stream, expected, events } => {
            let mut mm = m.clone();
            let want = mm.append(STREAMS[stream], expected, model_events(&events), t);
            let got = sut.store().append(STREAMS[stream], expected, store_events(model_events(&events)));
            let got = got
                .map(|r| model::AppendOk {
                    first_event_number: r.first_event_number,
                    last_event_number: r.last_event_number,
                })
                .map_err(werr);
            assert_eq!(got, want, "append {stream} {expected} {events:?}");
            sut.m = mm;
        }
        Op::Link { stream, target, n } => {
            let mut mm = m.clone();
            let want = mm.append(STREAMS[stream], -2, vec![link_event(target, n)], t);
            let got = sut.store().append(STREAMS[stream], -2, store_events(vec![link_event(target, n)]));
            let got = got
                .map(|r| model::AppendOk {
                    first_event_number: r.first_event_number,
                    last_event_number: r.last_event_number,
                })
                .map_err(werr);
            assert_eq!(got, want);
            sut.m = mm;
        }
        Op::Delete { stream, expected, hard } => {
            let mut mm = m.clone();
            let want = mm.delete(STREAMS[stream], expected, hard, t);
            let got = sut.store().delete(STREAMS[stream], expected, hard).map(|_| ()).map_err(werr);
            assert_eq!(got, want, "delete {stream} {expected} {hard}");
            sut.m = mm;
        }
        Op::Meta { stream, expected, id: i, json } => {
            let mut mm = m.clone();
            let want = mm.set_metadata(STREAMS[stream], expected, id(i), METAS[json].as_bytes().to_vec(), t);
            let got = sut.store().set_metadata(
                STREAMS[stream],
                expected,
                id(i),
                METAS[json].as_bytes().to_vec().into(),
            );
            let got = got
                .map(|r| model::AppendOk {
                    first_event_number: r.first_event_number,
                    last_event_number: r.last_event_number,
                })
                .map_err(werr);
            assert_eq!(got, want, "metadata {stream} {expected} {json}");
            sut.m = mm;
        }
        Op::Tick(s) => sut.clock.advance(Duration::from_secs(s)),
        Op::ReadForward { stream, from, count, resolve, meta } => {
            let name = if meta { format!("$${}", STREAMS[stream]) } else { STREAMS[stream].to_string() };
            let want = m.read_forward(&name, from, count, resolve, t).map(|s| {
                (
                    s.events.iter().map(pair_m).collect::<Vec<_>>(),
                    s.next_event_number,
                    s.last_event_number,
                    s.is_end_of_stream,
                )
            });
            let got = sut
                .store()
                .read_forward(&name, from, count, resolve, t)
                .map(|s| {
                    (
                        s.events.iter().map(pair_s).collect::<Vec<_>>(),
                        s.next_event_number,
                        s.last_event_number,
                        s.is_end_of_stream,
                    )
                })
                .map_err(rerr);
            assert_eq!(got, want, "read forward {name} {from} {count}");
        }
        Op::ReadBackward { stream, from, count, resolve } => {
            let name = STREAMS[stream];
            let want = m.read_backward(name, from, count, resolve, t).map(|s| {
                (
                    s.events.iter().map(pair_m).collect::<Vec<_>>(),
                    s.next_event_number,
                    s.last_event_number,
                    s.is_end_of_stream,
                )
            });
            let got = sut
                .store()
                .read_backward(name, from, count, resolve, t)
                .map(|s| {
                    (
                        s.events.iter().map(pair_s).collect::<Vec<_>>(),
                        s.next_event_number,
                        s.last_event_number,
                        s.is_end_of_stream,
                    )
                })
                .map_err(rerr);
            assert_eq!(got, want, "read backward {name} {from} {count}");
        }
        Op::ReadEvent { stream, n, resolve } => {
            let name = STREAMS[stream];
            let want = m.read_event(name, n, resolve, t).map(|e| e.as_ref().map(pair_m));
            let got =
                sut.store().read_event(name, n, resolve, t).map(|e| e.as_ref().map(pair_s)).map_err(rerr);
            assert_eq!(got, want, "read event {name} {n}");
        }
        Op::ReadAll { page, backward } => {
            let want: Vec<Seen> = if backward {
                m.read_all_backward(None, usize::MAX).iter().map(seen_m).collect()
            } else {
                m.read_all_forward(None, usize::MAX).iter().map(seen_m).collect()
            };
            let mut got = Vec::new();
            if backward {
                let mut pos = u64::MAX;
                loop {
                    let s = sut.store().read_all_backward(pos, page, false, t).expect("read $all");
                    got.extend(s.events.iter().map(|e| seen_s(&e.event)));
                    if s.is_end || s.events.is_empty() {
                        break;
                    }
                    pos = s.next_position;
                }
            } else {
                let mut pos = 0;
                loop {
                    let s = sut.store().read_all_forward(pos, page, false, t).expect("read $all");
                    got.extend(s.events.iter().map(|e| seen_s(&e.event)));
                    if s.is_end || s.events.is_empty() {
                        break;
                    }
                    pos = s.next_position;
                }
            }
            assert_eq!(got, want, "$all backward={backward}");
        }
        Op::Crash => {
            sut.m.forget_recent_ids();
            sut.store = None;
            if let Backing::Mem(d) = &sut.backing {
                d.crash();
            }
            sut.open();
        }
        Op::Restart => {
            sut.m.forget_recent_ids();
            sut.store().close().expect("close");
            sut.store = None;
            sut.open();
        }
    }
    assert_eq!(now(&sut), after.1, "engine clock follows the reference");
    sut
}

struct MemTest;

fn new_sut(real: bool) -> Sut {
    let disk = Arc::new(MemDisk::default());
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    let (backing, d): (Backing, Arc<dyn annal::env::Disk>) = if real {
        (Backing::Real(Arc::new(tempfile::tempdir().expect("tempdir"))), Arc::new(annal::env::real::RealDisk))
    } else {
        (Backing::Mem(disk.clone()), disk)
    };
    let env = Env::new(d, clock.clone(), Arc::new(MemNet::default()), Arc::new(InlineRuntime), 7);
    let mut s = Sut { env, clock, backing, store: None, m: model::Model::new() };
    s.open();
    s
}

impl StateMachineTest for MemTest {
    type SystemUnderTest = Sut;
    type Reference = Ref;
    fn init_test(_: &(model::Model, i64)) -> Sut {
        new_sut(false)
    }
    fn apply(sut: Sut, state: &(model::Model, i64), op: Op) -> Sut {
        run_op(sut, state, op)
    }
}

struct RealTest;

impl StateMachineTest for RealTest {
    type SystemUnderTest = Sut;
    type Reference = Ref;
    fn init_test(_: &(model::Model, i64)) -> Sut {
        new_sut(true)
    }
    fn apply(sut: Sut, state: &(model::Model, i64), op: Op) -> Sut {
        run_op(sut, state, op)
    }
}

prop_state_machine! {
    #![proptest_config(Config { cases: 1500, failure_persistence: None, .. Config::default() })]
    #[test]
    fn engine_matches_model_on_memory_disk(sequential 1..60 => MemTest);
}

prop_state_machine! {
    #![proptest_config(Config { cases: 150, failure_persistence: None, .. Config::default() })]
    #[test]
    fn engine_matches_model_on_real_directory(sequential 1..40 => RealTest);
}

/// Sequences that once exposed a bug (see corpus/README.md), replayed on every run.
#[test]
fn corpus_regressions_still_agree() {
    #[derive(serde::Deserialize)]
    struct Case {
        found: String,
        ops: Vec<Op>,
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/model-comparison.json");
    let text = annal::env::real::read_text_file(path.to_str().unwrap()).unwrap();
    let cases: Vec<Case> = serde_json::from_str(&text).expect("corpus/model-comparison.json parses");
    assert!(!cases.is_empty());
    for case in cases {
        let mut sut = new_sut(false);
        let mut state = Ref::init_state_value();
        for op in case.ops {
            state = <Ref as ReferenceStateMachine>::apply(state, &op);
            sut = run_op(sut, &state, op);
        }
        eprintln!("corpus case ok: {}", case.found);
    }
}

impl Ref {
    fn init_state_value() -> (model::Model, i64) {
        (model::Model::new(), 1_700_000_000_000_000)
    }
}
