//! Quorum SASL: ensemble members authenticating each other with DIGEST-MD5 or GSSAPI (Kerberos)
//! (`quorum.auth.enableSasl`), as Apache ZooKeeper 3.8 does, sans IO.
//!
//! Right after a connection between members is set up (the learner's connection to its leader's
//! quorum port, before FOLLOWERINFO; the election handshake, before any notification), the side
//! that connected (the *learner* here, whatever its role) runs an exchange of
//! [`QuorumAuthPacket`]s with the side that accepted (the *server*):
//!
//! 1. learner: `IN_PROGRESS`, empty token (DIGEST-MD5 has no initial response);
//! 2. server: `IN_PROGRESS`, the digest challenge;
//! 3. learner: `IN_PROGRESS`, the digest response;
//! 4. server: `SUCCESS` with `rspauth` (the learner checks it: the server knew the password too),
//!    or `ERROR` with an empty token.
//!
//! Every packet starts with the magic [`QUORUM_AUTH_MAGIC`], eight bytes no quorum packet (a
//! small type number first) and no election handshake (a negative protocol version, or a server
//! id) begins with, so an accepting server tells at once whether the
//! peer is trying to authenticate ([`starts_with_auth`]). The digest-uri is
//! `zookeeper-quorum/zk-quorum-sasl-md5` ([`digest_md5::QUORUM_SERVICE`],
//! [`digest_md5::QUORUM_SERVER_NAME`]); the learner's user must be listed in the server's
//! `QuorumServer` JAAS section, and may not ask to act as another user (`authzid`).
//!
//! With Kerberos (a `Krb5LoginModule` login), the same packets carry SASL GSSAPI (RFC 4752)
//! tokens ([`SaslLearnerAuth`], [`SaslServerAuth`]); the GSS-API calls are the caller's, behind
//! [`SaslClientMechanism`] and [`SaslServerMechanism`]:
//!
//! 1. learner: `IN_PROGRESS`, the first context token (GSSAPI's initial response);
//! 2. server: `IN_PROGRESS`, its context token when it has one (mutual authentication), which the
//!    learner answers with an empty token; then `IN_PROGRESS`, the wrapped security-layer offer;
//! 3. learner: `IN_PROGRESS`, the wrapped answer ("no security layer", its principal as the
//!    authorization id): its side of the exchange is complete;
//! 4. server: `SUCCESS` with a null token, or `ERROR` with an empty one.
//!
//! The server authorizes a Kerberos learner as Apache's `SaslQuorumServerCallbackHandler` does:
//! the authorization id must be the authenticated principal, of the form `service/host@REALM`,
//! with `host` one of the configured members' host names (as their `server.N` lines spell them).
//!
//! Whether a side authenticates at all is the caller's policy (`quorum.auth.learnerRequireSasl`,
//! `quorum.auth.serverRequireSasl`); these types run one exchange.

use bytes::{Buf, BufMut, Bytes};
use zk_proto::digest_md5::{self, ClientExchange, ClientStep, ServerExchange};
use zk_proto::jute::{Jute, Reader};

/// The first field of every quorum SASL packet (Apache's `QUORUM_AUTH_MAGIC_NUMBER`, written
/// there as the negation of the 64-bit pattern 0xa0dbcafecafe1234, which wraps to this positive
/// number).
pub const QUORUM_AUTH_MAGIC: i64 = (0xa0db_cafe_cafe_1234u64 as i64).wrapping_neg();

/// Most challenges a server sends before giving up (Apache's `MAX_RETRIES`); DIGEST-MD5 needs one.
pub const MAX_SERVER_ROUNDS: u32 = 5;

/// The longest token a packet may carry: room for Kerberos tickets with authorization data
/// (DIGEST-MD5 bounds its own tokens to [`digest_md5::MAX_TOKEN_BYTES`]).
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// Bytes of a packet before its token: magic, status, token length.
pub const HEADER_LEN: usize = 8 + 4 + 4;

zk_proto::record! {
    /// One packet of the exchange: `{i64 magic, i32 status, buffer token}`.
    pub struct QuorumAuthPacket {
        /// [`QUORUM_AUTH_MAGIC`].
        pub magic: i64,
        /// An [`AuthStatus`] number.
        pub status: i32,
        /// The SASL token (null: none).
        pub token: Option<Bytes>,
    }
}

/// Where an exchange stands, as a packet says it (`QuorumAuth.Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthStatus {
    /// More tokens follow (0).
    InProgress,
    /// The server authenticated the learner (1).
    Success,
    /// The server refused the learner (-1).
    Error,
}

impl AuthStatus {
    /// The wire number.
    pub fn to_wire(self) -> i32 {
        match self {
            AuthStatus::InProgress => 0,
            AuthStatus::Success => 1,
            AuthStatus::Error => -1,
        }
    }

    /// The status of a wire number; `None` for a number Apache does not send.
    pub fn from_wire(v: i32) -> Option<AuthStatus> {
        match v {
            0 => Some(AuthStatus::InProgress),
            1 => Some(AuthStatus::Success),
            -1 => Some(AuthStatus::Error),
            _ => None,
        }
    }
}

/// Why an exchange failed. Either side closes the connection after one (a server that does
/// not require authentication may keep it; see [`ServerAuth`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A packet did not start with [`QUORUM_AUTH_MAGIC`].
    #[error("not a quorum SASL packet (magic {0:#x})")]
    BadMagic(i64),
    /// A token length was negative (other than -1) or over [`MAX_TOKEN_BYTES`].
    #[error("bad token length {0}")]
    BadLength(i32),
    /// A status number outside -1..=1, or one the step does not allow.
    #[error("unexpected status {0}")]
    BadStatus(i32),
    /// The server answered `ERROR`: it refused our credentials.
    #[error("the server refused our credentials")]
    Refused,
    /// The DIGEST-MD5 exchange failed.
    #[error(transparent)]
    Sasl(#[from] digest_md5::Error),
    /// The learner authenticated as one user and asked to act as another.
    #[error("user {user:?} asked to act as {authzid:?}")]
    NotAuthorized {
        /// The authenticated user.
        user: String,
        /// The authorization id asked for.
        authzid: String,
    },
    /// The server sent more challenges than [`MAX_SERVER_ROUNDS`], or the learner more tokens.
    #[error("too many rounds")]
    TooManyRounds,
    /// The SASL mechanism (GSSAPI) refused a token or could not make one: the GSS-API library's
    /// message.
    #[error("{0}")]
    Mechanism(String),
    /// A Kerberos learner authenticated, but its principal is not `service/host@REALM` with
    /// `host` one of the ensemble's members.
    #[error(
        "{principal} is not authorized to join: its host is not one of the ensemble's members ({hosts})"
    )]
    HostNotAuthorized {
        /// The learner's principal.
        principal: String,
        /// The members' host names, comma-separated.
        hosts: String,
    },
}

impl QuorumAuthPacket {
    /// A packet with `status` and `token`.
    pub fn new(status: AuthStatus, token: Option<Bytes>) -> QuorumAuthPacket {
        QuorumAuthPacket { magic: QUORUM_AUTH_MAGIC, status: status.to_wire(), token }
    }

    /// Appends the packet's encoding to `out`.
    pub fn encode<B: BufMut>(&self, out: &mut B) {
        self.write(out);
    }

    /// The packet's encoding in a fresh buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        zk_proto::jute::to_bytes(self)
    }

    /// Takes one packet off the front of `buf`: `Ok(None)` while it is incomplete, else the
    /// packet and the bytes it took. The token length is checked before its bytes are awaited.
    ///
    /// Errors: [`AuthError::BadMagic`], [`AuthError::BadLength`].
    pub fn decode(buf: &[u8]) -> Result<Option<(QuorumAuthPacket, usize)>, AuthError> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let magic = (&buf[..8]).get_i64();
        if magic != QUORUM_AUTH_MAGIC {
            return Err(AuthError::BadMagic(magic));
        }
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let len = (&buf[12..16]).get_i32();
        let body = match len {
            -1 => 0,
            n if n < -1 || n as usize > MAX_TOKEN_BYTES => return Err(AuthError::BadLength(n)),
            n => n as usize,
        };
        if buf.len() < HEADER_LEN + body {
            return Ok(None);
        }
        let mut r = Reader::new(Bytes::copy_from_slice(&buf[..HEADER_LEN + body]));
        let p = QuorumAuthPacket::read(&mut r).map_err(|_| AuthError::BadLength(len))?;
        Ok(Some((p, HEADER_LEN + body)))
    }

    fn status(&self) -> Result<AuthStatus, AuthError> {
        AuthStatus::from_wire(self.status).ok_or(AuthError::BadStatus(self.status))
    }
}

/// Whether a stream whose first bytes are `first8` opens with a quorum SASL packet: the magic is
/// never the start of a quorum packet (a small type number first) nor of an election handshake
/// (a protocol version of -65536/-65535, or a server id).
pub fn starts_with_auth(first8: [u8; 8]) -> bool {
    i64::from_be_bytes(first8) == QUORUM_AUTH_MAGIC
}

/// What the learner does after a server packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnerStep {
    /// Send this packet and wait for the next.
    Send(QuorumAuthPacket),
    /// The server accepted us and proved it knew our password: the connection carries on.
    Authenticated,
}

/// The connecting side of one exchange.
#[derive(Debug)]
pub struct LearnerAuth {
    exchange: ClientExchange,
    rounds: u32,
}

impl LearnerAuth {
    /// An exchange as `username` with `password` (the `QuorumLearner` JAAS section), the client
    /// nonce made from `cnonce_bytes` (which must come from a cryptographically secure generator).
    pub fn new(username: &str, password: &str, cnonce_bytes: &[u8; 16]) -> LearnerAuth {
        LearnerAuth {
            exchange: ClientExchange::for_service(
                digest_md5::QUORUM_SERVICE,
                digest_md5::QUORUM_SERVER_NAME,
                username,
                password,
                cnonce_bytes,
            ),
            rounds: 0,
        }
    }

    /// The first packet: `IN_PROGRESS` with an empty token.
    pub fn first(&mut self) -> QuorumAuthPacket {
        QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from(self.exchange.initial())))
    }

    /// Takes the server's next packet.
    ///
    /// Errors: [`AuthError::Refused`] on `ERROR`; a malformed packet or token; a server whose
    /// `rspauth` is wrong, or that says `SUCCESS` before the exchange could be complete.
    pub fn on_packet(&mut self, p: &QuorumAuthPacket) -> Result<LearnerStep, AuthError> {
        if p.magic != QUORUM_AUTH_MAGIC {
            return Err(AuthError::BadMagic(p.magic));
        }
        self.rounds += 1;
        if self.rounds > MAX_SERVER_ROUNDS + 1 {
            return Err(AuthError::TooManyRounds);
        }
        let status = p.status()?;
        if status == AuthStatus::Error {
            return Err(AuthError::Refused);
        }
        // A null token is refused as Apache's learner refuses it.
        let token = p.token.as_deref().ok_or(digest_md5::Error::Missing("token"))?;
        match (status, self.exchange.step(token)?) {
            (AuthStatus::InProgress, ClientStep::Send(t)) => {
                Ok(LearnerStep::Send(QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from(t)))))
            }
            (AuthStatus::Success, ClientStep::Done) => Ok(LearnerStep::Authenticated),
            // SUCCESS with a challenge, or IN_PROGRESS after the server's proof.
            _ => Err(AuthError::BadStatus(p.status)),
        }
    }
}

/// What the server sends after a learner packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStep {
    /// Send this challenge and wait for the learner's next packet.
    Continue(QuorumAuthPacket),
    /// The learner proved its password: send `reply` (`SUCCESS`); `user` is who it is.
    Authenticated {
        /// The `SUCCESS` packet with `rspauth`.
        reply: QuorumAuthPacket,
        /// The authenticated user.
        user: String,
    },
    /// The learner failed: send `reply` (`ERROR`, empty token). A server requiring
    /// authentication then closes the connection; one that does not keeps it, as Apache's does.
    Failed {
        /// The `ERROR` packet.
        reply: QuorumAuthPacket,
        /// Why, for the log.
        why: AuthError,
    },
}

/// The accepting side of one exchange.
#[derive(Debug)]
pub struct ServerAuth {
    exchange: ServerExchange,
    rounds: u32,
}

impl ServerAuth {
    /// An exchange with a nonce made from `nonce_bytes` (from a cryptographically secure
    /// generator).
    pub fn new(nonce_bytes: &[u8; 16]) -> ServerAuth {
        ServerAuth {
            exchange: ServerExchange::for_service(
                digest_md5::QUORUM_SERVICE,
                digest_md5::QUORUM_SERVER_NAME,
                nonce_bytes,
            ),
            rounds: 0,
        }
    }

    /// Takes the learner's next packet; `password_of` looks a user up in the `QuorumServer`
    /// section. Never fails: a bad packet is a [`ServerStep::Failed`].
    pub fn on_packet(
        &mut self,
        p: &QuorumAuthPacket,
        password_of: impl FnOnce(&str) -> Option<String>,
    ) -> ServerStep {
        match self.step(p, password_of) {
            Ok(step) => step,
            Err(why) => ServerStep::Failed {
                reply: QuorumAuthPacket::new(AuthStatus::Error, Some(Bytes::new())),
                why,
            },
        }
    }

    fn step(
        &mut self,
        p: &QuorumAuthPacket,
        password_of: impl FnOnce(&str) -> Option<String>,
    ) -> Result<ServerStep, AuthError> {
        if p.magic != QUORUM_AUTH_MAGIC {
            return Err(AuthError::BadMagic(p.magic));
        }
        self.rounds += 1;
        if self.rounds > MAX_SERVER_ROUNDS {
            return Err(AuthError::TooManyRounds);
        }
        // Apache's server reads only the token; a learner sends IN_PROGRESS throughout.
        let token = p.token.as_deref().unwrap_or_default();
        match self.exchange.step(token, password_of)? {
            digest_md5::ServerStep::Challenge(c) => {
                Ok(ServerStep::Continue(QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from(c)))))
            }
            digest_md5::ServerStep::Success { token, username } => {
                if let Some(authzid) = self.exchange.authorization_id() {
                    if authzid != username {
                        return Err(AuthError::NotAuthorized {
                            user: username,
                            authzid: authzid.to_string(),
                        });
                    }
                }
                Ok(ServerStep::Authenticated {
                    reply: QuorumAuthPacket::new(AuthStatus::Success, Some(Bytes::from(token))),
                    user: username,
                })
            }
        }
    }
}

/// The learner's SASL mechanism (a GSSAPI client), as [`SaslLearnerAuth`] drives it: Java's
/// `SaslClient`, token in, token out.
pub trait SaslClientMechanism {
    /// Answers a token from the server (`evaluateChallenge`).
    ///
    /// Errors: the mechanism refuses the token (the library's message).
    fn evaluate(&mut self, challenge: &[u8]) -> Result<Vec<u8>, String>;
    /// Whether the mechanism has sent its last token (`isComplete`).
    fn is_complete(&self) -> bool;
}

/// What a [`SaslServerMechanism`] does with a learner token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MechanismStep {
    /// Send this challenge; more tokens are needed.
    Challenge(Vec<u8>),
    /// The exchange is complete.
    Complete {
        /// The authenticated principal.
        authentication_id: String,
        /// The authorization id the learner asked for (`None` or empty: itself).
        authorization_id: Option<String>,
    },
}

/// The server's SASL mechanism (a GSSAPI acceptor), as [`SaslServerAuth`] drives it: Java's
/// `SaslServer`, token in, token out.
pub trait SaslServerMechanism {
    /// Takes the learner's next token (`evaluateResponse`).
    ///
    /// Errors: the mechanism refuses the token (the library's message).
    fn evaluate(&mut self, response: &[u8]) -> Result<MechanismStep, String>;
}

/// The connecting side of one exchange with a mechanism other than DIGEST-MD5 (GSSAPI), with
/// the packet rules of Apache's `SaslQuorumAuthLearner`.
#[derive(Debug, Default)]
pub struct SaslLearnerAuth {
    rounds: u32,
}

impl SaslLearnerAuth {
    /// The exchange and its first packet: `IN_PROGRESS` with the mechanism's initial response
    /// (empty when it has none).
    pub fn start(initial: Vec<u8>) -> (SaslLearnerAuth, QuorumAuthPacket) {
        (
            SaslLearnerAuth { rounds: 0 },
            QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from(initial))),
        )
    }

    /// Takes the server's next packet, answering it with `mech`.
    ///
    /// Errors: [`AuthError::Refused`] on `ERROR`; `IN_PROGRESS` once the mechanism is complete,
    /// or `SUCCESS` before it could be ([`AuthError::BadStatus`]); a null token where one is due;
    /// a token the mechanism refuses; more than [`MAX_SERVER_ROUNDS`] + 1 packets.
    pub fn on_packet(
        &mut self,
        p: &QuorumAuthPacket,
        mech: &mut dyn SaslClientMechanism,
    ) -> Result<LearnerStep, AuthError> {
        if p.magic != QUORUM_AUTH_MAGIC {
            return Err(AuthError::BadMagic(p.magic));
        }
        self.rounds += 1;
        if self.rounds > MAX_SERVER_ROUNDS + 1 {
            return Err(AuthError::TooManyRounds);
        }
        let status = p.status()?;
        let token =
            || p.token.as_deref().ok_or_else(|| AuthError::Mechanism("the server's token is null".into()));
        match status {
            AuthStatus::Error => Err(AuthError::Refused),
            // Apache's learner stops reading challenges once its mechanism is complete and then
            // wants SUCCESS.
            AuthStatus::InProgress if mech.is_complete() => Err(AuthError::BadStatus(p.status)),
            AuthStatus::InProgress => {
                let out = mech.evaluate(token()?).map_err(AuthError::Mechanism)?;
                if out.len() > MAX_TOKEN_BYTES {
                    return Err(AuthError::Mechanism(format!("a token of {} bytes", out.len())));
                }
                Ok(LearnerStep::Send(QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from(out)))))
            }
            AuthStatus::Success if mech.is_complete() => Ok(LearnerStep::Authenticated),
            AuthStatus::Success => {
                // A last token that completes the mechanism with nothing to send (DIGEST-MD5's
                // rspauth; GSSAPI completes before SUCCESS).
                let out = mech.evaluate(token()?).map_err(AuthError::Mechanism)?;
                if !out.is_empty() || !mech.is_complete() {
                    return Err(AuthError::BadStatus(p.status));
                }
                Ok(LearnerStep::Authenticated)
            }
        }
    }
}

/// The accepting side of one exchange with a mechanism other than DIGEST-MD5 (GSSAPI), with
/// the packet rules of Apache's `SaslQuorumAuthServer` and the authorization of its
/// `SaslQuorumServerCallbackHandler` for a Kerberos learner.
#[derive(Debug)]
pub struct SaslServerAuth {
    authorized_hosts: Vec<String>,
    rounds: u32,
}

impl SaslServerAuth {
    /// An exchange authorizing learners whose principals' host part is one of
    /// `authorized_hosts` (the host names of the configured members' `server.N` lines).
    pub fn new(authorized_hosts: Vec<String>) -> SaslServerAuth {
        SaslServerAuth { authorized_hosts, rounds: 0 }
    }

    /// Takes the learner's next packet, evaluated by `mech`. Never fails: a bad packet, a
    /// refused token or an unauthorized learner is a [`ServerStep::Failed`].
    pub fn on_packet(&mut self, p: &QuorumAuthPacket, mech: &mut dyn SaslServerMechanism) -> ServerStep {
        match self.step(p, mech) {
            Ok(step) => step,
            Err(why) => ServerStep::Failed {
                reply: QuorumAuthPacket::new(AuthStatus::Error, Some(Bytes::new())),
                why,
            },
        }
    }

    fn step(
        &mut self,
        p: &QuorumAuthPacket,
        mech: &mut dyn SaslServerMechanism,
    ) -> Result<ServerStep, AuthError> {
        if p.magic != QUORUM_AUTH_MAGIC {
            return Err(AuthError::BadMagic(p.magic));
        }
        self.rounds += 1;
        if self.rounds > MAX_SERVER_ROUNDS {
            return Err(AuthError::TooManyRounds);
        }
        // Apache's server reads only the token (a null one is an empty one to its mechanism).
        match mech.evaluate(p.token.as_deref().unwrap_or_default()).map_err(AuthError::Mechanism)? {
            MechanismStep::Challenge(c) => {
                if c.len() > MAX_TOKEN_BYTES {
                    return Err(AuthError::Mechanism(format!("a challenge of {} bytes", c.len())));
                }
                Ok(ServerStep::Continue(QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from(c)))))
            }
            MechanismStep::Complete { authentication_id, authorization_id } => {
                let user = authorize_host_principal(
                    &authentication_id,
                    authorization_id.as_deref(),
                    &self.authorized_hosts,
                )?;
                // GSSAPI's last server step has no token: SUCCESS carries a null one, as Apache's.
                Ok(ServerStep::Authenticated {
                    reply: QuorumAuthPacket::new(AuthStatus::Success, None),
                    user,
                })
            }
        }
    }
}

/// Apache's authorization of a Kerberos learner: the authorization id (the authenticated
/// principal when none was asked for) must be the authenticated principal, and split at `/`
/// and `@` into exactly `service`, `host`, `REALM`, with `host` among `hosts`. Returns the
/// authorized principal.
///
/// Errors: [`AuthError::NotAuthorized`], [`AuthError::HostNotAuthorized`].
pub fn authorize_host_principal(
    authentication_id: &str,
    authorization_id: Option<&str>,
    hosts: &[String],
) -> Result<String, AuthError> {
    let authz = authorization_id.filter(|a| !a.is_empty()).unwrap_or(authentication_id);
    if authz != authentication_id {
        return Err(AuthError::NotAuthorized {
            user: authentication_id.to_string(),
            authzid: authz.to_string(),
        });
    }
    // Java's String.split drops trailing empty parts.
    let mut parts: Vec<&str> = authz.split(['/', '@']).collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.len() == 3 && hosts.iter().any(|h| h == parts[1]) {
        Ok(authz.to_string())
    } else {
        Err(AuthError::HostNotAuthorized { principal: authz.to_string(), hosts: hosts.join(", ") })
    }
}

/// The principal a learner asks for when the configured service principal
/// (`quorum.auth.kerberos.servicePrincipal`) is `principal` and it connects to a member
/// configured as `host`: as Apache's `SecurityUtils.getServerPrincipal`, `_HOST` is replaced
/// by the host name in lower case only when the whole principal is `service/_HOST` (no realm);
/// any other principal is used as it is.
pub fn service_principal_for(principal: &str, host: &str) -> String {
    let mut parts: Vec<&str> = principal.split('/').collect();
    // Java's String.split drops trailing empty parts.
    while parts.last() == Some(&"") {
        parts.pop();
    }
    match parts[..] {
        [service, "_HOST"] => format!("{service}/{}", host.to_lowercase()),
        _ => principal.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(name: &str) -> Option<String> {
        (name == "peer").then(|| "secret".to_string())
    }

    /// Runs a whole exchange through the encoded bytes; returns the server's last step and the
    /// learner's verdict.
    fn run(user: &str, password: &str) -> (ServerStep, Result<LearnerStep, AuthError>) {
        let mut l = LearnerAuth::new(user, password, &[1; 16]);
        let mut s = ServerAuth::new(&[2; 16]);
        let mut to_server = l.first();
        loop {
            let (p, used) = QuorumAuthPacket::decode(&to_server.to_vec()).unwrap().unwrap();
            assert_eq!(used, to_server.to_vec().len());
            let step = s.on_packet(&p, users);
            let reply = match &step {
                ServerStep::Continue(r) => r.clone(),
                ServerStep::Authenticated { reply, .. } | ServerStep::Failed { reply, .. } => reply.clone(),
            };
            let (r, _) = QuorumAuthPacket::decode(&reply.to_vec()).unwrap().unwrap();
            match l.on_packet(&r) {
                Ok(LearnerStep::Send(next)) if matches!(step, ServerStep::Continue(_)) => to_server = next,
                verdict => return (step, verdict),
            }
        }
    }

    #[test]
    fn a_listed_user_with_its_password_is_authenticated_both_ways() {
        let (step, verdict) = run("peer", "secret");
        assert!(matches!(step, ServerStep::Authenticated { ref user, .. } if user == "peer"), "{step:?}");
        assert_eq!(verdict, Ok(LearnerStep::Authenticated));
    }

    #[test]
    fn a_wrong_password_or_an_unknown_user_gets_error() {
        for (u, p) in [("peer", "wrong"), ("nobody", "secret")] {
            let (step, verdict) = run(u, p);
            let ServerStep::Failed { reply, why } = step else { panic!("{step:?}") };
            assert_eq!(reply.status, -1);
            assert!(matches!(why, AuthError::Sasl(digest_md5::Error::BadCredentials(_))), "{why:?}");
            assert_eq!(verdict, Err(AuthError::Refused));
        }
    }

    /// The bytes Apache writes: magic, status, then a jute buffer.
    #[test]
    fn packet_layout_is_apaches() {
        let p = QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::new()));
        assert_eq!(p.to_vec(), [0x5f, 0x24, 0x35, 0x01, 0x35, 0x01, 0xed, 0xcc, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(starts_with_auth(p.to_vec()[..8].try_into().unwrap()));
        let null = QuorumAuthPacket::new(AuthStatus::Success, None).to_vec();
        assert_eq!(&null[8..], [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        // An election handshake (protocol version -65536) and a quorum packet are not auth.
        assert!(!starts_with_auth((-65536i64).to_be_bytes()));
        assert!(!starts_with_auth([0, 0, 0, 11, 0, 0, 0, 0]));
    }

    #[test]
    fn decode_waits_for_whole_packets_and_bounds_the_token() {
        let bytes = QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from_static(b"abc"))).to_vec();
        for cut in 0..bytes.len() {
            assert_eq!(QuorumAuthPacket::decode(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
        let mut more = bytes.clone();
        more.extend_from_slice(b"next");
        let (p, used) = QuorumAuthPacket::decode(&more).unwrap().unwrap();
        assert_eq!((p.token.as_deref(), used), (Some(&b"abc"[..]), bytes.len()));
        let mut huge = bytes[..12].to_vec();
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(QuorumAuthPacket::decode(&huge), Err(AuthError::BadLength(i32::MAX)));
        let mut neg = bytes[..12].to_vec();
        neg.extend_from_slice(&(-2i32).to_be_bytes());
        assert_eq!(QuorumAuthPacket::decode(&neg), Err(AuthError::BadLength(-2)));
        assert!(matches!(QuorumAuthPacket::decode(&[0u8; 16]), Err(AuthError::BadMagic(0))));
    }

    /// A learner authenticated as one user may not act as another.
    #[test]
    fn an_authorization_id_other_than_the_user_is_refused() {
        let mut s = ServerAuth::new(&[2; 16]);
        let ServerStep::Continue(ch) =
            s.on_packet(&QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::new())), users)
        else {
            panic!()
        };
        let mut c = ClientExchange::for_service(
            digest_md5::QUORUM_SERVICE,
            digest_md5::QUORUM_SERVER_NAME,
            "peer",
            "secret",
            &[1; 16],
        )
        .with_authorization_id("admin");
        c.initial();
        let Ok(ClientStep::Send(resp)) = c.step(ch.token.as_deref().unwrap()) else { panic!() };
        let step =
            s.on_packet(&QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from(resp))), users);
        assert!(
            matches!(step, ServerStep::Failed { why: AuthError::NotAuthorized { ref authzid, .. }, .. } if authzid == "admin"),
            "{step:?}"
        );
    }

    /// A server that says SUCCESS before the learner could have answered its challenge, or
    /// sends garbage, fails the learner's exchange without a panic.
    #[test]
    fn a_learner_refuses_out_of_order_or_bad_packets() {
        let mut l = LearnerAuth::new("peer", "secret", &[1; 16]);
        l.first();
        let early = QuorumAuthPacket::new(AuthStatus::Success, Some(Bytes::from_static(b"rspauth=00")));
        assert!(l.on_packet(&early).is_err());
        let mut l = LearnerAuth::new("peer", "secret", &[1; 16]);
        l.first();
        let odd = QuorumAuthPacket { magic: QUORUM_AUTH_MAGIC, status: 7, token: None };
        assert_eq!(l.on_packet(&odd), Err(AuthError::BadStatus(7)));
        let mut l = LearnerAuth::new("peer", "secret", &[1; 16]);
        l.first();
        let null = QuorumAuthPacket::new(AuthStatus::InProgress, None);
        assert!(l.on_packet(&null).is_err());
    }

    /// A scripted GSSAPI client: answers each server token from `answers`, complete once they
    /// are used up.
    struct ScriptedClient {
        answers: Vec<Vec<u8>>,
        seen: Vec<Vec<u8>>,
    }

    impl SaslClientMechanism for ScriptedClient {
        fn evaluate(&mut self, challenge: &[u8]) -> Result<Vec<u8>, String> {
            self.seen.push(challenge.to_vec());
            if challenge == b"bad" {
                return Err("the library refused the token".into());
            }
            if self.answers.is_empty() {
                return Err("no more answers".into());
            }
            Ok(self.answers.remove(0))
        }
        fn is_complete(&self) -> bool {
            self.answers.is_empty()
        }
    }

    /// A scripted GSSAPI acceptor: the context token `ctx`, answered by the offer, then the
    /// answer, which completes as `principal`.
    struct ScriptedServer {
        principal: String,
        authzid: Option<String>,
        stage: u8,
    }

    impl SaslServerMechanism for ScriptedServer {
        fn evaluate(&mut self, response: &[u8]) -> Result<MechanismStep, String> {
            self.stage += 1;
            match (self.stage, response) {
                (1, b"ctx") => Ok(MechanismStep::Challenge(b"offer".to_vec())),
                (2, b"answer") => Ok(MechanismStep::Complete {
                    authentication_id: self.principal.clone(),
                    authorization_id: self.authzid.clone(),
                }),
                (_, r) => Err(format!("unexpected token {r:?}")),
            }
        }
    }

    fn hosts() -> Vec<String> {
        vec!["localhost".to_string(), "zk2.example".to_string()]
    }

    /// Runs a GSSAPI-shaped exchange through the encoded bytes.
    fn run_gss(
        principal: &str,
        authzid: Option<&str>,
    ) -> (ServerStep, Result<LearnerStep, AuthError>, Vec<Vec<u8>>) {
        let mut client = ScriptedClient { answers: vec![b"answer".to_vec()], seen: Vec::new() };
        let mut server =
            ScriptedServer { principal: principal.into(), authzid: authzid.map(String::from), stage: 0 };
        let (mut l, mut to_server) = SaslLearnerAuth::start(b"ctx".to_vec());
        let mut s = SaslServerAuth::new(hosts());
        loop {
            let (p, _) = QuorumAuthPacket::decode(&to_server.to_vec()).unwrap().unwrap();
            let step = s.on_packet(&p, &mut server);
            let reply = match &step {
                ServerStep::Continue(r) => r.clone(),
                ServerStep::Authenticated { reply, .. } | ServerStep::Failed { reply, .. } => reply.clone(),
            };
            let (r, _) = QuorumAuthPacket::decode(&reply.to_vec()).unwrap().unwrap();
            match l.on_packet(&r, &mut client) {
                Ok(LearnerStep::Send(next)) if matches!(step, ServerStep::Continue(_)) => to_server = next,
                verdict => return (step, verdict, client.seen),
            }
        }
    }

    #[test]
    fn a_member_principal_is_authenticated_and_success_carries_a_null_token() {
        let (step, verdict, seen) =
            run_gss("zkquorum/localhost@ZKRS.TEST", Some("zkquorum/localhost@ZKRS.TEST"));
        let ServerStep::Authenticated { reply, user } = step else { panic!("{step:?}") };
        assert_eq!(user, "zkquorum/localhost@ZKRS.TEST");
        assert_eq!(reply.to_vec()[8..], [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff], "SUCCESS, null token");
        assert_eq!(verdict, Ok(LearnerStep::Authenticated));
        assert_eq!(seen, [b"offer".to_vec()]);
        // No authorization id asked for: the principal itself.
        let (step, _, _) = run_gss("zkquorum/zk2.example@ZKRS.TEST", None);
        assert!(matches!(step, ServerStep::Authenticated { .. }), "{step:?}");
    }

    /// Apache's SaslQuorumServerCallbackHandler: the host part must be a member's host, the
    /// principal must have exactly three parts, and it may not act as another.
    #[test]
    fn principals_of_other_hosts_or_shapes_or_acting_as_others_are_refused() {
        for p in ["zkquorum/intruder@ZKRS.TEST", "alice@ZKRS.TEST", "zkquorum/localhost", "a/localhost/x@R"] {
            let (step, verdict, _) = run_gss(p, None);
            let ServerStep::Failed { reply, why } = step else { panic!("{p}: {step:?}") };
            assert_eq!(reply.status, -1);
            assert!(
                matches!(why, AuthError::HostNotAuthorized { ref principal, .. } if principal == p),
                "{why:?}"
            );
            assert!(why.to_string().contains("localhost, zk2.example"), "{why}");
            assert_eq!(verdict, Err(AuthError::Refused));
        }
        let (step, _, _) = run_gss("zkquorum/localhost@ZKRS.TEST", Some("zkquorum/zk2.example@ZKRS.TEST"));
        assert!(matches!(step, ServerStep::Failed { why: AuthError::NotAuthorized { .. }, .. }), "{step:?}");
        // A trailing separator is dropped as Java's split drops it.
        assert!(authorize_host_principal("zkquorum/localhost@", None, &hosts()).is_err());
        assert!(authorize_host_principal("zkquorum/localhost@R@", None, &hosts()).is_ok());
    }

    #[test]
    fn a_refused_token_fails_the_exchange_on_either_side() {
        let mut server = ScriptedServer { principal: "p".into(), authzid: None, stage: 0 };
        let mut s = SaslServerAuth::new(hosts());
        let step = s.on_packet(
            &QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from_static(b"junk"))),
            &mut server,
        );
        assert!(matches!(step, ServerStep::Failed { why: AuthError::Mechanism(_), .. }), "{step:?}");

        let mut client = ScriptedClient { answers: vec![b"answer".to_vec()], seen: Vec::new() };
        let (mut l, _) = SaslLearnerAuth::start(b"ctx".to_vec());
        let bad = QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from_static(b"bad")));
        assert!(matches!(l.on_packet(&bad, &mut client), Err(AuthError::Mechanism(_))));
    }

    /// The learner's packet rules: ERROR is a refusal; IN_PROGRESS after its mechanism is
    /// complete, or SUCCESS before it could be, is a protocol error; a null challenge is refused;
    /// a server that never finishes runs out of rounds.
    #[test]
    fn a_learner_refuses_out_of_order_gssapi_packets() {
        let progress =
            |t: &'static [u8]| QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::from_static(t)));
        let client = || ScriptedClient { answers: vec![b"answer".to_vec()], seen: Vec::new() };
        let (mut l, _) = SaslLearnerAuth::start(Vec::new());
        let mut c = client();
        assert_eq!(
            l.on_packet(&QuorumAuthPacket::new(AuthStatus::Error, Some(Bytes::new())), &mut c),
            Err(AuthError::Refused)
        );

        let (mut l, _) = SaslLearnerAuth::start(Vec::new());
        let mut c = client();
        assert!(matches!(l.on_packet(&progress(b"offer"), &mut c), Ok(LearnerStep::Send(_))));
        assert_eq!(l.on_packet(&progress(b"more"), &mut c), Err(AuthError::BadStatus(0)));

        let (mut l, _) = SaslLearnerAuth::start(Vec::new());
        let mut c = ScriptedClient { answers: vec![b"x".to_vec(), b"y".to_vec()], seen: Vec::new() };
        let early = QuorumAuthPacket::new(AuthStatus::Success, Some(Bytes::from_static(b"offer")));
        assert_eq!(l.on_packet(&early, &mut c), Err(AuthError::BadStatus(1)));

        let (mut l, _) = SaslLearnerAuth::start(Vec::new());
        let mut c = client();
        assert!(matches!(
            l.on_packet(&QuorumAuthPacket::new(AuthStatus::InProgress, None), &mut c),
            Err(AuthError::Mechanism(_))
        ));

        let (mut l, _) = SaslLearnerAuth::start(Vec::new());
        let mut c = ScriptedClient { answers: vec![Vec::new(); 20], seen: Vec::new() };
        let r = (0..10).map(|_| l.on_packet(&progress(b"again"), &mut c)).find(Result::is_err);
        assert_eq!(r, Some(Err(AuthError::TooManyRounds)));
    }

    #[test]
    fn a_server_that_never_completes_gives_up() {
        struct Endless;
        impl SaslServerMechanism for Endless {
            fn evaluate(&mut self, _: &[u8]) -> Result<MechanismStep, String> {
                Ok(MechanismStep::Challenge(b"more".to_vec()))
            }
        }
        let mut s = SaslServerAuth::new(hosts());
        let p = QuorumAuthPacket::new(AuthStatus::InProgress, Some(Bytes::new()));
        let steps: Vec<ServerStep> = (0..=MAX_SERVER_ROUNDS).map(|_| s.on_packet(&p, &mut Endless)).collect();
        assert!(steps[..MAX_SERVER_ROUNDS as usize].iter().all(|s| matches!(s, ServerStep::Continue(_))));
        assert!(matches!(steps.last(), Some(ServerStep::Failed { why: AuthError::TooManyRounds, .. })));
    }

    /// Apache's SecurityUtils.getServerPrincipal: `_HOST` only as the whole second part of a
    /// principal without a realm.
    #[test]
    fn host_is_put_in_the_service_principal_as_apache_does() {
        assert_eq!(service_principal_for("zkquorum/_HOST", "ZK1.Example"), "zkquorum/zk1.example");
        assert_eq!(service_principal_for("zkquorum/_HOST/", "h"), "zkquorum/h");
        assert_eq!(service_principal_for("zkquorum/_HOST@R", "h"), "zkquorum/_HOST@R");
        assert_eq!(service_principal_for("zkquorum/localhost", "h"), "zkquorum/localhost");
        assert_eq!(service_principal_for("zkquorum", "h"), "zkquorum");
    }
}
