//! Maintenance routes: `POST /admin/scavenge`, `GET /admin/scavenge/current`,
//! `DELETE /admin/scavenge/{id|current}` and `POST /admin/mergeindexes`
//! (v5's routes, replies and parameter checks). All need `$ops` or `$admins`.
//!
//! A cluster member's scavenge writes its history and new scavenge points through the leader
//! ([`ClusterLeader`], which posts them to `POST /admin/scavenge/shared` there on behalf of the
//! user who started the run); the leader, or a single node, writes them itself.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use http::StatusCode;
use serde_json::json;

use super::media::Media;
use super::reply::Reply;
use super::request::Req;
use super::Api;
use crate::cluster::VNodeState;
use crate::node::Node;
use crate::scavenge::shared::{Credentials, Leader, Pending, SharedWrite, Written};
use crate::scavenge::{ScavengeError, StartOptions};

/// The largest body of `POST /admin/scavenge/shared`.
pub const SHARED_WRITE_BODY_MAX: usize = crate::scavenge::shared::HISTORY_DATA_MAX_BYTES + 4096;

/// Parses one optional query parameter.
fn param<T: std::str::FromStr>(req: &Req, name: &str, default: T, what: &str) -> Result<T, Reply> {
    match req.query(name) {
        None | Some("") => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| Reply::bad_request(format!("{name} must be {what}"))),
    }
}

fn error_reply(e: ScavengeError) -> Reply {
    match e {
        ScavengeError::InvalidParameter(m) => Reply::bad_request(m),
        ScavengeError::AlreadyRunning => Reply::bad_request("Scavenge is already running"),
        ScavengeError::NotFound => Reply::plain(StatusCode::NOT_FOUND, "Scavenge Id does not exist"),
        ScavengeError::Storage(s) => Reply::plain(StatusCode::INTERNAL_SERVER_ERROR, s.to_string()),
        ScavengeError::Db(d) => Reply::plain(StatusCode::INTERNAL_SERVER_ERROR, d.to_string()),
        ScavengeError::NoLeader(m) => Reply::plain(StatusCode::SERVICE_UNAVAILABLE, m),
        e @ ScavengeError::LeaderRefused(status, _) => {
            let status = StatusCode::from_u16(status)
                .ok()
                .filter(|s| s.is_client_error())
                .unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            Reply::plain(status, e.to_string())
        }
    }
}

fn parse_start(req: &Req) -> Result<StartOptions, Reply> {
    let threads: u32 = param(req, "threads", 1, "an integer from 1 to 4")?;
    let threshold: i64 = param(req, "threshold", 0, "an integer")?;
    let throttle_percent: u32 = param(req, "throttlePercent", 100, "an integer from 1 to 100")?;
    let sync_only = match req.query("syncOnly").map(str::to_ascii_lowercase).as_deref() {
        None | Some("") | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(Reply::bad_request("syncOnly must be true or false")),
    };
    // Deprecated and ignored, but still validated as the anchor does.
    let _start_from_chunk: u64 = param(req, "startFromChunk", 0, "a non-negative integer")?;
    Ok(StartOptions { threads, threshold, throttle_percent, sync_only })
}

/// `POST /admin/scavenge`.
pub async fn start(api: &Api, req: &Req) -> Reply {
    let opts = match parse_start(req) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let credentials = req.headers.get("authorization").map(bytes::Bytes::copy_from_slice);
    match api.node.scavenger().start_by(opts, credentials).await {
        Ok(id) => Reply::body(StatusCode::OK, Media::Json, json!({"scavengeId": id}).to_string()),
        Err(e) => error_reply(e),
    }
}

/// `GET /admin/scavenge/current`.
pub fn current(api: &Api) -> Reply {
    let (id, link) = match api.node.scavenger().current() {
        Some(id) => (id.clone(), format!("/admin/scavenge/{id}")),
        None => (String::new(), String::new()),
    };
    Reply::body(StatusCode::OK, Media::Json, json!({"scavengeId": id, "scavengeLink": link}).to_string())
}

/// `DELETE /admin/scavenge/{id}`: answers once the run has stopped.
pub async fn stop(api: &Api, id: &str) -> Reply {
    match api.node.scavenger().stop(id).await {
        Ok(id) => Reply::body(StatusCode::OK, Media::Json, serde_json::Value::String(id).to_string()),
        Err(e) => error_reply(e),
    }
}

/// Why the log level cannot be read or changed: the node runs inside a process that owns its log.
const NO_LOG_CONTROL: &str = "The log level is set by the process that embeds this node";

/// `GET /admin/loglevel`: `{"level": "Info", "format": "Text"}`.
pub fn log_level(api: &Api) -> Reply {
    match api.node.log_control() {
        Some(c) => {
            let body = serde_json::json!({"level": c.level(), "format": c.format()});
            Reply::body(StatusCode::OK, super::media::Media::Json, body.to_string())
        }
        None => Reply::status(StatusCode::NOT_IMPLEMENTED, NO_LOG_CONTROL),
    }
}

/// `POST /admin/loglevel?level=Debug`: puts a level in force until the next change or restart
/// (the `--log-level` option is not rewritten).
pub fn set_log_level(api: &Api, req: &Req) -> Reply {
    let Some(control) = api.node.log_control() else {
        return Reply::status(StatusCode::NOT_IMPLEMENTED, NO_LOG_CONTROL);
    };
    let asked = req.query("level").unwrap_or_default();
    let Some(level) = crate::logs::level(asked) else {
        return Reply::bad_request(format!(
            "level must be one of {} (got {asked:?})",
            crate::logs::LEVELS.join(", ")
        ));
    };
    let before = control.level();
    match control.set_level(level) {
        Ok(()) => {
            tracing::warn!(from = before, to = level, "log level changed over HTTP");
            log_level(api)
        }
        Err(e) => Reply::status(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// `POST /admin/reloadconfig`: reloads the certificates and answers once the reload is done:
/// 200 with the new certificate's facts, or the error that left the old ones in force. (v5 answers
/// 200 at once and reports failures only in its log.)
pub async fn reload_config(api: &Api) -> Reply {
    tracing::info!("reloading the node's configuration as requested over HTTP");
    match api.node.reload_certificates().await {
        None => Reply::body(
            StatusCode::OK,
            super::media::Media::TextPlain,
            "OK: TLS is disabled (insecure mode), so there are no certificates to reload\n",
        ),
        Some(Ok(facts)) => Reply::body(
            StatusCode::OK,
            super::media::Media::TextPlain,
            format!(
                "OK: certificates reloaded; CN {:?}, thumbprint {}, valid until {}\n",
                facts.cn,
                facts.thumbprint,
                super::text::iso8601(facts.not_after.saturating_mul(1_000_000))
            ),
        ),
        Some(Err(e)) => super::errors::reload(&e),
    }
}

/// `POST /admin/mergeindexes`: merges the index tables in the background.
pub fn merge_indexes(api: &Api) -> Reply {
    api.node.store().index().merge_now();
    Reply::plain(StatusCode::OK, "OK")
}

/// `POST /admin/scavenge/shared`: writes a member's scavenge record (the cluster gate sends it
/// here only on the leader). 200 with `{"eventNumber": n}`.
pub async fn shared_write(api: &Api, req: &mut Req) -> Reply {
    let body = match req.take_body() {
        Ok(b) => b,
        Err(r) => return r,
    };
    let w: SharedWrite = match serde_json::from_slice(&body) {
        Ok(w) => w,
        Err(e) => return Reply::bad_request(format!("not a scavenge's shared write: {e}")),
    };
    if let Err(e) = w.check() {
        return error_reply(e);
    }
    match api.node.scavenger().apply_shared(w).await {
        Ok(written) => Reply::body(StatusCode::OK, Media::Json, json!(written).to_string()),
        Err(e) => error_reply(e),
    }
}

/// A cluster member's route for its scavenges' shared writes: its own store while it leads,
/// else the leader's `POST /admin/scavenge/shared`.
pub struct ClusterLeader {
    node: Weak<Node>,
}

impl ClusterLeader {
    /// The route of `node`'s shared writes.
    pub fn new(node: &Arc<Node>) -> Arc<ClusterLeader> {
        Arc::new(ClusterLeader { node: Arc::downgrade(node) })
    }
}

impl Leader for ClusterLeader {
    fn write(&self, w: SharedWrite, credentials: Credentials) -> Pending {
        let node = self.node.clone();
        Box::pin(async move {
            let node =
                node.upgrade().ok_or_else(|| ScavengeError::NoLeader("the node is stopping".into()))?;
            let status = node.cluster().map(|c| c.status());
            match status {
                // A single node, or the leader: write here (the store refuses if it lost the lead).
                None => node.scavenger().apply_shared(w).await,
                Some(st) if st.state == VNodeState::Master => node.scavenger().apply_shared(w).await,
                Some(st) => match st.leader_http {
                    Some(to) => remote(&node, to, &w, credentials).await,
                    None => Err(ScavengeError::NoLeader(format!(
                        "no leader is known (this node is {:?}): a scavenge records its history in \
                         $scavenges through the leader; try again once the cluster has one",
                        st.state
                    ))),
                },
            }
        })
    }
}

async fn remote(
    node: &Node,
    to: SocketAddr,
    w: &SharedWrite,
    credentials: Credentials,
) -> Result<Written, ScavengeError> {
    let body = serde_json::to_vec(w).map_err(|e| ScavengeError::InvalidParameter(e.to_string()))?;
    let limit = node.config().cluster.commit_timeout + super::cluster::FORWARD_SLACK;
    let post = super::cluster::post(node, to, "/admin/scavenge/shared", credentials.as_deref(), &body);
    let reply = tokio::select! {
        biased;
        r = post => r.map_err(|e| ScavengeError::NoLeader(format!("the leader at {to} cannot be reached: {e}")))?,
        _ = node.env().rt.sleep(limit) => {
            return Err(ScavengeError::NoLeader(format!("the leader at {to} did not answer within {limit:?}")))
        }
    };
    if reply.status != StatusCode::OK {
        let reason = String::from_utf8_lossy(&reply.body).trim().to_owned();
        let reason = if reason.is_empty() {
            reply.reason.as_deref().unwrap_or(reply.status.as_str()).to_owned()
        } else {
            reason
        };
        return Err(if reply.status == StatusCode::SERVICE_UNAVAILABLE {
            ScavengeError::NoLeader(format!("the leader at {to} is not ready: {reason}"))
        } else {
            ScavengeError::LeaderRefused(reply.status.as_u16(), reason)
        });
    }
    serde_json::from_slice(&reply.body)
        .map_err(|e| ScavengeError::NoLeader(format!("the leader at {to} answered unreadably: {e}")))
}
