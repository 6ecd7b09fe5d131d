//! Backups: **every completed backup restores into a node that starts, serves nothing corrupt,
//! and holds a prefix of the log with every append acknowledged before the backup began.**
//!
//! For each backup the copier completed ([`crate::maintenance::Taken`]), what a power loss right
//! after it would have left of its directory is laid out on a fresh disk, checked with
//! `annal backup verify`, restored with `annal restore` and opened as a new node. Then:
//! - every stream reads without error; every event served is one a client sent to that stream,
//!   with the data sent; a stream never deleted reads as events `0, 1, 2, …` without a gap;
//! - in a stream never deleted, every append acknowledged before the backup began is there;
//! - every log record below the backup's `chaser.chk` is the source node's record at that position,
//!   byte for byte, wherever the source (read at the end of the run) still holds one (a scavenge
//!   may have dropped it since);
//! - the last backup, restored into a new cluster of three (in a simulation of its own, without
//!   clients or faults), elects a leader, and every member serves the streams exactly as the single
//!   node restored from it does.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use annal::backup::restore::{restore, RestoreOptions};
use annal::backup::verify::verify;
use annal::config::Config;
use annal::node::Node;

use super::reopen;
use crate::history::{short_id, History, OpKind, Outcome};
use crate::maintenance::Taken;

/// What the backup checks found.
#[derive(Debug, Default)]
pub struct Report {
    /// Violations.
    pub failures: Vec<String>,
    /// One line on what was checked.
    pub summary: String,
}

/// Checks every backup in `taken` against the history `h` and the source node as it ended
/// (`None`: it was down).
pub fn check(
    taken: &[Taken],
    h: &History,
    config: &Config,
    streams: usize,
    source: Option<Arc<Node>>,
) -> Report {
    let mut report = Report::default();
    let mut sent: BTreeMap<[u8; 16], (&str, serde_json::Value)> = BTreeMap::new();
    for op in &h.ops {
        if let OpKind::Append { events, .. } = &op.kind {
            for e in events {
                let v = serde_json::from_str(&e.data).unwrap_or(serde_json::Value::Null);
                sent.insert(e.id, (op.stream.as_str(), v));
            }
        }
    }
    let deleted: HashSet<&str> =
        h.ops.iter().filter(|o| matches!(o.kind, OpKind::Delete { .. })).map(|o| o.stream.as_str()).collect();
    let (mut events, mut compared, mut differential, mut clustered) = (0u64, 0u64, 0, 0);
    for t in taken {
        differential += usize::from(t.differential);
        let what = format!(
            "backup {} ({}, began at {:.6} s, completed at {:.6} s)",
            t.dir.display(),
            if t.differential { "differential" } else { "full" },
            t.began as f64 / 1e6,
            t.finished as f64 / 1e6
        );
        let before = report.failures.len();
        reopen::in_runtime(|| {
            let env = match reopen::env_with(&t.files) {
                Ok(e) => e,
                Err(e) => return report.failures.push(format!("{what}: {e}")),
            };
            if let Err(e) = verify(&env, &t.dir) {
                report.failures.push(format!("{what} fails verification: {e}"));
            }
            let o = RestoreOptions {
                from: t.dir.clone(),
                db: config.db.clone(),
                index: config.index.clone(),
                overwrite: false,
            };
            if let Err(e) = restore(&env, &o, &mut |_, _| {}) {
                return report.failures.push(format!("{what} does not restore: {e}"));
            }
            let node = match reopen::open(&env, config) {
                Ok(n) => n,
                Err(e) => {
                    return report
                        .failures
                        .push(format!("the node restored from {what} refuses to start: {e}"))
                }
            };
            for (name, r) in reopen::read_streams(&node, streams) {
                let served = match r {
                    Err(e) => {
                        report
                            .failures
                            .push(format!("the node restored from {what} fails to read {name}: {e}"));
                        continue;
                    }
                    Ok(Err(_)) => Vec::new(),
                    Ok(Ok(v)) => v,
                };
                events += served.len() as u64;
                for (i, e) in served.iter().enumerate() {
                    let data: serde_json::Value =
                        serde_json::from_slice(&e.data).unwrap_or(serde_json::Value::Null);
                    let bad = match sent.get(&e.id) {
                        None => Some("an event id no client ever sent".to_owned()),
                        Some((s, _)) if *s != name => Some(format!("an event sent to stream {s}")),
                        Some((_, d)) if *d != data => Some(format!("data {data}, but {d} was written")),
                        _ => None,
                    };
                    if let Some(why) = bad {
                        report.failures.push(format!(
                            "corrupted data served by the node restored from {what}: {name} event {} is {why}",
                            e.number
                        ));
                    }
                    if !deleted.contains(name.as_str()) && e.number != i as i64 {
                        report.failures.push(format!(
                            "the node restored from {what} holds no prefix of {name}: its event {i} is numbered {}",
                            e.number
                        ));
                        break;
                    }
                }
                if deleted.contains(name.as_str()) {
                    continue;
                }
                let got: HashSet<[u8; 16]> = served.iter().map(|e| e.id).collect();
                let lost = h.ops.iter().filter(|o| o.stream == name && o.complete < t.began).find_map(|o| {
                    match (&o.kind, &o.outcome) {
                        (OpKind::Append { events, .. }, Outcome::Appended { .. }) => {
                            events.iter().find(|e| !got.contains(&e.id)).map(|e| (o, e))
                        }
                        _ => None,
                    }
                });
                if let Some((o, e)) = lost {
                    report.failures.push(format!(
                        "append acknowledged before {what} began is missing from the restored node: {o} (event {})",
                        short_id(&e.id)
                    ));
                }
            }
            if taken.last().is_some_and(|l| std::ptr::eq(l, t)) {
                // The last backup is also restored into a new three-node cluster.
                let expected = reopen::read_streams(&node, streams);
                match crate::maintenance::restore_into_cluster(
                    t.began,
                    &t.files,
                    &t.dir,
                    config.chunk_size,
                    streams,
                ) {
                    Err(e) => {
                        report.failures.push(format!("{what} restored into a new cluster of three: {e}"))
                    }
                    Ok(members) => {
                        for (member, reads) in members {
                            clustered += 1;
                            if reads != expected {
                                report.failures.push(format!(
                                    "{what} restored into a new cluster of three: {member} serves other events than \
                                     the single node restored from it"
                                ));
                            }
                        }
                    }
                }
            }
            if let Some(src) = &source {
                let limit = u64::try_from(t.chaser).unwrap_or(0);
                for rec in node.store().log().scan(0) {
                    let rec = match rec {
                        Ok(r) => r,
                        Err(e) => {
                            report
                                .failures
                                .push(format!("the node restored from {what} has a corrupt log record: {e}"));
                            break;
                        }
                    };
                    let pos = rec.log_position();
                    if pos >= limit {
                        break;
                    }
                    if let Ok(theirs) = src.store().log().read(pos) {
                        compared += 1;
                        if theirs != rec {
                            report.failures.push(format!(
                                "the node restored from {what} is no prefix of the source's log: the records at \
                                 position {pos} differ"
                            ));
                            break;
                        }
                    }
                }
            }
        });
        if report.failures.len() > before + 3 {
            report.failures.truncate(before + 3);
        }
    }
    report.summary = format!(
        "backups: {} completed ({differential} differential), each restored into a fresh node: {events} events \
         read, {compared} log records compared with the source; the last restored into a new cluster of three: \
         {clustered} members compared",
        taken.len()
    );
    report
}
