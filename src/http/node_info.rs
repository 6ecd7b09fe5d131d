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
    let v = json!({"esVersion": ES_VERSION, "state": "master", "projectionsMode": mode});
    Reply::body(StatusCode::OK, req.media, serde_json::to_vec_pretty(&v).unwrap_or_default())
}

/// `GET /info/options`.
pub fn options(api: &Api, req: &Req) -> Reply {
    let items: Vec<Value> = OPTIONS
        .iter()
        .map(|o| {
            let value = api.node.config().values.get(o.name).map(|(v, _)| v.clone()).unwrap_or_default();
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

/// `POST /admin/shutdown`: answers, then the node stops accepting and drains.
pub fn shutdown(api: &Api) -> Reply {
    tracing::info!("shutdown requested over HTTP");
    api.node.request_shutdown();
    Reply::plain(StatusCode::OK, "OK")
}
