//! TLS against the release binary: the HTTPS client API with certificates made by
//! `annal::tls::tool`, reloads by `POST /admin/reloadconfig` and by `SIGHUP`, every bad reload
//! leaving the old certificate serving, plain HTTP and a stalled handshake on the TLS port, and a
//! three-node cluster over mutual TLS that refuses a peer of another CA and converges after a
//! rolling update of every node's certificates.
//!
//! This test drives processes from outside the node, so it uses the OS directly (clocks,
//! sockets, processes); the node itself only sees its `Env`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod ports;
use ports::free_port;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use annal::tls::tool::{create_ca, create_node, NodeSpec, Pair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

const DAY: i64 = 86_400;

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::Relaxed) ^ (now() as u64) << 16
}

fn ca() -> Pair {
    create_ca(now() - DAY, 30, seed()).unwrap()
}

fn node_cert(ca: &Pair, cn: &str, not_before: i64, days: i64) -> Pair {
    let spec = NodeSpec {
        common_name: cn.into(),
        ips: vec!["127.0.0.1".parse().unwrap()],
        dns: vec!["localhost".into()],
        not_before,
        days,
    };
    create_node(ca, &spec, seed()).unwrap()
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// One node's certificate files, at the paths its options name.
struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(dir: PathBuf, ca: &Pair, node: &Pair) -> Files {
        std::fs::create_dir_all(dir.join("ca")).unwrap();
        let f = Files { dir };
        f.install(ca, node);
        f
    }
    fn install(&self, ca: &Pair, node: &Pair) {
        self.put_roots(&[("ca.crt", ca.cert.as_bytes())]);
        self.put("node.crt", node.cert.as_bytes());
        self.put("node.key", node.key.as_bytes());
    }
    fn put(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.dir.join(name), bytes).unwrap();
    }
    /// Replaces the trusted roots directory's files.
    fn put_roots(&self, files: &[(&str, &[u8])]) {
        let roots = self.dir.join("ca");
        for e in std::fs::read_dir(&roots).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        for (name, bytes) in files {
            std::fs::write(roots.join(name), bytes).unwrap();
        }
    }
    fn args(&self) -> Vec<String> {
        vec![
            "--certificate-file".into(),
            self.dir.join("node.crt").display().to_string(),
            "--certificate-private-key-file".into(),
            self.dir.join("node.key").display().to_string(),
            "--trusted-root-certificates-path".into(),
            self.dir.join("ca").display().to_string(),
        ]
    }
}

struct Proc {
    child: Option<Child>,
    http: u16,
    log: PathBuf,
}

impl Proc {
    fn spawn(args: Vec<String>, http: u16, log: PathBuf) -> Proc {
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_annal"))
            .args(args)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap();
        Proc { child: Some(child), http, log }
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }
    fn alive(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn single(files: &Files, log: PathBuf) -> Proc {
    let http = free_port();
    let mut args = vec!["--mem-db".into(), "--http-port".into(), http.to_string()];
    args.extend(files.args());
    let p = Proc::spawn(args, http, log);
    wait("the node to serve HTTPS", Duration::from_secs(20), || {
        https(p.http, &ca_of(files), "GET", "/ping", &[], "").ok().filter(|r| r.status == 200)
    });
    p
}

/// The trusted root the node's files hold now (what a client of it trusts).
fn ca_of(files: &Files) -> String {
    std::fs::read_to_string(files.dir.join("ca").join("ca.crt")).unwrap()
}

fn wait<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(x) = f() {
            return x;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    head: String,
    body: String,
    /// Thumbprint of the certificate the server presented.
    served: String,
}

fn client_config(ca_pem: &str, client: Option<&Pair>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(ca_pem)).unwrap();
    let b = rustls::ClientConfig::builder_with_provider(annal::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match client {
        None => b.with_no_client_auth(),
        Some(p) => b
            .with_client_auth_cert(
                vec![der(&p.cert)],
                PrivateKeyDer::from_pem_slice(p.key.as_bytes()).unwrap(),
            )
            .unwrap(),
    })
}

/// One request over a new TLS connection that trusts `ca_pem`.
fn https(
    port: u16,
    ca_pem: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Resp, String> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let conn = rustls::ClientConnection::new(
        client_config(ca_pem, None),
        ServerName::try_from("127.0.0.1").unwrap(),
    )
    .map_err(|e| e.to_string())?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    req.push_str("Authorization: Basic YWRtaW46Y2hhbmdlaXQ=\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    match s.read_to_end(&mut raw) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    let served = annal::tls::load::thumbprint(&s.conn.peer_certificates().unwrap()[0]);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no head")?;
    let status = head.split(' ').nth(1).ok_or("no status")?.parse().map_err(|_| "bad status")?;
    Ok(Resp { status, head: head.to_ascii_lowercase(), body: body.to_owned(), served })
}

fn thumb(p: &Pair) -> String {
    annal::tls::load::thumbprint(&der(&p.cert))
}

fn append(port: u16, ca_pem: &str, stream: &str, n: usize) -> Result<Resp, String> {
    let id = uuid::Uuid::from_u128(((now() as u128) << 64) | (seed() as u128) << 8 | n as u128).to_string();
    https(
        port,
        ca_pem,
        "POST",
        &format!("/streams/{stream}"),
        &[("Content-Type", "application/json"), ("ES-EventType", "t"), ("ES-EventId", &id)],
        &format!("{{\"n\":{n}}}"),
    )
}

#[test]
fn the_client_api_over_https() {
    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let n1 = node_cert(&ca1, "eventstoredb-node", now() - 60, 10);
    let files = Files::new(root.path().join("n"), &ca1, &n1);
    let p = single(&files, root.path().join("n.log"));

    // Links and Location use https.
    let r = append(p.http, &ca1.cert, "s-1", 0).unwrap();
    assert_eq!(r.status, 201, "{r:?}");
    assert!(r.head.contains("location: https://127.0.0.1:"), "{}", r.head);
    assert_eq!(r.served, thumb(&n1));
    let feed =
        https(p.http, &ca1.cert, "GET", "/streams/s-1", &[("Accept", "application/json")], "").unwrap();
    assert_eq!(feed.status, 200);
    let v: serde_json::Value = serde_json::from_str(&feed.body).unwrap();
    assert!(v["id"].as_str().unwrap().starts_with("https://"), "{}", feed.body);
    assert!(v["links"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["uri"].as_str().unwrap().starts_with("https://")));

    // A client that trusts another CA refuses the node.
    let other = ca();
    assert!(https(p.http, &other.cert, "GET", "/ping", &[], "").is_err());

    // Plain HTTP to the TLS port: a clear plain-text refusal.
    let mut plain = TcpStream::connect(("127.0.0.1", p.http)).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    plain.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut raw = String::new();
    plain.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{raw}");
    assert!(raw.contains("This port speaks HTTPS"), "{raw}");

    // Clients that stall mid-handshake (a record header and no more, or nothing at all) hold only
    // their own connections.
    let mut stalled = Vec::new();
    for first in [&b"\x16\x03\x01"[..], &b""[..]] {
        let mut s = TcpStream::connect(("127.0.0.1", p.http)).unwrap();
        s.write_all(first).unwrap();
        stalled.push(s);
    }
    let t = Instant::now();
    for i in 0..5 {
        assert_eq!(https(p.http, &ca1.cert, "GET", "/ping", &[], "").unwrap().status, 200, "request {i}");
    }
    assert!(t.elapsed() < Duration::from_secs(5), "other connections were held up: {:?}", t.elapsed());
    drop(stalled);
}

#[test]
fn reloads_over_http_and_every_bad_set_leaves_the_old_certificate_serving() {
    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let n1 = node_cert(&ca1, "eventstoredb-node", now() - 60, 10);
    let files = Files::new(root.path().join("n"), &ca1, &n1);
    let mut p = single(&files, root.path().join("n.log"));
    let port = p.http;
    let reload = move |ca_pem: &str| https(port, ca_pem, "POST", "/admin/reloadconfig", &[], "").unwrap();

    // Only $admins and $ops may reload.
    let anon = {
        let tcp = TcpStream::connect(("127.0.0.1", p.http)).unwrap();
        let conn = rustls::ClientConnection::new(
            client_config(&ca1.cert, None),
            ServerName::try_from("127.0.0.1").unwrap(),
        )
        .unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        s.write_all(
            b"POST /admin/reloadconfig HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        )
        .unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        String::from_utf8_lossy(&raw).into_owned()
    };
    assert!(anon.starts_with("HTTP/1.1 401"), "{anon}");

    // A keep-alive connection opened before the reload.
    let ca2 = ca();
    let other_key = node_cert(&ca1, "eventstoredb-node", now() - 60, 10);
    let foreign = node_cert(&ca2, "eventstoredb-node", now() - 60, 10);
    let expired = node_cert(&ca1, "eventstoredb-node", now() - 5 * DAY, 2);
    type Breakage<'a> = (&'a str, Box<dyn Fn() + 'a>, &'a str);
    let bad: Vec<Breakage> = vec![
        (
            "malformed PEM",
            Box::new(|| {
                files
                    .put("node.crt", b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n")
            }),
            "malformed",
        ),
        ("not PEM at all", Box::new(|| files.put("node.crt", b"hello")), "neither PEM nor"),
        (
            "a key for another certificate",
            Box::new(|| files.put("node.key", other_key.key.as_bytes())),
            "does not match",
        ),
        (
            "a chain that does not reach the root",
            Box::new(|| {
                files.put("node.crt", foreign.cert.as_bytes());
                files.put("node.key", foreign.key.as_bytes());
            }),
            "partial chain",
        ),
        (
            "an expired certificate",
            Box::new(|| {
                files.put("node.crt", expired.cert.as_bytes());
                files.put("node.key", expired.key.as_bytes());
            }),
            "expired",
        ),
        (
            "junk in the trusted roots directory",
            Box::new(|| {
                files.put_roots(&[("ca.crt", ca1.cert.as_bytes()), ("junk.pem", b"\x00\x01junk")]);
            }),
            "junk.pem",
        ),
        (
            "a root that is not self-signed",
            Box::new(|| {
                files.put_roots(&[("ca.crt", ca1.cert.as_bytes()), ("node.pem", n1.cert.as_bytes())]);
            }),
            "not self-signed",
        ),
        (
            "an empty trusted roots directory",
            Box::new(|| files.put_roots(&[("readme.txt", b"no roots here")])),
            "no root certificate",
        ),
        (
            "a missing key file",
            Box::new(|| std::fs::remove_file(files.dir.join("node.key")).unwrap()),
            "cannot read private key file",
        ),
    ];
    for (what, break_it, says) in bad {
        files.install(&ca1, &n1);
        break_it();
        let r = reload(&ca1.cert);
        assert_eq!(r.status, 500, "{what}: {r:?}");
        assert!(r.head.starts_with("http/1.1 500 certificates not reloaded"), "{what}: {}", r.head);
        assert!(r.body.contains(says), "{what}: {:?} does not say {says:?}", r.body);
        assert_eq!(r.served, thumb(&n1), "{what}");
        let after = https(p.http, &ca1.cert, "GET", "/ping", &[], "").unwrap();
        assert_eq!(after.served, thumb(&n1), "{what}: the old certificate still serves");
        assert!(p.alive(), "{what}");
    }
    assert!(p.log().contains("an error occurred while reloading the certificates"));

    // A good reload: a new CA and a new common name. New connections get it at once.
    let n2 = node_cert(&ca2, "node.esdb.example.org", now() - 60, 10);
    files.install(&ca2, &n2);
    let t = Instant::now();
    let r = reload(&ca1.cert);
    let took = t.elapsed();
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.contains(&thumb(&n2)) && r.body.contains("node.esdb.example.org"), "{}", r.body);
    let after = https(p.http, &ca2.cert, "GET", "/ping", &[], "").unwrap();
    assert_eq!(after.served, thumb(&n2));
    assert!(
        https(p.http, &ca1.cert, "GET", "/ping", &[], "").is_err(),
        "a client of the old CA no longer trusts it"
    );
    eprintln!("reload over HTTP took {took:?}");
}

#[test]
fn sighup_reloads_and_a_bad_set_changes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let n1 = node_cert(&ca1, "eventstoredb-node", now() - 60, 10);
    let files = Files::new(root.path().join("n"), &ca1, &n1);
    let mut p = single(&files, root.path().join("n.log"));
    let hup = |p: &Proc| {
        // SAFETY: sends a signal to the child this test started.
        assert_eq!(unsafe { libc::kill(p.pid(), libc::SIGHUP) }, 0);
    };

    // A bad set: logged, nothing changes, the process lives on.
    files.put("node.key", node_cert(&ca1, "x", now() - 60, 10).key.as_bytes());
    hup(&p);
    wait("the failed reload in the log", Duration::from_secs(10), || {
        p.log().contains("an error occurred while reloading the certificates").then_some(())
    });
    assert!(p.log().contains("SIGHUP"));
    assert!(p.alive());
    assert_eq!(https(p.http, &ca1.cert, "GET", "/ping", &[], "").unwrap().served, thumb(&n1));

    // A good set: new connections use it. Both sets end within 30 days: the log warns of each.
    assert!(p.log().contains("certificates are going to expire in 9 days"), "{}", p.log());
    let n2 = node_cert(&ca1, "eventstoredb-node", now() - 60, 20);
    files.install(&ca1, &n2);
    hup(&p);
    wait("the new certificate to serve", Duration::from_secs(10), || {
        https(p.http, &ca1.cert, "GET", "/ping", &[], "").ok().filter(|r| r.served == thumb(&n2))
    });
    assert!(p.alive());
    assert!(p.log().contains("certificates are going to expire in 19 days"), "{}", p.log());
}

/// A CA and a node certificate in a directory, to load sets from (without a node).
struct LoadCase {
    _root: tempfile::TempDir,
    ca1: Pair,
    n1: Pair,
    files: Files,
    at: rustls::pki_types::UnixTime,
}

impl LoadCase {
    fn new() -> LoadCase {
        let root = tempfile::tempdir().unwrap();
        let ca1 = ca();
        let n1 = node_cert(&ca1, "node1.esdb.example.org", now() - 60, 10);
        let files = Files::new(root.path().join("n"), &ca1, &n1);
        let at = rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(now() as u64));
        LoadCase { _root: root, ca1, n1, files, at }
    }

    /// The directory's certificate, key and roots.
    fn paths(&self) -> annal::tls::CertPaths {
        annal::tls::CertPaths {
            certificate: self.files.dir.join("node.crt"),
            private_key: self.files.dir.join("node.key"),
            trusted_roots: self.files.dir.join("ca"),
            ..Default::default()
        }
    }
}

#[test]
fn load_checks_the_reserved_common_name_and_reads_der_files() {
    let case = LoadCase::new();
    let LoadCase { ca1, n1, files, at, .. } = &case;
    let (disk, at) = (annal::env::real::RealDisk, *at);
    let paths = |reserved: &str| annal::tls::CertPaths { reserved_cn: reserved.into(), ..case.paths() };
    let auto = annal::tls::load::load(&disk, &paths(""), at).unwrap();
    assert_eq!((auto.reserved_cn.as_str(), auto.reserved_auto), ("node1.esdb.example.org", true));
    let wild = annal::tls::load::load(&disk, &paths("*.esdb.example.org"), at).unwrap();
    assert_eq!((wild.reserved_cn.as_str(), wild.reserved_auto), ("*.esdb.example.org", false));
    let e = annal::tls::load::load(&disk, &paths("*.other.example.org"), at).unwrap_err();
    assert!(e.to_string().contains("does not match the reserved node common name"), "{e}");
    // A wildcard CN must equal the reserved name.
    let w = node_cert(ca1, "*.esdb.example.org", now() - 60, 10);
    files.install(ca1, &w);
    assert!(annal::tls::load::load(&disk, &paths("*.esdb.example.org"), at).is_ok());
    assert!(annal::tls::load::load(&disk, &paths("node1.esdb.example.org"), at).is_err());
    // A DER root and a DER node certificate load as their PEM forms do.
    files.put("node.crt", &der(&n1.cert));
    files.put("node.key", n1.key.as_bytes());
    files.put_roots(&[("ca.der", &der(&ca1.cert))]);
    assert!(annal::tls::load::load(&disk, &paths(""), at).is_ok());
    // Not yet valid is refused like expired.
    let later = node_cert(ca1, "n", now() + 2 * DAY, 10);
    files.install(ca1, &later);
    let e = annal::tls::load::load(&disk, &paths(""), at).unwrap_err();
    assert!(e.to_string().contains("not valid"), "{e}");
}

#[test]
fn encrypted_keys_and_pkcs12_bundles_load_with_their_passwords() {
    use pkcs8::der::Decode;
    let case = LoadCase::new();
    let LoadCase { ca1, n1, files, at, .. } = &case;
    let (disk, at) = (annal::env::real::RealDisk, *at);
    let paths = |key_password: &str| annal::tls::CertPaths {
        key_password: annal::tls::load::Password(key_password.into()),
        ..case.paths()
    };
    // An encrypted PKCS #8 key (PBES2: PBKDF2-SHA256, AES-256-CBC).
    let key_der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(n1.key.as_bytes()).unwrap();
    let info = pkcs8::PrivateKeyInfo::from_der(key_der.secret_pkcs8_der()).unwrap();
    let params = pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &[7; 16], &[9; 16]).unwrap();
    let encrypted = info.encrypt_with_params(params, "s3cret").unwrap();
    let pem = encrypted.to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF).unwrap();
    files.put("node.key", pem.as_bytes());
    let set = annal::tls::load::load(&disk, &paths("s3cret"), at).unwrap();
    assert_eq!(set.about.thumbprint, thumb(n1));
    let e = annal::tls::load::load(&disk, &paths(""), at).unwrap_err();
    assert!(e.to_string().contains("set CertificatePrivateKeyPassword"), "{e}");
    let e = annal::tls::load::load(&disk, &paths("wrong"), at).unwrap_err();
    assert!(e.to_string().contains("cannot decrypt the private key"), "{e}");
    // The password is never printed.
    assert!(!format!("{:?}", paths("s3cret")).contains("s3cret"));

    // A PKCS #12 bundle (node certificate, then the root, which is left out) without a key file.
    let chain = [der(&n1.cert), der(&ca1.cert)]
        .iter()
        .map(|c| p12_keystore::Certificate::from_der(c).unwrap())
        .collect::<Vec<_>>();
    let mut store = p12_keystore::KeyStore::new();
    let entry = p12_keystore::PrivateKeyChain::new(key_der.secret_pkcs8_der(), [1u8; 20], chain);
    store.add_entry("node", p12_keystore::KeyStoreEntry::PrivateKeyChain(entry));
    files.put("node.p12", &store.writer("bundle-pw").write().unwrap());
    let bundle = |password: &str| annal::tls::CertPaths {
        certificate: files.dir.join("node.p12"),
        trusted_roots: files.dir.join("ca"),
        bundle_password: annal::tls::load::Password(password.into()),
        ..Default::default()
    };
    let set = annal::tls::load::load(&disk, &bundle("bundle-pw"), at).unwrap();
    assert_eq!((set.about.thumbprint.as_str(), set.chain.len()), (thumb(n1).as_str(), 1));
    let e = annal::tls::load::load(&disk, &bundle("nope"), at).unwrap_err();
    assert!(e.to_string().contains("wrong CertificatePassword"), "{e}");
    // A PEM certificate without a key file is not a bundle: the error says what to set.
    files.put("node.crt", n1.cert.as_bytes());
    let pem_only = annal::tls::CertPaths { certificate: files.dir.join("node.crt"), ..bundle("") };
    let e = annal::tls::load::load(&disk, &pem_only, at).unwrap_err();
    assert!(e.to_string().contains("set CertificatePrivateKeyFile too"), "{e}");
}

#[test]
fn backup_asks_a_tls_node_over_https() {
    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let n1 = node_cert(&ca1, "eventstoredb-node", now() - 60, 10);
    let files = Files::new(root.path().join("certs"), &ca1, &n1);
    let http = free_port();
    let db = root.path().join("db");
    let mut args = vec!["--db".into(), db.display().to_string(), "--http-port".into(), http.to_string()];
    args.extend(files.args());
    let p = Proc::spawn(args, http, root.path().join("node.log"));
    wait("the node to serve HTTPS", Duration::from_secs(20), || {
        https(p.http, &ca1.cert, "GET", "/ping", &[], "").ok().filter(|r| r.status == 200)
    });
    for n in 0..5 {
        assert_eq!(append(p.http, &ca1.cert, "backed-up", n).unwrap().status, 201);
    }
    let ca_file = files.dir.join("ca").join("ca.crt");
    let backup = |to: &str, extra: &[String]| {
        let mut args: Vec<String> = ["backup", "--quiet", "--db"].iter().map(|s| s.to_string()).collect();
        args.push(db.display().to_string());
        args.push("--to".into());
        args.push(root.path().join(to).display().to_string());
        args.extend(extra.iter().cloned());
        Command::new(env!("CARGO_BIN_EXE_annal")).args(args).output().unwrap()
    };
    let url = format!("https://127.0.0.1:{http}");
    let ok = backup(
        "b1",
        &["--url".into(), url.clone(), "--ca-certificate".into(), ca_file.display().to_string()],
    );
    let text = |o: &std::process::Output| {
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    };
    assert!(ok.status.success(), "{}", text(&ok));
    // Without the CA: a usage error that says what to pass; with another CA: the handshake fails.
    let no_ca = backup("b2", &["--url".into(), url.clone()]);
    assert_eq!(no_ca.status.code(), Some(2), "{}", text(&no_ca));
    assert!(text(&no_ca).contains("needs --ca-certificate"), "{}", text(&no_ca));
    let other = ca();
    let other_file = root.path().join("other-ca.crt");
    std::fs::write(&other_file, &other.cert).unwrap();
    let refused =
        backup("b3", &["--url".into(), url, "--ca-certificate".into(), other_file.display().to_string()]);
    assert!(!refused.status.success());
    assert!(text(&refused).contains("partial chain"), "{}", text(&refused));
    let verify = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["backup", "verify", &root.path().join("b1").display().to_string()])
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", text(&verify));
}

/// Three nodes on loopback over mutual TLS.
fn cluster(root: &Path, ca: &Pair, reset_ms: u64) -> (Vec<Proc>, Vec<Files>, Vec<u16>) {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let mut procs = Vec::new();
    let mut all = Vec::new();
    for (i, (http, repl)) in ports.iter().enumerate() {
        let seeds: Vec<String> =
            ports.iter().filter(|(_, r)| r != repl).map(|(_, r)| format!("127.0.0.1:{r}")).collect();
        let files = Files::new(
            root.join(format!("certs{i}")),
            ca,
            &node_cert(ca, "eventstoredb-node", now() - 60, 10),
        );
        let mut args: Vec<String> = vec![
            "--db".into(),
            root.join(format!("node{i}")).display().to_string(),
            "--http-port".into(),
            http.to_string(),
            "--replication-port".into(),
            repl.to_string(),
            "--cluster-size".into(),
            "3".into(),
            "--gossip-seed".into(),
            seeds.join(","),
            "--chunk-size".into(),
            (1 << 20).to_string(),
            "--node-connection-reset-interval-ms".into(),
            reset_ms.to_string(),
        ];
        args.extend(files.args());
        procs.push(Proc::spawn(args, *http, root.join(format!("node{i}.log"))));
        all.push(files);
    }
    (procs, all, ports.iter().map(|p| p.1).collect())
}

fn master(procs: &[Proc], ca_pem: &str) -> usize {
    wait("a leader", Duration::from_secs(30), || {
        let masters: Vec<usize> = (0..procs.len())
            .filter(|&i| {
                https(procs[i].http, ca_pem, "GET", "/info", &[], "")
                    .ok()
                    .and_then(|r| serde_json::from_str::<serde_json::Value>(&r.body).ok())
                    .is_some_and(|v| v["state"] == "master")
            })
            .collect();
        let ready = |i: usize| {
            https(procs[i].http, ca_pem, "GET", "/users/admin", &[], "").is_ok_and(|r| r.status == 200)
        };
        (masters.len() == 1 && ready(masters[0])).then(|| masters[0])
    })
}

fn count(port: u16, ca_pem: &str, stream: &str) -> Option<usize> {
    let r = https(
        port,
        ca_pem,
        "GET",
        &format!("/streams/{stream}/0/forward/4096"),
        &[("Accept", "application/json")],
        "",
    )
    .ok()?;
    if r.status == 404 {
        return Some(0);
    }
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    Some(v["entries"].as_array()?.len())
}

/// Appends `n` more events through the leader and waits until every node serves `total`.
fn replicate(procs: &[Proc], ca_pem: &str, stream: &str, from: usize, total: usize) {
    let m = master(procs, ca_pem);
    for i in from..total {
        let r = wait("an append", Duration::from_secs(20), || {
            append(procs[m].http, ca_pem, stream, i).ok().filter(|r| r.status == 201)
        });
        assert!(r.head.contains("location: https://"), "{}", r.head);
    }
    for p in procs {
        wait(&format!("{total} events on :{}", p.http), Duration::from_secs(20), || {
            count(p.http, ca_pem, stream).filter(|&c| c >= total)
        });
    }
}

#[test]
fn a_cluster_over_mutual_tls_refuses_other_cas_and_rolls_to_new_certificates() {
    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let (procs, files, repl) = cluster(root.path(), &ca1, 2000);
    replicate(&procs, &ca1.cert, "s", 0, 3);
    let g = https(procs[0].http, &ca1.cert, "GET", "/gossip", &[("Accept", "application/json")], "").unwrap();
    let g: serde_json::Value = serde_json::from_str(&g.body).unwrap();
    let mut secure: Vec<u64> = g["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["internalSecureTcpPort"].as_u64().unwrap())
        .collect();
    secure.sort_unstable();
    let mut want: Vec<u64> = repl.iter().map(|&p| p as u64).collect();
    want.sort_unstable();
    assert_eq!(secure, want, "gossip lists the replication endpoints as secure ports");
    assert!(g["members"].as_array().unwrap().iter().all(|m| m["internalTcpPort"] == 0));

    // A peer whose certificate another CA issued is refused ("partial chain"), and so is one of
    // the right CA with another common name.
    let ca_x = ca();
    for (who, client, says) in [
        ("another CA", node_cert(&ca_x, "eventstoredb-node", now() - 60, 10), "partial chain"),
        (
            "another CN",
            node_cert(&ca1, "intruder", now() - 60, 10),
            "does not match the reserved node common name",
        ),
    ] {
        let tcp = TcpStream::connect(("127.0.0.1", repl[0])).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let conn = rustls::ClientConnection::new(
            client_config(&ca1.cert, Some(&client)),
            ServerName::try_from("127.0.0.1").unwrap(),
        )
        .unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let _ = s.write_all(b"\0\0\0\0");
        let mut buf = [0u8; 16];
        let read = s.read(&mut buf);
        assert!(!matches!(read, Ok(n) if n > 0), "{who}: the node talked to it");
        wait(&format!("the refusal of {who} in the log"), Duration::from_secs(5), || {
            procs[0].log().contains(says).then_some(())
        });
    }

    // Rolling update: a new CA and a new common name, node by node. A node that rolled alone
    // cannot talk to the others once its connections reset; after the last one, the cluster
    // converges.
    let ca2 = ca();
    let roll = |i: usize| {
        files[i].install(&ca2, &node_cert(&ca2, "node.esdb.example.org", now() - 60, 10));
        let r = https(procs[i].http, &ca1.cert, "POST", "/admin/reloadconfig", &[], "").unwrap();
        assert_eq!(r.status, 200, "{r:?}");
    };
    let refusals = || procs.iter().map(|p| p.log().matches("partial chain").count()).sum::<usize>();
    let before = refusals();
    roll(0);
    wait("a node that rolled alone to be refused by the others", Duration::from_secs(15), || {
        (refusals() > before).then_some(())
    });
    roll(1);
    roll(2);
    replicate(&procs, &ca2.cert, "s", 3, 6);
}

/// The wrapper the cluster establishes its connections through: both ends authenticate, frames
/// flow, and the connection fails once its reset interval has passed (the cluster then dials
/// again with the certificates in force).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_connections_authenticate_both_ends_and_expire_at_the_reset_interval() {
    use annal::tls::peer::{accept, connect, Transport};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let env = annal::env::real::env();
    let tls_of = |dir: &str, node: &Pair, ca: &Pair, reset: Duration| {
        let files = Files::new(root.path().join(dir), ca, node);
        let settings = annal::tls::TlsSettings {
            paths: annal::tls::CertPaths {
                certificate: files.dir.join("node.crt"),
                private_key: files.dir.join("node.key"),
                trusted_roots: files.dir.join("ca"),
                reserved_cn: String::new(),
                ..Default::default()
            },
            peer_reset: reset,
        };
        Transport::Tls(annal::tls::Tls::load(&env, Arc::new(annal::env::real::RealDisk), settings).unwrap())
    };
    let reset = Duration::from_millis(400);
    let a = tls_of("a", &node_cert(&ca1, "eventstoredb-node", now() - 60, 10), &ca1, reset);
    let b = tls_of("b", &node_cert(&ca1, "eventstoredb-node", now() - 60, 10), &ca1, reset);
    let ca_x = ca();
    let x = tls_of("x", &node_cert(&ca_x, "eventstoredb-node", now() - 60, 10), &ca_x, reset);

    let mut listener = env.net.listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (server_env, server_a) = (env.clone(), a.clone());
    let server = tokio::spawn(async move {
        let mut outcomes = Vec::new();
        for _ in 0..4 {
            let (conn, peer) = listener.accept().await.unwrap();
            outcomes.push(match accept(&server_env, &server_a, conn, peer).await {
                Ok(mut c) => {
                    let mut buf = [0u8; 5];
                    c.read_exact(&mut buf).await.unwrap();
                    c.write_all(&buf).await.unwrap();
                    c.flush().await.unwrap();
                    // Waits past the reset interval: the read fails rather than waiting forever.
                    let t = Instant::now();
                    let r = c.read(&mut buf).await;
                    Ok((r.map_err(|e| e.kind()), t.elapsed()))
                }
                Err(e) => Err(e.to_string()),
            });
        }
        outcomes
    });

    // The right CA: an echo, then the connection expires on both sides. Whichever side's
    // interval runs out first ends it (TimedOut there); the other side then sees it closed
    // (UnexpectedEof, or a clean end) unless its own interval ran out as well. On a busy machine
    // either side may be first.
    let mut c = connect(&env, &b, addr, None).await.unwrap();
    let connected = Instant::now();
    c.write_all(b"hello").await.unwrap();
    c.flush().await.unwrap();
    let mut echo = [0u8; 5];
    c.read_exact(&mut echo).await.unwrap();
    assert_eq!(&echo, b"hello");
    let t = Instant::now();
    let client_end = ended(c.read(&mut echo).await.map_err(|e| e.kind()));
    assert!(t.elapsed() < Duration::from_secs(5));
    // Past this side's own interval, its writes fail too (not only reads).
    if let Some(rest) = (reset + Duration::from_millis(50)).checked_sub(connected.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    assert!(c.write_all(b"more").await.is_err(), "writes fail after the reset interval too");

    // Another CA: refused at the dialling side (the server's certificate does not chain), and at
    // the accepting side.
    let refused = connect(&env, &x, addr, None).await.err().expect("a node of another CA was accepted");
    assert!(refused.to_string().contains("partial chain"), "{refused}");
    // Found through DNS: the certificate must carry the cluster's name (here `localhost`), not
    // the address dialled.
    let mut named =
        connect(&env, &b, addr, Some("localhost")).await.expect("the name the certificate carries");
    named.write_all(b"named").await.unwrap();
    named.flush().await.unwrap();
    named.read_exact(&mut echo).await.unwrap();
    assert_eq!(&echo, b"named");
    drop(named);
    let wrong =
        connect(&env, &b, addr, Some("annal.example")).await.err().expect("a name the certificate lacks");
    assert!(wrong.to_string().contains("certificate"), "{wrong}");
    let outcomes = server.await.unwrap();
    let (r, waited) = *outcomes[0].as_ref().unwrap();
    let server_end = ended(r);
    assert!(waited < Duration::from_secs(5));
    use std::io::ErrorKind::{TimedOut, UnexpectedEof};
    let ends = [client_end, server_end];
    assert!(ends.iter().all(|e| matches!(e, Some(TimedOut | UnexpectedEof))), "{ends:?}");
    assert!(ends.contains(&Some(TimedOut)), "neither side's interval ended the connection: {ends:?}");
    assert!(outcomes[1].is_err(), "{:?}", outcomes[1]);
    assert!(outcomes[2].is_ok(), "{:?}", outcomes[2]);
    assert!(outcomes[3].is_err(), "{:?}", outcomes[3]);
}

/// How a read that waited on an idle connection ended: an error's kind, a clean end of the
/// stream as `UnexpectedEof`, `None` when it read data.
fn ended(r: Result<usize, std::io::ErrorKind>) -> Option<std::io::ErrorKind> {
    match r {
        Ok(0) => Some(std::io::ErrorKind::UnexpectedEof),
        Ok(_) => None,
        Err(k) => Some(k),
    }
}

/// The independent client CI installs (`geteventstore-promise`, npm) drives the node over HTTPS,
/// validating its certificate against the CA. Needs `node` and the package (see
/// `tests/http_client.rs`): ignored outside CI (`CI=true` runs it, where their absence fails it).
#[test]
#[cfg_attr(
    not(annal_ci),
    ignore = "needs `node` and the npm package geteventstore-promise (.ci/run installs them; CI=true runs this)"
)]
fn geteventstore_promise_drives_the_node_over_https() {
    let root_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let modules = std::env::var_os("JS_CLIENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root_dir.join("target/clients"))
        .join("node_modules");
    let node_ok = Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(
        node_ok && modules.join("geteventstore-promise").is_dir(),
        "needs `node` and geteventstore-promise in {} (npm install --prefix target/clients --no-audit --no-fund geteventstore-promise@4.0.1)",
        modules.display()
    );
    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let files =
        Files::new(root.path().join("n"), &ca1, &node_cert(&ca1, "eventstoredb-node", now() - 60, 10));
    let p = single(&files, root.path().join("n.log"));
    let out = Command::new("node")
        .arg(root_dir.join("tests/clients/geteventstore.js"))
        .args(["127.0.0.1", &p.http.to_string(), "https"])
        .env("NODE_PATH", &modules)
        .env("NODE_EXTRA_CA_CERTS", files.dir.join("ca").join("ca.crt"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("OK"), "client failed:\n{stdout}\n{stderr}");
}

/// A reload reads the YAML configuration file again: a changed
/// `CertificateReservedNodeCommonName` takes effect with the certificate it admits.
#[test]
fn a_reload_honours_a_changed_reserved_common_name_in_the_config_file() {
    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let a = node_cert(&ca1, "a.esdb.example.org", now() - 60, 10);
    let files = Files::new(root.path().join("n"), &ca1, &a);
    let yaml = root.path().join("annal.yaml");
    let write_yaml = |reserved: &str| {
        let text = format!(
            "CertificateFile: {}\nCertificatePrivateKeyFile: {}\nTrustedRootCertificatesPath: {}\nCertificateReservedNodeCommonName: \"{reserved}\"\n",
            files.dir.join("node.crt").display(),
            files.dir.join("node.key").display(),
            files.dir.join("ca").display()
        );
        std::fs::write(&yaml, text).unwrap();
    };
    write_yaml("*.esdb.example.org");
    let http = free_port();
    let args = vec![
        "--mem-db".into(),
        "--http-port".into(),
        http.to_string(),
        "--config".into(),
        yaml.display().to_string(),
    ];
    let p = Proc::spawn(args, http, root.path().join("n.log"));
    wait("the node to serve HTTPS", Duration::from_secs(20), || {
        https(p.http, &ca1.cert, "GET", "/ping", &[], "").ok().filter(|r| r.status == 200)
    });
    let reload = || https(p.http, &ca1.cert, "POST", "/admin/reloadconfig", &[], "").unwrap();

    // A certificate with another name is refused under the reserved name in force…
    let b = node_cert(&ca1, "b.other.example.org", now() - 60, 10);
    files.install(&ca1, &b);
    let r = reload();
    assert_eq!(r.status, 500, "{r:?}");
    assert!(r.body.contains("does not match the reserved node common name"), "{}", r.body);
    assert_eq!(https(p.http, &ca1.cert, "GET", "/ping", &[], "").unwrap().served, thumb(&a));
    // …and admitted once the file names a reserved name that matches it.
    write_yaml("*.other.example.org");
    let r = reload();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(https(p.http, &ca1.cert, "GET", "/ping", &[], "").unwrap().served, thumb(&b));
    // A file that no longer parses changes nothing.
    std::fs::write(&yaml, "CertificateFile: [unterminated").unwrap();
    let r = reload();
    assert_eq!(r.status, 500, "{r:?}");
    assert!(r.body.contains("cannot read the configuration again"), "{}", r.body);
    assert_eq!(https(p.http, &ca1.cert, "GET", "/ping", &[], "").unwrap().served, thumb(&b));
}

/// `annal healthcheck` finds its node from the node's own options (here the environment of a
/// container: `ANNAL_*` variables) and asks it over HTTPS without credentials: 0 while it
/// lives, 1 once it is gone.
#[test]
fn the_healthcheck_asks_its_node_over_https_from_the_nodes_own_options() {
    let root = tempfile::tempdir().unwrap();
    let ca1 = ca();
    let n1 = node_cert(&ca1, "eventstoredb-node", now() - 60, 10);
    let files = Files::new(root.path().join("n"), &ca1, &n1);
    let mut p = single(&files, root.path().join("n.log"));
    let a = files.args();
    let vars = [
        ("ANNAL_HTTP_PORT", p.http.to_string()),
        ("ANNAL_CERTIFICATE_FILE", a[1].clone()),
        ("ANNAL_CERTIFICATE_PRIVATE_KEY_FILE", a[3].clone()),
        ("ANNAL_TRUSTED_ROOT_CERTIFICATES_PATH", a[5].clone()),
    ];
    let check = || {
        Command::new(env!("CARGO_BIN_EXE_annal"))
            .arg("healthcheck")
            .envs(vars.iter().cloned())
            .output()
            .unwrap()
    };
    let out = check();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Plain HTTP to a TLS node is no answer.
    let plain = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["healthcheck", "--timeout", "2", "--url", &format!("http://127.0.0.1:{}", p.http)])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(1));
    if let Some(mut c) = p.child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert!(!p.alive());
    let out = check();
    assert_eq!(out.status.code(), Some(1), "a stopped node is not live");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the node"));
}
