//! Quorum SASL: ensemble members authenticating each other with DIGEST-MD5
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

/// Bytes of a packet before its token: magic, status, token length.
const HEADER_LEN: usize = 8 + 4 + 4;

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
    /// A token length was negative (other than -1) or over [`digest_md5::MAX_TOKEN_BYTES`].
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
            n if n < -1 || n as usize > digest_md5::MAX_TOKEN_BYTES => return Err(AuthError::BadLength(n)),
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
}
