//! A server certificate verifier that checks the chain and not the name: what Apache's C client
//! and kazoo do, and Apache's Java client with `zookeeper.ssl.hostnameVerification=false`
//! (servers reached by address with certificates that name them otherwise).
//!
//! Behind the `rustls` feature. Its users: zk-client's async TLS (`ClientTls`), libzkrs (zk-ffi,
//! which carries no tokio), and zk-server's quorum connections, which check a peer's names
//! themselves after the handshake. It reads no clock (rustls hands it the time) and does no I/O.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// Checks the chain against the roots as webpki does (validity, signatures, usage) and accepts it
/// whatever names it carries.
#[derive(Debug)]
pub struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ChainOnly {
    /// A verifier trusting `roots`, with rustls's ring provider.
    ///
    /// Errors: `roots` is empty.
    pub fn new(roots: RootCertStore) -> Result<ChainOnly, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        Ok(ChainOnly(inner))
    }
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
