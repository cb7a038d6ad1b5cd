//! TLS configuration: rustls with the stack's crypto provider (`mpq_proto::crypto::backend`),
//! TLS 1.3 only, for client and server.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::cli::Common;

/// The stack's crypto provider, optionally restricted to one cipher suite.
pub fn provider(cipher: Option<&str>) -> Result<Arc<CryptoProvider>> {
    let mut p = mpq_proto::crypto::backend::default_provider();
    if let Some(name) = cipher {
        let suite = match name.to_ascii_lowercase().as_str() {
            "aes128gcm" | "aes128" => mpq_proto::crypto::backend::cipher_suite::TLS13_AES_128_GCM_SHA256,
            "aes256gcm" | "aes256" => mpq_proto::crypto::backend::cipher_suite::TLS13_AES_256_GCM_SHA384,
            "chacha20" | "chacha20poly1305" => mpq_proto::crypto::backend::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
            other => bail!("unknown cipher {other:?} (expected aes128gcm, aes256gcm or chacha20)"),
        };
        p.cipher_suites = vec![suite];
    }
    // aws-lc seeds its RNG on first use from CPU jitter, which takes 20-30 ms (measured with
    // perf: jent_* under tree_jitter_initialize_once). Pay it now, at start-up, rather than
    // in the first handshake: a fresh server answered its first ClientHello 21 ms late.
    let _ = p.secure_random.fill(&mut [0u8; 16]);
    Ok(Arc::new(p))
}

/// Writes TLS secrets in the NSS key log format to a file named on the command line.
#[derive(Debug)]
struct FileKeyLog(std::sync::Mutex<std::fs::File>);

impl rustls::KeyLog for FileKeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        use std::io::Write;
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        if let Ok(mut f) = self.0.lock() {
            let _ = writeln!(f, "{label} {} {}", hex(client_random), hex(secret));
        }
    }
}

fn key_log(common: &Common) -> Result<Arc<dyn rustls::KeyLog>> {
    Ok(match &common.keylog {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening key log {}", path.display()))?;
            Arc::new(FileKeyLog(std::sync::Mutex::new(f)))
        }
        None => Arc::new(rustls::KeyLogFile::new()),
    })
}

/// Client configuration: trust `ca` (PEM), or nothing with `insecure`. Session tickets
/// are kept in memory (rustls's default store); with `early_data` a resumed session offers
/// 0-RTT when its ticket allows it.
pub fn client_config(
    common: &Common,
    ca: Option<&Path>,
    insecure: bool,
    alpn: &[u8],
    early_data: bool,
) -> Result<Arc<rustls::ClientConfig>> {
    let provider = provider(common.cipher.as_deref())?;
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let mut config = if insecure {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerification(provider))).with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = ca {
            for cert in read_certs(ca, "--ca")? {
                roots.add(cert).context("adding CA certificate")?;
            }
        } else {
            bail!("no trust anchor: pass --ca FILE, or --insecure to skip verification");
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    config.key_log = key_log(common)?;
    config.enable_early_data = early_data;
    Ok(Arc::new(config))
}

/// Server configuration from PEM files, or a fresh self-signed certificate.
///
/// Session tickets are stateful and single use: rustls's default `ServerSessionMemoryCache`
/// (256 sessions) hands each ticket out once (`take`), which is what makes 0-RTT safe
/// against replay (RFC 8446 §8.1, RFC 9001 §9.2); rustls refuses early data with stateless
/// tickets. `early_data` makes the tickets allow 0-RTT and accepts it.
pub fn server_config(
    common: &Common,
    cert: Option<&Path>,
    key: Option<&Path>,
    alpn: &[&[u8]],
    early_data: bool,
) -> Result<Arc<rustls::ServerConfig>> {
    let (chain, key) = match (cert, key) {
        (Some(c), Some(k)) => (read_certs(c, "--cert")?, read_key(k)?),
        _ => self_signed()?,
    };
    let provider = provider(common.cipher.as_deref())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("--cert and --key do not match (or the key type is not supported)")?;
    config.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    // RFC 9001 §4.6.1: QUIC tickets that allow early data carry 0xffffffff (rustls rejects
    // other values); 0 issues tickets without early data and declines 0-RTT.
    config.max_early_data_size = if early_data { u32::MAX } else { 0 };
    config.key_log = key_log(common)?;
    Ok(Arc::new(config))
}

fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let ck = rcgen::generate_simple_self_signed(names).context("generating a certificate")?;
    let key = PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
    Ok((vec![ck.cert.der().clone()], key))
}

fn read_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>> {
    let data = std::fs::read(path).with_context(|| format!("{flag} {}: cannot read the file", path.display()))?;
    let certs = rustls_pemfile::certs(&mut &data[..])
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{flag} {}: not a PEM certificate file", path.display()))?;
    if certs.is_empty() {
        bail!("{flag} {}: no PEM certificate (BEGIN CERTIFICATE) in the file", path.display());
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let data = std::fs::read(path).with_context(|| format!("--key {}: cannot read the file", path.display()))?;
    rustls_pemfile::private_key(&mut &data[..])
        .with_context(|| format!("--key {}: not a PEM key file", path.display()))?
        .with_context(|| format!("--key {}: no PEM private key (PKCS#8, SEC1 or PKCS#1) in the file", path.display()))
}

/// Accepts any server certificate but still checks the handshake signatures.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
