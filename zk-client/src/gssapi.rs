//! SASL GSSAPI (Kerberos) for clients over the system's MIT GSSAPI library (`libgssapi_krb5`),
//! through the libgssapi crate: the `kerberos` feature.
//!
//! [`Kerberos`] is the [`GssMechanism`] the session core is handed
//! ([`crate::core::Config::gssapi`]; `ClientBuilder::sasl_gssapi` on the async client). On each
//! connection it acquires the client's credentials ([`Credentials`]: the ticket cache `kinit`
//! filled, or a keytab and principal as a JAAS `Client` section with `Krb5LoginModule` names
//! them) and starts a context for the server's principal, built as Apache's Java client builds
//! it ([`KerberosOptions::server_name_for`]): `zookeeper.server.principal` when set, otherwise
//! `<zookeeper.sasl.client.username>/<host>`, the host as the connect string names it,
//! canonicalized with a reverse lookup of its address when
//! `zookeeper.sasl.client.canonicalize.hostname` is true (the default) or when it is an address
//! literal; in the realm `zookeeper.server.realm` names, else in the one the library maps the
//! host to ([`ServerName`]).
//!
//! The library's calls block while it asks the KDC for a ticket (a round trip on the realm's
//! network, once per connection and service ticket lifetime). The Kerberos configuration is the
//! library's: `KRB5_CONFIG` or `/etc/krb5.conf`.

use crate::core::gssapi::{GssInitiator, GssMechanism, Gssapi};
use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext};
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::name::Name;
use libgssapi::oid::{GSS_MECH_KRB5, GSS_NT_HOSTBASED_SERVICE, GSS_NT_KRB5_PRINCIPAL};
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::Arc;

/// Apache's default for `zookeeper.sasl.client.username`: the service part of the server's
/// principal.
pub const DEFAULT_SERVICE: &str = "zookeeper";

/// Where the client's Kerberos credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// The library's default ticket cache (`KRB5CCNAME`, else its default), as `kinit` leaves
    /// it; with `KRB5_CLIENT_KTNAME` set, MIT's library gets tickets from that keytab when the
    /// cache has none (as Cyrus SASL's GSSAPI plugin does for Apache's C client).
    Default,
    /// The ticket cache `cache` (`FILE:/path`, or a path), as a JAAS `Client` section with
    /// `useTicketCache=true` and `ticketCache` names it; `principal`, when given, must be the
    /// cache's.
    TicketCache {
        /// The cache's name.
        cache: String,
        /// The principal expected in it.
        principal: Option<String>,
    },
    /// Log in as `principal` with its key from `keytab` (JAAS `useKeyTab=true`, `keyTab`,
    /// `principal`). The tickets go to a memory cache of the process for this login, never to
    /// the user's.
    Keytab {
        /// The client's principal, such as `alice@EXAMPLE.COM`.
        principal: String,
        /// The keytab file.
        keytab: PathBuf,
    },
}

impl Credentials {
    /// The credentials a JAAS `Krb5LoginModule` entry's `options` name, as Java's module takes
    /// them: with `useKeyTab=true`, the `keyTab` file and `principal`; else with
    /// `useTicketCache=true`, the `ticketCache` (the default cache without one), `principal` then
    /// being the one expected there.
    ///
    /// Errors: `useKeyTab=true` without `keyTab` or `principal`; neither a keytab nor a ticket
    /// cache to use (Java would prompt for a password, which a client library cannot do).
    pub fn from_jaas(options: &[(String, String)]) -> Result<Credentials, String> {
        let get = |k: &str| {
            options.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
        };
        let yes = |k: &str| get(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let principal = get("principal").map(str::to_string);
        if yes("useKeyTab") {
            let keytab = get("keyTab").ok_or("useKeyTab=true without a keyTab option (the keytab file)")?;
            let principal =
                principal.ok_or("useKeyTab=true without a principal option (such as alice@REALM)")?;
            return Ok(Credentials::Keytab { principal, keytab: PathBuf::from(keytab) });
        }
        if yes("useTicketCache") {
            return Ok(match get("ticketCache") {
                Some(cache) => Credentials::TicketCache { cache: cache.to_string(), principal },
                None => Credentials::Default,
            });
        }
        Err("Krb5LoginModule needs useKeyTab=true (with keyTab and principal) or useTicketCache=true: \
             a password cannot be asked for"
            .into())
    }
}

/// How the client authenticates with Kerberos, with the names of Apache's client properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosOptions {
    /// The client's credentials.
    pub credentials: Credentials,
    /// `zookeeper.sasl.client.username`: the service part of the server's principal
    /// (default [`DEFAULT_SERVICE`]).
    pub service: String,
    /// `zookeeper.server.principal`: the server's whole principal, overriding `service/host`.
    pub server_principal: Option<String>,
    /// `zookeeper.server.realm`: the server's realm, appended to `service/host`. Unset, the
    /// library maps the host to its realm (krb5.conf's `domain_realm`, else the default realm),
    /// as Java's Kerberos does for Apache's client.
    pub server_realm: Option<String>,
    /// `zookeeper.sasl.client.canonicalize.hostname` (default true): the host part is the name a
    /// reverse lookup of the server's address gives.
    pub canonicalize_hostname: bool,
    /// The server as a GSS-API host-based service, `service@host`, as Cyrus SASL's GSSAPI
    /// plugin names it for Apache's C client: the library then maps it to `service/host@REALM`
    /// by its own rules (krb5.conf's `rdns`, `dns_canonicalize_hostname`, `domain_realm`).
    /// Overrides the fields above when set (libzkrs's `zookeeper_init_sasl` sets it).
    pub host_based_service: Option<String>,
}

impl KerberosOptions {
    /// Apache's defaults with `credentials`.
    pub fn new(credentials: Credentials) -> KerberosOptions {
        KerberosOptions {
            credentials,
            service: DEFAULT_SERVICE.to_string(),
            server_principal: None,
            server_realm: None,
            canonicalize_hostname: true,
            host_based_service: None,
        }
    }

    /// `credentials` with the server's principal from Apache's client properties as `prop` gives
    /// them (`-D` flags of `CLIENT_JVMFLAGS`, say): `zookeeper.sasl.client.username`,
    /// `zookeeper.server.principal`, `zookeeper.server.realm`,
    /// `zookeeper.sasl.client.canonicalize.hostname` (true when it is `true` ignoring case, as
    /// Java's `Boolean.parseBoolean` reads it; true when unset).
    pub fn from_properties(
        credentials: Credentials,
        prop: &dyn Fn(&str) -> Option<String>,
    ) -> KerberosOptions {
        let mut o = KerberosOptions::new(credentials);
        if let Some(s) = prop("zookeeper.sasl.client.username") {
            o.service = s;
        }
        o.server_principal = prop("zookeeper.server.principal").filter(|p| !p.is_empty());
        o.server_realm = prop("zookeeper.server.realm").filter(|r| !r.is_empty());
        o.canonicalize_hostname = prop("zookeeper.sasl.client.canonicalize.hostname")
            .is_none_or(|v| v.eq_ignore_ascii_case("true"));
        o
    }

    /// The server's name asked for when connected to `host` (the connect string's name): the
    /// host-based service `service@host` unless a realm is known (in `zookeeper.server.principal`
    /// or `zookeeper.server.realm`), then the principal `service/host@REALM`.
    pub fn server_name_for(&self, host: &str) -> ServerName {
        if let Some(name) = &self.host_based_service {
            return ServerName::HostBasedService(name.clone());
        }
        let (service, host) = match &self.server_principal {
            Some(p) if p.contains('@') => return ServerName::Principal(p.clone()),
            Some(p) => match p.split_once('/') {
                Some((service, host)) => (service.to_string(), host.to_string()),
                None => return ServerName::Principal(self.with_realm(p)),
            },
            None => {
                let literal = host.parse::<std::net::IpAddr>().is_ok();
                let canonical =
                    if self.canonicalize_hostname || literal { canonical_name(host) } else { None };
                (self.service.clone(), canonical.unwrap_or_else(|| host.to_string()))
            }
        };
        match &self.server_realm {
            Some(realm) => ServerName::Principal(format!("{service}/{host}@{realm}")),
            None => ServerName::HostBasedService(format!("{service}@{host}")),
        }
    }

    fn with_realm(&self, principal: &str) -> String {
        match &self.server_realm {
            Some(realm) => format!("{principal}@{realm}"),
            None => principal.to_string(),
        }
    }
}

/// How the server is named to the GSS-API library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerName {
    /// A Kerberos principal, `service/host@REALM`, asked for as it is.
    Principal(String),
    /// A host-based service, `service@host`: the library maps it to `service/host@REALM`, the
    /// realm from the host (krb5.conf's `domain_realm`, else the default realm), canonicalizing
    /// the host as krb5.conf's `dns_canonicalize_hostname` and `rdns` say.
    HostBasedService(String),
}

impl std::fmt::Display for ServerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerName::Principal(p) => f.write_str(p),
            ServerName::HostBasedService(s) => f.write_str(s),
        }
    }
}

/// The name a reverse lookup of `host`'s first address gives, when it gives one that is not the
/// address itself.
fn canonical_name(host: &str) -> Option<String> {
    use std::net::ToSocketAddrs;
    let addr = (host, 0).to_socket_addrs().ok()?.next()?;
    let name = reverse_lookup(addr.ip())?;
    (name != addr.ip().to_string()).then_some(name)
}

/// `getnameinfo` with `NI_NAMEREQD`: the host name of `ip`, if the resolver knows one. The
/// standard library has no reverse lookup.
#[allow(unsafe_code)]
fn reverse_lookup(ip: std::net::IpAddr) -> Option<String> {
    use std::mem::size_of;
    let mut host = [0 as libc::c_char; 1025];
    // SAFETY (all blocks below): zeroed sockaddr structs are valid; each is filled, then its
    // address and exact size are passed; `host` is a buffer of the length given, which
    // getnameinfo NUL-terminates on success.
    let rc = match ip {
        std::net::IpAddr::V4(v4) => {
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(v4.octets()) };
            unsafe {
                libc::getnameinfo(
                    (&sa as *const libc::sockaddr_in).cast(),
                    size_of::<libc::sockaddr_in>() as libc::socklen_t,
                    host.as_mut_ptr(),
                    host.len() as libc::socklen_t,
                    std::ptr::null_mut(),
                    0,
                    libc::NI_NAMEREQD,
                )
            }
        }
        std::net::IpAddr::V6(v6) => {
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_addr = libc::in6_addr { s6_addr: v6.octets() };
            unsafe {
                libc::getnameinfo(
                    (&sa as *const libc::sockaddr_in6).cast(),
                    size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                    host.as_mut_ptr(),
                    host.len() as libc::socklen_t,
                    std::ptr::null_mut(),
                    0,
                    libc::NI_NAMEREQD,
                )
            }
        }
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: NUL-terminated by getnameinfo within the buffer.
    let name = unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) };
    Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}

/// SASL GSSAPI with Kerberos: a [`GssMechanism`] for the session core.
#[derive(Debug)]
pub struct Kerberos {
    opts: KerberosOptions,
    /// The memory ticket cache of a keytab login (`MEMORY:` and a hash of principal and keytab).
    memory_cache: String,
}

impl Kerberos {
    /// A mechanism authenticating as `opts` say. Nothing is acquired yet: each connection
    /// acquires the credentials afresh (a renewed ticket cache is picked up), and a failure then
    /// makes the session AUTHFAILED.
    pub fn new(opts: KerberosOptions) -> Kerberos {
        // One memory cache per keytab login (principal and file), shared by the mechanisms of
        // the process that log in the same way: the library keeps a memory cache until the
        // process ends, so one per mechanism would grow with every client made.
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        if let Credentials::Keytab { principal, keytab } = &opts.credentials {
            (principal, keytab).hash(&mut h);
        }
        let memory_cache = format!("MEMORY:zkrs-client-{:016x}", h.finish());
        Kerberos { opts, memory_cache }
    }

    /// The options.
    pub fn options(&self) -> &KerberosOptions {
        &self.opts
    }

    /// This mechanism as the session core's configuration takes it.
    pub fn into_config(self) -> Gssapi {
        Gssapi(Arc::new(self))
    }

    fn credential(&self) -> Result<Cred, String> {
        match &self.opts.credentials {
            Credentials::Default => Cred::acquire(None, None, CredUsage::Initiate, None)
                .map_err(|e| format!("no credentials in the default ticket cache: {e}")),
            Credentials::TicketCache { cache, principal } => {
                acquire_from(principal.as_deref(), &[("ccache", cache.as_str())])
                    .map_err(|e| format!("no credentials in ticket cache {cache}: {e}"))
            }
            Credentials::Keytab { principal, keytab } => {
                let path = keytab
                    .to_str()
                    .ok_or_else(|| format!("keytab path {} is not UTF-8", keytab.display()))?;
                acquire_from(Some(principal), &[("client_keytab", path), ("ccache", &self.memory_cache)])
                    .map_err(|e| format!("cannot log in as {principal} with keytab {path}: {e}"))
            }
        }
    }
}

impl GssMechanism for Kerberos {
    fn start(&self, host: &str) -> Result<Box<dyn GssInitiator>, String> {
        let cred = self.credential()?;
        let client = cred.name().map_err(|e| e.to_string())?.to_string();
        let (server, kind) = match self.opts.server_name_for(host) {
            ServerName::Principal(p) => (p, GSS_NT_KRB5_PRINCIPAL),
            ServerName::HostBasedService(s) => (s, GSS_NT_HOSTBASED_SERVICE),
        };
        let target =
            Name::new(server.as_bytes(), Some(kind)).map_err(|e| format!("server name {server:?}: {e}"))?;
        let ctx = ClientCtx::new(
            Some(cred),
            target,
            CtxFlags::GSS_C_MUTUAL_FLAG | CtxFlags::GSS_C_SEQUENCE_FLAG,
            Some(GSS_MECH_KRB5),
        );
        Ok(Box::new(Context { ctx, client, server }))
    }

    fn describe(&self) -> String {
        let who = match &self.opts.credentials {
            Credentials::Default => "the default ticket cache".to_string(),
            Credentials::TicketCache { cache, .. } => format!("ticket cache {cache}"),
            Credentials::Keytab { principal, .. } => principal.clone(),
        };
        // The server's name is in the context's messages: it depends on the host.
        format!("Kerberos from {who}")
    }
}

/// One client context.
struct Context {
    ctx: ClientCtx,
    client: String,
    server: String,
}

impl GssInitiator for Context {
    fn step(&mut self, input: Option<&[u8]>) -> Result<(Vec<u8>, bool), String> {
        let out =
            self.ctx.step(input, None).map_err(|e| format!("{} to {}: {e}", self.client, self.server))?;
        Ok((out.map(|b| b.to_vec()).unwrap_or_default(), self.ctx.is_complete()))
    }

    fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
        self.ctx.unwrap(msg).map(|b| b.to_vec()).map_err(|e| e.to_string())
    }

    fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
        self.ctx.wrap(false, msg).map(|b| b.to_vec()).map_err(|e| e.to_string())
    }

    fn authzid(&self) -> String {
        self.client.clone()
    }
}

/// The krb5 principal name type (1.2.840.113554.1.2.2.1), DER without tag and length.
const KRB5_NT_PRINCIPAL: [u8; 10] = *b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01";

/// `gss_acquire_cred_from` for initiating, with the cred store `store` (MIT's keys: `ccache`,
/// `client_keytab`) and, when given, the desired name `principal` (krb5 principal syntax). The
/// libgssapi crate does not wrap this call; its -sys crate has it.
#[allow(unsafe_code)]
fn acquire_from(principal: Option<&str>, store: &[(&str, &str)]) -> Result<Cred, String> {
    use libgssapi_sys as sys;
    use std::ptr;
    let fail = |major: u32, minor: u32| {
        libgssapi::error::Error { major: libgssapi::error::MajorFlags::from_bits_retain(major), minor }
            .to_string()
    };
    let cstrings: Vec<(CString, CString)> = store
        .iter()
        .map(|(k, v)| Ok((CString::new(*k)?, CString::new(*v)?)))
        .collect::<Result<_, std::ffi::NulError>>()
        .map_err(|_| "a credential store value has a NUL byte".to_string())?;
    let mut elements: Vec<sys::gss_key_value_element_desc> = cstrings
        .iter()
        .map(|(k, v)| sys::gss_key_value_element_desc { key: k.as_ptr(), value: v.as_ptr() })
        .collect();
    let set = sys::gss_key_value_set_desc { count: elements.len() as u32, elements: elements.as_mut_ptr() };
    let mut minor = 0u32;
    let mut name: sys::gss_name_t = ptr::null_mut();
    if let Some(p) = principal {
        if p.as_bytes().contains(&0) {
            return Err(format!("principal {p:?} has a NUL byte"));
        }
        let mut oid_bytes = KRB5_NT_PRINCIPAL;
        let mut oid = sys::gss_OID_desc_struct {
            length: oid_bytes.len() as u32,
            elements: oid_bytes.as_mut_ptr().cast(),
        };
        let mut buf = sys::gss_buffer_desc_struct { length: p.len(), value: p.as_ptr().cast_mut().cast() };
        // SAFETY: every pointer is to a live local for the call; the library copies the name out
        // of `buf` (it does not write through `value`) and allocates `name`.
        let major = unsafe { sys::gss_import_name(&mut minor, &mut buf, &mut oid, &mut name) };
        if major != sys::GSS_S_COMPLETE {
            return Err(format!("principal {p:?}: {}", fail(major, minor)));
        }
    }
    let mut cred: sys::gss_cred_id_t = ptr::null_mut();
    // SAFETY: `name` is null (the default) or came from gss_import_name; `set`, its elements and
    // their strings live across the call; null out-pointers are allowed for the outputs skipped.
    let major = unsafe {
        sys::gss_acquire_cred_from(
            &mut minor,
            name,
            sys::_GSS_C_INDEFINITE,
            ptr::null_mut(),
            sys::GSS_C_INITIATE as sys::gss_cred_usage_t,
            &set,
            &mut cred,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    if !name.is_null() {
        let mut release_minor = 0u32;
        // SAFETY: `name` is the library's, released once here.
        unsafe { sys::gss_release_name(&mut release_minor, &mut name) };
    }
    if major != sys::GSS_S_COMPLETE {
        return Err(fail(major, minor));
    }
    // SAFETY: `cred` was just allocated by the library; `Cred` owns and releases it.
    Ok(unsafe { Cred::from_c(cred) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_principal_as_apache_builds_it() {
        let props = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let o = KerberosOptions::from_properties(Credentials::Default, &props(&[]));
        assert_eq!((o.service.as_str(), o.canonicalize_hostname), ("zookeeper", true));
        let o = KerberosOptions::from_properties(
            Credentials::Default,
            &props(&[
                ("zookeeper.sasl.client.username", "zk"),
                ("zookeeper.sasl.client.canonicalize.hostname", "FALSE"),
                ("zookeeper.server.realm", "R.TEST"),
            ]),
        );
        assert_eq!(o.server_name_for("zk1.invalid"), ServerName::Principal("zk/zk1.invalid@R.TEST".into()));
        let o = KerberosOptions::from_properties(
            Credentials::Default,
            &props(&[("zookeeper.server.principal", "zookeeper/node@R.TEST")]),
        );
        assert_eq!(o.server_name_for("anything"), ServerName::Principal("zookeeper/node@R.TEST".into()));
        let o = KerberosOptions::from_properties(
            Credentials::Default,
            &props(&[
                ("zookeeper.server.principal", "zookeeper/node"),
                ("zookeeper.sasl.client.canonicalize.hostname", "yes"),
            ]),
        );
        assert!(!o.canonicalize_hostname, "Java's parseBoolean: only \"true\" is true");
        assert_eq!(o.server_name_for("anything"), ServerName::HostBasedService("zookeeper@node".into()));
        // An address literal is looked up (as Java's InetSocketAddress does): loopback is
        // `localhost` in every /etc/hosts this runs with, or stays the literal without one.
        let o = KerberosOptions::new(Credentials::Default);
        let p = o.server_name_for("127.0.0.1").to_string();
        assert!(p == "zookeeper@localhost" || p == "zookeeper@127.0.0.1", "{p}");
        let mut o = KerberosOptions::new(Credentials::Default);
        o.host_based_service = Some("zk@given".into());
        assert_eq!(o.server_name_for("127.0.0.1"), ServerName::HostBasedService("zk@given".into()));
    }

    #[test]
    fn credentials_from_jaas_options() {
        let o = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert_eq!(
            Credentials::from_jaas(&o(&[("useKeyTab", "true"), ("keyTab", "/a.kt"), ("principal", "a@R")])),
            Ok(Credentials::Keytab { principal: "a@R".into(), keytab: "/a.kt".into() })
        );
        assert_eq!(
            Credentials::from_jaas(&o(&[("useTicketCache", "TRUE"), ("ticketCache", "/tmp/cc")])),
            Ok(Credentials::TicketCache { cache: "/tmp/cc".into(), principal: None })
        );
        assert_eq!(Credentials::from_jaas(&o(&[("useTicketCache", "true")])), Ok(Credentials::Default));
        assert!(Credentials::from_jaas(&o(&[("useKeyTab", "true"), ("principal", "a")]))
            .unwrap_err()
            .contains("keyTab"));
        assert!(Credentials::from_jaas(&o(&[("doNotPrompt", "true")])).unwrap_err().contains("password"));
    }

    #[test]
    fn a_keytab_that_does_not_exist_is_refused_with_its_name() {
        let k = Kerberos::new(KerberosOptions::new(Credentials::Keytab {
            principal: "alice@NOWHERE.INVALID".into(),
            keytab: "/nonexistent/zkrs.keytab".into(),
        }));
        let e = k.start("localhost").and_then(|mut c| c.step(None).map(|_| ())).unwrap_err();
        assert!(e.contains("alice@NOWHERE.INVALID"), "{e}");
    }
}
