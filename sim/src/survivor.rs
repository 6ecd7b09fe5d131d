//! The recovery scenario ([`Scenario::Survivor`](crate::Scenario::Survivor)): a cluster of three
//! goes through seeded rounds of kills and pauses under its clients' load, each round ending in a
//! recovery, and after every recovery a write must be acknowledged
//! ([`checker::writes_resume`](crate::checker::writes_resume)).
//!
//! The rounds ([`Round`]): two members killed at once, so one survives alone; when the other
//! two are back it may lead the next term, and one of its followers is killed and restarted soon
//! after (the shape in which a new leader once stopped committing); the leader killed; a
//! follower killed; all three killed; the leader cut off from the others (as a paused process
//! is) until they elect another. Kills are `kill -9` (no power loss), restarts come after a
//! seeded pause. A round's steps wait on what the harness sees (a leader elected), never on the
//! node's internals, and a round whose election does not come within [`ELECTION_WAIT`] is given
//! up (the election checker judges elections; this one judges writes). After each round the
//! recovery instant is recorded: every member running, the links healthy, a leader elected. The
//! next round begins only after the writes-resume bound has passed.
//!
//! Invariant: every choice comes from the scenario's own seeded stream and from what the
//! simulation shows at each step, so a seed replays exactly.

use std::collections::VecDeque;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::rig::{Action, Rig};

/// How long a round waits for a leader before it is given up.
pub const ELECTION_WAIT: Duration = Duration::from_secs(20);

/// A round of faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// Two members killed at once; back together; then a follower of the next leader killed and
    /// restarted.
    LoneSurvivor,
    /// The leader killed and restarted.
    KillLeader,
    /// A follower killed and restarted.
    KillFollower,
    /// All three killed and restarted together.
    KillAll,
    /// The leader cut off from the other members until they elect another (a paused process).
    PauseLeader,
}

/// Whom a kill takes.
#[derive(Clone, Copy, Debug)]
enum Whom {
    /// Two members at random.
    Two,
    Leader,
    Follower,
    All,
}

/// One step of a round.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Waits this long (µs).
    Sleep(u64),
    /// Waits until a running member is `Master`.
    AwaitLeader,
    /// Kills (`kill -9`) these members.
    Kill(Whom),
    /// Restarts every member this round killed.
    RestartDown,
    /// Cuts the leader off from the other members.
    Isolate,
    /// Waits until a member other than the one cut off leads (bounded), then mends its links.
    AwaitSuccessorThenMend,
    /// Records a recovery.
    Recovered,
}

/// The rounds of one run (see the module doc).
pub struct Rounds {
    rng: ChaCha8Rng,
    steps: VecDeque<Step>,
    /// When the current wait ends (a sleep) or gives up (an election), µs.
    until: Option<u64>,
    down: Vec<usize>,
    cut: Option<usize>,
    /// When the workload phase ends (µs): no round begins that would not end before it.
    end: u64,
    /// The recoveries (µs): every member running, the links healthy, a leader elected.
    pub recoveries: Vec<u64>,
    /// The rounds begun, by kind.
    pub begun: Vec<Round>,
}

/// Whether `r`'s node is up and `Master`.
fn leads(r: &Rig) -> bool {
    r.shared
        .node
        .borrow()
        .as_ref()
        .and_then(|n| n.cluster().map(|c| c.state()))
        .is_some_and(|s| s == annal::cluster::VNodeState::Master)
}

impl Rounds {
    /// The rounds of a run with `seed` whose workload phase lasts `duration`.
    pub fn new(seed: u64, duration: Duration) -> Rounds {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5a7f_1000_0000_000d);
        let first = rng.gen_range(300_000..1_500_000);
        Rounds {
            rng,
            steps: VecDeque::from([Step::Sleep(first)]),
            until: None,
            down: Vec::new(),
            cut: None,
            end: duration.as_micros() as u64,
            recoveries: Vec::new(),
            begun: Vec::new(),
        }
    }

    /// The steps of a round of `kind`.
    fn plan(&mut self, kind: Round) -> Vec<Step> {
        let ms = |rng: &mut ChaCha8Rng, lo: u64, hi: u64| Step::Sleep(rng.gen_range(lo..hi) * 1000);
        let r = &mut self.rng;
        let mut steps = vec![Step::AwaitLeader];
        match kind {
            Round::LoneSurvivor => steps.extend([
                Step::Kill(Whom::Two),
                ms(r, 100, 2500),
                Step::RestartDown,
                Step::AwaitLeader,
                ms(r, 0, 1000),
                Step::Kill(Whom::Follower),
                ms(r, 100, 1500),
                Step::RestartDown,
            ]),
            Round::KillLeader => {
                steps.extend([Step::Kill(Whom::Leader), ms(r, 100, 2000), Step::RestartDown])
            }
            Round::KillFollower => {
                steps.extend([Step::Kill(Whom::Follower), ms(r, 100, 2000), Step::RestartDown])
            }
            Round::KillAll => steps.extend([Step::Kill(Whom::All), ms(r, 100, 1500), Step::RestartDown]),
            Round::PauseLeader => steps.extend([Step::Isolate, Step::AwaitSuccessorThenMend, ms(r, 0, 1500)]),
        }
        steps.extend([Step::AwaitLeader, Step::Recovered]);
        // The writes-resume bound passes before the next round, and a little more.
        let quiet = crate::checker::writes_resume::BOUND.as_micros() as u64;
        steps.push(Step::Sleep(quiet + self.rng.gen_range(200_000..1_000_000)));
        steps
    }

    /// Carries the rounds on at `now` (call after every simulation step).
    pub fn step(&mut self, sim: &mut turmoil::Sim, rigs: &mut [Rig], now: u64) {
        loop {
            let Some(&step) = self.steps.front() else {
                // Room for one more round: about 12 s at most.
                if now + 12_000_000 > self.end {
                    return;
                }
                let kind = match self.rng.gen_range(0..100) {
                    0..=39 => Round::LoneSurvivor,
                    40..=54 => Round::KillLeader,
                    55..=69 => Round::KillFollower,
                    70..=84 => Round::KillAll,
                    _ => Round::PauseLeader,
                };
                self.begun.push(kind);
                rigs[0].shared.note(now, "sim", format!("round {}: {kind:?}", self.begun.len()));
                let steps = self.plan(kind);
                self.steps.extend(steps);
                continue;
            };
            match step {
                Step::Sleep(d) => {
                    let until = *self.until.get_or_insert(now + d);
                    if now < until {
                        return;
                    }
                }
                Step::AwaitLeader | Step::AwaitSuccessorThenMend => {
                    let until = *self.until.get_or_insert(now + ELECTION_WAIT.as_micros() as u64);
                    let leader = rigs.iter().enumerate().find(|(k, r)| leads(r) && Some(*k) != self.cut);
                    if leader.is_none() && now < until {
                        return;
                    }
                    if leader.is_none() {
                        rigs[0].shared.note(now, "sim", "round given up: no leader elected");
                        // What the round changed is undone; the rest of it is skipped.
                        self.restart_down(sim, rigs, now);
                        self.mend(sim, rigs, now);
                        self.steps.clear();
                        self.until = None;
                        continue;
                    }
                    if matches!(step, Step::AwaitSuccessorThenMend) {
                        self.mend(sim, rigs, now);
                    }
                }
                Step::Kill(whom) => {
                    let up: Vec<usize> = (0..rigs.len()).filter(|&k| rigs[k].node_up).collect();
                    let leader = up.iter().copied().find(|&k| leads(&rigs[k]));
                    let followers: Vec<usize> = up.iter().copied().filter(|&k| Some(k) != leader).collect();
                    let victims: Vec<usize> = match whom {
                        Whom::All => up.clone(),
                        Whom::Leader => leader.into_iter().collect(),
                        Whom::Follower if !followers.is_empty() => {
                            vec![followers[self.rng.gen_range(0..followers.len())]]
                        }
                        Whom::Follower => Vec::new(),
                        Whom::Two => {
                            let spared = self.rng.gen_range(0..rigs.len());
                            up.iter().copied().filter(|&k| k != spared).take(2).collect()
                        }
                    };
                    for k in victims {
                        rigs[k].note(now, "killed (round)");
                        rigs[k].crash(sim, now, false, false);
                        self.down.push(k);
                    }
                }
                Step::RestartDown => self.restart_down(sim, rigs, now),
                Step::Isolate => {
                    if let Some(leader) = (0..rigs.len()).find(|&k| leads(&rigs[k])) {
                        for k in (0..rigs.len()).filter(|&k| k != leader) {
                            sim.partition(rigs[leader].name.as_str(), rigs[k].name.as_str());
                        }
                        rigs[leader].note(now, "cut off from the other members (round)");
                        self.cut = Some(leader);
                    }
                }
                Step::Recovered => {
                    rigs[0].shared.note(now, "sim", "recovered: every member running, a leader elected");
                    self.recoveries.push(now);
                }
            }
            self.steps.pop_front();
            self.until = None;
        }
    }

    /// Ends the rounds at the end of the workload phase (the healing follows): every member
    /// this round killed restarts and the links it cut are mended.
    pub fn finish(&mut self, sim: &mut turmoil::Sim, rigs: &mut [Rig], now: u64) {
        if self.steps.is_empty() && self.down.is_empty() && self.cut.is_none() {
            return;
        }
        self.restart_down(sim, rigs, now);
        self.mend(sim, rigs, now);
        self.steps.clear();
        self.until = None;
    }

    fn restart_down(&mut self, sim: &mut turmoil::Sim, rigs: &mut [Rig], now: u64) {
        for k in std::mem::take(&mut self.down) {
            rigs[k].apply(sim, now, Action::Restart);
        }
    }

    fn mend(&mut self, sim: &mut turmoil::Sim, rigs: &mut [Rig], now: u64) {
        if let Some(cut) = self.cut.take() {
            for k in (0..rigs.len()).filter(|&k| k != cut) {
                sim.repair(rigs[cut].name.as_str(), rigs[k].name.as_str());
            }
            rigs[cut].note(now, "links to the other members mended (round)");
        }
    }
}
