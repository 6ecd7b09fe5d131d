//! The API's areas: each owns its routes (which paths and methods it answers, with each route's
//! level and media types) and their dispatch to its handlers. The router hands a path to the area
//! its first segment names; a new area (subscriptions, projections) is one more module here, one
//! variant of [`Route`](super::router::Route) and one line in each of the router's delegations.

pub mod admin;
pub mod node;
pub mod streams;
pub mod users;
