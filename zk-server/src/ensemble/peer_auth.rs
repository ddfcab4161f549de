//! Quorum SASL on the quorum and election ports (`quorum.auth.*`): the I/O around
//! zk_quorum::auth's exchange, run right after a connection between members is set up (and its
//! TLS handshake, if any), before anything else is read or written on it.
//!
//! - The connecting side ([`authenticate_to`]) authenticates when `quorum.auth.learnerRequireSasl`
//!   is set, and otherwise sends nothing, as Apache's learner does.
//! - The accepting side ([`check_peer`]) looks at the first eight bytes: the auth magic starts an
//!   exchange; anything else is the peer's first packet or notification, which a server requiring
//!   SASL (`quorum.auth.serverRequireSasl`) refuses and one not requiring it lets through. A failed
//!   exchange is answered `ERROR`; the connection is then closed when SASL is required, kept
//!   (with a warning) when it is not, as Apache does (CVE-2023-44981: never skipped when required).
//!
//! The mechanism is Apache's choice: GSSAPI (Kerberos) when the side's JAAS section logs in
//! with `Krb5LoginModule`, DIGEST-MD5 otherwise. A Kerberos learner asks for
//! `quorum.auth.kerberos.servicePrincipal` (`_HOST` replaced by the member's host as its
//! `server.N` line names it) with zk-client's GSSAPI initiator; a Kerberos server accepts with
//! the client port's acceptor (`crate::kerberos`) and authorizes only principals
//! `service/host@REALM` whose host is a configured member's. The GSS-API calls (the learner's
//! ask the KDC for tickets) run on tokio's blocking threads.
//!
//! Bytes read past the exchange stay in the caller's buffer for the connection's reader.

use super::peer_tls::{PeerStream, SetupError};
use crate::sasl_config::QuorumSasl;
use bytes::BytesMut;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{info, warn};
use zk_quorum::auth::{
    starts_with_auth, LearnerAuth, LearnerStep, MechanismStep, QuorumAuthPacket, SaslClientMechanism,
    SaslLearnerAuth, SaslServerAuth, SaslServerMechanism, ServerAuth, ServerStep,
};

/// How connections between members are secured: TLS (`sslQuorum`, `portUnification`) and SASL
/// (`quorum.auth.*`); `None`: off.
#[derive(Clone, Default)]
pub struct PeerSecurity {
    /// TLS between members.
    pub tls: Option<std::sync::Arc<super::peer_tls::PeerTls>>,
    /// SASL between members.
    pub sasl: Option<std::sync::Arc<QuorumSasl>>,
}

/// Most bytes buffered while reading one auth packet: a packet with the longest token.
const MAX_PACKET: usize = zk_quorum::auth::HEADER_LEN + zk_quorum::auth::MAX_TOKEN_BYTES;

/// The learner's GSSAPI mechanism: zk-client's exchange over its initiator.
struct LearnerGss(zk_client::core::gssapi::GssExchange);

impl SaslClientMechanism for LearnerGss {
    fn evaluate(&mut self, challenge: &[u8]) -> Result<Vec<u8>, String> {
        match self.0.step(challenge)? {
            zk_client::core::gssapi::GssStep::Send(t) => Ok(t),
            zk_client::core::gssapi::GssStep::Done => Ok(Vec::new()),
        }
    }
    fn is_complete(&self) -> bool {
        self.0.is_complete()
    }
}

/// The server's GSSAPI mechanism: the client port's exchange over the keytab's acceptor.
struct ServerGss(crate::kerberos::GssapiExchange);

impl SaslServerMechanism for ServerGss {
    fn evaluate(&mut self, response: &[u8]) -> Result<MechanismStep, String> {
        Ok(match self.0.step(response)? {
            crate::kerberos::GssStep::Challenge(t) => MechanismStep::Challenge(t),
            crate::kerberos::GssStep::Success { principal } => MechanismStep::Complete {
                authentication_id: principal,
                authorization_id: self.0.authorization_id().map(str::to_string),
            },
        })
    }
}

/// Runs `f` on `value` on a blocking thread (GSS-API calls may wait for the KDC) and gives the
/// value back with the result.
async fn off_thread<T: Send + 'static, R: Send + 'static>(
    mut value: T,
    f: impl FnOnce(&mut T) -> R + Send + 'static,
) -> Result<(T, R), SetupError> {
    tokio::task::spawn_blocking(move || {
        let r = f(&mut value);
        (value, r)
    })
    .await
    .map_err(|e| SetupError::Gone(format!("quorum SASL task failed: {e}")))
}

fn nonce() -> Result<[u8; 16], SetupError> {
    use rand::RngCore;
    let mut n = [0u8; 16];
    rand::rngs::OsRng
        .try_fill_bytes(&mut n)
        .map_err(|e| SetupError::Refused(format!("no random nonce: {e}")))?;
    Ok(n)
}

async fn read_packet(stream: &mut PeerStream, buf: &mut BytesMut) -> Result<QuorumAuthPacket, SetupError> {
    loop {
        match QuorumAuthPacket::decode(buf) {
            Ok(Some((p, used))) => {
                let _ = buf.split_to(used);
                return Ok(p);
            }
            Ok(None) if buf.len() > MAX_PACKET => {
                return Err(SetupError::Refused("auth packet too long".into()))
            }
            Ok(None) => {}
            Err(e) => return Err(SetupError::Refused(format!("quorum SASL: {e}"))),
        }
        match stream.read_buf(buf).await {
            Ok(0) => return Err(SetupError::Gone("closed during quorum SASL".into())),
            Ok(_) => {}
            Err(e) => return Err(SetupError::Gone(format!("read during quorum SASL: {e}"))),
        }
    }
}

async fn write_packet(stream: &mut PeerStream, p: &QuorumAuthPacket) -> Result<(), SetupError> {
    let bytes = p.to_vec();
    match stream.write_all(&bytes).await {
        Ok(()) => {
            stream.flush().await.map_err(|e| SetupError::Gone(format!("write during quorum SASL: {e}")))
        }
        Err(e) => Err(SetupError::Gone(format!("write during quorum SASL: {e}"))),
    }
}

/// Authenticates this server to the member `peer` it connected to, within `limit`, when
/// `quorum.auth.learnerRequireSasl` says so (otherwise returns at once, having sent nothing).
/// Bytes the peer sent after its last auth packet are left in `buf`.
///
/// Errors: the peer refused our credentials, did not prove it knew them, sent something else
/// than auth packets, or took longer than `limit`.
pub async fn authenticate_to(
    sasl: Option<&QuorumSasl>,
    stream: &mut PeerStream,
    buf: &mut BytesMut,
    peer: i64,
    limit: Duration,
) -> Result<(), SetupError> {
    if let Some(k) = sasl.and_then(|s| s.learner_kerberos.as_ref().map(|k| (s, k))) {
        return match tokio::time::timeout(limit, kerberos_learner(k.0, k.1, stream, buf, peer)).await {
            Ok(r) => r,
            Err(_) => Err(SetupError::Gone(format!("quorum SASL (GSSAPI) with server {peer} timed out"))),
        };
    }
    let Some(creds) = sasl.and_then(|s| s.learner.as_ref()) else { return Ok(()) };
    let mut auth = LearnerAuth::new(&creds.username, &creds.password, &nonce()?);
    let exchange = async {
        write_packet(stream, &auth.first()).await?;
        loop {
            let p = read_packet(stream, buf).await?;
            match auth.on_packet(&p) {
                Ok(LearnerStep::Send(next)) => write_packet(stream, &next).await?,
                Ok(LearnerStep::Authenticated) => return Ok(()),
                Err(e) => {
                    return Err(SetupError::Refused(format!(
                        "quorum SASL with server {peer} as {:?} failed: {e}",
                        creds.username
                    )))
                }
            }
        }
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(r) => r,
        Err(_) => Err(SetupError::Gone(format!("quorum SASL with server {peer} timed out"))),
    }
}

/// The learner's GSSAPI exchange with server `peer`.
async fn kerberos_learner(
    sasl: &QuorumSasl,
    k: &crate::sasl_config::QuorumKerberosLearner,
    stream: &mut PeerStream,
    buf: &mut BytesMut,
    peer: i64,
) -> Result<(), SetupError> {
    let host = sasl.hosts.get(&peer).cloned().unwrap_or_default();
    if host.is_empty() && k.service_principal.contains("_HOST") {
        return Err(SetupError::Refused(format!(
            "quorum SASL with server {peer}: no configured host to put in {}",
            k.service_principal
        )));
    }
    let service = k.service_principal_for(&host);
    let failed = |e: String| {
        SetupError::Refused(format!("quorum SASL (GSSAPI) with server {peer} as {} failed: {e}", k.principal))
    };
    let (principal, keytab, svc) = (k.principal.clone(), k.keytab.clone(), service.clone());
    let ((), started) = off_thread((), move |_| {
        crate::kerberos::keytab_initiator(&principal, &keytab, &svc)
            .and_then(zk_client::core::gssapi::GssExchange::start)
    })
    .await?;
    let (exchange, first) = started.map_err(failed)?;
    let mut mech = LearnerGss(exchange);
    let (mut auth, packet) = SaslLearnerAuth::start(first);
    write_packet(stream, &packet).await?;
    loop {
        let p = read_packet(stream, buf).await?;
        let (back, step) = off_thread((mech, auth), move |(m, a)| a.on_packet(&p, m)).await?;
        (mech, auth) = back;
        match step {
            Ok(LearnerStep::Send(next)) => write_packet(stream, &next).await?,
            Ok(LearnerStep::Authenticated) => {
                info!(
                    "authenticated to server {peer} as {} for {service} (quorum SASL, GSSAPI)",
                    k.principal
                );
                return Ok(());
            }
            Err(zk_quorum::auth::AuthError::Refused) => {
                return Err(failed(format!("server {peer} refused our credentials")))
            }
            Err(e) => return Err(failed(e.to_string())),
        }
    }
}

/// Checks a member that connected here, within `limit`: runs its exchange if it opens one, and
/// applies `quorum.auth.serverRequireSasl`. Returns the user it authenticated as (`None`: it did
/// not, and SASL is not required). Bytes after the exchange (or the peer's first bytes, when it
/// did not authenticate) are left in `buf`.
///
/// Errors: SASL is required and the peer did not authenticate, or failed to; the peer went away
/// or was too slow.
pub async fn check_peer(
    sasl: Option<&QuorumSasl>,
    stream: &mut PeerStream,
    buf: &mut BytesMut,
    remote: &str,
    limit: Duration,
) -> Result<Option<String>, SetupError> {
    let Some(sasl) = sasl else { return Ok(None) };
    let exchange = async {
        while buf.len() < 8 {
            match stream.read_buf(buf).await {
                Ok(0) => return Err(SetupError::Gone("closed before its first packet".into())),
                Ok(_) => {}
                Err(e) => return Err(SetupError::Gone(format!("read: {e}"))),
            }
        }
        let first: [u8; 8] = buf[..8].try_into().unwrap_or_default();
        if !starts_with_auth(first) {
            if sasl.server_required {
                return Err(SetupError::Refused(
                    "the member did not authenticate and quorum.auth.serverRequireSasl is true".into(),
                ));
            }
            return Ok(None);
        }
        if let Some(k) = &sasl.server_kerberos {
            return kerberos_server(sasl, k, stream, buf, remote).await;
        }
        let mut auth = ServerAuth::new(&nonce()?);
        loop {
            let p = read_packet(stream, buf).await?;
            let step = auth.on_packet(&p, |u| sasl.users.get(u).cloned());
            if let Some(outcome) = answer_step(stream, step, sasl, remote, "quorum SASL").await? {
                return Ok(outcome);
            }
        }
    };
    let user = match tokio::time::timeout(limit, exchange).await {
        Ok(r) => r?,
        Err(_) => return Err(SetupError::Gone("quorum SASL timed out".into())),
    };
    if let Some(u) = &user {
        info!("member at {remote} authenticated as {u:?} (quorum SASL)");
    }
    Ok(user)
}

/// The server's GSSAPI exchange with a member that opened one (its first packet in `buf`).
async fn kerberos_server(
    sasl: &QuorumSasl,
    k: &crate::sasl_config::QuorumKerberosServer,
    stream: &mut PeerStream,
    buf: &mut BytesMut,
    remote: &str,
) -> Result<Option<String>, SetupError> {
    let mut mech = ServerGss(crate::kerberos::GssapiExchange::new(k.acceptor.as_ref()));
    let mut auth = SaslServerAuth::new(sasl.authorized_hosts());
    loop {
        let p = read_packet(stream, buf).await?;
        let (back, step) = off_thread((mech, auth), move |(m, a)| a.on_packet(&p, m)).await?;
        (mech, auth) = back;
        if let Some(outcome) = answer_step(stream, step, sasl, remote, "quorum SASL (GSSAPI)").await? {
            return Ok(outcome);
        }
    }
}

/// Sends the server's answer to one step of either mechanism's exchange. None: the exchange
/// goes on; Some(the authenticated user, or None for a failure let in). A failure is refused
/// when `quorum.auth.serverRequireSasl` is set (CVE-2023-44981: never skipped when required),
/// otherwise let in with a warning, as Apache does.
async fn answer_step(
    stream: &mut PeerStream,
    step: ServerStep,
    sasl: &QuorumSasl,
    remote: &str,
    what: &str,
) -> Result<Option<Option<String>>, SetupError> {
    match step {
        ServerStep::Continue(challenge) => {
            write_packet(stream, &challenge).await?;
            Ok(None)
        }
        ServerStep::Authenticated { reply, user } => {
            write_packet(stream, &reply).await?;
            Ok(Some(Some(user)))
        }
        ServerStep::Failed { reply, why } => {
            write_packet(stream, &reply).await?;
            if sasl.server_required {
                return Err(SetupError::Refused(format!("{what} failed: {why}")));
            }
            warn!("{what} from {remote} failed ({why}); let in, as quorum.auth.serverRequireSasl is false");
            Ok(Some(None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl_config::LearnerCredentials;
    use std::collections::HashMap;

    fn sasl(user: &str, password: &str, required: bool) -> QuorumSasl {
        QuorumSasl {
            learner: Some(LearnerCredentials { username: user.into(), password: password.into() }),
            server_required: required,
            users: HashMap::from([("peer".to_string(), "secret".to_string())]),
            learner_kerberos: None,
            server_kerberos: None,
            hosts: HashMap::new(),
            cnxn_threads: crate::sasl_config::DEFAULT_QUORUM_CNXN_THREADS,
        }
    }

    async fn pair() -> (PeerStream, PeerStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let a = tokio::net::TcpStream::connect(l.local_addr().expect("addr")).await.expect("connect");
        let (b, _) = l.accept().await.expect("accept");
        (PeerStream::Plain(a), PeerStream::Plain(b))
    }

    /// Runs both sides; returns (learner's result, server's result, server's leftover bytes).
    async fn run(
        learner: Option<QuorumSasl>,
        server: QuorumSasl,
        after: &'static [u8],
    ) -> (Result<(), SetupError>, Result<Option<String>, SetupError>, Vec<u8>) {
        let (mut a, mut b) = pair().await;
        let limit = Duration::from_secs(5);
        let l = tokio::spawn(async move {
            let mut buf = BytesMut::new();
            let r = authenticate_to(learner.as_ref(), &mut a, &mut buf, 1, limit).await;
            if r.is_ok() {
                let _ = a.write_all(after).await;
            }
            // Keep the connection open until the server side is done.
            let _ = a.read_buf(&mut buf).await;
            r
        });
        let mut buf = BytesMut::new();
        let s = check_peer(Some(&server), &mut b, &mut buf, "test", limit).await;
        if s.is_ok() {
            while buf.len() < after.len() {
                if b.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    break;
                }
            }
        }
        drop(b);
        (l.await.expect("learner"), s, buf.to_vec())
    }

    #[tokio::test]
    async fn members_with_the_password_authenticate_and_their_packets_follow() {
        let (l, s, rest) =
            run(Some(sasl("peer", "secret", true)), sasl("peer", "secret", true), b"FOLLOWERINFO...").await;
        assert!(l.is_ok(), "{l:?}");
        assert_eq!(s.ok().flatten().as_deref(), Some("peer"));
        assert_eq!(rest, b"FOLLOWERINFO...");
    }

    /// CVE-2023-44981's invariant: with SASL required, a member that skips it or fails it is not
    /// let in; without it required, both get in (Apache's behaviour), a failed one told ERROR.
    #[tokio::test]
    async fn required_sasl_cannot_be_skipped_or_failed() {
        let (_, s, _) = run(None, sasl("peer", "secret", true), b"\0\0\0\x0bFOLLOWERINFO").await;
        assert!(matches!(s, Err(SetupError::Refused(ref w)) if w.contains("did not authenticate")), "{s:?}");
        let (l, s, _) = run(Some(sasl("peer", "wrong", true)), sasl("peer", "secret", true), b"").await;
        assert!(
            matches!(l, Err(SetupError::Refused(ref w)) if w.contains("refused our credentials")),
            "{l:?}"
        );
        assert!(matches!(s, Err(SetupError::Refused(_))), "{s:?}");

        let (_, s, rest) = run(None, sasl("peer", "secret", false), b"\0\0\0\x0bFOLLOWERINFO").await;
        assert_eq!(s.ok(), Some(None));
        assert_eq!(rest, b"\0\0\0\x0bFOLLOWERINFO", "the unauthenticated peer's first bytes are kept");
        let (l, s, _) = run(Some(sasl("peer", "wrong", true)), sasl("peer", "secret", false), b"").await;
        assert!(l.is_err(), "the learner still learns it was refused");
        assert_eq!(s.ok(), Some(None));
    }
}

#[cfg(test)]
mod kerberos_tests {
    use super::*;
    use crate::kerberos::{Accepted, GssAcceptor, GssContext};
    use crate::sasl_config::QuorumKerberosServer;
    use std::collections::HashMap;
    use std::sync::Arc;
    use zk_quorum::auth::AuthStatus;

    /// An acceptor whose contexts take the token `ticket-for-<principal>` as that principal's
    /// AP-REQ (no AP-REP), and wrap and unwrap by adding and stripping a `W` byte.
    struct Scripted;

    struct Ctx;

    impl GssAcceptor for Scripted {
        fn start(&self) -> Box<dyn GssContext> {
            Box::new(Ctx)
        }
    }

    impl GssContext for Ctx {
        fn accept(&mut self, token: &[u8]) -> Result<Accepted, String> {
            let t = std::str::from_utf8(token).map_err(|_| "not a ticket".to_string())?;
            let client = t.strip_prefix("ticket-for-").ok_or("Decrypt integrity check failed")?;
            Ok(Accepted::Established { token: None, client: client.to_string() })
        }
        fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
            Ok([b"W".as_slice(), msg].concat())
        }
        fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
            msg.strip_prefix(b"W").map(<[u8]>::to_vec).ok_or_else(|| "not wrapped".to_string())
        }
    }

    fn sasl(required: bool) -> QuorumSasl {
        QuorumSasl {
            learner: None,
            server_required: required,
            users: HashMap::new(),
            learner_kerberos: None,
            server_kerberos: Some(QuorumKerberosServer {
                principal: "zkquorum/localhost@R".into(),
                keytab: "/k".into(),
                acceptor: Arc::new(Scripted),
            }),
            hosts: HashMap::from([(1, "localhost".to_string()), (2, "zk2".to_string())]),
            cnxn_threads: crate::sasl_config::DEFAULT_QUORUM_CNXN_THREADS,
        }
    }

    /// Plays a learner sending `tokens` (each after the server's previous answer); returns the
    /// server's verdict and the statuses it sent.
    async fn learner_sends(
        server: QuorumSasl,
        tokens: &'static [&'static [u8]],
    ) -> (Result<Option<String>, SetupError>, Vec<i32>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let a = tokio::net::TcpStream::connect(l.local_addr().expect("addr")).await.expect("connect");
        let (b, _) = l.accept().await.expect("accept");
        let (mut a, mut b) = (PeerStream::Plain(a), PeerStream::Plain(b));
        let learner = tokio::spawn(async move {
            let mut statuses = Vec::new();
            let mut buf = BytesMut::new();
            for t in tokens {
                let p = QuorumAuthPacket::new(AuthStatus::InProgress, Some(bytes::Bytes::from_static(t)));
                if write_packet(&mut a, &p).await.is_err() {
                    break;
                }
                match read_packet(&mut a, &mut buf).await {
                    Ok(reply) => statuses.push(reply.status),
                    Err(_) => break,
                }
            }
            statuses
        });
        let mut buf = BytesMut::new();
        let verdict = check_peer(Some(&server), &mut b, &mut buf, "test", Duration::from_secs(5)).await;
        drop(b);
        (verdict, learner.await.expect("learner"))
    }

    #[tokio::test]
    async fn a_member_principal_gets_the_offer_then_success() {
        let (v, statuses) =
            learner_sends(sasl(true), &[b"ticket-for-zkquorum/zk2@R", b"W\x01\x00\x00\x00"]).await;
        assert_eq!(v.ok().flatten().as_deref(), Some("zkquorum/zk2@R"));
        assert_eq!(statuses, [0, 1], "IN_PROGRESS (the offer), then SUCCESS");
    }

    /// CVE-2023-44981's invariant with GSSAPI: a ticket the keytab cannot take, or a principal
    /// of no member's host (or of none at all, `eve@R`), is answered ERROR and cut off when SASL
    /// is required; only when it is not is the member let in (with a warning), as in Apache.
    #[tokio::test]
    async fn bad_tickets_and_unauthorized_principals_are_refused_when_required() {
        let cases: [&'static [&'static [u8]]; 3] = [
            &[b"garbage"],
            &[b"ticket-for-zkquorum/intruder@R", b"W\x01\x00\x00\x00"],
            &[b"ticket-for-eve@R", b"W\x01\x00\x00\x00"],
        ];
        for tokens in cases {
            let (v, statuses) = learner_sends(sasl(true), tokens).await;
            assert!(
                matches!(v, Err(SetupError::Refused(ref w)) if w.contains("GSSAPI")),
                "{tokens:?}: {v:?}"
            );
            assert_eq!(statuses.last(), Some(&-1), "{tokens:?}: ERROR sent");
            let (v, _) = learner_sends(sasl(false), tokens).await;
            assert_eq!(v.ok(), Some(None), "{tokens:?}: let in unauthenticated when not required");
        }
        let (v, _) =
            learner_sends(sasl(true), &[b"ticket-for-zkquorum/intruder@R", b"W\x01\x00\x00\x00"]).await;
        let Err(SetupError::Refused(why)) = v else { panic!("{v:?}") };
        assert!(why.contains("zkquorum/intruder@R is not authorized to join"), "{why}");
    }
}
