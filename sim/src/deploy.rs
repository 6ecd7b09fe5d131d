//! A cluster as it runs on Kubernetes (`--deploy`, with `--cluster`): the members listen on
//! 0.0.0.0, advertise their host names, and find each other only through DNS
//! (`DiscoverViaDns`), whose answers this module's seeded [`resolver`] spoils now and then
//! (a member missing, a stale address no host has, an empty answer, a failure, a slow answer);
//! and an operator stops members gracefully (`POST /admin/shutdown`), the leader as often as
//! a follower, each coming back after a moment, as a rolling restart does.
//!
//! The harness chooses whom to stop ([`Stops::ask`]), sees the member's process end, and
//! restarts it. Every stop is recorded ([`Stop`]) and [`check`] judges them: a stop that was
//! acknowledged ends the node within [`STOP_BOUND`]. The usual checkers judge the rest (no
//! acknowledged write lost, one leader per term, identical committed logs).
//!
//! Invariant: every choice comes from the run's seed; the resolver draws from its own stream,
//! so a run without `--deploy` replays as before.

// The operator runs on a turmoil client host, whose tokio clock is the simulation's paused clock.
#![allow(clippy::disallowed_methods)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::client::{Client, Failure};
use crate::shared::now_us;
use crate::workload::PORT;

/// The name every member resolves to find the others (a headless Service's).
pub const CLUSTER_DNS: &str = "annal.sim.svc.cluster.local";
/// The operator host's name.
pub const OPERATOR: &str = "deployer";
/// How long after an acknowledged stop the node must have ended: the leader's hand-over
/// (`annal::node::HANDOVER_MAX`) and the drain of its connections, with room for slow disks.
pub const STOP_BOUND: Duration = Duration::from_secs(12);
const AUTH: &str = "Basic YWRtaW46Y2hhbmdlaXQ=";

/// The run's DNS: the members' own names resolve to their addresses; [`CLUSTER_DNS`] to all of
/// them, except now and then (a seeded draw per question): a member left out (records not
/// propagated yet), a stale address of no host added, no records, a failure, or an answer that
/// takes up to 4 s (longer than the node waits).
pub fn resolver(seed: u64, members: Vec<String>) -> annal::env::sim::Resolver {
    let rng = RefCell::new(ChaCha8Rng::seed_from_u64(seed ^ 0xd25d_0000_0000_0010));
    Rc::new(move |name: &str| {
        if let Some(m) = members.iter().find(|m| m.as_str() == name) {
            return (Duration::ZERO, Ok(vec![turmoil::lookup(m.as_str())]));
        }
        if name != CLUSTER_DNS {
            return (
                Duration::ZERO,
                Err(io::Error::new(io::ErrorKind::NotFound, format!("{name}: no such name"))),
            );
        }
        let mut rng = rng.borrow_mut();
        let mut all: Vec<IpAddr> = members.iter().map(|m| turmoil::lookup(m.as_str())).collect();
        for i in (1..all.len()).rev() {
            all.swap(i, rng.gen_range(0..=i));
        }
        let delay = |rng: &mut ChaCha8Rng| Duration::from_millis(rng.gen_range(0..20));
        match rng.gen_range(0..100) {
            0..=5 => (delay(&mut rng), Err(io::Error::other("SERVFAIL"))),
            6..=9 => (delay(&mut rng), Ok(Vec::new())),
            10..=15 => (Duration::from_millis(rng.gen_range(500..4000)), Ok(all)),
            16..=25 => {
                all.remove(rng.gen_range(0..all.len()));
                (delay(&mut rng), Ok(all))
            }
            26..=33 => {
                all.insert(rng.gen_range(0..=all.len()), IpAddr::from([10, 255, 255, rng.gen_range(1..255)]));
                (delay(&mut rng), Ok(all))
            }
            _ => (delay(&mut rng), Ok(all)),
        }
    })
}

/// One graceful stop the operator asked for.
#[derive(Clone, Debug)]
pub struct Stop {
    /// The member (index among the rigs).
    pub member: usize,
    /// Whether it led when the harness chose it.
    pub leader: bool,
    /// When the request was sent, µs.
    pub asked: u64,
    /// The answer's status (0: not sent); `None`: unknown.
    pub answer: Option<u16>,
    /// When the harness saw the node's process end, µs.
    pub ended: Option<u64>,
    /// The node was killed (a fault, the supervisor) before its process ended: nothing to judge.
    pub interrupted: bool,
    /// The member's boot count when it was asked.
    pub boot: u64,
}

/// The operator's queue and record, shared with the harness.
#[derive(Clone, Default)]
pub struct Stops {
    queue: Rc<RefCell<VecDeque<(usize, bool, u64)>>>,
    /// Every stop asked, in order.
    pub done: Rc<RefCell<Vec<Stop>>>,
}

impl Stops {
    /// Has the operator stop `member` (`leader`: whether it leads now; `boot`: its boot count).
    pub fn ask(&self, member: usize, leader: bool, boot: u64) {
        self.queue.borrow_mut().push_back((member, leader, boot));
    }

    /// Records that `member`'s process ended at `at` (closing its open stops).
    pub fn ended(&self, member: usize, at: u64) {
        for s in self.done.borrow_mut().iter_mut().filter(|s| s.member == member && s.open()) {
            s.ended = Some(at);
        }
    }

    /// Closes `member`'s open stops unjudged when it was killed since (it is down, or booted
    /// again: `boot` is its boot count now).
    pub fn interrupted(&self, member: usize, up: bool, boot: u64) {
        for s in self.done.borrow_mut().iter_mut().filter(|s| s.member == member && s.open()) {
            s.interrupted |= !up || s.boot != boot;
        }
    }
}

impl Stop {
    fn open(&self) -> bool {
        self.ended.is_none() && !self.interrupted
    }
}

/// The seeded moments of the run's graceful stops: two to four in the workload's last seven
/// eighths, at least 1.5 s apart; whether each stops the leader (one in two) or a follower.
pub fn plan(seed: u64, duration: Duration) -> Vec<(u64, bool)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xd25d_0000_0000_0011);
    let end = duration.as_micros() as u64;
    let mut t = rng.gen_range(end / 8..end / 3);
    let mut out = Vec::new();
    for _ in 0..rng.gen_range(2..=4) {
        if t >= end {
            break;
        }
        out.push((t, rng.gen_bool(0.5)));
        t += rng.gen_range(1_500_000..4_000_000);
    }
    out
}

/// Starts the operator host: it sends `POST /admin/shutdown` to each member the harness names.
pub fn start(sim: &mut turmoil::Sim, members: Vec<String>, stops: Stops, shared: Rc<crate::shared::Shared>) {
    sim.client(OPERATOR, async move {
        let mut clients: Vec<Client> =
            members.iter().map(|m| Client::new(m, PORT, Duration::from_secs(5))).collect();
        loop {
            let next = stops.queue.borrow_mut().pop_front();
            let Some((member, leader, boot)) = next else {
                if shared.healed.get() {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let req = http::Request::post("/admin/shutdown")
                .header("authorization", AUTH)
                .header("content-length", "0")
                .body(Full::new(Bytes::new()))?;
            // Recorded before it is sent: the process may end before its answer arrives.
            let i = {
                let mut done = stops.done.borrow_mut();
                done.push(Stop {
                    member,
                    leader,
                    asked: now_us(),
                    answer: None,
                    ended: None,
                    interrupted: false,
                    boot,
                });
                done.len() - 1
            };
            let (answer, why) = match clients[member].send(req).await {
                Ok(r) => (Some(r.status), r.reason.clone()),
                Err(Failure::NotSent(e)) => (Some(0), e),
                Err(Failure::Unknown(e)) => (None, e),
            };
            shared.note_now(
                "operator",
                format!("graceful stop of {} (leader: {leader}): {answer:?} {why}", members[member]),
            );
            stops.done.borrow_mut()[i].answer = answer;
        }
    });
}

/// The stops acknowledged (2xx) whose node did not end within [`STOP_BOUND`] (or at all, with
/// the run's end `finished` µs past the bound).
pub fn check(stops: &[Stop], names: &[String], finished: u64) -> Vec<String> {
    let bound = STOP_BOUND.as_micros() as u64;
    stops
        .iter()
        .filter(|s| !s.interrupted && s.answer.is_some_and(|a| (200..300).contains(&a)))
        .filter_map(|s| {
            let took = s.ended.map(|e| e.saturating_sub(s.asked));
            match took {
                Some(t) if t <= bound => None,
                Some(t) => Some(format!(
                    "{} acknowledged a graceful stop at {:.3} s but ended only {:.3} s later (bound {:?})",
                    names[s.member],
                    s.asked as f64 / 1e6,
                    t as f64 / 1e6,
                    STOP_BOUND
                )),
                None if finished > s.asked + bound => Some(format!(
                    "{} acknowledged a graceful stop at {:.3} s and never ended",
                    names[s.member],
                    s.asked as f64 / 1e6
                )),
                None => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(answer: Option<u16>, asked: u64, ended: Option<u64>) -> Stop {
        Stop { member: 0, leader: true, asked, answer, ended, interrupted: false, boot: 1 }
    }

    #[test]
    fn an_acknowledged_stop_must_end_the_node_within_the_bound() {
        let names = vec!["node1".to_string()];
        let bound = STOP_BOUND.as_micros() as u64;
        assert!(check(&[stop(Some(200), 1_000, Some(1_000 + bound))], &names, u64::MAX).is_empty());
        assert_eq!(check(&[stop(Some(200), 1_000, Some(2_000 + bound))], &names, u64::MAX).len(), 1);
        assert_eq!(check(&[stop(Some(200), 1_000, None)], &names, 2_000 + bound).len(), 1);
        // Not acknowledged, or the run ended before the bound: nothing to judge.
        assert!(check(&[stop(None, 1_000, None), stop(Some(0), 1_000, None)], &names, u64::MAX).is_empty());
        assert!(check(&[stop(Some(200), 1_000, None)], &names, 1_000 + bound).is_empty());
        let killed = Stop { interrupted: true, ..stop(Some(200), 1_000, None) };
        assert!(check(&[killed], &names, u64::MAX).is_empty());
    }

    #[test]
    fn the_plan_spreads_two_to_four_stops_over_the_workload() {
        for seed in 0..50 {
            let p = plan(seed, Duration::from_secs(10));
            assert!((1..=4).contains(&p.len()), "{seed}: {p:?}");
            assert!(p.windows(2).all(|w| w[1].0 >= w[0].0 + 1_500_000), "{seed}: {p:?}");
            assert!(p.iter().all(|(t, _)| *t < 10_000_000));
        }
    }
}
