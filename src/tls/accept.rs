//! The TLS handshake of a client connection to the HTTP API, on the connection's own task (a
//! client that stalls holds only its own connection).
//!
//! The first bytes are looked at before rustls sees them: a TLS connection starts with a
//! handshake record (`0x16`); anything else (typically plain HTTP spoken to the TLS port) gets a
//! plain-text `400` saying the port speaks HTTPS, and the connection closes. The handshake, sniff
//! included, must complete within [`HANDSHAKE_TIMEOUT`]. Each handshake takes the certificate set
//! in force when it starts ([`Tls::current`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::{Tls, HANDSHAKE_TIMEOUT};
use crate::env::{Conn, Env};

/// The first byte of a TLS record carrying a handshake message.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// Bytes read before deciding whether a connection speaks TLS.
const SNIFF_BYTES: usize = 512;

/// Why a connection did not become a TLS stream.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The client spoke something other than TLS (answered with a plain 400).
    #[error("the client did not start a TLS handshake (plain HTTP to the HTTPS port?)")]
    NotTls,
    /// The handshake did not complete within [`HANDSHAKE_TIMEOUT`].
    #[error("the TLS handshake did not complete within {0:?}")]
    Timeout(std::time::Duration),
    /// The handshake failed.
    #[error("TLS handshake failed: {0}")]
    Handshake(io::Error),
}

const NOT_TLS_REPLY: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 45\r\n\r\nThis port speaks HTTPS: use an https:// URL.\n";

/// Runs the server side of the handshake on `conn`.
pub async fn accept(env: &Env, tls: &Tls, conn: Box<dyn Conn>) -> Result<Box<dyn Conn>, AcceptError> {
    let deadline = env.rt.sleep(HANDSHAKE_TIMEOUT);
    tokio::select! {
        biased;
        r = handshake(tls, conn) => r,
        _ = deadline => Err(AcceptError::Timeout(HANDSHAKE_TIMEOUT)),
    }
}

async fn handshake(tls: &Tls, mut conn: Box<dyn Conn>) -> Result<Box<dyn Conn>, AcceptError> {
    let mut first = vec![0u8; SNIFF_BYTES];
    let n = conn.read(&mut first).await.map_err(AcceptError::Handshake)?;
    if n == 0 {
        return Err(AcceptError::Handshake(io::ErrorKind::UnexpectedEof.into()));
    }
    first.truncate(n);
    if first[0] != TLS_HANDSHAKE_RECORD {
        let _ = conn.write_all(NOT_TLS_REPLY).await;
        let _ = conn.shutdown().await;
        return Err(AcceptError::NotTls);
    }
    let config = tls.current().http.clone();
    let stream = tokio_rustls::TlsAcceptor::from(config)
        .accept(Prefixed { head: Bytes::from(first), inner: conn })
        .await
        .map_err(AcceptError::Handshake)?;
    Ok(Box::new(stream))
}

/// A stream that first yields bytes already read from it.
pub struct Prefixed {
    /// Bytes read ahead, served first.
    pub head: Bytes,
    /// The stream.
    pub inner: Box<dyn Conn>,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.head.is_empty() {
            let n = self.head.len().min(buf.remaining());
            buf.put_slice(&self.head[..n]);
            self.head.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
