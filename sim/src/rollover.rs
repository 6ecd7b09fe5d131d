//! The certificate rollover scenario ([`crate::scenario::Scenario::Certs`]): a three-node
//! cluster that speaks TLS to its clients and between its members, whose certificates are rolled
//! twice to a new CA and a new common name, with bad reloads and an intruder on the side.
//!
//! **The world's certificates.** Three generations, each a CA and one certificate per node with
//! the generation's common name (the reserved node common name follows the certificate), plus a
//! rogue CA. Keys are Ed25519 keys made from the run's seed, so every certificate is the same
//! bytes at each replay and every handshake message has the same length. Validity is wide around
//! the simulated clocks, except for the expired certificate of a bad reload.
//!
//! **Roll 1, under load.** During the workload, with the fault plan's crashes, partitions and
//! disk trouble, the harness rolls the nodes one at a time in a seeded order: it writes the node's
//! new certificate, key and trusted root (the new CA only) to the node's disk and reloads (what
//! `POST /admin/reloadconfig` calls). A reload that fails (a disk error) is retried, as an
//! operator would; a node that is down loads the new files when it starts.
//!
//! **Bad reloads.** At seeded times a node gets a bad set — the key missing, a key of another
//! certificate, an expired certificate, a certificate of the rogue CA — and is reloaded; the reload
//! must fail and the set in force must stay the same (checked at once). The good files are put back.
//!
//! **Roll 2, after healing.** Once the cluster has settled, it is rolled again, node by node with
//! short gaps, to the third generation, on a quiet network; the cluster must converge (a leader
//! that every member follows as far as it published) within the reset interval of node-to-node
//! connections plus the time to elect ([`CONVERGE_WITHIN`]).
//!
//! **The intruder.** A host with a certificate of the rogue CA, carrying a common name the
//! cluster reserves, dials the members' replication ports during the workload and, when its
//! handshake completes, sends a heartbeat of term [`INTRUDER_TERM`]. A member that accepted the
//! connection would take that term, which the observations would show.
//!
//! Invariant: every choice comes from the run's seed; the harness acts only through the nodes'
//! disks and their reload function.

// The intruder runs on a turmoil client host, whose tokio clock is the simulation's paused clock.
#![allow(clippy::disallowed_methods)]

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use annal::env::{Disk, OpenMode};
use annal::tls::tool::{create_ca_with, create_node_with, seeded_key, NodeSpec, Pair};
use annal::tls::{CertPaths, TlsSettings};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::io::AsyncWriteExt;

use crate::rig::{Rig, REPLICATION_PORT};
use crate::shared::now_us;

/// The lifetime of node-to-node connections in the scenario (the nodes' `peer_reset`).
pub const PEER_RESET: Duration = Duration::from_secs(3);
/// How long after its reset interval a cluster rolled everywhere may take to converge: elections
/// (a leader that lost its quorum steps down after the election timeout) and reconnections.
pub const CONVERGE_WITHIN: Duration = Duration::from_secs(8);
/// When convergence is first looked for after the reset interval: before it, a leader elected
/// over connections of the old certificates may still stand.
pub const CONVERGE_FROM: Duration = Duration::from_secs(3);
/// The term the intruder's heartbeats carry: no member reaches it by elections in a run.
pub const INTRUDER_TERM: u64 = 1 << 40;
/// The intruder's host name.
pub const INTRUDER: &str = "intruder";

const DIR: &str = "/certs";
/// Certificates are valid from here (seconds since the epoch)...
const NOT_BEFORE: i64 = 1_600_000_000;
/// ...for this many days.
const DAYS: i64 = 20 * 365;
/// The generations of node certificates: the first, roll 1's, roll 2's.
const GENERATIONS: usize = 3;

/// The scenario's settings of a node's certificates.
pub fn settings() -> TlsSettings {
    TlsSettings {
        paths: CertPaths {
            certificate: Path::new(DIR).join("node.crt"),
            private_key: Path::new(DIR).join("node.key"),
            trusted_roots: Path::new(DIR).join("ca"),
            reserved_cn: String::new(),
            ..Default::default()
        },
        peer_reset: PEER_RESET,
    }
}

/// What makes a reload bad.
#[derive(Clone, Copy, Debug)]
pub enum Bad {
    /// The private key file is gone.
    MissingKey,
    /// The key of another certificate.
    KeyMismatch,
    /// An expired certificate.
    Expired,
    /// A certificate of a CA the node does not trust.
    WrongCa,
}

/// A rolled node's files.
struct Files {
    cert: String,
    key: String,
    ca: String,
}

/// The scenario's certificates and what happened to them.
pub struct Rollover {
    seed: u64,
    nodes: usize,
    cas: Vec<Pair>,
    rogue: Pair,
    ips: Vec<IpAddr>,
    /// The generation each node's files are of.
    pub generation: Vec<usize>,
    /// Violations found while the run went on (bad reloads taken).
    pub failures: Vec<String>,
    /// Reloads that took effect (the trace's summary).
    pub reloads: u32,
    /// Bad reloads refused.
    pub refused: u32,
}

fn key_seed(seed: u64, what: u64, k: u64) -> [u8; 32] {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xce27_0000_0000_0000 ^ (what << 32) ^ k);
    rng.gen()
}

fn cn(generation: usize) -> String {
    format!("node-g{generation}.annal.sim")
}

/// A file's text ("" when it cannot be read).
fn text(disk: &dyn Disk, path: &Path) -> String {
    annal::env::read_whole(disk, path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

impl Rollover {
    /// The CAs of a run of `nodes` members (node certificates follow once addresses are known).
    pub fn new(seed: u64, nodes: usize) -> Rollover {
        let ca = |g: u64| {
            create_ca_with(
                seeded_key(key_seed(seed, 1, g)).expect("Ed25519 key"),
                NOT_BEFORE,
                DAYS,
                0x100 + g,
            )
            .expect("CA")
        };
        let cas = (0..GENERATIONS as u64).map(ca).collect();
        Rollover {
            seed,
            nodes,
            cas,
            rogue: ca(99),
            ips: Vec::new(),
            generation: vec![0; nodes],
            failures: Vec::new(),
            reloads: 0,
            refused: 0,
        }
    }

    /// What the clients trust: every generation's CA (they talk to nodes on both sides of a roll).
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in &self.cas {
            if let Ok(der) = CertificateDer::from_pem_slice(ca.cert.as_bytes()) {
                let _ = roots.add(der);
            }
        }
        let config = rustls::ClientConfig::builder_with_details(annal::tls::provider(), Arc::new(SimTime))
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    }

    fn node_pair(&self, generation: usize, k: usize, ca: &Pair, not_before: i64, days: i64) -> Pair {
        let spec =
            NodeSpec { common_name: cn(generation), ips: vec![self.ips[k]], dns: vec![], not_before, days };
        let key = seeded_key(key_seed(self.seed, 2 + generation as u64, k as u64)).expect("Ed25519 key");
        create_node_with(ca, &spec, 0x200 + (generation * 16 + k) as u64, key).expect("node certificate")
    }

    fn files(&self, generation: usize, k: usize) -> Files {
        let ca = &self.cas[generation];
        let pair = self.node_pair(generation, k, ca, NOT_BEFORE, DAYS);
        Files { cert: pair.cert, key: pair.key, ca: ca.cert.clone() }
    }

    /// Writes the first generation onto every member's disk (after the hosts are registered, so
    /// their addresses are known).
    pub fn install(&mut self, sim: &turmoil::Sim, rigs: &[Rig]) {
        self.ips = rigs.iter().take(self.nodes).map(|r| sim.lookup(r.name.as_str())).collect();
        for (k, r) in rigs.iter().take(self.nodes).enumerate() {
            let f = self.files(0, k);
            put(&*r.mem, &f);
        }
    }

    /// Rolls node `k` to `generation`: its files, then a reload when it runs. `false` when the
    /// reload failed (retry later).
    pub fn roll(&mut self, r: &Rig, k: usize, generation: usize, now: u64) -> bool {
        if self.generation[k] != generation {
            put(&*r.mem, &self.files(generation, k));
            self.generation[k] = generation;
        }
        let Some(node) = r.shared.node.borrow().clone() else {
            r.note(
                now,
                format!("certificates: generation {generation} written; the node loads them when it starts"),
            );
            return true;
        };
        let Some(tls) = node.tls() else { return true };
        match tls.reload() {
            Ok(facts) => {
                self.reloads += 1;
                r.note(now, format!("certificates: reloaded generation {generation} (CN {})", facts.cn));
                true
            }
            Err(e) => {
                r.note(
                    now,
                    format!("certificates: the reload of generation {generation} failed ({e}); retrying"),
                );
                false
            }
        }
    }

    /// A bad reload of node `k`: it must fail and change nothing. The good files are put back.
    pub fn bad_reload(&mut self, r: &Rig, k: usize, bad: Bad, now: u64) {
        let Some(node) = r.shared.node.borrow().clone() else { return };
        let Some(tls) = node.tls() else { return };
        let paths = settings().paths;
        let disk = &*r.mem;
        let good = Files {
            cert: text(disk, &paths.certificate),
            key: text(disk, &paths.private_key),
            ca: text(disk, &paths.trusted_roots.join("ca.crt")),
        };
        let g = self.generation[k];
        let before = tls.current().set.about.thumbprint.clone();
        let mut files = Files { cert: good.cert.clone(), key: good.key.clone(), ca: good.ca.clone() };
        match bad {
            Bad::MissingKey => files.key.clear(),
            Bad::KeyMismatch => {
                files.key = self.node_pair(g, (k + 1) % self.nodes, &self.cas[g], NOT_BEFORE, DAYS).key
            }
            Bad::Expired => {
                let p = self.node_pair(g, k, &self.cas[g], NOT_BEFORE - 400 * 86_400, 30);
                (files.cert, files.key) = (p.cert, p.key);
            }
            Bad::WrongCa => {
                let p = self.node_pair(g, k, &self.rogue, NOT_BEFORE, DAYS);
                (files.cert, files.key) = (p.cert, p.key);
            }
        }
        put(disk, &files);
        let answer = tls.reload();
        let after = tls.current().set.about.thumbprint.clone();
        put(disk, &good);
        match answer {
            Ok(_) => self.failures.push(format!(
                "certificates: {} took a bad reload ({bad:?}) at {:.3} s",
                r.name,
                now as f64 / 1e6
            )),
            Err(e) => {
                self.refused += 1;
                r.note(now, format!("certificates: bad reload ({bad:?}) refused: {e}"));
            }
        }
        if after != before {
            self.failures.push(format!(
                "certificates: a bad reload ({bad:?}) of {} changed the certificate in force ({before} -> {after})",
                r.name
            ));
        }
    }

    /// The intruder's TLS: a certificate of the rogue CA with `generation`'s common name, for its
    /// own address; whatever the node presents is taken.
    fn intruder_config(&self, ip: IpAddr, generation: usize) -> Arc<rustls::ClientConfig> {
        let spec = NodeSpec {
            common_name: cn(generation),
            ips: vec![ip],
            dns: vec![],
            not_before: NOT_BEFORE,
            days: DAYS,
        };
        let key = seeded_key(key_seed(self.seed, 50, generation as u64)).expect("Ed25519 key");
        let pair = create_node_with(&self.rogue, &spec, 0x300 + generation as u64, key)
            .expect("intruder certificate");
        let chain = vec![CertificateDer::from_pem_slice(pair.cert.as_bytes()).expect("intruder certificate")];
        let key = PrivateKeyDer::from_pem_slice(pair.key.as_bytes()).expect("intruder key");
        let config = rustls::ClientConfig::builder_with_details(annal::tls::provider(), Arc::new(SimTime))
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .expect("protocol versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer))
            .with_client_auth_cert(chain, key)
            .expect("intruder configuration");
        Arc::new(config)
    }

    /// Starts the intruder host, which dials members until `until` (µs of simulated time).
    pub fn start_intruder(&self, sim: &mut turmoil::Sim, rigs: &[Rig], until: u64) {
        let members: Vec<String> = rigs.iter().take(self.nodes).map(|r| r.name.clone()).collect();
        let ip = sim.lookup(INTRUDER);
        let configs: Vec<_> = (0..GENERATIONS).map(|g| self.intruder_config(ip, g)).collect();
        let (seed, size) = (self.seed, self.nodes as u32);
        sim.client(INTRUDER, async move {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1217_0000_0000_000d);
            let me = std::net::SocketAddr::new(turmoil::lookup(INTRUDER), REPLICATION_PORT);
            while now_us() < until {
                tokio::time::sleep(Duration::from_millis(rng.gen_range(150..600))).await;
                let to = &members[rng.gen_range(0..members.len())];
                let config = configs[rng.gen_range(0..configs.len())].clone();
                let attempt = async {
                    let addr = std::net::SocketAddr::new(turmoil::lookup(to.as_str()), REPLICATION_PORT);
                    let tcp = turmoil::net::TcpStream::connect(addr).await.ok()?;
                    let name = ServerName::IpAddress(addr.ip().into());
                    let mut tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.ok()?;
                    let frame = annal::cluster::wire::encode(&annal::cluster::core::Envelope {
                        from: me,
                        cluster_size: size,
                        term: INTRUDER_TERM,
                        msg: annal::cluster::core::Msg::Heartbeat {
                            leader_end: 0,
                            commit: 0,
                            lease: 0,
                            notice: false,
                        },
                    });
                    tls.write_all(&frame).await.ok()?;
                    tls.flush().await.ok()?;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Some(())
                };
                let _ = tokio::time::timeout(Duration::from_secs(2), attempt).await;
            }
            Ok(())
        });
    }
}

/// Writes a node's certificate, key (when not empty) and trusted root, durably.
fn put(disk: &dyn Disk, f: &Files) {
    let paths = settings().paths;
    let _ = disk.create_dir_all(&paths.trusted_roots);
    let write = |path: &PathBuf, text: &str| {
        if text.is_empty() {
            let _ = disk.remove(path);
            return;
        }
        if let Ok(file) = disk.open(path, OpenMode::CreateTruncate) {
            let _ = file.write_all_at(text.as_bytes(), 0);
            let _ = file.sync_data();
        }
    };
    write(&paths.certificate, &f.cert);
    write(&paths.private_key, &f.key);
    write(&paths.trusted_roots.join("ca.crt"), &f.ca);
    let _ = disk.sync_dir(&paths.trusted_roots);
    let _ = disk.sync_dir(Path::new(DIR));
}

/// The simulation's wall clock for the clients' certificate checks (the nodes use their own
/// skewed clocks).
#[derive(Debug)]
struct SimTime;

impl rustls::time_provider::TimeProvider for SimTime {
    fn current_time(&self) -> Option<UnixTime> {
        let elapsed = turmoil::sim_elapsed().unwrap_or_default();
        Some(UnixTime::since_unix_epoch(Duration::from_secs(1_700_000_000) + elapsed))
    }
}

/// The intruder takes whatever certificate a node presents: it only wants in.
#[derive(Debug)]
struct AnyServer;

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = &annal::tls::provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = &annal::tls::provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        annal::tls::provider().signature_verification_algorithms.supported_schemes()
    }
}

/// The intruder's checker: no member ever took the intruder's term, so none accepted a node
/// connection whose certificate does not chain to its trusted roots.
pub fn check_intruder(seen: &[crate::checker::Observation]) -> Vec<String> {
    seen.iter()
        .find(|o| o.term >= INTRUDER_TERM)
        .map(|o| {
            vec![format!(
                "trusted roots only: {} took term {} at {:.3} s from the intruder, whose certificate does not chain to a trusted root",
                o.node,
                o.term,
                o.at as f64 / 1e6
            )]
        })
        .unwrap_or_default()
}
