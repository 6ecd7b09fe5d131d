//! Node-to-node connections: a [`Transport`] turns a stream of the Env network into an
//! authenticated one, at the two places the cluster establishes connections (dialling a member,
//! accepting one).
//!
//! With TLS, both ends authenticate. The dialled node's certificate must chain to a trusted root
//! and carry the address dialled (an IP SAN), or with DNS discovery the cluster's DNS name; the dialling node must present a certificate that
//! chains to a trusted root. Both ends then require the other's certificate common name to carry
//! the reserved node common name in force ([`names::cn_matches_reserved`]). A refusal is logged
//! with its cause ("partial chain" when the peer's issuer is not trusted).
//!
//! An authenticated connection lives [`TlsSettings::peer_reset`](super::TlsSettings): after it,
//! reads and writes fail and the cluster reconnects with the certificate set then in force, so a
//! certificate rolled on every node reaches every connection within that interval.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{names, Tls, HANDSHAKE_TIMEOUT};
use crate::env::{BoxFuture, Conn, Env};

/// How node-to-node connections are carried.
#[derive(Clone, Default)]
pub enum Transport {
    /// As they are (insecure mode).
    #[default]
    Plain,
    /// Mutual TLS with the node's certificate set.
    Tls(Arc<Tls>),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Plain => f.write_str("Plain"),
            Transport::Tls(_) => f.write_str("Tls"),
        }
    }
}

impl PartialEq for Transport {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Transport::Plain, Transport::Plain) => true,
            (Transport::Tls(a), Transport::Tls(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Transport {
    /// Whether connections are TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }
}

/// Dials `to` through the Env network and authenticates it: its certificate must carry `name`
/// when given (the cluster's DNS name, with DNS discovery), else the address dialled.
pub async fn connect(
    env: &Env,
    transport: &Transport,
    to: SocketAddr,
    name: Option<&str>,
) -> io::Result<Box<dyn Conn>> {
    let conn = env.net.connect(to).await?;
    let Transport::Tls(tls) = transport else { return Ok(conn) };
    let active = tls.current();
    let name = match name {
        Some(n) => ServerName::try_from(n.trim_end_matches('.').to_string())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{n} is not a DNS name")))?,
        None => ServerName::IpAddress(to.ip().into()),
    };
    let conn = tokio::io::BufReader::with_capacity(super::accept::READ_BUFFER, conn);
    let connect = tokio_rustls::TlsConnector::from(active.peer_client.clone()).connect(name, conn);
    let stream =
        within(env, connect).await.map_err(|e| explain(e, "the member's certificate was refused"))?;
    check_cn(stream.get_ref().1.peer_certificates(), &active.set.reserved_cn)?;
    Ok(Box::new(Expiring::new(env, stream, active.settings.peer_reset)))
}

/// Authenticates a connection another node opened; logs why when it is refused.
pub async fn accept(
    env: &Env,
    transport: &Transport,
    conn: Box<dyn Conn>,
    peer: SocketAddr,
) -> io::Result<Box<dyn Conn>> {
    let Transport::Tls(tls) = transport else { return Ok(conn) };
    let active = tls.current();
    let accepted = async {
        let conn = tokio::io::BufReader::with_capacity(super::accept::READ_BUFFER, conn);
        let accept = tokio_rustls::TlsAcceptor::from(active.peer_server.clone()).accept(conn);
        let stream = within(env, accept).await.map_err(|e| explain(e, "its certificate was refused"))?;
        check_cn(stream.get_ref().1.peer_certificates(), &active.set.reserved_cn)?;
        Ok::<_, io::Error>(stream)
    }
    .await;
    match accepted {
        Ok(stream) => Ok(Box::new(Expiring::new(env, stream, active.settings.peer_reset))),
        Err(e) => {
            tracing::warn!(node = %peer, error = %e, "connection from node {peer} was denied");
            Err(e)
        }
    }
}

async fn within<T>(env: &Env, f: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
    let deadline = env.rt.sleep(HANDSHAKE_TIMEOUT);
    tokio::select! {
        biased;
        r = f => r,
        _ = deadline => Err(io::Error::new(io::ErrorKind::TimedOut, "the TLS handshake did not complete in time")),
    }
}

/// A handshake error in operators' words.
fn explain(e: io::Error, what: &str) -> io::Error {
    let reason = match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(r) => super::load::chain_reason(r),
        None => e.to_string(),
    };
    io::Error::new(io::ErrorKind::PermissionDenied, format!("{what}: {reason}"))
}

fn check_cn(certs: Option<&[CertificateDer<'_>]>, reserved: &str) -> io::Result<()> {
    let denied = |m: String| io::Error::new(io::ErrorKind::PermissionDenied, m);
    let cert =
        certs.and_then(|c| c.first()).ok_or_else(|| denied("the peer presented no certificate".into()))?;
    let cn = super::load::parse(cert)
        .map_err(|e| denied(format!("the peer's certificate does not parse: {e}")))?
        .cn;
    if !names::cn_matches_reserved(&cn, reserved) {
        return Err(denied(format!(
            "its certificate CN {cn:?} does not match the reserved node common name {reserved:?}"
        )));
    }
    Ok(())
}

/// A stream that fails every read and write once its lifetime has passed.
pub struct Expiring<S> {
    inner: S,
    end: BoxFuture<'static, ()>,
    expired: bool,
}

impl<S> Expiring<S> {
    /// `inner`, for `lifetime` from now on the Env clock.
    pub fn new(env: &Env, inner: S, lifetime: std::time::Duration) -> Expiring<S> {
        Expiring { inner, end: env.rt.sleep(lifetime), expired: false }
    }

    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if !self.expired && self.end.as_mut().poll(cx).is_ready() {
            self.expired = true;
        }
        if self.expired {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the node-to-node connection reached its reset interval; reconnecting",
            ));
        }
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Expiring<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Expiring<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
