//! Scavenges on every member: **a member that answered a scavenge with 200 recorded its start in
//! the cluster's log, and a member that could not record it refused with a clear status**.
//!
//! A start answers 200 only once `$scavengeStarted` is committed (a follower's goes through the
//! leader), so after healing each such run's `$scavenges-{id}` must begin with it on the members
//! (checked while no member's data was destroyed: then an acknowledged record may rightly be
//! gone). Every other answer is a refusal the operator can act on: 400 (a scavenge already runs
//! on that member), 503 (no leader to record the run, or the node is not ready) or 500 (storage
//! failed on the member or the leader, as the simulator's disk faults make it); anything else is
//! a failure. Requests that got no answer are not judged.

use crate::scavenges::{Asked, Outcome};

/// The violations among `asked` and what the members' logs hold (`outcome`); `intact`: no
/// member's data was destroyed.
pub fn check(asked: &[Asked], outcome: &Outcome, intact: bool) -> Vec<String> {
    let mut f = Vec::new();
    for a in asked {
        let when = a.at as f64 / 1e6;
        match &a.answer {
            Some((200, None)) => {
                f.push(format!("scavenge at {when:.3} s on member {}: 200 without a scavengeId", a.member))
            }
            Some((200, Some(_)) | (400, _) | (500, _) | (503, _) | (0, _)) | None => {}
            Some((status, _)) => f.push(format!(
                "scavenge at {when:.3} s on member {} (syncOnly {}): answered {status}",
                a.member, a.sync_only
            )),
        }
    }
    if intact {
        for h in &outcome.histories {
            if h.types.first().map(String::as_str) != Some("$scavengeStarted") {
                f.push(format!(
                    "scavenge {} was answered 200, yet the committed log's $scavenges-{} holds {:?}",
                    h.id, h.id, h.types
                ));
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scavenges::History;

    fn asked(answer: Option<(u16, Option<String>)>) -> Asked {
        Asked { at: 1_000_000, member: 1, sync_only: false, answer }
    }

    #[test]
    fn a_started_run_without_its_history_is_caught() {
        let ok =
            Outcome { histories: vec![History { id: "a".into(), types: vec!["$scavengeStarted".into()] }] };
        let lost = Outcome { histories: vec![History { id: "a".into(), types: vec![] }] };
        let a = [asked(Some((200, Some("a".into()))))];
        assert!(check(&a, &ok, true).is_empty());
        assert_eq!(check(&a, &lost, true).len(), 1);
        assert!(check(&a, &lost, false).is_empty(), "not judged when data was destroyed");
    }

    #[test]
    fn only_clear_refusals_pass() {
        let none = Outcome::default();
        for fine in [Some((400, None)), Some((500, None)), Some((503, None)), Some((0, None)), None] {
            assert!(check(&[asked(fine)], &none, true).is_empty());
        }
        assert_eq!(check(&[asked(Some((404, None)))], &none, true).len(), 1);
        assert_eq!(check(&[asked(Some((200, None)))], &none, true).len(), 1);
    }
}
