//! The node processes: one real `annal` per host, started inside its host's namespace with its
//! own address, data directory (the host's tmpfs), log file and clock offset file.
//!
//! Each process joins its namespace between `fork` and `exec` and asks the kernel to kill it when
//! the harness dies (`PR_SET_PDEATHSIG`), so a crashed harness leaves no node running. Clock jumps
//! go through `libfaketime` when it is installed: the node's wall clock reads the host's offset
//! file on every call (its monotonic clock is left alone, as a real clock step leaves it).
//!
//! Invariants: [`Node::start`] is only called on the thread that owns the [`Nodes`] (the parent-
//! death signal fires when the *thread* that forked exits); a node is never left stopped
//! (`SIGSTOP`) when it is killed or dropped.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::hosts::{Host, Net};

/// The HTTP port of every node (each has its own address).
pub const HTTP_PORT: u16 = 2113;
/// The replication port of every node.
pub const REPLICATION_PORT: u16 = 1112;
/// Where Debian's libfaketime lives.
pub const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// One node.
pub struct Node {
    /// Index.
    pub i: usize,
    /// Its host.
    pub host: Host,
    /// The running process.
    child: Option<Child>,
    /// Stopped with SIGSTOP.
    paused: bool,
    /// Its log (appended to across restarts).
    pub log: PathBuf,
    /// libfaketime's offset file, when clock faults are on.
    clock: Option<PathBuf>,
    args: Vec<String>,
    binary: PathBuf,
    env: Vec<(String, String)>,
    /// Starts so far.
    pub starts: u32,
}

/// All nodes of a run.
pub struct Nodes {
    /// In host order.
    pub nodes: Vec<Node>,
}

/// Whether libfaketime is installed (clock jumps need it).
pub fn faketime_available() -> bool {
    Path::new(FAKETIME_LIB).exists()
}

impl Nodes {
    /// Describes one node per host of `net` (not started), running `binary`.
    pub fn new(net: &Net, binary: &Path, extra: &[String], env: &[(String, String)]) -> Nodes {
        let size = net.hosts.len();
        let clock = faketime_available();
        let nodes = net
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let seeds: Vec<String> = net
                    .hosts
                    .iter()
                    .filter(|o| o.ip != h.ip)
                    .map(|o| format!("{}:{REPLICATION_PORT}", o.ip))
                    .collect();
                let mut args: Vec<String> = [
                    "--db",
                    &h.dir.join("db").display().to_string(),
                    "--http-ip",
                    &h.ip,
                    "--http-port",
                    &HTTP_PORT.to_string(),
                    "--replication-ip",
                    &h.ip,
                    "--replication-port",
                    &REPLICATION_PORT.to_string(),
                    "--cluster-size",
                    &size.to_string(),
                    "--gossip-seed",
                    &seeds.join(","),
                    "--chunk-size",
                    &(4u64 << 20).to_string(),
                    // Plain HTTP on the test network (its own namespaces, nothing else on it).
                    "--insecure",
                ]
                .into_iter()
                .map(str::to_owned)
                .collect();
                args.extend(extra.iter().cloned());
                Node {
                    i,
                    host: h.clone(),
                    child: None,
                    paused: false,
                    log: net.root.join(format!("node{i}.log")),
                    clock: clock.then(|| net.root.join(format!("node{i}.faketime"))),
                    args,
                    binary: binary.to_owned(),
                    env: env.to_vec(),
                    starts: 0,
                }
            })
            .collect();
        Nodes { nodes }
    }
}

impl Node {
    /// Starts the process (a no-op when it runs).
    pub fn start(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Ok(());
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&self.binary);
        cmd.args(&self.args).stdin(Stdio::null()).stdout(log).stderr(err).env("RUST_BACKTRACE", "1");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(clock) = &self.clock {
            if !clock.exists() {
                std::fs::write(clock, "+0\n").map_err(|e| format!("{}: {e}", clock.display()))?;
            }
            cmd.env("LD_PRELOAD", FAKETIME_LIB)
                .env("FAKETIME_TIMESTAMP_FILE", clock)
                .env("FAKETIME_NO_CACHE", "1")
                .env("DONT_FAKE_MONOTONIC", "1");
        }
        let ns = std::ffi::CString::new(format!("/run/netns/{}", self.host.ns)).map_err(|e| e.to_string())?;
        // SAFETY: between fork and exec only async-signal-safe calls are made (open, setns,
        // close, prctl), and nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(ns.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let r = libc::setns(fd, libc::CLONE_NEWNET);
                libc::close(fd);
                if r != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("starting node {}: {e}", self.i))?;
        self.child = Some(child);
        self.paused = false;
        self.starts += 1;
        Ok(())
    }

    /// Whether the process runs (it may be paused).
    pub fn running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The exit status, when the process ended by itself.
    pub fn exited(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        c.try_wait().ok().flatten().map(|s| s.to_string())
    }

    /// kill -9 (after a SIGCONT, so that a paused node dies too) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            self.signal_child(&c, libc::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
        }
        self.paused = false;
    }

    /// SIGSTOP.
    pub fn pause(&mut self) {
        if let Some(c) = &self.child {
            self.signal_child(c, libc::SIGSTOP);
            self.paused = true;
        }
    }

    /// SIGCONT.
    pub fn resume(&mut self) {
        if let Some(c) = &self.child {
            self.signal_child(c, libc::SIGCONT);
        }
        self.paused = false;
    }

    fn signal_child(&self, c: &Child, sig: i32) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(c.id() as i32, sig) };
    }

    /// Moves the node's wall clock by `secs` from the true time (0 puts it back); without
    /// libfaketime, an error.
    pub fn set_clock_offset(&self, secs: i64) -> Result<(), String> {
        let Some(clock) = &self.clock else { return Err("libfaketime is not installed".into()) };
        std::fs::write(clock, format!("{secs:+}\n")).map_err(|e| format!("{}: {e}", clock.display()))
    }

    /// The node's HTTP address.
    pub fn http(&self) -> String {
        format!("{}:{HTTP_PORT}", self.host.ip)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}
