//! The node's side of redaction: the unix socket in `db/` and its two requests.
//!
//! Only the node's own user may talk to it: the socket file is made mode 0600 and each
//! connection's peer uid (`SO_PEERCRED`) must equal the node's, or the connection gets an error
//! and is closed. A switch is refused while a scavenge runs (both replace chunk files).
//!
//! The socket is a local administration channel of the real node, opened with tokio's unix
//! listener; the simulated node runs without it.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{Position, Reply, Request, SOCKET};
use crate::node::Node;
use crate::store::{ReadError, Store};

/// Opens the socket and serves it until the node shuts down.
pub fn start(node: Arc<Node>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let path = node.config().db.join(SOCKET);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = tokio::net::UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let mut shutdown = node.shutdown_requested();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => break,
                r = listener.accept() => match r {
                    Ok((conn, _)) => { tokio::spawn(serve(node.clone(), conn)); }
                    Err(e) => tracing::warn!(error = %e, "redaction socket: accept failed"),
                },
            }
        }
        let _ = std::fs::remove_file(&path);
    });
    Ok(())
}

async fn serve(node: Arc<Node>, conn: tokio::net::UnixStream) {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let peer = conn.peer_cred().map(|c| c.uid()).ok();
    let (r, mut w) = conn.into_split();
    if peer != Some(me) {
        let reply = Reply::Error { message: format!("the redaction socket serves only user {me}") };
        let _ =
            w.write_all(format!("{}\n", serde_json::to_string(&reply).unwrap_or_default()).as_bytes()).await;
        return;
    }
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(req) => handle(&node, req).await,
            Err(e) => Reply::Error { message: format!("bad request: {e}") },
        };
        let text = format!("{}\n", serde_json::to_string(&reply).unwrap_or_default());
        if w.write_all(text.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Answers one request (the socket's task runs the disk work as blocking work).
pub async fn handle(node: &Arc<Node>, req: Request) -> Reply {
    let store = node.store().clone();
    match req {
        Request::Positions { stream, event_number } => {
            let now = node.env().clock.wall_micros();
            node.env().blocking(move || positions(&store, &stream, event_number, now)).await
        }
        Request::Switch { target, candidate, positions } => {
            if let Some(refused) = refuse_switch(node) {
                return refused;
            }
            node.env().blocking(move || switch(&store, &target, &candidate, &positions)).await
        }
    }
}

/// Why a switch may not run now: a scavenge runs (both replace chunk files).
pub fn refuse_switch(node: &Node) -> Option<Reply> {
    node.scavenger()
        .current()
        .map(|id| Reply::Error { message: format!("scavenge {id} is running; stop it before redacting") })
}

/// The answer to [`Request::Positions`]: where the records of event `event_number` of `stream`
/// lie (none: no such event).
pub fn positions(store: &Store, stream: &str, event_number: i64, now_us: i64) -> Reply {
    match store.read_event(stream, event_number, false, now_us) {
        Ok(Some(e)) => {
            let pos = e.event.position;
            let positions = store
                .log()
                .locate(pos)
                .map(|l| Position {
                    log_position: pos,
                    file: l.file,
                    file_offset: l.file_offset,
                    complete: l.complete,
                })
                .into_iter()
                .collect();
            Reply::Positions { positions }
        }
        Ok(None) | Err(ReadError::NoStream | ReadError::StreamDeleted) => {
            Reply::Positions { positions: Vec::new() }
        }
        Err(e) => Reply::Error { message: format!("{e:?}") },
    }
}

/// The answer to [`Request::Switch`] (see [`crate::log::Log::switch_redacted`]).
pub fn switch(store: &Store, target: &str, candidate: &str, positions: &[u64]) -> Reply {
    match store.log().switch_redacted(target, candidate, positions) {
        Ok(file) => Reply::Switched { file },
        Err(e) => Reply::Error { message: e.to_string() },
    }
}
