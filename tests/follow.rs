//! The seams the cluster builds on: the follow feed of committed records (history, then new
//! commits, in bounded batches), a log that follows a leader (`append_at` makes byte-identical
//! chunks; misplaced or corrupt records are refused without harm), the durable end apart from
//! the committed position, and online truncation of a tail that is durable but not committed
//! (including power loss part-way and afterwards).

use std::path::Path;
use std::sync::Arc;

use annal::env::mem::{InlineRuntime, ManualClock, MemDisk, MemNet};
use annal::env::{Disk, Env, OpenMode};
use annal::log::record::{self, flags, EventFrame, Record};
use annal::log::{Log, LogConfig, LogError, LogWriter};
use annal::store::{NewEvent, Store, StoreConfig, WriteOp, ANY};

fn env(disk: Arc<MemDisk>, seed: u64) -> Env {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    Env::new(disk, clock, Arc::new(MemNet::default()), Arc::new(InlineRuntime), seed)
}

fn ev(i: u32, size: usize) -> NewEvent {
    let mut id = [0u8; 16];
    id[..4].copy_from_slice(&i.to_le_bytes());
    id[15] = 7;
    NewEvent {
        id,
        event_type: "test".into(),
        data: vec![b'a' + (i % 26) as u8; size].into(),
        metadata: Default::default(),
        is_json: false,
    }
}

fn store_cfg(dir: &str) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.chunk_size = 8192;
    c.memtable_max = 64;
    c.existence_filter_bytes = 4096;
    c
}

fn read_file(disk: &MemDisk, path: &Path) -> Vec<u8> {
    let f = disk.open(path, OpenMode::Read).unwrap();
    f.read_vec_at(f.len().unwrap() as usize, 0).unwrap()
}

/// Chunk files of `dir` (names and contents), in order.
fn chunks(disk: &MemDisk, dir: &str) -> Vec<(String, Vec<u8>)> {
    let mut names: Vec<String> =
        disk.list(Path::new(dir)).unwrap().into_iter().filter(|n| n.starts_with("chunk-")).collect();
    names.sort();
    names.into_iter().map(|n| (n.clone(), read_file(disk, &Path::new(dir).join(&n)))).collect()
}

/// Copies every committed record of `from` into `to` with `append_at`, flushing every `every`.
fn replicate(from: &Log, to: &mut LogWriter, every: usize) {
    let mut scan = from.scan(0);
    let mut n = 0;
    while let Some(r) = scan.next_with_frame() {
        let (rec, frame) = r.unwrap();
        to.append_at(rec.log_position(), &frame).unwrap();
        n += 1;
        if n % every == 0 {
            to.commit().unwrap();
        }
    }
    to.commit().unwrap();
}

#[test]
fn a_log_built_from_append_at_is_byte_identical() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 3);
    let leader = Store::open(&env, store_cfg("/leader")).unwrap();
    // Records of many sizes across several chunks, with deletes, metadata and a scavenge point
    // (which completes its chunk early).
    for i in 0..120u32 {
        // s-4 is hard-deleted at 80; later writes go elsewhere.
        let stream = if i > 80 && i % 7 == 4 { "late".to_string() } else { format!("s-{}", i % 7) };
        leader.append(&stream, ANY, vec![ev(i, (i as usize * 37) % 1500)]).unwrap();
        if i == 40 {
            leader.write(WriteOp::ScavengePoint { threshold: 0 }).unwrap();
        }
        if i == 60 {
            leader.delete("s-3", ANY, false).unwrap();
        }
        if i == 80 {
            leader.delete("s-4", ANY, true).unwrap();
        }
    }
    leader.append("tail", ANY, (0..5).map(|i| ev(500 + i, 300)).collect()).unwrap();
    assert!(leader.log().committed() > 4 * 8192, "the records span several chunks");
    let (follower, mut w, _) = Log::open(&env, LogConfig::new("/follower", 8192)).unwrap();
    replicate(leader.log(), &mut w, 5);
    assert_eq!(follower.durable(), leader.log().committed());
    assert_eq!(follower.committed(), leader.log().committed());
    let (a, b) = (chunks(&disk, "/leader"), chunks(&disk, "/follower"));
    assert_eq!(a.iter().map(|c| &c.0).collect::<Vec<_>>(), b.iter().map(|c| &c.0).collect::<Vec<_>>());
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{name} differs between the leader and the follower");
    }
    // The follower's log reads back every record of the leader's.
    let theirs: Vec<Record> = leader.log().scan(0).map(Result::unwrap).collect();
    let ours: Vec<Record> = follower.scan(0).map(Result::unwrap).collect();
    assert_eq!(ours, theirs);
}

#[test]
fn misplaced_or_corrupt_records_are_refused_without_poisoning_the_log() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 4);
    let leader = Store::open(&env, store_cfg("/leader")).unwrap();
    leader.append("s", ANY, vec![ev(1, 100), ev(2, 100)]).unwrap();
    let frames: Vec<(u64, bytes::Bytes)> = {
        let mut scan = leader.log().scan(0);
        std::iter::from_fn(|| scan.next_with_frame())
            .map(|r| r.map(|(rec, f)| (rec.log_position(), f)).unwrap())
            .collect()
    };
    let (log, mut w, _) = Log::open(&env, LogConfig::new("/follower", 8192)).unwrap();
    // Out of order: the second record first.
    let (p1, f1) = &frames[1];
    assert!(matches!(w.append_at(*p1, f1), Err(LogError::Misplaced { .. })));
    // Claimed at a position other than its own.
    let (p0, f0) = &frames[0];
    assert!(matches!(w.append_at(p0 + 8, f0), Err(LogError::Misplaced { .. })));
    // A flipped bit.
    let mut bad = f0.to_vec();
    bad[20] ^= 1;
    assert!(matches!(w.append_at(*p0, &bad), Err(LogError::Misplaced { .. })));
    // Two records as one frame.
    let two = [&f0[..], &f1[..]].concat();
    assert!(matches!(w.append_at(*p0, &two), Err(LogError::Misplaced { .. })));
    assert!(!log.is_poisoned());
    for (p, f) in &frames {
        w.append_at(*p, f).unwrap();
    }
    assert_eq!(w.commit().unwrap(), leader.log().committed());
}

#[test]
fn the_durable_end_runs_ahead_of_the_committed_position_until_published() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 5);
    let (log, mut w, _) = Log::open(&env, LogConfig::new("/db", 4096)).unwrap();
    let fill = |n: usize| move |_: u64, b: &mut Vec<u8>| b.resize(b.len() + n, 0x5A);
    w.append(100, fill(100)).unwrap();
    assert_eq!(w.flush().unwrap(), 100);
    assert_eq!((log.durable(), log.committed()), (100, 0), "durable, not yet visible");
    assert!(log.read(0).is_err() && log.scan(0).next().is_none(), "readers see nothing past committed");
    log.publish(100);
    assert_eq!(log.committed(), 100);
}

/// Stages event `n` of stream `s` with 900 bytes of data (about 1000 bytes of frame).
fn stage_event(w: &mut LogWriter, n: i64) -> u64 {
    let data = [n as u8; 900];
    let frame = EventFrame {
        log_position: 0,
        flags: flags::DATA | flags::IS_COMMITTED | flags::TX_BEGIN | flags::TX_END,
        transaction_position: 0,
        transaction_offset: 0,
        event_number: n,
        event_id: [n as u8; 16],
        timestamp_us: 1,
        stream: "s",
        event_type: "t",
        data: &data,
        metadata: &[],
    };
    w.append(frame.len(), |pos, out| {
        record::encode_frame(&EventFrame { log_position: pos, transaction_position: pos, ..frame }, out)
    })
    .unwrap()
}

/// A follower log with `n` records of about 1000 bytes durable, of which the first `committed`
/// are published.
fn follower_with(env: &Env, n: usize, committed: usize) -> (Arc<Log>, LogWriter, Vec<u64>) {
    let (log, mut w, _) = Log::open(env, LogConfig::new("/db", 4096)).unwrap();
    let mut ends = Vec::new();
    for i in 0..n {
        stage_event(&mut w, i as i64);
        ends.push(w.flush().unwrap());
    }
    log.publish(if committed == 0 { 0 } else { ends[committed - 1] });
    (log, w, ends)
}

#[test]
fn online_truncation_drops_a_durable_uncommitted_tail_across_chunks() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 6);
    // Four records of about 1000 bytes per 4096-byte chunk: 10 records reach chunk 2.
    let (log, mut w, ends) = follower_with(&env, 10, 3);
    assert!(disk.exists(Path::new("/db/chunk-000002.000000")));
    // Below the committed position: refused (that is truncate.chk and a restart).
    assert!(matches!(w.truncate_to(ends[1]), Err(LogError::Misplaced { .. })));
    // Past the end: refused.
    assert!(matches!(w.truncate_to(ends[9] + 1), Err(LogError::Misplaced { .. })));
    assert!(!log.is_poisoned());
    w.truncate_to(ends[2]).unwrap();
    assert_eq!((log.durable(), w.position()), (ends[2], ends[2]));
    assert!(!disk.exists(Path::new("/db/chunk-000001.000000")), "later chunks are removed");
    assert!(!disk.exists(Path::new("/db/chunk-000002.000000")));
    // The log goes on from there, and writes the same positions again.
    stage_event(&mut w, 3);
    assert_eq!(w.commit().unwrap(), ends[3]);
    assert_eq!(log.committed(), ends[3]);
    drop((log, w));
    // After a power loss the log opens at the truncated and rewritten end.
    disk.crash();
    let (log, _, report) = Log::open(&env, LogConfig::new("/db", 4096)).unwrap();
    assert_eq!((log.committed(), report.torn_bytes), (ends[3], 0));
    let recs: Vec<Record> = log.scan(0).map(Result::unwrap).collect();
    assert_eq!(recs.len(), 4);
}

#[test]
fn truncation_within_the_writers_chunk_zeroes_the_tail_durably() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 7);
    let (log, mut w, ends) = follower_with(&env, 3, 1);
    w.truncate_to(ends[0]).unwrap();
    drop((log, w));
    disk.crash();
    let (log, _, report) = Log::open(&env, LogConfig::new("/db", 4096)).unwrap();
    assert_eq!(log.committed(), ends[0]);
    assert_eq!(report.torn_bytes, 0, "the dropped records were zeroed and synced, not left as a torn tail");
}

#[test]
fn a_power_loss_right_after_a_truncation_began_leaves_a_consistent_log() {
    // writer.chk is lowered first; whatever else the truncation did before the power failed,
    // recovery finishes it from writer.chk.
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 8);
    let (log, mut w, ends) = follower_with(&env, 9, 2);
    w.truncate_to(ends[4]).unwrap();
    drop((log, w));
    disk.crash();
    let (log, mut w, _) = Log::open(&env, LogConfig::new("/db", 4096)).unwrap();
    assert_eq!(log.committed(), ends[4]);
    assert!(!disk.exists(Path::new("/db/chunk-000002.000000")));
    stage_event(&mut w, 5);
    assert_eq!(w.commit().unwrap(), ends[5]);
}

#[tokio::test]
async fn a_follow_cursor_reads_history_then_waits_for_new_commits() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 9);
    let store = Store::open(&env, store_cfg("/db")).unwrap();
    for i in 0..50 {
        store.append("a", ANY, vec![ev(i, 200)]).unwrap();
    }
    let mut cursor = store.follow(0);
    let mut seen = Vec::new();
    while cursor.has_more() {
        // A batch never holds more than asked for.
        let batch = cursor.next(8).await.unwrap();
        assert!(!batch.is_empty() && batch.len() <= 8);
        seen.extend(batch);
    }
    let events: Vec<i64> = seen
        .iter()
        .filter_map(|r| match r {
            Record::Event(e) => Some(e.event_number),
            Record::Epoch(_) => None,
        })
        .collect();
    assert_eq!(events, (0..50).collect::<Vec<i64>>(), "history in log order, each once");
    assert!(matches!(seen[0], Record::Epoch(_)), "the epoch record comes too");
    // Caught up: the next call waits for a commit.
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut cursor = store.follow_new();
            cursor.next(100).await.unwrap()
        })
    };
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());
    store.append("b", ANY, vec![ev(99, 10)]).unwrap();
    let batch = waiting.await.unwrap();
    assert!(matches!(&batch[..], [Record::Event(e)] if e.stream == "b"));
}

#[tokio::test]
async fn a_names_cursor_reads_kept_summaries_and_falls_back_to_the_log() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 10);
    let store = Store::open(&env, store_cfg("/db")).unwrap();
    store.append("old-a", ANY, vec![ev(1, 10)]).unwrap();
    drop(store);
    // History from before this process's summaries: read from the log.
    let store = Store::open(&env, store_cfg("/db")).unwrap();
    let mut from_start = store.follow(0);
    let mut live = store.follow_new();
    store.append("new-b", ANY, vec![ev(2, 10), ev(3, 10)]).unwrap();
    store.append("new-c", ANY, vec![ev(4, 10)]).unwrap();
    let names = |v: Vec<Arc<str>>| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(names(live.next_streams().await.unwrap()), ["new-b", "new-c"]);
    assert_eq!(live.position(), store.log().committed());
    let mut seen = Vec::new();
    while from_start.has_more() {
        seen.extend(names(from_start.next_streams().await.unwrap()));
    }
    // Behind the summaries, one read of the log: one name per event record.
    assert_eq!(seen, ["old-a", "new-b", "new-b", "new-c"]);
}

/// A leader's log of several chunks whose first chunk was scavenged (only some records kept).
fn scavenged_leader(env: &Env) -> Arc<Store> {
    let leader = Store::open(env, store_cfg("/leader")).unwrap();
    for i in 0..40u32 {
        leader.append(&format!("s-{}", i % 3), ANY, vec![ev(i, 700)]).unwrap();
    }
    let log = leader.log();
    assert!(log.committed() > 2 * 8192);
    let kept: Vec<Record> = log
        .scan(0)
        .until(8192)
        .map(Result::unwrap)
        .filter(|r| matches!(r, Record::Epoch(_)) || matches!(r, Record::Event(e) if e.stream != "s-1"))
        .collect();
    let chunk = log.write_scavenged(0, 0, 1, &kept).unwrap();
    log.install(chunk).unwrap();
    leader
}

/// The frames of a chunk's kept records, back to back.
fn kept_frames(log: &Log, lo: u64, hi: u64) -> Vec<(u64, bytes::Bytes)> {
    let mut scan = log.scan(lo).until(hi);
    std::iter::from_fn(|| scan.next_with_frame())
        .map(|r| r.map(|(rec, f)| (rec.log_position(), f)).unwrap())
        .collect()
}

#[test]
fn a_follower_adopts_a_scavenged_chunk_whole_and_goes_on_from_its_end() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 9);
    let leader = scavenged_leader(&env);
    let (follower, mut w, _) = Log::open(&env, LogConfig::new("/follower", 8192)).unwrap();
    let mut sw = follower.begin_scavenged(0, 0, 1).unwrap();
    for (p, f) in kept_frames(leader.log(), 0, 8192) {
        sw.push_checked(p, &f).unwrap();
    }
    // Records out of order are refused.
    assert!(sw.push_checked(0, &[0u8; 20]).is_err());
    let chunk = sw.finish(&follower).unwrap();
    assert_eq!(w.adopt_chunk(chunk).unwrap(), 8192);
    // The rest replays record by record, and the follower reads back what the leader has.
    let mut scan = leader.log().scan(8192);
    while let Some(r) = scan.next_with_frame() {
        let (rec, frame) = r.unwrap();
        w.append_at(rec.log_position(), &frame).unwrap();
    }
    w.commit().unwrap();
    let theirs: Vec<Record> = leader.log().scan(0).map(Result::unwrap).collect();
    let ours: Vec<Record> = follower.scan(0).map(Result::unwrap).collect();
    assert_eq!(ours, theirs);
}

#[test]
fn a_chunk_received_whole_survives_a_power_loss_before_the_writer_moved_past_it() {
    let disk = Arc::new(MemDisk::default());
    let env = env(disk.clone(), 10);
    let leader = scavenged_leader(&env);
    let kept = kept_frames(leader.log(), 0, 8192);
    {
        let (follower, _w, _) = Log::open(&env, LogConfig::new("/follower", 8192)).unwrap();
        let mut sw = follower.begin_scavenged(0, 0, 1).unwrap();
        for (p, f) in &kept {
            sw.push_checked(*p, f).unwrap();
        }
        // Renamed into place and synced; then the power fails before writer.chk moves.
        sw.finish(&follower).unwrap();
    }
    disk.crash();
    let (follower, w, _) = Log::open(&env, LogConfig::new("/follower", 8192)).unwrap();
    assert_eq!(w.position(), 8192, "recovery adopts the complete chunk at the writer's start");
    let ours: Vec<u64> = follower.scan(0).map(|r| r.unwrap().log_position()).collect();
    assert_eq!(ours, kept.iter().map(|(p, _)| *p).collect::<Vec<_>>());
}
