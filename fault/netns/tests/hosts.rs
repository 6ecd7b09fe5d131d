//! The harness's hosts on this machine's kernel: namespaces are created, joined by a bridge so
//! hosts reach each other, and removed when the run ends, also when the harness is killed
//! (`annal-netns sweep`, which every run does first, removes what a dead harness left).
//! Needs root, `ip`, `iptables` and `tc`: ignored elsewhere, failed under `CI=true` when missing.

use std::process::Command;

fn netns_list() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn prerequisites() {
    let root = Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
    assert!(root, "these tests need root (network namespaces)");
    for tool in ["ip", "iptables", "tc"] {
        assert!(
            Command::new("sh").args(["-c", &format!("command -v {tool}")]).status().unwrap().success(),
            "{tool} is missing"
        );
    }
}

#[test]
#[cfg_attr(not(annal_ci), ignore = "needs root and network namespaces; runs in CI")]
fn a_killed_harness_leaves_nothing_after_the_next_sweep() {
    prerequisites();
    let bin = env!("CARGO_BIN_EXE_annal-netns");
    // A harness holding a network (hidden test command), killed with SIGKILL: no Drop runs.
    let mut child =
        Command::new(bin).args(["hold-network", "3"]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let prefix = format!("anf{pid}");
    // It says "reachable" once a node host answered the clients' host over the bridge.
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line)
        .unwrap();
    assert_eq!(line.trim(), "reachable");
    let ours = netns_list().lines().filter(|l| l.starts_with(&prefix)).count();
    assert_eq!(ours, 5, "bridge, three nodes and the clients: {}", netns_list());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(netns_list().contains(&prefix), "a killed harness cleans nothing itself");
    let out = Command::new(bin).arg("sweep").output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("namespace {prefix}")), "{said}");
    assert!(said.contains("mount /tmp/annal-netns/"), "the tmpfs disks are unmounted: {said}");
    assert!(!netns_list().contains(&prefix), "{}", netns_list());
    assert!(said.contains("directory /tmp/annal-netns/"), "{said}");
}
