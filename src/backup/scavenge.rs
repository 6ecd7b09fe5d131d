//! Keeping scavenges out of a backup: files must not be copied while a scavenge runs, so the
//! backup asks the node to stop a running scavenge first and to resume it afterwards.
//!
//! [`ScavengeControl`] is what the backup procedure needs; [`HttpScavenge`] asks a node over its
//! HTTP API (`GET /admin/scavenge/current`, `DELETE /admin/scavenge/{id}`, which answers once the
//! run has stopped at a checkpoint, and `POST /admin/scavenge`, which resumes from that
//! checkpoint), through [`crate::env::Net`], so it also runs in the simulator. A node that serves
//! TLS is asked over HTTPS ([`HttpsTarget`]): its certificate must chain to the roots given and
//! carry the host name or address dialled.
//!
//! Invariant: a scavenge this module stopped is resumed by [`ScavengeControl::resume`] and by
//! nothing else; a failure to reach the node is an error, never taken for "no scavenge runs".

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::env::{BoxFuture, Env};

use super::BackupError;

/// Stops and resumes a node's scavenge for the length of a backup.
pub trait ScavengeControl: Send {
    /// Stops the running scavenge, if any, and returns its id once it has stopped.
    fn stop_running(&mut self) -> BoxFuture<'_, Result<Option<String>, BackupError>>;
    /// Resumes a scavenge stopped by [`ScavengeControl::stop_running`]; returns the new run's id.
    fn resume(&mut self) -> BoxFuture<'_, Result<String, BackupError>>;
}

/// A node's HTTP API, with credentials of a user in `$ops` or `$admins`.
pub struct HttpScavenge {
    env: Env,
    addr: SocketAddr,
    authorization: String,
    timeout: Duration,
    tls: Option<HttpsTarget>,
}

/// HTTPS to a node: the roots its certificate must chain to, and the name it must carry.
pub struct HttpsTarget {
    config: Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
}

impl HttpsTarget {
    /// Trusts the PEM certificates of `roots` (read through the Env's disk) for a node reached
    /// as `host` (a DNS name or an IP address); certificates are checked against the Env clock.
    pub fn new(env: &Env, roots: &Path, host: &str) -> Result<HttpsTarget, String> {
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
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| format!("{host} is not a host name or address: {e}"))?;
        let time = Arc::new(crate::tls::EnvTime(env.clock.clone()));
        let config = rustls::ClientConfig::builder_with_details(crate::tls::provider(), time)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| e.to_string())?
            .with_root_certificates(store)
            .with_no_client_auth();
        Ok(HttpsTarget { config: Arc::new(config), name })
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

/// A reply: status and body.
struct Reply {
    status: u16,
    body: String,
}

impl HttpScavenge {
    /// A client of the node at `addr`.
    pub fn new(env: Env, addr: SocketAddr, user: &str, password: &str) -> HttpScavenge {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        HttpScavenge {
            env,
            addr,
            authorization: format!("Basic {token}"),
            timeout: Duration::from_secs(300),
            tls: None,
        }
    }

    /// Speaks HTTPS to the node.
    pub fn with_tls(mut self, tls: HttpsTarget) -> HttpScavenge {
        self.tls = Some(tls);
        self
    }

    /// Whether the node answers at all (a connection can be opened).
    pub async fn reachable(&self) -> bool {
        self.env.net.connect(self.addr).await.is_ok()
    }

    async fn request(&self, method: &str, path: &str) -> Result<Reply, BackupError> {
        let unreachable = |e: std::io::Error| {
            BackupError::Scavenge(format!("cannot reach the node at {} to control scavenges: {e}", self.addr))
        };
        let fut = async {
            let conn = self.env.net.connect(self.addr).await.map_err(unreachable)?;
            let head = format!(
                "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nAccept: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.addr, self.authorization
            );
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
                            BackupError::Scavenge(format!(
                                "the TLS handshake with the node at {} failed: {reason} (check --ca-certificate and the host in --url)",
                                self.addr
                            ))
                        })?;
                    exchange(tls, head.as_bytes()).await.map_err(unreachable)?
                }
            };
            parse_reply(&raw).ok_or_else(|| {
                BackupError::Scavenge(format!("the node at {} sent a reply that is not HTTP", self.addr))
            })
        };
        let sleep = self.env.rt.sleep(self.timeout);
        tokio::select! {
            biased;
            r = fut => r,
            () = sleep => Err(BackupError::Scavenge(format!("the node at {} did not answer {method} {path} in time", self.addr))),
        }
    }

    fn refused(&self, what: &str, r: &Reply) -> BackupError {
        let hint = if r.status == 401 {
            " (the user must be in $ops or $admins: check --user/--password)"
        } else {
            ""
        };
        BackupError::Scavenge(format!("{what}: the node answered {} {}{hint}", r.status, r.body.trim()))
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

fn scavenge_id(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v.get("scavengeId").and_then(|s| s.as_str()).map(str::to_string)
}

impl ScavengeControl for HttpScavenge {
    fn stop_running(&mut self) -> BoxFuture<'_, Result<Option<String>, BackupError>> {
        Box::pin(async move {
            let r = self.request("GET", "/admin/scavenge/current").await?;
            if r.status != 200 {
                return Err(self.refused("asking for the running scavenge", &r));
            }
            let id = scavenge_id(&r.body).ok_or_else(|| {
                BackupError::Scavenge(format!("unexpected reply to GET /admin/scavenge/current: {}", r.body))
            })?;
            if id.is_empty() {
                return Ok(None);
            }
            let r = self.request("DELETE", &format!("/admin/scavenge/{id}")).await?;
            match r.status {
                200 => Ok(Some(id)),
                // It finished between the two requests.
                404 => Ok(None),
                _ => Err(self.refused(&format!("stopping scavenge {id}"), &r)),
            }
        })
    }

    fn resume(&mut self) -> BoxFuture<'_, Result<String, BackupError>> {
        Box::pin(async move {
            let r = self.request("POST", "/admin/scavenge").await?;
            if r.status != 200 {
                return Err(self.refused("resuming the scavenge", &r));
            }
            scavenge_id(&r.body).ok_or_else(|| {
                BackupError::Scavenge(format!("unexpected reply to POST /admin/scavenge: {}", r.body))
            })
        })
    }
}

/// For a node that is not running (its lock was taken): nothing to stop or resume.
pub struct NoNode;

impl ScavengeControl for NoNode {
    fn stop_running(&mut self) -> BoxFuture<'_, Result<Option<String>, BackupError>> {
        Box::pin(async { Ok(None) })
    }
    fn resume(&mut self) -> BoxFuture<'_, Result<String, BackupError>> {
        Box::pin(async { Err(BackupError::Scavenge("no node to resume a scavenge on".into())) })
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
        assert!(parse_reply(b"garbage").is_none());
        assert_eq!(scavenge_id(r#"{"scavengeId":"x","scavengeLink":""}"#).as_deref(), Some("x"));
    }
}
