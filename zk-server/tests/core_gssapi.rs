//! The server core's SASL GSSAPI path with a scripted GSS-API context in place of the system
//! library (no KDC): the tokens it answers with, the `sasl` id and super user it records, and
//! AUTHFAILED with the close on a refused ticket, counted in `auth_failed`.
#![allow(clippy::disallowed_methods)]
mod core_support;

use bytes::Bytes;
use core_support::{connect, drain, now};
use std::sync::Arc;
use zk_proto::*;
use zk_server::config::ServerConfig;
use zk_server::core::{Action, CoreConfig, CounterRule, Event, ServerCore, VoterSet};
use zk_server::kerberos::{Accepted, GssAcceptor, GssContext, KerberosServer, PrincipalMapping};
use zk_server::settings::Settings;

/// Accepts the token `ap-req` (answering `ap-rep`, client `alice/h@ZKRS.TEST`) and refuses
/// anything else; wrap prefixes `W:`, unwrap strips `U:`.
struct Scripted;

impl GssContext for Scripted {
    fn accept(&mut self, token: &[u8]) -> Result<Accepted, String> {
        match token {
            b"ap-req" => Ok(Accepted::Established {
                token: Some(b"ap-rep".to_vec()),
                client: "alice/h@ZKRS.TEST".into(),
            }),
            _ => Err("Decrypt integrity check failed".into()),
        }
    }
    fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
        Ok([b"W:".as_slice(), msg].concat())
    }
    fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
        msg.strip_prefix(b"U:").map(<[u8]>::to_vec).ok_or_else(|| "bad checksum".into())
    }
}

impl GssAcceptor for Scripted {
    fn start(&self) -> Box<dyn GssContext> {
        Box::new(Scripted)
    }
}

fn core(super_user: &str) -> ServerCore {
    let text = format!(
        "tickTime=2000\ndataDir=/nonexistent\nclientPort=2181\nsuperUser={super_user}\n\
         authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"
    );
    let cfg = ServerConfig::parse(&text, None).expect("zoo.cfg");
    let mut settings = Settings::from_config(&cfg).expect("settings");
    settings.sasl.kerberos = Some(KerberosServer {
        principal: "zookeeper/localhost@ZKRS.TEST".into(),
        keytab: "/nonexistent".into(),
        mapping: PrincipalMapping {
            remove_host: true,
            remove_realm: false,
            default_realm: Some("ZKRS.TEST".into()),
            ..PrincipalMapping::default()
        },
        acceptor: Arc::new(Scripted),
    });
    let settings = Arc::new(settings);
    let cfg = CoreConfig {
        settings: settings.clone(),
        server_id: 1,
        voters: VoterSet::solo(1),
        counter_rule: CounterRule::StopAtEpochEnd,
        snapshots: None,
        snapshot_now: false,
        seed: 1,
        sasl_seed: [1; 32],
    };
    let tree = zk_tree::TreeConfig { tick_ms: settings.tick_ms, ..Default::default() };
    let mut db = zk_tree::Database::new(tree);
    db.start_leading(0);
    let mut c = ServerCore::new(cfg, db, now(0));
    let actions = connect(&mut c, 1);
    // The session's creation is written inline (standalone); once durable, the session is ready.
    let zxid = actions
        .iter()
        .find_map(|a| match a {
            Action::Persist { records, .. } => records.last_zxid(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the session is persisted: {actions:?}"));
    c.handle(now(1), Event::Durable { zxid });
    let actions = drain(&mut c);
    assert!(actions.iter().any(|a| matches!(a, Action::SessionReady { .. })), "{actions:?}");
    c
}

/// Sends `req` as `xid`; the replies' headers and bodies, and whether the connection closed.
fn send(c: &mut ServerCore, xid: i32, req: Request) -> (Vec<(ReplyHeader, Bytes)>, bool) {
    let op = req.op().code();
    c.handle(
        now(2),
        Event::Request { conn: 1, xid, op, body: Ok(req), raw: Bytes::new(), received_us: 2000 },
    );
    let mut replies = Vec::new();
    let mut closed = false;
    for a in drain(c) {
        match a {
            Action::Reply { frame, .. } => {
                let mut r = zk_proto::Reader::new(frame.slice(4..));
                let hdr = ReplyHeader::read(&mut r).expect("header");
                replies.push((hdr, frame.slice(4 + 16..)));
            }
            Action::Close { .. } => closed = true,
            _ => {}
        }
    }
    (replies, closed)
}

fn sasl(c: &mut ServerCore, xid: i32, token: &'static [u8]) -> (ReplyHeader, Option<Vec<u8>>, bool) {
    let (mut replies, closed) =
        send(c, xid, Request::Sasl(GetSaslRequest { token: Bytes::from_static(token) }));
    assert_eq!(replies.len(), 1, "one answer");
    let (hdr, body) = replies.remove(0);
    let token = SetSaslResponse::read(&mut zk_proto::Reader::new(body)).ok().map(|r| r.token.to_vec());
    (hdr, token, closed)
}

fn whoami(c: &mut ServerCore, xid: i32) -> Vec<(String, String)> {
    let (replies, _) = send(c, xid, Request::WhoAmI);
    let mut r = zk_proto::Reader::new(replies[0].1.clone());
    let infos = WhoAmIResponse::read(&mut r).expect("whoami reply").client_info;
    infos.into_iter().map(|i| (i.auth_scheme, i.user)).collect()
}

#[test]
fn the_exchange_gives_the_mapped_principal_and_the_super_user() {
    let mut c = core("alice@ZKRS.TEST");
    let (h, t, closed) = sasl(&mut c, 1, b"ap-req");
    assert_eq!((h.zxid, h.err, t.as_deref(), closed), (0, 0, Some(&b"ap-rep"[..]), false));
    let (h, t, _) = sasl(&mut c, 2, b"");
    assert_eq!((h.err, t.as_deref()), (0, Some(&b"W:\x01\x01\x00\x00"[..])), "the security-layer offer");
    let (h, t, closed) = sasl(&mut c, 3, b"U:\x01\x00\x00\x00");
    // Done: a null token, and the id as Apache maps it (host removed, realm kept).
    assert_eq!((h.err, t.as_deref().unwrap_or_default().len(), closed), (0, 0, false));
    let ids = whoami(&mut c, 4);
    assert!(ids.contains(&("sasl".into(), "alice@ZKRS.TEST".into())), "{ids:?}");
    assert!(ids.contains(&("super".into(), String::new())), "{ids:?}");
}

#[test]
fn a_refused_ticket_is_authfailed_and_closes() {
    let mut c = core("nobody");
    let (h, t, closed) = sasl(&mut c, 1, b"forged");
    assert_eq!((h.zxid, h.err, closed), (0, ErrorCode::AuthFailed.code(), true));
    assert!(t.is_none_or(|t| t.is_empty()), "a null token after the error");
    assert_eq!(c.view(None, 0, now(3)).stats.auth_failed, 1);
}

#[test]
fn a_wrong_security_layer_is_authfailed() {
    let mut c = core("nobody");
    sasl(&mut c, 1, b"ap-req");
    sasl(&mut c, 2, b"");
    let (h, _, closed) = sasl(&mut c, 3, b"U:\x04\x00\x10\x00");
    assert_eq!((h.err, closed), (ErrorCode::AuthFailed.code(), true));
}
