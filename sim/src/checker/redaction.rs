//! Redaction: **after a crash at any step of a redaction, the chunk is the old one or the new
//! one: every other event reads unchanged and the named event reads either as before or as
//! redacted (data of `0xFF` bytes of the same length, marked redacted); a switch the node
//! acknowledged holds after a crash, and only the exact redaction is ever switched in.**
//!
//! For each attempt ([`crate::maintenance::Case`]), every state a power loss could have left of
//! `db/` during it is opened in a fresh node and read in full, and compared with the state before
//! the attempt.

use std::collections::BTreeMap;

use annal::config::Config;
use annal::redact::Reply;

use super::reopen::{self, Served, Stream};
use crate::history::{History, OpKind, Outcome};
use crate::maintenance::{Candidate, Case};

/// What the redaction checks found.
#[derive(Debug, Default)]
pub struct Report {
    /// Violations.
    pub failures: Vec<String>,
    /// One line on what was checked.
    pub summary: String,
}

/// Makes the history's reads of events named for redaction read as written, so that the history
/// checks (integrity above all) hold them to what they check of every event: a read answered after
/// the attempt that serves the event's data as redacted (one replacement character per byte
/// written, the served form of `0xFF` bytes) is taken as a read of the data written. Any other form
/// of the data is left for the history checks to judge. Every attempt counts, not only the switches
/// the node acknowledged: a switch that failed after its rename (an I/O error syncing the
/// directory) may take effect at the next start, and the event named may rightly read redacted.
pub fn accept_redacted(h: &mut History, cases: &[Case]) {
    let mut switched: BTreeMap<[u8; 16], u64> = BTreeMap::new();
    for c in cases {
        switched.entry(c.id).or_insert(c.at);
    }
    if switched.is_empty() {
        return;
    }
    let mut sent: BTreeMap<[u8; 16], String> = BTreeMap::new();
    for op in &h.ops {
        if let OpKind::Append { events, .. } = &op.kind {
            for e in events {
                sent.insert(e.id, e.data.clone());
            }
        }
    }
    for op in h.ops.iter_mut() {
        let complete = op.complete;
        let Outcome::Read { events } = &mut op.outcome else { continue };
        for e in events.iter_mut() {
            let (Some(&at), Some(written)) = (switched.get(&e.id), sent.get(&e.id)) else { continue };
            let redacted = e.data.chars().count() == written.len() && e.data.chars().all(|c| c == '\u{FFFD}');
            if complete >= at && redacted {
                e.data = written.clone();
            }
        }
    }
}

/// Whether `new` is `old` redacted.
fn is_redaction_of(new: &Served, old: &Served) -> bool {
    new.number == old.number
        && new.id == old.id
        && new.position == old.position
        && new.redacted
        && new.data.len() == old.data.len()
        && new.data.iter().all(|&b| b == 0xFF)
}

/// Opens `files` and reads the streams.
fn read_state(
    files: &[(std::path::PathBuf, Vec<u8>)],
    config: &Config,
    streams: usize,
) -> Result<Vec<(String, Stream)>, String> {
    let env = reopen::env_with(files)?;
    let node = reopen::open(&env, config)?;
    Ok(reopen::read_streams(&node, streams))
}

/// Checks every attempt in `cases`.
pub fn check(cases: &[Case], config: &Config, streams: usize) -> Report {
    let mut report = Report::default();
    let (mut states, mut switched, mut refused) = (0usize, 0usize, 0usize);
    for c in cases {
        let what = format!(
            "the redaction of {}@{} (position {}, {}) at {:.6} s with a {:?} candidate",
            c.number,
            c.stream,
            c.position,
            c.file,
            c.at as f64 / 1e6,
            c.candidate
        );
        let ok = matches!(c.reply, Reply::Switched { .. });
        if ok {
            switched += 1;
        } else {
            refused += 1;
        }
        if ok && c.candidate != Candidate::Good {
            report.failures.push(format!(
                "{what}: the node switched in a candidate that is not the redaction asked for"
            ));
        }
        reopen::in_runtime(|| {
            let Some(first) = c.states.first() else { return };
            let before = match read_state(first, config, streams) {
                Ok(b) => b,
                Err(e) => {
                    return report.failures.push(format!("{what}: the database before it does not open: {e}"))
                }
            };
            for (k, state) in c.states.iter().enumerate().skip(1) {
                states += 1;
                let last = k + 1 == c.states.len();
                let at = if last { "after it".to_owned() } else { format!("after a crash at its step {k}") };
                let now = match read_state(state, config, streams) {
                    Ok(n) => n,
                    Err(e) => {
                        report.failures.push(format!("{what}: the node does not start {at}: {e}"));
                        continue;
                    }
                };
                let mut target_redacted = false;
                for ((name, old), (_, new)) in before.iter().zip(&now) {
                    let (old, new) = match (old, new) {
                        (Ok(Ok(o)), Ok(Ok(n))) => (o, n),
                        (o, n) if o == n => continue,
                        (o, n) => {
                            report.failures.push(format!("{what}: {name} read {o:?} before and {n:?} {at}"));
                            continue;
                        }
                    };
                    if old.len() != new.len() {
                        report.failures.push(format!(
                            "{what}: {name} held {} events before and {} {at}",
                            old.len(),
                            new.len()
                        ));
                        continue;
                    }
                    for (o, n) in old.iter().zip(new) {
                        if *name == c.stream && o.number == c.number && is_redaction_of(n, o) {
                            target_redacted = true;
                        } else if n != o {
                            report.failures.push(format!(
                                "{what}: event {}@{name} changed {at} (data of {} bytes, redacted {}, was {} bytes, redacted {})",
                                o.number,
                                n.data.len(),
                                n.redacted,
                                o.data.len(),
                                o.redacted
                            ));
                        }
                    }
                }
                if last && ok && !target_redacted {
                    report.failures.push(format!("{what}: the node acknowledged the switch, but the event is not redacted after a crash"));
                }
            }
        });
    }
    report.failures.truncate(5);
    report.summary = format!(
        "redactions: {} attempts ({switched} switched, {refused} refused), {states} crash states opened and read",
        cases.len()
    );
    report
}
