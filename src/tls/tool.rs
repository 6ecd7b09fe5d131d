//! `annal certs`: a certificate authority and node certificates in the layout a node's options
//! expect (`ca/ca.crt`, `ca/ca.key`; `node.crt`, `node.key`).
//!
//! `create-ca` makes a self-signed CA (valid 5 years by default); `create-node` makes a node
//! certificate signed by it (valid 1 year by default) for the IP addresses and DNS names given
//! (at least one: peers check the address they dial against them), with the key usages a node
//! needs both as a server and as a client of other nodes. Keys are ECDSA P-256, written as PEM
//! PKCS #8 with mode 0600; existing files are kept unless `--force`. The certificate makers are
//! also functions ([`create_ca`], [`create_node`]) for tests and tools.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};

use crate::env::{Env, OpenMode};

/// Default validity of a CA, days.
pub const CA_DAYS: i64 = 5 * 365;
/// Default validity of a node certificate, days.
pub const NODE_DAYS: i64 = 365;
/// The common name node certificates get unless told otherwise.
pub const DEFAULT_NODE_CN: &str = "eventstoredb-node";

/// A PEM certificate and its PEM private key.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The certificate (PEM).
    pub cert: String,
    /// The private key (PEM PKCS #8).
    pub key: String,
}

/// What a node certificate says.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    /// Subject common name.
    pub common_name: String,
    /// IP SANs.
    pub ips: Vec<IpAddr>,
    /// DNS SANs.
    pub dns: Vec<String>,
    /// Start of validity, seconds since the epoch.
    pub not_before: i64,
    /// Days of validity.
    pub days: i64,
}

fn when(secs: i64) -> Result<time::OffsetDateTime, String> {
    time::OffsetDateTime::from_unix_timestamp(secs).map_err(|e| e.to_string())
}

fn serial(seed: u64) -> SerialNumber {
    let mut b = seed.to_be_bytes().to_vec();
    b[0] &= 0x7f;
    b[0] |= 0x01;
    SerialNumber::from_slice(&b)
}

/// A self-signed CA valid for `days` from `not_before` (seconds since the epoch); `serial_seed`
/// gives its serial number and name suffix.
pub fn create_ca(not_before: i64, days: i64, serial_seed: u64) -> Result<Pair, String> {
    create_ca_with(KeyPair::generate().map_err(|e| e.to_string())?, not_before, days, serial_seed)
}

/// [`create_ca`] with the CA's key given.
pub fn create_ca_with(key: KeyPair, not_before: i64, days: i64, serial_seed: u64) -> Result<Pair, String> {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("Annal CA {serial_seed:016x}"));
    dn.push(DnType::OrganizationName, "Annal");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    p.not_before = when(not_before)?;
    p.not_after = when(not_before + days * 86_400)?;
    p.serial_number = Some(serial(serial_seed));
    let cert = p.self_signed(&key).map_err(|e| e.to_string())?;
    Ok(Pair { cert: cert.pem(), key: key.serialize_pem() })
}

/// A node certificate signed by the CA `ca`.
pub fn create_node(ca: &Pair, spec: &NodeSpec, serial_seed: u64) -> Result<Pair, String> {
    create_node_with(ca, spec, serial_seed, KeyPair::generate().map_err(|e| e.to_string())?)
}

/// [`create_node`] with the node's key given.
pub fn create_node_with(ca: &Pair, spec: &NodeSpec, serial_seed: u64, key: KeyPair) -> Result<Pair, String> {
    if spec.ips.is_empty() && spec.dns.is_empty() {
        return Err("a node certificate needs at least one IP address or DNS name".into());
    }
    let ca_key = KeyPair::from_pem(&ca.key).map_err(|e| format!("the CA key: {e}"))?;
    let ca_params =
        CertificateParams::from_ca_cert_pem(&ca.cert).map_err(|e| format!("the CA certificate: {e}"))?;
    let issuer = ca_params
        .self_signed(&ca_key)
        .map_err(|e| format!("the CA key does not fit the CA certificate: {e}"))?;
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, spec.common_name.clone());
    p.distinguished_name = dn;
    let mut sans = Vec::new();
    for ip in &spec.ips {
        sans.push(SanType::IpAddress(*ip));
    }
    for name in &spec.dns {
        sans.push(SanType::DnsName(name.clone().try_into().map_err(|e| format!("DNS name {name:?}: {e}"))?));
    }
    p.subject_alt_names = sans;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    p.use_authority_key_identifier_extension = true;
    p.not_before = when(spec.not_before)?;
    p.not_after = when(spec.not_before + spec.days * 86_400)?;
    p.serial_number = Some(serial(serial_seed));
    let cert = p.signed_by(&key, &issuer, &ca_key).map_err(|e| e.to_string())?;
    Ok(Pair { cert: cert.pem(), key: key.serialize_pem() })
}

/// An Ed25519 key made from a 32-byte seed: the same seed gives the same key, and Ed25519
/// signatures are deterministic and of one length, so certificates made with it are the same
/// bytes every time (the simulator's certificates come from the run's seed).
pub fn seeded_key(seed: [u8; 32]) -> Result<KeyPair, String> {
    // PKCS #8 v1 of an Ed25519 private key (RFC 8410): the fixed header, then the seed.
    let mut der =
        vec![0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];
    der.extend_from_slice(&seed);
    let der = rustls::pki_types::PrivatePkcs8KeyDer::from(der);
    KeyPair::from_pkcs8_der_and_sign_algo(&der, &rcgen::PKCS_ED25519).map_err(|e| e.to_string())
}

const USAGE: &str = "\
Usage:
  annal certs create-ca [--out DIR] [--days N] [--force]
      A certificate authority: DIR/ca.crt and DIR/ca.key (DIR defaults to ./ca; 5 years).
  annal certs create-node --ip-addresses A,B --dns-names N,M [--out DIR]
                          [--ca-certificate FILE] [--ca-key FILE] [--common-name CN]
                          [--days N] [--force]
      A node certificate signed by the CA: DIR/node.crt and DIR/node.key (DIR defaults to
      ./node; CA files default to ./ca/ca.crt and ./ca/ca.key; the common name to
      eventstoredb-node; 1 year). At least one IP address or DNS name is required: other nodes
      and clients check the address they connect to against them.
";

/// Runs `annal certs ARGS`.
pub fn main(args: &[String]) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("annal certs: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async {
        let env = crate::env::real::env();
        match run(&env, args) {
            Ok(msg) => {
                println!("{msg}");
                ExitCode::SUCCESS
            }
            Err(Failure::Usage(m)) => {
                eprintln!("annal certs: {m}\n\n{USAGE}");
                ExitCode::from(2)
            }
            Err(Failure::Failed(m)) => {
                eprintln!("annal certs: {m}");
                ExitCode::FAILURE
            }
        }
    })
}

enum Failure {
    Usage(String),
    Failed(String),
}

/// Options of one command: `--name value` pairs and bare flags.
struct Args(Vec<(String, Option<String>)>);

impl Args {
    fn parse(args: &[String], valued: &[&str], flags: &[&str]) -> Result<Args, Failure> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].trim_start_matches('-').to_ascii_lowercase();
            if !args[i].starts_with('-') {
                return Err(Failure::Usage(format!("unexpected argument {:?}", args[i])));
            }
            let (name, inline) = match a.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (a, None),
            };
            if flags.contains(&name.as_str()) {
                out.push((name, None));
            } else if valued.contains(&name.as_str()) {
                let v = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        args.get(i)
                            .cloned()
                            .ok_or_else(|| Failure::Usage(format!("--{name} needs a value")))?
                    }
                };
                out.push((name, Some(v)));
            } else {
                return Err(Failure::Usage(format!("unknown option {:?}", args[i])));
            }
            i += 1;
        }
        Ok(Args(out))
    }
    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| v.as_deref())
    }
    fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }
    fn days(&self, default: i64) -> Result<i64, Failure> {
        match self.get("days") {
            None => Ok(default),
            Some(d) => match d.parse::<i64>() {
                Ok(n) if (1..=100 * 365).contains(&n) => Ok(n),
                _ => Err(Failure::Usage(format!("--days {d:?}: expected a number of days from 1 to 36500"))),
            },
        }
    }
}

fn run(env: &Env, args: &[String]) -> Result<String, Failure> {
    let now = env.clock.wall_micros() / 1_000_000;
    match args.first().map(String::as_str) {
        Some("create-ca") => {
            let a = Args::parse(&args[1..], &["out", "days"], &["force"])?;
            let out = PathBuf::from(a.get("out").unwrap_or("ca"));
            let ca = create_ca(now, a.days(CA_DAYS)?, env.random_u64()).map_err(Failure::Failed)?;
            let (crt, key) = (out.join("ca.crt"), out.join("ca.key"));
            write_pair(env, &out, &crt, &key, &ca, a.has("force"))?;
            Ok(format!("wrote {} and {}", crt.display(), key.display()))
        }
        Some("create-node") => {
            let a = Args::parse(
                &args[1..],
                &["out", "days", "ca-certificate", "ca-key", "common-name", "ip-addresses", "dns-names"],
                &["force"],
            )?;
            let list = |n: &str| -> Vec<String> {
                a.get(n)
                    .unwrap_or("")
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            };
            let ips = list("ip-addresses")
                .iter()
                .map(|s| {
                    s.parse::<IpAddr>().map_err(|_| Failure::Usage(format!("{s:?} is not an IP address")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let dns = list("dns-names");
            if ips.is_empty() && dns.is_empty() {
                return Err(Failure::Usage("give --ip-addresses or --dns-names (or both)".into()));
            }
            let read = |p: &str| -> Result<String, Failure> {
                let bytes = env
                    .read_file(Path::new(p))
                    .map_err(|e| Failure::Failed(format!("cannot read {p}: {e}")))?;
                String::from_utf8(bytes).map_err(|_| Failure::Failed(format!("{p} is not PEM text")))
            };
            let ca = Pair {
                cert: read(a.get("ca-certificate").unwrap_or("ca/ca.crt"))?,
                key: read(a.get("ca-key").unwrap_or("ca/ca.key"))?,
            };
            let spec = NodeSpec {
                common_name: a.get("common-name").unwrap_or(DEFAULT_NODE_CN).to_string(),
                ips,
                dns,
                not_before: now,
                days: a.days(NODE_DAYS)?,
            };
            let node = create_node(&ca, &spec, env.random_u64()).map_err(Failure::Failed)?;
            let out = PathBuf::from(a.get("out").unwrap_or("node"));
            let (crt, key) = (out.join("node.crt"), out.join("node.key"));
            write_pair(env, &out, &crt, &key, &node, a.has("force"))?;
            Ok(format!("wrote {} and {}", crt.display(), key.display()))
        }
        Some("--help" | "-h" | "help") | None => Err(Failure::Usage("a command is required".into())),
        Some(other) => Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
}

fn write_pair(
    env: &Env,
    dir: &Path,
    crt: &Path,
    key: &Path,
    pair: &Pair,
    force: bool,
) -> Result<(), Failure> {
    let failed = |p: &Path, e: std::io::Error| Failure::Failed(format!("cannot write {}: {e}", p.display()));
    if !force {
        for p in [crt, key] {
            if env.disk.exists(p) {
                return Err(Failure::Failed(format!("{} exists; pass --force to replace it", p.display())));
            }
        }
    }
    env.disk.create_dir_all(dir).map_err(|e| failed(dir, e))?;
    for (p, text, mode) in [(key, &pair.key, 0o600), (crt, &pair.cert, 0o644)] {
        let f = env.disk.open(p, OpenMode::CreateTruncate).map_err(|e| failed(p, e))?;
        crate::env::real::set_mode(p, mode).map_err(|e| failed(p, e))?;
        f.write_all_at(text.as_bytes(), 0).map_err(|e| failed(p, e))?;
        f.sync_data().map_err(|e| failed(p, e))?;
    }
    env.disk.sync_dir(dir).map_err(|e| failed(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_certificates_chain_to_their_ca_and_carry_their_names() {
        let now = 1_700_000_000;
        let ca = create_ca(now, 30, 7).unwrap();
        let spec = NodeSpec {
            common_name: "node.esdb.example.org".into(),
            ips: vec!["127.0.0.1".parse().unwrap()],
            dns: vec!["localhost".into()],
            not_before: now,
            days: 10,
        };
        let node = create_node(&ca, &spec, 9).unwrap();
        let der = |pem: &str| {
            use rustls::pki_types::pem::PemObject;
            rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
        };
        let (ca_der, node_der) = (der(&ca.cert), der(&node.cert));
        let parsed = super::super::load::parse(&node_der).unwrap();
        assert_eq!(parsed.cn, "node.esdb.example.org");
        assert!(!parsed.self_issued);
        assert_eq!(parsed.not_after, now + 10 * 86_400);
        assert!(super::super::load::parse(&ca_der).unwrap().self_issued);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_der).unwrap();
        let ee = rustls::server::ParsedCertificate::try_from(&node_der).unwrap();
        let at =
            |s: i64| rustls::pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(s as u64));
        let algs = super::super::provider().signature_verification_algorithms.all;
        rustls::client::verify_server_cert_signed_by_trust_anchor(&ee, &roots, &[], at(now + 60), algs)
            .unwrap();
        assert!(rustls::client::verify_server_cert_signed_by_trust_anchor(
            &ee,
            &roots,
            &[],
            at(now + 11 * 86_400),
            algs
        )
        .is_err());
        let no_names = NodeSpec { ips: vec![], dns: vec![], ..spec };
        assert!(create_node(&ca, &no_names, 1).is_err());
    }

    #[test]
    fn seeded_keys_make_the_same_certificates_and_load_as_a_set() {
        use crate::env::Disk;
        let now = 1_700_000_000;
        let make = || {
            let ca = create_ca_with(seeded_key([1; 32]).unwrap(), now, 30, 7).unwrap();
            let spec = NodeSpec {
                common_name: "node.sim".into(),
                ips: vec!["192.168.0.1".parse().unwrap()],
                dns: vec![],
                not_before: now,
                days: 10,
            };
            let node = create_node_with(&ca, &spec, 9, seeded_key([2; 32]).unwrap()).unwrap();
            (ca, node)
        };
        let (ca, node) = make();
        let (ca2, node2) = make();
        assert_eq!((&ca.cert, &ca.key, &node.cert), (&ca2.cert, &ca2.key, &node2.cert));
        assert_ne!(
            seeded_key([3; 32]).unwrap().public_key_der(),
            seeded_key([2; 32]).unwrap().public_key_der()
        );
        let disk = crate::env::mem::MemDisk::volatile();
        let put = |p: &str, text: &str| {
            let f = disk.open(std::path::Path::new(p), crate::env::OpenMode::CreateTruncate).unwrap();
            f.write_all_at(text.as_bytes(), 0).unwrap();
        };
        disk.create_dir_all(std::path::Path::new("/c/ca")).unwrap();
        put("/c/ca/ca.crt", &ca.cert);
        put("/c/node.crt", &node.cert);
        put("/c/node.key", &node.key);
        let paths = super::super::CertPaths {
            certificate: "/c/node.crt".into(),
            private_key: "/c/node.key".into(),
            trusted_roots: "/c/ca".into(),
            reserved_cn: String::new(),
            ..Default::default()
        };
        let at =
            rustls::pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(now as u64 + 60));
        let set = super::super::load::load(&disk, &paths, at).unwrap();
        assert_eq!(set.reserved_cn, "node.sim");
    }
}
