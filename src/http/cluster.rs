//! What a cluster node answers that a single node does not: requests that need the leader on a
//! node that is not it, and requests that arrive while the node cannot serve.
//!
//! Rules (v5's):
//! - a node that is starting, elected but not yet confirmed (`PreMaster`), resigning or stopping, or a
//!   leader whose lease ran out (it may have been replaced without knowing it), answers reads and
//!   writes with `503 Server Is Not Ready`; so does a leader whose store has not published
//!   everything its quorum committed (its reads would be stale);
//! - a write (append, delete, metadata, users), and any request to persistent subscriptions
//!   (they run on the leader only), on a node that does not lead is
//!   forwarded to the leader, which answers it (the node relays the answer), or, with
//!   `ES-RequireMaster: True`, answered `307 Temporary Redirect` to the same path on the leader;
//!   with no leader known, `503`;
//! - a node that has no users yet (a member that has not received them from a leader) answers a
//!   request whose credentials it cannot check with `503 Server Is Not Ready`, not `401`: the
//!   credentials may well be right (so does a node whose check began before its users arrived);
//! - a read with `ES-RequireMaster: True` on a node that does not lead is redirected the same
//!   way; other reads are served from the node's committed records (never uncommitted ones).

use std::net::SocketAddr;
use std::time::Duration;

use http::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::area::admin::AdminRoute;
use super::area::node::NodeRoute;
use super::area::streams::StreamRoute;
use super::reply::Reply;
use super::request::Req;
use super::router::Route;
use super::wire::Body;
use super::Api;
use crate::cluster::VNodeState;

/// The state a cluster node serves as, and says it is (`/info`, `Node::leads`): the core's,
/// except that a leader that cannot take a write now is `PreMaster` (elected, not confirmed), so
/// a node never advertises a role it cannot serve. A leader cannot take writes while its lease
/// has run out (it has not heard from a quorum within an election timeout, so it may have been
/// replaced without knowing it yet) or while its store has not published all its quorum
/// committed (its reads would be stale).
pub fn serving_state(node: &crate::node::Node, st: &crate::cluster::shell::Status) -> VNodeState {
    match st.state {
        VNodeState::Master => {
            let leased = st.lease_until.is_some_and(|t| t > node.env().clock.monotonic());
            if leased && node.store().published_all() {
                VNodeState::Master
            } else {
                VNodeState::PreMaster
            }
        }
        other => other,
    }
}

/// The state `node` serves as (a single node is always the leader): [`serving_state`] of its
/// cluster status.
pub fn node_state(node: &crate::node::Node) -> VNodeState {
    match node.cluster() {
        Some(c) => serving_state(node, &c.status()),
        None => VNodeState::Master,
    }
}

/// Whether a route writes (and so needs the leader).
fn writes(route: &Route, method: &Method) -> bool {
    match route {
        Route::Node(_) => false,
        // Each node scavenges and merges its own copy; its history and new points reach the
        // leader as shared writes (leader-only, below).
        Route::Admin(_) => false,
        Route::Users(_) => *method != Method::GET,
        Route::Streams(r) => matches!(
            r,
            StreamRoute::Append(_)
                | StreamRoute::Incoming(..)
                | StreamRoute::Delete(_)
                | StreamRoute::MetadataPost(_)
        ),
    }
}

/// What a cluster node does with a request instead of handling it.
pub enum Gate {
    /// Answer this.
    Answer(Reply),
    /// Forward the request to the leader's HTTP endpoint and relay its answer.
    Forward(SocketAddr),
}

/// The largest answer relayed from the leader.
pub const FORWARD_REPLY_MAX_BYTES: usize = 64 << 20;
/// How long a forwarded request (or a node's own request to the leader) may take, beyond the
/// commit timeout.
pub const FORWARD_SLACK: Duration = Duration::from_secs(5);

/// What a cluster node does instead of handling the request, if anything.
pub fn gate(api: &Api, route: &Route, req: &Req) -> Option<Gate> {
    let cluster = api.node.cluster()?;
    // Persistent subscriptions and projections run on the leader only: every request to them
    // goes there; so do a scavenge's shared writes.
    let leader_only = matches!(
        route,
        Route::Node(NodeRoute::Subscriptions(_) | NodeRoute::Projections(_))
            | Route::Admin(AdminRoute::ScavengeShared)
    );
    if !leader_only && matches!(route, Route::Node(_) | Route::Admin(_)) {
        return None;
    }
    let st = cluster.status();
    let not_ready =
        || Some(Gate::Answer(Reply::status(StatusCode::SERVICE_UNAVAILABLE, "Server Is Not Ready")));
    match serving_state(&api.node, &st) {
        VNodeState::Master => return None,
        VNodeState::Initializing
        | VNodeState::PreMaster
        | VNodeState::ResigningLeader
        | VNodeState::ShuttingDown => return not_ready(),
        _ => {}
    }
    let write = leader_only || writes(route, &req.method);
    let require = req.require_master().unwrap_or(false);
    if !write && !require {
        return None;
    }
    let Some(leader) = st.leader_http else { return not_ready() };
    if write && !require && matches!(req.body, Some(Body::Full(_))) {
        return Some(Gate::Forward(leader));
    }
    let mut location = format!("{}://{leader}{}", api.node.scheme(), req.path);
    if let Some(q) = &req.raw_query {
        location.push('?');
        location.push_str(q);
    }
    Some(Gate::Answer(
        Reply::status(StatusCode::TEMPORARY_REDIRECT, "Temporary Redirect").header("location", location),
    ))
}

/// Forwards `req` to the leader at `to` and relays its answer (status, reason, body and the
/// headers that describe the result), as v5 does for writes on a non-leader. The request goes
/// as it came (path, query, headers, body) with `X-Forwarded-Host` added.
pub async fn forward(api: &Api, req: &Req, to: SocketAddr) -> Reply {
    let limit = api.node.config().cluster.commit_timeout + FORWARD_SLACK;
    let deadline = api.node.env().rt.sleep(limit);
    tokio::select! {
        biased;
        r = exchange(api, req, to) => match r {
            Ok(reply) => reply,
            Err(e) => {
                tracing::warn!(leader = %to, error = %e, "forwarding a write to the leader failed");
                Reply::status(StatusCode::SERVICE_UNAVAILABLE, "Server Is Not Ready")
            }
        },
        _ = deadline => Reply::status(StatusCode::INTERNAL_SERVER_ERROR, "Write timeout"),
    }
}

async fn exchange(api: &Api, req: &Req, to: SocketAddr) -> std::io::Result<Reply> {
    let body = match &req.body {
        Some(Body::Full(b)) => b.clone(),
        _ => bytes::Bytes::new(),
    };
    let mut head = format!("{} {}", req.method, req.path);
    if let Some(q) = &req.raw_query {
        head.push('?');
        head.push_str(q);
    }
    head.push_str(&format!(" HTTP/1.1\r\nHost: {to}\r\nConnection: close\r\n"));
    let mut out = head.into_bytes();
    let mut forwarded_host = None;
    for (k, v) in req.headers.iter() {
        let name = String::from_utf8_lossy(k).to_ascii_lowercase();
        match name.as_str() {
            "host" => forwarded_host = Some(v.to_vec()),
            // The leader's answer is relayed decoded: this node compresses it for its client
            // as it compresses its own replies (`compress::negotiate`).
            "connection" | "content-length" | "transfer-encoding" | "keep-alive" | "x-forwarded-host"
            | "accept-encoding" => {}
            _ => {
                out.extend_from_slice(k);
                out.extend_from_slice(b": ");
                out.extend_from_slice(v);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    if let Some(h) = forwarded_host {
        out.extend_from_slice(b"X-Forwarded-Host: ");
        out.extend_from_slice(&h);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(&body);
    send(&api.node, to, &out).await
}

/// Sends a node's own `POST` of `body` (JSON) to `path` on the leader at `to`, with the
/// `Authorization` header `authorization` when given, and returns the leader's answer.
pub async fn post(
    node: &crate::node::Node,
    to: SocketAddr,
    path: &str,
    authorization: Option<&[u8]>,
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut out = format!(
        "POST {path} HTTP/1.1\r\nHost: {to}\r\nConnection: close\r\nContent-Type: application/json\r\n"
    )
    .into_bytes();
    if let Some(a) = authorization {
        out.extend_from_slice(b"Authorization: ");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    send(node, to, &out).await
}

/// Writes the whole request `out` to the leader at `to` on a new connection and reads its answer.
async fn send(node: &crate::node::Node, to: SocketAddr, out: &[u8]) -> std::io::Result<Reply> {
    // With TLS the leader is dialled as a node: its certificate must chain to the trusted roots,
    // name its address and carry the reserved common name.
    let transport = match node.tls() {
        Some(tls) => crate::tls::peer::Transport::Tls(tls.clone()),
        None => crate::tls::peer::Transport::Plain,
    };
    let mut conn =
        crate::tls::peer::connect(node.env(), &transport, to, node.config().cluster.peer_name()).await?;
    conn.write_all(out).await?;
    conn.flush().await?;
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if raw.len() > FORWARD_REPLY_MAX_BYTES {
            return Err(std::io::Error::other("the leader's answer is too large to relay"));
        }
        if let Some(r) = parse_complete(&raw) {
            return Ok(r);
        }
    }
    parse_complete(&raw).ok_or_else(|| std::io::Error::other("the leader's answer was cut short"))
}

/// The relayed reply, once `raw` holds a whole response (head and `Content-Length` bytes).
fn parse_complete(raw: &[u8]) -> Option<Reply> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let mut status_line = lines.next()?.splitn(3, ' ');
    let _version = status_line.next()?;
    let status = StatusCode::from_u16(status_line.next()?.parse().ok()?).ok()?;
    let reason = status_line.next().unwrap_or("").to_owned();
    let mut reply = Reply::status(status, reason);
    let mut len = 0usize;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else { continue };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "content-length" {
            len = v.parse().ok()?;
            continue;
        }
        let relay = k == "content-type"
            || k == "location"
            || k == "etag"
            || k == "cache-control"
            || k.starts_with("es-");
        if relay {
            if let (Ok(name), Ok(value)) =
                (http::HeaderName::from_bytes(k.as_bytes()), http::HeaderValue::from_str(v))
            {
                reply.headers.push((name, value));
            }
        }
    }
    let body = raw.get(end + 4..end + 4 + len)?;
    reply.body = bytes::Bytes::copy_from_slice(body);
    Some(reply)
}

/// Whether this node can tell wrong credentials from right ones: a single node always; a
/// cluster member only once it has users and is caught up with a leader (users and their
/// changes reach a member when it replicates them).
pub fn judges_credentials(api: &Api) -> bool {
    let Some(cluster) = api.node.cluster() else { return true };
    let behind = matches!(
        cluster.state(),
        VNodeState::Initializing
            | VNodeState::Unknown
            | VNodeState::PreReplica
            | VNodeState::CatchingUp
            | VNodeState::ReadOnlyLeaderless
            | VNodeState::PreReadOnlyReplica
            | VNodeState::PreMaster
    );
    !behind && api.node.store().stream_state(crate::auth::USERS_STREAM).is_ok_and(|u| u.last >= 0)
}

/// The answer to refused credentials: `refused` (401) when this node could judge them both when
/// the check began (`judged_before`, from [`judges_credentials`]) and now; else `503 Server Is
/// Not Ready`, since the credentials may well be right. Both ends matter: a check that began
/// before the users arrived ends after they did, with a verdict taken without them.
pub fn refused_credentials(api: &Api, judged_before: bool, refused: Reply) -> Reply {
    if judged_before && judges_credentials(api) {
        refused
    } else {
        Reply::status(StatusCode::SERVICE_UNAVAILABLE, "Server Is Not Ready")
    }
}
