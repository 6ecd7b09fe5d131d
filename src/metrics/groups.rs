//! Which metric groups a node serves: `metricsconfig.json`'s keys (KurrentDB's file, with the
//! same meaning where Annal has the figure, and Annal's own groups beside them).
//!
//! Every group is on by default (Annal's figures are counters and gauges read at scrape time;
//! none costs the request path more than an atomic add). A file names only what it changes.
//! Keys KurrentDB has and Annal has no figure for (gRPC, gossip, .NET internals) are accepted and
//! ignored, so KurrentDB's own file works unchanged; any other key is an error that names it.

use serde_json::Value;

/// The groups a scrape writes (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Groups {
    /// `ExpectedScrapeIntervalSeconds`: sizes the recent-maximum windows.
    pub scrape_interval_secs: u64,
    /// `Meters` named EventStoreDB's meters: serve the legacy names.
    pub legacy_meters: bool,
    /// `Statuses.Node` (and the node's state, readiness and term).
    pub node_status: bool,
    /// `Statuses.Index`.
    pub index_status: bool,
    /// `Statuses.Scavenge`.
    pub scavenge_status: bool,
    /// `ElectionsCount` (elections completed, started, won).
    pub elections: bool,
    /// `ProjectionStats`.
    pub projections: bool,
    /// `PersistentSubscriptionStats`.
    pub subscriptions: bool,
    /// `Checkpoints.*`: writer, chaser, epoch, index, proposal, truncate, replication.
    pub checkpoints: [bool; 7],
    /// `Events.Read`, `Events.Written`.
    pub events: [bool; 2],
    /// `Writer.FlushSize`, `Writer.FlushDuration`.
    pub writer: [bool; 2],
    /// `CacheHitsMisses.StreamInfo`.
    pub stream_info_cache: bool,
    /// `CacheResources`.
    pub cache_resources: bool,
    /// `Queues.Length`, `Queues.Busy`, `Queues.Processing` (queueing time).
    pub queues: [bool; 3],
    /// `Kestrel.ConnectionCount`.
    pub connections: bool,
    /// `System`: load average, memory, drive.
    pub system: bool,
    /// `Process`: up time, CPU, memory, threads, disk I/O, open files.
    pub process: bool,
    /// Annal's `HttpRequests`: request duration histograms.
    pub http: bool,
    /// Annal's `Replication`: each member's lag.
    pub replication: bool,
    /// Annal's `Index`: index entries and tables.
    pub index: bool,
    /// Annal's `Scavenges`: runs, chunks, bytes reclaimed.
    pub scavenges: bool,
    /// Annal's `Redactions`.
    pub redactions: bool,
    /// Annal's `Tls`: certificate expiry and reloads.
    pub tls: bool,
}

/// The `name` label of each checkpoint, in [`Groups::checkpoints`] order.
pub const CHECKPOINTS: [&str; 7] =
    ["writer", "chaser", "epoch", "index", "proposal", "truncate", "replication"];

/// The `Checkpoints` keys: [`CHECKPOINTS`]' and the stream-existence filter's (which has no
/// position in Annal: its file is rewritten whole).
const CHECKPOINT_KEYS: [&str; 8] =
    ["Writer", "Chaser", "Epoch", "Index", "Proposal", "Truncate", "Replication", "StreamExistenceFilter"];

/// KurrentDB keys with no Annal figure: accepted and ignored.
const IGNORED: &[&str] = &[
    "GrpcMethods",
    "IncomingGrpcCalls",
    "Gossip",
    "ProjectionExecution",
    "ProjectionExecutionByFunction",
    "SlowMessageMilliseconds",
    "QueueLabels",
    "MessageTypes",
    "Logging",
];

impl Default for Groups {
    fn default() -> Groups {
        Groups {
            scrape_interval_secs: 15,
            legacy_meters: false,
            node_status: true,
            index_status: true,
            scavenge_status: true,
            elections: true,
            projections: true,
            subscriptions: true,
            checkpoints: [true; 7],
            events: [true; 2],
            writer: [true; 2],
            stream_info_cache: true,
            cache_resources: true,
            queues: [true; 3],
            connections: true,
            system: true,
            process: true,
            http: true,
            replication: true,
            index: true,
            scavenges: true,
            redactions: true,
            tls: true,
        }
    }
}

fn flag(key: &str, v: &Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| format!("{key} must be true or false"))
}

/// Sets `out[i]` from `obj[names[i]]` for the names present; any other key is an error.
fn flags<const N: usize>(key: &str, v: &Value, names: [&str; N], out: &mut [bool; N]) -> Result<(), String> {
    let Value::Object(m) = v else { return Err(format!("{key} must be an object of true/false")) };
    for (k, x) in m {
        let Some(i) = names.iter().position(|n| n == k) else {
            return Err(format!("{key}.{k} is not a known key (known: {})", names.join(", ")));
        };
        out[i] = flag(&format!("{key}.{k}"), x)?;
    }
    Ok(())
}

/// Whether any flag of an object is on (for groups Annal serves as one).
fn any(key: &str, v: &Value) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Object(m) => {
            let mut on = false;
            for (k, x) in m {
                on |= flag(&format!("{key}.{k}"), x)?;
            }
            Ok(on)
        }
        _ => Err(format!("{key} must be true/false or an object of true/false")),
    }
}

impl Groups {
    /// Parses a `metricsconfig.json` document.
    pub fn parse(text: &str) -> Result<Groups, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        let Value::Object(top) = doc else { return Err("the document must be a JSON object".into()) };
        let mut g = Groups::default();
        for (key, v) in &top {
            let k = key.as_str();
            match k {
                "ExpectedScrapeIntervalSeconds" => {
                    let n = v.as_u64().ok_or("ExpectedScrapeIntervalSeconds must be a whole number")?;
                    if !(matches!(n, 0 | 1 | 5 | 10) || n % 15 == 0) {
                        return Err(format!(
                            "ExpectedScrapeIntervalSeconds must be 0, 1, 5, 10 or a multiple of 15, not {n}"
                        ));
                    }
                    g.scrape_interval_secs = n;
                }
                "Meters" => {
                    let list = v.as_array().ok_or("Meters must be a list of meter names")?;
                    for m in list {
                        let m = m.as_str().ok_or("Meters must be a list of meter names")?;
                        if m.starts_with("EventStore.") {
                            g.legacy_meters = true;
                        } else if !m.starts_with("KurrentDB.") {
                            return Err(format!(
                                "Meters: {m} is not a known meter (KurrentDB.* or EventStore.*)"
                            ));
                        }
                    }
                }
                "Statuses" => {
                    let mut s = [g.index_status, g.node_status, g.scavenge_status];
                    flags(k, v, ["Index", "Node", "Scavenge"], &mut s)?;
                    [g.index_status, g.node_status, g.scavenge_status] = s;
                }
                "ElectionsCount" => g.elections = flag(k, v)?,
                "ProjectionStats" => g.projections = flag(k, v)?,
                "PersistentSubscriptionStats" => g.subscriptions = flag(k, v)?,
                "Checkpoints" => {
                    let mut all = [true; 8];
                    all[..7].copy_from_slice(&g.checkpoints);
                    flags(k, v, CHECKPOINT_KEYS, &mut all)?;
                    g.checkpoints.copy_from_slice(&all[..7]);
                }
                "Events" => flags(k, v, ["Read", "Written"], &mut g.events)?,
                "Writer" => flags(k, v, ["FlushSize", "FlushDuration"], &mut g.writer)?,
                "CacheHitsMisses" => {
                    let mut c = [g.stream_info_cache, true];
                    flags(k, v, ["StreamInfo", "Chunk"], &mut c)?;
                    g.stream_info_cache = c[0];
                }
                "CacheResources" => g.cache_resources = flag(k, v)?,
                "Queues" => flags(k, v, ["Length", "Busy", "Processing"], &mut g.queues)?,
                "Kestrel" => g.connections = any(k, v)?,
                "System" => g.system = any(k, v)?,
                "Process" => g.process = any(k, v)?,
                "HttpRequests" => g.http = flag(k, v)?,
                "Replication" => g.replication = flag(k, v)?,
                "Index" => g.index = flag(k, v)?,
                "Scavenges" => g.scavenges = flag(k, v)?,
                "Redactions" => g.redactions = flag(k, v)?,
                "Tls" => g.tls = flag(k, v)?,
                k if IGNORED.contains(&k) => {}
                other => return Err(format!("{other} is not a known key of metricsconfig.json")),
            }
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kurrentdbs_own_file_is_accepted_and_switches_what_it_names() {
        let g = Groups::parse(
            r#"{"Meters": ["EventStore.Core", "EventStore.Projections.Core"],
                "ExpectedScrapeIntervalSeconds": 30,
                "Statuses": {"Index": true, "Node": true, "Scavenge": false},
                "Checkpoints": {"Writer": true, "Chaser": false, "StreamExistenceFilter": false},
                "GrpcMethods": {"StreamRead": "read"}, "Gossip": {"PullFromPeer": false},
                "Queues": {"Busy": true, "Length": false, "Processing": false},
                "System": {"Cpu": false, "FreeMem": true}, "ProjectionStats": false}"#,
        )
        .unwrap();
        assert!(g.legacy_meters && !g.scavenge_status && g.node_status && !g.projections);
        assert_eq!(g.scrape_interval_secs, 30);
        assert_eq!(g.checkpoints, [true, false, true, true, true, true, true]);
        assert_eq!(g.queues, [false, true, false]);
        assert!(g.system);
    }

    #[test]
    fn an_unknown_key_or_value_is_an_error_that_names_it() {
        for (doc, says) in [
            (r#"{"Nope": true}"#, "Nope is not a known key"),
            (r#"{"Statuses": {"Disk": true}}"#, "Statuses.Disk is not a known key"),
            (r#"{"ElectionsCount": "yes"}"#, "ElectionsCount must be true or false"),
            (r#"{"ExpectedScrapeIntervalSeconds": 7}"#, "multiple of 15, not 7"),
            (r#"{"Meters": ["Other.Core"]}"#, "Other.Core is not a known meter"),
            ("[1]", "must be a JSON object"),
            ("{", "not valid JSON"),
        ] {
            let e = Groups::parse(doc).unwrap_err();
            assert!(e.contains(says), "{doc}: {e}");
        }
    }
}
