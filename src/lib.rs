//! Annal: an event stream database.
pub mod env;
pub mod index;
pub mod log;
pub mod store;
