//! The test network: one network namespace per host (each node, and one for the clients), joined
//! by veth pairs to a bridge that lives in a namespace of its own, so nothing of the machine's own
//! network is touched.
//!
//! Names carry the harness's process id (`anf<pid>-…`), so a later run recognises what a crashed
//! one left behind and removes it ([`sweep`]): namespaces, and the tmpfs mounts under
//! [`RUN_ROOT`]. [`Net`] removes what it created when it is dropped, whatever happened.
//!
//! Invariants: every command's failure is an error naming the command (never ignored during
//! set-up); teardown never stops at a failure, it goes on removing the rest.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Prefix of everything a run creates.
pub const PREFIX: &str = "anf";
/// Where runs keep their data directories (one tmpfs per node) and logs.
pub const RUN_ROOT: &str = "/tmp/annal-netns";
/// The test network's first three octets; node `i` is `.{NODE_BASE + i}`, the clients `.CLIENTS`.
pub const SUBNET: &str = "10.213.0";
const NODE_BASE: u8 = 11;
const CLIENTS: u8 = 100;

/// Runs a command; an error names it and carries its stderr.
pub fn sh(args: &[&str]) -> Result<String, String> {
    let out =
        Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("`{}`: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command inside namespace `ns`.
pub fn sh_in(ns: &str, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["ip", "netns", "exec", ns];
    all.extend_from_slice(args);
    sh(&all)
}

/// What is missing on this machine for the harness to run (root, `ip`, `iptables`, `tc`), if
/// anything.
pub fn missing_prerequisites() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces need root".into());
    }
    for tool in [["ip", "-V"], ["iptables", "--version"], ["tc", "-V"]] {
        if sh(&tool).is_err() {
            return Some(format!("`{}` is not installed", tool[0]));
        }
    }
    None
}

/// One node host.
#[derive(Clone, Debug)]
pub struct Host {
    /// Its namespace.
    pub ns: String,
    /// Its address on the test network.
    pub ip: String,
    /// Its data directory (a tmpfs of its own).
    pub dir: PathBuf,
}

/// The network of one run.
pub struct Net {
    /// Namespace holding the bridge.
    pub bridge: String,
    /// The node hosts.
    pub hosts: Vec<Host>,
    /// The clients' namespace.
    pub clients: String,
    /// The clients' address.
    pub clients_ip: String,
    /// The run's directory (logs, mounts).
    pub root: PathBuf,
    torn_down: bool,
}

/// Bytes of each node's tmpfs (its whole disk: the disk-full fault fills it).
pub const DISK_BYTES: u64 = 256 << 20;

impl Net {
    /// Creates the bridge, `nodes` hosts and the clients' host; `tag` names the run (several
    /// runs of one harness process get different tags).
    pub fn create(nodes: usize, tag: &str) -> Result<Net, String> {
        let pid = std::process::id();
        let name = |role: &str| format!("{PREFIX}{pid}{tag}-{role}");
        let root = Path::new(RUN_ROOT).join(format!("{PREFIX}{pid}{tag}"));
        let mut net = Net {
            bridge: name("br"),
            hosts: Vec::new(),
            clients: name("c"),
            clients_ip: format!("{SUBNET}.{CLIENTS}"),
            root: root.clone(),
            torn_down: false,
        };
        std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        sh(&["ip", "netns", "add", &net.bridge])?;
        sh_in(&net.bridge, &["ip", "link", "add", "br0", "type", "bridge"])?;
        sh_in(&net.bridge, &["ip", "link", "set", "br0", "up"])?;
        for i in 0..nodes {
            let ns = name(&format!("n{i}"));
            let ip = format!("{SUBNET}.{}", NODE_BASE + i as u8);
            let dir = root.join(format!("node{i}"));
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let size = format!("size={DISK_BYTES}");
            sh(&["mount", "-t", "tmpfs", "-o", &size, "tmpfs", &dir.display().to_string()])?;
            net.hosts.push(Host { ns: ns.clone(), ip: ip.clone(), dir });
            net.join(&ns, &ip, i)?;
        }
        let (clients, ip) = (net.clients.clone(), net.clients_ip.clone());
        net.join(&clients, &ip, CLIENTS as usize)?;
        Ok(net)
    }

    /// Creates namespace `ns` with address `ip`, linked to the bridge by a veth pair.
    fn join(&self, ns: &str, ip: &str, n: usize) -> Result<(), String> {
        sh(&["ip", "netns", "add", ns])?;
        let port = format!("p{n}");
        sh(&[
            "ip",
            "link",
            "add",
            "eth0",
            "netns",
            ns,
            "type",
            "veth",
            "peer",
            "name",
            &port,
            "netns",
            &self.bridge,
        ])?;
        sh_in(&self.bridge, &["ip", "link", "set", &port, "master", "br0"])?;
        sh_in(&self.bridge, &["ip", "link", "set", &port, "up"])?;
        sh_in(ns, &["ip", "addr", "add", &format!("{ip}/24"), "dev", "eth0"])?;
        sh_in(ns, &["ip", "link", "set", "eth0", "up"])?;
        sh_in(ns, &["ip", "link", "set", "lo", "up"])?;
        Ok(())
    }

    /// Removes every namespace and mount of the run (processes must be gone already).
    pub fn teardown(&mut self) {
        if std::mem::replace(&mut self.torn_down, true) {
            return;
        }
        for h in &self.hosts {
            let _ = sh(&["ip", "netns", "del", &h.ns]);
            let _ = sh(&["umount", "-l", &h.dir.display().to_string()]);
        }
        let _ = sh(&["ip", "netns", "del", &self.clients]);
        let _ = sh(&["ip", "netns", "del", &self.bridge]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Whether process `pid` is alive.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The harness pid a name made by [`Net::create`] carries (`anf<pid><tag>-<role>`), if it is one.
fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// Removes what runs of harnesses that are no longer alive left behind: their namespaces (and
/// with them their links, addresses and firewall rules) and their tmpfs mounts. Returns what it
/// removed.
pub fn sweep() -> Vec<String> {
    let mut removed = Vec::new();
    let listed = sh(&["ip", "netns", "list"]).unwrap_or_default();
    for line in listed.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if owner(name).is_some_and(|pid| !alive(pid)) && sh(&["ip", "netns", "del", name]).is_ok() {
            removed.push(format!("namespace {name}"));
        }
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for line in mounts.lines() {
        let Some(at) = line.split_whitespace().nth(1) else { continue };
        let Some(rest) = at.strip_prefix(RUN_ROOT).and_then(|r| r.strip_prefix('/')) else { continue };
        let run = rest.split('/').next().unwrap_or_default();
        if owner(run).is_some_and(|pid| !alive(pid)) && sh(&["umount", "-l", at]).is_ok() {
            removed.push(format!("mount {at}"));
        }
    }
    // Then the runs' directories (their disks unmounted above).
    for entry in std::fs::read_dir(RUN_ROOT).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if owner(&name).is_some_and(|pid| !alive(pid)) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed.push(format!("directory {}", entry.path().display()));
        }
    }
    removed
}

/// Runs `f` on a thread that joined namespace `ns` (its sockets live there), and returns what it
/// returned.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        enter(&path)?;
        Ok(f())
    })
    .join()
    .map_err(|_| format!("a thread in {ns} panicked"))?
}

/// Moves the calling thread into the network namespace at `path` (`/run/netns/<name>`).
pub fn enter(path: &str) -> Result<(), String> {
    let c = std::ffi::CString::new(path).map_err(|e| e.to_string())?;
    // SAFETY: a valid NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(format!("{path}: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a namespace descriptor we own; setns affects only the calling thread.
    let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    let err = std::io::Error::last_os_error();
    // SAFETY: fd is ours and still open.
    unsafe { libc::close(fd) };
    if r != 0 {
        return Err(format!("setns {path}: {err}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_their_owner() {
        assert_eq!(owner("anf1234x-n0"), Some(1234));
        assert_eq!(owner("anf77-br"), Some(77));
        assert_eq!(owner("other-n0"), None);
        assert_eq!(owner("anf-n0"), None);
    }
}
