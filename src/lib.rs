//! Annal: an event stream database that speaks the EventStoreDB v5 HTTP dialect.
//!
//! Modules, in dependency order:
//! - [`env`]: the one seam to time, randomness, disk, network and tasks;
//! - [`log`]: the chunked transaction log, checkpoints, recovery;
//! - [`index`]: stream index (memtable, sorted tables, bloom filters, indexmap);
//! - [`store`]: the stream engine (sans-IO decisions in `store::engine`) and group commit;
//! - [`auth`]: users (stored as events), password hashing, credentials and stream ACLs;
//! - [`config`]: server options (command line, YAML, environment);
//! - [`dblock`]: the lock a node holds on its database directory, and the database's identity;
//! - [`node`]: the node's lifecycle; [`http`]: the EventStoreDB-compatible HTTP API;
//! - [`keyed`]: a fast keyed hash for maps whose keys clients choose;
//! - [`backup`]: the backup, restore and backup-verification tools; [`redact`]: redaction;
//! - [`tls`]: certificates, TLS for the HTTP API and between nodes, `annal certs`;
//! - [`tools`]: `annal healthcheck`, `annal cluster rolling-restart` and the tools' HTTP client;
//! - [`logs`]: the JSON lines log format and the runtime log level;
//! - [`metrics`]: what the node measures, served on `/metrics`;
//! - [`buggify`]: simulation-only BUGGIFY sites and test-only bug switches (inert without `sim`).
pub mod auth;
pub mod backup;
pub mod buggify;
pub mod cluster;
pub mod config;
pub mod dblock;
pub mod env;
pub mod http;
pub mod index;
pub mod keyed;
pub mod log;
pub mod logs;
pub mod metrics;
pub mod node;
pub mod projections;
pub mod redact;
pub mod scavenge;
pub mod store;
pub mod subscriptions;
pub mod tls;
pub mod tools;
