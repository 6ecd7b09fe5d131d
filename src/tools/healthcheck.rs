//! `annal healthcheck`: asks the node of this machine (or container) whether it lives, for an
//! image's `HEALTHCHECK` where no `curl` exists. It finds the node as the node itself would: its
//! options come from the same `ANNAL_*` variables (and `--config` file), so the port and whether
//! it speaks TLS need no repeating; `--url` names another endpoint.
//!
//! Exit codes: 0 the node answered 2xx to `GET /health/live`; 1 it did not (no answer within the
//! timeout, or another status: starting, stopping); 2 a bad command line.

use std::time::Duration;

use super::client::{Endpoint, HttpsTarget, NodeClient};
use super::Outcome;
use crate::env::Env;

const HELP: &str = "\
Usage: annal healthcheck [--url http(s)://HOST:PORT] [--timeout SECS] [--config FILE]

Exits 0 when the node answers GET /health/live with a 2xx status, 1 otherwise. Without --url
the node is found from its own options (the ANNAL_* environment variables and --config): its
HTTP port on the loopback address (or its HttpIp when it listens on one address), over HTTPS
unless it runs with --insecure. The certificate is not checked (the probe sends no
credentials and reads only the status).

  --url URL       the endpoint to ask instead
  --timeout SECS  how long to wait for the answer (default 5)
  --config FILE   the node's YAML configuration file, when it has one
";

/// Runs `annal healthcheck` with `args`.
pub async fn main(env: Env, args: &[String]) -> Outcome {
    let a = match super::args::parse(args, &["--url", "--timeout", "--config"], &["--help", "-h"]) {
        Ok(a) => a,
        Err(e) => return Outcome::Usage(e),
    };
    if a.flag("--help") || a.flag("-h") {
        return Outcome::Help(HELP);
    }
    if let Some(p) = a.positional.first() {
        return Outcome::Usage(format!("unexpected argument {p} (see --help)"));
    }
    let timeout = match a.seconds("--timeout", 5) {
        Ok(t) => t,
        Err(e) => return Outcome::Usage(e),
    };
    let target = match a.get("--url") {
        Some(url) => Endpoint::parse(url).map_err(|e| format!("--url {e}")),
        None => own_endpoint(a.get("--config")),
    };
    let target = match target {
        Ok(t) => t,
        Err(e) => return Outcome::Usage(e),
    };
    probe(env, &target, timeout).await
}

/// The node's endpoint from its own options (environment and `config`).
fn own_endpoint(config: Option<&str>) -> Result<Endpoint, String> {
    let vars: Vec<(String, String)> = crate::env::real::annal_vars();
    let args: Vec<String> = config.map(|c| vec!["--config".to_string(), c.to_string()]).unwrap_or_default();
    let c = crate::config::Config::parse(&args, &vars, crate::env::real::read_text_file)
        .map_err(|e| format!("cannot read the node's options: {e}"))?;
    let ip = if c.http_ip.is_unspecified() {
        match c.http_ip {
            std::net::IpAddr::V4(_) => std::net::IpAddr::from([127, 0, 0, 1]),
            std::net::IpAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        }
    } else {
        c.http_ip
    };
    Ok(Endpoint { host: ip.to_string(), port: c.http_port, https: c.tls.is_some() })
}

/// Asks `target` once.
pub async fn probe(env: Env, target: &Endpoint, timeout: Duration) -> Outcome {
    let mut client = NodeClient::new(env, &target.host, target.port).with_timeout(timeout);
    if target.https {
        match HttpsTarget::unverified(&target.host) {
            Ok(t) => client = client.with_tls(t),
            Err(e) => return Outcome::Usage(e),
        }
    }
    match client.request("GET", "/health/live", "").await {
        Ok(r) if (200..300).contains(&r.status) => Outcome::Done,
        Ok(r) => Outcome::Failed(format!("{target}: not live: {} {}", r.status, r.body.trim())),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}
