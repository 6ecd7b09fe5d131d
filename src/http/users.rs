//! The users API of EventStoreDB v5: list, read, create, update, delete,
//! enable/disable, reset and change password. Bodies are JSON (or `text/xml`), with keys matched
//! case-insensitively; replies carry `success`, `error` and `msgTypeId` like v5's.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::errors;
use super::media::Media;
use super::reply::Reply;
use super::request::Req;
use super::text::{escape, iso8601_offset, json_to_xml};
use super::Api;
use crate::auth::{UserError, UserRecord};

/// Largest users request body.
pub const BODY_MAX: usize = 64 * 1024;

// Message type ids (opaque to clients; stable within this server).
const MSG_LIST: i64 = 1201;
const MSG_DETAILS: i64 = 1202;
const MSG_UPDATE: i64 = 1203;

fn reply(req: &Req, status: StatusCode, v: &Value) -> Reply {
    let body = match req.media {
        Media::TextXml | Media::AppXml => {
            let mut s = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>");
            json_to_xml("result", v, &mut s);
            s.into_bytes()
        }
        _ => serde_json::to_vec_pretty(v).unwrap_or_default(),
    };
    let media = if req.media == Media::TextXml { Media::TextXml } else { Media::Json };
    Reply::body(status, media, body)
}

fn update_result(req: &Req, login: &str, r: Result<(), UserError>) -> Reply {
    match r {
        Ok(()) => reply(
            req,
            StatusCode::OK,
            &json!({"loginName": login, "success": true, "error": "Success", "msgTypeId": MSG_UPDATE}),
        ),
        Err(e) => failure(req, login, &e),
    }
}

fn failure(req: &Req, login: &str, e: &UserError) -> Reply {
    let (status, name) = errors::user(e);
    let r = reply(
        req,
        status,
        &json!({"loginName": login, "success": false, "error": name, "msgTypeId": MSG_UPDATE}),
    );
    match e {
        UserError::Invalid(why) => r.reason(why.clone()),
        UserError::NotFound | UserError::Conflict | UserError::Unauthorized | UserError::Write(_) => r,
    }
}

fn user_http(base: &str, u: &UserRecord) -> Value {
    let at = |tail: &str| format!("{base}/users/{}{tail}", escape(&u.login));
    let toggle =
        if u.disabled { ("enable", at("/command/enable")) } else { ("disable", at("/command/disable")) };
    json!({
        "loginName": u.login,
        "fullName": u.full_name,
        "groups": u.groups,
        "disabled": u.disabled,
        "links": [
            {"href": at("/command/reset-password"), "rel": "reset-password"},
            {"href": at("/command/change-password"), "rel": "change-password"},
            {"href": at(""), "rel": "edit"},
            {"href": at(""), "rel": "delete"},
            {"href": toggle.1, "rel": toggle.0},
        ]
    })
}

async fn run<T: Send + 'static>(
    api: &Arc<Api>,
    f: impl FnOnce(&crate::auth::Auth) -> T + Send + 'static,
) -> T {
    let a = api.node.auth().clone();
    api.node.env().blocking(move || f(&a)).await
}

fn body(req: &mut Req) -> Result<Map<String, Value>, Reply> {
    let b = req.take_body()?;
    let v = match req.body_media {
        Some(Media::TextXml) => {
            let text = std::str::from_utf8(&b).map_err(|_| Reply::bad_request("Invalid request body"))?;
            super::xml::parse(text)
                .map(|(_, v)| v)
                .map_err(|e| Reply::bad_request(format!("Invalid request body: {e}")))?
        }
        _ => serde_json::from_slice::<Value>(&b).map_err(|_| Reply::bad_request("Invalid request body"))?,
    };
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(Reply::bad_request("Invalid request body")),
    }
}

fn field<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    m.iter().find(|(key, _)| key.eq_ignore_ascii_case(k)).map(|(_, v)| v)
}

fn text(m: &Map<String, Value>, k: &str) -> String {
    field(m, k).and_then(Value::as_str).unwrap_or("").to_owned()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(xs)) => xs.iter().flat_map(|x| strings(Some(x))).collect(),
        Some(Value::Object(m)) => m.values().flat_map(|x| strings(Some(x))).collect(),
        _ => Vec::new(),
    }
}

fn storage(e: &crate::store::StorageError) -> Reply {
    errors::storage(e)
}

/// `GET /users`.
pub async fn list(api: &Arc<Api>, req: &mut Req) -> Reply {
    match run(api, |a| a.users()).await {
        Ok(us) => {
            let data: Vec<Value> = us.iter().map(|u| user_http(&req.base, u)).collect();
            reply(
                req,
                StatusCode::OK,
                &json!({"data": data, "success": true, "error": "Success", "msgTypeId": MSG_LIST}),
            )
        }
        Err(e) => storage(&e),
    }
}

/// `GET /users/{login}`.
pub async fn get(api: &Arc<Api>, req: &mut Req, login: String) -> Reply {
    let l = login.clone();
    match run(api, move |a| a.user(&l)).await {
        Ok(Some(u)) => reply(
            req,
            StatusCode::OK,
            &json!({"data": user_http(&req.base, &u), "success": true, "error": "Success", "msgTypeId": MSG_DETAILS}),
        ),
        Ok(None) => reply(
            req,
            StatusCode::NOT_FOUND,
            &json!({"loginName": login, "success": false, "error": "NotFound", "msgTypeId": MSG_DETAILS}),
        ),
        Err(e) => storage(&e),
    }
}

/// `GET /users/$current`.
pub async fn current(api: &Arc<Api>, req: &mut Req) -> Reply {
    let login = req.principal.as_ref().map(|p| p.login.clone()).unwrap_or_default();
    let l = login.clone();
    match run(api, move |a| a.user(&l)).await {
        Ok(Some(u)) => reply(
            req,
            StatusCode::OK,
            &json!({
                "data": {
                    "loginName": u.login,
                    "fullName": u.full_name,
                    "groups": u.groups,
                    "dateLastUpdated": iso8601_offset(u.updated_us),
                    "disabled": u.disabled,
                },
                "success": true, "error": "Success", "msgTypeId": MSG_DETAILS
            }),
        ),
        Ok(None) => failure(req, &login, &UserError::NotFound),
        Err(e) => storage(&e),
    }
}

/// `POST /users`.
pub async fn create(api: &Arc<Api>, req: &mut Req) -> Reply {
    let m = match body(req) {
        Ok(m) => m,
        Err(r) => return r,
    };
    let login = text(&m, "loginName");
    let (full_name, password, groups) =
        (text(&m, "fullName"), text(&m, "password"), strings(field(&m, "groups")));
    if password.is_empty() {
        return failure(req, &login, &UserError::Invalid("a password is required".into()));
    }
    let l = login.clone();
    match api.node.auth().create_user(&l, &full_name, groups, &password).await {
        Ok(()) => reply(
            req,
            StatusCode::CREATED,
            &json!({"loginName": login, "success": true, "error": "Success", "msgTypeId": MSG_UPDATE}),
        )
        .reason("Created")
        .header("location", format!("{}/users/{}", req.base, escape(&login))),
        Err(e) => failure(req, &login, &e),
    }
}

/// `PUT /users/{login}`.
pub async fn update(api: &Arc<Api>, req: &mut Req, login: String) -> Reply {
    let m = match body(req) {
        Ok(m) => m,
        Err(r) => return r,
    };
    let (full_name, groups) = (text(&m, "fullName"), strings(field(&m, "groups")));
    let l = login.clone();
    let r = api.node.auth().update_details(&l, &full_name, groups).await;
    update_result(req, &login, r)
}

/// `DELETE /users/{login}`.
pub async fn delete(api: &Arc<Api>, req: &mut Req, login: String) -> Reply {
    let l = login.clone();
    let r = api.node.auth().delete_user(&l).await;
    update_result(req, &login, r)
}

/// `…/command/enable` and `…/command/disable`.
pub async fn set_disabled(api: &Arc<Api>, req: &mut Req, login: String, disabled: bool) -> Reply {
    let l = login.clone();
    let r = api.node.auth().set_disabled(&l, disabled).await;
    update_result(req, &login, r)
}

/// `…/command/reset-password`.
pub async fn reset_password(api: &Arc<Api>, req: &mut Req, login: String) -> Reply {
    let m = match body(req) {
        Ok(m) => m,
        Err(r) => return r,
    };
    let new = text(&m, "newPassword");
    if new.is_empty() {
        return failure(req, &login, &UserError::Invalid("a new password is required".into()));
    }
    let l = login.clone();
    let r = api.node.auth().reset_password(&l, &new).await;
    update_result(req, &login, r)
}

/// `…/command/change-password`.
pub async fn change_password(api: &Arc<Api>, req: &mut Req, login: String) -> Reply {
    let m = match body(req) {
        Ok(m) => m,
        Err(r) => return r,
    };
    let (current, new) = (text(&m, "currentPassword"), text(&m, "newPassword"));
    if new.is_empty() {
        return failure(req, &login, &UserError::Invalid("a new password is required".into()));
    }
    let l = login.clone();
    let r = api.node.auth().change_password(&l, &current, &new).await;
    update_result(req, &login, r)
}
