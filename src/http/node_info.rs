//! Node routes: `/ping`, `/info`, `/info/options`, `/gossip` (this node as the only member, the
//! master) and `POST /admin/shutdown`, in the shapes a v5 node answers with; `/info/options` and
//! shutdown need `$ops` or `$admins`, the others are open to anyone.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use super::media::Media;
use super::reply::{Reply, NO_CACHE};
use super::request::Req;
use super::text::{iso8601, json_to_xml};
use super::Api;
use crate::cluster::VNodeState;
use crate::config::{Kind, OPTIONS};
use crate::log::record::Record;

/// The version `/info` reports: the v5 line whose HTTP API this node speaks.
pub const ES_VERSION: &str = "5.0.12.0";
const PING_TEXT: &str = "Ping request successfully handled";
const MSG_PING: i64 = 1001;

/// A JSON document in the negotiated type (`text/xml`/`application/xml` as XML under `root`,
/// `text/plain` as JSON text).
pub fn document(req: &Req, root: &str, v: &Value) -> Reply {
    match req.media {
        Media::TextXml | Media::AppXml => {
            let mut s = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>");
            json_to_xml(root, v, &mut s);
            Reply::body(StatusCode::OK, req.media, s)
        }
        _ => Reply::body(StatusCode::OK, req.media, serde_json::to_vec_pretty(v).unwrap_or_default()),
    }
}

/// `GET /ping`.
pub fn ping(req: &Req) -> Reply {
    if req.media == Media::TextPlain {
        return Reply::body(StatusCode::OK, Media::TextPlain, format!("Text: {PING_TEXT}"));
    }
    document(req, "text", &json!({"msgTypeId": MSG_PING, "text": PING_TEXT}))
}

/// `GET /info`: JSON text whatever the negotiated type.
pub fn info(api: &Api, req: &Req) -> Reply {
    let mode = match api.node.config().run_projections {
        crate::config::RunProjections::None => "None",
        crate::config::RunProjections::System => "System",
        crate::config::RunProjections::All => "All",
    };
    let state = state(api).name().to_ascii_lowercase();
    let v = json!({"esVersion": ES_VERSION, "state": state, "projectionsMode": mode});
    Reply::body(StatusCode::OK, req.media, serde_json::to_vec_pretty(&v).unwrap_or_default())
}

/// The state a node says it serves as: a single node is always `master`.
fn state(api: &Api) -> VNodeState {
    super::cluster::node_state(&api.node)
}

/// `GET|HEAD /health/live` (anonymous): 204, or the status `?liveCode=N` asks for, once the node
/// serves (whatever its role); 503 while it is still starting or is stopping.
pub fn live(api: &Api, req: &Req) -> Reply {
    let code = match req.query("liveCode") {
        None | Some("") => StatusCode::NO_CONTENT,
        Some(v) => match v.trim().parse::<u16>().ok().and_then(|c| StatusCode::from_u16(c).ok()) {
            Some(c) if (200..600).contains(&c.as_u16()) => c,
            _ => return Reply::bad_request("liveCode must be an HTTP status code from 200 to 599"),
        },
    };
    let stopping = *api.node.shutdown_requested().borrow();
    match state(api) {
        _ if stopping => Reply::status(StatusCode::SERVICE_UNAVAILABLE, "Shutting Down"),
        VNodeState::Initializing | VNodeState::ShuttingDown => {
            Reply::status(StatusCode::SERVICE_UNAVAILABLE, "Server Is Not Ready")
        }
        _ => Reply::status(code, code.canonical_reason().unwrap_or("OK")),
    }
}

/// Whether `node` is ready (serves its role and is not stopping), with the state it serves as:
/// what `/health/ready` answers, the `node_ready` metric, and the simulator's readiness checks.
pub fn readiness(node: &crate::node::Node) -> (bool, VNodeState) {
    let state = super::cluster::node_state(node);
    let stopping = *node.shutdown_requested().borrow();
    (serves_role(state) && !stopping, state)
}

/// Whether a node in `state` serves its role: a leader that takes writes, a follower or a
/// read-only replica that follows a leader and is caught up with it.
pub fn serves_role(state: VNodeState) -> bool {
    matches!(state, VNodeState::Master | VNodeState::Slave | VNodeState::ReadOnlyReplica)
}

/// `GET|HEAD /health/ready` (anonymous): 200 when the node serves its role ([`serves_role`]),
/// 503 otherwise (electing, catching up, without a leader, starting, stopping); the body names
/// the state either way, for the operator behind the probe.
pub fn ready(api: &Api) -> Reply {
    let (ready, state) = readiness(&api.node);
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({"ready": ready, "state": state.name().to_ascii_lowercase()});
    Reply::body(status, Media::Json, body.to_string())
}

/// `GET /sys/subsystems` (ops): the optional subsystems that run on this node, as v5 lists them
/// (its Admin UI shows the projections menu by it).
pub fn subsystems(api: &Api, req: &Req) -> Reply {
    let mut running = Vec::new();
    if api.node.config().run_projections != crate::config::RunProjections::None {
        running.push("Projections");
    }
    Reply::body(StatusCode::OK, req.media, serde_json::to_vec(&running).unwrap_or_default())
}

/// `GET /info/options`.
pub fn options(api: &Api, req: &Req) -> Reply {
    let items: Vec<Value> = OPTIONS
        .iter()
        .map(|o| {
            let mut value = api.node.config().values.get(o.name).map(|(v, _)| v.clone()).unwrap_or_default();
            if !value.is_empty() && crate::config::SENSITIVE_OPTIONS.contains(&o.name) {
                value = "****".into();
            }
            let mut m = serde_json::Map::new();
            m.insert("name".into(), json!(o.name));
            let description = match o.alias_note() {
                Some(note) => format!("{} {note}", o.help),
                None => o.help.to_string(),
            };
            m.insert("description".into(), json!(description));
            m.insert("group".into(), json!(o.group));
            m.insert("value".into(), json!(value));
            if let Kind::Enum(vals) = o.kind {
                m.insert("possibleValues".into(), json!(vals));
            }
            Value::Object(m)
        })
        .collect();
    document(req, "options", &Value::Array(items))
}

/// `GET /gossip`.
pub async fn gossip(api: &Arc<Api>, req: &Req) -> Reply {
    if api.node.config().values.get("GossipOnSingleNode").is_some_and(|(v, _)| v == "false") {
        return Reply::status(StatusCode::NOT_FOUND, "Not Found");
    }
    if let Some(cluster) = api.node.cluster() {
        return cluster_gossip(api, req, cluster);
    }
    let node = api.node.clone();
    let (epoch_position, epoch_number, epoch_id, writer, chaser, committed) = node
        .env()
        .clone()
        .blocking(move || {
            let log = node.store().log();
            let pos = log.checkpoints.epoch.read();
            let (number, id) = match (pos >= 0).then(|| log.read(pos as u64)) {
                Some(Ok(Record::Epoch(e))) => (e.epoch_number, uuid::Uuid::from_bytes(e.epoch_id)),
                Some(Ok(Record::Event(_)) | Err(_)) | None => (-1, uuid::Uuid::nil()),
            };
            (pos, number, id, log.checkpoints.writer.read(), log.checkpoints.chaser.read(), log.committed())
        })
        .await;
    let ip = api.local.ip().to_string();
    let port = api.local.port();
    let member = json!({
        "instanceId": api.node.instance_id().to_string(),
        "timeStamp": iso8601(api.node.env().clock.wall_micros()),
        "state": "Master",
        "isAlive": true,
        "internalTcpIp": ip, "internalTcpPort": 0, "internalSecureTcpPort": 0,
        "externalTcpIp": ip, "externalTcpPort": 0, "externalSecureTcpPort": 0,
        "internalHttpIp": ip, "internalHttpPort": port,
        "externalHttpIp": ip, "externalHttpPort": port,
        "lastCommitPosition": committed,
        "writerCheckpoint": writer,
        "chaserCheckpoint": chaser,
        "epochPosition": epoch_position,
        "epochNumber": epoch_number,
        "epochId": epoch_id.to_string(),
        "nodePriority": 0,
    });
    let v = json!({"members": [member], "serverIp": ip, "serverPort": port});
    document(req, "ClusterInfo", &v).header("cache-control", NO_CACHE)
}

/// Largest `POST /gossip` body.
pub const GOSSIP_BODY_MAX: usize = 1 << 20;

/// `POST /gossip`: a member pushes its view of the cluster (v5 members gossip this way). The body
/// must be a `ClusterInfo` document (`members`, each with its internal TCP endpoint and state);
/// the answer is this node's own view, as for `GET`. Annal's members gossip inside the
/// replication protocol, so a posted view is checked and logged but changes nothing here: an
/// unauthenticated HTTP caller cannot sway an election.
pub async fn gossip_post(api: &Arc<Api>, req: &mut Req) -> Reply {
    let body = match req.take_body() {
        Ok(b) => b,
        Err(reply) => return reply,
    };
    if body.len() > GOSSIP_BODY_MAX {
        return Reply::bad_request(format!("Invalid gossip: the body exceeds {GOSSIP_BODY_MAX} bytes"));
    }
    let members = match check_gossip(&body) {
        Ok(n) => n,
        Err(why) => return Reply::bad_request(format!("Invalid gossip: {why}")),
    };
    tracing::debug!(members, "gossip posted over HTTP");
    gossip(api, req).await
}

/// Checks a posted `ClusterInfo` document; returns its number of members.
fn check_gossip(body: &[u8]) -> Result<usize, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON ({e})"))?;
    let members = v.get("members").and_then(Value::as_array).ok_or("no 'members' array")?;
    for (i, m) in members.iter().enumerate() {
        let ip = m
            .get("internalTcpIp")
            .and_then(Value::as_str)
            .ok_or(format!("member {i} has no internalTcpIp"))?;
        ip.parse::<std::net::IpAddr>().map_err(|_| format!("member {i}: '{ip}' is not an IP address"))?;
        let port = m
            .get("internalTcpPort")
            .and_then(Value::as_u64)
            .ok_or(format!("member {i} has no internalTcpPort"))?;
        if port > u64::from(u16::MAX) {
            return Err(format!("member {i}: port {port} is out of range"));
        }
        m.get("state").and_then(Value::as_str).ok_or(format!("member {i} has no state"))?;
    }
    Ok(members.len())
}

/// `GET /gossip` on a cluster node: every member as this node knows it, in v5's shape, sorted
/// by HTTP endpoint, highest first.
fn cluster_gossip(api: &Arc<Api>, req: &Req, cluster: &crate::cluster::shell::Cluster) -> Reply {
    let st = cluster.status();
    let now = api.node.env().clock.wall_micros();
    // With TLS, the replication endpoints are listed as secure ports (the cluster's nodes share
    // one mode).
    let tls = api.node.tls().is_some();
    let tcp = |port: u16| if tls { 0 } else { port };
    let secure = |port: u16| if tls { port } else { 0 };
    // This node (listed first) shows the state it serves as, as `/info` does.
    let own = super::cluster::serving_state(&api.node, &st);
    let mut members: Vec<(String, Value)> = st
        .members
        .iter()
        .enumerate()
        .map(|(i, (id, view, alive))| {
            let rip = id.ip().to_string();
            let (http_ip, http_port) = match view.as_ref().and_then(|v| v.http) {
                Some(h) => (h.ip().to_string(), h.port()),
                None => (rip.clone(), 0),
            };
            let m = match view {
                Some(v) => {
                    let (epoch_position, epoch_number, epoch_id) = match v.epoch {
                        Some(e) => (e.position as i64, e.number as i64, uuid::Uuid::from_bytes(e.id)),
                        None => (-1, -1, uuid::Uuid::nil()),
                    };
                    json!({
                        "instanceId": uuid::Uuid::from_bytes(v.instance).to_string(),
                        "timeStamp": iso8601(now),
                        "state": if i == 0 { own.name() } else { v.state.name() },
                        "isAlive": alive,
                        "internalTcpIp": rip, "internalTcpPort": tcp(id.port()), "internalSecureTcpPort": secure(id.port()),
                        "externalTcpIp": http_ip, "externalTcpPort": 0, "externalSecureTcpPort": 0,
                        "internalHttpIp": http_ip, "internalHttpPort": http_port,
                        "externalHttpIp": http_ip, "externalHttpPort": http_port,
                        "lastCommitPosition": v.committed,
                        "writerCheckpoint": v.durable,
                        "chaserCheckpoint": v.committed,
                        "epochPosition": epoch_position,
                        "epochNumber": epoch_number,
                        "epochId": epoch_id.to_string(),
                        "nodePriority": v.priority,
                        "isReadOnlyReplica": v.read_only,
                    })
                }
                // A configured member not heard from yet: a seed placeholder.
                None => json!({
                    "instanceId": uuid::Uuid::nil().to_string(),
                    "timeStamp": iso8601(now),
                    "state": "Manager",
                    "isAlive": false,
                    "internalTcpIp": rip, "internalTcpPort": tcp(id.port()), "internalSecureTcpPort": secure(id.port()),
                    "externalTcpIp": rip, "externalTcpPort": tcp(id.port()), "externalSecureTcpPort": secure(id.port()),
                    "internalHttpIp": rip, "internalHttpPort": id.port(),
                    "externalHttpIp": rip, "externalHttpPort": id.port(),
                    "lastCommitPosition": -1, "writerCheckpoint": -1, "chaserCheckpoint": -1,
                    "epochPosition": -1, "epochNumber": -1, "epochId": uuid::Uuid::nil().to_string(),
                    "nodePriority": 0,
                }),
            };
            (format!("{http_ip}:{http_port:05}"), m)
        })
        .collect();
    members.sort_by(|a, b| b.0.cmp(&a.0));
    let members: Vec<Value> = members.into_iter().map(|(_, m)| m).collect();
    let v =
        json!({"members": members, "serverIp": api.local.ip().to_string(), "serverPort": api.local.port()});
    document(req, "ClusterInfo", &v).header("cache-control", NO_CACHE)
}

/// `POST /admin/shutdown`: answers, then the node stops accepting and drains.
pub fn shutdown(api: &Api) -> Reply {
    tracing::info!("shutdown requested over HTTP");
    let node = api.node.clone();
    // Answered at once; a leader hands over in the background, then the node stops.
    api.node.env().rt.spawn(Box::pin(async move { node.shut_down_gracefully().await }));
    Reply::plain(StatusCode::OK, "OK")
}

/// `POST /admin/node/resign`: a cluster leader resigns (it drains what it took, then hands over
/// to the most up-to-date follower). `400` on a node that is not a cluster's leader.
pub fn resign(api: &Api) -> Reply {
    let Some(cluster) = api.node.cluster() else {
        return Reply::bad_request("This node is not part of a cluster: there is no leadership to resign");
    };
    match cluster.resign() {
        Ok(()) => {
            tracing::info!("leader resignation requested over HTTP");
            Reply::plain(StatusCode::OK, "OK")
        }
        Err(why) => Reply::bad_request(why),
    }
}

/// `POST /admin/node/priority/{n}`: sets this cluster node's election priority until it
/// restarts (`400` for a value that is not an integer, or on a single node).
pub fn set_priority(api: &Api, raw: &str) -> Reply {
    let Some(cluster) = api.node.cluster() else {
        return Reply::bad_request("This node is not part of a cluster: node priority has no effect");
    };
    match raw.parse::<i64>() {
        Ok(n) => {
            cluster.set_priority(n);
            tracing::info!(priority = n, "node priority changed over HTTP");
            Reply::plain(StatusCode::OK, "OK")
        }
        Err(_) => Reply::bad_request(format!("Invalid node priority '{raw}': expected an integer")),
    }
}
