//! Redaction against a real node and the `annal redact` binary: events in completed and
//! scavenged chunks read back as `0xFF` bytes of the same length and marked redacted, every other
//! event reads unchanged; an event that does not exist, one in the active chunk, a bad event list
//! and a candidate that changes anything else are refused and change nothing; another user's process
//! cannot use the socket.
#![allow(clippy::disallowed_methods)]

mod http_support;

use std::path::Path;
use std::sync::Arc;

use annal::config::Config;
use annal::node::Node;
use annal::store::{RecordedEvent, Store};

fn read(store: &Store, stream: &str, n: i64) -> RecordedEvent {
    store.read_event(stream, n, false, i64::MAX / 2).unwrap().unwrap().event
}

async fn redact(db: &Path, events: &str) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["redact", "--db", &db.display().to_string(), "--events", events])
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
    )
}

/// A node serving `dir` with small chunks and the redaction socket, its serving task and a
/// client.
type Served =
    (Arc<Node>, tokio::task::JoinHandle<Result<(), annal::store::StorageError>>, http_support::Client);

async fn serve_node(dir: &Path) -> Served {
    let mut config = Config::for_dir(dir);
    config.chunk_size = 16 * 1024;
    config.password_iterations = 16;
    config.enable_unix_socket = true;
    let node = Node::open(annal::env::real::env(), config).unwrap();
    let (addr, serve) = node.bind().await.unwrap();
    (node, tokio::spawn(serve), http_support::Client { addr })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redacted_events_read_as_ff_bytes_and_nothing_else_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (node, done, client) = serve_node(dir.path()).await;
    for k in 0..4 {
        client.append_n(&format!("s{k}"), 0, 60).await;
    }
    let db = dir.path().to_path_buf();
    let store = node.store().clone();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(db.join("annal.sock")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let before: Vec<Vec<RecordedEvent>> =
        (0..4).map(|k| (0..60).map(|n| read(&store, &format!("s{k}"), n)).collect()).collect();
    let last_chunk = store.log().locate(read(&store, "s3", 59).position).unwrap();
    assert!(!last_chunk.complete);

    // Bad input first: nothing changes.
    let (code, out) = redact(&db, "5@nope").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("does not exist"), "{out}");
    let (code, out) = redact(&db, "59@s3").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("active chunk"), "{out}");
    let (code, out) = redact(&db, "1@a@b").await;
    assert_eq!(code, Some(2), "{out}");
    let (code, out) = redact(&db, "x@s0").await;
    assert_eq!(code, Some(2), "{out}");
    // A candidate that changes more than the named event's data is refused.
    let target = store.log().locate(read(&store, "s0", 3).position).unwrap();
    let mut bytes = std::fs::read(db.join(&target.file)).unwrap();
    bytes[target.file_offset as usize + 40] ^= 1;
    std::fs::write(db.join(format!("{}.tmp", target.file)), &bytes).unwrap();
    let e = store
        .log()
        .switch_redacted(&target.file, &format!("{}.tmp", target.file), &[read(&store, "s0", 3).position])
        .unwrap_err();
    assert!(e.to_string().contains("differs"), "{e}");
    for (k, events) in before.iter().enumerate() {
        for (n, b) in events.iter().enumerate() {
            assert_eq!(&read(&store, &format!("s{k}"), n as i64), b);
        }
    }

    // A scavenge rewrites the completed chunks (s2 hard-deleted), so s1's events lie in
    // scavenged chunks, found through their position maps.
    let r =
        client.request("DELETE", "/streams/s2", &[("es-harddelete", "true"), http_support::ADMIN], b"").await;
    assert_eq!(r.status, 204);
    let r =
        client.post("/admin/scavenge?threshold=-1", "application/json", &[http_support::ADMIN], b"{}").await;
    assert_eq!(r.status, 200, "{}", r.reason);
    for _ in 0..600 {
        if node.scavenger().current().is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let scavenged = store.log().locate(read(&store, "s1", 10).position).unwrap();
    assert!(!scavenged.file.ends_with(".000000"), "{scavenged:?}");
    let target = store.log().locate(read(&store, "s0", 3).position).unwrap();

    // Two events in one completed chunk and one in another.
    let (code, out) = redact(&db, "3@s0,4@s0,10@s1").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Redaction complete"), "{out}");
    for (k, n) in [(0usize, 3i64), (0, 4), (1, 10)] {
        let e = read(&store, &format!("s{k}"), n);
        let b = &before[k][n as usize];
        assert!(e.is_redacted);
        assert_eq!(e.data.len(), b.data.len());
        assert!(e.data.iter().all(|&x| x == 0xFF));
        assert_eq!(
            (&e.event_type, &e.metadata, e.id, e.timestamp_us, e.position),
            (&b.event_type, &b.metadata, b.id, b.timestamp_us, b.position)
        );
    }
    for k in [0usize, 1, 3] {
        for n in 0..60 {
            if [(0, 3), (0, 4), (1, 10)].contains(&(k, n)) {
                continue;
            }
            assert_eq!(read(&store, &format!("s{k}"), n), before[k][n as usize], "s{k}/{n}");
        }
    }
    // Over HTTP, rich entries mark the redacted event.
    let feed =
        client.get("/streams/s0/0/forward/10?embed=body", &[("accept", "application/json")]).await.json();
    let flagged: Vec<i64> = feed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["isRedacted"] == true)
        .map(|e| e["eventNumber"].as_i64().unwrap())
        .collect();
    assert_eq!(flagged, vec![4, 3], "entries are newest first: {feed}");
    // The old version is gone, the new one in place; a restart serves the redacted chunk.
    assert!(!db.join(&target.file).exists());
    node.request_shutdown();
    done.await.unwrap().unwrap();
    drop(store);
    drop(node);
    let mut config = Config::for_dir(dir.path());
    config.chunk_size = 16 * 1024;
    config.password_iterations = 16;
    let node = Node::open(annal::env::real::env(), config).unwrap();
    let e = read(node.store(), "s0", 3);
    assert!(e.is_redacted && e.data.iter().all(|&x| x == 0xFF));
    assert_eq!(read(node.store(), "s0", 5), before[0][5]);
    let _ = Arc::clone(&node);
}

/// A disk whose calls fail from the `fail_at`-th one after it is armed (the node dies there).
struct Dying {
    inner: Arc<annal::env::mem::MemDisk>,
    armed: std::sync::atomic::AtomicBool,
    calls: std::sync::atomic::AtomicU64,
    fail_at: u64,
}

impl Dying {
    fn step(&self) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.armed.load(SeqCst) && self.calls.fetch_add(1, SeqCst) >= self.fail_at {
            return Err(std::io::Error::other("the node died here"));
        }
        Ok(())
    }
}

impl annal::env::Disk for Dying {
    fn open(&self, p: &Path, m: annal::env::OpenMode) -> std::io::Result<Arc<dyn annal::env::File>> {
        self.step()?;
        self.inner.open(p, m)
    }
    fn create_dir_all(&self, p: &Path) -> std::io::Result<()> {
        self.step()?;
        self.inner.create_dir_all(p)
    }
    fn rename(&self, a: &Path, b: &Path) -> std::io::Result<()> {
        self.step()?;
        self.inner.rename(a, b)
    }
    fn remove(&self, p: &Path) -> std::io::Result<()> {
        self.step()?;
        self.inner.remove(p)
    }
    fn sync_dir(&self, p: &Path) -> std::io::Result<()> {
        self.step()?;
        self.inner.sync_dir(p)
    }
    fn list(&self, p: &Path) -> std::io::Result<Vec<String>> {
        self.step()?;
        self.inner.list(p)
    }
    fn exists(&self, p: &Path) -> bool {
        self.inner.exists(p)
    }
    fn space(&self, p: &Path) -> Option<(u64, u64)> {
        self.inner.space(p)
    }
}

/// One switch that dies at its `fail_at`-th disk call, then a power loss and a restart: the
/// chunk is the old or the new one, the redacted event reads as before or as `0xFF` bytes, and
/// every other event reads unchanged. Returns whether the switch completed.
fn switch_dies_at(fail_at: u64) -> bool {
    use annal::store::{StoreConfig, ANY};
    let (env, mem, _clock) = annal::env::mem::env(11);
    let dying = Arc::new(Dying { inner: mem.clone(), armed: false.into(), calls: 0.into(), fail_at });
    let denv = annal::env::Env::new(dying.clone(), env.clock.clone(), env.net.clone(), env.rt.clone(), 5);
    let cfg = || {
        let mut c = StoreConfig::new("/db");
        c.chunk_size = 4096;
        c.existence_filter_bytes = 1024;
        c
    };
    let store = Store::open(&denv, cfg()).unwrap();
    for i in 0..60u64 {
        let mut id = [7u8; 16];
        id[..8].copy_from_slice(&i.to_le_bytes());
        let ev = annal::store::NewEvent {
            id,
            event_type: "t".into(),
            data: bytes::Bytes::from(format!("{{\"i\":{i},\"pad\":\"{}\"}}", "y".repeat(60))),
            metadata: bytes::Bytes::new(),
            is_json: true,
        };
        store.append(&format!("s{}", i % 3), ANY, vec![ev]).unwrap();
    }
    let before: Vec<RecordedEvent> = (0..20).map(|n| read(&store, "s1", n)).collect();
    let victim = before[2].clone();
    let at = store.log().locate(victim.position).unwrap();
    assert!(at.complete);
    let mut bytes = env.read_file(&Path::new("/db").join(&at.file)).unwrap();
    annal::log::redact_chunk_bytes(&mut bytes, 4096, &[victim.position], |p| {
        (p == victim.position).then_some(at.file_offset - 128)
    })
    .unwrap();
    let tmp = format!("{}.tmp", at.file);
    let f = env.disk.open(&Path::new("/db").join(&tmp), annal::env::OpenMode::CreateNew).unwrap();
    f.write_all_at(&bytes, 0).unwrap();
    f.sync_data().unwrap();
    env.disk.sync_dir(Path::new("/db")).unwrap();
    dying.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let switched = store.log().switch_redacted(&at.file, &tmp, &[victim.position]).is_ok();
    drop(store);
    mem.crash();
    let store = Store::open(&env, cfg()).unwrap();
    for (n, b) in before.iter().enumerate() {
        let e = read(&store, "s1", n as i64);
        if n == 2 {
            let redacted = e.is_redacted && e.data.len() == b.data.len() && e.data.iter().all(|&x| x == 0xFF);
            assert!(redacted || &e == b, "fail_at {fail_at}: the event is neither old nor redacted: {e:?}");
            assert!(!switched || redacted, "fail_at {fail_at}: a completed switch was lost");
        } else {
            assert_eq!(&e, b, "fail_at {fail_at}: s1/{n} changed");
        }
    }
    switched
}

#[test]
fn a_switch_dying_at_any_step_leaves_the_old_or_the_new_chunk() {
    let mut fail_at = 0;
    while !switch_dies_at(fail_at) {
        fail_at += 1;
        assert!(fail_at < 100, "the switch never completed");
    }
    assert!(fail_at >= 3, "{fail_at}");
}

/// `redact` run as another user (uid 65534, `nobody`): `annal redact` as that user.
async fn redact_as_other_user(db: &Path, events: &str) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["redact", "--db", &db.display().to_string(), "--events", events])
        .uid(OTHER_USER)
        .gid(OTHER_USER)
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
    )
}

/// The uid and gid the other user's process runs as (`nobody` on Debian).
const OTHER_USER: u32 = 65534;

/// A process of another user cannot use the redaction socket: the socket file's mode keeps it
/// out, and were the mode loosened by hand, the node still refuses it by its peer credentials.
/// Either way the tool says why and nothing changes. Needs root (to run a process as another
/// user): ignored outside CI (`CI=true` runs it, where root's absence fails it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(annal_ci), ignore = "needs root to run `annal redact` as another user (CI=true runs this)")]
async fn another_user_cannot_use_the_redaction_socket() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "needs root to run `annal redact` as another user");
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // The other user may reach the directory (as on a shared host); the socket is the guard.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (node, done, client) = serve_node(dir.path()).await;
    for k in 0..4 {
        client.append_n("s0", k * 60, 60).await;
    }
    let db = dir.path().to_path_buf();
    let store = node.store().clone();
    let before: Vec<RecordedEvent> = (0..240).map(|n| read(&store, "s0", n)).collect();
    assert!(store.log().locate(before[3].position).unwrap().complete);

    // The socket's mode (0600) keeps the other user out.
    let (code, out) = redact_as_other_user(&db, "3@s0").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("Permission denied") || out.contains("permission denied"), "{out}");

    // Loosened by hand, the node refuses the peer by its uid.
    let sock = db.join("annal.sock");
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, out) = redact_as_other_user(&db, "3@s0").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("serves only user 0"), "{out}");

    for (n, b) in before.iter().enumerate() {
        assert_eq!(&read(&store, "s0", n as i64), b, "s0/{n} changed");
    }
    // The node's own user still can.
    let (code, out) = redact(&db, "3@s0").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(read(&store, "s0", 3).is_redacted);
    node.request_shutdown();
    done.await.unwrap().unwrap();
}
