//! Backup, restore and backup verification against real nodes on real disks: full and
//! differential backups of a live node under load, the scavenge interplay (stopped and resumed
//! over HTTP; chunks replaced under the copy), restore (refused on a running node, truncation to
//! `chaser.chk`, a fresh identity), `verify` naming the file and offset of damage, bad input that
//! changes nothing, and the command lines of the release binary.
// Tests damage and copy backup files directly, as an operator (or a failing disk) would.
#![allow(clippy::disallowed_methods)]

mod http_support;

mod ports;
use ports::free_port;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use annal::backup::copy::{backup, BackupOptions, BackupSummary};
use annal::backup::restore::{restore, RestoreOptions};
use annal::backup::scavenge::{HttpScavenge, NoNode};
use annal::backup::verify::verify;
use annal::backup::{BackupError, BackupState, Manifest};
use annal::config::Config;
use annal::dblock::{database_id, read_id};
use annal::env::{Disk, DiskLock, Env, File, OpenMode};
use annal::node::Node;
use http_support as support;
use support::{ADMIN, OPS};

/// A node started on a directory of the test's choosing.
struct Server {
    client: support::Client,
    node: Arc<Node>,
    done: tokio::task::JoinHandle<()>,
}

impl std::ops::Deref for Server {
    type Target = support::Client;
    fn deref(&self) -> &support::Client {
        &self.client
    }
}

/// Starts a node on `dir` (small chunks and memtables, so a test makes many chunks and tables).
async fn start_on(dir: &Path) -> Server {
    let mut config = Config::for_dir(dir);
    config.chunk_size = 16 * 1024;
    config.existence_filter_bytes = 64 * 1024;
    config.memtable_max = 200;
    config.password_iterations = 16;
    let node = Node::open(annal::env::real::env(), config).unwrap();
    let (addr, serve) = node.bind().await.unwrap();
    let done = tokio::spawn(async move {
        serve.await.unwrap();
    });
    let s = Server { client: support::Client { addr }, node, done };
    assert_eq!(s.get("/ping", &[]).await.status, 200);
    s
}

async fn stop(s: Server) {
    s.node.request_shutdown();
    let Server { node, done, .. } = s;
    done.await.unwrap();
    drop(node);
}

fn opts(db: &Path, dest: &Path, differential: bool) -> BackupOptions {
    BackupOptions { source_db: db.into(), source_index: db.join("index"), dest: dest.into(), differential }
}

async fn backup_live(s: &Server, dest: &Path, differential: bool) -> Result<BackupSummary, BackupError> {
    let env = s.node.env().clone();
    let db = s.node.config().db.clone();
    let id = database_id(&env, &db).unwrap();
    let mut control = HttpScavenge::new(env.clone(), s.addr, "admin", "changeit");
    backup(&env, &opts(&db, dest, differential), &id, &mut control, &mut |_| {}).await
}

/// Events of `stream` a node serves, by event number.
async fn count(s: &Server, stream: &str) -> usize {
    let r = s.get(&format!("/streams/{stream}/0/forward/4096"), &[("accept", "application/json")]).await;
    if r.status == 404 {
        return 0;
    }
    assert_eq!(r.status, 200, "{stream}: {}", r.reason);
    r.json()["entries"].as_array().unwrap().len()
}

fn restore_to(
    env: &Env,
    from: &Path,
    db: &Path,
) -> Result<annal::backup::restore::RestoreSummary, BackupError> {
    let o = RestoreOptions { from: from.into(), db: db.into(), index: db.join("index"), overwrite: false };
    restore(env, &o, &mut |_, _| {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_and_differential_backups_of_a_live_node_restore_every_acknowledged_event() {
    let work = tempfile::tempdir().unwrap();
    let s = start_on(&work.path().join("node")).await;
    for k in 0..6 {
        s.append_n(&format!("s{k}"), 0, 40).await;
    }
    // Appends run all through the backup; those acknowledged before it began must be restored.
    let stop_load = Arc::new(AtomicBool::new(false));
    let client = s.client;
    let flag = stop_load.clone();
    let load = tokio::spawn(async move {
        let mut n = 0usize;
        while !flag.load(Ordering::SeqCst) {
            client.append_n("load", n, 5).await;
            n += 5;
        }
        n
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let acked_before = count(&s, "load").await;
    let dest = work.path().join("backup");
    let full = backup_live(&s, &dest, false).await.unwrap();
    assert!(full.files_copied > 10 && full.chunks >= 3, "{full:?}");
    let r = verify(s.node.env(), &dest).unwrap();
    assert!(r.events as usize >= 240 + acked_before && r.streams >= 7, "{r:?}");
    assert_eq!(r.chaser, full.chaser);

    // A differential backup copies only what changed.
    let mut chunks: Vec<String> = std::fs::read_dir(dest.join("db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("chunk-"))
        .collect();
    chunks.sort();
    chunks.pop();
    // Chunks the full backup holds settled: complete and ending at or below its writer.chk (a
    // chunk completed past it may still be rewritten by the node, so a differential run copies
    // it again).
    let settled = |n: &String| {
        let bytes = std::fs::read(dest.join("db").join(n)).unwrap();
        let h = annal::log::chunk::ChunkHeader::decode(&bytes[..annal::log::chunk::HEADER_SIZE as usize])
            .unwrap();
        (u64::from(h.end) + 1) * h.chunk_size <= full.writer as u64
    };
    let complete_before: Vec<(String, u64)> = chunks
        .into_iter()
        .filter(settled)
        .map(|n| (n.clone(), inode(&dest.join("db").join(&n)).unwrap()))
        .collect();
    assert!(!complete_before.is_empty());
    for k in 0..6 {
        s.append_n(&format!("s{k}"), 40, 40).await;
    }
    let acked_before_diff = count(&s, "load").await;
    let diff = backup_live(&s, &dest, true).await.unwrap();
    stop_load.store(true, Ordering::SeqCst);
    let written = load.await.unwrap();
    // Completed chunks were kept as they were (same files), only the last was copied again.
    for (name, ino) in &complete_before {
        assert_eq!(inode(&dest.join("db").join(name)), Some(*ino), "{name} was copied again");
    }
    assert!(diff.files_kept >= complete_before.len() as u64 && diff.files_removed >= 1, "{diff:?}");
    assert!(diff.chaser > full.chaser);
    let m = Manifest::read(s.node.env(), &dest).unwrap().unwrap();
    assert_eq!((m.state, m.differential, m.chaser), (BackupState::Complete, true, diff.chaser));
    let r = verify(s.node.env(), &dest).unwrap();
    assert!(r.events as usize >= 480 + acked_before_diff, "{r:?}");

    // Restore into a fresh directory and start a node there: everything acknowledged before the
    // differential backup began is there, and the log is a prefix of the source's.
    let target = work.path().join("restored");
    let rs = restore_to(s.node.env(), &dest, &target).unwrap();
    assert_eq!(rs.truncate_to, diff.chaser);
    let source_id = read_id(s.node.env(), &s.node.config().db).unwrap();
    let r2 = start_on(&target).await;
    for k in 0..6 {
        assert_eq!(count(&r2, &format!("s{k}")).await, 80);
    }
    let restored_load = count(&r2, "load").await;
    assert!(restored_load >= acked_before_diff && restored_load <= written, "{restored_load} of {written}");
    let a = s.get("/streams/load/0/forward/4096?embed=body", &[("accept", "application/json")]).await.json();
    let b = r2.get("/streams/load/0/forward/4096?embed=body", &[("accept", "application/json")]).await.json();
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v["entries"].as_array().unwrap().iter().map(|e| e["eventId"].as_str().unwrap().to_string()).collect()
    };
    assert!(ids(&a).ends_with(&ids(&b)), "the restored stream is a prefix (feeds are newest first)");
    assert_eq!(read_id(r2.node.env(), &target).unwrap(), None, "the backup's identity is not restored");
    assert_ne!(database_id(r2.node.env(), &target).unwrap(), source_id.unwrap());
    // The restored node accepts writes.
    r2.append_n("after-restore", 0, 3).await;
    stop(r2).await;
    stop(s).await;
}

async fn wait_idle(s: &Server) {
    for _ in 0..600 {
        if s.get("/admin/scavenge/current", &[OPS]).await.json()["scavengeId"] == "" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the scavenge did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_scavenge_is_stopped_for_the_backup_and_resumed() {
    let work = tempfile::tempdir().unwrap();
    let s = start_on(&work.path().join("node")).await;
    for k in 0..40 {
        s.append_n(&format!("d{k}"), 0, 30).await;
        let r = s.request("DELETE", &format!("/streams/d{k}"), &[("es-harddelete", "true")], b"").await;
        assert_eq!(r.status, 204);
    }
    // A slow scavenge (1% throttle) that is still running when the backup asks.
    let r =
        s.post("/admin/scavenge?threshold=-1&throttlePercent=1", "application/json", &[ADMIN], b"{}").await;
    assert_eq!(r.status, 200, "{}", r.reason);
    let id = r.json()["scavengeId"].as_str().unwrap().to_string();
    let dest = work.path().join("backup");
    let sum = backup_live(&s, &dest, false).await.unwrap();
    assert_eq!(sum.scavenge_stopped.as_deref(), Some(id.as_str()), "{sum:?}");
    let resumed = sum.scavenge_resumed.clone().unwrap().unwrap();
    assert_ne!(resumed, id);
    verify(s.node.env(), &dest).unwrap();
    wait_idle(&s).await;
    // Wrong credentials: the backup refuses and copies nothing.
    let r = s.post("/admin/scavenge?throttlePercent=1", "application/json", &[ADMIN], b"{}").await;
    assert_eq!(r.status, 200);
    let env = s.node.env().clone();
    let db = s.node.config().db.clone();
    let id = database_id(&env, &db).unwrap();
    let mut bad = HttpScavenge::new(env.clone(), s.addr, "admin", "wrong");
    let other = work.path().join("other");
    let e = backup(&env, &opts(&db, &other, false), &id, &mut bad, &mut |_| {}).await.unwrap_err();
    assert!(matches!(e, BackupError::Scavenge(ref m) if m.contains("401")), "{e}");
    assert!(!other.exists(), "nothing was created");
    wait_idle(&s).await;
    stop(s).await;
}

/// A disk that, the first time the chunk `victim` is opened for reading, does what a scavenge
/// does to it: a new version is renamed into place and the old file removed.
struct ScavengeUnderfoot {
    inner: Arc<dyn Disk>,
    victim: PathBuf,
    done: AtomicBool,
}

impl Disk for ScavengeUnderfoot {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        if path == self.victim && mode == OpenMode::Read && !self.done.swap(true, Ordering::SeqCst) {
            let name = path.file_name().unwrap().to_string_lossy().replace(".000000", ".000001");
            let newer = path.with_file_name(name);
            let bytes = {
                let f = self.inner.open(path, OpenMode::Read)?;
                f.read_vec_at(f.len()? as usize, 0)?
            };
            let tmp = path.with_extension("scavenge.tmp");
            self.inner.open(&tmp, OpenMode::CreateNew)?.write_all_at(&bytes, 0)?;
            self.inner.rename(&tmp, &newer)?;
            self.inner.remove(path)?;
        }
        self.inner.open(path, mode)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn space(&self, path: &Path) -> Option<(u64, u64)> {
        self.inner.space(path)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Option<DiskLock>> {
        self.inner.try_lock(path)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_replaced_during_the_copy_does_not_break_the_backup() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("node");
    let s = start_on(&db).await;
    for k in 0..4 {
        s.append_n(&format!("s{k}"), 0, 100).await;
    }
    stop(s).await;
    let real = annal::env::real::env();
    let env = Env::new(
        Arc::new(ScavengeUnderfoot {
            inner: real.disk.clone(),
            victim: db.join("chunk-000001.000000"),
            done: AtomicBool::new(false),
        }),
        real.clock.clone(),
        real.net.clone(),
        real.rt.clone(),
        7,
    );
    let dest = work.path().join("backup");
    let id = database_id(&env, &db).unwrap();
    let sum = backup(&env, &opts(&db, &dest, false), &id, &mut NoNode, &mut |_| {}).await.unwrap();
    assert!(sum.relisted >= 1, "{sum:?}");
    let names = real.disk.list(&dest.join("db")).unwrap();
    assert!(names.contains(&"chunk-000001.000001".to_string()), "{names:?}");
    assert!(!names.contains(&"chunk-000001.000000".to_string()), "{names:?}");
    let r = verify(&real, &dest).unwrap();
    assert!(r.events >= 400 && r.streams >= 4, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_refuses_a_directory_a_node_runs_on_and_changes_nothing() {
    let work = tempfile::tempdir().unwrap();
    let s = start_on(&work.path().join("node")).await;
    s.append_n("a", 0, 50).await;
    let dest = work.path().join("backup");
    backup_live(&s, &dest, false).await.unwrap();
    let db = s.node.config().db.clone();
    let env = s.node.env().clone();
    let before = env.disk.list(&db).unwrap();
    let o = RestoreOptions { from: dest.clone(), db: db.clone(), index: db.join("index"), overwrite: true };
    let e = restore(&env, &o, &mut |_, _| {}).unwrap_err();
    assert!(matches!(e, BackupError::NodeRunning(_)), "{e}");
    assert_eq!(env.disk.list(&db).unwrap(), before);
    assert!(
        !env.disk.exists(&db.join("truncate.chk"))
            || annal::backup::read_checkpoint(&env, &db.join("truncate.chk")).unwrap() == -1
    );
    // Once the node has stopped, the restore onto its own directory goes through (with
    // --overwrite), and the node starts on it.
    stop(s).await;
    let e = restore(&env, &RestoreOptions { overwrite: false, ..o.clone() }, &mut |_, _| {}).unwrap_err();
    assert!(matches!(e, BackupError::NotEmpty { .. }), "{e}");
    let sum = restore(&env, &o, &mut |_, _| {}).unwrap();
    assert!(sum.removed > 0);
    let s = start_on(&db).await;
    assert_eq!(count(&s, "a").await, 50);
    stop(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_the_file_and_offset_of_damage_and_bad_input_changes_nothing() {
    let work = tempfile::tempdir().unwrap();
    let s = start_on(&work.path().join("node")).await;
    for k in 0..3 {
        s.append_n(&format!("s{k}"), 0, 60).await;
    }
    let dest = work.path().join("backup");
    backup_live(&s, &dest, false).await.unwrap();
    let env = s.node.env().clone();
    verify(&env, &dest).unwrap();

    // A backup of another database is refused, nothing copied.
    let other_node = start_on(&work.path().join("other")).await;
    let before = env.disk.list(&dest.join("db")).unwrap();
    let e = backup_live(&other_node, &dest, true).await.unwrap_err();
    assert!(matches!(e, BackupError::OtherDatabase { .. }), "{e}");
    assert_eq!(env.disk.list(&dest.join("db")).unwrap(), before);
    stop(other_node).await;
    // A full backup into a directory that holds one is refused.
    assert!(matches!(backup_live(&s, &dest, false).await.unwrap_err(), BackupError::NotEmpty { .. }));
    stop(s).await;

    // A bit flipped inside a record of chunk 1: verify names the file and the record's offset.
    let damaged = work.path().join("damaged");
    copy_tree(&dest, &damaged);
    let chunk = damaged.join("db/chunk-000001.000000");
    let f = env.disk.open(&chunk, OpenMode::ReadWrite).unwrap();
    let at = 128 + 1000;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    drop(f);
    match verify(&env, &damaged).unwrap_err() {
        BackupError::Corrupt { file, offset, detail } => {
            assert_eq!(file, chunk);
            assert!(offset >= 128 && offset <= at, "{offset}: {detail}");
        }
        e => panic!("{e}"),
    }

    // A missing chunk: verify and restore say which, and the restore target stays empty.
    let missing = work.path().join("missing");
    copy_tree(&dest, &missing);
    std::fs::remove_file(missing.join("db/chunk-000001.000000")).unwrap();
    let e = verify(&env, &missing).unwrap_err();
    assert!(e.to_string().contains("chunk 1 is missing"), "{e}");
    let target = work.path().join("target");
    let e = restore_to(&env, &missing, &target).unwrap_err();
    assert!(e.to_string().contains("chunk 1 is missing"), "{e}");
    assert!(!target.exists());

    // A half-finished backup: verify and restore refuse it.
    let half = work.path().join("half");
    copy_tree(&dest, &half);
    let mut m = Manifest::read(&env, &half).unwrap().unwrap();
    m.state = BackupState::InProgress;
    m.write(&env, &half).unwrap();
    assert!(matches!(verify(&env, &half).unwrap_err(), BackupError::Incomplete(_)));
    assert!(matches!(restore_to(&env, &half, &target).unwrap_err(), BackupError::Incomplete(_)));
    assert!(!target.exists());
    // A directory that is no backup at all.
    assert!(matches!(verify(&env, work.path()).unwrap_err(), BackupError::NotA { .. }));
}

fn inode(p: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| m.ino())
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_lines_back_up_verify_and_restore() {
    let work = tempfile::tempdir().unwrap();
    let s = start_on(&work.path().join("node")).await;
    for k in 0..3 {
        s.append_n(&format!("s{k}"), 0, 70).await;
    }
    let bin = env!("CARGO_BIN_EXE_annal");
    let db = s.node.config().db.clone();
    let dest = work.path().join("backup");
    let run = |args: Vec<String>| async move {
        let out = tokio::process::Command::new(bin).args(&args).output().await.unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let p = |p: &Path| p.display().to_string();
    let url = format!("http://{}", s.addr);
    let (code, out, err) = run(vec![
        "backup".into(),
        "--db".into(),
        p(&db),
        "--to".into(),
        p(&dest),
        "--url".into(),
        url.clone(),
        "--quiet".into(),
    ])
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("full backup") && out.contains("covers the log up to position"), "{out}");
    let (code, out, err) = run(vec!["backup".into(), "verify".into(), p(&dest)]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("last event position:") && out.contains("streams:"), "{out}");
    // A node that runs on the directory but does not answer at the URL: refused, nothing copied.
    let dead_url = format!("http://127.0.0.1:{}", free_port());
    let other = work.path().join("other");
    let (code, out, err) = run(vec![
        "backup".into(),
        "--db".into(),
        p(&db),
        "--to".into(),
        p(&other),
        "--url".into(),
        dead_url.clone(),
        "--quiet".into(),
    ])
    .await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("does not answer"), "{err}");
    assert!(!other.exists());
    // Restoring onto the running node's directory is refused.
    let (code, out, err) =
        run(vec!["restore".into(), "--from".into(), p(&dest), "--db".into(), p(&db), "--overwrite".into()])
            .await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("a node is running on"), "{err}");
    // Usage errors exit 2.
    let (code, _, err) = run(vec!["restore".into(), "--from".into(), p(&dest)]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--db is required"), "{err}");
    let target = work.path().join("restored");
    let (code, out, err) =
        run(vec!["restore".into(), "--from".into(), p(&dest), "--db".into(), p(&target), "--quiet".into()])
            .await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("truncate.chk ="), "{out}");
    // A corrupted backup fails verify with exit 1, naming the file and the offset.
    let chunk = dest.join("db/chunk-000000.000000");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[128 + 500] ^= 0x01;
    std::fs::write(&chunk, bytes).unwrap();
    let (code, out, err) = run(vec!["backup".into(), "verify".into(), p(&dest)]).await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("chunk-000000.000000") && err.contains("at offset"), "{err}");
    // A stopped node, backed up without its HTTP API (its lock shows no node runs).
    stop(s).await;
    let (code, out, err) = run(vec![
        "backup".into(),
        "--db".into(),
        p(&db),
        "--to".into(),
        p(&other),
        "--url".into(),
        dead_url,
        "--quiet".into(),
    ])
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = run(vec!["backup".into(), "verify".into(), p(&other)]).await;
    assert_eq!(code, Some(0), "{out}{err}");
}

/// A disk for the copier that, before each of its calls, lets the node append (and now and then
/// merge its index), so appends, chunk completions and index flushes and merges happen between
/// any two steps of the backup; and that fails every call from `fail_at` on (the copier dies
/// there).
struct Interleaved {
    inner: Arc<annal::env::mem::MemDisk>,
    ops: std::sync::atomic::AtomicU64,
    fail_at: Option<u64>,
    node: Box<dyn Fn(u64) + Send + Sync>,
}

impl Interleaved {
    fn step(&self) -> io::Result<()> {
        let n = self.ops.fetch_add(1, Ordering::SeqCst);
        if self.fail_at.is_some_and(|f| n >= f) {
            return Err(io::Error::other("the copier died here"));
        }
        (self.node)(n);
        Ok(())
    }
}

impl Disk for Interleaved {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        self.step()?;
        self.inner.open(path, mode)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        self.inner.create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.step()?;
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.step()?;
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.step()?;
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn space(&self, path: &Path) -> Option<(u64, u64)> {
        self.inner.space(path)
    }
}

fn mem_event(i: u64) -> annal::store::NewEvent {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&i.to_le_bytes());
    id[8] = 0xbb;
    annal::store::NewEvent {
        id,
        event_type: format!("t{i}"),
        data: bytes::Bytes::from(format!("{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat((i % 7 * 40) as usize))),
        metadata: bytes::Bytes::new(),
        is_json: true,
    }
}

fn mem_config(dir: &str) -> annal::store::StoreConfig {
    let mut c = annal::store::StoreConfig::new(dir);
    c.chunk_size = 4096;
    c.memtable_max = 16;
    c.max_index_tables = 2;
    c.existence_filter_bytes = 1024;
    c
}

/// One run: a node appending while a backup into `/backup` runs and dies at `fail_at` (with a
/// power loss of the machine when `power_loss`), then a differential backup that completes;
/// the backup restored into a fresh directory must open, hold every append acknowledged before
/// the completing backup began, and be a byte-for-byte prefix of the source's log.
async fn copier_crash_run(fail_at: Option<u64>, power_loss: bool) {
    use annal::store::{Store, ANY};
    let (env, disk, _clock) = annal::env::mem::env(fail_at.unwrap_or(999) ^ 0x5eed);
    let store = std::sync::Mutex::new(Some(Store::open(&env, mem_config("/src")).unwrap()));
    let appended = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for i in 0..40 {
        let s = store.lock().unwrap().clone().unwrap();
        s.append(&format!("s{}", i % 5), ANY, vec![mem_event(i)]).unwrap();
        appended.fetch_add(1, Ordering::SeqCst);
    }
    let store = Arc::new(store);
    let node = {
        let (store, appended) = (store.clone(), appended.clone());
        move |n: u64| {
            let Some(s) = store.lock().unwrap().clone() else { return };
            let i = appended.fetch_add(1, Ordering::SeqCst);
            s.append(&format!("s{}", i % 5), ANY, vec![mem_event(i)]).unwrap();
            if n % 9 == 4 {
                s.index().merge_now();
            }
        }
    };
    let backup_env = |fail_at: Option<u64>, node: Box<dyn Fn(u64) + Send + Sync>| {
        Env::new(
            Arc::new(Interleaved { inner: disk.clone(), ops: Default::default(), fail_at, node }),
            env.clock.clone(),
            env.net.clone(),
            env.rt.clone(),
            1,
        )
    };
    let o = opts(Path::new("/src"), Path::new("/backup"), true);
    if let Some(f) = fail_at {
        let benv = backup_env(Some(f), Box::new(node.clone()));
        let r = backup(&benv, &o, "db-1", &mut NoNode, &mut |_| {}).await;
        assert!(r.is_err(), "the copier died at call {f}");
        if power_loss {
            let s = store.lock().unwrap().take().unwrap();
            drop(s);
            disk.crash();
            *store.lock().unwrap() = Some(Store::open(&env, mem_config("/src")).unwrap());
        }
        // What it left is refused as a backup (unless it died before writing anything).
        if env.disk.exists(Path::new("/backup/annal-backup.json")) {
            match verify(&env, Path::new("/backup")) {
                Err(BackupError::Incomplete(_)) => {}
                r => panic!("an interrupted backup (copier died at call {f}) verified: {r:?}"),
            }
        }
    }
    let acked_before = appended.load(Ordering::SeqCst);
    let benv = backup_env(None, Box::new(node.clone()));
    let sum = backup(&benv, &o, "db-1", &mut NoNode, &mut |_| {}).await.unwrap();
    let report = verify(&env, Path::new("/backup")).unwrap_or_else(|e| panic!("fail_at {fail_at:?}: {e}"));
    restore_to(&env, Path::new("/backup"), Path::new("/restored")).unwrap();
    let restored = Store::open(&env, mem_config("/restored")).unwrap();
    let source = store.lock().unwrap().clone().unwrap();
    // Every append acknowledged before the backup began is there, in its stream.
    let mut events = 0u64;
    let mut pos = 0u64;
    for rec in restored.log().scan(0) {
        let rec = rec.unwrap();
        pos = rec.log_position();
        if let annal::log::record::Record::Event(e) = &rec {
            if e.stream.starts_with('s') && e.event_type.starts_with('t') {
                events += 1;
            }
            // A prefix of the source's log, record for record.
            assert_eq!(source.log().read(e.log_position).unwrap(), rec, "fail_at {fail_at:?}");
        }
    }
    assert!(
        events >= acked_before,
        "fail_at {fail_at:?}: {events} events restored, {acked_before} acknowledged before"
    );
    assert!(pos <= source.log().committed());
    assert_eq!(report.chaser, sum.chaser);
}

#[tokio::test]
async fn a_copier_dying_at_any_call_leaves_a_backup_that_the_next_run_completes() {
    // A clean run, to count the calls a backup makes.
    let (env, disk, _clock) = annal::env::mem::env(3);
    let store = annal::store::Store::open(&env, mem_config("/src")).unwrap();
    for i in 0..40 {
        store.append(&format!("s{}", i % 5), annal::store::ANY, vec![mem_event(i)]).unwrap();
    }
    let counting = Arc::new(Interleaved {
        inner: disk.clone(),
        ops: Default::default(),
        fail_at: None,
        node: Box::new(|_| {}),
    });
    let benv = Env::new(counting.clone(), env.clock.clone(), env.net.clone(), env.rt.clone(), 1);
    backup(&benv, &opts(Path::new("/src"), Path::new("/backup"), true), "db-1", &mut NoNode, &mut |_| {})
        .await
        .unwrap();
    let calls = counting.ops.load(Ordering::SeqCst);
    assert!(calls > 40, "{calls}");
    copier_crash_run(None, false).await;
    for f in 0..calls + 10 {
        copier_crash_run(Some(f), f % 3 == 0).await;
    }
}
