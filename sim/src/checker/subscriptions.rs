//! Persistent subscriptions (the `subs` scenario, [`crate::subs`]): from what the consumers saw
//! and sent, what the harness saw committed to the group's checkpoint and parked streams, and
//! the subscribed stream as it stands at the end:
//!
//! - **every message is done**: each event of the stream was, by the end, acknowledged or
//!   skipped by a consumer, or parked;
//! - **retries are bounded**: within one incarnation of the group (between restarts or changes
//!   of leader, and between `replayParked` requests, which hand parked messages out afresh) no
//!   message is delivered more than `maxRetryCount + 1` times;
//! - **parked messages come back**: after a `replayParked` answered 200, every message parked
//!   before it (and not handed out since) is delivered again;
//! - **the checkpoint never passes a message that is not done**: when a checkpoint `C` is seen,
//!   every event up to `C` had been acknowledged or skipped (the answer sent) or parked (the link
//!   seen) by then;
//! - **Pinned never shares a stream**: while a consumer surely holds a message (from the answer
//!   to its poll until it answers the message or the message's time-out could have passed), no
//!   other consumer is given a message of the same source stream.
//!
//! What the harness cannot see makes each check conservative, never stricter than the rule: an
//! answer counts from the moment it was sent (the node may have taken it), a delivery from the
//! poll's answer, and a check is left out where a restart could explain what was seen (a
//! `replayParked` that a crash followed before the message came back may have been lost with the
//! node's memory). The last `replayParked`, after the faults are healed, is always checked.

use std::collections::BTreeMap;

use crate::subs::{Answer, Id, Record};

/// What the checks found.
#[derive(Debug, Default)]
pub struct Report {
    /// Violations.
    pub failures: Vec<String>,
    /// One line on what was checked.
    pub summary: String,
}

fn id_text(id: &Id) -> String {
    uuid::Uuid::from_bytes(*id).to_string()
}

fn secs(us: u64) -> String {
    format!("{:.6}", us as f64 / 1e6)
}

/// Checks `rec`, given the stream at the end (`stream`: event number and id; `None` when no node
/// could be read) and the times of the restarts (a node's or a new leader's, µs).
pub fn check(rec: &Record, stream: Option<&[(i64, Id)]>, restarts: &[u64]) -> Report {
    let mut failures = Vec::new();
    let Some(plan) = rec.plan.clone() else {
        return Report { failures, summary: "subscriptions: no plan".into() };
    };
    let Some(stream) = stream else {
        failures.push("subscriptions: no node could be read at the end".into());
        return Report { failures, summary: "subscriptions: nothing to check".into() };
    };
    let number_of: BTreeMap<Id, i64> = stream.iter().map(|&(n, id)| (id, n)).collect();
    let id_of: BTreeMap<i64, Id> = stream.iter().copied().collect();
    let done_answers = |id: &Id, by: u64| {
        rec.answers
            .iter()
            .any(|a| a.id == *id && matches!(a.what, Answer::Ack | Answer::Skip) && a.sent <= by)
    };
    let parked_by = |n: i64, by: u64| rec.parked.iter().any(|&(t, m)| m == n && t <= by);
    let deliveries_of = |id: Id| rec.deliveries.iter().filter(move |d| d.id == id);

    // Every message is done.
    for &(n, id) in stream {
        if !done_answers(&id, u64::MAX) && !parked_by(n, u64::MAX) {
            let seen: Vec<String> =
                deliveries_of(id).map(|d| format!("{} at {}", d.consumer, secs(d.recv))).collect();
            let answers: Vec<String> = rec
                .answers
                .iter()
                .filter(|a| a.id == id)
                .map(|a| format!("{:?} by {} at {}", a.what, a.consumer, secs(a.sent)))
                .collect();
            failures.push(format!(
                "subscriptions: message {n}@{} ({}) was never acknowledged, skipped nor parked; delivered {} times \
                 [{}], answers [{}]",
                crate::subs::STREAM,
                id_text(&id),
                seen.len(),
                seen.join(", "),
                answers.join(", ")
            ));
        }
    }

    // Retries are bounded within an incarnation.
    let mut resets: Vec<u64> = restarts.to_vec();
    resets.extend(rec.replays.iter().map(|r| r.sent));
    resets.sort_unstable();
    let reset_in = |a: u64, b: u64| resets.iter().any(|&t| a < t && t <= b);
    let mut counts: BTreeMap<(Id, usize), Vec<u64>> = BTreeMap::new();
    for d in &rec.deliveries {
        if reset_in(d.sent, d.recv) {
            continue;
        }
        let segment = resets.partition_point(|&t| t <= d.sent);
        counts.entry((d.id, segment)).or_default().push(d.recv);
    }
    let allowed = plan.max_retry as usize + 1;
    for ((id, _), times) in &counts {
        if times.len() > allowed {
            let at: Vec<String> = times.iter().map(|t| secs(*t)).collect();
            failures.push(format!(
                "subscriptions: message {} ({}) was delivered {} times in one incarnation of the group, more than \
                 maxRetryCount + 1 = {allowed}: at {}",
                number_of.get(id).map_or("?".into(), |n| n.to_string()),
                id_text(id),
                times.len(),
                at.join(", ")
            ));
        }
    }

    // Parked messages come back on replayParked.
    let mut replays_checked = 0;
    for r in rec.replays.iter().filter(|r| r.ok) {
        let mut last_parked: BTreeMap<i64, u64> = BTreeMap::new();
        for &(t, n) in rec.parked.iter().filter(|&&(t, _)| t < r.sent) {
            last_parked.insert(n, t);
        }
        let first_reset_after = restarts.iter().copied().filter(|&t| t > r.sent).min().unwrap_or(u64::MAX);
        let mut checked = false;
        for (n, tp) in last_parked {
            let Some(id) = id_of.get(&n) else { continue };
            // Another replay after the parking may have taken it; a delivery since, handed it out.
            if rec.replays.iter().any(|o| o.sent > tp && o.sent < r.sent)
                || deliveries_of(*id).any(|d| d.sent >= tp && d.sent < r.sent)
            {
                continue;
            }
            checked = true;
            let back = deliveries_of(*id).map(|d| d.recv).filter(|&t| t > r.sent).min();
            match back {
                Some(_) => {}
                None if first_reset_after != u64::MAX => {}
                None => failures.push(format!(
                    "subscriptions: message {n} ({}) parked (seen at {}) did not come back after the replayParked \
                     sent at {} (answered 200)",
                    id_text(id),
                    secs(tp),
                    secs(r.sent)
                )),
            }
        }
        replays_checked += usize::from(checked);
    }

    // The checkpoint never passes a message that is not done.
    let mut worst: Option<(u64, i64, i64)> = None;
    for &(t, c) in &rec.checkpoints {
        for (&n, id) in id_of.range(..=c) {
            if !done_answers(id, t) && !parked_by(n, t) {
                worst.get_or_insert((t, c, n));
                break;
            }
        }
    }
    if let Some((t, c, n)) = worst {
        failures.push(format!(
            "subscriptions: checkpoint {c} (seen at {}) passes message {n} ({}), which was neither acknowledged, \
             skipped nor parked by then",
            secs(t),
            id_of.get(&n).map_or("?".into(), id_text)
        ));
    }

    // Pinned never gives one stream's messages to two consumers at once.
    let mut holds = 0u64;
    if plan.strategy == "Pinned" {
        let timeout = plan.timeout_ms * 1000;
        let mut by_source: BTreeMap<&str, Vec<&crate::subs::Delivery>> = BTreeMap::new();
        for d in &rec.deliveries {
            if let Some(s) = rec.produced.get(&d.id) {
                by_source.entry(s.as_str()).or_default().push(d);
            }
        }
        'sources: for (source, ds) in &by_source {
            for d1 in ds {
                holds += 1;
                let answered = rec
                    .answers
                    .iter()
                    .filter(|a| {
                        a.id == d1.id
                            && a.consumer == d1.consumer
                            && a.what != Answer::Stop
                            && a.sent >= d1.recv
                    })
                    .map(|a| a.sent)
                    .min()
                    .unwrap_or(u64::MAX);
                let held_until = answered.min(d1.sent + timeout);
                for d2 in ds {
                    if d2.consumer == d1.consumer || d2.sent < d1.recv || d2.recv > held_until {
                        continue;
                    }
                    if restarts.iter().any(|&t| d1.sent <= t && t <= d2.recv) {
                        continue;
                    }
                    failures.push(format!(
                        "subscriptions: Pinned gave {} ({}) of stream {source} to {} (poll {}..{}) while {} held {} \
                         ({}), delivered at {} and held until at least {}",
                        number_of.get(&d2.id).map_or("?".into(), |n| n.to_string()),
                        id_text(&d2.id),
                        d2.consumer,
                        secs(d2.sent),
                        secs(d2.recv),
                        d1.consumer,
                        number_of.get(&d1.id).map_or("?".into(), |n| n.to_string()),
                        id_text(&d1.id),
                        secs(d1.recv),
                        secs(held_until)
                    ));
                    break 'sources;
                }
            }
        }
    }

    let summary = format!(
        "subscriptions ({} strategy, maxRetryCount {}, timeout {} ms): {} messages, {} deliveries, {} answers, \
         {} parked links, {} checkpoints, {} replays ({} with parked messages checked), {} restarts{}",
        plan.strategy,
        plan.max_retry,
        plan.timeout_ms,
        stream.len(),
        rec.deliveries.len(),
        rec.answers.len(),
        rec.parked.len(),
        rec.checkpoints.len(),
        rec.replays.len(),
        replays_checked,
        restarts.len(),
        if plan.strategy == "Pinned" { format!(", {holds} pinned holds examined") } else { String::new() }
    );
    Report { failures, summary }
}
