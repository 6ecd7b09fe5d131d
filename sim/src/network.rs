//! Faults between the node hosts of a cluster run: full partitions between two members, one-way
//! partitions (what `from` sends is lost, the other way works), a member isolated from every
//! other, held links (messages delayed until the hold ends, then delivered), and flaky links (a
//! burst of short partitions: message loss as TCP sees it, a broken connection). The seed decides
//! them ([`plan`]), at random instants of the workload phase; the harness heals every one at the
//! end.
//!
//! Invariants: the link state is counted per direction ([`Links`]), so overlapping faults on one
//! link end only when the last one does; a link is either cut or held, never both at once (a
//! fault that would mix them on a link is skipped), so ending one never undoes the other; after
//! [`Links::heal`] every link between members is healthy and nothing is held.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One fault on the links between two members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkFault {
    /// Nothing goes from `from` to `to` (one direction).
    Cut {
        /// The sender whose messages are lost.
        from: usize,
        /// The receiver.
        to: usize,
    },
    /// Messages between `a` and `b` (both ways) are held until the fault ends.
    Hold {
        /// One end.
        a: usize,
        /// The other end.
        b: usize,
    },
}

/// A fault that begins at a time and lasts `span`: one or several link faults at once.
#[derive(Clone, Debug)]
pub struct NetFault {
    /// What the trace says.
    pub what: String,
    /// The link faults.
    pub links: Vec<LinkFault>,
    /// How long it lasts.
    pub span: Duration,
}

/// The network faults of a cluster run of `hosts` members (their names in `names`), each with its
/// start (µs), inside a workload phase of `duration`.
pub fn plan(seed: u64, names: &[String], duration: Duration) -> Vec<(u64, NetFault)> {
    let hosts = names.len();
    if hosts < 2 {
        return Vec::new();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e65_7400_0000_0006);
    let end = duration.as_micros() as u64;
    let mut out = Vec::new();
    for _ in 0..rng.gen_range(1..=6) {
        let a = rng.gen_range(0..hosts);
        let b = (a + rng.gen_range(1..hosts)) % hosts;
        let span = Duration::from_millis(rng.gen_range(100..4000));
        let at = rng.gen_range(0..end);
        let both =
            |a: usize, b: usize| vec![LinkFault::Cut { from: a, to: b }, LinkFault::Cut { from: b, to: a }];
        match rng.gen_range(0..100) {
            0..=29 => out.push((
                at,
                NetFault {
                    what: format!("{} and {} partitioned", names[a], names[b]),
                    links: both(a, b),
                    span,
                },
            )),
            30..=49 => out.push((
                at,
                NetFault {
                    what: format!("{} cannot reach {} (one way)", names[a], names[b]),
                    links: vec![LinkFault::Cut { from: a, to: b }],
                    span,
                },
            )),
            50..=69 => out.push((
                at,
                NetFault {
                    what: format!("{} isolated from the other members", names[a]),
                    links: (0..hosts).filter(|&o| o != a).flat_map(|o| both(a, o)).collect(),
                    span,
                },
            )),
            70..=84 => out.push((
                at,
                NetFault {
                    what: format!("messages between {} and {} held", names[a], names[b]),
                    links: vec![LinkFault::Hold { a: a.min(b), b: a.max(b) }],
                    span: span.min(Duration::from_millis(1500)),
                },
            )),
            _ => {
                // A flaky link: short partitions, one after another.
                let mut t = at;
                for _ in 0..rng.gen_range(3..10) {
                    let cut = Duration::from_millis(rng.gen_range(20..200));
                    out.push((
                        t,
                        NetFault {
                            what: format!(
                                "flaky link between {} and {}: a short partition",
                                names[a], names[b]
                            ),
                            links: both(a, b),
                            span: cut,
                        },
                    ));
                    t += cut.as_micros() as u64 + rng.gen_range(20_000..300_000);
                }
            }
        }
    }
    out
}

/// The state of the links between members: how many active faults cut each direction, and hold
/// each pair.
#[derive(Debug, Default)]
pub struct Links {
    cut: BTreeMap<(usize, usize), u32>,
    held: BTreeMap<(usize, usize), u32>,
}

impl Links {
    fn cut_count(&self, a: usize, b: usize) -> u32 {
        self.cut.get(&(a, b)).copied().unwrap_or(0) + self.cut.get(&(b, a)).copied().unwrap_or(0)
    }

    /// Applies `f`'s link faults; returns those applied (a fault that would mix a cut and a hold
    /// on one link is skipped), to be passed to [`Links::end`] when it ends.
    pub fn begin(&mut self, sim: &mut turmoil::Sim, names: &[String], f: &NetFault) -> Vec<LinkFault> {
        let mut applied = Vec::new();
        for l in &f.links {
            match *l {
                LinkFault::Cut { from, to } => {
                    if self.held.get(&(from.min(to), from.max(to))).copied().unwrap_or(0) > 0 {
                        continue;
                    }
                    let n = self.cut.entry((from, to)).or_default();
                    *n += 1;
                    if *n == 1 {
                        sim.partition_oneway(names[from].as_str(), names[to].as_str());
                    }
                }
                LinkFault::Hold { a, b } => {
                    if self.cut_count(a, b) > 0 {
                        continue;
                    }
                    let n = self.held.entry((a, b)).or_default();
                    *n += 1;
                    if *n == 1 {
                        sim.hold(names[a].as_str(), names[b].as_str());
                    }
                }
            }
            applied.push(l.clone());
        }
        applied
    }

    /// Ends link faults that [`Links::begin`] applied.
    pub fn end(&mut self, sim: &mut turmoil::Sim, names: &[String], applied: &[LinkFault]) {
        for l in applied {
            match *l {
                LinkFault::Cut { from, to } => {
                    let n = self.cut.entry((from, to)).or_default();
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        sim.repair_oneway(names[from].as_str(), names[to].as_str());
                    }
                }
                LinkFault::Hold { a, b } => {
                    let n = self.held.entry((a, b)).or_default();
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        sim.release(names[a].as_str(), names[b].as_str());
                    }
                }
            }
        }
    }

    /// Ends every fault: every link healthy, every held message released.
    pub fn heal(&mut self, sim: &mut turmoil::Sim, names: &[String]) {
        for (&(from, to), n) in self.cut.iter_mut() {
            if *n > 0 {
                sim.repair_oneway(names[from].as_str(), names[to].as_str());
                *n = 0;
            }
        }
        for (&(a, b), n) in self.held.iter_mut() {
            if *n > 0 {
                sim.release(names[a].as_str(), names[b].as_str());
                *n = 0;
            }
        }
    }
}
