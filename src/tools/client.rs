//! A client of a node's HTTP API for the command-line tools (`annal backup`, `annal
//! healthcheck`, `annal cluster rolling-restart`): one request per connection, over the `Env`
//! network (so it also runs in the simulator and against in-memory nodes), plain or HTTPS,
//! with basic credentials and a deadline.
//!
//! Invariants: a request either returns the node's whole reply (status and body, chunked bodies
//! joined) or an error that says which node and why; it never waits past its deadline. HTTPS
//! checks the node's certificate against the roots given and the host dialled, except for the
//! loopback liveness probe ([`HttpsTarget::unverified`]), which sends no credentials.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::env::Env;

/// A node's URL as a tool is given it: `http(s)://host[:port]` (the port defaults to 2113).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The host as written (a DNS name or an IP address, without brackets).
    pub host: String,
    /// The port.
    pub port: u16,
    /// Whether the node speaks TLS.
    pub https: bool,
}

impl Endpoint {
    /// Parses `url`; a path after the host is ignored.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let (https, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (false, rest),
            (None, Some(rest)) => (true, rest),
            (None, None) => return Err(format!("{url}: only http:// and https:// URLs")),
        };
        let hostport = rest.split('/').next().unwrap_or(rest);
        // `host:port`, `host`, `[v6]:port` or `[v6]`.
        let (host, port) = match hostport.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((h, "")) => (h, None),
                Some((h, p)) => (h, Some(p.strip_prefix(':').ok_or_else(|| format!("{url}: bad address"))?)),
                None => return Err(format!("{url}: unclosed [")),
            },
            None => match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            },
        };
        if host.is_empty() {
            return Err(format!("{url}: no host"));
        }
        let port = match port {
            None => 2113,
            Some(p) => {
                p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| format!("{url}: bad port {p}"))?
            }
        };
        Ok(Endpoint { host: host.to_string(), port, https })
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        match self.host.contains(':') {
            true => write!(f, "{scheme}://[{}]:{}", self.host, self.port),
            false => write!(f, "{scheme}://{}:{}", self.host, self.port),
        }
    }
}

/// HTTPS to a node: the TLS settings and the name its certificate must carry.
#[derive(Clone)]
pub struct HttpsTarget {
    config: Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
}

impl HttpsTarget {
    /// Trusts the PEM certificates of `roots` (read through the Env's disk) for a node reached
    /// as `host` (a DNS name or an IP address); certificates are checked against the Env clock.
    pub fn new(env: &Env, roots: &std::path::Path, host: &str) -> Result<HttpsTarget, String> {
        use rustls::pki_types::pem::PemObject;
        let pem = env.read_file(roots).map_err(|e| format!("cannot read {}: {e}", roots.display()))?;
        let mut store = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("{} is not PEM: {e}", roots.display()))?;
            store.add(cert).map_err(|e| format!("{}: {e}", roots.display()))?;
        }
        if store.is_empty() {
            return Err(format!("{} holds no CERTIFICATE", roots.display()));
        }
        let time = Arc::new(crate::tls::EnvTime(env.clock.clone()));
        let config = rustls::ClientConfig::builder_with_details(crate::tls::provider(), time)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| e.to_string())?
            .with_root_certificates(store)
            .with_no_client_auth();
        Ok(HttpsTarget { config: Arc::new(config), name: server_name(host)? })
    }

    /// HTTPS that accepts whatever certificate the node presents: only for `annal healthcheck`,
    /// which asks its own node on the loopback address whether it lives, sends no credentials
    /// and reads nothing but the status.
    pub fn unverified(host: &str) -> Result<HttpsTarget, String> {
        let config = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate))
            .with_no_client_auth();
        Ok(HttpsTarget { config: Arc::new(config), name: server_name(host)? })
    }
}

fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, String> {
    rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host} is not a host name or address: {e}"))
}

/// Accepts any certificate (signatures still checked): [`HttpsTarget::unverified`].
#[derive(Debug)]
struct AnyCertificate;

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = crate::tls::provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, &algs)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = crate::tls::provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, &algs)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        crate::tls::provider().signature_verification_algorithms.supported_schemes()
    }
}

/// A reply: status and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The body (chunks joined), as text.
    pub body: String,
}

/// Why a request got no reply.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The node could not be reached (resolved, connected to, written to or read from).
    #[error("cannot reach the node at {0}: {1}")]
    Unreachable(String, std::io::Error),
    /// The TLS handshake failed.
    #[error("the TLS handshake with the node at {0} failed: {1}")]
    Tls(String, String),
    /// What came back is not an HTTP reply.
    #[error("the node at {0} sent a reply that is not HTTP")]
    NotHttp(String),
    /// No whole reply within the deadline.
    #[error("the node at {0} did not answer {1} in time")]
    Timeout(String, String),
}

/// One node's HTTP API.
#[derive(Clone)]
pub struct NodeClient {
    env: Env,
    host: String,
    port: u16,
    authorization: Option<String>,
    timeout: Duration,
    tls: Option<HttpsTarget>,
}

impl NodeClient {
    /// A client of `host:port` (plain HTTP, no credentials, a 30 s deadline).
    pub fn new(env: Env, host: &str, port: u16) -> NodeClient {
        NodeClient {
            env,
            host: host.to_string(),
            port,
            authorization: None,
            timeout: Duration::from_secs(30),
            tls: None,
        }
    }

    /// Sends basic credentials.
    pub fn with_credentials(mut self, user: &str, password: &str) -> NodeClient {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.authorization = Some(format!("Basic {token}"));
        self
    }

    /// Gives each request `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> NodeClient {
        self.timeout = timeout;
        self
    }

    /// Speaks HTTPS.
    pub fn with_tls(mut self, tls: HttpsTarget) -> NodeClient {
        self.tls = Some(tls);
        self
    }

    /// The same client for another node (same credentials, deadline and TLS roots; the
    /// certificate must carry `host`).
    pub fn to(&self, host: &str, port: u16) -> Result<NodeClient, String> {
        let mut c = self.clone();
        c.host = host.to_string();
        c.port = port;
        if let Some(t) = &mut c.tls {
            t.name = server_name(host)?;
        }
        Ok(c)
    }

    /// `host:port` as the node is named in messages.
    pub fn target(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }

    /// Whether a connection to the node can be opened.
    pub async fn reachable(&self) -> bool {
        match self.address().await {
            Ok(addr) => self.env.net.connect(addr).await.is_ok(),
            Err(_) => false,
        }
    }

    async fn address(&self) -> std::io::Result<std::net::SocketAddr> {
        let ips = self.env.net.resolve(&self.host).await?;
        let ip = ips.first().copied().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("{} has no addresses", self.host))
        })?;
        Ok(std::net::SocketAddr::new(ip, self.port))
    }

    /// Sends `method path` with `body` (JSON when not empty) and reads the whole reply.
    pub async fn request(&self, method: &str, path: &str, body: &str) -> Result<Reply, ClientError> {
        let target = self.target();
        let unreachable = |e: std::io::Error| ClientError::Unreachable(target.clone(), e);
        let fut = async {
            let addr = self.address().await.map_err(unreachable)?;
            let conn = self.env.net.connect(addr).await.map_err(unreachable)?;
            let mut head =
                format!("{method} {path} HTTP/1.1\r\nHost: {target}\r\nAccept: application/json\r\n");
            if let Some(a) = &self.authorization {
                head.push_str(&format!("Authorization: {a}\r\n"));
            }
            if !body.is_empty() {
                head.push_str("Content-Type: application/json\r\n");
            }
            head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()));
            let raw = match &self.tls {
                None => exchange(conn, head.as_bytes()).await.map_err(unreachable)?,
                Some(t) => {
                    let tls = tokio_rustls::TlsConnector::from(t.config.clone())
                        .connect(t.name.clone(), conn)
                        .await
                        .map_err(|e| {
                            let reason = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                                Some(r) => crate::tls::load::chain_reason(r),
                                None => e.to_string(),
                            };
                            ClientError::Tls(target.clone(), reason)
                        })?;
                    exchange(tls, head.as_bytes()).await.map_err(unreachable)?
                }
            };
            parse_reply(&raw).ok_or_else(|| ClientError::NotHttp(target.clone()))
        };
        let sleep = self.env.rt.sleep(self.timeout);
        tokio::select! {
            biased;
            r = fut => r,
            () = sleep => Err(ClientError::Timeout(self.target(), format!("{method} {path}"))),
        }
    }
}

/// Sends `head` and reads until the node closes. A TLS peer that closes without its
/// close-notify after a whole reply still gave that reply.
async fn exchange<S>(mut conn: S, head: &[u8]) -> std::io::Result<Vec<u8>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    conn.write_all(head).await?;
    conn.flush().await?;
    let mut raw = Vec::new();
    match conn.read_to_end(&mut raw).await {
        Ok(_) => Ok(raw),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && parse_reply(&raw).is_some() => Ok(raw),
        Err(e) => Err(e),
    }
}

fn parse_reply(raw: &[u8]) -> Option<Reply> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let mut body = raw[split + 4..].to_vec();
    if head.lines().any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding: chunked")) {
        body = dechunk(&body)?;
    }
    Some(Reply { status, body: String::from_utf8_lossy(&body).into_owned() })
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&b[..eol]).ok()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(eol + 2..eol + 2 + size)?);
        b = b.get(eol + 4 + size..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_plain_and_chunked() {
        let r = parse_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "{}"));
        let r =
            parse_reply(b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "abc"));
        assert!(parse_reply(b"SSH-2.0-OpenSSH\r\n").is_none());
    }

    #[test]
    fn urls_name_a_scheme_a_host_and_a_port() {
        let e = |host: &str, port, https| Endpoint { host: host.into(), port, https };
        assert_eq!(Endpoint::parse("http://127.0.0.1:2113").unwrap(), e("127.0.0.1", 2113, false));
        assert_eq!(Endpoint::parse("https://node1.annal/x").unwrap(), e("node1.annal", 2113, true));
        assert_eq!(Endpoint::parse("http://[::1]:2200").unwrap(), e("::1", 2200, false));
        assert_eq!(Endpoint::parse("https://[fd00::2]").unwrap(), e("fd00::2", 2113, true));
        assert_eq!(Endpoint::parse("http://[::1]:2200").unwrap().to_string(), "http://[::1]:2200");
        for bad in ["ftp://x", "http://", "http://x:0", "http://x:http", "http://[::1", "http://[::1]x"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
