//! The SASL DIGEST-MD5 mechanism (RFC 2831) as ZooKeeper uses it: authentication only
//! (`qop=auth`, `algorithm=md5-sess`), no integrity or confidentiality layer.
//!
//! ZooKeeper runs it over its SASL request (opcode 102): the client sends an empty token, the
//! server answers with a challenge ([`ServerExchange`]), the client with a digest response
//! ([`ClientExchange`]), and the server with `rspauth=...`, proving it knew the password too.
//! Apache's server names itself `zookeeper/zk-sasl-md5` ([`SERVICE`], [`SERVER_NAME`]), which is
//! also the realm it offers.
//!
//! Both sides are pure: the caller brings the random nonce bytes (from a CSPRNG) and the
//! password look-up, and moves the tokens. Every token is bounded by [`MAX_TOKEN_BYTES`] and
//! each side takes a fixed number of steps; anything else is an [`Error`].

use md5::{Digest, Md5};
use std::fmt::Write as _;

/// The service (protocol) name ZooKeeper's servers and clients use in `digest-uri`.
pub const SERVICE: &str = "zookeeper";
/// The server name (and realm) ZooKeeper's DIGEST-MD5 server uses.
pub const SERVER_NAME: &str = "zk-sasl-md5";
/// The service name ZooKeeper servers use in `digest-uri` when they authenticate each other
/// (quorum SASL, `quorum.auth.enableSasl`).
pub const QUORUM_SERVICE: &str = "zookeeper-quorum";
/// The server name (and realm) of quorum SASL's DIGEST-MD5 server.
pub const QUORUM_SERVER_NAME: &str = "zk-quorum-sasl-md5";
/// Longest token either side accepts: RFC 2831 bounds a digest-response at 4096 bytes (and a
/// challenge at 2048).
pub const MAX_TOKEN_BYTES: usize = 4096;
/// Most directives read from one token (RFC 2831 defines 15 for a response).
const MAX_DIRECTIVES: usize = 32;

/// Why an exchange failed. Every case ends the authentication.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The token is longer than [`MAX_TOKEN_BYTES`].
    #[error("token of {0} bytes is longer than {MAX_TOKEN_BYTES}")]
    TooLong(usize),
    /// The token does not parse as a list of `name=value` directives.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// A directive the step needs is missing.
    #[error("missing directive {0}")]
    Missing(&'static str),
    /// A directive that may appear once appears twice.
    #[error("directive {0} appears more than once")]
    Repeated(String),
    /// A directive has a value this side does not accept.
    #[error("unacceptable {0}")]
    Unacceptable(&'static str),
    /// The user is unknown or the digest does not match its password.
    #[error("authentication failed for user {0:?}")]
    BadCredentials(String),
    /// The server's `rspauth` does not prove it knows the password.
    #[error("the server's rspauth does not match")]
    BadServerProof,
    /// A token arrived after the exchange was over (or had failed).
    #[error("the exchange is already over")]
    Finished,
}

/// What the server sends back after a client token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStep {
    /// The challenge, answering the client's empty first token.
    Challenge(Vec<u8>),
    /// The client proved its password: `rspauth` to send, and who it is.
    Success {
        /// `rspauth=<hex>`: the token for the client's last step.
        token: Vec<u8>,
        /// The authenticated user name (ZooKeeper's id is `sasl:<username>`).
        username: String,
    },
}

#[derive(Debug)]
enum ServerState {
    Start,
    Challenged,
    Over,
}

/// The server side of one exchange.
#[derive(Debug)]
pub struct ServerExchange {
    service: String,
    realm: String,
    authzid: Option<String>,
    nonce: String,
    state: ServerState,
}

impl ServerExchange {
    /// A new exchange offering `realm` (ZooKeeper: [`SERVER_NAME`]), with a nonce made from
    /// `nonce_bytes`, which must come from a cryptographically secure generator.
    pub fn new(realm: &str, nonce_bytes: &[u8; 16]) -> ServerExchange {
        ServerExchange::for_service(SERVICE, realm, nonce_bytes)
    }

    /// As [`Self::new`], for another service than [`SERVICE`] (quorum SASL:
    /// [`QUORUM_SERVICE`] with the realm [`QUORUM_SERVER_NAME`]): the digest response must name
    /// `<service>/<realm>` as its `digest-uri`.
    pub fn for_service(service: &str, realm: &str, nonce_bytes: &[u8; 16]) -> ServerExchange {
        ServerExchange {
            service: service.to_string(),
            realm: realm.to_string(),
            authzid: None,
            nonce: hex(nonce_bytes),
            state: ServerState::Start,
        }
    }

    /// The authorization id the client's response asked for (`authzid`), once it succeeded;
    /// `None` when it asked for none (it then acts as itself).
    pub fn authorization_id(&self) -> Option<&str> {
        self.authzid.as_deref()
    }

    /// Whether the client has authenticated (or the exchange failed): no more tokens are taken.
    pub fn is_over(&self) -> bool {
        matches!(self.state, ServerState::Over)
    }

    /// Takes the client's next token. `password_of` gives a user's password (`None`: no such
    /// user). The first token starts the exchange: DIGEST-MD5 has no initial response, and what a
    /// client sends there is ignored, as Apache's server ignores it. The second is the digest
    /// response, checked against `digest-uri` `<service>/<realm>`.
    ///
    /// Errors: any [`Error`]; the exchange is over after one.
    pub fn step(
        &mut self,
        token: &[u8],
        password_of: impl FnOnce(&str) -> Option<String>,
    ) -> Result<ServerStep, Error> {
        let state = std::mem::replace(&mut self.state, ServerState::Over);
        match state {
            ServerState::Start => {
                if token.len() > MAX_TOKEN_BYTES {
                    return Err(Error::TooLong(token.len()));
                }
                self.state = ServerState::Challenged;
                let challenge = format!(
                    "realm=\"{}\",nonce=\"{}\",charset=utf-8,algorithm=md5-sess",
                    quote(&self.realm),
                    self.nonce
                );
                Ok(ServerStep::Challenge(challenge.into_bytes()))
            }
            ServerState::Challenged => self.check_response(token, password_of),
            ServerState::Over => Err(Error::Finished),
        }
    }

    fn check_response(
        &mut self,
        token: &[u8],
        password_of: impl FnOnce(&str) -> Option<String>,
    ) -> Result<ServerStep, Error> {
        let d = Directives::parse(token)?;
        let utf8 = match d.once("charset")? {
            None => false,
            Some(c) if c.eq_ignore_ascii_case("utf-8") => true,
            Some(_) => return Err(Error::Unacceptable("charset")),
        };
        let username = d.once("username")?.ok_or(Error::Missing("username"))?;
        let realm = d.once("realm")?.unwrap_or("");
        if !realm.is_empty() && realm != self.realm {
            return Err(Error::Unacceptable("realm"));
        }
        if d.once("nonce")?.ok_or(Error::Missing("nonce"))? != self.nonce {
            return Err(Error::Unacceptable("nonce"));
        }
        let cnonce = d.once("cnonce")?.ok_or(Error::Missing("cnonce"))?;
        if cnonce.is_empty() {
            return Err(Error::Unacceptable("cnonce"));
        }
        let nc = d.once("nc")?.ok_or(Error::Missing("nc"))?;
        if u32::from_str_radix(nc, 16) != Ok(1) || nc.len() != 8 {
            return Err(Error::Unacceptable("nc"));
        }
        let qop = d.once("qop")?.unwrap_or("auth");
        if qop != "auth" {
            return Err(Error::Unacceptable("qop (only auth is offered)"));
        }
        let uri = d.once("digest-uri")?.ok_or(Error::Missing("digest-uri"))?;
        if uri != format!("{}/{}", self.service, self.realm) {
            return Err(Error::Unacceptable("digest-uri"));
        }
        let response = d.once("response")?.ok_or(Error::Missing("response"))?;
        let authzid = d.once("authzid")?;
        d.once("maxbuf")?;
        d.once("cipher")?;
        let Some(password) = password_of(username) else {
            return Err(Error::BadCredentials(username.to_string()));
        };
        let parts =
            Parts { username, realm, password: &password, nonce: &self.nonce, cnonce, nc, authzid, uri };
        let ha1 = parts.ha1(utf8)?;
        let expected = parts.digest(&ha1, "AUTHENTICATE");
        if !equal_ignoring_case(expected.as_bytes(), response.as_bytes()) {
            return Err(Error::BadCredentials(username.to_string()));
        }
        let rspauth = parts.digest(&ha1, "");
        self.authzid = authzid.map(str::to_string);
        Ok(ServerStep::Success {
            token: format!("rspauth={rspauth}").into_bytes(),
            username: username.to_string(),
        })
    }
}

#[derive(Debug)]
enum ClientState {
    Start,
    Initial,
    Responded { expected_rspauth: String },
    Over,
}

/// The client side of one exchange.
#[derive(Debug)]
pub struct ClientExchange {
    uri: String,
    authzid: Option<String>,
    username: String,
    password: String,
    cnonce: String,
    state: ClientState,
}

/// What the client does after a server token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStep {
    /// Send this token.
    Send(Vec<u8>),
    /// The server proved itself: authenticated, nothing more to send.
    Done,
}

impl ClientExchange {
    /// A new exchange for `username` and `password`, with a client nonce made from
    /// `cnonce_bytes`, which must come from a cryptographically secure generator.
    pub fn new(username: &str, password: &str, cnonce_bytes: &[u8; 16]) -> ClientExchange {
        ClientExchange::for_service(SERVICE, SERVER_NAME, username, password, cnonce_bytes)
    }

    /// As [`Self::new`], naming `<service>/<server_name>` as the `digest-uri` (quorum SASL:
    /// [`QUORUM_SERVICE`], [`QUORUM_SERVER_NAME`]).
    pub fn for_service(
        service: &str,
        server_name: &str,
        username: &str,
        password: &str,
        cnonce_bytes: &[u8; 16],
    ) -> ClientExchange {
        ClientExchange {
            uri: format!("{service}/{server_name}"),
            authzid: None,
            username: username.to_string(),
            password: password.to_string(),
            cnonce: hex(cnonce_bytes),
            state: ClientState::Start,
        }
    }

    /// Asks to act as `authzid` once authenticated (the response's `authzid` directive); without
    /// it the client acts as itself.
    pub fn with_authorization_id(mut self, authzid: &str) -> ClientExchange {
        self.authzid = Some(authzid.to_string());
        self
    }

    /// The first token: empty, as DIGEST-MD5 starts with the server's challenge.
    pub fn initial(&mut self) -> Vec<u8> {
        self.state = ClientState::Initial;
        Vec::new()
    }

    /// Whether the server proved itself.
    pub fn is_done(&self) -> bool {
        matches!(self.state, ClientState::Over)
    }

    /// Takes the server's next token: the challenge (answered with the digest response), then
    /// `rspauth` (checked).
    ///
    /// Errors: any [`Error`]; a wrong `rspauth` is [`Error::BadServerProof`].
    pub fn step(&mut self, token: &[u8]) -> Result<ClientStep, Error> {
        let state = std::mem::replace(&mut self.state, ClientState::Over);
        match state {
            ClientState::Start | ClientState::Initial => {
                let d = Directives::parse(token)?;
                let realm = d.first("realm").unwrap_or("");
                let nonce = d.once("nonce")?.ok_or(Error::Missing("nonce"))?;
                if d.once("algorithm")?.ok_or(Error::Missing("algorithm"))? != "md5-sess" {
                    return Err(Error::Unacceptable("algorithm"));
                }
                let utf8 = d.once("charset")?.is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
                if let Some(qops) = d.once("qop")? {
                    if !qops.split(',').any(|q| q.trim() == "auth") {
                        return Err(Error::Unacceptable("qop (auth not offered)"));
                    }
                }
                let uri = self.uri.clone();
                let parts = Parts {
                    username: &self.username,
                    realm,
                    password: &self.password,
                    nonce,
                    cnonce: &self.cnonce,
                    nc: "00000001",
                    authzid: self.authzid.as_deref(),
                    uri: &uri,
                };
                let ha1 = parts.ha1(utf8)?;
                let response = parts.digest(&ha1, "AUTHENTICATE");
                let mut out = String::with_capacity(256);
                if utf8 {
                    out.push_str("charset=utf-8,");
                }
                let _ = write!(out, "username=\"{}\",", quote(&self.username));
                if !realm.is_empty() {
                    let _ = write!(out, "realm=\"{}\",", quote(realm));
                }
                let _ = write!(
                    out,
                    "nonce=\"{}\",nc=00000001,cnonce=\"{}\",digest-uri=\"{}\",maxbuf=65536,response={},qop=auth",
                    quote(nonce),
                    self.cnonce,
                    quote(&uri),
                    response
                );
                if let Some(z) = &self.authzid {
                    let _ = write!(out, ",authzid=\"{}\"", quote(z));
                }
                self.state = ClientState::Responded { expected_rspauth: parts.digest(&ha1, "") };
                Ok(ClientStep::Send(out.into_bytes()))
            }
            ClientState::Responded { expected_rspauth } => {
                let d = Directives::parse(token)?;
                let got = d.once("rspauth")?.ok_or(Error::Missing("rspauth"))?;
                if !equal_ignoring_case(expected_rspauth.as_bytes(), got.as_bytes()) {
                    return Err(Error::BadServerProof);
                }
                Ok(ClientStep::Done)
            }
            ClientState::Over => Err(Error::Finished),
        }
    }
}

/// The values the digests are computed from.
struct Parts<'a> {
    username: &'a str,
    realm: &'a str,
    password: &'a str,
    nonce: &'a str,
    cnonce: &'a str,
    nc: &'a str,
    authzid: Option<&'a str>,
    uri: &'a str,
}

impl Parts<'_> {
    /// H(A1) for md5-sess, as bytes: A1 = H(user:realm:password):nonce:cnonce[:authzid].
    fn ha1(&self, utf8: bool) -> Result<[u8; 16], Error> {
        let mut inner = Md5::new();
        inner.update(text_bytes(self.username, utf8)?);
        inner.update(b":");
        inner.update(text_bytes(self.realm, utf8)?);
        inner.update(b":");
        inner.update(text_bytes(self.password, utf8)?);
        let mut a1 = Md5::new();
        a1.update(inner.finalize());
        a1.update(b":");
        a1.update(self.nonce.as_bytes());
        a1.update(b":");
        a1.update(self.cnonce.as_bytes());
        if let Some(z) = self.authzid {
            a1.update(b":");
            a1.update(z.as_bytes());
        }
        Ok(a1.finalize().into())
    }

    /// The response value (method `AUTHENTICATE`) or rspauth (empty method), in lower-case hex:
    /// HEX(H(HEX(H(A1)):nonce:nc:cnonce:auth:HEX(H(method:uri)))).
    fn digest(&self, ha1: &[u8; 16], method: &str) -> String {
        let a2 = hex(&Md5::digest(format!("{method}:{}", self.uri)));
        let kd = format!("{}:{}:{}:{}:auth:{a2}", hex(ha1), self.nonce, self.nc, self.cnonce);
        hex(&Md5::digest(kd))
    }
}

/// User name, realm and password go into A1 as ISO-8859-1 when every character fits (RFC 2831
/// 2.1.2.1), else as UTF-8, which only `charset=utf-8` allows.
fn text_bytes(s: &str, utf8: bool) -> Result<Vec<u8>, Error> {
    if s.chars().all(|c| u32::from(c) <= 0xff) {
        return Ok(s.chars().map(|c| c as u8).collect());
    }
    if utf8 {
        Ok(s.as_bytes().to_vec())
    } else {
        Err(Error::Unacceptable("non ISO-8859-1 text without charset=utf-8"))
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Compares without an early exit, so timing tells nothing of where a digest differs.
fn equal_ignoring_case(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x.to_ascii_lowercase() ^ y.to_ascii_lowercase())) == 0
}

/// Escapes `"` and `\` for a quoted-string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A token's `name=value` directives (RFC 2831 2.1: `#` lists, quoted strings with `\`
/// escapes, surrounding white space allowed, empty elements skipped).
struct Directives(Vec<(String, String)>);

impl Directives {
    fn parse(token: &[u8]) -> Result<Directives, Error> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Error::TooLong(token.len()));
        }
        let text = std::str::from_utf8(token).map_err(|_| Error::Malformed("not UTF-8"))?;
        let mut out = Vec::new();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix(',') {
                rest = r.trim_start();
                continue;
            }
            let eq = rest.find('=').ok_or(Error::Malformed("directive without ="))?;
            let name = rest[..eq].trim();
            if name.is_empty() || name.contains(|c: char| c == ',' || c == '"' || c.is_whitespace()) {
                return Err(Error::Malformed("bad directive name"));
            }
            rest = rest[eq + 1..].trim_start();
            let value;
            if let Some(r) = rest.strip_prefix('"') {
                let mut v = String::new();
                let mut chars = r.char_indices();
                let mut end = None;
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => v.push(chars.next().ok_or(Error::Malformed("unterminated quoted string"))?.1),
                        '"' => {
                            end = Some(i + 1);
                            break;
                        }
                        c => v.push(c),
                    }
                }
                let end = end.ok_or(Error::Malformed("unterminated quoted string"))?;
                value = v;
                rest = r[end..].trim_start();
            } else {
                let end = rest.find(',').unwrap_or(rest.len());
                value = rest[..end].trim().to_string();
                rest = &rest[end..];
            }
            if !rest.is_empty() && !rest.starts_with(',') {
                return Err(Error::Malformed("junk after a value"));
            }
            if out.len() == MAX_DIRECTIVES {
                return Err(Error::Malformed("too many directives"));
            }
            out.push((name.to_ascii_lowercase(), value));
        }
        Ok(Directives(out))
    }

    /// The value of a directive that may appear at most once.
    fn once(&self, name: &'static str) -> Result<Option<&str>, Error> {
        let mut found = None;
        for (n, v) in &self.0 {
            if n == name {
                if found.is_some() {
                    return Err(Error::Repeated(name.to_string()));
                }
                found = Some(v.as_str());
            }
        }
        Ok(found)
    }

    /// The first value of a directive that may repeat (a challenge's realms).
    fn first(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 2831 section 4, the IMAP example: the response and rspauth the RFC prints.
    #[test]
    fn rfc2831_imap_example() {
        let p = Parts {
            username: "chris",
            realm: "elwood.innosoft.com",
            password: "secret",
            nonce: "OA6MG9tEQGm2hh",
            cnonce: "OA6MHXh6VqTrRk",
            nc: "00000001",
            authzid: None,
            uri: "imap/elwood.innosoft.com",
        };
        let ha1 = p.ha1(false).unwrap();
        assert_eq!(p.digest(&ha1, "AUTHENTICATE"), "d388dad90d4bbd760a152321f2143af7");
        assert_eq!(p.digest(&ha1, ""), "ea40f60335c427b5527b84dbabcdfffd");
    }

    /// RFC 2831 section 4, the ACAP example.
    #[test]
    fn rfc2831_acap_example() {
        let p = Parts {
            username: "chris",
            realm: "elwood.innosoft.com",
            password: "secret",
            nonce: "OA9BSXrbuRhWay",
            cnonce: "OA9BSuZWMSpW8m",
            nc: "00000001",
            authzid: None,
            uri: "acap/elwood.innosoft.com",
        };
        let ha1 = p.ha1(false).unwrap();
        assert_eq!(p.digest(&ha1, "AUTHENTICATE"), "6084c6db3fede7352c551284490fd0fc");
        assert_eq!(p.digest(&ha1, ""), "2f0b3d7c3c2e486600ef710726aa2eae");
    }

    fn run(user: &str, client_pw: &str) -> Result<String, Error> {
        let mut s = ServerExchange::new(SERVER_NAME, &[7; 16]);
        let mut c = ClientExchange::new(user, client_pw, &[9; 16]);
        let users = |u: &str| (u == "bob").then(|| "bobpw".to_string());
        let ServerStep::Challenge(ch) = s.step(&c.initial(), users)? else { panic!("challenge expected") };
        let ClientStep::Send(resp) = c.step(&ch)? else { panic!("response expected") };
        let ServerStep::Success { token, username } = s.step(&resp, users)? else {
            panic!("success expected")
        };
        assert!(s.is_over());
        assert_eq!(c.step(&token)?, ClientStep::Done);
        assert!(c.is_done());
        Ok(username)
    }

    #[test]
    fn client_and_server_agree() {
        assert_eq!(run("bob", "bobpw"), Ok("bob".into()));
        assert_eq!(run("bob", "wrong"), Err(Error::BadCredentials("bob".into())));
        assert_eq!(run("eve", "bobpw"), Err(Error::BadCredentials("eve".into())));
    }

    #[test]
    fn challenge_is_apaches_shape() {
        let mut s = ServerExchange::new(SERVER_NAME, &[0xab; 16]);
        let ServerStep::Challenge(ch) = s.step(b"", |_| None).unwrap() else { panic!() };
        assert_eq!(
            String::from_utf8(ch).unwrap(),
            format!("realm=\"zk-sasl-md5\",nonce=\"{}\",charset=utf-8,algorithm=md5-sess", "ab".repeat(16))
        );
    }

    /// A response as Java's client writes it, computed by hand from the RFC's formulas.
    #[test]
    fn server_checks_a_java_shaped_response() {
        let mut s = ServerExchange::new(SERVER_NAME, &[1; 16]);
        s.step(b"", |_| None).unwrap();
        let nonce = "01".repeat(16);
        let p = Parts {
            username: "bob",
            realm: SERVER_NAME,
            password: "bobpw",
            nonce: &nonce,
            cnonce: "xyz",
            nc: "00000001",
            authzid: None,
            uri: "zookeeper/zk-sasl-md5",
        };
        let r = p.digest(&p.ha1(true).unwrap(), "AUTHENTICATE");
        let token = format!(
            "charset=utf-8,username=\"bob\",realm=\"zk-sasl-md5\",nonce=\"{nonce}\",nc=00000001,\
             cnonce=\"xyz\",digest-uri=\"zookeeper/zk-sasl-md5\",maxbuf=65536,response={r},qop=auth"
        );
        let step = s.step(token.as_bytes(), |_| Some("bobpw".into())).unwrap();
        let want = format!("rspauth={}", p.digest(&p.ha1(true).unwrap(), ""));
        assert_eq!(step, ServerStep::Success { token: want.into_bytes(), username: "bob".into() });
        assert_eq!(s.step(b"", |_| None), Err(Error::Finished));
    }

    #[test]
    fn bad_tokens_fail_without_panicking() {
        let responses: [&[u8]; 9] = [
            b"username=\"bob\"",
            b"username=\"bob\",username=\"bob\"",
            b"username=\"bob",
            b"=x",
            b"a=\"b\"c",
            b"\xff\xfe",
            b"username=\"bob\",nonce=\"wrong\",cnonce=\"c\",nc=00000001,digest-uri=\"zookeeper/zk-sasl-md5\",response=00",
            b",,,",
            &[b'a'; MAX_TOKEN_BYTES + 1],
        ];
        for r in responses {
            let mut s = ServerExchange::new(SERVER_NAME, &[1; 16]);
            s.step(b"", |_| None).unwrap();
            assert!(s.step(r, |_| Some("pw".into())).is_err(), "{:?}", String::from_utf8_lossy(r));
            assert!(s.is_over());
        }
        let mut s = ServerExchange::new(SERVER_NAME, &[1; 16]);
        assert!(s.step(b"username=\"bob\"", |_| None).is_ok(), "an initial response is ignored");
        let mut s = ServerExchange::new(SERVER_NAME, &[1; 16]);
        assert_eq!(s.step(&[0; MAX_TOKEN_BYTES + 1], |_| None), Err(Error::TooLong(MAX_TOKEN_BYTES + 1)));
    }

    #[test]
    fn client_refuses_a_wrong_rspauth() {
        let mut s = ServerExchange::new(SERVER_NAME, &[3; 16]);
        let mut c = ClientExchange::new("bob", "bobpw", &[4; 16]);
        let ServerStep::Challenge(ch) = s.step(&c.initial(), |_| None).unwrap() else { panic!() };
        c.step(&ch).unwrap();
        assert_eq!(c.step(b"rspauth=00000000000000000000000000000000"), Err(Error::BadServerProof));
    }

    /// Quorum SASL names another service: each side only accepts its own digest-uri, and the
    /// authorization id a response asks for is reported.
    #[test]
    fn quorum_service_exchanges_use_their_own_digest_uri() {
        let quorum_client =
            || ClientExchange::for_service(QUORUM_SERVICE, QUORUM_SERVER_NAME, "q", "qpw", &[5; 16]);
        let mut s = ServerExchange::for_service(QUORUM_SERVICE, QUORUM_SERVER_NAME, &[6; 16]);
        let mut c = quorum_client();
        let ServerStep::Challenge(ch) = s.step(&c.initial(), |_| None).unwrap() else { panic!() };
        let ClientStep::Send(resp) = c.step(&ch).unwrap() else { panic!() };
        assert!(String::from_utf8_lossy(&resp).contains("digest-uri=\"zookeeper-quorum/zk-quorum-sasl-md5\""));
        let ServerStep::Success { token, username } = s.step(&resp, |_| Some("qpw".into())).unwrap() else {
            panic!()
        };
        assert_eq!(username, "q");
        assert_eq!(s.authorization_id(), None);
        assert_eq!(c.step(&token), Ok(ClientStep::Done));
        // One asking to act as another user: the digest covers the authzid, which is reported.
        let mut s = ServerExchange::for_service(QUORUM_SERVICE, QUORUM_SERVER_NAME, &[6; 16]);
        let mut c = quorum_client().with_authorization_id("admin");
        let ServerStep::Challenge(ch) = s.step(&c.initial(), |_| None).unwrap() else { panic!() };
        let ClientStep::Send(resp) = c.step(&ch).unwrap() else { panic!() };
        let ServerStep::Success { token, .. } = s.step(&resp, |_| Some("qpw".into())).unwrap() else {
            panic!()
        };
        assert_eq!(s.authorization_id(), Some("admin"));
        assert_eq!(c.step(&token), Ok(ClientStep::Done));
        // A client-port server refuses the quorum digest-uri, and the other way round.
        let mut s = ServerExchange::new(SERVER_NAME, &[6; 16]);
        let mut c = quorum_client();
        let ServerStep::Challenge(ch) = s.step(&c.initial(), |_| None).unwrap() else { panic!() };
        let ClientStep::Send(resp) = c.step(&ch).unwrap() else { panic!() };
        assert_eq!(s.step(&resp, |_| Some("qpw".into())), Err(Error::Unacceptable("digest-uri")));
        let mut s = ServerExchange::for_service(QUORUM_SERVICE, QUORUM_SERVER_NAME, &[6; 16]);
        let mut c = ClientExchange::new("q", "qpw", &[5; 16]);
        let ServerStep::Challenge(ch) = s.step(&c.initial(), |_| None).unwrap() else { panic!() };
        let ClientStep::Send(resp) = c.step(&ch).unwrap() else { panic!() };
        assert_eq!(s.step(&resp, |_| Some("qpw".into())), Err(Error::Unacceptable("digest-uri")));
    }

    #[test]
    fn directives_parse_quoting_and_spaces() {
        let d = Directives::parse(b" a = \"x\\\"y,z\" , ,b=c ,C=\"\"").unwrap();
        assert_eq!(d.once("a").unwrap(), Some("x\"y,z"));
        assert_eq!(d.once("b").unwrap(), Some("c"));
        assert_eq!(d.once("c").unwrap(), Some(""));
    }
}
