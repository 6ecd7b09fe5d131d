//! The real environment: std files, tokio sockets and timers, the OS clocks and OS entropy.
//!
//! This is the only module allowed to touch the operating system (see `clippy.toml`). It holds no
//! logic beyond translating the [`super`] traits to system calls.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{
    BoxFuture, Clock, Conn, Disk, Env, File, Lane, Listener, LocalListener, Net, OpenMode, OsStats, Runtime,
    DIRECT_BLOCK,
};

/// Builds the production environment. Must be called inside a tokio runtime.
pub fn env() -> Env {
    let seed = rand::random::<u64>();
    Env::new(
        Arc::new(RealDisk),
        Arc::new(RealClock::new()),
        Arc::new(RealNet),
        Arc::new(RealRuntime { handle: tokio::runtime::Handle::current() }),
        seed,
    )
}

/// `std::fs` with positional I/O.
pub struct RealDisk;

struct RealFile(std::fs::File);

thread_local! {
    /// Set while [`Disk::run_cached`] runs a job on this thread: reads must not wait for the device.
    static NOWAIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether a read of that job found data that is not in the page cache.
    static WOULD_BLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `pread` of up to `len` bytes into `buf`; inside [`Disk::run_cached`] with `RWF_NOWAIT`, so
/// data that is not in the page cache fails the read (`WouldBlock`) and marks the job.
fn pread(file: &std::fs::File, buf: *mut u8, len: usize, offset: u64) -> io::Result<usize> {
    let at = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
    let n = if NOWAIT.get() {
        let iov = libc::iovec { iov_base: buf.cast(), iov_len: len };
        // SAFETY: `iov` describes `len` writable bytes at `buf` (the caller's buffer).
        unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) }
    } else {
        // SAFETY: `buf` is `len` writable bytes (the caller's buffer).
        unsafe { libc::pread(file.as_raw_fd(), buf.cast(), len, at) }
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // Not cached, or no RWF_NOWAIT on this kernel or file system: the job goes to the pool.
        Some(libc::EAGAIN | libc::EOPNOTSUPP | libc::ENOSYS) if NOWAIT.get() => {
            WOULD_BLOCK.set(true);
            Err(io::Error::new(io::ErrorKind::WouldBlock, "data not in the page cache"))
        }
        _ => Err(e),
    }
}

impl File for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            match pread(&self.0, buf.as_mut_ptr(), buf.len(), offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn start_writeback(&self) {
        // SAFETY: sync_file_range on a file descriptor this value owns; the whole file (offset 0,
        // length 0 = to the end); SYNC_FILE_RANGE_WRITE only starts write-out. A failure is
        // ignored: this is a hint, and the later sync reports any error.
        let _ = unsafe { libc::sync_file_range(self.0.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        let mut v: Vec<u8> = Vec::with_capacity(len);
        while v.len() < len {
            let spare = v.spare_capacity_mut();
            let at = offset + (len - spare.len()) as u64;
            // `spare` is writable memory of `spare.len()` bytes owned by `v`; pread writes at most
            // that many bytes into it and returns how many it wrote.
            match pread(&self.0, spare.as_mut_ptr().cast(), spare.len(), at) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read")),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
                // SAFETY: pread initialised the first `n` bytes of the spare capacity.
                Ok(n) => unsafe { v.set_len(v.len() + n) },
            }
        }
        Ok(v)
    }
}

/// Asks the kernel to drop the page-cache pages of `path` (clean pages only), so the next reads
/// go to the device: for tests and cold-read benchmarks.
pub fn drop_cached(path: &Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: a plain system call on a descriptor this function owns.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// The multi-threaded runtime a node runs on, with `worker_threads` HTTP worker threads
/// (`Config::worker_threads_for` this machine's [`cores`]).
pub fn node_runtime(worker_threads: usize) -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(worker_threads.max(1)).enable_all().build()
}

/// Puts the calling thread under the Linux `SCHED_BATCH` policy, which every thread it starts
/// afterwards inherits (the runtime's workers and blocking pool, the lanes). A batch thread that
/// wakes does not preempt the thread running on its core; it runs at the next scheduling point.
/// A node's threads hand work to each other at every step of a write (HTTP worker, commit,
/// checkpoint, replication, release), and with wake-up preemption each hand-off can switch
/// twice; measured with three nodes on two cores, the switches, not the work, bounded the
/// cluster (`docs/decisions.md`). Fairness between processes is unchanged (same nice value).
/// Called before the runtime is built; elsewhere than Linux it does nothing.
pub fn batch_scheduling() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: a plain system call on the calling thread (pid 0), with a valid parameter.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Cores this process may run on.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A file opened with `O_DIRECT` ([`Disk::open_direct`]): writes go through one aligned block
/// buffer; reads copy from aligned reads of the blocks that hold them.
struct DirectFile {
    file: std::fs::File,
    /// `2 * DIRECT_BLOCK` bytes, so an aligned block fits at some offset.
    buf: std::sync::Mutex<Vec<u8>>,
}

impl DirectFile {
    fn with_block<T>(&self, f: impl FnOnce(&std::fs::File, &mut [u8]) -> io::Result<T>) -> io::Result<T> {
        let mut buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let skew = buf.as_ptr().align_offset(DIRECT_BLOCK);
        f(&self.file, &mut buf[skew..skew + DIRECT_BLOCK])
    }
}

impl File for DirectFile {
    fn read_at(&self, out: &mut [u8], offset: u64) -> io::Result<usize> {
        let block_at = offset / DIRECT_BLOCK as u64 * DIRECT_BLOCK as u64;
        let skip = (offset - block_at) as usize;
        self.with_block(|f, block| {
            let n = f.read_at(block, block_at)?;
            let got = n.saturating_sub(skip).min(out.len());
            out[..got].copy_from_slice(&block[skip..skip + got]);
            Ok(got)
        })
    }
    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        if offset % DIRECT_BLOCK as u64 != 0 || data.len() % DIRECT_BLOCK != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("direct write of {} bytes at {offset}: whole aligned blocks only", data.len()),
            ));
        }
        self.with_block(|f, block| {
            for (k, piece) in data.chunks(DIRECT_BLOCK).enumerate() {
                block.copy_from_slice(piece);
                f.write_all_at(block, offset + (k * DIRECT_BLOCK) as u64)?;
            }
            Ok(())
        })
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

impl Disk for RealDisk {
    fn copy_file(&self, from: &Path, to: &Path) -> io::Result<u64> {
        // `copy_file_range` on Linux (with a read/write fallback inside std).
        std::fs::copy(from, to)
    }
    fn run_cached(&self, f: &mut dyn FnMut()) -> bool {
        // Reset even if `f` unwinds, so later work on this thread reads normally.
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                NOWAIT.set(false);
            }
        }
        if NOWAIT.get() {
            // Nested: the outer job's flags stand.
            f();
            return !WOULD_BLOCK.get();
        }
        WOULD_BLOCK.set(false);
        NOWAIT.set(true);
        let _reset = Reset;
        f();
        !WOULD_BLOCK.get()
    }
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let direct =
            std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(path);
        match direct {
            Ok(file) => {
                Ok(Arc::new(DirectFile { file, buf: std::sync::Mutex::new(vec![0; 2 * DIRECT_BLOCK]) }))
            }
            // File systems without O_DIRECT (tmpfs): through the page cache.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.open(path, OpenMode::ReadWrite),
            Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        }
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let mut o = std::fs::OpenOptions::new();
        o.read(true);
        match mode {
            OpenMode::Read => {}
            OpenMode::ReadWrite => {
                o.write(true);
            }
            OpenMode::CreateNew => {
                o.write(true).create_new(true);
            }
            OpenMode::CreateTruncate => {
                o.write(true).create(true).truncate(true);
            }
        }
        o.mode(0o644);
        let f = o.open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Arc::new(RealFile(f)))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn create_zeroed(&self, path: &Path, len: u64) -> io::Result<Arc<dyn File>> {
        // O_DIRECT writes of a 4 KiB-aligned zero buffer: new blocks are allocated and written
        // without going through the page cache (2–9x faster here than buffered writes plus
        // fsync). File systems without O_DIRECT (tmpfs) fall back to buffered writes.
        const PIECE: usize = 1 << 20;
        const ALIGN: usize = 4096;
        let direct = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        match direct {
            Ok(f) => {
                let backing = vec![0u8; PIECE + ALIGN];
                let skew = backing.as_ptr().align_offset(ALIGN);
                let zeros = &backing[skew..skew + PIECE];
                let aligned_len = len / ALIGN as u64 * ALIGN as u64;
                let mut off = 0u64;
                while off < aligned_len {
                    let n = (aligned_len - off).min(PIECE as u64) as usize;
                    f.write_all_at(&zeros[..n], off)?;
                    off += n as u64;
                }
                drop(f);
                let f = self.open(path, OpenMode::ReadWrite)?;
                super::write_zeros(&*f, aligned_len, len)?;
                f.sync_data()?;
                Ok(f)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let f = self.open(path, OpenMode::CreateTruncate)?;
                super::write_zeros(&*f, 0, len)?;
                f.sync_data()?;
                Ok(f)
            }
            Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        }
    }
    fn try_lock(&self, path: &Path) -> io::Result<Option<super::DiskLock>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        // SAFETY: `f` is an open descriptor; flock has no memory effects. The lock lives as long
        // as the descriptor, which the guard owns, and dies with the process.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Some(super::DiskLock(Box::new(f))));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(None);
        }
        Err(io::Error::new(e.kind(), format!("lock {}: {e}", path.display())))
    }
    fn space(&self, path: &Path) -> Option<(u64, u64)> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
        if rc != 0 {
            return None;
        }
        let frsize = st.f_frsize as u64;
        Some((st.f_blocks as u64 * frsize, st.f_bavail as u64 * frsize))
    }
}

/// The real clock on its own (for what runs before the environment: the log's timestamps).
pub fn clock() -> Arc<dyn Clock> {
    Arc::new(RealClock::new())
}

/// `CLOCK_MONOTONIC` (what `Instant` reads) and `CLOCK_REALTIME`, read with `clock_gettime` and
/// converted with integer arithmetic: the request path reads the clock several times per
/// request, and `Instant::elapsed`'s checked `timespec` subtraction and `SystemTime`'s 128-bit
/// microseconds cost several times the reading itself.
pub struct RealClock {
    /// `CLOCK_MONOTONIC` at creation, nanoseconds.
    start_ns: u64,
}

/// Reads `clock`: (seconds, nanoseconds).
fn read_clock(clock: libc::clockid_t) -> (i64, i64) {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given; both clocks always exist on
    // Linux, so it cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec, ts.tv_nsec)
}

fn monotonic_ns() -> u64 {
    let (s, n) = read_clock(libc::CLOCK_MONOTONIC);
    (s.max(0) as u64).wrapping_mul(1_000_000_000).wrapping_add(n.max(0) as u64)
}

impl RealClock {
    fn new() -> RealClock {
        RealClock { start_ns: monotonic_ns() }
    }
}

impl Clock for RealClock {
    fn monotonic(&self) -> Duration {
        Duration::from_nanos(monotonic_ns().saturating_sub(self.start_ns))
    }
    fn wall_micros(&self) -> i64 {
        let (s, n) = read_clock(libc::CLOCK_REALTIME);
        s.saturating_mul(1_000_000).saturating_add(n / 1000)
    }
}

/// tokio TCP.
pub struct RealNet;

struct RealListener(tokio::net::TcpListener);

impl Listener for RealListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(Box<dyn Conn>, SocketAddr)>> {
        Box::pin(async move {
            let (s, a) = self.0.accept().await?;
            s.set_nodelay(true)?;
            Ok((Box::new(s) as Box<dyn Conn>, a))
        })
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A unix domain socket listener; peers are told by `SO_PEERCRED`.
struct RealLocalListener(tokio::net::UnixListener);

impl LocalListener for RealLocalListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<super::LocalConn>> {
        Box::pin(async move {
            let (s, _) = self.0.accept().await?;
            let uid = s.peer_cred().ok().map(|c| c.uid());
            Ok((Box::new(s) as Box<dyn Conn>, uid))
        })
    }
    fn owner_uid(&self) -> Option<u32> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Some(unsafe { libc::geteuid() })
    }
}

impl Net for RealNet {
    fn listen_local(&self, path: &Path) -> BoxFuture<'_, io::Result<Box<dyn LocalListener>>> {
        let path = path.to_path_buf();
        Box::pin(async move {
            use std::os::unix::fs::PermissionsExt;
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let l = tokio::net::UnixListener::bind(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            Ok(Box::new(RealLocalListener(l)) as Box<dyn LocalListener>)
        })
    }
    fn connect_local(&self, path: &Path) -> BoxFuture<'_, io::Result<Box<dyn Conn>>> {
        let path = path.to_path_buf();
        Box::pin(async move {
            let s = tokio::net::UnixStream::connect(&path).await?;
            Ok(Box::new(s) as Box<dyn Conn>)
        })
    }

    fn listen(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let l = tokio::net::TcpListener::bind(addr).await?;
            Ok(Box::new(RealListener(l)) as Box<dyn Listener>)
        })
    }
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Conn>>> {
        Box::pin(async move {
            let s = tokio::net::TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            Ok(Box::new(s) as Box<dyn Conn>)
        })
    }
    fn resolve(&self, host: &str) -> BoxFuture<'_, io::Result<Vec<std::net::IpAddr>>> {
        let host = host.to_string();
        Box::pin(async move {
            if let Ok(ip) = host.parse::<std::net::IpAddr>() {
                return Ok(vec![ip]);
            }
            // getaddrinfo on the blocking pool (the system's resolver: /etc/hosts, then DNS).
            let mut ips: Vec<std::net::IpAddr> = Vec::new();
            for a in tokio::net::lookup_host((host.as_str(), 0)).await? {
                if !ips.contains(&a.ip()) {
                    ips.push(a.ip());
                }
            }
            Ok(ips)
        })
    }
}

/// The tokio runtime the environment was built in; blocking and background work go to its
/// blocking pool (also when requested from threads outside the runtime).
pub struct RealRuntime {
    handle: tokio::runtime::Handle,
}

impl Runtime for RealRuntime {
    fn spawn(&self, fut: BoxFuture<'static, ()>) {
        self.handle.spawn(fut);
    }
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
    fn blocking(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        let h = self.handle.spawn_blocking(f);
        Box::pin(async move {
            if let Err(e) = h.await {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        })
    }
    fn background(&self, name: &'static str, f: Box<dyn FnOnce() + Send>) {
        tracing::trace!(name, "background work queued");
        drop(self.handle.spawn_blocking(f));
    }
    fn lane(&self, name: &'static str) -> Box<dyn Lane> {
        Box::new(ThreadLane::start(name, self.handle.clone()))
    }
    fn os_stats(&self) -> OsStats {
        read_os_stats()
    }
}

/// A lane's job and where to report its end (a panic's payload, to be resumed by the awaiting task).
struct LaneJob {
    f: Box<dyn FnOnce() + Send>,
    done: tokio::sync::oneshot::Sender<std::thread::Result<()>>,
}

/// [`Lane`] on a thread of its own, fed through a channel; the thread ends when the lane is
/// dropped and its queue is empty. If the thread cannot be started, jobs go to the blocking pool.
struct ThreadLane {
    name: &'static str,
    tx: Option<std::sync::mpsc::Sender<LaneJob>>,
    handle: tokio::runtime::Handle,
}

impl ThreadLane {
    fn start(name: &'static str, handle: tokio::runtime::Handle) -> ThreadLane {
        let (tx, rx) = std::sync::mpsc::channel::<LaneJob>();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
            for job in rx {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.f));
                if let Err(p) = &r {
                    let what = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    tracing::error!(lane = name, panic = %what, "a lane job panicked; the lane goes on");
                }
                let _ = job.done.send(r);
            }
        });
        let tx = match thread {
            Ok(_) => Some(tx),
            Err(e) => {
                tracing::warn!(lane = name, error = %e, "no thread for the lane; its jobs use the blocking pool");
                None
            }
        };
        ThreadLane { name, tx, handle }
    }
}

impl Lane for ThreadLane {
    fn run(&self, f: Box<dyn FnOnce() + Send>) -> BoxFuture<'static, ()> {
        let (done, rx) = tokio::sync::oneshot::channel();
        let f = match &self.tx {
            Some(tx) => match tx.send(LaneJob { f, done }) {
                Ok(()) => {
                    return Box::pin(async move {
                        if let Ok(Err(p)) = rx.await {
                            std::panic::resume_unwind(p);
                        }
                    })
                }
                // The thread is gone (it only ends when the lane drops): the pool runs the job.
                Err(std::sync::mpsc::SendError(job)) => job.f,
            },
            None => f,
        };
        tracing::trace!(lane = self.name, "lane job on the blocking pool");
        RealRuntime { handle: self.handle.clone() }.blocking(f)
    }
}

/// Reads `/proc/self/{stat,status,io}`, `/proc/stat` and `/proc/meminfo` (Linux; zeros elsewhere or
/// for any file that cannot be read).
pub fn read_os_stats() -> OsStats {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let field = |text: &str, key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // SAFETY: as above.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    let stat = read("/proc/self/stat");
    // Fields after the parenthesised command name: state is field 3; utime 14, stime 15.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    let at = |i: usize| f.get(i.wrapping_sub(3)).copied().unwrap_or(0);
    let status = read("/proc/self/status");
    let io = read("/proc/self/io");
    let sys = read("/proc/stat");
    let cpu: Vec<u64> = sys
        .lines()
        .find(|l| l.starts_with("cpu "))
        .map(|l| l.split_whitespace().skip(1).map(|x| x.parse().unwrap_or(0)).collect())
        .unwrap_or_default();
    let total: u64 = cpu.iter().sum();
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    let meminfo = read("/proc/meminfo");
    OsStats {
        pid: std::process::id(),
        rss_bytes: field(&status, "VmRSS:") * 1024,
        threads: field(&status, "Threads:"),
        cpu_seconds: (at(14) + at(15)) as f64 / tick,
        io_read_bytes: field(&io, "read_bytes:"),
        io_write_bytes: field(&io, "write_bytes:"),
        io_read_ops: field(&io, "syscr:"),
        io_write_ops: field(&io, "syscw:"),
        sys_busy_ticks: total.saturating_sub(idle),
        sys_total_ticks: total,
        sys_free_bytes: field(&meminfo, "MemAvailable:") * 1024,
        sys_total_bytes: field(&meminfo, "MemTotal:") * 1024,
        virtual_bytes: field(&status, "VmSize:") * 1024,
        open_fds: std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(0),
        load_avg: {
            let l = read("/proc/loadavg");
            let mut v = l.split_whitespace().map(|x| x.parse::<f64>().unwrap_or(0.0));
            [v.next().unwrap_or(0.0), v.next().unwrap_or(0.0), v.next().unwrap_or(0.0)]
        },
        cpus,
    }
}

/// The production environment with an in-memory disk (`--mem-db`).
pub fn env_with_memory_disk() -> Env {
    let e = env();
    Env::new(
        Arc::new(super::mem::MemDisk::volatile()),
        e.clock.clone(),
        e.net.clone(),
        e.rt.clone(),
        rand::random::<u64>(),
    )
}

/// The process's `ANNAL_*` environment variables: the node's options (and its tools').
pub fn annal_vars() -> Vec<(String, String)> {
    std::env::vars().filter(|(k, _)| k.starts_with("ANNAL_")).collect()
}

/// Reads a text file (the `--config` YAML file, before any environment exists).
pub fn read_text_file(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// Sets the permission bits of a file (`annal certs` writes private keys readable by their
/// owner only).
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// `SIGHUP`s delivered to the process: the node reloads its certificates on each.
pub struct Hangups(tokio::signal::unix::Signal);

impl Hangups {
    /// Starts listening for `SIGHUP` (inside a tokio runtime). From then on the signal no longer
    /// ends the process.
    pub fn listen() -> io::Result<Hangups> {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).map(Hangups)
    }

    /// Completes at the next `SIGHUP`; `false` when no more can arrive.
    pub async fn next(&mut self) -> bool {
        self.0.recv().await.is_some()
    }
}

/// SIGTERM and SIGINT delivered to the process: the node shuts down on the first.
pub struct Termination {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Termination {
    /// Starts listening for SIGTERM and SIGINT (inside a tokio runtime). From then on neither
    /// ends the process by itself: listen before the node says it serves, so that a signal sent
    /// as soon as it does is a clean shutdown.
    pub fn listen() -> io::Result<Termination> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Termination { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    /// Completes at the first SIGTERM or SIGINT.
    pub async fn wait(mut self) {
        tokio::select! {
            biased;
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lane_runs_its_jobs_in_order_on_one_thread_and_survives_a_panic() {
        let lane = env().rt.lane("test-lane");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut waits = Vec::new();
        for i in 0..50 {
            let seen = seen.clone();
            waits.push(lane.run(Box::new(move || {
                let me = std::thread::current();
                seen.lock().unwrap().push((i, me.id(), me.name().map(str::to_owned)));
            })));
        }
        for w in waits {
            w.await;
        }
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), (0..50).collect::<Vec<_>>());
        assert!(seen.iter().all(|s| s.1 == seen[0].1), "every job on the lane's one thread");
        assert_eq!(seen[0].2.as_deref(), Some("test-lane"));
        assert_ne!(seen[0].1, std::thread::current().id());

        // A panic reaches the task that awaits the job, and the lane goes on.
        let failed = tokio::spawn(lane.run(Box::new(|| panic!("job failed")))).await;
        assert!(failed.is_err_and(|e| e.is_panic()));
        let after = Arc::new(Mutex::new(None));
        let a = after.clone();
        lane.run(Box::new(move || *a.lock().unwrap() = Some(std::thread::current().id()))).await;
        assert_eq!(*after.lock().unwrap(), Some(seen[0].1));
    }
}
