//! The users area: `/users`, `/users/{login}` and its commands (enable, disable, reset and
//! change password).

use std::sync::Arc;

use http::Method;

use super::super::reply::Reply;
use super::super::request::Req;
use super::super::router::{Level, Route, Spec};
use super::super::{media, users, Api};
use super::Adder;

/// A route of the users area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserRoute {
    /// `GET /users`.
    List,
    /// `POST /users`.
    Create,
    /// `GET /users/$current`.
    Current,
    /// `GET /users/{login}`.
    Get(String),
    /// `PUT /users/{login}`.
    Update(String),
    /// `DELETE /users/{login}`.
    Delete(String),
    /// `POST|PUT /users/{login}/command/enable`.
    Enable(String),
    /// `POST|PUT /users/{login}/command/disable`.
    Disable(String),
    /// `POST /users/{login}/command/reset-password`.
    ResetPassword(String),
    /// `POST /users/{login}/command/change-password`.
    ChangePassword(String),
}

/// Adds the users area's routes of a path to `out`.
pub fn routes(segs: &[&str], out: &mut Vec<(Method, Route)>) {
    let l = |x: &&str| (*x).to_owned();
    let mut out = Adder::new(out, Route::Users);
    match segs {
        ["users"] | ["users", ""] => {
            out.push((Method::GET, UserRoute::List));
            out.push((Method::POST, UserRoute::Create));
        }
        ["users", login] => {
            if *login == "$current" {
                out.push((Method::GET, UserRoute::Current));
            }
            out.push((Method::GET, UserRoute::Get(l(login))));
            out.push((Method::PUT, UserRoute::Update(l(login))));
            out.push((Method::DELETE, UserRoute::Delete(l(login))));
        }
        ["users", login, "command", cmd] => match *cmd {
            "enable" => {
                out.push((Method::POST, UserRoute::Enable(l(login))));
                out.push((Method::PUT, UserRoute::Enable(l(login))));
            }
            "disable" => {
                out.push((Method::POST, UserRoute::Disable(l(login))));
                out.push((Method::PUT, UserRoute::Disable(l(login))));
            }
            "reset-password" => out.push((Method::POST, UserRoute::ResetPassword(l(login)))),
            "change-password" => out.push((Method::POST, UserRoute::ChangePassword(l(login)))),
            _ => {}
        },
        _ => {}
    }
}

impl UserRoute {
    /// The route's requirements.
    pub fn spec(&self) -> Spec {
        match self {
            UserRoute::List
            | UserRoute::Get(_)
            | UserRoute::Delete(_)
            | UserRoute::Enable(_)
            | UserRoute::Disable(_) => Spec::new(Level::Admin, &[], media::USERS),
            UserRoute::Create | UserRoute::Update(_) | UserRoute::ResetPassword(_) => {
                Spec::new(Level::Admin, media::USERS, media::USERS)
            }
            UserRoute::Current => Spec::new(Level::User, &[], media::USERS),
            UserRoute::ChangePassword(_) => Spec::new(Level::User, media::USERS, media::USERS),
        }
    }

    /// The login the route names, if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            UserRoute::Get(l)
            | UserRoute::Update(l)
            | UserRoute::Delete(l)
            | UserRoute::Enable(l)
            | UserRoute::Disable(l)
            | UserRoute::ResetPassword(l)
            | UserRoute::ChangePassword(l) => Some(l),
            UserRoute::List | UserRoute::Create | UserRoute::Current => None,
        }
    }

    /// The largest body the route reads.
    pub fn body_limit(&self) -> Option<usize> {
        match self {
            UserRoute::Create
            | UserRoute::Update(_)
            | UserRoute::ResetPassword(_)
            | UserRoute::ChangePassword(_) => Some(users::BODY_MAX),
            _ => None,
        }
    }
}

/// Answers a users-area request.
pub async fn dispatch(api: &Arc<Api>, route: UserRoute, req: &mut Req) -> Reply {
    match route {
        UserRoute::List => users::list(api, req).await,
        UserRoute::Create => users::create(api, req).await,
        UserRoute::Current => users::current(api, req).await,
        UserRoute::Get(l) => users::get(api, req, l).await,
        UserRoute::Update(l) => users::update(api, req, l).await,
        UserRoute::Delete(l) => users::delete(api, req, l).await,
        UserRoute::Enable(l) => users::set_disabled(api, req, l, false).await,
        UserRoute::Disable(l) => users::set_disabled(api, req, l, true).await,
        UserRoute::ResetPassword(l) => users::reset_password(api, req, l).await,
        UserRoute::ChangePassword(l) => users::change_password(api, req, l).await,
    }
}
