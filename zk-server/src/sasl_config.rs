//! SASL and authentication enforcement settings: the zoo.cfg keys, the JVM system properties
//! operators set them with (`SERVER_JVMFLAGS`, `JVMFLAGS`), and the JAAS file of users.
//!
//! Apache reads these as system properties; a zoo.cfg key `k` becomes `zookeeper.k`, set after
//! the JVM's own `-D` flags, so zoo.cfg wins. zkrs reads the same places in the same order:
//! `SERVER_JVMFLAGS`, then `JVMFLAGS` (zkServer.sh runs Java with `$SERVER_JVMFLAGS $JVMFLAGS`,
//! and the last `-D` of a name wins), then zoo.cfg. The JAAS file, which Apache takes only from
//! `-Djava.security.auth.login.config`, may also be named by the zkrs zoo.cfg key
//! `java.security.auth.login.config`.

use crate::ssl_config::Setting;
use std::collections::HashMap;
use std::path::Path;
use zk_proto::jaas::{self, JaasConfig, JaasError};

/// Apache's SASL authentication provider class, as `authProvider.N` names it.
pub const SASL_PROVIDER_CLASS: &str = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";
/// The login module whose `user_NAME="password"` options are DIGEST-MD5 users.
pub const DIGEST_LOGIN_MODULE: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";
/// The system property naming the JAAS file.
pub const LOGIN_CONFIG_KEY: &str = "java.security.auth.login.config";
/// Most DIGEST-MD5 users taken from a JAAS file.
pub const MAX_USERS: usize = 10_000;

/// The SASL keys of a zoo.cfg, with their lines, as read (validated by [`SaslSettings::resolve`]).
#[derive(Debug, Clone, Default)]
pub struct SaslConfig {
    /// `java.security.auth.login.config` (a zkrs zoo.cfg key).
    pub login_config: Option<Setting<String>>,
    /// `authProvider.N=...SASLAuthenticationProvider` lines.
    pub provider: Option<Setting<String>>,
    /// `enforce.auth.enabled`.
    pub enforce_enabled: Option<Setting<String>>,
    /// `enforce.auth.schemes`.
    pub enforce_schemes: Option<Setting<String>>,
    /// `sessionRequireClientSASLAuth`.
    pub session_require_sasl: Option<Setting<String>>,
    /// `superUser` and `superUser.*` (Apache's `zookeeper.superUser`).
    pub super_users: Vec<Setting<String>>,
    /// `sasl.serverconfig`: the JAAS section with the users (default `Server`).
    pub server_section: Option<Setting<String>>,
    /// `allowSaslFailedClients`.
    pub allow_failed: Option<Setting<String>>,
    /// `kerberos.removeHostFromPrincipal`.
    pub remove_host: Option<Setting<String>>,
    /// `kerberos.removeRealmFromPrincipal`.
    pub remove_realm: Option<Setting<String>>,
    /// `security.auth_to_local` (Apache's `zookeeper.security.auth_to_local`).
    pub auth_to_local: Option<Setting<String>>,
    /// `quorum.auth.enableSasl`, `quorum.auth.serverRequireSasl`,
    /// `quorum.auth.learnerRequireSasl`, `quorum.auth.learner.saslLoginContext`,
    /// `quorum.auth.server.saslLoginContext`, `quorum.auth.kerberos.servicePrincipal`,
    /// `quorum.cnxn.threads.size`: SASL
    /// between ensemble members (Apache reads these from zoo.cfg only), by key.
    pub quorum: HashMap<&'static str, Setting<String>>,
}

/// The zoo.cfg keys of quorum SASL.
const QUORUM_KEYS: [&str; 7] = [
    QUORUM_ENABLE,
    QUORUM_SERVER_REQUIRED,
    QUORUM_LEARNER_REQUIRED,
    "quorum.auth.learner.saslLoginContext",
    "quorum.auth.server.saslLoginContext",
    QUORUM_SERVICE_PRINCIPAL,
    QUORUM_CNXN_THREADS,
];
const QUORUM_SERVICE_PRINCIPAL: &str = "quorum.auth.kerberos.servicePrincipal";
const QUORUM_CNXN_THREADS: &str = "quorum.cnxn.threads.size";
/// Apache's default `quorum.auth.kerberos.servicePrincipal`.
pub const DEFAULT_QUORUM_SERVICE_PRINCIPAL: &str = "zkquorum/localhost";
/// Apache's default (and smallest effective) `quorum.cnxn.threads.size`.
pub const DEFAULT_QUORUM_CNXN_THREADS: u32 = 20;
const QUORUM_ENABLE: &str = "quorum.auth.enableSasl";
const QUORUM_SERVER_REQUIRED: &str = "quorum.auth.serverRequireSasl";
const QUORUM_LEARNER_REQUIRED: &str = "quorum.auth.learnerRequireSasl";

impl SaslConfig {
    /// Takes a zoo.cfg key if it is one of these; `Ok(false)` leaves it to others.
    pub fn take(&mut self, key: &str, value: &str, line: u32) -> Result<bool, String> {
        let s = Setting { value: value.to_string(), line };
        match key {
            LOGIN_CONFIG_KEY => self.login_config = Some(s),
            k if k.starts_with("authProvider.") && value.trim() == SASL_PROVIDER_CLASS => {
                self.provider = Some(s)
            }
            "enforce.auth.enabled" => self.enforce_enabled = Some(s),
            "enforce.auth.schemes" => self.enforce_schemes = Some(s),
            "sessionRequireClientSASLAuth" => self.session_require_sasl = Some(s),
            "sasl.serverconfig" => self.server_section = Some(s),
            "allowSaslFailedClients" => self.allow_failed = Some(s),
            "kerberos.removeHostFromPrincipal" => self.remove_host = Some(s),
            "kerberos.removeRealmFromPrincipal" => self.remove_realm = Some(s),
            "security.auth_to_local" => self.auth_to_local = Some(s),
            k if k == "superUser" || k.starts_with("superUser.") => self.super_users.push(s),
            k => match QUORUM_KEYS.iter().find(|q| **q == k) {
                Some(q) => {
                    self.quorum.insert(q, s);
                }
                None => return Ok(false),
            },
        }
        Ok(true)
    }
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone)]
enum Origin {
    Line(String, u32),
    Env(&'static str, String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Line(k, l) => write!(f, "{k} (zoo.cfg line {l})"),
            Origin::Env(var, prop) => write!(f, "-D{prop} in {var}"),
        }
    }
}

/// The resolved settings the server runs with. `Debug` lists the user names, never a password.
#[derive(Clone, Default)]
pub struct SaslSettings {
    /// DIGEST-MD5 users (name to password) from the JAAS file's server section; `None` when no
    /// JAAS file is configured, or when the section logs in with Kerberos.
    pub users: Option<HashMap<String, String>>,
    /// SASL GSSAPI (Kerberos): the server section uses `Krb5LoginModule`. With neither this nor
    /// `users`, SASL requests get Apache's null-token answer.
    pub kerberos: Option<crate::kerberos::KerberosServer>,
    /// Whether the `sasl` scheme is registered (`authProvider.N` names Apache's provider): `sasl`
    /// ACL entries are accepted and matched.
    pub provider: bool,
    /// `zookeeper.superUser`: SASL users who are also `super`.
    pub super_users: Vec<String>,
    /// With enforcement on, the schemes one of which a connection must have authenticated with
    /// before any request other than auth and SASL (`None`: not enforced).
    pub enforce_schemes: Option<Vec<String>>,
    /// Enforcement covers `sasl`: a failed SASL exchange is SESSIONCLOSEDREQUIRESASLAUTH.
    pub sasl_required: bool,
    /// `allowSaslFailedClients`: a failed SASL exchange keeps the connection (when SASL is not
    /// required).
    pub allow_failed: bool,
}

impl std::fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let users: Option<Vec<&String>> = self.users.as_ref().map(|u| u.keys().collect());
        f.debug_struct("SaslSettings")
            .field("users", &users)
            .field("kerberos", &self.kerberos)
            .field("provider", &self.provider)
            .field("super_users", &self.super_users)
            .field("enforce_schemes", &self.enforce_schemes)
            .field("sasl_required", &self.sasl_required)
            .field("allow_failed", &self.allow_failed)
            .finish()
    }
}

impl SaslSettings {
    /// Resolves `cfg` on top of the system properties in `SERVER_JVMFLAGS` and `JVMFLAGS`
    /// (`env` reads a variable), loading the JAAS file when one is named. `x509_enabled` says
    /// whether the `x509` scheme exists (for `enforce.auth.schemes`).
    ///
    /// Errors name the key and where it was set: an enforced scheme with no provider, an empty
    /// scheme list, a JAAS file that cannot be read or parsed (file and line), or one without
    /// the server section.
    pub fn resolve(
        cfg: &SaslConfig,
        env: &dyn Fn(&str) -> Option<String>,
        x509_enabled: bool,
    ) -> Result<SaslSettings, String> {
        let mut props = jvm_properties(env);
        let mut from_cfg = |prop: &str, key: &str, s: &Option<Setting<String>>| {
            if let Some(s) = s {
                props
                    .insert(prop.to_string(), (s.value.trim().to_string(), Origin::Line(key.into(), s.line)));
            }
        };
        from_cfg(LOGIN_CONFIG_KEY, LOGIN_CONFIG_KEY, &cfg.login_config);
        from_cfg("zookeeper.enforce.auth.enabled", "enforce.auth.enabled", &cfg.enforce_enabled);
        from_cfg("zookeeper.enforce.auth.schemes", "enforce.auth.schemes", &cfg.enforce_schemes);
        from_cfg(
            "zookeeper.sessionRequireClientSASLAuth",
            "sessionRequireClientSASLAuth",
            &cfg.session_require_sasl,
        );
        from_cfg("zookeeper.sasl.serverconfig", "sasl.serverconfig", &cfg.server_section);
        from_cfg("zookeeper.allowSaslFailedClients", "allowSaslFailedClients", &cfg.allow_failed);
        from_cfg(
            "zookeeper.kerberos.removeHostFromPrincipal",
            "kerberos.removeHostFromPrincipal",
            &cfg.remove_host,
        );
        from_cfg(
            "zookeeper.kerberos.removeRealmFromPrincipal",
            "kerberos.removeRealmFromPrincipal",
            &cfg.remove_realm,
        );
        from_cfg("zookeeper.security.auth_to_local", "security.auth_to_local", &cfg.auth_to_local);
        let get = |k: &str| props.get(k);
        let is_true = |k: &str| get(k).is_some_and(|(v, _)| v.eq_ignore_ascii_case("true"));

        let provider = cfg.provider.is_some()
            || props
                .iter()
                .any(|(k, (v, _))| k.starts_with("zookeeper.authProvider.") && v == SASL_PROVIDER_CLASS);
        let mut super_users: Vec<String> = props
            .iter()
            .filter(|(k, _)| *k == "zookeeper.superUser" || k.starts_with("zookeeper.superUser."))
            .map(|(_, (v, _))| v.clone())
            .collect();
        super_users.extend(cfg.super_users.iter().map(|s| s.value.trim().to_string()));

        // Apache's AuthenticationHelper: sessionRequireClientSASLAuth=true means sasl enforced.
        let enforce_schemes = if is_true("zookeeper.sessionRequireClientSASLAuth") {
            if !provider {
                let (_, at) = &props["zookeeper.sessionRequireClientSASLAuth"];
                return Err(format!(
                    "{at}: the sasl scheme is not available; add authProvider.1={SASL_PROVIDER_CLASS}"
                ));
            }
            Some(vec!["sasl".to_string()])
        } else if is_true("zookeeper.enforce.auth.enabled") {
            let Some((list, at)) = get("zookeeper.enforce.auth.schemes") else {
                let (_, at) = &props["zookeeper.enforce.auth.enabled"];
                return Err(format!("{at} is true, so enforce.auth.schemes must name the schemes required"));
            };
            let schemes: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
            for s in &schemes {
                let available = match s.as_str() {
                    "digest" | "ip" => true,
                    "sasl" => provider,
                    "x509" => x509_enabled,
                    _ => false,
                };
                if !available {
                    return Err(format!("{at}: authentication scheme \"{s}\" is not available"));
                }
            }
            Some(schemes)
        } else {
            None
        };
        let sasl_required = enforce_schemes.as_ref().is_some_and(|s| s.iter().any(|s| s == "sasl"));

        let (users, kerberos) = match get(LOGIN_CONFIG_KEY) {
            None => (None, None),
            Some((path, at)) => {
                let section = get("zookeeper.sasl.serverconfig").map_or("Server", |(v, _)| v.as_str());
                // A readable file without the section (one for quorum SASL only) leaves client
                // SASL off, as Apache does; an unreadable one is an error.
                let jaas = read_jaas(Path::new(path)).map_err(|e| format!("{at}: {e}"))?;
                match jaas.section(section) {
                    None => {
                        tracing::info!(
                            "JAAS file {path} has no '{section}' section: SASL for clients is off"
                        );
                        (None, None)
                    }
                    // Apache's server runs GSSAPI when the section's login gave it a Kerberos
                    // principal, DIGEST-MD5 otherwise: one mechanism, never both.
                    Some(modules) => {
                        match modules.iter().find(|m| m.class == crate::kerberos::KRB5_LOGIN_MODULE) {
                            Some(m) => {
                                let kerberos = kerberos_server(&m.options, &props, env).map_err(|e| {
                                    format!("{at}: JAAS file {path}, section '{section}': {e}")
                                })?;
                                (None, Some(kerberos))
                            }
                            None => (
                                Some(
                                    users_of(&jaas, Path::new(path), section)
                                        .map_err(|e| format!("{at}: {e}"))?,
                                ),
                                None,
                            ),
                        }
                    }
                }
            }
        };
        Ok(SaslSettings {
            users,
            kerberos,
            provider,
            super_users,
            enforce_schemes,
            sasl_required,
            allow_failed: is_true("zookeeper.allowSaslFailedClients"),
        })
    }
}

/// System properties from the JVM flags in the environment (`SERVER_JVMFLAGS`, then `JVMFLAGS`),
/// later ones winning.
fn jvm_properties(env: &dyn Fn(&str) -> Option<String>) -> HashMap<String, (String, Origin)> {
    let mut props = HashMap::new();
    for var in ["SERVER_JVMFLAGS", "JVMFLAGS"] {
        if let Some(flags) = env(var) {
            for (k, v) in jaas::system_properties(&flags) {
                props.insert(k.clone(), (v, Origin::Env(var, k)));
            }
        }
    }
    props
}

/// The Kerberos side of client SASL from a `Krb5LoginModule` entry's `options` and the
/// properties `props` (`env` reads `KRB5_CONFIG`): the server's principal and keytab, its accepting credential, and how
/// client principals become ids (`kerberos.removeHostFromPrincipal`,
/// `kerberos.removeRealmFromPrincipal`, the `security.auth_to_local` rules).
///
/// Errors: a login option missing, `auth_to_local` rules that do not parse (naming where they
/// were set and what is wrong), or a keytab the GSSAPI library cannot take the principal's key
/// from.
fn kerberos_server(
    options: &[(String, String)],
    props: &HashMap<String, (String, Origin)>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<crate::kerberos::KerberosServer, String> {
    // Checked here, at start-up: Apache's server reads the rules at its first GSSAPI client and,
    // when they do not parse, fails that client and every later one.
    let rules = match props.get("zookeeper.security.auth_to_local") {
        None => crate::kerberos::AuthToLocal::default(),
        Some((text, at)) => crate::kerberos::AuthToLocal::parse(text).map_err(|e| format!("{at}: {e}"))?,
    };
    let (principal, keytab) = crate::kerberos::login_options(options)?;
    let prop = |k: &str| props.get(k).map(|(v, _)| v.as_str());
    let is_true = |k: &str| prop(k).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let krb5_config = env("KRB5_CONFIG");
    let mapping = crate::kerberos::PrincipalMapping {
        remove_host: is_true("zookeeper.kerberos.removeHostFromPrincipal"),
        remove_realm: is_true("zookeeper.kerberos.removeRealmFromPrincipal"),
        default_realm: crate::kerberos::default_realm(
            prop("java.security.krb5.realm"),
            prop("java.security.krb5.conf"),
            krb5_config.as_deref(),
        ),
        rules,
    };
    let acceptor = crate::kerberos::keytab_acceptor(&principal, &keytab)?;
    tracing::info!(
        "SASL GSSAPI for clients as {principal} (keytab {}); default realm {:?}",
        keytab.display(),
        mapping.default_realm
    );
    Ok(crate::kerberos::KerberosServer { principal, keytab, mapping, acceptor })
}

/// A learner's DIGEST-MD5 credentials (`username`/`password` of the `QuorumLearner` section).
/// `Debug` never shows the password.
#[derive(Clone)]
pub struct LearnerCredentials {
    /// The user name.
    pub username: String,
    /// Its password.
    pub password: String,
}

impl std::fmt::Debug for LearnerCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LearnerCredentials").field("username", &self.username).finish_non_exhaustive()
    }
}

/// Quorum SASL as this server runs it (`quorum.auth.enableSasl=true`). `Debug` lists user
/// names, never a password.
#[derive(Clone)]
pub struct QuorumSasl {
    /// `quorum.auth.learnerRequireSasl`: when set, this server authenticates to every member it
    /// connects to (its leader's quorum port, peers' election ports) with these credentials;
    /// otherwise it connects without authenticating, as Apache's learner then does.
    pub learner: Option<LearnerCredentials>,
    /// `quorum.auth.serverRequireSasl`: a member connecting to this server must authenticate;
    /// otherwise one that does not, or fails, is still let in (with a warning), as in Apache.
    pub server_required: bool,
    /// The users members may authenticate as (`user_NAME="password"` of the `QuorumServer`
    /// section).
    pub users: HashMap<String, String>,
    /// Kerberos as a learner, set when `quorum.auth.learnerRequireSasl` is and the learner
    /// section logs in with `Krb5LoginModule`: this server authenticates with GSSAPI (and
    /// [`QuorumSasl::learner`] is `None`).
    pub learner_kerberos: Option<QuorumKerberosLearner>,
    /// Kerberos as a server: the server section logs in with `Krb5LoginModule`, so members
    /// connecting here authenticate with GSSAPI (and [`QuorumSasl::users`] is empty).
    pub server_kerberos: Option<QuorumKerberosServer>,
    /// Every configured member's host as its `server.N` line names it, by server id: the host a
    /// learner puts in place of `_HOST`, and the hosts a Kerberos learner's principal may name
    /// (Apache's `authzHosts`). Filled in by the ensemble's settings.
    pub hosts: HashMap<i64, String>,
    /// `quorum.cnxn.threads.size` (Apache's default 20; smaller values are raised to it, as
    /// Apache does): the most quorum SASL exchanges this server's election port runs at once.
    pub cnxn_threads: u32,
}

/// A learner's Kerberos login (`Krb5LoginModule` in the learner section) and whom it asks for.
#[derive(Debug, Clone)]
pub struct QuorumKerberosLearner {
    /// Its principal (`principal`), such as `zkquorum/host1@REALM`.
    pub principal: String,
    /// The keytab with its key (`keyTab`).
    pub keytab: std::path::PathBuf,
    /// `quorum.auth.kerberos.servicePrincipal` (default `zkquorum/localhost`), `_HOST` still in
    /// it.
    pub service_principal: String,
    /// The realm added to a service principal without one: `-Dzookeeper.server.realm`, else the
    /// learner principal's realm, as Apache's learner does.
    pub server_realm: Option<String>,
}

impl QuorumKerberosLearner {
    /// The service principal asked for when connecting to the member configured as `host`:
    /// `_HOST` replaced as Apache does, and the realm added when it has none.
    pub fn service_principal_for(&self, host: &str) -> String {
        let p = zk_quorum::auth::service_principal_for(&self.service_principal, host);
        match &self.server_realm {
            Some(realm) if !p.contains('@') => format!("{p}@{realm}"),
            _ => p,
        }
    }
}

/// A server's Kerberos login for accepting members (`Krb5LoginModule` in the server section).
#[derive(Clone)]
pub struct QuorumKerberosServer {
    /// Its principal (`principal`).
    pub principal: String,
    /// The keytab (`keyTab`).
    pub keytab: std::path::PathBuf,
    /// Accepting contexts with the keytab's keys.
    pub acceptor: std::sync::Arc<dyn crate::kerberos::GssAcceptor>,
}

impl std::fmt::Debug for QuorumKerberosServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumKerberosServer")
            .field("principal", &self.principal)
            .field("keytab", &self.keytab)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for QuorumSasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let users: Vec<&String> = self.users.keys().collect();
        f.debug_struct("QuorumSasl")
            .field("learner", &self.learner)
            .field("server_required", &self.server_required)
            .field("users", &users)
            .field("learner_kerberos", &self.learner_kerberos)
            .field("server_kerberos", &self.server_kerberos)
            .field("hosts", &self.hosts)
            .field("cnxn_threads", &self.cnxn_threads)
            .finish()
    }
}

impl QuorumSasl {
    /// The hosts a Kerberos learner's principal may name: every configured member's.
    pub fn authorized_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = self.hosts.values().cloned().collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// Resolves the quorum SASL keys of `cfg`, reading the JAAS file named as for client SASL
    /// (zoo.cfg's `java.security.auth.login.config`, else the JVM flags in the environment).
    /// `Ok(None)` when `quorum.auth.enableSasl` is not true.
    ///
    /// Errors name the key and line: a value other than true/false; a required side without
    /// `quorum.auth.enableSasl` (or the server side required without the learner side), as
    /// Apache refuses them; no JAAS file; a JAAS file without the learner or server section, or
    /// whose modules are neither DIGEST-MD5 nor Kerberos; a Kerberos login without its keytab or
    /// principal, or a server keytab without the principal's key; a `quorum.cnxn.threads.size`
    /// that is not a number.
    pub fn resolve(
        cfg: &SaslConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<QuorumSasl>, String> {
        let flag = |key: &str| -> Result<(bool, String), String> {
            match cfg.quorum.get(key) {
                None => Ok((false, key.to_string())),
                Some(s) => {
                    let at = format!("{key} (zoo.cfg line {})", s.line);
                    let v = s.value.trim();
                    if v.eq_ignore_ascii_case("true") {
                        Ok((true, at))
                    } else if v.eq_ignore_ascii_case("false") {
                        Ok((false, at))
                    } else {
                        Err(format!("{at}: invalid option \"{v}\"; choose 'true' or 'false'"))
                    }
                }
            }
        };
        let (enabled, _) = flag(QUORUM_ENABLE)?;
        let (server_required, server_at) = flag(QUORUM_SERVER_REQUIRED)?;
        let (learner_required, learner_at) = flag(QUORUM_LEARNER_REQUIRED)?;
        if !enabled && server_required {
            return Err(format!(
                "{server_at}: {QUORUM_ENABLE} is disabled, so cannot enable {QUORUM_SERVER_REQUIRED}"
            ));
        }
        if !enabled && learner_required {
            return Err(format!(
                "{learner_at}: {QUORUM_ENABLE} is disabled, so cannot enable {QUORUM_LEARNER_REQUIRED}"
            ));
        }
        if !learner_required && server_required {
            return Err(format!(
                "{server_at}: {QUORUM_LEARNER_REQUIRED} is disabled, so cannot enable {QUORUM_SERVER_REQUIRED}"
            ));
        }
        let cnxn_threads = match cfg.quorum.get(QUORUM_CNXN_THREADS) {
            None => DEFAULT_QUORUM_CNXN_THREADS,
            Some(s) => {
                let n: i64 = s.value.trim().parse().map_err(|_| {
                    format!(
                        "{QUORUM_CNXN_THREADS} (zoo.cfg line {}): \"{}\" is not a number",
                        s.line,
                        s.value.trim()
                    )
                })?;
                // Apache keeps its default for smaller values; a larger one is bounded by the
                // sockets a process may hold.
                n.clamp(i64::from(DEFAULT_QUORUM_CNXN_THREADS), 4096) as u32
            }
        };
        if !enabled {
            return Ok(None);
        }
        let context = |key: &str, default: &'static str| {
            cfg.quorum.get(key).map_or(default.to_string(), |s| s.value.trim().to_string())
        };
        let learner_section = context("quorum.auth.learner.saslLoginContext", "QuorumLearner");
        let server_section = context("quorum.auth.server.saslLoginContext", "QuorumServer");
        let mut props = jvm_properties(env);
        if let Some(s) = &cfg.login_config {
            props.insert(
                LOGIN_CONFIG_KEY.to_string(),
                (s.value.trim().to_string(), Origin::Line(LOGIN_CONFIG_KEY.into(), s.line)),
            );
        }
        let Some((path, at)) = props.get(LOGIN_CONFIG_KEY) else {
            return Err(format!(
                "{QUORUM_ENABLE}: quorum SASL needs a JAAS file with sections {learner_section} and \
                 {server_section}; name it with -D{LOGIN_CONFIG_KEY}=FILE in SERVER_JVMFLAGS or a \
                 {LOGIN_CONFIG_KEY} line"
            ));
        };
        let path = Path::new(path);
        let jaas = read_jaas(path).map_err(|e| format!("{at}: {e}"))?;
        let section = |name: &str| -> Result<Vec<&jaas::LoginModule>, String> {
            let modules = jaas.section(name).ok_or_else(|| {
                format!(
                    "{at}: JAAS file {} has no '{name}' section: quorum SASL cannot start",
                    path.display()
                )
            })?;
            if let Some(m) = modules
                .iter()
                .find(|m| m.class != DIGEST_LOGIN_MODULE && m.class != crate::kerberos::KRB5_LOGIN_MODULE)
            {
                return Err(format!(
                    "{at}: JAAS section '{name}' uses {}; zkrs authenticates ensemble members with \
                     DIGEST-MD5 ({DIGEST_LOGIN_MODULE}) or Kerberos ({})",
                    m.class,
                    crate::kerberos::KRB5_LOGIN_MODULE
                ));
            }
            Ok(modules)
        };
        // Apache's mechanism: GSSAPI when the section's login gave a Kerberos principal (a
        // Krb5LoginModule entry), DIGEST-MD5 otherwise; each side by its own section.
        let krb5 = |modules: &[&jaas::LoginModule]| {
            modules.iter().find(|m| m.class == crate::kerberos::KRB5_LOGIN_MODULE).map(|m| m.options.clone())
        };
        let learner_modules = section(&learner_section)?;
        let server_modules = section(&server_section)?;
        let service_principal = cfg
            .quorum
            .get(QUORUM_SERVICE_PRINCIPAL)
            .map_or(DEFAULT_QUORUM_SERVICE_PRINCIPAL.to_string(), |s| s.value.trim().to_string());
        let learner_kerberos = match krb5(&learner_modules) {
            None => None,
            Some(options) => {
                let (principal, keytab) = crate::kerberos::login_options(&options).map_err(|e| {
                    format!("{at}: JAAS file {}, section '{learner_section}': {e}", path.display())
                })?;
                let server_realm = props
                    .get("zookeeper.server.realm")
                    .map(|(v, _)| v.clone())
                    .or_else(|| principal.rsplit_once('@').map(|(_, r)| r.to_string()));
                // Apache logs in with the section at start-up and exits when it cannot (a missing
                // keytab, a key the KDC refuses). zkrs checks the keytab here, without the KDC:
                // it must hold a key for the principal. The KDC is asked at each connection, so
                // one that is down or refuses a stale key keeps this server out (logged), not
                // stopped. Checked either way; used only when this server authenticates. (A
                // build without the `kerberos` feature fails here, saying how to get it.)
                crate::kerberos::keytab_acceptor(&principal, &keytab).map_err(|e| {
                    format!("{at}: JAAS file {}, section '{learner_section}': {e}", path.display())
                })?;
                learner_required.then_some(QuorumKerberosLearner {
                    principal,
                    keytab,
                    service_principal,
                    server_realm,
                })
            }
        };
        let server_kerberos = match krb5(&server_modules) {
            None => None,
            Some(options) => {
                let in_section = |e: String| {
                    format!("{at}: JAAS file {}, section '{server_section}': {e}", path.display())
                };
                let (principal, keytab) = crate::kerberos::login_options(&options).map_err(in_section)?;
                let acceptor = crate::kerberos::keytab_acceptor(&principal, &keytab).map_err(in_section)?;
                Some(QuorumKerberosServer { principal, keytab, acceptor })
            }
        };
        let option = |k: &str| {
            learner_modules
                .iter()
                .flat_map(|m| m.options.iter())
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        // The section must exist either way (Apache logs in with it at start-up); the
        // credentials are needed only when this server authenticates.
        let learner = match (learner_required, option("username"), option("password")) {
            (false, _, _) => None,
            _ if learner_kerberos.is_some() => None,
            (true, Some(username), Some(password)) => Some(LearnerCredentials { username, password }),
            (true, _, _) => {
                return Err(format!(
                "{at}: JAAS section '{learner_section}' of {} needs username=\"...\" and password=\"...\"",
                path.display()
            ))
            }
        };
        let users = match &server_kerberos {
            Some(_) => HashMap::new(),
            None => users_of(&jaas, path, &server_section).map_err(|e| format!("{at}: {e}"))?,
        };
        let learner_mech = match &learner_kerberos {
            Some(k) => format!("GSSAPI as {} for {}", k.principal, k.service_principal),
            None => "DIGEST-MD5".to_string(),
        };
        let server_mech = match &server_kerberos {
            Some(k) => format!("GSSAPI as {}", k.principal),
            None => format!("DIGEST-MD5, {} user(s) from section {server_section}", users.len()),
        };
        tracing::info!(
            "quorum SASL: learners {} ({learner_mech}), members connecting here {} ({server_mech}); \
             quorum.cnxn.threads.size {cnxn_threads}",
            if learner_required { "authenticate" } else { "do not authenticate" },
            if server_required { "must authenticate" } else { "may authenticate" },
        );
        Ok(Some(QuorumSasl {
            learner,
            server_required,
            users,
            learner_kerberos,
            server_kerberos,
            hosts: HashMap::new(),
            cnxn_threads,
        }))
    }
}

/// Reads and parses the JAAS file `file` (at most [`jaas::MAX_FILE_BYTES`]).
///
/// Errors: the file cannot be read, is too big, or does not parse (naming the file, and the line
/// where there is one).
fn read_jaas(file: &Path) -> Result<JaasConfig, JaasError> {
    let meta = std::fs::metadata(file).map_err(|e| JaasError::unreadable(file, e))?;
    jaas::check_file_size(file, meta.len())?;
    let text = std::fs::read_to_string(file).map_err(|e| JaasError::unreadable(file, e))?;
    JaasConfig::parse_file(file, &text)
}

/// The DIGEST-MD5 users of `section` in `jaas` (read from `path`): every `user_NAME="password"`
/// option of its modules.
fn users_of(jaas: &JaasConfig, path: &Path, section: &str) -> Result<HashMap<String, String>, String> {
    let Some(modules) = jaas.section(section) else {
        return Err(format!("JAAS file {} has no '{section}' section: SASL cannot start", path.display()));
    };
    let mut users = HashMap::new();
    for m in modules {
        if m.class != DIGEST_LOGIN_MODULE {
            tracing::warn!(
                "JAAS file {}: login module {} in section {section} is not used by zkrs (it serves \
                 DIGEST-MD5 users from {DIGEST_LOGIN_MODULE})",
                path.display(),
                m.class
            );
        }
        for (k, v) in &m.options {
            if let Some(name) = k.strip_prefix("user_") {
                if users.len() == MAX_USERS {
                    return Err(format!("JAAS file {} lists more than {MAX_USERS} users", path.display()));
                }
                users.insert(name.to_string(), v.clone());
            }
        }
    }
    tracing::info!("SASL DIGEST-MD5: {} user(s) from section {section} of {}", users.len(), path.display());
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lines: &[(&str, &str)]) -> SaslConfig {
        let mut c = SaslConfig::default();
        for (i, (k, v)) in lines.iter().enumerate() {
            assert!(c.take(k, v, i as u32 + 1).unwrap(), "{k}");
        }
        c
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn users_come_from_the_jvm_flags_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jaas.conf");
        std::fs::write(
            &p,
            format!("Server {{ {DIGEST_LOGIN_MODULE} required user_bob=\"bobpw\" user_al=x; }};"),
        )
        .unwrap();
        let flags =
            format!("-Xmx1g -Djava.security.auth.login.config={} -Dzookeeper.superUser=al", p.display());
        let env = |v: &str| (v == "SERVER_JVMFLAGS").then(|| flags.clone());
        let s = SaslSettings::resolve(&SaslConfig::default(), &env, false).unwrap();
        assert!(!format!("{s:?}").contains("bobpw"), "Debug never shows a password");
        let users = s.users.unwrap();
        assert_eq!(users["bob"], "bobpw");
        assert_eq!(users["al"], "x");
        assert_eq!(s.super_users, vec!["al".to_string()]);
        assert!(s.enforce_schemes.is_none());
        // zoo.cfg's key wins over the environment's.
        let c = cfg(&[(LOGIN_CONFIG_KEY, "/nonexistent/jaas")]);
        let e = SaslSettings::resolve(&c, &env, false).unwrap_err();
        assert!(e.contains("zoo.cfg line 1") && e.contains("/nonexistent/jaas"), "{e}");
        // No JAAS anywhere: no users.
        assert!(SaslSettings::resolve(&SaslConfig::default(), &no_env, false).unwrap().users.is_none());
    }

    #[test]
    fn jaas_errors_name_file_line_and_section() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jaas.conf");
        std::fs::write(&p, "Server {\n m required\n user_bob=;\n};").unwrap();
        let c = cfg(&[(LOGIN_CONFIG_KEY, p.to_str().unwrap())]);
        let e = SaslSettings::resolve(&c, &no_env, false).unwrap_err();
        assert!(e.contains(&format!("{} line 3", p.display())), "{e}");
        // A file without the section (say, quorum SASL only) leaves client SASL off, as in Apache.
        std::fs::write(&p, "Client { m required; };").unwrap();
        assert!(SaslSettings::resolve(&c, &no_env, false).unwrap().users.is_none());
    }

    #[test]
    fn enforcement_needs_available_schemes() {
        let on = |schemes: &str| cfg(&[("enforce.auth.enabled", "true"), ("enforce.auth.schemes", schemes)]);
        let e = SaslSettings::resolve(&on("sasl"), &no_env, false).unwrap_err();
        assert!(e.contains("enforce.auth.schemes (zoo.cfg line 2)") && e.contains("\"sasl\""), "{e}");
        let mut c = on("sasl, digest");
        c.take("authProvider.1", SASL_PROVIDER_CLASS, 3).unwrap();
        let s = SaslSettings::resolve(&c, &no_env, false).unwrap();
        assert_eq!(s.enforce_schemes, Some(vec!["sasl".to_string(), "digest".to_string()]));
        assert!(s.sasl_required && s.provider);
        assert!(SaslSettings::resolve(&on("x509"), &no_env, false).is_err());
        assert!(!SaslSettings::resolve(&on("digest"), &no_env, false).unwrap().sasl_required);
        let e = SaslSettings::resolve(&cfg(&[("enforce.auth.enabled", "true")]), &no_env, false).unwrap_err();
        assert!(e.contains("enforce.auth.schemes must"), "{e}");
        // sessionRequireClientSASLAuth, from the environment this time.
        let env = |v: &str| {
            (v == "JVMFLAGS").then(|| {
                format!("-Dzookeeper.sessionRequireClientSASLAuth=true -Dzookeeper.authProvider.sasl={SASL_PROVIDER_CLASS}")
            })
        };
        let s = SaslSettings::resolve(&SaslConfig::default(), &env, false).unwrap();
        assert_eq!(s.enforce_schemes, Some(vec!["sasl".to_string()]));
        let env =
            |v: &str| (v == "JVMFLAGS").then(|| "-Dzookeeper.sessionRequireClientSASLAuth=true".to_string());
        let e = SaslSettings::resolve(&SaslConfig::default(), &env, false).unwrap_err();
        assert!(e.contains("in JVMFLAGS"), "{e}");
    }

    #[test]
    fn kerberos_login_errors_name_the_file_section_and_option() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jaas.conf");
        let c = cfg(&[(LOGIN_CONFIG_KEY, p.to_str().unwrap())]);
        let krb5 = |opts: &str| {
            std::fs::write(
                &p,
                format!("Server {{\n {} required {opts};\n}};", crate::kerberos::KRB5_LOGIN_MODULE),
            )
            .unwrap();
        };
        krb5("useKeyTab=true principal=\"zookeeper/h@R\"");
        let e = SaslSettings::resolve(&c, &no_env, false).unwrap_err();
        assert!(
            e.contains("zoo.cfg line 1") && e.contains("section 'Server'") && e.contains("no keyTab option"),
            "{e}"
        );
        // auth_to_local rules that do not parse are refused, naming where they were set (before
        // the keytab is looked at); rules that parse get as far as the keytab.
        krb5("useKeyTab=true keyTab=\"/nonexistent.keytab\" principal=\"zookeeper/h@R\"");
        let mut rules = cfg(&[(LOGIN_CONFIG_KEY, p.to_str().unwrap())]);
        rules.take("security.auth_to_local", "RULE:[1:$1]s/a/b/L", 2).unwrap();
        let e = SaslSettings::resolve(&rules, &no_env, false).unwrap_err();
        assert!(e.contains("security.auth_to_local (zoo.cfg line 2)") && e.contains("/L"), "{e}");
        let env = |v: &str| {
            (v == "SERVER_JVMFLAGS").then(|| "-Dzookeeper.security.auth_to_local=RULE:[1:$2]".to_string())
        };
        let e = SaslSettings::resolve(&c, &env, false).unwrap_err();
        assert!(e.contains("zookeeper.security.auth_to_local") && e.contains("$0 to $1"), "{e}");
        let mut rules = cfg(&[(LOGIN_CONFIG_KEY, p.to_str().unwrap())]);
        rules.take("security.auth_to_local", "RULE:[1:$1] DEFAULT", 2).unwrap();
        let e = SaslSettings::resolve(&rules, &no_env, false).unwrap_err();
        assert!(!e.contains("auth_to_local"), "{e}");
        // A keytab the library cannot read (or, without the feature, Kerberos at all).
        let e = SaslSettings::resolve(&c, &no_env, false).unwrap_err();
        let expected = if cfg!(feature = "kerberos") { "/nonexistent.keytab" } else { "--features kerberos" };
        assert!(e.contains(expected), "{e}");
    }

    /// A JAAS file with the quorum sections `learner` and `server` (module and options each).
    fn quorum_jaas(dir: &Path, learner: &str, server: &str) -> SaslConfig {
        let p = dir.join("jaas.conf");
        std::fs::write(&p, format!("QuorumLearner {{ {learner}; }};\nQuorumServer {{ {server}; }};\n"))
            .unwrap();
        cfg(&[
            (LOGIN_CONFIG_KEY, p.to_str().unwrap()),
            ("quorum.auth.enableSasl", "true"),
            ("quorum.auth.learnerRequireSasl", "true"),
            ("quorum.auth.serverRequireSasl", "true"),
        ])
    }

    /// A keytab file (MIT's format 0x0502) with one made-up AES-256 key for `principal`
    /// (`name/host@REALM` or `name@REALM`): what the start-up check looks for, no KDC needed.
    fn keytab_for(dir: &Path, principal: &str) -> std::path::PathBuf {
        let (name, realm) = principal.rsplit_once('@').unwrap();
        let counted = |out: &mut Vec<u8>, s: &[u8]| {
            out.extend_from_slice(&u16::try_from(s.len()).unwrap().to_be_bytes());
            out.extend_from_slice(s);
        };
        let components: Vec<&str> = name.split('/').collect();
        let mut entry = Vec::new();
        entry.extend_from_slice(&u16::try_from(components.len()).unwrap().to_be_bytes());
        counted(&mut entry, realm.as_bytes());
        for c in &components {
            counted(&mut entry, c.as_bytes());
        }
        entry.extend_from_slice(&1u32.to_be_bytes()); // KRB5_NT_PRINCIPAL
        entry.extend_from_slice(&0u32.to_be_bytes()); // timestamp
        entry.push(1); // key version
        entry.extend_from_slice(&18u16.to_be_bytes()); // aes256-cts-hmac-sha1-96
        counted(&mut entry, &[7u8; 32]);
        let mut file = vec![0x05, 0x02];
        file.extend_from_slice(&i32::try_from(entry.len()).unwrap().to_be_bytes());
        file.extend_from_slice(&entry);
        let p = dir.join("made-up.keytab");
        std::fs::write(&p, file).unwrap();
        p
    }

    /// Apache's choice of mechanism, side by side: a Krb5LoginModule learner section is
    /// GSSAPI (its principal and keytab, the service principal defaulting to
    /// zkquorum/localhost in the learner's realm); a DigestLoginModule one is DIGEST-MD5.
    #[test]
    fn a_kerberos_learner_section_makes_the_learner_use_gssapi() {
        let dir = tempfile::tempdir().unwrap();
        let keytab = keytab_for(dir.path(), "zkquorum/h1@R");
        let krb5 = format!(
            "{} required useKeyTab=true keyTab=\"{}\" storeKey=true principal=\"zkquorum/h1@R\"",
            crate::kerberos::KRB5_LOGIN_MODULE,
            keytab.display()
        );
        let digest = format!("{DIGEST_LOGIN_MODULE} required user_peer=\"secret\"");
        let c = quorum_jaas(dir.path(), &krb5, &digest);
        if !cfg!(feature = "kerberos") {
            let e = QuorumSasl::resolve(&c, &no_env).unwrap_err();
            assert!(e.contains("QuorumLearner") && e.contains("--features kerberos"), "{e}");
            return;
        }
        let q = QuorumSasl::resolve(&c, &no_env).unwrap().unwrap();
        let k = q.learner_kerberos.as_ref().unwrap();
        assert_eq!((k.principal.as_str(), k.keytab.as_path()), ("zkquorum/h1@R", keytab.as_path()));
        assert_eq!(k.service_principal, DEFAULT_QUORUM_SERVICE_PRINCIPAL);
        assert_eq!(k.service_principal_for("zk2"), "zkquorum/localhost@R");
        assert!(q.learner.is_none() && q.server_kerberos.is_none());
        assert_eq!(q.users["peer"], "secret");
        assert_eq!(q.cnxn_threads, DEFAULT_QUORUM_CNXN_THREADS);
        // _HOST, and the realm of -Dzookeeper.server.realm.
        let mut c = quorum_jaas(dir.path(), &krb5, &digest);
        c.take("quorum.auth.kerberos.servicePrincipal", "zkquorum/_HOST", 9).unwrap();
        let env = |v: &str| (v == "SERVER_JVMFLAGS").then(|| "-Dzookeeper.server.realm=OTHER".to_string());
        let q = QuorumSasl::resolve(&c, &env).unwrap().unwrap();
        assert_eq!(
            q.learner_kerberos.unwrap().service_principal_for("ZK2.example"),
            "zkquorum/zk2.example@OTHER"
        );
    }

    /// A Kerberos server section needs a keytab with the principal's key (checked at start-up),
    /// and its login's options; any module other than the two is refused.
    #[test]
    fn kerberos_quorum_sections_are_checked_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let digest = format!("{DIGEST_LOGIN_MODULE} required username=\"peer\" password=\"secret\"");
        let krb5 = |opts: &str| format!("{} required {opts}", crate::kerberos::KRB5_LOGIN_MODULE);
        let c = quorum_jaas(
            dir.path(),
            &digest,
            &krb5("useKeyTab=true keyTab=\"/nonexistent.keytab\" principal=\"zkquorum/h@R\""),
        );
        let e = QuorumSasl::resolve(&c, &no_env).unwrap_err();
        let expected = if cfg!(feature = "kerberos") { "/nonexistent.keytab" } else { "--features kerberos" };
        assert!(e.contains("section 'QuorumServer'") && e.contains(expected), "{e}");
        let c = quorum_jaas(dir.path(), &krb5("useKeyTab=true principal=\"p@R\""), &digest);
        let e = QuorumSasl::resolve(&c, &no_env).unwrap_err();
        assert!(e.contains("section 'QuorumLearner'") && e.contains("no keyTab option"), "{e}");
        // The learner's keytab too (Apache logs in with it at start-up and exits when it cannot):
        // a missing file, then a keytab without the principal's key.
        let learner = |keytab: &Path, principal: &str| {
            krb5(&format!("useKeyTab=true keyTab=\"{}\" principal=\"{principal}\"", keytab.display()))
        };
        let nowhere = dir.path().join("nonexistent.keytab");
        let c = quorum_jaas(dir.path(), &learner(&nowhere, "zkquorum/h@R"), &digest);
        let e = QuorumSasl::resolve(&c, &no_env).unwrap_err();
        let expected = if cfg!(feature = "kerberos") { "nonexistent.keytab" } else { "--features kerberos" };
        assert!(e.contains("section 'QuorumLearner'") && e.contains(expected), "{e}");
        let other = keytab_for(dir.path(), "zkquorum/other@R");
        let c = quorum_jaas(dir.path(), &learner(&other, "zkquorum/h@R"), &digest);
        let e = QuorumSasl::resolve(&c, &no_env).unwrap_err();
        let expected = if cfg!(feature = "kerberos") { "zkquorum/h@R" } else { "--features kerberos" };
        assert!(e.contains("section 'QuorumLearner'") && e.contains(expected), "{e}");
        if cfg!(feature = "kerberos") {
            let c = quorum_jaas(dir.path(), &learner(&other, "zkquorum/other@R"), &digest);
            assert!(QuorumSasl::resolve(&c, &no_env).is_ok());
        }
        let c = quorum_jaas(dir.path(), "org.example.Other required", &digest);
        let e = QuorumSasl::resolve(&c, &no_env).unwrap_err();
        assert!(e.contains("org.example.Other") && e.contains("DIGEST-MD5"), "{e}");
    }

    /// quorum.cnxn.threads.size: a number, raised to Apache's 20 when smaller, bounded above.
    #[test]
    fn quorum_cnxn_threads_size_is_a_bounded_number() {
        let dir = tempfile::tempdir().unwrap();
        let digest = format!(
            "{DIGEST_LOGIN_MODULE} required username=\"peer\" password=\"secret\" user_peer=\"secret\""
        );
        for (v, want) in [("5", Ok(20)), ("64", Ok(64)), ("1000000", Ok(4096)), ("many", Err(()))] {
            let mut c = quorum_jaas(dir.path(), &digest, &digest);
            c.take("quorum.cnxn.threads.size", v, 7).unwrap();
            match (QuorumSasl::resolve(&c, &no_env), want) {
                (Ok(q), Ok(n)) => assert_eq!(q.unwrap().cnxn_threads, n, "{v}"),
                (Err(e), Err(())) => assert!(e.contains("quorum.cnxn.threads.size (zoo.cfg line 7)"), "{e}"),
                (r, _) => panic!("{v}: {r:?}"),
            }
        }
    }
}
