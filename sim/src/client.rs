//! An HTTP/1.1 client (hyper) over `turmoil::net::TcpStream`, plain or over TLS (the node's
//! certificate checked against the roots given, for the address dialled), with a per-request
//! timeout in simulated time and one kept-alive connection that is dropped after any failure.
//!
//! Invariant: [`Failure::NotSent`] is returned only when no byte of the request can have reached
//! the node (the connection could not be opened); every other failure leaves the request's effect
//! unknown.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

/// A response.
#[derive(Debug)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Headers (names lower-case).
    pub headers: http::HeaderMap,
    /// Reason phrase as sent (when it differs from the canonical one).
    pub reason: String,
    /// Body.
    pub body: Bytes,
}

impl Resp {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Why a request failed.
#[derive(Debug)]
pub enum Failure {
    /// The connection could not be opened: the request was not sent.
    NotSent(String),
    /// The request may or may not have been carried out.
    Unknown(String),
}

/// A client of one node (its home), or of another node it was redirected to.
pub struct Client {
    host: String,
    port: u16,
    timeout: Duration,
    conn: Option<(SendRequest<Full<Bytes>>, tokio::task::JoinHandle<()>)>,
    /// The address requests go to instead of the home node (after a redirect).
    target: Option<std::net::SocketAddr>,
    /// TLS, when the node serves it.
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl Client {
    /// A client of `host:port`; each request (including connecting) gets `timeout`.
    pub fn new(host: &str, port: u16, timeout: Duration) -> Client {
        Client { host: host.to_owned(), port, timeout, conn: None, target: None, tls: None }
    }

    /// Speaks TLS with `config` (`None`: plain HTTP).
    pub fn with_tls(mut self, config: Option<std::sync::Arc<rustls::ClientConfig>>) -> Client {
        self.tls = config;
        self
    }

    /// Where requests go: the home node's name, or the address of a redirect's target.
    pub fn target(&self) -> String {
        match self.target {
            Some(a) => a.to_string(),
            None => self.host.clone(),
        }
    }

    /// Sends the next requests to `addr` (a redirect's target), or to the home node (`None`);
    /// the kept-alive connection is dropped when the target changes.
    pub fn retarget(&mut self, addr: Option<std::net::SocketAddr>) {
        if self.target != addr {
            self.drop_conn();
            self.target = addr;
        }
    }

    fn drop_conn(&mut self) {
        if let Some((_, task)) = self.conn.take() {
            task.abort();
        }
    }

    async fn connect(&mut self) -> Result<(), Failure> {
        if self.conn.as_ref().is_some_and(|(s, _)| !s.is_closed()) {
            return Ok(());
        }
        self.drop_conn();
        let connect = async {
            match self.target {
                Some(a) => turmoil::net::TcpStream::connect(a).await,
                None => turmoil::net::TcpStream::connect((self.host.as_str(), self.port)).await,
            }
        };
        let stream = match tokio::time::timeout(self.timeout, connect).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Failure::NotSent(format!("connect: {e}"))),
            Err(_) => return Err(Failure::NotSent("connect timed out".into())),
        };
        let task = match &self.tls {
            None => {
                let (send, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
                    Ok(x) => x,
                    Err(e) => return Err(Failure::NotSent(format!("handshake: {e}"))),
                };
                (send, tokio::task::spawn_local(async move { drop(conn.await) }))
            }
            Some(config) => {
                let ip = stream.peer_addr().map_err(|e| Failure::NotSent(format!("peer address: {e}")))?.ip();
                let name = rustls::pki_types::ServerName::IpAddress(ip.into());
                let tls = tokio_rustls::TlsConnector::from(config.clone()).connect(name, stream);
                let stream = match tokio::time::timeout(self.timeout, tls).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => return Err(Failure::NotSent(format!("TLS handshake: {e}"))),
                    Err(_) => return Err(Failure::NotSent("TLS handshake timed out".into())),
                };
                let (send, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
                    Ok(x) => x,
                    Err(e) => return Err(Failure::NotSent(format!("handshake: {e}"))),
                };
                (send, tokio::task::spawn_local(async move { drop(conn.await) }))
            }
        };
        let (send, task) = task;
        self.conn = Some((send, task));
        Ok(())
    }

    /// Sends `req` and reads the whole response, within the timeout.
    pub async fn send(&mut self, req: http::Request<Full<Bytes>>) -> Result<Resp, Failure> {
        self.connect().await?;
        let Some((send, _)) = self.conn.as_mut() else {
            return Err(Failure::NotSent("no connection".into()));
        };
        let exchange = async {
            send.ready().await.map_err(|e| Failure::NotSent(format!("connection not ready: {e}")))?;
            let resp = send.send_request(req).await.map_err(|e| Failure::Unknown(format!("send: {e}")))?;
            let (parts, body) = resp.into_parts();
            let reason = parts
                .extensions
                .get::<hyper::ext::ReasonPhrase>()
                .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
                .unwrap_or_default();
            let body = body.collect().await.map_err(|e| Failure::Unknown(format!("body: {e}")))?.to_bytes();
            Ok(Resp { status: parts.status.as_u16(), headers: parts.headers, reason, body })
        };
        let r = match tokio::time::timeout(self.timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Unknown("timed out".into())),
        };
        if r.is_err() {
            self.drop_conn();
        }
        r
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.drop_conn();
    }
}
