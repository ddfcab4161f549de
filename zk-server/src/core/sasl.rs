//! SASL (DIGEST-MD5, or GSSAPI with a Kerberos login) over the SASL request (opcode 102), and `enforce.auth.*`: what Apache's
//! server does when it receives either, before a request reaches its pipeline.

use super::conns::SaslExchange;
use super::*;
use crate::kerberos::{GssStep, GssapiExchange};
use rand::RngCore;
use zk_proto::digest_md5::{self, ServerExchange, ServerStep};

impl ServerCore {
    /// A SASL token (`None`: the request did not decode). Answered at once with the next
    /// server token (zxid 0); a failed exchange is answered AUTHFAILED, or
    /// SESSIONCLOSEDREQUIRESASLAUTH when enforcement requires SASL, and the connection closes.
    /// A request whose body does not decode closes the connection unanswered, as Apache's
    /// deserialization error does.
    pub(super) fn on_sasl(&mut self, conn: ConnId, sid: SessionId, xid: i32, token: Option<Bytes>) {
        let Some(token) = token else {
            warn!("session 0x{sid:x} sent an undecodable SASL request; closing");
            self.actions.push_back(Action::ReleasePermit);
            self.actions.push_back(Action::Close { conn });
            return;
        };
        let sasl = &self.settings.sasl;
        if sasl.users.is_none() && sasl.kerberos.is_none() {
            // No JAAS server section: Apache's connection has no SASL server and answers a null
            // token.
            info!("session 0x{sid:x} sent a SASL token; SASL is not configured");
            return self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, &Body::SaslToken(None));
        }
        let Some(c) = self.conns.get_mut(conn) else {
            self.actions.push_back(Action::ReleasePermit);
            return;
        };
        let exchange = c.sasl.get_or_insert_with(|| match &sasl.kerberos {
            Some(k) => SaslExchange::Gssapi(Box::new(GssapiExchange::new(k.acceptor.as_ref()))),
            None => {
                let mut nonce = [0u8; 16];
                self.sasl_rng.fill_bytes(&mut nonce);
                SaslExchange::Digest(Box::new(ServerExchange::new(digest_md5::SERVER_NAME, &nonce)))
            }
        });
        // Ok(token, None): the exchange goes on; Ok(token, Some(id)): authenticated.
        let step: Result<(Option<Vec<u8>>, Option<String>), String> = match exchange {
            SaslExchange::Digest(x) => {
                let users = sasl.users.as_ref();
                match x.step(&token, |user| users.and_then(|u| u.get(user).cloned())) {
                    Ok(ServerStep::Challenge(t)) => Ok((Some(t), None)),
                    Ok(ServerStep::Success { token, username }) => Ok((Some(token), Some(username))),
                    Err(e) => Err(e.to_string()),
                }
            }
            SaslExchange::Gssapi(x) => match x.step(&token) {
                Ok(GssStep::Challenge(t)) => Ok((Some(t), None)),
                Ok(GssStep::Success { principal }) => {
                    let mapping = sasl.kerberos.as_ref().map(|k| &k.mapping);
                    match mapping.map(|m| m.id_for(&principal)) {
                        Some(Ok(id)) => {
                            info!("session 0x{sid:x}: Kerberos principal {principal} is sasl:{id}");
                            Ok((None, Some(id)))
                        }
                        Some(Err(e)) => Err(e),
                        None => Err("GSSAPI without Kerberos settings".into()),
                    }
                }
                Err(e) => Err(e),
            },
        };
        let mech = match exchange {
            SaslExchange::Digest(_) => "DIGEST-MD5",
            SaslExchange::Gssapi(_) => "GSSAPI",
        };
        match step {
            Ok((t, None)) => {
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, &Body::SaslToken(t.map(Into::into)))
            }
            Ok((token, Some(username))) => {
                info!("session 0x{sid:x}: SASL {mech} authenticated {username} from {}", c.remote);
                let id = Id { scheme: "sasl".into(), id: username };
                let is_super = sasl.super_users.contains(&id.id);
                if !c.auth.ids.contains(&id) {
                    c.auth.ids.push(id);
                }
                if is_super {
                    info!("session 0x{sid:x}: SASL user is a super user (zookeeper.superUser)");
                    c.auth.is_super = true;
                    let sup = Id { scheme: "super".into(), id: String::new() };
                    if !c.auth.ids.contains(&sup) {
                        c.auth.ids.push(sup);
                    }
                }
                let body = Body::SaslToken(token.map(Into::into));
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, &body)
            }
            Err(e) => {
                warn!("session 0x{sid:x}: client {} failed to SASL ({mech}) authenticate: {e}", c.remote);
                self.stats.auth_failed += 1;
                if sasl.allow_failed && !sasl.sasl_required {
                    // zookeeper.allowSaslFailedClients: the connection stays, unauthenticated.
                    return self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, &Body::SaslToken(None));
                }
                let err = if sasl.sasl_required {
                    ErrorCode::SessionClosedRequireSaslAuth
                } else {
                    ErrorCode::AuthFailed
                };
                // Apache writes the (null) token after the error header too.
                self.reply_always(
                    conn,
                    ReplyHeader { xid, zxid: 0, err: err.code() },
                    &Body::SaslToken(None),
                );
                self.actions.push_back(Action::Close { conn });
            }
        }
    }

    /// `enforce.auth.enabled`: a request other than auth and SASL from a connection without an
    /// id of an enforced scheme is answered SESSIONCLOSEDREQUIRESASLAUTH (zxid 0) and its
    /// connection closed (the session lives on until it expires), as Apache does. Returns
    /// whether the request may go on.
    pub(super) fn enforce_auth(&mut self, conn: ConnId, sid: SessionId, xid: i32) -> bool {
        let Some(schemes) = self.settings.sasl.enforce_schemes.as_ref() else { return true };
        let Some(c) = self.conns.get(conn) else { return true };
        if c.auth.ids.iter().any(|id| schemes.contains(&id.scheme)) {
            return true;
        }
        warn!(
            "session 0x{sid:x}: authenticated with none of the required schemes {schemes:?}; closing the connection"
        );
        let err = ErrorCode::SessionClosedRequireSaslAuth.code();
        self.reply(conn, ReplyHeader { xid, zxid: 0, err }, &Body::Empty);
        self.actions.push_back(Action::Close { conn });
        false
    }

    /// Queues a reply whose body follows the header whatever its error code.
    fn reply_always(&mut self, conn: ConnId, hdr: ReplyHeader, body: &Body) {
        write_frame(&mut self.buf, |b| {
            hdr.write(b);
            body.encode(b);
        });
        let frame = self.buf.split().freeze();
        self.stats.packets_sent += 1;
        self.actions.push_back(Action::Reply { conn, frame });
    }
}
