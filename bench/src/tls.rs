//! `annal-bench tls`: what TLS costs on the client HTTP API. Two in-process nodes with default
//! (durable) settings run side by side, one plain and one with certificates made by
//! `annal::tls::tool`; each workload runs against the plain node and then the TLS node, in the same
//! run, and the table gives the TLS figure as a ratio of the plain one: single-event appends at
//! 16 and 64 connections, feed pages of 20 at 16 connections, and new connections per second
//! (each connects, completes its handshake, sends one `/ping` and closes). Then the time a reload
//! of the certificates takes, in-process and over `POST /admin/reloadconfig`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::gen::{self, BoxFut, Measured, Op};
use crate::http::{self, Client, FeedOp, LocalNode};
use crate::Args;

/// Reloads timed for the reload figure.
const RELOADS: usize = 20;

/// Opens a connection, sends `/ping`, closes: one per call.
struct ConnectOp {
    addr: std::net::SocketAddr,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Op for ConnectOp {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let mut c = Client::connect_with(self.addr, self.tls.as_ref()).await?;
            let r = c.request(::http::Method::GET, "/ping", &[], Bytes::new()).await?;
            if r.status != 200 {
                return Err(format!("/ping: {} {}", r.status, r.reason));
            }
            Ok(1)
        })
    }
}

fn certificates(dir: &std::path::Path) -> Result<(annal::tls::TlsSettings, String), String> {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?;
    let now = now.as_secs() as i64;
    let ca = annal::tls::tool::create_ca(now - 60, 30, http::unique())?;
    let spec = annal::tls::tool::NodeSpec {
        common_name: "eventstoredb-node".into(),
        ips: vec!["127.0.0.1".parse().map_err(|_| "ip")?],
        dns: vec!["localhost".into()],
        not_before: now - 60,
        days: 30,
    };
    let node = annal::tls::tool::create_node(&ca, &spec, http::unique())?;
    let roots = dir.join("ca");
    std::fs::create_dir_all(&roots).map_err(|e| e.to_string())?;
    let w =
        |p: std::path::PathBuf, s: &str| std::fs::write(&p, s).map_err(|e| format!("{}: {e}", p.display()));
    w(roots.join("ca.crt"), &ca.cert)?;
    w(dir.join("node.crt"), &node.cert)?;
    w(dir.join("node.key"), &node.key)?;
    let settings = annal::tls::TlsSettings {
        paths: annal::tls::CertPaths {
            certificate: dir.join("node.crt"),
            private_key: dir.join("node.key"),
            trusted_roots: roots,
            reserved_cn: String::new(),
            ..Default::default()
        },
        peer_reset: annal::tls::DEFAULT_PEER_RESET,
    };
    Ok((settings, ca.cert))
}

fn connector(ca_pem: &str) -> Result<tokio_rustls::TlsConnector, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let der =
        rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(|e| e.to_string())?;
    roots.add(der).map_err(|e| e.to_string())?;
    let cfg = rustls::ClientConfig::builder_with_provider(annal::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(cfg)))
}

/// CPU seconds of the process's main thread (the load generator's, in this command).
fn main_thread_cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/stat")).ok()?;
    let f: Vec<u64> = stat.rsplit_once(')')?.1.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((f.get(11)? + f.get(12)?) as f64 / tick)
}

/// A row's rate (requests or events per second) and the nodes' CPU µs per request.
type Figures = (f64, f64);

/// The [`Figures`] of a measured row.
fn per(m: Measured, requests: bool) -> Figures {
    let rate = if requests { m.requests_rate() } else { m.rate() };
    (rate, m.server_cpu_secs.map(|c| c * 1e6 / m.requests.max(1) as f64).unwrap_or(0.0))
}

/// Measures `ops`; prints the row and returns the figures.
async fn measure(
    name: &str,
    unit: &str,
    ops: Vec<Box<dyn Op>>,
    warm: Duration,
    window: Duration,
) -> Measured {
    // The nodes' CPU: the process's, less the generator's (this thread, the process's main one).
    let probe = || {
        let pid = std::process::id();
        gen::proc_cpu_secs(pid).unwrap_or(0.0) - main_thread_cpu_secs(pid).unwrap_or(0.0)
    };
    let m = gen::closed_loop_cpu(ops, warm, window, Some(&probe)).await;
    let cpu_us = m.server_cpu_secs.map(|c| c * 1e6 / m.requests.max(1) as f64).unwrap_or(0.0);
    println!("{} {cpu_us:.0} |", http::row(name, unit, &m));
    m
}

/// `annal-bench tls`.
pub fn tls_mode(args: &Args) {
    if let Err(e) = run(args) {
        eprintln!("annal-bench tls: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let secs = args.seconds.unwrap_or(5.0);
    let base = args.dir.join(format!("tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).map_err(|e| e.to_string())?;
    let (settings, ca_pem) = certificates(&base.join("certs"))?;
    let plain = LocalNode::start(&base.join("plain"), 0)?;
    let secure = LocalNode::start_with(&base.join("tls"), 0, move |c| c.tls = Some(settings))?;
    let tls = connector(&ca_pem)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let warm = Duration::from_secs(1);
    let window = Duration::from_secs_f64(secs);
    let payload = gen::payload(1024);
    let run = http::unique() % 1_000_000;
    println!(
        "# annal-bench tls: two in-process nodes (plain {}, TLS {}), 1 KiB JSON events, durable appends, {secs} s per row after 1 s warm-up; TLS 1.3, ECDSA P-256 certificate, ring",
        plain.addr, secure.addr
    );
    println!("# machine: {} cores; load average before: {}", annal::env::real::cores(), gen::load_avg());
    println!(
        "| workload | throughput | requests/s | p50 ms | p99 ms | node CPU µs/request (generator excluded) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let rounds = args.rounds.max(1);
    // Per workload, per round: (plain, TLS) rates.
    let names = [
        "appends, 16 connections",
        "appends, 64 connections",
        "feed pages, 16 connections",
        "new connections (TLS: handshakes)",
    ];
    // Per workload, per round: ((plain rate, plain node CPU µs/request), (TLS rate, TLS CPU)).
    let mut pairs: Vec<Vec<(Figures, Figures)>> = vec![Vec::new(); names.len()];
    let len = 10_000u64;
    let result: Result<(), String> = rt.block_on(async {
        let targets = [("plain", plain.addr, None), ("TLS", secure.addr, Some(&tls))];
        for (label, addr, t) in targets {
            http::preload_with(addr, t, &format!("tls-{run}-{label}-read"), len, &payload).await?;
        }
        // `--only c16,c64,feed,connect` runs those workloads alone (e.g. to profile one).
        let keys = ["c16", "c64", "feed", "connect"];
        let wanted = |w: usize| args.only.as_ref().is_none_or(|o| o.iter().any(|k| k == keys[w]));
        for round in 0..rounds {
            for (w, name) in names.iter().enumerate() {
                if !wanted(w) {
                    continue;
                }
                let mut rates = [(0.0, 0.0); 2];
                // Alternate which node goes first, so drift in the machine's load evens out.
                let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                for i in order {
                    let (label, addr, t) = targets[i];
                    let row = format!("{label}: {name} (round {})", round + 1);
                    let m = match w {
                        0 | 1 => {
                            let conns = if w == 0 { 16 } else { 64 };
                            let prefix = format!("tls-{run}-{label}-c{conns}-r{round}");
                            let ops = http::append_ops_with(addr, t, &prefix, conns, 1, 1, &payload).await?;
                            per(measure(&row, "events/s", ops, warm, window).await, false)
                        }
                        2 => {
                            let mut ops: Vec<Box<dyn Op>> = Vec::new();
                            for c in 0..16u64 {
                                ops.push(Box::new(FeedOp {
                                    client: Client::connect_with(addr, t).await?,
                                    stream: format!("tls-{run}-{label}-read"),
                                    len: len as i64,
                                    count: 20,
                                    rng: gen::Rng(0xABCD + c),
                                    sequential: false,
                                    next: 0,
                                    gzip: false,
                                }));
                            }
                            per(measure(&row, "req/s", ops, warm, window).await, true)
                        }
                        _ => {
                            let ops: Vec<Box<dyn Op>> = (0..4)
                                .map(|_| Box::new(ConnectOp { addr, tls: t.cloned() }) as Box<dyn Op>)
                                .collect();
                            per(measure(&row, "conn/s", ops, warm, window).await, true)
                        }
                    };
                    rates[i] = m;
                }
                pairs[w].push((rates[0], rates[1]));
            }
        }

        // Reload time: in-process (load, check, build, swap) and over HTTP (plus the request).
        let node = secure.node.clone();
        let mut inproc = Vec::new();
        for _ in 0..RELOADS {
            let t = Instant::now();
            match node.reload_certificates().await {
                Some(Ok(_)) => {}
                other => {
                    return Err(format!("reload failed: {:?}", other.map(|r| r.err().map(|e| e.to_string()))))
                }
            }
            inproc.push(t.elapsed());
        }
        let mut over_http = Vec::new();
        for _ in 0..RELOADS {
            let mut c = Client::connect_tls(secure.addr, &tls).await?;
            let t = Instant::now();
            let r = c
                .request(
                    ::http::Method::POST,
                    "/admin/reloadconfig",
                    &[("authorization", http::ADMIN_AUTH)],
                    Bytes::new(),
                )
                .await?;
            over_http.push(t.elapsed());
            if r.status != 200 {
                return Err(format!("reload over HTTP: {} {}", r.status, r.reason));
            }
        }
        for (what, mut v) in [("in-process", inproc), ("POST /admin/reloadconfig", over_http)] {
            v.sort();
            println!(
                "# reload ({what}), {RELOADS} reloads: median {:.2} ms, max {:.2} ms",
                v[v.len() / 2].as_secs_f64() * 1e3,
                v[v.len() - 1].as_secs_f64() * 1e3
            );
        }
        Ok(())
    });
    println!("# load average after: {}", gen::load_avg());
    println!(
        "| over {rounds} round(s) | plain (median) | TLS (median) | TLS / plain (median of rounds) | node CPU µs/request, plain → TLS (medians) |"
    );
    println!("|---|---:|---:|---:|---:|");
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    for (w, name) in names.iter().enumerate() {
        let p = &pairs[w];
        if p.is_empty() {
            continue;
        }
        println!(
            "| {name} | {:.0}/s | {:.0}/s | {:.2}× | {:.0} → {:.0} |",
            median(p.iter().map(|x| x.0 .0).collect()),
            median(p.iter().map(|x| x.1 .0).collect()),
            median(p.iter().map(|x| x.1 .0 / x.0 .0.max(1e-9)).collect()),
            median(p.iter().map(|x| x.0 .1).collect()),
            median(p.iter().map(|x| x.1 .1).collect()),
        );
    }
    drop(rt);
    plain.stop();
    secure.stop();
    let _ = std::fs::remove_dir_all(&base);
    result
}
