//! `annal cluster rolling-restart`: restarts a cluster's members one at a time, followers and
//! read-only replicas first and the leader last, each stopped gracefully (`POST
//! /admin/shutdown`: a leader hands over first) and started again by its supervisor
//! (Kubernetes, systemd, a container's restart policy). The procedure upgrades and certificate
//! rollovers need.
//!
//! Invariants: nothing is stopped unless every member is ready first (a degraded cluster is not
//! made worse); a member is stopped only once the one before it runs again (its start time in
//! `/stats` changed), serves its role (`/health/ready`) and every member is ready again; so at
//! most one member is ever down and the cluster keeps its quorum. Any step that does not
//! happen within `--timeout` ends the procedure with the member and the step named.

use std::time::Duration;

use serde_json::Value;

use super::client::{Endpoint, HttpsTarget, NodeClient};
use super::Outcome;
use crate::env::Env;

const HELP: &str = "\
Usage: annal cluster rolling-restart (--url URL | --members URL,URL,...)
                                     [--ca-certificate FILE] [--user NAME] [--password PASSWORD]
                                     [--timeout SECS] [--dry-run]

Restarts a cluster's members one at a time: read-only replicas and followers first, the leader
last, so the cluster keeps its quorum and changes leader once. Each member is asked to stop
gracefully (POST /admin/shutdown: a leader hands its role over first) and its supervisor
(Kubernetes, systemd, a container restart policy) starts it again. The next member is stopped
only when this one runs again, serves its role (a caught-up follower) and every member is
ready. Nothing is stopped unless every member is ready at the start.

  --url URL         one member: the others are found in its /gossip (their HTTP endpoints)
  --members URLS    every member's URL, comma-separated: names that outlive a restart, such
                    as a StatefulSet's pod names (http://annal-0.annal:2113,...)
  --ca-certificate FILE  with https://: the CA certificate the members' certificates chain to
  --user, --password  credentials of a user in $admins or $ops (default admin / changeit)
  --timeout SECS    how long each member may take to stop, start and be ready (default 300)
  --dry-run         print the members in the order they would restart, and stop nothing
";

/// Between polls of a member.
pub const POLL: Duration = Duration::from_millis(250);

/// One member: its URL and a client of it.
struct Member {
    url: Endpoint,
    client: NodeClient,
}

/// Runs `annal cluster rolling-restart` with `args`.
pub async fn main(env: Env, args: &[String]) -> Outcome {
    match run(env, args).await {
        Ok(outcome) => outcome,
        Err(outcome) => outcome,
    }
}

async fn run(env: Env, args: &[String]) -> Result<Outcome, Outcome> {
    let valued = ["--url", "--members", "--ca-certificate", "--user", "--password", "--timeout"];
    let a = super::args::parse(args, &valued, &["--dry-run", "--help", "-h"]).map_err(Outcome::Usage)?;
    if a.flag("--help") || a.flag("-h") {
        return Ok(Outcome::Help(HELP));
    }
    if let Some(p) = a.positional.first() {
        return Err(Outcome::Usage(format!("unexpected argument {p} (see --help)")));
    }
    let timeout = a.seconds("--timeout", 300).map_err(Outcome::Usage)?;
    let urls: Vec<Endpoint> = match (a.get("--members"), a.get("--url")) {
        (Some(_), Some(_)) => return Err(Outcome::Usage("give --url or --members, not both".into())),
        (None, None) => return Err(Outcome::Usage("--url or --members is required (see --help)".into())),
        (Some(list), None) => list
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(|u| Endpoint::parse(u).map_err(|e| Outcome::Usage(format!("--members {e}"))))
            .collect::<Result<_, _>>()?,
        (None, Some(u)) => vec![Endpoint::parse(u).map_err(|e| Outcome::Usage(format!("--url {e}")))?],
    };
    if urls.is_empty() {
        return Err(Outcome::Usage("--members names no URL".into()));
    }
    let https = urls[0].https;
    if urls.iter().any(|u| u.https != https) {
        return Err(Outcome::Usage("the members' URLs must all be http:// or all https://".into()));
    }
    let base = NodeClient::new(env.clone(), &urls[0].host, urls[0].port)
        .with_credentials(a.get("--user").unwrap_or("admin"), a.get("--password").unwrap_or("changeit"))
        .with_timeout(Duration::from_secs(10));
    let base = match (https, a.get("--ca-certificate")) {
        (true, Some(ca)) => {
            let tls = HttpsTarget::new(&env, std::path::Path::new(ca), &urls[0].host)
                .map_err(|e| Outcome::Usage(format!("--ca-certificate: {e}")))?;
            base.with_tls(tls)
        }
        (true, None) => {
            return Err(Outcome::Usage(
                "https:// members need --ca-certificate FILE: the CA certificate their certificates chain to"
                    .into(),
            ))
        }
        (false, Some(_)) => return Err(Outcome::Usage("--ca-certificate goes with https:// URLs".into())),
        (false, None) => base,
    };
    let urls = if a.get("--members").is_some() { urls } else { discover(&base, &urls[0]).await? };
    let members: Vec<Member> = urls
        .into_iter()
        .map(|url| Ok(Member { client: base.to(&url.host, url.port).map_err(Outcome::Usage)?, url }))
        .collect::<Result<_, Outcome>>()?;

    // Every member ready, and one leader, before anything is stopped.
    let mut leaders = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let state = state(&m.client).await.map_err(|e| Outcome::Failed(format!("{}: {e}", m.url)))?;
        if !ready(&m.client).await {
            return Err(Outcome::Failed(format!(
                "{} is not ready ({state}): a rolling restart needs every member ready; wait for it or repair it first",
                m.url
            )));
        }
        if is_leader(&state) {
            leaders.push(i);
        }
    }
    if leaders.len() != 1 {
        return Err(Outcome::Failed(format!(
            "the members name {} leaders ({}): a rolling restart needs exactly one",
            leaders.len(),
            leaders.iter().map(|i| members[*i].url.to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    let order: Vec<usize> =
        (0..members.len()).filter(|i| !leaders.contains(i)).chain(leaders.iter().copied()).collect();
    super::say(&format!(
        "annal: rolling restart of {} members, in this order: {}",
        members.len(),
        order.iter().map(|i| members[*i].url.to_string()).collect::<Vec<_>>().join(", ")
    ));
    if a.flag("--dry-run") {
        return Ok(Outcome::Done);
    }
    for (n, &i) in order.iter().enumerate() {
        let m = &members[i];
        let role = if leaders.contains(&i) { "the leader" } else { "a follower" };
        let began = env.clock.monotonic();
        let before = start_time(&m.client)
            .await
            .ok_or_else(|| Outcome::Failed(format!("{}: no start time in /stats", m.url)))?;
        super::say(&format!("annal: [{}/{}] stopping {} ({role})", n + 1, order.len(), m.url));
        let r = m
            .client
            .request("POST", "/admin/shutdown", "")
            .await
            .map_err(|e| Outcome::Failed(format!("asking {} to stop: {e}", m.url)))?;
        if r.status != 200 {
            let hint =
                if r.status == 401 { " (check --user/--password: a user in $admins or $ops)" } else { "" };
            return Err(Outcome::Failed(format!(
                "{} refused to stop: {} {}{hint}",
                m.url,
                r.status,
                r.body.trim()
            )));
        }
        let deadline = began + timeout;
        let late = |step: &str| {
            Outcome::Failed(format!(
                "{} did not {step} within {} s (--timeout); the members after it were not restarted",
                m.url,
                timeout.as_secs()
            ))
        };
        until(&env, deadline, || async { start_time(&m.client).await.is_some_and(|t| t != before) })
            .await
            .map_err(|()| late("run again (is a supervisor restarting it?)"))?;
        let back = env.clock.monotonic() - began;
        until(&env, deadline, || ready(&m.client)).await.map_err(|()| late("become ready"))?;
        until(&env, deadline, || async {
            for other in &members {
                if !ready(&other.client).await {
                    return false;
                }
            }
            true
        })
        .await
        .map_err(|()| late("see every member ready again"))?;
        let took = env.clock.monotonic() - began;
        super::say(&format!(
            "annal: [{}/{}] {} runs again after {:.1} s; every member ready after {:.1} s",
            n + 1,
            order.len(),
            m.url,
            back.as_secs_f64(),
            took.as_secs_f64()
        ));
    }
    super::say(&format!("annal: rolling restart done: {} members restarted", members.len()));
    Ok(Outcome::Done)
}

/// The members in `url`'s `/gossip`: every live one's advertised HTTP endpoint.
async fn discover(base: &NodeClient, url: &Endpoint) -> Result<Vec<Endpoint>, Outcome> {
    let r = base
        .request("GET", "/gossip", "")
        .await
        .map_err(|e| Outcome::Failed(format!("reading the members from {url}: {e}")))?;
    if r.status != 200 {
        return Err(Outcome::Failed(format!("{url}/gossip answered {} {}", r.status, r.body.trim())));
    }
    let v: Value = serde_json::from_str(&r.body)
        .map_err(|e| Outcome::Failed(format!("{url}/gossip is not JSON: {e}")))?;
    let mut out = Vec::new();
    for m in v.get("members").and_then(Value::as_array).into_iter().flatten() {
        let ip = m.get("externalHttpIp").and_then(Value::as_str).unwrap_or_default();
        let port = m.get("externalHttpPort").and_then(Value::as_u64).unwrap_or(0);
        let alive = m.get("isAlive").and_then(Value::as_bool).unwrap_or(false);
        if !alive {
            return Err(Outcome::Failed(format!(
                "{url}/gossip lists {ip}:{port} as dead: a rolling restart needs every member up"
            )));
        }
        let port = u16::try_from(port).ok().filter(|p| *p > 0);
        let port =
            port.ok_or_else(|| Outcome::Failed(format!("{url}/gossip lists {ip} without an HTTP port")))?;
        out.push(Endpoint { host: ip.to_string(), port, https: url.https });
    }
    if out.is_empty() {
        return Err(Outcome::Failed(format!("{url}/gossip lists no members")));
    }
    Ok(out)
}

fn is_leader(state: &str) -> bool {
    state.eq_ignore_ascii_case("master") || state.eq_ignore_ascii_case("leader")
}

/// The member's state (`/info`).
async fn state(c: &NodeClient) -> Result<String, String> {
    let r = c.request("GET", "/info", "").await.map_err(|e| e.to_string())?;
    let v: Value =
        serde_json::from_str(&r.body).map_err(|_| format!("/info answered {} {}", r.status, r.body))?;
    v.get("state").and_then(Value::as_str).map(str::to_string).ok_or_else(|| "/info names no state".into())
}

/// Whether the member serves its role (`/health/ready` answers 200).
async fn ready(c: &NodeClient) -> bool {
    c.request("GET", "/health/ready", "").await.is_ok_and(|r| r.status == 200)
}

/// When the member's process started (`/stats`), if it answers.
async fn start_time(c: &NodeClient) -> Option<String> {
    let r = c.request("GET", "/stats", "").await.ok().filter(|r| r.status == 200)?;
    let v: Value = serde_json::from_str(&r.body).ok()?;
    v.pointer("/proc/startTime").and_then(Value::as_str).map(str::to_string)
}

/// Polls `check` every [`POLL`] until it holds; `Err` at `deadline` (monotonic).
async fn until<F, Fut>(env: &Env, deadline: Duration, mut check: F) -> Result<(), ()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        if check().await {
            return Ok(());
        }
        if env.clock.monotonic() >= deadline {
            return Err(());
        }
        env.rt.sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_is_named_in_either_dialect() {
        assert!(is_leader("master") && is_leader("Leader"));
        assert!(!is_leader("slave") && !is_leader("follower") && !is_leader("resigningleader"));
    }
}
