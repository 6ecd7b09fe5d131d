//! Maintenance routes: `POST /admin/scavenge`, `GET /admin/scavenge/current`,
//! `DELETE /admin/scavenge/{id|current}` and `POST /admin/mergeindexes`
//! (v5's routes, replies and parameter checks). All need `$ops` or `$admins`.

use http::StatusCode;
use serde_json::json;

use super::media::Media;
use super::reply::Reply;
use super::request::Req;
use super::Api;
use crate::scavenge::{ScavengeError, StartOptions};

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
    match api.node.scavenger().start(opts).await {
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
