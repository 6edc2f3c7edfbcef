use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};

use super::*;

/// A test CA (ECDSA P-256, made with `openssl req -x509 -newkey ec`).
const CA_CERT: &[u8] = include_bytes!("../testdata/ca.pem");
/// A server certificate for `localhost` the test CA signed with
/// ECDSA-SHA256 (`openssl x509 -req -sha256`), and its key.
const EC_CERT: &[u8] = include_bytes!("../testdata/server.pem");
const EC_KEY: &[u8] = include_bytes!("../testdata/server.key");
/// A self-signed RSA certificate for `localhost`, signed with SHA-384.
const RSA_CERT: &[u8] = include_bytes!("../testdata/rsa.pem");

fn der(pem: &[u8]) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem).expect("a test certificate")
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client that trusts only `root`.
fn client_trusting(root: &[u8]) -> MakePgTls {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(root)).expect("a root");
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    MakePgTls::new(config)
}

/// A connector to `localhost` that trusts only `root`.
fn connector(root: &[u8]) -> PgTlsConnect {
    MakeTlsConnect::<tokio::io::DuplexStream>::make_tls_connect(
        &mut client_trusting(root),
        "localhost",
    )
    .expect("a DNS name")
}

/// Serves one TLS connection with the EC certificate on `io`: reads four
/// bytes and answers `pong`.
async fn serve_once(io: tokio::io::DuplexStream) -> std::io::Result<()> {
    let key = PrivateKeyDer::from_pem_slice(EC_KEY).expect("a test key");
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![der(EC_CERT)], key)
        .expect("a server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let mut stream = acceptor.accept(io).await?;
    let mut ping = [0u8; 4];
    stream.read_exact(&mut ping).await?;
    stream.write_all(b"pong").await?;
    stream.shutdown().await
}

#[test]
fn the_end_point_is_hashed_with_the_signature_algorithms_hash() {
    let ec = der(EC_CERT);
    let sha256 = ring::digest::digest(&ring::digest::SHA256, &ec);
    assert_eq!(server_end_point(&ec).as_deref(), Some(sha256.as_ref()));
    let rsa = der(RSA_CERT);
    let sha384 = ring::digest::digest(&ring::digest::SHA384, &rsa);
    assert_eq!(server_end_point(&rsa).as_deref(), Some(sha384.as_ref()));
}

#[test]
fn a_cut_or_unknown_certificate_has_no_end_point() {
    let ec = der(EC_CERT);
    for len in 0..ec.len() {
        assert_eq!(server_end_point(&ec[..len]), None, "cut at {len}");
    }
    assert_eq!(server_end_point(b"not DER at all"), None);
    // Ed25519 (1.3.101.112) has no hash of its own: no binding.
    assert_eq!(hash_of(&[0x2b, 0x65, 0x70]).map(|h| h.output_len()), None);
    // SHA-1 with RSA binds with SHA-256.
    let sha1_rsa = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05];
    assert_eq!(hash_of(&sha1_rsa).map(|h| h.output_len()), Some(32));
}

#[tokio::test]
async fn a_handshake_with_a_trusted_server_carries_data_and_binds_to_its_certificate() {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(serve_once(server_io));
    let connect = connector(CA_CERT);
    let mut stream = connect.connect(client_io).await.expect("the handshake");
    stream.write_all(b"ping").await.expect("write");
    let mut pong = Vec::new();
    stream.read_to_end(&mut pong).await.expect("read");
    assert_eq!(pong, b"pong");
    server
        .await
        .expect("the server task")
        .expect("the server side");
    let seen = stream
        .0
        .get_ref()
        .1
        .peer_certificates()
        .expect("certificates");
    let expected = ring::digest::digest(&ring::digest::SHA256, &der(EC_CERT));
    assert_eq!(
        server_end_point(&seen[0]).as_deref(),
        Some(expected.as_ref())
    );
}

#[tokio::test]
async fn a_server_whose_certificate_is_not_trusted_is_refused() {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(serve_once(server_io));
    let connect = connector(RSA_CERT);
    let refused = connect.connect(client_io).await;
    let error = refused.err().expect("an untrusted certificate is refused");
    assert!(
        error.to_string().contains("certificate"),
        "the error says why: {error}"
    );
    assert!(server.await.expect("the server task").is_err());
}

#[test]
fn a_host_that_is_no_server_name_is_an_error() {
    let made = MakeTlsConnect::<tokio::io::DuplexStream>::make_tls_connect(
        &mut client_trusting(EC_CERT),
        "not a host name!",
    );
    assert!(made.is_err());
}
