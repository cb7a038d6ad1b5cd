//! rustls configurations for both roles: certificates from PEM files, the key log,
//! ChaCha20 only on request, 0-RTT, and a server session store that says when a client
//! resumed (quinn does not report resumption on the server side).

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ServerSessionMemoryCache, StoresServerSessions};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// The ring provider, with only TLS_CHACHA20_POLY1305_SHA256 when `chacha20`.
fn provider(chacha20: bool) -> CryptoProvider {
    let mut p = ring::default_provider();
    if chacha20 {
        p.cipher_suites.retain(|s| s.suite() == rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256);
    }
    p
}

/// The Initial packets' suite, which QUIC fixes to AES-128-GCM (RFC 9001 §5.2) whatever
/// the handshake negotiates.
fn initial_suite() -> rustls::quic::Suite {
    ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .expect("ring has TLS13_AES_128_GCM_SHA256 for QUIC")
}

/// Writes NSS key log lines (SSLKEYLOGFILE format) to one file.
#[derive(Debug)]
struct FileKeyLog(Mutex<File>);

impl rustls::KeyLog for FileKeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        if let Ok(mut f) = self.0.lock() {
            let _ = writeln!(f, "{label} {} {}", hex(client_random), hex(secret));
        }
    }
}

fn key_log(path: Option<&Path>) -> Result<Arc<dyn rustls::KeyLog>> {
    Ok(match path {
        Some(p) => Arc::new(FileKeyLog(Mutex::new(
            File::create(p).with_context(|| format!("creating key log {}", p.display()))?,
        ))),
        None => Arc::new(rustls::KeyLogFile::new()),
    })
}

/// A server session cache that logs each ticket a client resumes with.
#[derive(Debug)]
struct LoggingSessions(Arc<ServerSessionMemoryCache>);

impl StoresServerSessions for LoggingSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.0.put(key, value)
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let v = self.0.get(key);
        if v.is_some() {
            eprintln!("tls session resumed=true (ticket found)");
        }
        v
    }
    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let v = self.0.take(key);
        if v.is_some() {
            eprintln!("tls session resumed=true (ticket taken, single use)");
        }
        v
    }
    fn can_cache(&self) -> bool {
        true
    }
}

/// The server's QUIC crypto configuration from PEM files; 0-RTT accepted when `zero_rtt`.
pub fn server(cert: &Path, key: &Path, keylog: Option<&Path>, zero_rtt: bool) -> Result<QuicServerConfig> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut BufReader::new(
        File::open(cert).with_context(|| format!("opening {}", cert.display()))?,
    ))
    .collect::<Result<_, _>>()?;
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut BufReader::new(
        File::open(key).with_context(|| format!("opening {}", key.display()))?,
    ))?
    .ok_or_else(|| anyhow!("no private key in {}", key.display()))?;
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(provider(false)))
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    tls.alpn_protocols = vec![crate::ALPN.to_vec()];
    tls.key_log = key_log(keylog)?;
    tls.session_storage = Arc::new(LoggingSessions(ServerSessionMemoryCache::new(256)));
    // QUIC allows only 0 or 0xffffffff (RFC 9001 §4.6.1).
    tls.max_early_data_size = if zero_rtt { u32::MAX } else { 0 };
    Ok(QuicServerConfig::with_initial(Arc::new(tls), initial_suite())?)
}

/// Counts the server certificates it verifies (for a WebPKI verifier it wraps). A
/// resumed TLS 1.3 handshake carries no certificate (RFC 8446 §2.2), so a handshake
/// that completed without a verification resumed a session: quinn reports no more.
#[derive(Debug)]
pub struct CountingVerifier {
    inner: Arc<WebPkiServerVerifier>,
    /// Certificates verified so far.
    pub verified: AtomicU64,
}

impl ServerCertVerifier for CountingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verified.fetch_add(1, Ordering::SeqCst);
        self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The client's QUIC crypto configuration trusting `ca`, and its verifier's counter;
/// 0-RTT offered when a ticket allows it; only ChaCha20-Poly1305 when `chacha20`.
pub fn client(ca: &Path, chacha20: bool) -> Result<(QuicClientConfig, Arc<CountingVerifier>)> {
    let mut roots = rustls::RootCertStore::empty();
    for c in
        rustls_pemfile::certs(&mut BufReader::new(File::open(ca).with_context(|| format!("opening {}", ca.display()))?))
    {
        roots.add(c?)?;
    }
    let provider = Arc::new(provider(chacha20));
    let verifier = Arc::new(CountingVerifier {
        inner: WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build()?,
        verified: AtomicU64::new(0),
    });
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    tls.alpn_protocols = vec![crate::ALPN.to_vec()];
    tls.enable_early_data = true;
    tls.key_log = key_log(None)?;
    Ok((QuicClientConfig::with_initial(Arc::new(tls), initial_suite())?, verifier))
}

/// The negotiated cipher suite's name, from a connection's TLS handshake data.
pub fn describe(conn: &quinn::Connection) -> String {
    conn.handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .map(|d| {
            let alpn = d.protocol.map(|p| String::from_utf8_lossy(&p).into_owned()).unwrap_or_default();
            format!("alpn={alpn}")
        })
        .unwrap_or_else(|| "alpn=?".into())
}
