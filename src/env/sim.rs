//! The simulated environment (feature `sim` only): turmoil's network and virtual time, the
//! simulated host's tokio runtime, and a disk supplied by the simulator (normally `fault/`'s
//! seeded faulty disk over [`MemDisk`](super::mem::MemDisk)).
//!
//! What it owns and guarantees:
//! - [`SimClock`]: monotonic time is turmoil's simulated elapsed time (never decreasing, also
//!   across node restarts, since one clock outlives the node's incarnations); wall time is a seeded
//!   base plus elapsed time plus injected jumps ([`SimClock::jump`], which may go backwards).
//! - [`SimNet`]: TCP over `turmoil::net`, so partitions, held links and latency apply.
//! - [`SimRuntime`]: tasks are spawned on the host's `LocalSet` (dropped, in spawn order, when
//!   turmoil crashes the host); timers follow its paused clock; `blocking` and `background` work runs inline, on
//!   the simulation thread, so a seed replays exactly. A simulated slow disk is a delay *after*
//!   the inline work (the caller waits in simulated time; nothing else is held up).
//! - After a panic was reported on this thread ([`halt`]) no further blocking or background work
//!   runs: the store's group-commit state may be inconsistent after a panic, and the simulator is
//!   about to fail the seed anyway.
//!
//! Nothing here is linked into the production binary.

use std::cell::Cell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{BoxFuture, Clock, Conn, Disk, Env, Listener, Net, Runtime};

/// A source of simulated I/O latency: called after each piece of blocking work.
pub type IoDelay = Arc<dyn Fn() -> Duration + Send + Sync>;

/// Builds a simulated environment. Must be called inside a turmoil host.
pub fn env(disk: Arc<dyn Disk>, clock: Arc<SimClock>, io_delay: Option<IoDelay>, seed: u64) -> Env {
    Env::new(disk, clock, Arc::new(SimNet), Arc::new(SimRuntime { io_delay }), seed)
}

/// The simulated DNS: for a name, how long the answer takes and what it is (the addresses, or
/// no answer). Called at each [`Net::resolve`] of a host name on the simulation's thread.
pub type Resolver = std::rc::Rc<dyn Fn(&str) -> (Duration, io::Result<Vec<IpAddr>>)>;

thread_local! {
    static DNS: std::cell::RefCell<Option<Resolver>> = const { std::cell::RefCell::new(None) };
    static HALTED: Cell<bool> = const { Cell::new(false) };
    static LATE_JOBS: std::cell::RefCell<Option<IoDelay>> = const { std::cell::RefCell::new(None) };
}

/// Makes every side lane's job on this thread start after the delay `late` draws (`None`: at
/// once, the default): a run that reorders its pipelines' stages against everything else on
/// the host, as threads the scheduler runs late would be. Its own source of randomness, so runs
/// that do not ask for it replay as before.
pub fn late_jobs(late: Option<IoDelay>) {
    LATE_JOBS.with(|l| *l.borrow_mut() = late);
}

fn late_job() -> Duration {
    LATE_JOBS.with(|l| l.borrow().as_ref().map_or(Duration::ZERO, |f| f()))
}

/// Installs the DNS the simulated nodes on this thread ask (`None`: none, the default: a host
/// name is then not found, and only IP addresses resolve). The simulator installs one per run
/// that discovers its members through DNS, with its own seeded faults.
pub fn set_dns(resolver: Option<Resolver>) {
    DNS.with(|d| *d.borrow_mut() = resolver);
}

/// Stops blocking and background work on this thread (called by the simulator's panic hook).
pub fn halt() {
    HALTED.with(|h| h.set(true));
}

/// Allows blocking and background work again (at the start of a run).
pub fn reset_halt() {
    HALTED.with(|h| h.set(false));
}

/// Whether [`halt`] was called since the last [`reset_halt`].
pub fn halted() -> bool {
    HALTED.with(|h| h.get())
}

/// Simulated time: turmoil's elapsed time, and a wall clock that can jump.
pub struct SimClock {
    wall_base_us: i64,
    jump_us: AtomicI64,
    last_us: AtomicU64,
}

impl SimClock {
    /// A clock whose wall time starts at `wall_base_us` (µs since the epoch).
    pub fn new(wall_base_us: i64) -> Arc<SimClock> {
        Arc::new(SimClock { wall_base_us, jump_us: AtomicI64::new(0), last_us: AtomicU64::new(0) })
    }

    /// Moves the wall clock by `delta_us` (either way); monotonic time is unaffected.
    pub fn jump(&self, delta_us: i64) {
        self.jump_us.fetch_add(delta_us, Ordering::SeqCst);
    }

    /// The sum of all jumps so far.
    pub fn jumped_us(&self) -> i64 {
        self.jump_us.load(Ordering::SeqCst)
    }
}

impl Clock for SimClock {
    fn monotonic(&self) -> Duration {
        // Outside a running host (the simulator between steps) turmoil has no "now": the last
        // value read stands in.
        let now = turmoil::sim_elapsed().map(|d| d.as_micros() as u64).unwrap_or(0);
        let prev = self.last_us.fetch_max(now, Ordering::SeqCst);
        Duration::from_micros(prev.max(now))
    }
    fn wall_micros(&self) -> i64 {
        self.wall_base_us + self.monotonic().as_micros() as i64 + self.jump_us.load(Ordering::SeqCst)
    }
}

/// TCP over turmoil's simulated network.
pub struct SimNet;

/// A listener and the address it reports: the one asked for (turmoil binds only the unspecified
/// or loopback address, so a listener asked for the host's own address binds the unspecified one
/// with its port, and still reports the host's address, as a real listener on it would).
struct SimListener(turmoil::net::TcpListener, Option<SocketAddr>);

impl Listener for SimListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(Box<dyn Conn>, SocketAddr)>> {
        Box::pin(async move {
            let (s, a) = self.0.accept().await?;
            Ok((Box::new(s) as Box<dyn Conn>, a))
        })
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self.1 {
            Some(a) => Ok(a),
            None => self.0.local_addr(),
        }
    }
}

impl Net for SimNet {
    fn listen(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            if addr.ip().is_unspecified() || addr.ip().is_loopback() || addr.port() == 0 {
                let l = turmoil::net::TcpListener::bind(addr).await?;
                return Ok(Box::new(SimListener(l, None)) as Box<dyn Listener>);
            }
            let any = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), addr.port());
            let l = turmoil::net::TcpListener::bind(any).await?;
            Ok(Box::new(SimListener(l, Some(addr))) as Box<dyn Listener>)
        })
    }
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Conn>>> {
        Box::pin(async move {
            let s = turmoil::net::TcpStream::connect(addr).await?;
            Ok(Box::new(s) as Box<dyn Conn>)
        })
    }
    // The simulated answer's delay is turmoil's paused clock, as `SimRuntime::sleep`'s.
    #[allow(clippy::disallowed_methods)]
    fn resolve(&self, host: &str) -> BoxFuture<'_, io::Result<Vec<IpAddr>>> {
        let (delay, answer) = match host.parse::<IpAddr>() {
            Ok(ip) => (Duration::ZERO, Ok(vec![ip])),
            Err(_) => DNS.with(|d| match d.borrow().as_ref() {
                Some(resolve) => resolve(host),
                None => {
                    let why = format!("{host}: the simulation has no DNS");
                    (Duration::ZERO, Err(io::Error::new(io::ErrorKind::NotFound, why)))
                }
            }),
        };
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            answer
        })
    }
}

/// The simulated host's runtime; blocking work inline, optionally followed by a simulated delay.
pub struct SimRuntime {
    io_delay: Option<IoDelay>,
}

impl Runtime for SimRuntime {
    // On the host's LocalSet, not the runtime's task list: tokio shards that list by a
    // process-wide task id, so the order in which a crash drops tasks (and their sockets send
    // FIN/RST) would depend on what else ran in the process. The LocalSet keeps one list.
    fn spawn(&self, fut: BoxFuture<'static, ()>) {
        tokio::task::spawn_local(fut);
    }
    // Timers follow the host runtime's paused clock, which turmoil advances.
    #[allow(clippy::disallowed_methods)]
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
    #[allow(clippy::disallowed_methods)]
    fn blocking(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        if halted() {
            return Box::pin(std::future::pending());
        }
        f();
        match self.io_delay.as_ref().map(|d| d()) {
            Some(d) if !d.is_zero() => Box::pin(tokio::time::sleep(d)),
            _ => Box::pin(async {}),
        }
    }
    fn background(&self, _name: &'static str, f: Box<dyn FnOnce() + Send>) {
        if !halted() {
            f();
        }
    }
    fn lane(&self, _name: &'static str) -> Box<dyn super::Lane> {
        Box::new(SimRuntime { io_delay: self.io_delay.clone() })
    }
    fn side_lane(&self, _name: &'static str) -> Box<dyn super::Lane> {
        Box::new(SideLane { jobs: Arc::default(), io_delay: self.io_delay.clone() })
    }
}

/// Jobs queued on a [`SideLane`], run first in, first out.
type Jobs = Arc<std::sync::Mutex<std::collections::VecDeque<Box<dyn FnOnce() + Send>>>>;

/// A side lane ([`Runtime::side_lane`]): each job queued spawns a task on the host that runs the
/// oldest queued job, then waits the modelled I/O delay. Jobs run in the order queued, after the
/// task that queued them yields; a crash of the host drops the tasks and with them the jobs not
/// yet run.
struct SideLane {
    jobs: Jobs,
    io_delay: Option<IoDelay>,
}

impl super::Lane for SideLane {
    fn run(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).push_back(f);
        let (jobs, delay) = (self.jobs.clone(), self.io_delay.clone());
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        tokio::task::spawn_local(async move {
            if halted() {
                return;
            }
            // The job may start late, as on a thread the scheduler did not run at once (what
            // happens meanwhile on the host then comes before it): see `late_jobs`.
            let late = late_job();
            if !late.is_zero() {
                #[allow(clippy::disallowed_methods)]
                tokio::time::sleep(late).await;
                if halted() {
                    return;
                }
            }
            let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            if let Some(job) = job {
                job();
            }
            if let Some(d) = delay.as_ref().map(|d| d()).filter(|d| !d.is_zero()) {
                #[allow(clippy::disallowed_methods)]
                tokio::time::sleep(d).await;
            }
            let _ = done.send(());
        });
        Box::pin(async move {
            let _ = finished.await;
        })
    }
}

impl super::Lane for SimRuntime {
    fn run(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        self.blocking(f)
    }
}
