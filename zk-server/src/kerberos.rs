//! SASL GSSAPI (Kerberos V5) on the client port: the mechanism of RFC 4752 over an accepting
//! GSS-API context, and the `sasl` id Apache's server derives from the client's principal.
//!
//! The exchange is pure: the GSS-API calls (accepting context tokens, wrapping and unwrapping
//! the security-layer messages) sit behind [`GssAcceptor`] and [`GssContext`], which the
//! `kerberos` feature implements over the system's GSSAPI library (`kerberos_gss`); the core
//! drives [`GssapiExchange`] and its tests stand in a scripted context, with no KDC.
//!
//! The messages, after the context is established (RFC 4752 §3.1):
//! 1. the client answers the server's last context token (if any) with an empty token;
//! 2. the server sends a wrapped 4-byte message: a bit mask of the security layers it offers
//!    (zkrs offers only "no security layer", bit 1, as Apache's server does with its default
//!    quality of protection) and, big-endian in 3 bytes, the largest message it takes;
//! 3. the client answers with a wrapped message: the layer it chose, its own largest message,
//!    then an optional authorization id (UTF-8). The exchange is then complete.

mod auth_to_local;

pub use auth_to_local::AuthToLocal;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The login module of a JAAS section that logs in with Kerberos.
pub const KRB5_LOGIN_MODULE: &str = "com.sun.security.auth.module.Krb5LoginModule";

/// The security-layer bit for "no security layer" (RFC 4752).
const LAYER_NONE: u8 = 1;
/// The largest message the server says it takes (3 bytes), as Apache's server offers.
const MAX_RECEIVE: u32 = 65_536;
/// The longest authorization id taken from a client.
const MAX_AUTHZID: usize = 1_024;

/// Makes one accepting GSS-API context per connection.
pub trait GssAcceptor: Send + Sync {
    /// A fresh context for a connection's first GSSAPI token.
    fn start(&self) -> Box<dyn GssContext>;
}

/// One accepting GSS-API context (the Kerberos V5 mechanism).
pub trait GssContext: Send {
    /// Feeds a context token from the client (`gss_accept_sec_context`).
    ///
    /// Errors: the token is not valid (a ticket for another principal, a key the keytab does not
    /// have, a replay, skew), with the library's message.
    fn accept(&mut self, token: &[u8]) -> Result<Accepted, String>;
    /// Wraps `msg` with integrity only (`gss_wrap`, no confidentiality).
    fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String>;
    /// Unwraps a message from the client (`gss_unwrap`), checking its integrity.
    fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String>;
}

/// What accepting one context token gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// More context tokens are needed: this one goes to the client.
    Continue(Vec<u8>),
    /// The context is established: the client's principal, and a last token for the client
    /// (mutual authentication), if any.
    Established {
        /// The last context token, if any.
        token: Option<Vec<u8>>,
        /// The client's principal as the library displays it (`alice@ZKRS.TEST`).
        client: String,
    },
}

/// What a step of [`GssapiExchange`] gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GssStep {
    /// A token for the client; the exchange goes on.
    Challenge(Vec<u8>),
    /// The client is authenticated as `principal` (the exchange sends no further token).
    Success {
        /// The client's Kerberos principal.
        principal: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Context,
    /// The context is established; the client's (empty) answer to its last token is due.
    Established,
    /// The security-layer offer was sent; the client's choice is due.
    LayerOffered,
    Done,
    Failed,
}

/// The server's side of one SASL GSSAPI exchange (RFC 4752).
pub struct GssapiExchange {
    ctx: Box<dyn GssContext>,
    stage: Stage,
    client: String,
    authzid: Option<String>,
}

impl fmt::Debug for GssapiExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GssapiExchange").field("stage", &self.stage).field("client", &self.client).finish()
    }
}

impl GssapiExchange {
    /// An exchange over a fresh context from `acceptor`.
    pub fn new(acceptor: &dyn GssAcceptor) -> GssapiExchange {
        GssapiExchange { ctx: acceptor.start(), stage: Stage::Context, client: String::new(), authzid: None }
    }

    /// Takes the client's next token.
    ///
    /// Errors (the exchange is then failed for good): a context token the library refuses; a
    /// non-empty answer where an empty one is due; a security-layer answer that does not unwrap,
    /// is shorter than 4 bytes, chooses a layer other than "none", or carries an authorization
    /// id that is not UTF-8 or longer than 1,024 bytes; any token after the end.
    pub fn step(&mut self, token: &[u8]) -> Result<GssStep, String> {
        let r = self.advance(token);
        if r.is_err() {
            self.stage = Stage::Failed;
        }
        r
    }

    fn advance(&mut self, token: &[u8]) -> Result<GssStep, String> {
        match self.stage {
            Stage::Context => match self.ctx.accept(token)? {
                Accepted::Continue(t) => Ok(GssStep::Challenge(t)),
                Accepted::Established { token, client } => {
                    self.client = client;
                    self.stage = Stage::Established;
                    match token {
                        Some(t) => Ok(GssStep::Challenge(t)),
                        // Nothing more for the client to read: the offer goes at once (the
                        // client then has no empty answer to send).
                        None => self.offer(),
                    }
                }
            },
            Stage::Established => {
                if !token.is_empty() {
                    return Err(format!(
                        "expected an empty token after the established context, got {} bytes",
                        token.len()
                    ));
                }
                self.offer()
            }
            Stage::LayerOffered => {
                let msg = self.ctx.unwrap(token)?;
                if msg.len() < 4 {
                    return Err(format!(
                        "security-layer answer of {} bytes (at least 4 expected)",
                        msg.len()
                    ));
                }
                if msg[0] != LAYER_NONE {
                    return Err(format!(
                        "client chose security layer 0x{:02x}; only 0x01 (none) was offered",
                        msg[0]
                    ));
                }
                let authzid = &msg[4..];
                if authzid.len() > MAX_AUTHZID {
                    return Err(format!("authorization id of {} bytes", authzid.len()));
                }
                let authzid =
                    std::str::from_utf8(authzid).map_err(|_| "authorization id is not UTF-8".to_string())?;
                if !authzid.is_empty() && authzid != self.client {
                    // Apache's server authorizes the session as the authenticated principal
                    // whatever the client asks for; so does zkrs.
                    tracing::info!(
                        "client {} asked for authorization id {authzid:?}; it is authorized as itself",
                        self.client
                    );
                }
                self.authzid = Some(authzid.to_string()).filter(|a| !a.is_empty());
                self.stage = Stage::Done;
                Ok(GssStep::Success { principal: self.client.clone() })
            }
            Stage::Done => Err("SASL token after the exchange completed".into()),
            Stage::Failed => Err("SASL token after the exchange failed".into()),
        }
    }

    /// The authorization id the client asked for in its security-layer answer, once the
    /// exchange succeeded (`None`: none, or an empty one). Client sessions are authorized as
    /// their principal whatever it is; quorum SASL refuses a learner asking to be another.
    pub fn authorization_id(&self) -> Option<&str> {
        self.authzid.as_deref()
    }

    fn offer(&mut self) -> Result<GssStep, String> {
        let [_, a, b, c] = MAX_RECEIVE.to_be_bytes();
        let t = self.ctx.wrap(&[LAYER_NONE, a, b, c])?;
        self.stage = Stage::LayerOffered;
        Ok(GssStep::Challenge(t))
    }
}

/// How a client's principal becomes its `sasl` id, as Apache's server maps it: the short name
/// the `auth_to_local` rules give (with `DEFAULT`, the first component of a principal of the
/// default realm), then `/host` when the principal has one unless `kerberos.removeHostFromPrincipal`,
/// then `@REALM` unless `kerberos.removeRealmFromPrincipal`. A principal no rule maps (with
/// `DEFAULT`, one of another realm) keeps its full name, as Apache's server then keeps it; a
/// principal without a realm is its own id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrincipalMapping {
    /// `kerberos.removeHostFromPrincipal`.
    pub remove_host: bool,
    /// `kerberos.removeRealmFromPrincipal`.
    pub remove_realm: bool,
    /// The default realm of the Kerberos configuration, if it names one.
    pub default_realm: Option<String>,
    /// `security.auth_to_local` (`DEFAULT` when not set).
    pub rules: AuthToLocal,
}

impl PrincipalMapping {
    /// The `sasl` id of `principal`.
    ///
    /// Errors: a principal with a realm whose name part has more than two components
    /// (`a/b/c@R`), as Apache refuses it.
    pub fn id_for(&self, principal: &str) -> Result<String, String> {
        let Some((name, realm)) = principal.split_once('@') else {
            // No realm: the whole name is the short name.
            return Ok(principal.to_string());
        };
        let (service, host) = match name.split_once('/') {
            Some((s, h)) => (s, Some(h)),
            None => (name, None),
        };
        if realm.contains(['/', '@']) || host.is_some_and(|h| h.contains('/')) {
            return Err(format!("malformed Kerberos principal {principal:?}"));
        }
        let parts =
            auth_to_local::Parts { realm, components: [Some(service), host].into_iter().flatten().collect() };
        let mut id = match self.rules.short_name(&parts, self.default_realm.as_deref().unwrap_or("")) {
            Ok(short) => short,
            Err(e) => {
                tracing::info!("principal {principal} keeps its full name as its id: {e}");
                return Ok(principal.to_string());
            }
        };
        if let (Some(h), false) = (host, self.remove_host) {
            id.push('/');
            id.push_str(h);
        }
        if !self.remove_realm {
            id.push('@');
            id.push_str(realm);
        }
        Ok(id)
    }
}

/// Client GSSAPI as this server runs it: the JAAS `Server` section's Kerberos login.
#[derive(Clone)]
pub struct KerberosServer {
    /// The server's principal (`principal`), e.g. `zookeeper/host@REALM`.
    pub principal: String,
    /// The keytab holding its keys (`keyTab`).
    pub keytab: PathBuf,
    /// How clients' principals become `sasl` ids.
    pub mapping: PrincipalMapping,
    /// Accepting contexts with the keytab's keys.
    pub acceptor: Arc<dyn GssAcceptor>,
}

impl fmt::Debug for KerberosServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KerberosServer")
            .field("principal", &self.principal)
            .field("keytab", &self.keytab)
            .field("mapping", &self.mapping)
            .finish_non_exhaustive()
    }
}

/// The options of a `Krb5LoginModule` entry the server needs: `principal` and `keyTab`, with
/// `useKeyTab=true`.
///
/// Errors name the option: `useKeyTab` not true, `keyTab` or `principal` missing.
pub fn login_options(options: &[(String, String)]) -> Result<(String, PathBuf), String> {
    let get = |k: &str| options.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.trim());
    if !get("useKeyTab").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Err(format!(
            "{KRB5_LOGIN_MODULE} needs useKeyTab=true: zkrs-server takes its key from a keytab"
        ));
    }
    let keytab = get("keyTab").filter(|v| !v.is_empty()).ok_or_else(|| {
        format!("{KRB5_LOGIN_MODULE} has no keyTab option (the keytab file with the server's key)")
    })?;
    let principal = get("principal").filter(|v| !v.is_empty()).ok_or_else(|| {
        format!("{KRB5_LOGIN_MODULE} has no principal option (such as zookeeper/host@REALM)")
    })?;
    if !get("storeKey").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        tracing::warn!(
            "{KRB5_LOGIN_MODULE} without storeKey=true: zkrs accepts clients anyway, Apache's server \
             would not (it needs the key kept to accept tickets)"
        );
    }
    Ok((principal.to_string(), PathBuf::from(keytab)))
}

/// Longest Kerberos configuration file read for its default realm.
const MAX_KRB5_CONF: u64 = 1 << 20;

/// The default realm: `-Djava.security.krb5.realm` when set (`realm_property`), else
/// `default_realm` of `[libdefaults]` in the Kerberos configuration: `-Djava.security.krb5.conf`
/// (`conf_property`), else the first file of `KRB5_CONFIG` (`krb5_config`), else
/// `/etc/krb5.conf`. `None` when none names one (or the file cannot be read).
pub fn default_realm(
    realm_property: Option<&str>,
    conf_property: Option<&str>,
    krb5_config: Option<&str>,
) -> Option<String> {
    if let Some(r) = realm_property.map(str::trim).filter(|r| !r.is_empty()) {
        return Some(r.to_string());
    }
    let file = conf_property
        .or_else(|| krb5_config.and_then(|v| v.split(':').find(|p| !p.is_empty())))
        .unwrap_or("/etc/krb5.conf");
    let path = Path::new(file);
    if std::fs::metadata(path).ok()?.len() > MAX_KRB5_CONF {
        tracing::warn!("{file} is over {MAX_KRB5_CONF} bytes: its default realm is not read");
        return None;
    }
    default_realm_of(&std::fs::read_to_string(path).ok()?)
}

/// `default_realm` of the `[libdefaults]` section of a krb5.conf text.
fn default_realm_of(text: &str) -> Option<String> {
    let mut in_libdefaults = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            in_libdefaults = section.trim_end_matches(']').trim() == "libdefaults";
            continue;
        }
        if !in_libdefaults {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if k.trim() == "default_realm" {
                return Some(v.trim().to_string()).filter(|v| !v.is_empty());
            }
        }
    }
    None
}

/// An acceptor with the keys of `principal` from `keytab`, from the system's GSSAPI library.
///
/// Errors: the library cannot read the keytab or finds no key for the principal (its message),
/// or this build lacks the `kerberos` feature.
pub fn keytab_acceptor(principal: &str, keytab: &Path) -> Result<Arc<dyn GssAcceptor>, String> {
    #[cfg(feature = "kerberos")]
    {
        Ok(Arc::new(crate::kerberos_gss::KeytabAcceptor::new(principal, keytab)?))
    }
    #[cfg(not(feature = "kerberos"))]
    {
        let _ = (principal, keytab);
        Err(WITHOUT_KERBEROS.into())
    }
}

/// Why a build without the `kerberos` feature refuses a Kerberos login.
#[cfg(not(feature = "kerberos"))]
const WITHOUT_KERBEROS: &str = "this zkrs-server was built without Kerberos (SASL GSSAPI): build it with \
     `--features kerberos` (needs the GSSAPI headers, Debian's libkrb5-dev and libclang-dev)";

/// A GSSAPI client context for quorum SASL (zk-client's initiator over the system's library):
/// logged in as `principal` with its key from `keytab` (a memory ticket cache of the process),
/// for the service principal `service` (with its realm). The library asks the KDC for tickets
/// when the context makes its first token, so the caller runs that off the async threads.
///
/// Errors: the library's message (no key for the principal in the keytab, a principal that
/// does not parse), or this build lacks the `kerberos` feature.
pub fn keytab_initiator(
    principal: &str,
    keytab: &Path,
    service: &str,
) -> Result<Box<dyn zk_client::core::gssapi::GssInitiator>, String> {
    #[cfg(feature = "kerberos")]
    {
        use zk_client::core::gssapi::GssMechanism;
        use zk_client::gssapi::{Credentials, Kerberos, KerberosOptions};
        let mut opts = KerberosOptions::new(Credentials::Keytab {
            principal: principal.to_string(),
            keytab: keytab.to_path_buf(),
        });
        opts.server_principal = Some(service.to_string());
        // The host is not used: the service principal is given whole.
        Kerberos::new(opts).start("")
    }
    #[cfg(not(feature = "kerberos"))]
    {
        let _ = (principal, keytab, service);
        Err(WITHOUT_KERBEROS.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::Mutex;

    /// A context that plays back what the library would: the accept results in order; wrap
    /// prefixes "W:", unwrap strips "U:".
    struct Scripted(Arc<Mutex<VecDeque<Result<Accepted, String>>>>);

    impl GssContext for Scripted {
        fn accept(&mut self, _token: &[u8]) -> Result<Accepted, String> {
            self.0.lock().unwrap().pop_front().unwrap_or_else(|| Err("no more".into()))
        }
        fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
            Ok([b"W:".as_slice(), msg].concat())
        }
        fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
            msg.strip_prefix(b"U:").map(<[u8]>::to_vec).ok_or_else(|| "bad checksum".to_string())
        }
    }

    struct Script(Arc<Mutex<VecDeque<Result<Accepted, String>>>>);

    impl GssAcceptor for Script {
        fn start(&self) -> Box<dyn GssContext> {
            Box::new(Scripted(self.0.clone()))
        }
    }

    fn exchange(steps: Vec<Result<Accepted, String>>) -> GssapiExchange {
        GssapiExchange::new(&Script(Arc::new(Mutex::new(steps.into()))))
    }

    const OFFER: &[u8] = b"W:\x01\x01\x00\x00";

    #[test]
    fn context_tokens_then_the_layer_offer_and_the_choice() {
        let mut x = exchange(vec![
            Ok(Accepted::Continue(b"more".to_vec())),
            Ok(Accepted::Established { token: Some(b"ap-rep".to_vec()), client: "alice@R".into() }),
        ]);
        assert_eq!(x.step(b"ap-req-1").unwrap(), GssStep::Challenge(b"more".to_vec()));
        assert_eq!(x.step(b"ap-req-2").unwrap(), GssStep::Challenge(b"ap-rep".to_vec()));
        assert_eq!(x.step(b"").unwrap(), GssStep::Challenge(OFFER.to_vec()));
        let r = x.step(b"U:\x01\x00\x00\x00alice@R").unwrap();
        assert_eq!(r, GssStep::Success { principal: "alice@R".into() });
        assert_eq!(x.authorization_id(), Some("alice@R"));
        assert!(x.step(b"").is_err(), "nothing after the end");
    }

    #[test]
    fn no_last_context_token_means_the_offer_comes_at_once() {
        let mut x = exchange(vec![Ok(Accepted::Established { token: None, client: "bob@R".into() })]);
        assert_eq!(x.step(b"ap-req").unwrap(), GssStep::Challenge(OFFER.to_vec()));
        // Another authorization id than the principal: still the principal.
        let r = x.step(b"U:\x01\xff\xff\xffmallory").unwrap();
        assert_eq!(r, GssStep::Success { principal: "bob@R".into() });
        // The id asked for is kept for quorum SASL, which refuses it (clients are authorized as
        // themselves whatever they ask).
        assert_eq!(x.authorization_id(), Some("mallory"));
    }

    #[test]
    fn bad_answers_fail_the_exchange_for_good() {
        let est = || Ok(Accepted::Established { token: Some(b"t".to_vec()), client: "a@R".into() });
        // The library refuses the ticket.
        let mut x = exchange(vec![Err("Request is a replay".into())]);
        assert!(x.step(b"x").unwrap_err().contains("replay"));
        assert!(x.step(b"").unwrap_err().contains("failed"));
        // A non-empty answer where an empty one is due.
        let mut x = exchange(vec![est()]);
        x.step(b"x").unwrap();
        assert!(x.step(b"junk").unwrap_err().contains("empty"));
        // The choice: bad integrity, short, another layer, bad UTF-8, too long.
        for (bad, what) in [
            (b"\x01\x00\x00\x00".to_vec(), "checksum"),
            (b"U:\x01\x00".to_vec(), "at least 4"),
            (b"U:\x02\x00\x10\x00".to_vec(), "0x02"),
            (b"U:\x01\x00\x00\x00\xff".to_vec(), "UTF-8"),
            ([b"U:\x01\x00\x00\x00".as_slice(), &[b'a'; 1025]].concat(), "1025 bytes"),
        ] {
            let mut x = exchange(vec![est()]);
            x.step(b"x").unwrap();
            x.step(b"").unwrap();
            let e = x.step(&bad).unwrap_err();
            assert!(e.contains(what), "{e}");
        }
    }

    #[test]
    fn ids_as_apache_maps_principals() {
        let m = |host, realm| PrincipalMapping {
            remove_host: host,
            remove_realm: realm,
            default_realm: Some("ZKRS.TEST".into()),
            rules: AuthToLocal::default(),
        };
        let keep = m(false, false);
        assert_eq!(keep.id_for("alice@ZKRS.TEST").unwrap(), "alice@ZKRS.TEST");
        assert_eq!(keep.id_for("zookeeper/h1@ZKRS.TEST").unwrap(), "zookeeper/h1@ZKRS.TEST");
        assert_eq!(m(true, false).id_for("zookeeper/h1@ZKRS.TEST").unwrap(), "zookeeper@ZKRS.TEST");
        assert_eq!(m(false, true).id_for("zookeeper/h1@ZKRS.TEST").unwrap(), "zookeeper/h1");
        assert_eq!(m(true, true).id_for("alice@ZKRS.TEST").unwrap(), "alice");
        // Another realm: the full principal, whatever the keys say.
        assert_eq!(m(true, true).id_for("carol/h@OTHER.TEST").unwrap(), "carol/h@OTHER.TEST");
        assert_eq!(m(true, true).id_for("plain").unwrap(), "plain");
        assert!(keep.id_for("a/b/c@ZKRS.TEST").is_err());
        assert!(keep.id_for("a@b@ZKRS.TEST").is_err());
    }

    #[test]
    fn ids_from_auth_to_local_rules_then_host_and_realm() {
        let m = |rules: &str, host, realm| PrincipalMapping {
            remove_host: host,
            remove_realm: realm,
            default_realm: Some("ZKRS.TEST".into()),
            rules: AuthToLocal::parse(rules).unwrap(),
        };
        let rules =
            r"RULE:[1:$1@$0](alice@ZKRS\.TEST)s/.*/admin/ RULE:[1:$1@$0](.*@OTHER\.TEST)s/@.*// DEFAULT";
        // The short name, then the realm (and the host) appended, as Apache's server does.
        assert_eq!(m(rules, false, false).id_for("alice@ZKRS.TEST").unwrap(), "admin@ZKRS.TEST");
        assert_eq!(m(rules, false, true).id_for("alice@ZKRS.TEST").unwrap(), "admin");
        assert_eq!(m(rules, false, false).id_for("carol@OTHER.TEST").unwrap(), "carol@OTHER.TEST");
        assert_eq!(m(rules, true, true).id_for("carol@OTHER.TEST").unwrap(), "carol");
        assert_eq!(m(rules, false, false).id_for("zk/h1@ZKRS.TEST").unwrap(), "zk/h1@ZKRS.TEST");
        assert_eq!(m(rules, true, true).id_for("zk/h1@ZKRS.TEST").unwrap(), "zk");
        // No rule applies, or a rule gives a name that is not simple: the full principal.
        assert_eq!(m(rules, true, true).id_for("dave@ELSE.TEST").unwrap(), "dave@ELSE.TEST");
        assert_eq!(m("RULE:[1:$1/x]", true, true).id_for("bob@ZKRS.TEST").unwrap(), "bob@ZKRS.TEST");
    }

    #[test]
    fn login_options_and_the_default_realm() {
        let o = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let ok = o(&[("useKeyTab", "true"), ("keyTab", "/k"), ("storeKey", "true"), ("principal", "zk/h@R")]);
        assert_eq!(login_options(&ok).unwrap(), ("zk/h@R".to_string(), PathBuf::from("/k")));
        assert!(login_options(&o(&[("keyTab", "/k"), ("principal", "p")]))
            .unwrap_err()
            .contains("useKeyTab"));
        assert!(login_options(&o(&[("useKeyTab", "true"), ("principal", "p")]))
            .unwrap_err()
            .contains("keyTab"));
        assert!(login_options(&o(&[("useKeyTab", "true"), ("keyTab", "/k")]))
            .unwrap_err()
            .contains("principal"));

        let conf =
            "# c\n[realms]\n default_realm = NO\n[libdefaults]\n  dns = false\n  default_realm = ZKRS.TEST\n";
        assert_eq!(default_realm_of(conf).as_deref(), Some("ZKRS.TEST"));
        assert_eq!(default_realm_of("[libdefaults]\n"), None);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("krb5.conf");
        std::fs::write(&f, conf).unwrap();
        let f = f.to_str().unwrap();
        assert_eq!(default_realm(Some("P.TEST"), Some(f), None).as_deref(), Some("P.TEST"));
        assert_eq!(default_realm(None, None, Some(&format!(":{f}:/x"))).as_deref(), Some("ZKRS.TEST"));
        assert_eq!(default_realm(None, Some("/nonexistent"), Some(f)), None);
    }
}
