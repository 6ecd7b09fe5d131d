//! The load generator shared by every driver: closed-loop connections (one task each) that call an
//! operation again and again, a warm-up, a fixed measuring window, latencies per request, and the
//! server-side figures read from `/proc/<pid>` (CPU seconds, peak RSS). Also the fsync probe of
//! the machine line.

// Some helpers serve only the peer comparison.
#![cfg_attr(not(feature = "peers"), allow(dead_code))]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A boxed future.
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One connection's operation: a request (or a batch, or a page read) that returns the number of
/// events it appended or read.
pub trait Op: Send {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>>;
}

/// What a closed-loop run measured.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Events in the window.
    pub events: u64,
    /// Requests in the window.
    pub requests: u64,
    /// Length of the window, seconds.
    pub secs: f64,
    /// Latency of each request of the window, µs, sorted.
    pub lat_us: Vec<u32>,
    /// Failed requests (the connection stops at its first failure).
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// Server CPU seconds spent in the window (when a probe was given).
    pub server_cpu_secs: Option<f64>,
    /// CPU seconds of this process (the load generator) in the window: it shares the machine's
    /// cores with the server, so a heavier client leaves the server less.
    pub gen_cpu_secs: Option<f64>,
}

impl Measured {
    pub fn rate(&self) -> f64 {
        if self.secs > 0.0 {
            self.events as f64 / self.secs
        } else {
            0.0
        }
    }
    pub fn requests_rate(&self) -> f64 {
        if self.secs > 0.0 {
            self.requests as f64 / self.secs
        } else {
            0.0
        }
    }
    /// Generator CPU seconds per million events.
    pub fn gen_cpu_per_million(&self) -> Option<f64> {
        let c = self.gen_cpu_secs?;
        (self.events > 0).then(|| c * 1e6 / self.events as f64)
    }
    /// Server CPU seconds per million events.
    pub fn cpu_per_million(&self) -> Option<f64> {
        let c = self.server_cpu_secs?;
        (self.events > 0).then(|| c * 1e6 / self.events as f64)
    }
    /// Percentile `p` (0..1) of the latencies, in ms.
    pub fn pct_ms(&self, p: f64) -> f64 {
        pct(&self.lat_us, p) as f64 / 1000.0
    }
}

/// The `n` streams of connection `conn` of an append workload: `{prefix}-{conn}-{k}`.
pub fn own_streams(prefix: &str, conn: usize, n: usize) -> Vec<String> {
    (0..n).map(|k| format!("{prefix}-{conn}-{k}")).collect()
}

/// Percentile of sorted µs latencies.
pub fn pct(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// Runs every op in its own task: `warmup` unmeasured, then `window` measured; a request counts
/// when it both started and ended inside the window. `cpu` (the server's CPU seconds so far) is
/// read when the window opens and when it closes, while every connection is still open.
pub async fn closed_loop_cpu(
    ops: Vec<Box<dyn Op>>,
    warmup: Duration,
    window: Duration,
    cpu: Option<&(dyn Fn() -> f64 + Sync)>,
) -> Measured {
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let mut tasks = Vec::new();
    for mut op in ops {
        let (phase, errors, first_error) = (phase.clone(), errors.clone(), first_error.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(1 << 16);
            let mut events = 0u64;
            loop {
                let p0 = phase.load(Ordering::Relaxed);
                if p0 == STOP {
                    break;
                }
                let t = Instant::now();
                match op.call().await {
                    Ok(n) => {
                        if p0 == MEASURE && phase.load(Ordering::Relaxed) == MEASURE {
                            lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
                            events += n;
                        }
                    }
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        first_error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                        break;
                    }
                }
            }
            (lat, events, op)
        }));
    }
    tokio::time::sleep(warmup).await;
    let cpu0 = cpu.map(|f| f());
    let gen0 = own_cpu_secs();
    phase.store(MEASURE, Ordering::Relaxed);
    let start = Instant::now();
    tokio::time::sleep(window).await;
    phase.store(STOP, Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    let cpu1 = cpu.map(|f| f());
    let gen1 = own_cpu_secs();
    let mut m = Measured {
        secs,
        server_cpu_secs: cpu0.zip(cpu1).map(|(a, b)| (b - a).max(0.0)),
        gen_cpu_secs: gen0.zip(gen1).map(|(a, b)| (b - a).max(0.0)),
        ..Measured::default()
    };
    // Connections stay open until every task has ended (servers with a process per connection
    // keep their CPU figures until then).
    let mut keep = Vec::new();
    for t in tasks {
        // A connection stuck in a request (a long poll, a dead server) is abandoned after 30 s.
        match tokio::time::timeout(Duration::from_secs(30), t).await {
            Ok(Ok((lat, events, op))) => {
                keep.push(op);
                m.requests += lat.len() as u64;
                m.events += events;
                m.lat_us.extend(lat);
            }
            Ok(Err(e)) => {
                m.errors += 1;
                m.first_error.get_or_insert(format!("task failed: {e}"));
            }
            Err(_) => {
                m.errors += 1;
                m.first_error.get_or_insert("a request did not finish within 30 s".into());
            }
        }
    }
    m.errors += errors.load(Ordering::Relaxed);
    if let Some(e) = first_error.lock().unwrap_or_else(|e| e.into_inner()).take() {
        m.first_error.get_or_insert(e);
    }
    m.lat_us.sort_unstable();
    drop(keep);
    m
}

/// CPU seconds (user + system) and peak RSS of a process, from `/proc/<pid>/stat` and
/// `/proc/<pid>/status`; `None` when the process is gone.
pub fn proc_cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<u64> = after.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    // Fields after the command: state is field 3; utime 14, stime 15, and cutime 16, cstime 17:
    // children that exited and were waited for (PostgreSQL backends), so a sum over a process
    // tree does not drop when a child ends.
    let (utime, stime) = (*f.get(11)?, *f.get(12)?);
    let (cutime, cstime) = (*f.get(13)?, *f.get(14)?);
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime + cutime + cstime) as f64 / tick)
}

/// CPU seconds (user + system) of this process so far.
pub fn own_cpu_secs() -> Option<f64> {
    proc_cpu_secs(std::process::id())
}

/// Sum of [`proc_cpu_secs`] over `pids` (a server of several processes, like PostgreSQL).
pub fn cpu_secs_of(pids: &[u32]) -> f64 {
    pids.iter().filter_map(|p| proc_cpu_secs(*p)).sum()
}

/// Peak RSS (`VmHWM`) of a process in bytes.
pub fn proc_peak_rss(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The process and its descendants (PostgreSQL forks a backend per connection).
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    let all: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter_map(|pid| {
                    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                    let after = stat.rsplit_once(')')?.1;
                    let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
                    Some((pid, ppid))
                })
                .collect()
        })
        .unwrap_or_default();
    while i < out.len() {
        let p = out[i];
        out.extend(all.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// The fsync probe of the machine line: 4 KiB `pwrite` + `fdatasync` into a pre-written file in
/// `dir`, for `secs` seconds; returns (syncs/s, p50 µs, p99 µs).
pub fn fsync_probe(dir: &std::path::Path, secs: f64) -> std::io::Result<(f64, u32, u32)> {
    use std::os::unix::fs::FileExt;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("fsync-probe");
    let f = std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path)?;
    let block = vec![0x5au8; 4096];
    let blocks = 4096u64;
    for i in 0..blocks {
        f.write_all_at(&block, i * 4096)?;
    }
    f.sync_all()?;
    let mut lat = Vec::new();
    let start = Instant::now();
    let mut i = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        let t = Instant::now();
        f.write_all_at(&block, (i % blocks) * 4096)?;
        f.sync_data()?;
        lat.push(t.elapsed().as_micros() as u32);
        i += 1;
    }
    let total = start.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    lat.sort_unstable();
    Ok((lat.len() as f64 / total, pct(&lat, 0.5), pct(&lat, 0.99)))
}

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// The machine's CPU time so far from `/proc/stat`, in ticks: (steal, all). Steal is time the
/// hypervisor ran something else while this VM wanted the CPU; its share of a span says how much
/// of the machine a measurement really had.
pub fn cpu_steal_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    // user nice system idle iowait irq softirq steal (guest time is inside user and nice).
    let f: Vec<u64> = line.split_whitespace().skip(1).take(8).map(|x| x.parse().unwrap_or(0)).collect();
    Some((*f.get(7)?, f.iter().sum()))
}

/// Steal as a share (%) of the CPU time between two [`cpu_steal_ticks`] readings.
pub fn steal_pct(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    let ((s0, a0), (s1, a1)) = (before?, after?);
    (a1 > a0).then(|| 100.0 * s1.saturating_sub(s0) as f64 / (a1 - a0) as f64)
}

/// `uptime`'s load averages.
pub fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Flushes the page cache's dirty data (`sync`) and waits, at most `limit`, until the kernel
/// reports under 4 MiB dirty or under writeback, so that what one system left to write out
/// does not slow the disk of the next. Returns the seconds waited.
pub fn settle_disk(limit: std::time::Duration) -> f64 {
    let t = std::time::Instant::now();
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let pending_kib = || -> u64 {
        std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("Dirty:") || l.starts_with("Writeback:"))
            .filter_map(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
            .sum()
    };
    while pending_kib() > 4096 && t.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    t.elapsed().as_secs_f64()
}

/// The payload of every benchmark event: a JSON object of exactly `size` bytes.
pub fn payload(size: usize) -> bytes::Bytes {
    let mut d = b"{\"pad\":\"".to_vec();
    d.resize(size - 2, b'x');
    d.extend_from_slice(b"\"}");
    d.into()
}

/// A version-4-shaped UUID string unique to (`a`, `b`), cheap to make.
pub fn uuid_for(a: u64, b: u64) -> String {
    let hi = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5bd1e995;
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (hi >> 32) as u32,
        (hi >> 16) as u16,
        (hi & 0xfff) as u16,
        ((b >> 48) & 0xfff) as u16,
        b & 0xffff_ffff_ffff
    )
}

/// A small xorshift generator (the benchmark's own, so runs are repeatable).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// An index below `n` at random (0 when there is one choice), e.g. which of a connection's
    /// own streams to append to.
    pub fn pick(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}
