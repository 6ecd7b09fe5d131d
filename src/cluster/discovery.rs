//! How a cluster node finds itself and the other members by name: the addresses it advertises
//! (`ReplicationHostAdvertiseAs`, `NodeHostAdvertiseAs`), resolved once at start, and DNS
//! discovery (`DiscoverViaDns` with `ClusterDns`), which asks the name again every gossip round
//! and tells the core the members it names ([`Input::Peers`](super::Input::Peers)).
//!
//! All names go through the `Env` seam's resolver, so the simulator answers them with its own
//! seeded DNS (stale records, empty answers, a slow or failing resolver).
//!
//! Invariants: the members told are the gossip seeds and the last non-empty answer, each with
//! the gossip port, without this node and without repeats, sorted; an answer that is empty, fails
//! or takes longer than [`DNS_TIMEOUT`] changes nothing (the members found before stay); the
//! same members are never told twice in a row.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::core::NodeId;
use crate::config::{Advertise, DnsDiscovery};
use crate::env::Env;

/// How long one DNS question may take before it counts as unanswered.
pub const DNS_TIMEOUT: Duration = Duration::from_secs(2);
/// Between attempts to resolve an advertised name at start.
pub const ADVERTISE_RETRY: Duration = Duration::from_secs(1);
/// Attempts to resolve an advertised name before the node gives up starting (a pod's own DNS
/// record appears shortly after its address does).
pub const ADVERTISE_TRIES: u32 = 120;

/// Asks `name` once, within [`DNS_TIMEOUT`].
async fn ask(env: &Env, name: &str) -> Result<Vec<IpAddr>, String> {
    tokio::select! {
        biased;
        answer = env.net.resolve(name) => answer.map_err(|e| e.to_string()),
        _ = env.rt.sleep(DNS_TIMEOUT) => Err(format!("no answer within {} s", DNS_TIMEOUT.as_secs())),
    }
}

/// The endpoint others reach this node at: the advertised host (resolved; its first address) and
/// port where given, the listener's `bound` endpoint for the rest. A listener on 0.0.0.0 with no
/// advertised host stands for `fallback`'s address (the node's replication address, for its
/// HTTP endpoint). `what` names the endpoint in logs and errors.
pub async fn advertised(
    env: &Env,
    advertise: &Advertise,
    bound: SocketAddr,
    fallback: Option<IpAddr>,
    what: &str,
) -> std::io::Result<SocketAddr> {
    let port = advertise.port.unwrap_or(bound.port());
    let Some(host) = &advertise.host else {
        let ip = match fallback {
            Some(ip) if bound.ip().is_unspecified() => ip,
            _ => bound.ip(),
        };
        return Ok(SocketAddr::new(ip, port));
    };
    let mut tries = 0;
    loop {
        tries += 1;
        let why = match ask(env, host).await {
            Ok(ips) => match ips.first() {
                Some(ip) => {
                    if tries > 1 {
                        tracing::info!(host = %host, address = %ip, "{what}: the advertised name resolves now");
                    }
                    return Ok(SocketAddr::new(*ip, port));
                }
                None => "the name has no addresses".to_string(),
            },
            Err(e) => e,
        };
        if tries >= ADVERTISE_TRIES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{what}: the advertised name {host} does not resolve ({why}) after {tries} attempts"),
            ));
        }
        if tries == 1 {
            tracing::warn!(host = %host, error = %why, "{what}: the advertised name does not resolve yet; retrying");
        }
        env.rt.sleep(ADVERTISE_RETRY).await;
    }
}

/// The members `answer` names, with the gossip `seeds`, as [`Input::Peers`](super::Input::Peers)
/// wants them: each address with `port`, without `me`, sorted, without repeats.
pub fn members(seeds: &[NodeId], answer: &[IpAddr], port: u16, me: NodeId) -> Vec<NodeId> {
    let mut all: Vec<NodeId> =
        seeds.iter().copied().chain(answer.iter().map(|ip| SocketAddr::new(*ip, port))).collect();
    all.retain(|a| *a != me);
    all.sort();
    all.dedup();
    all
}

/// Asks `dns.name` every `every` and hands `tell` the members whenever they change; stops when
/// `tell` returns false (the node stopped).
pub async fn discover(
    env: Env,
    dns: DnsDiscovery,
    seeds: Vec<NodeId>,
    me: NodeId,
    every: Duration,
    tell: impl Fn(Vec<NodeId>) -> bool,
) {
    let mut told: Option<Vec<NodeId>> = None;
    let mut failing = false;
    loop {
        let problem = match ask(&env, &dns.name).await {
            Ok(ips) if ips.is_empty() => Some("the name has no addresses".to_string()),
            Ok(ips) => {
                let found = members(&seeds, &ips, dns.port, me);
                if failing {
                    tracing::info!(name = %dns.name, "DNS discovery answers again");
                    failing = false;
                }
                if !found.is_empty() && told.as_ref() != Some(&found) {
                    tracing::info!(name = %dns.name, members = ?found, "DNS discovery found the members");
                    if !tell(found.clone()) {
                        return;
                    }
                    told = Some(found);
                }
                None
            }
            Err(e) => Some(e),
        };
        if let Some(why) = problem {
            if !failing {
                tracing::warn!(name = %dns.name, error = %why, "DNS discovery: no members in this answer; keeping those found before");
                failing = true;
            }
        }
        env.rt.sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn members_are_the_seeds_and_the_answer_on_the_gossip_port_without_this_node() {
        let answer: Vec<IpAddr> =
            ["10.0.0.3", "10.0.0.1", "10.0.0.2", "10.0.0.3"].map(|s| s.parse().unwrap()).to_vec();
        let got = members(&[a("10.0.0.9:1112"), a("10.0.0.2:1112")], &answer, 1112, a("10.0.0.1:1112"));
        assert_eq!(got, vec![a("10.0.0.2:1112"), a("10.0.0.3:1112"), a("10.0.0.9:1112")]);
        // The same address on another port is another endpoint, not this node.
        assert_eq!(members(&[], &answer[1..2], 2112, a("10.0.0.1:1112")), vec![a("10.0.0.1:2112")]);
    }
}
