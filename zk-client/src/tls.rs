//! TLS for the client's connections ([`ClientTls`]), with rustls: a server's TLS client port
//! (Apache's `secureClientPort`, or a plain port with `client.portUnification`). A client
//! certificate, when given, becomes the session's `x509:<subject>` identity on the server.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest PEM file read: certificates and keys are a few KiB each.
const MAX_PEM_BYTES: u64 = 4 * 1024 * 1024;

/// Why a [`ClientTls`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// A file could not be read (or is implausibly large).
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A file holds no usable PEM of the kind needed.
    #[error("{}: {message}", .path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        message: String,
    },
    /// rustls refused the combination (a key that does not match its certificate, say).
    #[error("TLS setup: {0}")]
    Rustls(#[from] rustls::Error),
    /// The name given to check the server's certificate against is not a DNS name or an address.
    #[error("\"{0}\" is not a DNS name or an IP address")]
    BadServerName(String),
}

/// TLS settings for a [`crate::Client`] ([`crate::ClientBuilder::tls`]): the rustls client
/// context, and optionally the name the server's certificate must carry (by default the host of
/// each connect-string entry, a DNS name or an IP address).
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<ClientConfig>,
    server_name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").field("server_name", &self.server_name).finish_non_exhaustive()
    }
}

fn read_pem(path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    let read_err = |source| TlsConfigError::Read { path: path.to_path_buf(), source };
    let len = std::fs::metadata(path).map_err(read_err)?.len();
    if len > MAX_PEM_BYTES {
        return Err(TlsConfigError::Pem {
            path: path.to_path_buf(),
            message: format!("{len} bytes is too large"),
        });
    }
    std::fs::read(path).map_err(read_err)
}

fn certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let pem_err = |message: String| TlsConfigError::Pem { path: path.to_path_buf(), message };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(pem_err("holds no CERTIFICATE block".into()));
    }
    Ok(certs)
}

impl ClientTls {
    /// TLS with a rustls context the caller built (its own verifier, resumption, versions).
    pub fn new(config: Arc<ClientConfig>) -> ClientTls {
        ClientTls { config, server_name: None }
    }

    /// TLS that trusts the certificate authorities in the PEM file `ca` and, with `identity`,
    /// presents the certificate chain in the first file and the private key (PKCS#8, PKCS#1 or
    /// SEC1, unencrypted) in the second; the two may be the same file. TLS 1.2 and 1.3, rustls's
    /// ring provider.
    ///
    /// Errors: a file that cannot be read, holds no certificate (or key), or a key that does not
    /// match its certificate.
    pub fn from_pem_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<ClientTls, TlsConfigError> {
        Self::pem_files(ca, identity, true)
    }

    /// [`ClientTls::from_pem_files`] checking the servers' certificate chains and not the names
    /// in them, as Apache's C client and kazoo do, and its Java client with
    /// `zookeeper.ssl.hostnameVerification=false`.
    ///
    /// Errors: as [`ClientTls::from_pem_files`].
    pub fn from_pem_files_any_name(
        ca: &Path,
        identity: Option<(&Path, &Path)>,
    ) -> Result<ClientTls, TlsConfigError> {
        Self::pem_files(ca, identity, false)
    }

    fn pem_files(
        ca: &Path,
        identity: Option<(&Path, &Path)>,
        check_names: bool,
    ) -> Result<ClientTls, TlsConfigError> {
        let mut roots = RootCertStore::empty();
        for cert in certs(ca, &read_pem(ca)?)? {
            roots.add(cert)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions()?;
        let builder = if check_names {
            builder.with_root_certificates(roots)
        } else {
            let verifier = crate::tls_verify::ChainOnly::new(roots)?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier))
        };
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert_path, key_path)) => {
                let chain = certs(cert_path, &read_pem(cert_path)?)?;
                let key =
                    PrivateKeyDer::from_pem_slice(&read_pem(key_path)?).map_err(|e| TlsConfigError::Pem {
                        path: key_path.to_path_buf(),
                        message: format!("holds no usable unencrypted private key: {e}"),
                    })?;
                builder.with_client_auth_cert(chain, key)?
            }
        };
        Ok(ClientTls::new(Arc::new(config)))
    }

    /// Checks every server's certificate against `name` instead of the connect string's host
    /// (for servers reached by address whose certificates name them otherwise).
    ///
    /// Errors: `name` is neither a DNS name nor an IP address.
    pub fn server_name(mut self, name: &str) -> Result<ClientTls, TlsConfigError> {
        let n =
            ServerName::try_from(name.to_string()).map_err(|_| TlsConfigError::BadServerName(name.into()))?;
        self.server_name = Some(n);
        Ok(self)
    }

    /// The connector and the name to check `host`'s certificate against; `None` when `host`
    /// cannot be a server name (the connection attempt then fails like a refused one).
    pub(crate) fn connector_for(
        &self,
        host: &str,
    ) -> Option<(tokio_rustls::TlsConnector, ServerName<'static>)> {
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => {
                ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_string()).ok()?
            }
        };
        Some((tokio_rustls::TlsConnector::from(self.config.clone()), name))
    }
}
