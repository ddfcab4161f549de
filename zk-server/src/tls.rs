//! TLS for the client port, with rustls: the server's context built from the `ssl.*` keys
//! (PEM key and trust stores, the key decrypted with `ssl.keyStore.password` when it is an
//! encrypted PKCS#8 one, client certificate policy, protocol versions, cipher suites), read
//! again when the files change (`client.certReload`), and the identities a verified client
//! certificate gives a connection (`x509:<subject>`, and `super:<subject>` for the configured super
//! user).

use crate::ssl_config::{ClientAuth, Setting, SslConfig};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;
use zk_proto::Id;

/// Largest key or trust store file read: PEM certificates and keys are a few KiB each.
const MAX_STORE_BYTES: u64 = 4 * 1024 * 1024;

/// The TLS context of the client port (and of the AdminServer's HTTPS, from the `ssl.quorum.*`
/// stores): what new connections are accepted with. Reloading swaps it; connections already up
/// keep the one they started with.
pub struct ServerTls {
    current: RwLock<Arc<ServerConfig>>,
    ssl: SslConfig,
    config_file: Option<PathBuf>,
    /// The stores' files and their modification times when last read.
    stamps: StoreStamps,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("client_auth", &self.ssl.client_auth.value).finish_non_exhaustive()
    }
}

/// Where a setting is, for error messages: `zoo.cfg line 7: ssl.keyStore.location: `.
fn place(file: Option<&Path>, key: &str, line: u32) -> String {
    match file {
        Some(f) if line > 0 => format!("{} line {line}: {key}", f.display()),
        _ if line > 0 => format!("line {line}: {key}"),
        _ => key.to_string(),
    }
}

fn read_store(file: Option<&Path>, key: &str, loc: &Setting<PathBuf>) -> Result<Vec<u8>, String> {
    let at = place(file, key, loc.line);
    let path = &loc.value;
    let len =
        std::fs::metadata(path).map_err(|e| format!("{at}: cannot read {}: {e}", path.display()))?.len();
    if len > MAX_STORE_BYTES {
        return Err(format!(
            "{at}: {} is {len} bytes, more than a PEM store can sensibly hold",
            path.display()
        ));
    }
    std::fs::read(path).map_err(|e| format!("{at}: cannot read {}: {e}", path.display()))
}

/// The protocol versions `ssl.protocol` / `ssl.enabledProtocols` ask for, among those rustls has
/// (TLS 1.2 and 1.3; older ones are dropped with a warning).
fn versions(ssl: &SslConfig, file: Option<&Path>) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let (enabled, protocol) = (ssl.key("enabledProtocols"), ssl.key("protocol"));
    let (names, key, line): (Vec<String>, &str, u32) = match (&ssl.enabled_protocols, &ssl.protocol) {
        (Some(list), _) => (list.value.clone(), &enabled, list.line),
        // Apache: TLSv1.3 (its default) enables 1.3 and 1.2; any other protocol only itself.
        (None, Some(p)) if p.value == "TLSv1.3" => {
            (vec!["TLSv1.3".into(), "TLSv1.2".into()], &protocol, p.line)
        }
        (None, Some(p)) if p.value == "TLS" => (vec!["TLSv1.3".into(), "TLSv1.2".into()], &protocol, p.line),
        (None, Some(p)) => (vec![p.value.clone()], &protocol, p.line),
        (None, None) => return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]),
    };
    let mut out = Vec::new();
    for n in &names {
        match n.as_str() {
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            "TLSv1.1" | "TLSv1" | "SSLv3" => {
                tracing::warn!(
                    "{}: {n} is not offered (rustls has TLS 1.2 and 1.3 only)",
                    place(file, key, line)
                )
            }
            _ => return Err(format!("{}: \"{n}\" is not a TLS protocol version", place(file, key, line))),
        }
    }
    if out.is_empty() {
        return Err(format!("{}: none of {} is TLSv1.2 or TLSv1.3", place(file, key, line), names.join(",")));
    }
    Ok(out)
}

/// A cipher suite's IANA name as Java (and `ssl.ciphersuites`) spells it.
fn java_name(suite: &SupportedCipherSuite) -> String {
    let name = suite.suite().as_str().unwrap_or("");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name.to_string(),
    }
}

/// The crypto provider (ring), with only the `ssl.ciphersuites` asked for when the key is set;
/// names rustls does not implement are dropped with a warning.
fn provider(ssl: &SslConfig, file: Option<&Path>) -> Result<CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(list) = &ssl.ciphersuites {
        let at = place(file, &ssl.key("ciphersuites"), list.line);
        let mut chosen = Vec::new();
        for name in &list.value {
            match provider.cipher_suites.iter().find(|s| java_name(s) == *name) {
                Some(s) => chosen.push(*s),
                None => tracing::warn!("{at}: {name} is not implemented by rustls; left out"),
            }
        }
        if chosen.is_empty() {
            let have: Vec<String> = provider.cipher_suites.iter().map(java_name).collect();
            return Err(format!("{at}: no suite listed is available; choose among {}", have.join(",")));
        }
        provider.cipher_suites = chosen;
    }
    Ok(provider)
}

/// Builds the rustls server context from the settings, reading the stores' files.
///
/// Errors, each naming the key (and its zoo.cfg line): a file that cannot be read, a key store
/// without a private key or without a certificate, an encrypted private key without its password
/// or with a wrong one, a trust
/// store without certificates, a key that does not match its certificate, versions or suites
/// that leave nothing to offer.
pub fn build(ssl: &SslConfig, file: Option<&Path>) -> Result<ServerConfig, String> {
    let (chain, key) = key_pair(ssl, file)?;
    let ks_key = ssl.key("keyStore.location");
    let ks_at =
        ssl.key_store.location.as_ref().map_or(ks_key.clone(), |ks| {
            format!("{}: {}", place(file, &ks_key, ks.line), ks.value.display())
        });
    let provider = Arc::new(provider(ssl, file)?);
    let versions = versions(ssl, file)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("{p}protocol / {p}enabledProtocols / {p}ciphersuites: {e}", p = ssl.prefix))?;
    let builder = if ssl.client_auth.value == ClientAuth::None {
        builder.with_no_client_auth()
    } else {
        let (roots, ts_at) = trust_roots(ssl, file)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let verifier = if ssl.client_auth.value == ClientAuth::Want {
            verifier.allow_unauthenticated()
        } else {
            verifier
        };
        builder.with_client_cert_verifier(verifier.build().map_err(|e| format!("{ts_at}: {e}"))?)
    };
    builder.with_single_cert(chain, key).map_err(|e| format!("{ks_at}: {e}"))
}

/// The crypto provider and protocol versions the settings ask for. Errors: as [`build`].
pub(crate) fn suites_and_versions(
    ssl: &SslConfig,
    file: Option<&Path>,
) -> Result<(Arc<CryptoProvider>, Vec<&'static SupportedProtocolVersion>), String> {
    Ok((Arc::new(provider(ssl, file)?), versions(ssl, file)?))
}

/// The authorities of the trust store, and where its location is set (for errors). Errors: the
/// key is not set, the file cannot be read or holds no certificate.
pub(crate) fn trust_roots(ssl: &SslConfig, file: Option<&Path>) -> Result<(RootCertStore, String), String> {
    let ts_key = ssl.key("trustStore.location");
    let ts = ssl.trust_store.location.as_ref().ok_or_else(|| format!("{ts_key} is not set"))?;
    let ts_at = place(file, &ts_key, ts.line);
    let pem = read_store(file, &ts_key, ts)?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("{ts_at}: {}: bad PEM: {e}", ts.value.display()))?;
        roots.add(cert).map_err(|e| format!("{ts_at}: {}: {e}", ts.value.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("{ts_at}: {} holds no CERTIFICATE block", ts.value.display()));
    }
    Ok((roots, ts_at))
}

/// This server's certificate chain and private key from the key store. Errors: as [`build`].
pub(crate) fn key_pair(
    ssl: &SslConfig,
    file: Option<&Path>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let ks_key = ssl.key("keyStore.location");
    let ks = ssl.key_store.location.as_ref().ok_or_else(|| format!("{ks_key} is not set"))?;
    let ks_at = place(file, &ks_key, ks.line);
    let pem = read_store(file, &ks_key, ks)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{ks_at}: {}: bad PEM: {e}", ks.value.display()))?;
    if chain.is_empty() {
        return Err(format!("{ks_at}: {} holds no CERTIFICATE block", ks.value.display()));
    }
    let key = match encrypted_key(&pem) {
        Some(der) => {
            let (password, key, line) = key_password(ssl, file)?.ok_or_else(|| {
                format!(
                    "{ks_at}: the private key in {} is encrypted and neither {p}keyStore.password nor \
                     {p}keyStore.passwordPath is set",
                    ks.value.display(),
                    p = ssl.prefix
                )
            })?;
            let at = place(file, &key, line);
            decrypt(&der, &password)
                .map_err(|e| format!("{at}: cannot decrypt the private key in {}: {e}", ks.value.display()))?
        }
        None => PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| format!("{ks_at}: {} holds no usable private key: {e}", ks.value.display()))?,
    };

    Ok((chain, key))
}

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// The DER of the first `ENCRYPTED PRIVATE KEY` block of a PEM file, if it has one (a block
/// whose base64 does not decode counts as none, and is then reported as no usable key).
fn encrypted_key(pem: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find(ENCRYPTED_BEGIN)? + ENCRYPTED_BEGIN.len();
    let len = text[start..].find(ENCRYPTED_END)?;
    let b64: String = text[start..start + len].chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// Decrypts a PKCS#8 `EncryptedPrivateKeyInfo` (PBES2: PBKDF2 or scrypt, AES-CBC), as Apache's PEM
/// key store does with `ssl.keyStore.password`.
fn decrypt(der: &[u8], password: &str) -> Result<PrivateKeyDer<'static>, String> {
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der).map_err(|e| e.to_string())?;
    let plain = info.decrypt(password.as_bytes()).map_err(|e| format!("{e} (a wrong password?)"))?;
    Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()))
}

/// The key store's password, the key it came from and that key's line: `ssl.keyStore.passwordPath`'s
/// file (less one trailing line break) when set, else `ssl.keyStore.password`, as Apache takes
/// them.
fn key_password(ssl: &SslConfig, file: Option<&Path>) -> Result<Option<(String, String, u32)>, String> {
    if let Some(p) = &ssl.key_store.password_path {
        let key = ssl.key("keyStore.passwordPath");
        let text = std::fs::read_to_string(&p.value)
            .map_err(|e| format!("{}: cannot read {}: {e}", place(file, &key, p.line), p.value.display()))?;
        let text = text.strip_suffix('\n').unwrap_or(&text).to_string();
        return Ok(Some((text, key, p.line)));
    }
    Ok(ssl.key_store.password.as_ref().map(|p| (p.value.0.clone(), ssl.key("keyStore.password"), p.line)))
}

/// How often the stores' files are looked at when reloading is asked for.
const CERT_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `reload` (on the blocking pool: it reads files) every [`CERT_POLL`]. Polling the files'
/// times picks a change up within that, with no watcher thread or platform-specific notification.
pub(crate) fn poll_stores(reload: impl Fn() -> bool + Send + Sync + 'static) -> tokio::task::JoinHandle<()> {
    let reload = Arc::new(reload);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(CERT_POLL);
        loop {
            every.tick().await;
            let reload = reload.clone();
            let _ = tokio::task::spawn_blocking(move || reload()).await;
        }
    })
}

/// The key and trust stores' files and their modification times, to tell when they change.
pub(crate) struct StoreStamps {
    seen: Mutex<Vec<(PathBuf, Option<SystemTime>)>>,
}

impl StoreStamps {
    fn of(ssl: &SslConfig) -> Vec<(PathBuf, Option<SystemTime>)> {
        [&ssl.key_store.location, &ssl.trust_store.location]
            .into_iter()
            .flatten()
            .map(|l| (l.value.clone(), std::fs::metadata(&l.value).and_then(|m| m.modified()).ok()))
            .collect()
    }

    /// The stores' times now (taken before their files are read, so a change meanwhile is seen
    /// next time).
    pub(crate) fn new(ssl: &SslConfig) -> StoreStamps {
        StoreStamps { seen: Mutex::new(StoreStamps::of(ssl)) }
    }

    /// Whether a store's file changed since the last call (or [`Self::new`]).
    pub(crate) fn changed(&self, ssl: &SslConfig) -> bool {
        let now = StoreStamps::of(ssl);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if *seen == now {
            return false;
        }
        *seen = now;
        true
    }
}

impl ServerTls {
    /// Reads the stores and builds the context. Errors: as [`build`].
    pub fn load(ssl: &SslConfig, config_file: Option<&Path>) -> Result<ServerTls, String> {
        let stamps = StoreStamps::new(ssl);
        let cfg = build(ssl, config_file)?;
        Ok(ServerTls {
            current: RwLock::new(Arc::new(cfg)),
            ssl: ssl.clone(),
            config_file: config_file.map(Path::to_path_buf),
            stamps,
        })
    }

    /// An acceptor with the current context.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let cfg = self.current.read().unwrap_or_else(|e| e.into_inner()).clone();
        tokio_rustls::TlsAcceptor::from(cfg)
    }

    /// Whether `client.certReload` asks for the stores to be watched.
    pub fn reload_wanted(&self) -> bool {
        self.ssl.cert_reload
    }

    /// How long port unification waits for a connection's first byte.
    pub fn detection_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.ssl.handshake_detection_timeout_ms.into())
    }

    /// Reads the stores again if a file's modification time changed since they were last read;
    /// returns whether the context was replaced. A new context that does not build is logged and
    /// the old one kept (a half-written file is read again on the next change).
    pub fn reload_if_changed(&self) -> bool {
        if !self.stamps.changed(&self.ssl) {
            return false;
        }
        match build(&self.ssl, self.config_file.as_deref()) {
            Ok(cfg) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(cfg);
                tracing::info!("TLS key and trust stores read again: new connections use them");
                true
            }
            Err(e) => {
                tracing::warn!("TLS stores changed but cannot be used, keeping the previous ones: {e}");
                false
            }
        }
    }

    /// The identities a connection's verified certificate chain gives it: `x509:<subject>` (the
    /// subject as Apache's X509AuthenticationProvider writes it), preceded by `super:<subject>`
    /// when the subject is `X509AuthenticationProvider.superUser`. None without a certificate.
    ///
    /// Errors: the certificate's subject cannot be read (the connection is refused, as Apache
    /// refuses one its provider fails on).
    pub fn peer_ids(&self, chain: Option<&[CertificateDer<'_>]>) -> Result<Vec<Id>, crate::x509::DnError> {
        let Some(leaf) = chain.and_then(|c| c.first()) else { return Ok(Vec::new()) };
        let dn = crate::x509::subject_dn(leaf)?;
        let mut ids = Vec::with_capacity(2);
        if self.ssl.x509_super_user.as_deref() == Some(dn.as_str()) {
            ids.push(Id { scheme: "super".into(), id: dn.clone() });
        }
        ids.push(Id { scheme: "x509".into(), id: dn });
        Ok(ids)
    }
}
