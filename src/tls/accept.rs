//! The TLS handshake of a client connection to the HTTP API, on the connection's own task (a
//! client that stalls holds only its own connection).
//!
//! The first bytes are looked at before rustls sees them (through the read buffer under rustls,
//! [`READ_BUFFER`]): a TLS connection starts with a
//! handshake record (`0x16`); anything else (typically plain HTTP spoken to the TLS port) gets a
//! plain-text `400` saying the port speaks HTTPS, and the connection closes. The handshake, sniff
//! included, must complete within [`HANDSHAKE_TIMEOUT`]. Each handshake takes the certificate set
//! in force when it starts ([`Tls::current`]).

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::{Tls, HANDSHAKE_TIMEOUT};
use crate::env::{Conn, Env};

/// The first byte of a TLS record carrying a handshake message.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// Bytes read from the socket at a time under rustls.
pub const READ_BUFFER: usize = 32 * 1024;

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

async fn handshake(tls: &Tls, conn: Box<dyn Conn>) -> Result<Box<dyn Conn>, AcceptError> {
    // rustls reads at most 4 KiB per call: the buffer below it saves system calls on large
    // request bodies, and lets the first bytes be looked at without consuming them.
    let mut io = tokio::io::BufReader::with_capacity(READ_BUFFER, conn);
    let first = io.fill_buf().await.map_err(AcceptError::Handshake)?;
    match first.first() {
        None => return Err(AcceptError::Handshake(io::ErrorKind::UnexpectedEof.into())),
        Some(&TLS_HANDSHAKE_RECORD) => {}
        Some(_) => {
            let _ = io.write_all(NOT_TLS_REPLY).await;
            let _ = io.shutdown().await;
            return Err(AcceptError::NotTls);
        }
    }
    let config = tls.current().http.clone();
    let stream =
        tokio_rustls::TlsAcceptor::from(config).accept(OneSend(io)).await.map_err(AcceptError::Handshake)?;
    Ok(Box::new(stream))
}

/// The socket under rustls, which hands it its records as a vectored write even when there is
/// one (a small reply is one record): one buffer goes out as a plain write (`send`), which costs
/// the kernel less than `writev`; several go out together as before.
struct OneSend<T>(T);

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for OneSend<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for OneSend<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        let mut full = bufs.iter().filter(|b| !b.is_empty());
        match (full.next(), full.next()) {
            (Some(one), None) => std::pin::Pin::new(&mut self.0).poll_write(cx, one),
            (None, _) => std::task::Poll::Ready(Ok(0)),
            _ => std::pin::Pin::new(&mut self.0).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
