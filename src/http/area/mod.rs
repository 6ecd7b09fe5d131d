//! The API's areas: each owns its routes (which paths and methods it answers, with each route's
//! level and media types) and their dispatch to its handlers. The router hands a path to the area
//! its first segment names; a new area is one more module here, one variant of
//! [`Route`](super::router::Route) and one line in each of the router's delegations (the
//! subscriptions and projections areas ride in the node area's variant, as leader-only routes).

pub mod admin;
pub mod node;
pub mod projections;
pub mod streams;
pub mod subscriptions;
pub mod users;

use http::Method;

use super::router::Route;

/// Pushes an area's routes into the router's list, each wrapped in the area's [`Route`] variant.
pub(super) struct Adder<'a, R> {
    out: &'a mut Vec<(Method, Route)>,
    wrap: fn(R) -> Route,
}

impl<'a, R> Adder<'a, R> {
    /// Routes go to `out` as `wrap(route)`.
    pub(super) fn new(out: &'a mut Vec<(Method, Route)>, wrap: fn(R) -> Route) -> Self {
        Adder { out, wrap }
    }

    /// Adds one route.
    pub(super) fn push(&mut self, (method, route): (Method, R)) {
        self.out.push((method, (self.wrap)(route)));
    }
}
