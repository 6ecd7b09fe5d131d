//! Credentials and route levels: `Authorization: Basic` checked against the user store (cached),
//! and the first-level check of each route. Wrong credentials get 401 on every URL.

use super::errors;
use super::reply::Reply;
use super::router::Level;
use super::Api;
use crate::auth::{AuthFailure, Principal};

/// Verifies an `Authorization` header; a fresh cached verdict avoids the password hash.
pub async fn authenticate(api: &Api, header: &[u8]) -> Result<Principal, Reply> {
    let Ok(header) = std::str::from_utf8(header) else { return Err(Reply::unauthorized()) };
    let verdict = match api.node.auth().cached(header) {
        Some(v) => v,
        None => {
            let auth = api.node.auth().clone();
            let h = header.to_owned();
            api.node.env().blocking(move || auth.authenticate(&h)).await
        }
    };
    verdict.map_err(|e: AuthFailure| errors::auth(&e))
}

/// Whether `principal` may call a route of `level`.
pub fn level_ok(principal: Option<&Principal>, level: Level) -> bool {
    match level {
        Level::None => true,
        Level::User => principal.is_some(),
        Level::Ops => principal.is_some_and(Principal::is_ops),
        Level::Admin => principal.is_some_and(Principal::is_admin),
    }
}
