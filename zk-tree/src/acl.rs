//! ACLs: the shared ACL table, validation and expansion on create/setACL (`fixupACL`), the
//! permission check, addauth, and the digest/ip schemes as Apache ZooKeeper 3.8 implements them.

use crate::java;
use crate::{AuthIds, TreeConfig};
use base64::Engine;
use sha1::{Digest, Sha1};
use std::collections::HashMap;
use std::sync::Arc;
use zk_proto::{perms, Acl, ErrorCode, Id, Jute};

/// A node's ACL, shared by every node that has the same list (Apache's ACL cache).
pub type AclRef = Arc<Vec<Acl>>;

/// Interns ACL lists so a million nodes with the same ACL hold one copy.
#[derive(Debug, Default)]
pub struct AclTable {
    by_encoding: HashMap<Box<[u8]>, AclRef>,
    /// Entries released while something else (an in-flight watch event) still held a reference;
    /// swept once enough pile up, so unused ACLs do not linger.
    suspects: Vec<Box<[u8]>>,
    /// The list interned last. Nearly every node of a tree has the same ACL, so checking this one
    /// first spares encoding the list (an allocation) and a hash look-up on every create.
    last: Option<AclRef>,
}

/// Suspects gathered before a sweep.
const SWEEP_AT: usize = 1024;

fn encode(acl: &[Acl]) -> Vec<u8> {
    let mut out = Vec::with_capacity(acl.len() * 24);
    for a in acl {
        a.write(&mut out);
    }
    out
}

impl AclTable {
    /// The shared copy of `acl`, added if new.
    pub fn intern(&mut self, acl: &[Acl]) -> AclRef {
        if let Some(a) = self.shared(acl) {
            return a;
        }
        let key = encode(acl);
        let a = match self.by_encoding.get(key.as_slice()) {
            Some(a) => a.clone(),
            None => {
                let a: AclRef = Arc::new(acl.to_vec());
                self.by_encoding.insert(key.into_boxed_slice(), a.clone());
                a
            }
        };
        self.last = Some(a.clone());
        a
    }

    /// The shared copy of the list `a` holds: `a` itself, added, if the table has no equal list
    /// yet (a snapshot decoder made it on its own thread, and the nodes it decoded hold it).
    pub fn adopt(&mut self, a: AclRef) -> AclRef {
        if let Some(l) = self.last.as_ref().filter(|l| l.as_slice() == a.as_slice()) {
            return l.clone();
        }
        let key = encode(&a);
        let a = match self.by_encoding.get(key.as_slice()) {
            Some(e) => e.clone(),
            None => {
                self.by_encoding.insert(key.into_boxed_slice(), a.clone());
                a
            }
        };
        self.last = Some(a.clone());
        a
    }

    /// The shared copy of `acl` when it is the list interned last (no allocation, no look-up):
    /// what prep uses for a new node's ACL before apply interns it.
    pub fn shared(&self, acl: &[Acl]) -> Option<AclRef> {
        self.last.as_ref().filter(|a| a.as_slice() == acl).cloned()
    }

    /// Whether the table (with its cache of the last list) holds the only references to `a`.
    fn unused(&self, a: &AclRef) -> bool {
        let cached = self.last.as_ref().is_some_and(|l| Arc::ptr_eq(l, a));
        Arc::strong_count(a) == 1 + usize::from(cached)
    }

    /// Removes the entry for `key`, and the cache of the last list if it is that entry.
    fn remove(&mut self, key: &[u8]) {
        if let Some(a) = self.by_encoding.remove(key) {
            if self.last.as_ref().is_some_and(|l| Arc::ptr_eq(l, &a)) {
                self.last = None;
            }
        }
    }

    /// Drops a node's reference; the entry goes once no node uses it.
    pub fn release(&mut self, acl: AclRef) {
        let key = encode(&acl);
        drop(acl);
        match self.by_encoding.get(key.as_slice()) {
            Some(a) if self.unused(a) => self.remove(&key),
            Some(_) => {
                self.suspects.push(key.into_boxed_slice());
                if self.suspects.len() >= SWEEP_AT {
                    self.sweep();
                }
            }
            None => {}
        }
    }

    /// Removes suspected entries nobody references any more.
    fn sweep(&mut self) {
        for key in std::mem::take(&mut self.suspects) {
            if self.by_encoding.get(&key).is_some_and(|a| self.unused(a)) {
                self.remove(&key);
            }
        }
    }

    /// Distinct ACL lists in use.
    pub fn len(&self) -> usize {
        self.by_encoding.len()
    }

    /// Whether no ACL is stored.
    pub fn is_empty(&self) -> bool {
        self.by_encoding.is_empty()
    }
}

/// An identity to add to a connection after a successful addauth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthIdEntry {
    /// The id to add (`digest:user:hash`, or `ip:<addr>`).
    pub id: Id,
    /// Whether the id also makes the connection super (digest equal to the configured superDigest;
    /// Apache then also adds the id `super:`).
    pub is_super: bool,
}

/// Digest auth: `"user:password"` -> `"user:base64(sha1(user:password))"`, as
/// DigestAuthenticationProvider.generateDigest computes it. Apache accepts any string (the user is
/// the part before the first ':'), so this never fails; the Option is kept for callers' sake.
pub fn digest_id(user_password: &str) -> Option<String> {
    let user = user_password.split(':').next().unwrap_or("");
    let hash = Sha1::digest(user_password.as_bytes());
    Some(format!("{user}:{}", base64::engine::general_purpose::STANDARD.encode(hash)))
}

/// Validates an addauth packet and returns the identity to add to the connection.
///
/// - `digest`: any payload is accepted (decoded as UTF-8, lossily, like Java's `new String`);
///   the id is [`digest_id`] of it; `is_super` when it equals `cfg.super_digest`.
/// - `ip`: accepted; the id is the connection's address, which this pure function cannot know, so
///   it returns `ip:` with an empty id: use [`authenticate_conn`] to get it filled in.
/// - anything else (world, auth, super, sasl, x509, unknown): AUTHFAILED, as no provider exists.
pub fn authenticate(scheme: &str, auth: &[u8], cfg: &TreeConfig) -> Result<AuthIdEntry, ErrorCode> {
    authenticate_conn(scheme, auth, cfg, "")
}

/// [`authenticate`] for a connection whose remote address is `remote_addr` (used by `ip`).
pub fn authenticate_conn(
    scheme: &str,
    auth: &[u8],
    cfg: &TreeConfig,
    remote_addr: &str,
) -> Result<AuthIdEntry, ErrorCode> {
    match scheme {
        "digest" if cfg.digest_enabled => {
            let text = String::from_utf8_lossy(auth);
            let id = digest_id(&text).ok_or(ErrorCode::AuthFailed)?;
            let is_super = cfg.super_digest.as_deref() == Some(id.as_str());
            Ok(AuthIdEntry { id: Id { scheme: "digest".into(), id }, is_super })
        }
        "ip" => Ok(AuthIdEntry { id: Id { scheme: "ip".into(), id: remote_addr.into() }, is_super: false }),
        _ => Err(ErrorCode::AuthFailed),
    }
}

/// Schemes with a server provider (ip always, digest unless disabled).
fn provider_valid(cfg: &TreeConfig, scheme: &str, id: &str) -> bool {
    match scheme {
        "ip" => ip_valid(id),
        "digest" if cfg.digest_enabled => java::split_drop_trailing(id, ':').len() == 2,
        "x509" if cfg.x509_enabled => crate::x509::x509_id_valid(id),
        "sasl" if cfg.sasl_enabled => sasl_id_valid(id),
        _ => false,
    }
}

/// Whether ids of this scheme are "authenticated" ones that the `auth` scheme expands to.
fn provider_authenticated(cfg: &TreeConfig, scheme: &str) -> bool {
    (scheme == "digest" && cfg.digest_enabled)
        || (scheme == "x509" && cfg.x509_enabled)
        || (scheme == "sasl" && cfg.sasl_enabled)
}

/// Apache's SASL provider takes any id that parses as a Kerberos name: one without `@`, or
/// `primary[/instance]@realm` with no further `/` or `@`.
fn sasl_id_valid(id: &str) -> bool {
    let Some((name, realm)) = id.split_once('@') else { return true };
    name.matches('/').count() <= 1 && !realm.contains(['/', '@'])
}

/// Apache's `fixupACL`: drops duplicates, then checks each entry and expands `auth`.
///
/// Errors: INVALIDACL for an empty list, a world id other than `anyone`, an `auth` entry when the
/// caller has no authenticated (digest) id, a malformed digest (`user:hash`) or ip
/// (`a.b.c.d[/bits]`) id, or an unknown scheme.
pub fn fixup_acl(cfg: &TreeConfig, auth: &AuthIds, acl: &[Acl]) -> Result<Vec<Acl>, ErrorCode> {
    if acl.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    // Each entry once, at its first place (lists are a few entries: no set needed).
    let uniq = acl.iter().enumerate().filter(|&(i, a)| !acl[..i].contains(a)).map(|(_, a)| a);
    let mut out = Vec::with_capacity(acl.len());
    for a in uniq {
        let id = &a.id;
        if id.scheme == "world" && id.id == "anyone" {
            out.push(a.clone());
        } else if id.scheme == "auth" {
            let mut any = false;
            for cid in &auth.ids {
                if provider_authenticated(cfg, &cid.scheme) {
                    any = true;
                    out.push(Acl { perms: a.perms, id: cid.clone() });
                }
            }
            if !any {
                return Err(ErrorCode::InvalidAcl);
            }
        } else if provider_valid(cfg, &id.scheme, &id.id) {
            out.push(a.clone());
        } else {
            return Err(ErrorCode::InvalidAcl);
        }
    }
    Ok(out)
}

/// `ZooKeeperServer.checkACL`: passes for super, for an empty ACL, or when an entry covering any
/// bit of `perm` is world:anyone or matches one of the caller's ids (digest: equal; ip: CIDR).
///
/// Errors: NOAUTH otherwise.
pub fn check_acl(cfg: &TreeConfig, acl: &[Acl], perm: i32, auth: &AuthIds) -> Result<(), ErrorCode> {
    if acl.is_empty() || auth.is_super || auth.ids.iter().any(|i| i.scheme == "super") {
        return Ok(());
    }
    for a in acl {
        if a.perms & perm == 0 {
            continue;
        }
        if a.id.scheme == "world" && a.id.id == "anyone" {
            return Ok(());
        }
        for cid in &auth.ids {
            if cid.scheme != a.id.scheme {
                continue;
            }
            let hit = match cid.scheme.as_str() {
                "digest" if cfg.digest_enabled => cid.id == a.id.id,
                "ip" => ip_matches(&cid.id, &a.id.id),
                // Apache's X509AuthenticationProvider.matches: the same name, or the caller is
                // the configured super user.
                "x509" if cfg.x509_enabled => {
                    cid.id == a.id.id || cfg.x509_super_user.as_deref() == Some(cid.id.as_str())
                }
                // Apache's SASLAuthenticationProvider.matches: the same name, or the user `super`.
                "sasl" if cfg.sasl_enabled => cid.id == a.id.id || cid.id == "super",
                _ => false,
            };
            if hit {
                return Ok(());
            }
        }
    }
    Err(ErrorCode::NoAuth)
}

/// What getACL shows a caller without ADMIN: digest ids with everything after the first ':' of
/// each line replaced by 'x' (Java's `replaceAll(":.*", ":x")`).
pub fn mask_digests(acl: &[Acl]) -> Vec<Acl> {
    acl.iter()
        .map(|a| {
            if a.id.scheme != "digest" {
                return a.clone();
            }
            let mut out = String::with_capacity(a.id.id.len());
            let mut in_match = false;
            for c in a.id.id.chars() {
                let line_end = matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}');
                if in_match {
                    if line_end {
                        in_match = false;
                        out.push(c);
                    }
                } else if c == ':' {
                    out.push_str(":x");
                    in_match = true;
                } else {
                    out.push(c);
                }
            }
            Acl { perms: a.perms, id: Id { scheme: a.id.scheme.clone(), id: out } }
        })
        .collect()
}

/// Dotted-quad IPv4 only, as 3.8's IPAuthenticationProvider: IPv6 never parses.
fn v4_bytes(addr: &str) -> Option<[u8; 4]> {
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut b = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        let v = java::parse_int(p)?;
        if !(0..=255).contains(&v) {
            return None;
        }
        b[i] = v as u8;
    }
    Some(b)
}

fn prefix_bits(spec: Option<&str>) -> Option<u32> {
    match spec {
        None => Some(32),
        Some(s) => {
            let bits = java::parse_int(s)?;
            if (0..=32).contains(&bits) {
                Some(bits as u32)
            } else {
                None
            }
        }
    }
}

fn ip_valid(id: &str) -> bool {
    let mut parts = id.splitn(2, '/');
    let addr = parts.next().unwrap_or("");
    v4_bytes(addr).is_some() && prefix_bits(parts.next()).is_some()
}

/// Whether the caller's address `id` falls in the ACL's `addr[/bits]`.
pub fn ip_matches(id: &str, acl_expr: &str) -> bool {
    let mut parts = acl_expr.splitn(2, '/');
    let Some(acl_addr) = v4_bytes(parts.next().unwrap_or("")) else { return false };
    let Some(bits) = prefix_bits(parts.next()) else { return false };
    let Some(remote) = v4_bytes(id) else { return false };
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    (u32::from_be_bytes(acl_addr) & mask) == (u32::from_be_bytes(remote) & mask)
}

/// `perms` that allow reading, for callers that need them.
pub const READ_OR_ADMIN: i32 = perms::READ | perms::ADMIN;

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> TreeConfig {
        TreeConfig {
            super_digest: Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=".into()),
            ..TreeConfig::default()
        }
    }
    fn id(s: &str, i: &str) -> Id {
        Id { scheme: s.into(), id: i.into() }
    }
    fn acl(p: i32, s: &str, i: &str) -> Acl {
        Acl { perms: p, id: id(s, i) }
    }
    fn who(ids: &[Id]) -> AuthIds {
        AuthIds { ids: ids.to_vec(), is_super: false }
    }

    #[test]
    fn digest_matches_java() {
        // Computed by DigestAuthenticationProvider.generateDigest on the JVM.
        assert_eq!(digest_id("super:test").unwrap(), "super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
        assert_eq!(digest_id("bob").unwrap(), "bob:SBgazSKz7a68ikR4aKfffOYpkgo=");
    }

    #[test]
    fn authenticate_schemes() {
        let c = cfg();
        let e = authenticate("digest", b"super:test", &c).unwrap();
        assert!(e.is_super);
        assert_eq!(e.id, id("digest", "super:D/InIHSb7yEEbrWz8b9l71RjZJU="));
        assert!(!authenticate("digest", b"bob:pw", &c).unwrap().is_super);
        assert!(authenticate("digest", b"nocolon", &c).is_ok());
        assert_eq!(authenticate_conn("ip", b"", &c, "10.0.0.1").unwrap().id, id("ip", "10.0.0.1"));
        for s in ["world", "auth", "super", "sasl", "x509", "foo"] {
            assert_eq!(authenticate(s, b"a:b", &c), Err(ErrorCode::AuthFailed), "{s}");
        }
    }

    #[test]
    fn fixup_rules() {
        let c = cfg();
        let none = who(&[id("ip", "127.0.0.1")]);
        let bob = who(&[id("ip", "127.0.0.1"), id("digest", "bob:h")]);
        assert_eq!(fixup_acl(&c, &none, &[]), Err(ErrorCode::InvalidAcl));
        let w = acl(31, "world", "anyone");
        assert_eq!(fixup_acl(&c, &none, &[w.clone(), w.clone()]).unwrap(), vec![w.clone()]);
        assert_eq!(fixup_acl(&c, &none, &[acl(31, "world", "bob")]), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup_acl(&c, &none, &[acl(31, "auth", "")]), Err(ErrorCode::InvalidAcl));
        assert_eq!(
            fixup_acl(&c, &bob, &[acl(5, "auth", "whatever")]).unwrap(),
            vec![acl(5, "digest", "bob:h")]
        );
        assert!(fixup_acl(&c, &none, &[acl(1, "digest", "a:b")]).is_ok());
        assert_eq!(fixup_acl(&c, &none, &[acl(1, "digest", "a:")]), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup_acl(&c, &none, &[acl(1, "digest", "a:b:c")]), Err(ErrorCode::InvalidAcl));
        assert!(fixup_acl(&c, &none, &[acl(1, "ip", "10.0.0.0/8")]).is_ok());
        assert_eq!(fixup_acl(&c, &none, &[acl(1, "ip", "10.0.0.0/33")]), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup_acl(&c, &none, &[acl(1, "ip", "::1")]), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup_acl(&c, &none, &[acl(1, "super", "")]), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup_acl(&c, &none, &[acl(1, "sasl", "bob")]), Err(ErrorCode::InvalidAcl));
    }

    #[test]
    fn check_rules() {
        let c = cfg();
        let a = vec![acl(perms::READ, "digest", "bob:h"), acl(perms::WRITE, "ip", "10.1.0.0/16")];
        let bob = who(&[id("ip", "1.2.3.4"), id("digest", "bob:h")]);
        let lan = who(&[id("ip", "10.1.200.3")]);
        assert_eq!(check_acl(&c, &a, perms::READ, &bob), Ok(()));
        assert_eq!(check_acl(&c, &a, perms::WRITE, &bob), Err(ErrorCode::NoAuth));
        assert_eq!(check_acl(&c, &a, perms::WRITE, &lan), Ok(()));
        assert_eq!(check_acl(&c, &a, perms::READ, &lan), Err(ErrorCode::NoAuth));
        assert_eq!(check_acl(&c, &[], perms::ADMIN, &lan), Ok(()));
        let su = AuthIds { ids: vec![], is_super: true };
        assert_eq!(check_acl(&c, &a, perms::ADMIN, &su), Ok(()));
        assert_eq!(check_acl(&c, &a, perms::ADMIN, &who(&[id("super", "")])), Ok(()));
        // Either bit of a combined request suffices.
        assert_eq!(check_acl(&c, &a, READ_OR_ADMIN, &bob), Ok(()));
    }

    #[test]
    fn sasl_scheme() {
        let bob = who(&[id("ip", "127.0.0.1"), id("sasl", "bob")]);
        let off = cfg();
        assert_eq!(fixup_acl(&off, &bob, &[acl(31, "sasl", "bob")]), Err(ErrorCode::InvalidAcl));
        assert_eq!(check_acl(&off, &[acl(31, "sasl", "bob")], perms::READ, &bob), Err(ErrorCode::NoAuth));
        let on = TreeConfig { sasl_enabled: true, ..cfg() };
        assert!(fixup_acl(&on, &bob, &[acl(31, "sasl", "zk/host@EXAMPLE.COM")]).is_ok());
        for bad in ["a@b@c", "a/b/c@R", "a@R/x"] {
            assert_eq!(fixup_acl(&on, &bob, &[acl(31, "sasl", bad)]), Err(ErrorCode::InvalidAcl), "{bad}");
        }
        assert_eq!(fixup_acl(&on, &bob, &[acl(3, "auth", "")]).unwrap(), vec![acl(3, "sasl", "bob")]);
        let a = vec![acl(perms::READ, "sasl", "bob")];
        assert_eq!(check_acl(&on, &a, perms::READ, &bob), Ok(()));
        assert_eq!(check_acl(&on, &a, perms::READ, &who(&[id("sasl", "alice")])), Err(ErrorCode::NoAuth));
        assert_eq!(check_acl(&on, &a, perms::READ, &who(&[id("sasl", "super")])), Ok(()));
    }

    #[test]
    fn x509_scheme() {
        let off = cfg();
        let alice_dn = "CN=alice,O=Example";
        let alice = who(&[id("ip", "127.0.0.1"), id("x509", alice_dn)]);
        // Without a TLS port there is no x509 provider.
        assert_eq!(fixup_acl(&off, &alice, &[acl(31, "x509", alice_dn)]), Err(ErrorCode::InvalidAcl));
        assert_eq!(
            check_acl(&off, &[acl(31, "x509", alice_dn)], perms::READ, &alice),
            Err(ErrorCode::NoAuth)
        );
        let on = TreeConfig { x509_enabled: true, x509_super_user: Some("CN=admin".into()), ..cfg() };
        assert!(fixup_acl(&on, &alice, &[acl(31, "x509", alice_dn)]).is_ok());
        assert_eq!(fixup_acl(&on, &alice, &[acl(31, "x509", "alice")]), Err(ErrorCode::InvalidAcl));
        // `auth` expands to the certificate's id.
        assert_eq!(fixup_acl(&on, &alice, &[acl(3, "auth", "")]).unwrap(), vec![acl(3, "x509", alice_dn)]);
        let a = vec![acl(perms::READ, "x509", alice_dn)];
        assert_eq!(check_acl(&on, &a, perms::READ, &alice), Ok(()));
        let bob = who(&[id("x509", "CN=bob,O=Example")]);
        assert_eq!(check_acl(&on, &a, perms::READ, &bob), Err(ErrorCode::NoAuth));
        // Exact strings: no normalisation of case or spaces.
        assert_eq!(
            check_acl(&on, &a, perms::READ, &who(&[id("x509", "CN=alice, O=Example")])),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(check_acl(&on, &a, perms::READ, &who(&[id("x509", "CN=admin")])), Ok(()));
    }

    #[test]
    fn ip_matching() {
        assert!(ip_matches("10.0.0.1", "10.0.0.1"));
        assert!(!ip_matches("10.0.0.2", "10.0.0.1"));
        assert!(ip_matches("10.0.0.2", "10.0.0.0/24"));
        assert!(ip_matches("1.2.3.4", "0.0.0.0/0"));
        assert!(ip_matches("10.0.0.200", "10.0.0.128/25"));
        assert!(!ip_matches("10.0.0.100", "10.0.0.128/25"));
        assert!(!ip_matches("::1", "0.0.0.0/0"));
        assert!(!ip_matches("10.0.0.1", "10.0.0.1/x"));
    }

    #[test]
    fn masking() {
        let m = mask_digests(&[acl(1, "digest", "bob:abc:def"), acl(1, "ip", "1.2.3.4")]);
        assert_eq!(m[0].id.id, "bob:x");
        assert_eq!(m[1].id.id, "1.2.3.4");
    }

    #[test]
    fn table_interns_and_releases() {
        let mut t = AclTable::default();
        let a = t.intern(&[acl(31, "world", "anyone")]);
        let b = t.intern(&[acl(31, "world", "anyone")]);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(t.len(), 1);
        t.release(a);
        assert_eq!(t.len(), 1);
        t.release(b);
        assert_eq!(t.len(), 0);
        assert!(t.shared(&[acl(31, "world", "anyone")]).is_none(), "the cache went with the entry");
    }

    #[test]
    fn the_last_list_is_shared_without_a_look_up_and_still_released() {
        let mut t = AclTable::default();
        let open = [acl(31, "world", "anyone")];
        let read = [acl(1, "world", "anyone")];
        let a = t.intern(&open);
        let r = t.intern(&read);
        assert!(t.shared(&open).is_none(), "only the last list is cached");
        let s = t.shared(&read).expect("the last list");
        assert!(Arc::ptr_eq(&s, &r));
        drop(s);
        let a2 = t.intern(&open);
        assert!(Arc::ptr_eq(&a, &a2), "found in the table, and cached again");
        t.release(r);
        assert_eq!(t.len(), 1, "a list nobody uses goes, cached or not");
        t.release(a);
        t.release(a2);
        assert!(t.is_empty());
        assert!(t.shared(&open).is_none());
    }
}
