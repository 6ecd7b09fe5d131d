//! The node's side of redaction: the unix socket in `db/` and its two requests.
//!
//! Only the node's own user may talk to it: the socket file is made mode 0600 and each
//! connection's peer uid (`SO_PEERCRED` on the real socket) must equal the node's ([`admit`]), or
//! the connection gets an error and is closed. A switch is refused while a scavenge runs (both
//! replace chunk files).
//!
//! The socket comes from the Env seam ([`crate::env::Net::listen_local`]); environments without
//! local sockets (in-memory, simulated) refuse it, and the simulator calls [`positions`] and
//! [`switch`], what the socket serves, directly.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{Position, Reply, Request, SOCKET};
use crate::env::Conn;
use crate::node::Node;
use crate::store::{ReadError, Store};

/// Opens the socket and serves it until the node shuts down.
pub async fn start(node: Arc<Node>) -> std::io::Result<()> {
    let path = node.config().db.join(SOCKET);
    let mut listener = node.env().net.listen_local(&path).await?;
    let owner = listener.owner_uid();
    let mut shutdown = node.shutdown_requested();
    let env = node.env().clone();
    env.rt.spawn(Box::pin(async move {
        loop {
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => break,
                r = listener.accept() => match r {
                    Ok((conn, peer)) => node.env().rt.spawn(Box::pin(serve(node.clone(), conn, admit(owner, peer)))),
                    Err(e) => tracing::warn!(error = %e, "redaction socket: accept failed"),
                },
            }
        }
        let _ = node.env().disk.remove(&path);
    }));
    Ok(())
}

/// Whether a connection from a process of user `peer` may use the socket of a node running as
/// user `owner` (`None`: unknown). Only the node's own user may: anything else gets the error
/// returned, and nothing it sends is read.
pub fn admit(owner: Option<u32>, peer: Option<u32>) -> Result<(), Reply> {
    match (owner, peer) {
        (Some(me), Some(them)) if me == them => Ok(()),
        (Some(me), _) => Err(Reply::Error { message: format!("the redaction socket serves only user {me}") }),
        (None, _) => Err(Reply::Error {
            message: "the redaction socket cannot tell which user the node runs as".into(),
        }),
    }
}

async fn serve(node: Arc<Node>, conn: Box<dyn Conn>, admitted: Result<(), Reply>) {
    let (r, mut w) = tokio::io::split(conn);
    if let Err(reply) = admitted {
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
            tracing::info!(chunk = %target, candidate = %candidate, events = positions.len(), "redaction: chunk switch started");
            let reply = node.env().blocking(move || switch(&store, &target, &candidate, &positions)).await;
            let ok = matches!(reply, Reply::Switched { .. });
            node.metrics().redaction(ok);
            match &reply {
                Reply::Error { message } => {
                    tracing::error!(error = %message, "redaction: chunk switch failed")
                }
                _ => tracing::info!(ok, "redaction: chunk switch finished"),
            }
            reply
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_nodes_own_user_is_admitted() {
        assert_eq!(admit(Some(1000), Some(1000)), Ok(()));
        let other = admit(Some(1000), Some(1001)).unwrap_err();
        assert_eq!(other, Reply::Error { message: "the redaction socket serves only user 1000".into() });
        assert!(admit(Some(0), Some(1000)).is_err(), "not even root's node serves another user");
        assert!(admit(Some(1000), Some(0)).is_err(), "root is another user too");
        assert!(admit(Some(1000), None).is_err(), "a peer that cannot be told apart is refused");
        assert!(admit(None, Some(1000)).is_err());
    }
}
