//! Recovery and fault handling of the store: torn tails, restore through `truncate.chk`,
//! corruption of committed data (refused, named), fsync failure and a full disk (writes stop,
//! nothing acknowledged is lost), start-up cost with an intact index, hash collisions, bad input
//! and concurrent group commit.

// The harness itself starts threads to drive the store concurrently; the node code under test does not.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use annal::env::mem::{InlineRuntime, ManualClock, MemDisk, MemNet};
use annal::env::{Clock, Disk, Env, OpenMode};
use annal::store::{NewEvent, ReadError, StorageError, Store, StoreConfig, WriteError, ANY};
use annal_fault::{DiskFaults, FaultyDisk, SlowSyncs};

fn ev(i: u32, size: usize) -> NewEvent {
    let mut id = [0u8; 16];
    id[..4].copy_from_slice(&i.to_le_bytes());
    id[15] = 1;
    NewEvent {
        id,
        event_type: "test".into(),
        data: vec![b'x'; size].into(),
        metadata: Default::default(),
        is_json: false,
    }
}

struct Rig {
    mem: Arc<MemDisk>,
    faults: Arc<DiskFaults>,
    clock: Arc<ManualClock>,
    env: Env,
}

fn rig() -> Rig {
    let mem = Arc::new(MemDisk::default());
    let faults = DiskFaults::none();
    let disk: Arc<dyn Disk> = Arc::new(FaultyDisk::new(mem.clone(), faults.clone()));
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    let env = Env::new(disk, clock.clone(), Arc::new(MemNet::default()), Arc::new(InlineRuntime), 1);
    Rig { mem, faults, clock, env }
}

fn cfg() -> StoreConfig {
    let mut c = StoreConfig::new("/db");
    c.chunk_size = 64 * 1024;
    c.memtable_max = 100;
    c.existence_filter_bytes = 4096;
    c
}

fn count(store: &Store, stream: &str) -> Result<usize, ReadError> {
    Ok(store.read_forward(stream, 0, 100_000, false, 0)?.events.len())
}

fn chunk_path(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("chunk-{n:06}.000000"))
}

#[test]
fn torn_tail_past_the_writer_checkpoint_is_zeroed() {
    let r = rig();
    let s = Store::open(&r.env, cfg()).unwrap();
    for i in 0..10 {
        s.append("s", ANY, vec![ev(i, 100)]).unwrap();
    }
    let end = s.log().committed();
    drop(s);
    // Half of an unacknowledged write reached the disk past writer.chk.
    let f = r.env.disk.open(&chunk_path(Path::new("/db"), 0), OpenMode::ReadWrite).unwrap();
    f.write_all_at(&[0xAB; 300], 128 + end).unwrap();
    f.sync_data().unwrap();
    drop(f);
    let s = Store::open(&r.env, cfg()).unwrap();
    assert!(s.recovery.torn_bytes >= 300, "{:?}", s.recovery);
    assert_eq!(count(&s, "s").unwrap(), 10);
    s.append("s", 9, vec![ev(10, 100)]).unwrap();
    assert_eq!(count(&s, "s").unwrap(), 11);
}

#[test]
fn crash_at_any_point_of_a_commit_loses_nothing_acknowledged() {
    // Fail the n-th sync of one append for n = 1..4 (chunk data, writer.chk, ...), crash, reopen.
    for n in 1..=6u64 {
        let r = rig();
        let s = Store::open(&r.env, cfg()).unwrap();
        for i in 0..20 {
            s.append("s", ANY, vec![ev(i, 3000)]).unwrap();
        }
        r.faults.fail_sync_after.store(n, Ordering::SeqCst);
        let mut acked = 20;
        let mut failed = false;
        for i in 20..40 {
            match s.append("s", ANY, vec![ev(i, 3000)]) {
                Ok(_) => acked += 1,
                Err(WriteError::Storage(_)) => {
                    failed = true;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        // The failing sync may belong to a background index flush (retried later); when it hit
        // the log, the node refuses writes instead of risking acknowledged loss.
        if failed {
            assert!(matches!(
                s.append("s", ANY, vec![ev(99, 10)]),
                Err(WriteError::Storage(StorageError::ReadOnly(_)))
            ));
        }
        drop(s);
        r.mem.crash();
        r.faults.fail_sync_after.store(0, Ordering::SeqCst);
        let s = Store::open(&r.env, cfg()).unwrap();
        let got = count(&s, "s").unwrap();
        assert!(
            got >= acked && got <= acked + 1,
            "sync #{n}: {got} events after crash, {acked} acknowledged"
        );
        let slice = s.read_forward("s", 0, 1000, false, 0).unwrap();
        for (k, e) in slice.events.iter().enumerate() {
            assert_eq!(e.event.event_number, k as i64);
            assert_eq!(e.event.data.len(), 3000);
        }
    }
}

#[test]
fn a_chunk_completed_by_a_crashed_writer_is_durable_before_the_log_builds_on_it() {
    // Simulator seed 23476. A commit fills chunk 0 to its last byte, so writer.chk points at the
    // start of chunk 1 while chunk 0 has no footer yet: the next append completes it. Here that
    // completion writes the footer and then fails (the new chunk's header reads back corrupt),
    // the process dies with the page cache intact, and the next start found the unsynced footer.
    // It must make it durable: after a power loss the log still opens with everything
    // acknowledged.
    let r = rig();
    let mut c = cfg();
    c.chunk_size = 8192;
    let s = Store::open(&r.env, c.clone()).unwrap();
    // Frame length = overhead + data length, measured on two appends.
    let frame = |s: &Store, i: u32, size: usize| {
        let before = s.log().committed();
        s.append("s", ANY, vec![ev(i, size)]).unwrap();
        s.log().committed() - before
    };
    let overhead = frame(&s, 0, 100) - 100;
    assert_eq!(frame(&s, 1, 200), overhead + 200, "frame length is overhead + data");
    let rest = c.chunk_size - s.log().committed();
    frame(&s, 2, (rest - overhead) as usize);
    assert_eq!(s.log().committed(), c.chunk_size, "chunk 0 is full to its last byte");
    *r.faults.flip_reads_of.lock().unwrap() = "chunk-000001".into();
    assert!(matches!(s.append("s", ANY, vec![ev(3, 100)]), Err(WriteError::Storage(_))));
    *r.faults.flip_reads_of.lock().unwrap() = String::new();
    drop(s);
    // A process crash: nothing is lost from the page cache.
    let s = Store::open(&r.env, c.clone()).unwrap();
    assert_eq!(count(&s, "s").unwrap(), 3);
    for i in 4..8 {
        s.append("s", ANY, vec![ev(i, 100)]).unwrap();
    }
    drop(s);
    // A power loss: only what was synced remains.
    r.mem.crash();
    let s = Store::open(&r.env, c).unwrap();
    assert_eq!(count(&s, "s").unwrap(), 7);
}

#[test]
fn the_log_alone_makes_what_its_recovery_adopted_durable() {
    // The crash of seed 23476 on the log without the store, whose index start-up also syncs
    // `db/`: both the footer and the name of the chunk that the crashed writer renamed into place
    // (neither synced) must survive a power loss after the restart built on them.
    use annal::log::{Log, LogConfig};
    let r = rig();
    let cfg = LogConfig::new("/db", 4096);
    let fill = |n: usize| move |_: u64, b: &mut Vec<u8>| b.resize(b.len() + n, 0xA5);
    let (log, mut w, _) = Log::open(&r.env, cfg.clone()).unwrap();
    w.append(4096, fill(4096)).unwrap();
    assert_eq!(w.commit().unwrap(), 4096, "chunk 0 is full to its last byte");
    *r.faults.flip_reads_of.lock().unwrap() = "chunk-000001".into();
    assert!(w.append(100, fill(100)).is_err(), "completing chunk 0 fails on chunk 1's header");
    *r.faults.flip_reads_of.lock().unwrap() = String::new();
    drop((log, w));
    // A process crash (the page cache survives), then a commit into chunk 1.
    let (log, mut w, _) = Log::open(&r.env, cfg.clone()).unwrap();
    w.append(100, fill(100)).unwrap();
    assert_eq!(w.commit().unwrap(), 4196);
    drop((log, w));
    r.mem.crash();
    let (log, _, _) = Log::open(&r.env, cfg).unwrap();
    assert_eq!(log.committed(), 4196);
}

#[test]
fn truncate_checkpoint_truncates_the_log_and_the_index() {
    let r = rig();
    let s = Store::open(&r.env, cfg()).unwrap();
    let mut cut = 0;
    for i in 0..300 {
        let w = s.append(&format!("s{}", i % 3), ANY, vec![ev(i, 500)]).unwrap();
        if i == 149 {
            cut = w.commit_position;
        }
    }
    s.close().unwrap();
    assert!(s.index().stats().tables > 0, "index tables exist beyond the cut");
    drop(s);
    // The restore procedure: copy chaser.chk to truncate.chk (here: a position in the middle).
    let f = r.env.disk.open(Path::new("/db/truncate.chk"), OpenMode::ReadWrite).unwrap();
    f.write_all_at(&(cut as i64).to_le_bytes(), 0).unwrap();
    f.sync_data().unwrap();
    let s = Store::open(&r.env, cfg()).unwrap();
    assert_eq!(s.recovery.truncated_to, Some(cut));
    assert_eq!(s.log().checkpoints.truncate.read(), -1);
    let total: usize = (0..3).map(|k| count(&s, &format!("s{k}")).unwrap()).sum();
    assert_eq!(total, 150);
    // Numbering continues after the truncation point.
    let w = s.append("s0", ANY, vec![ev(1000, 10)]).unwrap();
    assert_eq!(w.first_event_number, 50);
}

#[test]
fn corruption_of_committed_data_is_reported_never_served() {
    let r = rig();
    let s = Store::open(&r.env, cfg()).unwrap();
    for i in 0..400 {
        s.append("s", ANY, vec![ev(i, 400)]).unwrap();
    }
    s.close().unwrap();
    drop(s);
    // A latent sector error inside event 3 (chunk 0, well below the index checkpoint).
    r.mem.flip_bit(&chunk_path(Path::new("/db"), 0), 128 + 3 * 470 + 100, 2).unwrap();
    let s = Store::open(&r.env, cfg()).unwrap();
    let e = s.read_forward("s", 0, 10, false, 0).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ReadError::Storage(StorageError::Corrupt(_))), "{e:?}");
    assert!(msg.contains("chunk-000000.000000") && msg.contains("offset"), "{msg}");
    // Events elsewhere are still served.
    assert_eq!(s.read_forward("s", 100, 10, false, 0).unwrap().events.len(), 10);
}

#[test]
fn corruption_in_the_replayed_tail_refuses_to_start() {
    let r = rig();
    let mut c = cfg();
    c.memtable_max = 1_000_000; // nothing flushed: the whole log is the replayed tail
    let s = Store::open(&r.env, c.clone()).unwrap();
    for i in 0..50 {
        s.append("s", ANY, vec![ev(i, 400)]).unwrap();
    }
    drop(s);
    r.mem.flip_bit(&chunk_path(Path::new("/db"), 0), 128 + 20 * 470 + 50, 0).unwrap();
    let err = match Store::open(&r.env, c) {
        Ok(_) => panic!("a corrupt committed record must stop the start"),
        Err(e) => e,
    };
    let msg = err.to_string();
    assert!(matches!(err, StorageError::Corrupt(_)), "{err:?}");
    assert!(msg.contains("chunk-000000.000000") && msg.contains("offset"), "{msg}");
}

#[test]
fn start_up_with_an_intact_index_does_not_reread_the_log() {
    let r = rig();
    let mut c = cfg();
    c.chunk_size = 256 * 1024;
    c.memtable_max = 1000;
    let s = Store::open(&r.env, c.clone()).unwrap();
    for i in 0..20_000u32 {
        s.append(&format!("stream-{}", i % 100), ANY, vec![ev(i, 200)]).unwrap();
    }
    s.close().unwrap();
    let log_bytes = s.log().committed();
    drop(s);
    r.faults.bytes_read.store(0, Ordering::SeqCst);
    let s = Store::open(&r.env, c).unwrap();
    let read = r.faults.bytes_read.load(Ordering::SeqCst);
    assert!(log_bytes > 4_000_000);
    assert!(read < log_bytes / 4, "start-up read {read} bytes of a {log_bytes}-byte log");
    assert_eq!(count(&s, "stream-7").unwrap(), 200);
}

#[test]
fn failed_fsync_stops_writes_and_keeps_reads() {
    let r = rig();
    let s = Store::open(&r.env, cfg()).unwrap();
    s.append("s", ANY, vec![ev(1, 10)]).unwrap();
    r.faults.fail_all_syncs.store(true, Ordering::SeqCst);
    let e = s.append("s", ANY, vec![ev(2, 10)]).unwrap_err();
    assert!(matches!(e, WriteError::Storage(_)), "{e:?}");
    r.faults.fail_all_syncs.store(false, Ordering::SeqCst);
    let e = s.append("s", ANY, vec![ev(3, 10)]).unwrap_err();
    assert!(e.to_string().contains("refuses writes"), "{e}");
    assert_eq!(count(&s, "s").unwrap(), 1);
}

#[test]
fn full_disk_is_a_clear_error_and_loses_nothing() {
    let r = rig();
    let s = Store::open(&r.env, cfg()).unwrap();
    for i in 0..10 {
        s.append("s", ANY, vec![ev(i, 1000)]).unwrap();
    }
    // Room for a few more events, but not for the next chunk file.
    r.faults.space_left.store(20_000, Ordering::SeqCst);
    let mut err = None;
    for i in 10..200 {
        if let Err(e) = s.append("s", ANY, vec![ev(i, 1000)]) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the disk fills up");
    assert!(matches!(err, WriteError::Storage(StorageError::DiskFull(_))), "{err:?}");
    let acked = count(&s, "s").unwrap();
    drop(s);
    r.mem.crash();
    r.faults.space_left.store(u64::MAX, Ordering::SeqCst);
    let s = Store::open(&r.env, cfg()).unwrap();
    assert_eq!(count(&s, "s").unwrap(), acked);
}

#[test]
fn colliding_stream_hashes_read_correctly() {
    let r = rig();
    let mut c = cfg();
    c.hash_mask = 0; // every stream has the same hash
    c.memtable_max = 7;
    let s = Store::open(&r.env, c.clone()).unwrap();
    for i in 0..30 {
        s.append(if i % 2 == 0 { "left" } else { "right" }, ANY, vec![ev(i, 10 + i as usize)]).unwrap();
    }
    s.append("right", 14, vec![ev(100, 1)]).unwrap();
    assert!(matches!(
        s.append("left", 3, vec![ev(101, 1)]),
        Err(WriteError::WrongExpectedVersion { current: 14 })
    ));
    for stream in ["left", "right"] {
        let sl = s.read_forward(stream, 0, 100, false, 0).unwrap();
        assert!(sl.events.iter().all(|e| e.event.stream == stream));
        let nums: Vec<i64> = sl.events.iter().map(|e| e.event.event_number).collect();
        assert_eq!(nums, (0..nums.len() as i64).collect::<Vec<_>>());
    }
    assert_eq!(count(&s, "left").unwrap(), 15);
    assert_eq!(count(&s, "right").unwrap(), 16);
    assert!(matches!(s.read_forward("middle", 0, 10, false, 0), Err(ReadError::NoStream)));
    drop(s);
    let s = Store::open(&r.env, c).unwrap();
    assert_eq!(count(&s, "right").unwrap(), 16);
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let r = rig();
    let mut c = cfg();
    c.max_event_bytes = 1000;
    let s = Store::open(&r.env, c).unwrap();
    let before = s.log().committed();
    assert!(matches!(s.append("", ANY, vec![ev(1, 1)]), Err(WriteError::InvalidStreamName(_))));
    assert!(matches!(
        s.append(&"x".repeat(2001), ANY, vec![ev(1, 1)]),
        Err(WriteError::InvalidStreamName(_))
    ));
    // A batch with one oversized event is refused whole.
    assert!(matches!(
        s.append("s", ANY, vec![ev(1, 10), ev(2, 1001)]),
        Err(WriteError::EventTooLarge { .. })
    ));
    assert_eq!(s.log().committed(), before);
    assert!(matches!(s.read_forward("s", 0, 10, false, 0), Err(ReadError::NoStream)));
}

#[test]
fn concurrent_writers_share_commits_and_number_densely() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(
        Arc::new(annal::env::real::RealDisk),
        Arc::new(ManualClock::new(0)),
        Arc::new(MemNet::default()),
        Arc::new(InlineRuntime),
        3,
    );
    let mut c = StoreConfig::new(dir.path().join("db"));
    c.chunk_size = 1 << 20;
    let s = Store::open(&env, c).unwrap();
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..50u32 {
                    // Half the threads share one stream (expected version any), half own one.
                    let stream = if t % 2 == 0 { "shared".to_string() } else { format!("own-{t}") };
                    let expected = if t % 2 == 0 { ANY } else { i as i64 - 1 };
                    s.append(&stream, expected, vec![ev(t * 1000 + i, 64)]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let shared = s.read_forward("shared", 0, 10_000, false, 0).unwrap();
    assert_eq!(shared.events.len(), 8 * 50);
    let nums: Vec<i64> = shared.events.iter().map(|e| e.event.event_number).collect();
    assert_eq!(nums, (0..400).collect::<Vec<_>>());
    let flushes = s.stats.flushes.load(Ordering::Relaxed);
    assert!(flushes <= 16 * 50 + 1, "{flushes} group commits");
}

#[test]
fn writer_checkpoint_block_on_the_real_disk() {
    // writer.chk is written as whole 4 KiB blocks that bypass the page cache; its value is the
    // first 8 bytes, so a reopen (and a plain copy, as the backup procedures do) reads it back.
    let dir = tempfile::tempdir().unwrap();
    let disk = annal::env::real::RealDisk;
    let path = dir.path().join("writer.chk");
    let c = annal::log::checkpoint::Checkpoint::open_direct(&disk, &path, 0).unwrap();
    c.write_durable(123_456_789).unwrap();
    drop(c);
    let again = annal::log::checkpoint::Checkpoint::open_direct(&disk, &path, 0).unwrap();
    assert_eq!(again.read(), 123_456_789);
    let f = disk.open(&path, OpenMode::Read).unwrap();
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, 0).unwrap();
    assert_eq!(i64::from_le_bytes(b), 123_456_789);
    // Reads through a direct handle (aligned underneath) return the same bytes.
    let direct = disk.open_direct(&path).unwrap();
    let mut back = [0u8; 8];
    direct.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(i64::from_le_bytes(back), 123_456_789);
}

#[test]
fn cached_reads_run_inline_and_uncached_ones_are_refused() {
    // `Disk::run_cached` runs a job with reads that may not wait for the device: a read of data
    // that is not in the page cache fails the job (which then runs on the blocking pool), and
    // the mode ends with the job.
    let dir = tempfile::tempdir().unwrap();
    let disk = annal::env::real::RealDisk;
    let path = dir.path().join("data");
    let want: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let f = disk.open(&path, OpenMode::CreateTruncate).unwrap();
    f.write_all_at(&want, 0).unwrap();
    f.sync_data().unwrap();
    annal::env::real::drop_cached(&path).unwrap();
    let mut got = None;
    let inline = disk.run_cached(&mut || got = Some(f.read_vec_at(want.len(), 0)));
    match got.unwrap() {
        // Served from memory (a file system that keeps its pages, such as tmpfs).
        Ok(v) => {
            assert!(inline);
            assert_eq!(v, want);
        }
        Err(e) => {
            assert!(!inline, "a failed read must fail the job");
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        }
    }
    // Outside the job, reads wait for the device as usual (and fill the cache).
    assert_eq!(f.read_vec_at(want.len(), 0).unwrap(), want);
    let mut buf = vec![0u8; 4096];
    f.read_exact_at(&mut buf, 8192).unwrap();
    assert_eq!(buf, want[8192..8192 + 4096]);
    // Now cached: the job runs inline and reads the same bytes.
    let mut again = None;
    assert!(disk.run_cached(&mut || again = Some(f.read_vec_at(want.len(), 0))));
    assert_eq!(again.unwrap().unwrap(), want);
}

#[test]
fn a_commit_counts_its_syncs_and_times_its_phases() {
    let r = rig();
    let s = Store::open(&r.env, cfg()).unwrap();
    // Every sync takes 250 µs of the manual clock, and nothing else takes any time.
    let sync = Duration::from_micros(250);
    *r.faults.slow_syncs.lock().unwrap() = Some(SlowSyncs { clock: r.clock.clone(), by: sync });
    let phases = |s: &Store| {
        let ns = |a: &std::sync::atomic::AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        (s.log().commit_stats(), ns(&s.stats.total_stage_ns), ns(&s.stats.total_publish_ns))
    };
    let mut chunks_seen = s.log().chunks().len();
    for i in 0..40 {
        let (before, stage0, publish0) = phases(&s);
        let t0 = r.clock.monotonic();
        s.append("s", ANY, vec![ev(i, 5_000)]).unwrap();
        let (after, stage1, publish1) = phases(&s);
        let chunks = s.log().chunks().len();
        // The data phase syncs the chunk; when the record went to a new chunk, also the
        // completed chunk and the directory that gained a file. Then writer.chk.
        let data_syncs: u32 = if chunks > chunks_seen { 3 } else { 1 };
        let at = format!("append {i}, {chunks} chunks");
        assert_eq!(after.syncs - before.syncs, u64::from(data_syncs) + 1, "{at}");
        assert_eq!(after.data - before.data, sync * data_syncs, "{at}");
        assert_eq!(after.checkpoint - before.checkpoint, sync, "{at}");
        // Staging syncs only when it creates the next chunk (unless that was prepared ahead);
        // publishing syncs nothing here (no index flush); the phases account for all the time.
        let (stage, publish) = (stage1 - stage0, publish1 - publish0);
        if data_syncs == 1 {
            assert_eq!(stage, Duration::ZERO, "{at}");
        }
        assert_eq!(publish, Duration::ZERO, "{at}");
        let phases = stage + (after.data - before.data) + (after.checkpoint - before.checkpoint) + publish;
        assert_eq!(phases, r.clock.monotonic() - t0, "{at}");
        chunks_seen = chunks;
    }
    assert!(chunks_seen >= 3, "the appends crossed chunks: {chunks_seen}");
}

/// A cluster node's log ([`annal::log::LogConfig::adopt_synced_tail`]) of 4 KiB chunks.
fn adopting_log() -> annal::log::LogConfig {
    annal::log::LogConfig { adopt_synced_tail: true, ..annal::log::LogConfig::new("/db", 4096) }
}

/// The frame of epoch record `n` at `pos` (78 bytes, valid at that position).
fn epoch_frame(pos: u64, n: i64) -> Vec<u8> {
    use annal::log::record::{encode_epoch, EpochRecord};
    let mut b = Vec::new();
    let rec = EpochRecord {
        log_position: pos,
        epoch_number: n,
        epoch_id: [n as u8; 16],
        prev_epoch_position: -1,
        timestamp_us: 0,
        leader_id: [7; 16],
    };
    encode_epoch(&rec, &mut b);
    b
}

/// Stages `n` epoch records; returns their ends.
fn stage_epochs(w: &mut annal::log::LogWriter, n: i64) -> Vec<u64> {
    (0..n).map(|i| w.append(78, |pos, b| b.extend(epoch_frame(pos, i))).unwrap() + 78).collect()
}

#[test]
fn a_cluster_log_adopts_the_records_it_synced_past_writer_chk_and_a_single_node_does_not() {
    use annal::log::{record::Record, Log};
    for adopt in [true, false] {
        let r = rig();
        let cfg = if adopt { adopting_log() } else { annal::log::LogConfig::new("/db", 4096) };
        let (log, mut w, _) = Log::open(&r.env, cfg.clone()).unwrap();
        let ends = stage_epochs(&mut w, 5);
        assert_eq!(log.adopt_synced(ends[4]), 0, "nothing is synced yet");
        assert_eq!(w.flush_data().unwrap(), 390);
        assert_eq!(log.adopt_synced(390), if adopt { 390 } else { 0 });
        assert_eq!(log.checkpoints.writer.read(), 0, "writer.chk stays where it was");
        drop((log, w));
        r.mem.crash();
        let (log, _, report) = Log::open(&r.env, cfg).unwrap();
        if adopt {
            assert_eq!((log.durable(), report.adopted_bytes), (390, 390));
            assert_eq!(log.checkpoints.writer.read(), 390, "recovery names what it adopted");
            assert_eq!(log.checkpoints.epoch.read(), 312, "epoch.chk names the last adopted epoch record");
            assert!(matches!(log.read_durable(312).unwrap(), Record::Epoch(e) if e.epoch_number == 4));
        } else {
            assert_eq!((log.durable(), report.adopted_bytes), (0, 0));
            assert!(report.torn_bytes > 0, "a single node zeroes what writer.chk does not name");
        }
    }
}

#[test]
fn adoption_stops_at_a_hole_and_zeroes_whatever_lies_past_it() {
    use annal::log::Log;
    let r = rig();
    let (log, mut w, _) = Log::open(&r.env, adopting_log()).unwrap();
    stage_epochs(&mut w, 2);
    assert_eq!(w.flush_data().unwrap(), 156);
    assert_eq!(log.adopt_synced(156), 156);
    // A valid record of an earlier life, synced far past the end, beyond a hole: a crashed
    // writer's unsynced writes can leave such holes.
    let far = epoch_frame(2048, 9);
    let path = chunk_path(Path::new("/db"), 0);
    let f = r.env.disk.open(&path, OpenMode::ReadWrite).unwrap();
    f.write_all_at(&far, 128 + 2048).unwrap();
    f.sync_data().unwrap();
    drop((log, w, f));
    r.mem.crash();
    let (log, _, report) = Log::open(&r.env, adopting_log()).unwrap();
    assert_eq!(log.durable(), 156, "the scan stops at the first place without a record");
    assert!(report.torn_bytes > 0, "the stale record past the hole is zeroed");
    let mut back = vec![1u8; far.len()];
    r.env.disk.open(&path, OpenMode::Read).unwrap().read_exact_at(&mut back, 128 + 2048).unwrap();
    assert!(back.iter().all(|&b| b == 0));
}

#[test]
fn records_reaching_the_next_chunk_are_not_adopted_before_writer_chk_moves() {
    use annal::log::Log;
    let r = rig();
    let (log, mut w, _) = Log::open(&r.env, adopting_log()).unwrap();
    // 52 records fill 4056 of chunk 0's 4096 bytes; the 53rd goes to chunk 1.
    let ends = stage_epochs(&mut w, 53);
    assert_eq!(ends[51], 4056);
    assert_eq!(w.flush_data().unwrap(), 4096 + 78);
    assert_eq!(log.adopt_synced(4096 + 78), 0, "past writer.chk's chunk: a checkpoint first");
    assert_eq!(log.adopt_synced(4056), 4056, "inside it: adopted");
    assert_eq!(log.flush_checkpoint(4096 + 78).unwrap(), 4096 + 78);
    drop((log, w));
    r.mem.crash();
    let (log, _, _) = Log::open(&r.env, adopting_log()).unwrap();
    assert_eq!(log.durable(), 4096 + 78);
}

#[test]
fn an_online_truncation_of_adopted_records_stays_a_truncation_after_a_crash() {
    use annal::log::Log;
    let r = rig();
    let (log, mut w, _) = Log::open(&r.env, adopting_log()).unwrap();
    stage_epochs(&mut w, 5);
    w.flush_data().unwrap();
    assert_eq!(log.adopt_synced(390), 390);
    w.truncate_to(156).unwrap();
    assert_eq!(
        (log.durable(), log.checkpoints.writer.read(), log.checkpoints.truncate.read()),
        (156, 156, -1)
    );
    drop((log, w));
    r.mem.crash();
    let (log, mut w, _) = Log::open(&r.env, adopting_log()).unwrap();
    assert_eq!(log.durable(), 156, "the dropped records are not adopted again");
    // A crash while the truncation is under way (truncate.chk set, zeroes not yet synced):
    // recovery finishes it and adopts nothing past it.
    stage_epochs(&mut w, 3);
    w.flush_data().unwrap();
    assert_eq!(log.adopt_synced(390), 390);
    log.flush_checkpoint(234).unwrap();
    log.checkpoints.truncate.write_durable(234).unwrap();
    drop((log, w));
    r.mem.crash();
    let (log, _, report) = Log::open(&r.env, adopting_log()).unwrap();
    assert_eq!((log.durable(), report.adopted_bytes), (234, 0));
    assert_eq!(log.checkpoints.truncate.read(), -1);
    assert!(report.torn_bytes > 0, "what the truncation drops is zeroed");
    let mut back = vec![1u8; 156];
    let path = chunk_path(Path::new("/db"), 0);
    r.env.disk.open(&path, OpenMode::Read).unwrap().read_exact_at(&mut back, 128 + 234).unwrap();
    assert!(back.iter().all(|&b| b == 0));
}
