//! TLS to PostgreSQL with rustls: the connector tokio-postgres asks for,
//! and the `tls-server-end-point` channel binding (RFC 5929) that lets
//! SCRAM-SHA-256-PLUS tie the login to the server's certificate.
//!
//! The binding hashes the server's certificate with the hash of its
//! signature algorithm (SHA-256 for MD5 and SHA-1), read from the
//! certificate's DER with a few lines here rather than an X.509 crate
//! (the one tokio-postgres-rustls pulls cost ~12 CPU-s of a cold build).
//! An algorithm without a hash of its own (Ed25519, RSA-PSS) gets no
//! binding, so the login falls back to plain SCRAM-SHA-256, as it does
//! with a PostgreSQL server that cannot compute one either. This module
//! never accepts a certificate the root store does not.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// Makes a TLS connector per connection, from one client configuration.
#[derive(Clone)]
pub(crate) struct MakePgTls {
    config: Arc<ClientConfig>,
}

impl MakePgTls {
    /// Connectors that use `config`.
    pub(crate) fn new(config: ClientConfig) -> Self {
        Self {
            config: Arc::new(config),
        }
    }
}

/// Wraps one connection in TLS for one server name.
pub(crate) struct PgTlsConnect {
    name: ServerName<'static>,
    connector: tokio_rustls::TlsConnector,
}

/// A connection in TLS.
pub(crate) struct PgTlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S> MakeTlsConnect<S> for MakePgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type TlsConnect = PgTlsConnect;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, host: &str) -> Result<PgTlsConnect, Self::Error> {
        Ok(PgTlsConnect {
            name: ServerName::try_from(host)?.to_owned(),
            connector: tokio_rustls::TlsConnector::from(Arc::clone(&self.config)),
        })
    }
}

impl<S> TlsConnect<S> for PgTlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<PgTlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connecting = self.connector.connect(self.name, stream);
        Box::pin(async move { connecting.await.map(PgTlsStream) })
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for PgTlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        let (_, session) = self.0.get_ref();
        let end_point = session
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|cert| server_end_point(cert));
        end_point.map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for PgTlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PgTlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// The `tls-server-end-point` value of a certificate (DER): its hash
/// under its signature algorithm's hash; `None` for an algorithm without
/// one, or a certificate that cannot be read.
pub(crate) fn server_end_point(cert: &[u8]) -> Option<Vec<u8>> {
    let hash = hash_of(signature_algorithm(cert)?)?;
    Some(ring::digest::digest(hash, cert).as_ref().to_vec())
}

/// The hash RFC 5929 binds with for a signature algorithm (its OID's
/// DER contents).
fn hash_of(oid: &[u8]) -> Option<&'static ring::digest::Algorithm> {
    // 1.2.840.113549.1.1.x (PKCS #1) and 1.2.840.10045.4.3.x (ECDSA).
    const PKCS1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];
    match oid.split_last()? {
        // MD5, SHA-1 (upgraded to SHA-256, RFC 5929 section 4.1), SHA-256.
        (4 | 5 | 11, head) if head == PKCS1 => Some(&ring::digest::SHA256),
        (12, head) if head == PKCS1 => Some(&ring::digest::SHA384),
        (13, head) if head == PKCS1 => Some(&ring::digest::SHA512),
        (2, head) if head == ECDSA => Some(&ring::digest::SHA256),
        (3, head) if head == ECDSA => Some(&ring::digest::SHA384),
        (4, head) if head == ECDSA => Some(&ring::digest::SHA512),
        _ => None,
    }
}

const SEQUENCE: u8 = 0x30;
const OBJECT_IDENTIFIER: u8 = 0x06;

/// The OID of a certificate's `signatureAlgorithm` (RFC 5280:
/// `SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }`).
fn signature_algorithm(cert: &[u8]) -> Option<&[u8]> {
    let (SEQUENCE, cert, _) = element(cert)? else {
        return None;
    };
    let (SEQUENCE, _tbs, rest) = element(cert)? else {
        return None;
    };
    let (SEQUENCE, algorithm, _) = element(rest)? else {
        return None;
    };
    let (OBJECT_IDENTIFIER, oid, _) = element(algorithm)? else {
        return None;
    };
    Some(oid)
}

/// One DER element at the start of `der`: its tag, its contents and what
/// follows it; `None` when it is cut short or its length is not DER's.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, rest) = rest.split_at(n);
        let len = bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, rest)
    };
    if rest.len() < len {
        return None;
    }
    let (contents, rest) = rest.split_at(len);
    Some((tag, contents, rest))
}

#[cfg(test)]
mod tests;
