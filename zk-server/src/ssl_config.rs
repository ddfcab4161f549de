//! The zoo.cfg keys of TLS, as Apache ZooKeeper names them (its X509Util and
//! NettyServerCnxnFactory read them as the JVM properties `zookeeper.<key>`, which zoo.cfg lines
//! it does not know become). One [`SslConfig`] per prefix, as Apache has one X509Util per prefix:
//! `ssl.` for the client port (with `client.portUnification`, `client.certReload`,
//! `X509AuthenticationProvider.superUser`), `ssl.quorum.` for the connections between ensemble
//! members (`sslQuorum`). Under each prefix: `keyStore.*`, `trustStore.*`, `clientAuth`,
//! `protocol`, `enabledProtocols`, `ciphersuites`, `hostnameVerification`. Parsing only: the files
//! are read by `tls.rs`.

use std::path::PathBuf;

/// A value with the 1-based zoo.cfg line it came from, so that errors can point at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    /// The value.
    pub value: T,
    /// Its line.
    pub line: u32,
}

/// A password: never printed (`Debug` shows `***`), so it cannot reach a log (CVE-2026-24308).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// `ssl.clientAuth`: whether clients of the TLS port must show a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// A client without a trusted certificate is refused (Apache's default).
    #[default]
    Need,
    /// A certificate is asked for; a client without one is served, one with an untrusted one is
    /// refused.
    Want,
    /// No certificate is asked for.
    None,
}

/// What a key store or trust store file holds, by `ssl.*.type` or by the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    /// PEM text: the only type zkrs reads.
    Pem,
    /// A Java key store (`.jks`).
    Jks,
    /// PKCS#12 (`.p12`).
    Pkcs12,
    /// Bouncy Castle FIPS (`.bcfks`).
    Bcfks,
}

/// One store: `ssl.keyStore.*` or `ssl.trustStore.*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreConfig {
    /// `.location`: the file.
    pub location: Option<Setting<PathBuf>>,
    /// `.type`, as written.
    pub store_type: Option<Setting<String>>,
    /// `.password`: decrypts an encrypted PKCS#8 key (a key store's; a PEM trust store needs none).
    pub password: Option<Setting<Secret>>,
    /// `.passwordPath`: a file holding the password.
    pub password_path: Option<Setting<PathBuf>>,
}

/// The TLS settings under one prefix (`ssl.` or `ssl.quorum.`), as written in zoo.cfg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SslConfig {
    /// `ssl.` (the client port) or `ssl.quorum.` (between ensemble members).
    pub prefix: &'static str,
    /// `ssl.keyStore.*`: this server's private key and certificate chain.
    pub key_store: StoreConfig,
    /// `ssl.trustStore.*`: the authorities client certificates must chain to.
    pub trust_store: StoreConfig,
    /// `ssl.clientAuth` (default need), and its line.
    pub client_auth: Setting<ClientAuth>,
    /// `ssl.protocol`: TLSv1.3 (the default: 1.3 and 1.2 enabled), TLSv1.2 or TLS.
    pub protocol: Option<Setting<String>>,
    /// `ssl.enabledProtocols`, comma-separated.
    pub enabled_protocols: Option<Setting<Vec<String>>>,
    /// `ssl.ciphersuites`, comma-separated IANA names (Java's).
    pub ciphersuites: Option<Setting<Vec<String>>>,
    /// `client.portUnification`: the plain client port also takes TLS, told apart by the first
    /// byte.
    pub port_unification: bool,
    /// `client.certReload`: the key and trust stores are read again when their files change.
    pub cert_reload: bool,
    /// `ssl.handshakeDetectionTimeoutMillis`: how long port unification waits for the first byte.
    pub handshake_detection_timeout_ms: u32,
    /// `X509AuthenticationProvider.superUser`: the certificate subject that is super.
    pub x509_super_user: Option<String>,
    /// An `authProvider.N` line names Apache's X509AuthenticationProvider.
    pub x509_provider_named: bool,
    /// `<prefix>hostnameVerification` (default true): a peer's certificate must name the address
    /// it is reached at. Only the quorum's connections check names (Apache's client port never
    /// does).
    pub hostname_verification: bool,
    /// `<prefix>clientHostnameVerification` (default true for the quorum): the accepting side also
    /// checks the names in the connecting peer's certificate, when `hostnameVerification` is on.
    pub client_hostname_verification: bool,
}

impl Default for SslConfig {
    fn default() -> Self {
        SslConfig {
            prefix: CLIENT_PREFIX,
            key_store: StoreConfig::default(),
            trust_store: StoreConfig::default(),
            client_auth: Setting { value: ClientAuth::Need, line: 0 },
            protocol: None,
            enabled_protocols: None,
            ciphersuites: None,
            port_unification: false,
            cert_reload: false,
            handshake_detection_timeout_ms: 5000,
            x509_super_user: None,
            x509_provider_named: false,
            hostname_verification: true,
            client_hostname_verification: true,
        }
    }
}

/// The prefix of the client port's keys.
pub const CLIENT_PREFIX: &str = "ssl.";
/// The prefix of the quorum's keys (Apache's QuorumX509Util).
pub const QUORUM_PREFIX: &str = "ssl.quorum.";

/// Keys (less the prefix) Apache reads for its client TLS that zkrs accepts and has no use for:
/// hostname checks of clients (Apache's client port never makes them), reverse DNS, the TLS
/// engine choice.
const CLIENT_IGNORED: [&str; 4] =
    ["hostnameVerification", "clientHostnameVerification", "allowReverseDnsLookup", "sslProvider"];

/// Splits a comma-separated list as Java's `String.split(",")` then trim would, dropping empties.
fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn bool_of(key: &str, value: &str) -> Result<bool, String> {
    // Java's Boolean.getBoolean: only "true" (any case) is true.
    if !value.eq_ignore_ascii_case("true") && !value.eq_ignore_ascii_case("false") {
        tracing::warn!("{key}={value}: only \"true\" turns it on; taking it as false");
    }
    Ok(value.eq_ignore_ascii_case("true"))
}

impl SslConfig {
    /// The settings of the quorum's TLS (`ssl.quorum.*`), all defaults.
    pub fn quorum() -> SslConfig {
        SslConfig { prefix: QUORUM_PREFIX, ..SslConfig::default() }
    }

    /// The full name of a key under this prefix: `key("keyStore.location")`.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    fn is_client(&self) -> bool {
        self.prefix == CLIENT_PREFIX
    }

    /// Takes `key=value` (line `line`) when it is one of this prefix's TLS keys (or, for the
    /// client port, one of its other keys); `Ok(false)` when it is not.
    ///
    /// Errors: a value Apache would refuse (`clientAuth` other than need, want or none), or a
    /// setting zkrs cannot honour (certificate revocation checks, a custom SSL context class, an
    /// `ssl.authProvider` other than x509), as a message for the key.
    pub fn take(&mut self, key: &str, value: &str, line: u32) -> Result<bool, String> {
        match key.strip_prefix(self.prefix) {
            Some(suffix) => self.take_prefixed(key, suffix, value, line),
            None if self.is_client() => self.take_client(key, value, line),
            None => Ok(false),
        }
    }

    fn take_prefixed(&mut self, key: &str, suffix: &str, value: &str, line: u32) -> Result<bool, String> {
        let text = |v: &str| Setting { value: v.to_string(), line };
        let path = |v: &str| Setting { value: PathBuf::from(v), line };
        let secret = |v: &str| Setting { value: Secret(v.to_string()), line };
        match suffix {
            "keyStore.location" => self.key_store.location = Some(path(value)),
            "keyStore.type" => self.key_store.store_type = Some(text(value)),
            "keyStore.password" => self.key_store.password = Some(secret(value)),
            "keyStore.passwordPath" => self.key_store.password_path = Some(path(value)),
            "trustStore.location" => self.trust_store.location = Some(path(value)),
            "trustStore.type" => self.trust_store.store_type = Some(text(value)),
            "trustStore.password" => self.trust_store.password = Some(secret(value)),
            "trustStore.passwordPath" => self.trust_store.password_path = Some(path(value)),
            "clientAuth" => {
                let auth = match value.to_ascii_lowercase().as_str() {
                    // Apache: an empty value means need.
                    "" | "need" => ClientAuth::Need,
                    "want" => ClientAuth::Want,
                    "none" => ClientAuth::None,
                    _ => return Err(format!("\"{value}\" is not one of need, want, none")),
                };
                self.client_auth = Setting { value: auth, line };
            }
            "protocol" => self.protocol = Some(text(value)),
            "enabledProtocols" => self.enabled_protocols = Some(Setting { value: list(value), line }),
            "ciphersuites" => self.ciphersuites = Some(Setting { value: list(value), line }),
            "handshakeDetectionTimeoutMillis" => {
                let v: i64 = value.parse().map_err(|_| format!("\"{value}\" is not a number of ms"))?;
                // Apache falls back to its default for values below 1.
                self.handshake_detection_timeout_ms =
                    if v < 1 { 5000 } else { v.min(i64::from(u32::MAX)) as u32 };
            }
            "crl" | "ocsp" => {
                if value.eq_ignore_ascii_case("true") {
                    return Err(
                        "true is not supported: zkrs does not check certificate revocation; remove it".into(),
                    );
                }
            }
            "context.supplier.class" => {
                return Err(format!(
                    "is a Java class; zkrs builds its TLS context from {p}keyStore.* and {p}trustStore.*; \
                     remove it",
                    p = self.prefix
                ))
            }
            "authProvider" if self.is_client() => {
                if value != "x509" {
                    return Err(format!(
                        "\"{value}\" is not supported: zkrs maps client certificates with its x509 provider only"
                    ));
                }
            }
            k if self.is_client() && CLIENT_IGNORED.contains(&k) => {
                tracing::info!("{key}={value} (line {line}) does not apply to zkrs's client port; ignored");
            }
            "hostnameVerification" => self.hostname_verification = bool_of(key, value)?,
            "clientHostnameVerification" => self.client_hostname_verification = bool_of(key, value)?,
            "allowReverseDnsLookup" => {
                if bool_of(key, value)? {
                    tracing::warn!(
                        "{key}=true (line {line}): zkrs makes no reverse DNS look-ups; a peer's certificate must \
                         name its IP address (or, for the peer dialled, its host name as server.N writes it)"
                    );
                }
            }
            "sslProvider" => tracing::info!("{key}={value} (line {line}): zkrs always uses rustls; ignored"),
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn take_client(&mut self, key: &str, value: &str, line: u32) -> Result<bool, String> {
        match key {
            "client.portUnification" => self.port_unification = bool_of(key, value)?,
            "client.certReload" => self.cert_reload = bool_of(key, value)?,
            "X509AuthenticationProvider.superUser" => self.x509_super_user = Some(value.to_string()),
            "serverCnxnFactory" => {
                // Apache needs its Netty factory for TLS; zkrs has one connection layer that does both.
                tracing::info!("serverCnxnFactory={value} (line {line}): zkrs's connection layer serves TLS and plain alike");
            }
            k if k.starts_with("authProvider.")
                && value.trim() == "org.apache.zookeeper.server.auth.X509AuthenticationProvider" =>
            {
                self.x509_provider_named = true;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether TLS is served at all: a secure client port, or port unification on the plain one.
    pub fn wanted(&self, secure_port: bool) -> bool {
        secure_port || self.port_unification
    }

    /// Whether the `x509` scheme exists: TLS is served, or a line names the provider.
    pub fn x509_enabled(&self, secure_port: bool) -> bool {
        self.wanted(secure_port) || self.x509_provider_named
    }

    /// Checks what can be checked without reading files, when TLS is served. Errors: the key,
    /// its line and what is wrong.
    pub fn validate(&self) -> Result<(), (String, Option<u32>, String)> {
        // An error about the trust store points at the clientAuth line when there is one.
        let line = (self.client_auth.line > 0).then_some(self.client_auth.line);
        if self.is_client() {
            let trust_why = (self.client_auth.value != ClientAuth::None).then_some((
                "checks peers' certificates against the authorities in this PEM file, unless ssl.clientAuth=none",
                line,
            ));
            self.check_stores("a TLS client port (secureClientPort or client.portUnification)", trust_why)
        } else {
            // The quorum's connecting side checks the accepting side's chain whatever clientAuth says.
            self.check_stores(
                "TLS between ensemble members (sslQuorum or portUnification)",
                Some(("checks peers' certificates against the authorities in this PEM file", line)),
            )
        }
    }

    /// Checks the stores the AdminServer's HTTPS takes from these (`ssl.quorum.`) keys, for
    /// `wanted_by` (the `admin.*` key that asks for HTTPS and its line). Both stores must be set,
    /// as Apache's AdminServer loads both whether or not it asks for client certificates.
    ///
    /// Errors: the key, its line and what is wrong.
    pub fn validate_admin_https(&self, wanted_by: &str) -> Result<(), (String, Option<u32>, String)> {
        self.check_stores(
            &format!("the AdminServer's HTTPS ({wanted_by})"),
            Some((
                "loads the authorities of this PEM file (client certificates are checked against them \
                 with admin.needClientAuth)",
                None,
            )),
        )
    }

    /// The key store must be set; the trust store too when `trust_why` says why it is needed (and
    /// which line an error points at); each that is set must be PEM.
    fn check_stores(
        &self,
        user: &str,
        trust_why: Option<(&str, Option<u32>)>,
    ) -> Result<(), (String, Option<u32>, String)> {
        let Some(loc) = &self.key_store.location else {
            return Err((
                self.key("keyStore.location"),
                None,
                format!("is not set; {user} needs this server's key and certificate chain in a PEM file"),
            ));
        };
        store_type(&self.key_store, &self.key("keyStore"), loc)?;
        if let Some(t) = &self.trust_store.location {
            store_type(&self.trust_store, &self.key("trustStore"), t)?;
        } else if let Some((why, line)) = trust_why {
            return Err((self.key("trustStore.location"), line, format!("is not set; {user} {why}")));
        }
        Ok(())
    }
}

/// The store's type: `.type` if set, else by extension as Apache guesses it; anything but PEM is
/// an error naming the key, its line and how to convert the file.
fn store_type(
    store: &StoreConfig,
    prefix: &str,
    location: &Setting<PathBuf>,
) -> Result<StoreType, (String, Option<u32>, String)> {
    let (key, line, kind) = match &store.store_type {
        Some(t) if !t.value.is_empty() => {
            let key = format!("{prefix}.type");
            let kind = match t.value.to_ascii_uppercase().as_str() {
                "PEM" => StoreType::Pem,
                "JKS" => StoreType::Jks,
                "PKCS12" => StoreType::Pkcs12,
                "BCFKS" => StoreType::Bcfks,
                _ => {
                    return Err((
                        key,
                        Some(t.line),
                        format!("\"{}\" is not one of JKS, PEM, PKCS12, BCFKS", t.value),
                    ))
                }
            };
            (key, t.line, kind)
        }
        _ => {
            let key = format!("{prefix}.location");
            let name = location.value.to_string_lossy().to_ascii_lowercase();
            let kind = if name.ends_with(".pem") {
                StoreType::Pem
            } else if name.ends_with(".jks") {
                StoreType::Jks
            } else if name.ends_with(".p12") {
                StoreType::Pkcs12
            } else if name.ends_with(".bcfks") {
                StoreType::Bcfks
            } else {
                return Err((
                    key,
                    Some(location.line),
                    format!(
                        "cannot tell the file's type from its name {}; set {prefix}.type=PEM",
                        location.value.display()
                    ),
                ));
            };
            (key, location.line, kind)
        }
    };
    if kind != StoreType::Pem {
        let how = match kind {
            StoreType::Jks => {
                "convert it: keytool -importkeystore -srckeystore store.jks -destkeystore store.p12 \
                 -deststoretype PKCS12, then openssl pkcs12 -in store.p12 -nodes -out store.pem"
            }
            _ => "convert it: openssl pkcs12 -in store.p12 -nodes -out store.pem",
        };
        return Err((
            key,
            Some(line),
            format!("{kind:?} stores are not read by zkrs, only PEM files (type PEM); {how}, and set {prefix}.type=PEM"),
        ));
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(lines: &[(&str, &str)]) -> SslConfig {
        let mut c = SslConfig::default();
        for (i, (k, v)) in lines.iter().enumerate() {
            assert!(c.take(k, v, i as u32 + 1).unwrap(), "{k}");
        }
        c
    }

    #[test]
    fn keys_and_defaults() {
        let c = with(&[
            ("ssl.keyStore.location", "/k.pem"),
            ("ssl.keyStore.password", "secret"),
            ("ssl.trustStore.location", "/t.pem"),
            ("ssl.clientAuth", "WANT"),
            ("ssl.enabledProtocols", "TLSv1.2, TLSv1.3,"),
            ("client.portUnification", "true"),
        ]);
        assert_eq!(c.client_auth.value, ClientAuth::Want);
        assert_eq!(c.enabled_protocols.as_ref().unwrap().value, ["TLSv1.2", "TLSv1.3"]);
        assert!(c.port_unification && c.x509_enabled(false));
        assert!(!format!("{c:?}").contains("secret"));
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(SslConfig::default().client_auth.value, ClientAuth::Need);
        assert!(!SslConfig::default().x509_enabled(false));
        assert!(SslConfig::default().x509_enabled(true));
        let mut c = SslConfig::default();
        assert!(!c.take("clientPort", "1", 1).unwrap());
        assert!(c.take("ssl.clientAuth", "maybe", 1).is_err());
        assert!(c.take("ssl.crl", "true", 1).is_err());
        assert!(c.take("ssl.crl", "false", 1).unwrap());
    }

    #[test]
    fn prefixes_keep_the_client_and_the_quorum_apart() {
        let mut client = SslConfig::default();
        let mut quorum = SslConfig::quorum();
        assert!(!client.take("ssl.quorum.keyStore.location", "/q.pem", 1).unwrap());
        assert!(quorum.take("ssl.quorum.keyStore.location", "/q.pem", 1).unwrap());
        assert!(!quorum.take("ssl.keyStore.location", "/c.pem", 2).unwrap());
        assert!(!quorum.take("client.portUnification", "true", 3).unwrap());
        assert!(quorum.take("ssl.quorum.hostnameVerification", "false", 4).unwrap());
        assert!(!quorum.hostname_verification && client.hostname_verification);
        let e = quorum.validate().unwrap_err();
        assert_eq!((e.0.as_str(), e.1), ("ssl.quorum.trustStore.location", None));
        assert!(quorum
            .take("ssl.quorum.context.supplier.class", "x.Y", 5)
            .unwrap_err()
            .contains("ssl.quorum."));
    }

    #[test]
    fn stores_must_be_pem() {
        let e = with(&[]).validate().unwrap_err();
        assert_eq!(e.0, "ssl.keyStore.location");
        let e =
            with(&[("ssl.keyStore.location", "/k.p12"), ("ssl.clientAuth", "none")]).validate().unwrap_err();
        assert_eq!((e.0.as_str(), e.1), ("ssl.keyStore.location", Some(1)));
        assert!(e.2.contains("Pkcs12") && e.2.contains("openssl pkcs12"), "{}", e.2);
        let e = with(&[("ssl.keyStore.location", "/k.pem"), ("ssl.keyStore.type", "JKS")])
            .validate()
            .unwrap_err();
        assert_eq!((e.0.as_str(), e.1), ("ssl.keyStore.type", Some(2)));
        let e = with(&[("ssl.keyStore.location", "/k.crt")]).validate().unwrap_err();
        assert!(e.2.contains("set ssl.keyStore.type=PEM"), "{}", e.2);
        let e = with(&[("ssl.keyStore.location", "/k.crt"), ("ssl.keyStore.type", "pem")])
            .validate()
            .unwrap_err();
        assert_eq!(e.0, "ssl.trustStore.location");
        let ok = with(&[
            ("ssl.keyStore.location", "/k.crt"),
            ("ssl.keyStore.type", "pem"),
            ("ssl.clientAuth", "none"),
        ]);
        assert_eq!(ok.validate(), Ok(()));
    }
}
