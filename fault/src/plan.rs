//! A fault plan derived from a seed: which fault kinds are on for this run (swarm testing), their
//! rates, and a schedule of timed fault events for the simulator to carry out.
//!
//! Invariants: [`FaultPlan::from_seed`] is a pure function of its arguments (one ChaCha stream);
//! every event of the schedule lies inside the workload phase and every window it opens (partition,
//! hold, latency, disk trouble, disk full) closes by itself; the simulator heals everything that is
//! still open at the end of the workload phase. Kinds that destroy committed data (lost and
//! misdirected writes, bit rot, latent sector errors) are flagged by [`FaultPlan::destructive`]:
//! with them a node may rightly refuse to serve data it can no longer verify.

use std::fmt;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::seeded::DiskRates;

/// A kind of fault that a seed switches on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// Power loss: unsynced writes vanish.
    PowerLoss,
    /// Power losses tear unsynced writes at sector granularity.
    TornWrites,
    /// The process is killed; the page cache survives.
    Kill,
    /// A client host is partitioned from the node.
    Partition,
    /// Messages between a client host and the node are held, then released.
    Hold,
    /// Message latency goes up for a while.
    Latency,
    /// The node's wall clock jumps.
    ClockJump,
    /// `EIO` on writes, syncs and reads during disk-trouble windows.
    DiskEio,
    /// Transient bit flips in data read during disk-trouble windows.
    ReadFlip,
    /// The disk fills up for a while.
    DiskFull,
    /// Blocking I/O takes simulated time.
    SlowIo,
    /// Writes reported done but never stored (disk-trouble windows).
    LostWrite,
    /// Writes stored at the wrong offset (disk-trouble windows).
    Misdirect,
    /// A stored bit of a chunk or index file flips at rest.
    BitRot,
    /// A sector of a chunk file becomes unreadable.
    LatentSector,
    /// BUGGIFY sites in node code are enabled.
    Buggify,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 16] = [
        FaultKind::PowerLoss,
        FaultKind::TornWrites,
        FaultKind::Kill,
        FaultKind::Partition,
        FaultKind::Hold,
        FaultKind::Latency,
        FaultKind::ClockJump,
        FaultKind::DiskEio,
        FaultKind::ReadFlip,
        FaultKind::DiskFull,
        FaultKind::SlowIo,
        FaultKind::LostWrite,
        FaultKind::Misdirect,
        FaultKind::BitRot,
        FaultKind::LatentSector,
        FaultKind::Buggify,
    ];

    /// Whether this kind destroys committed data.
    pub fn destructive(self) -> bool {
        matches!(
            self,
            FaultKind::LostWrite | FaultKind::Misdirect | FaultKind::BitRot | FaultKind::LatentSector
        )
    }
}

/// One scheduled fault.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultEvent {
    /// Power loss (torn or not); the node is down for `down`.
    PowerLoss {
        /// Whether unsynced writes may survive in part.
        torn: bool,
        /// Downtime.
        down: Duration,
    },
    /// The process is killed and restarted after `down`.
    Kill {
        /// Downtime.
        down: Duration,
    },
    /// Client host `host` cannot reach the node for `span`.
    Partition {
        /// Client host index.
        host: usize,
        /// Duration.
        span: Duration,
    },
    /// Messages between client host `host` and the node are held for `span`, then delivered.
    Hold {
        /// Client host index.
        host: usize,
        /// Duration.
        span: Duration,
    },
    /// Maximum message latency is `max` for `span`.
    Latency {
        /// Maximum latency.
        max: Duration,
        /// Duration.
        span: Duration,
    },
    /// The node's wall clock moves by `delta_us`.
    ClockJump {
        /// Microseconds, either sign.
        delta_us: i64,
    },
    /// The plan's disk rates are on for `span`.
    DiskTrouble {
        /// Duration.
        span: Duration,
    },
    /// Only `budget` more bytes can be written for `span`.
    DiskFull {
        /// Bytes.
        budget: u64,
        /// Duration.
        span: Duration,
    },
    /// One stored bit of a chunk or index file flips (`pick` chooses which, at that time).
    BitRot {
        /// Selector.
        pick: u64,
    },
    /// One sector of a chunk file becomes unreadable (`pick` chooses which, at that time).
    LatentSector {
        /// Selector.
        pick: u64,
    },
}

/// Everything a seed decides about faults.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultPlan {
    /// The seed.
    pub seed: u64,
    /// Kinds switched on.
    pub kinds: Vec<FaultKind>,
    /// Rates used during disk-trouble windows.
    pub disk: DiskRates,
    /// Slow I/O: probability that a blocking call is delayed, and the largest delay.
    pub io_delay: Option<(f64, Duration)>,
    /// The schedule, sorted by time.
    pub events: Vec<(Duration, FaultEvent)>,
}

fn log_uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + rng.gen::<f64>() * (hi.ln() - lo.ln())).exp()
}

fn span(rng: &mut ChaCha8Rng, lo_ms: u64, hi_ms: u64) -> Duration {
    Duration::from_millis(rng.gen_range(lo_ms..=hi_ms))
}

impl FaultPlan {
    /// Derives the plan of `seed` for a workload phase of `duration` with `client_hosts` client
    /// hosts. About one seed in sixteen runs without faults.
    pub fn from_seed(seed: u64, duration: Duration, client_hosts: usize) -> FaultPlan {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xfa17_0000_5eed_0000);
        let calm = rng.gen_ratio(1, 16);
        // Kinds that destroy committed data are rarer (15% each), so about half the seeds also
        // check that the node comes back after the faults (liveness); the others are on half the time.
        let kinds: Vec<FaultKind> = FaultKind::ALL
            .into_iter()
            .filter(|k| rng.gen_bool(if k.destructive() { 0.15 } else { 0.5 }))
            .filter(|_| !calm)
            .collect();
        let on = |k| kinds.contains(&k);
        let mut disk = DiskRates::default();
        if on(FaultKind::DiskEio) {
            disk.eio_write = log_uniform(&mut rng, 1e-3, 3e-2);
            disk.eio_sync = log_uniform(&mut rng, 1e-3, 3e-2);
            disk.eio_read = log_uniform(&mut rng, 1e-3, 3e-2);
        }
        if on(FaultKind::ReadFlip) {
            disk.read_flip = log_uniform(&mut rng, 1e-3, 5e-2);
        }
        if on(FaultKind::LostWrite) {
            disk.lost_write = log_uniform(&mut rng, 1e-3, 2e-2);
        }
        if on(FaultKind::Misdirect) {
            disk.misdirect = log_uniform(&mut rng, 1e-3, 2e-2);
        }
        let io_delay =
            on(FaultKind::SlowIo).then(|| (log_uniform(&mut rng, 0.01, 0.5), span(&mut rng, 1, 200)));
        let secs = duration.as_secs_f64().max(1.0);
        let mut events = Vec::new();
        let hosts = client_hosts.max(1);
        for &k in &kinds {
            // About one event per 5–20 simulated seconds of the workload phase, at least one.
            let n = 1 + (secs / rng.gen_range(5.0..20.0)) as usize;
            for _ in 0..n {
                let at = Duration::from_millis(rng.gen_range(200..(duration.as_millis() as u64).max(201)));
                let ev = match k {
                    FaultKind::PowerLoss => FaultEvent::PowerLoss {
                        torn: on(FaultKind::TornWrites) && rng.gen_bool(0.7),
                        down: span(&mut rng, 0, 3000),
                    },
                    FaultKind::Kill => FaultEvent::Kill { down: span(&mut rng, 0, 2000) },
                    FaultKind::Partition => FaultEvent::Partition {
                        host: rng.gen_range(0..hosts),
                        span: span(&mut rng, 100, 8000),
                    },
                    FaultKind::Hold => {
                        FaultEvent::Hold { host: rng.gen_range(0..hosts), span: span(&mut rng, 100, 4000) }
                    }
                    FaultKind::Latency => FaultEvent::Latency {
                        max: span(&mut rng, 20, 2000),
                        span: span(&mut rng, 500, 10_000),
                    },
                    FaultKind::ClockJump => {
                        let mag = log_uniform(&mut rng, 1e3, 3.6e9) as i64;
                        FaultEvent::ClockJump { delta_us: if rng.gen_bool(0.5) { mag } else { -mag } }
                    }
                    FaultKind::DiskEio
                    | FaultKind::ReadFlip
                    | FaultKind::LostWrite
                    | FaultKind::Misdirect => FaultEvent::DiskTrouble { span: span(&mut rng, 200, 5000) },
                    FaultKind::DiskFull => FaultEvent::DiskFull {
                        budget: rng.gen_range(0..256 * 1024),
                        span: span(&mut rng, 500, 8000),
                    },
                    FaultKind::BitRot => FaultEvent::BitRot { pick: rng.gen() },
                    FaultKind::LatentSector => FaultEvent::LatentSector { pick: rng.gen() },
                    FaultKind::TornWrites | FaultKind::SlowIo | FaultKind::Buggify => continue,
                };
                events.push((at, ev));
            }
        }
        events.sort_by_key(|(t, _)| *t);
        FaultPlan { seed, kinds, disk, io_delay, events }
    }

    /// Whether `k` is on.
    pub fn has(&self, k: FaultKind) -> bool {
        self.kinds.contains(&k)
    }

    /// Whether any kind that destroys committed data is on.
    pub fn destructive(&self) -> bool {
        self.kinds.iter().any(|k| k.destructive())
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<String> = self.kinds.iter().map(|k| format!("{k:?}")).collect();
        writeln!(f, "fault kinds: [{}]", kinds.join(", "))?;
        writeln!(f, "disk rates (in disk-trouble windows): {:?}", self.disk)?;
        if let Some((p, max)) = self.io_delay {
            writeln!(f, "slow I/O: p={p:.3} up to {max:?}")?;
        }
        for (t, e) in &self.events {
            writeln!(f, "  at {:>9.3}s  {e:?}", t.as_secs_f64())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_replay_and_vary() {
        let d = Duration::from_secs(20);
        assert_eq!(FaultPlan::from_seed(3, d, 4), FaultPlan::from_seed(3, d, 4));
        let plans: Vec<FaultPlan> = (0..200).map(|s| FaultPlan::from_seed(s, d, 4)).collect();
        assert!(plans.iter().any(|p| p.kinds.is_empty()), "some seeds are calm");
        let destructive = plans.iter().filter(|p| p.destructive()).count();
        assert!((60..140).contains(&destructive), "{destructive} of 200 plans destroy data");
        for k in FaultKind::ALL {
            assert!(plans.iter().any(|p| p.has(k)), "{k:?} is on for some seed");
            assert!(plans.iter().any(|p| !p.has(k)), "{k:?} is off for some seed");
        }
        for p in &plans {
            assert!(p.events.windows(2).all(|w| w[0].0 <= w[1].0));
            assert!(p.events.iter().all(|(t, _)| *t < d));
        }
    }
}
