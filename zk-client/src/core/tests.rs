//! Scripted tests of the session core: a fake server decodes what the core transmits and answers
//! with hand-built frames; time only moves when a test moves it.

use super::*;
use bytes::BufMut;
use zk_proto::{RequestHeader, Stat};

struct Harness {
    s: Session,
    now: Instant,
}

fn frame(fill: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut out = BytesMut::new();
    zk_proto::frame::write_frame(&mut out, fill);
    out.to_vec()
}

fn reply(xid: i32, zxid: i64, err: i32, body: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    frame(|o| {
        ReplyHeader { xid, zxid, err }.write(o);
        body(o);
    })
}

impl Harness {
    // Instant has no constructor but `now`: the reading is only an origin, the tests then move
    // time by hand.
    #[allow(clippy::disallowed_methods)]
    fn new(hosts: &[&str], chroot: Option<&str>) -> Harness {
        let now = Instant::now();
        let hosts = hosts.iter().map(|h| HostPort { host: (*h).into(), port: 2181 }).collect();
        let mut cfg = Config::new(hosts, Duration::from_millis(6000));
        cfg.chroot = chroot.map(Into::into);
        cfg.reconnect_delay_max = Duration::ZERO;
        Harness { s: Session::new(cfg, 7, now), now }
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        self.s.handle_timeout(self.now);
    }

    /// Dials, checks the ConnectRequest, answers it.
    fn connect(&mut self, session_id: i64) -> ConnectRequest {
        self.connect_as(session_id, false)
    }

    /// Dials, checks the ConnectRequest, answers it as a read-only server when `read_only`.
    fn connect_as(&mut self, session_id: i64, read_only: bool) -> ConnectRequest {
        assert!(self.s.poll_connect(self.now).is_some());
        self.s.handle_connected(self.now);
        let f = self.s.poll_transmit().expect("connect request");
        let req = ConnectRequest::read(&mut Reader::new(f.slice(4..))).unwrap();
        let resp = ConnectResponse {
            protocol_version: 0,
            time_out: 6000,
            session_id,
            passwd: Bytes::from_static(&[9; 16]),
            read_only: Some(read_only),
        };
        let bytes = frame(|o| resp.write(o));
        self.s.handle_bytes(self.now, &bytes);
        req
    }

    /// Every frame transmitted so far as (header, body).
    fn sent(&mut self) -> Vec<(RequestHeader, Bytes)> {
        let mut out = Vec::new();
        while let Some(f) = self.s.poll_transmit() {
            let mut r = Reader::new(f.slice(4..));
            let h = RequestHeader::read(&mut r).unwrap();
            out.push((h, r.rest().clone()));
        }
        out
    }

    fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.s.poll_event()).collect()
    }

    fn submit(&mut self, op: Op) -> OpId {
        self.s.submit(op, self.now).unwrap()
    }
}

fn get_data(path: &str, watch: bool) -> Op {
    Op::GetData { path: path.into(), watch }
}

fn data_body(o: &mut BytesMut) {
    Some(Bytes::from_static(b"v")).write(o);
    Stat::default().write(o);
}

#[test]
fn handshake_then_ops_complete_in_order() {
    let mut h = Harness::new(&["a"], None);
    let req = h.connect(0x55);
    assert_eq!((req.session_id, req.last_zxid_seen, req.time_out, req.read_only), (0, 0, 6000, Some(false)));
    assert_eq!(h.events(), [Event::State(SessionState::Connected)]);
    assert_eq!(h.s.session_id(), 0x55);
    let a = h.submit(get_data("/x", false));
    let b = h.submit(Op::Exists { path: "/y".into(), watch: true });
    let sent = h.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!((sent[0].0.xid, sent[0].0.op), (1, OpCode::GetData.code()));
    assert_eq!((sent[1].0.xid, sent[1].0.op), (2, OpCode::Exists.code()));
    h.s.handle_bytes(h.now, &reply(1, 10, 0, data_body));
    h.s.handle_bytes(h.now, &reply(2, 11, ErrorCode::NoNode.code(), |_| {}));
    let ev = h.events();
    assert!(
        matches!(&ev[0], Event::Completed { id, result: Ok(Response::Data { .. }), watch_registered: false } if *id == a)
    );
    assert_eq!(ev[1], Event::Completed { id: b, result: Ok(Response::Exists(None)), watch_registered: true });
    assert_eq!(h.s.last_zxid(), 11);
    // The exist watch fires on creation, once.
    let notif = reply(-1, -1, 0, |o| WatcherEvent { event_type: 1, state: 3, path: "/y".into() }.write(o));
    h.s.handle_bytes(h.now, &notif);
    h.s.handle_bytes(h.now, &notif);
    let ev = h.events();
    assert_eq!(ev.len(), 1);
    assert!(
        matches!(&ev[0], Event::Watch { watcher, retained: false, event } if *watcher == b && event.path == "/y")
    );
}

#[test]
fn out_of_order_reply_drops_connection_and_fails_ops() {
    let mut h = Harness::new(&["a"], None);
    h.connect(1);
    h.events();
    let a = h.submit(get_data("/x", false));
    h.sent();
    h.s.handle_bytes(h.now, &reply(7, 1, 0, data_body));
    assert!(h.s.poll_close());
    let ev = h.events();
    assert_eq!(
        ev[0],
        Event::Completed { id: a, result: Err(ErrorCode::ConnectionLoss), watch_registered: false }
    );
    assert_eq!(ev[1], Event::State(SessionState::Disconnected));
}

#[test]
fn pings_at_a_third_and_read_timeout_at_two_thirds() {
    let mut h = Harness::new(&["a"], None);
    h.connect(1);
    h.events();
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_millis(2000)));
    h.advance(1999);
    assert!(h.sent().is_empty());
    h.advance(1);
    let sent = h.sent();
    assert_eq!((sent[0].0.xid, sent[0].0.op), (-2, OpCode::Ping.code()));
    h.s.handle_bytes(h.now, &reply(-2, 0, 0, |_| {}));
    h.advance(2000);
    assert_eq!(h.sent().len(), 1, "second ping");
    h.advance(1999);
    assert!(!h.s.poll_close());
    h.advance(1);
    assert!(h.s.poll_close(), "nothing heard for 4 s of a 6 s session");
    assert_eq!(h.events(), [Event::State(SessionState::Disconnected)]);
}

#[test]
fn reconnect_rotates_servers_and_replays_auth_then_watches() {
    let mut h = Harness::new(&["a", "b", "c"], None);
    let first = h.s.poll_connect(h.now).unwrap();
    h.s.handle_connection_lost(h.now);
    let second = h.s.poll_connect(h.now).unwrap();
    assert_ne!(first, second);
    h.s.handle_connected(h.now);
    h.s.poll_transmit();
    let resp = ConnectResponse {
        time_out: 6000,
        session_id: 5,
        passwd: Bytes::from_static(&[3; 16]),
        ..Default::default()
    };
    h.s.handle_bytes(h.now, &frame(|o| resp.write(o)));
    h.events();
    let w = h.submit(get_data("/w", true));
    let p = h.submit(Op::AddWatch { path: "/p".into(), mode: AddWatchMode::PersistentRecursive });
    let auth = h.submit(Op::AddAuth { scheme: "digest".into(), auth: Bytes::from_static(b"u:p") });
    h.sent();
    h.s.handle_bytes(h.now, &reply(1, 20, 0, data_body));
    h.s.handle_bytes(h.now, &reply(2, 21, 0, |_| {}));
    h.s.handle_bytes(h.now, &reply(-4, 0, 0, |_| {}));
    let ev = h.events();
    assert!(matches!(ev[0], Event::Completed { id, watch_registered: true, .. } if id == w));
    assert!(matches!(ev[1], Event::Completed { id, watch_registered: true, .. } if id == p));
    assert_eq!(ev[2], Event::Completed { id: auth, result: Ok(Response::Done), watch_registered: false });
    h.s.handle_connection_lost(h.now);
    let req = h.connect(5);
    assert_eq!((req.session_id, req.last_zxid_seen, &req.passwd[..]), (5, 21, &[3u8; 16][..]));
    let sent = h.sent();
    assert_eq!((sent[0].0.xid, sent[0].0.op), (-4, OpCode::Auth.code()));
    assert_eq!((sent[1].0.xid, sent[1].0.op), (-8, OpCode::SetWatches2.code()));
    let sw = zk_proto::SetWatches2::read(&mut Reader::new(sent[1].1.clone())).unwrap();
    assert_eq!(sw.relative_zxid, 21);
    assert_eq!(sw.data_watches, ["/w"]);
    assert_eq!(sw.persistent_recursive_watches, ["/p"]);
}

#[test]
fn chroot_applied_out_and_stripped_in() {
    let mut h = Harness::new(&["a"], Some("/app"));
    h.connect(1);
    h.events();
    let c = h.submit(Op::Create {
        path: "/n-".into(),
        data: Bytes::new(),
        acl: vec![zk_proto::Acl {
            perms: 31,
            id: zk_proto::Id { scheme: "world".into(), id: "anyone".into() },
        }],
        mode: zk_proto::CreateMode::PersistentSequential,
        ttl: None,
        with_stat: false,
    });
    let w = h.submit(Op::GetChildren { path: "/".into(), watch: true, with_stat: false });
    let sent = h.sent();
    let path = String::read(&mut Reader::new(sent[0].1.clone())).unwrap();
    assert_eq!(path, "/app/n-");
    let path = String::read(&mut Reader::new(sent[1].1.clone())).unwrap();
    assert_eq!(path, "/app");
    h.s.handle_bytes(h.now, &reply(1, 2, 0, |o| "/app/n-0000000000".to_owned().write(o)));
    h.s.handle_bytes(h.now, &reply(2, 2, 0, |o| vec!["n-0000000000".to_owned()].write(o)));
    let ev = reply(-1, -1, 0, |o| WatcherEvent { event_type: 4, state: 3, path: "/app".into() }.write(o));
    h.s.handle_bytes(h.now, &ev);
    let ev = h.events();
    assert_eq!(
        ev[0],
        Event::Completed {
            id: c,
            result: Ok(Response::Create { path: "/n-0000000000".into(), stat: None }),
            watch_registered: false
        }
    );
    assert!(matches!(&ev[2], Event::Watch { watcher, event, .. } if *watcher == w && event.path == "/"));
}

#[test]
fn expiry_is_terminal_and_reported() {
    let mut h = Harness::new(&["a"], None);
    h.connect(1);
    let w = h.submit(get_data("/w", true));
    h.sent();
    h.s.handle_bytes(h.now, &reply(1, 3, 0, data_body));
    h.s.handle_connection_lost(h.now);
    let queued = h.submit(get_data("/q", false));
    h.events();
    assert!(h.s.poll_connect(h.now).is_some());
    h.s.handle_connected(h.now);
    h.s.poll_transmit();
    let resp = ConnectResponse { passwd: Bytes::from_static(&[0; 16]), ..Default::default() };
    h.s.handle_bytes(h.now, &frame(|o| resp.write(o)));
    let ev = h.events();
    assert!(ev.contains(&Event::Completed {
        id: queued,
        result: Err(ErrorCode::SessionExpired),
        watch_registered: false
    }));
    assert!(ev.iter().any(|e| matches!(e, Event::Watch { watcher, retained: false, event } if *watcher == w && event.state == KeeperState::Expired)));
    assert_eq!(ev.last(), Some(&Event::State(SessionState::Expired)));
    assert!(h.s.poll_close());
    assert_eq!(h.s.poll_connect(h.now + Duration::from_secs(60)), None);
    let later = h.submit(get_data("/x", false));
    assert_eq!(
        h.events(),
        [Event::Completed { id: later, result: Err(ErrorCode::SessionExpired), watch_registered: false }]
    );
}

#[test]
fn auth_failed_is_terminal() {
    let mut h = Harness::new(&["a"], None);
    h.connect(1);
    h.events();
    let a = h.submit(Op::AddAuth { scheme: "bogus".into(), auth: Bytes::new() });
    h.sent();
    h.s.handle_bytes(h.now, &reply(-4, 0, ErrorCode::AuthFailed.code(), |_| {}));
    let ev = h.events();
    assert_eq!(
        ev[0],
        Event::Completed { id: a, result: Err(ErrorCode::AuthFailed), watch_registered: false }
    );
    assert_eq!(ev.last(), Some(&Event::State(SessionState::AuthFailed)));
}

#[test]
fn remove_watches_checks_locally_and_notifies_removed_watchers() {
    let mut h = Harness::new(&["a"], None);
    h.connect(1);
    h.events();
    let none = h.submit(Op::RemoveWatches { path: "/r".into(), kind: zk_proto::WatcherType::Any });
    assert_eq!(
        h.events(),
        [Event::Completed { id: none, result: Err(ErrorCode::NoWatcher), watch_registered: false }]
    );
    let w = h.submit(Op::GetChildren { path: "/r".into(), watch: true, with_stat: true });
    h.sent();
    h.s.handle_bytes(
        h.now,
        &reply(1, 3, 0, |o| {
            Vec::<String>::new().write(o);
            Stat::default().write(o);
        }),
    );
    let r = h.submit(Op::RemoveWatches { path: "/r".into(), kind: zk_proto::WatcherType::Children });
    h.sent();
    h.s.handle_bytes(h.now, &reply(2, 3, 0, |_| {}));
    let ev = h.events();
    assert!(
        matches!(&ev[1], Event::Watch { watcher, event, retained: false } if *watcher == w && event.event_type == EventType::ChildWatchRemoved)
    );
    assert_eq!(ev[2], Event::Completed { id: r, result: Ok(Response::Done), watch_registered: false });
}

#[test]
fn bounded_pending_and_oversized_frame() {
    let mut h = Harness::new(&["a"], None);
    h.s.cfg.max_pending = 2;
    h.connect(1);
    h.submit(get_data("/a", false));
    h.submit(get_data("/b", false));
    assert_eq!(h.s.submit(get_data("/c", false), h.now), Err(TooManyPending(2)));
    let mut huge = BytesMut::new();
    huge.put_i32(i32::MAX);
    h.s.handle_bytes(h.now, &huge);
    assert!(h.s.poll_close());
}

#[test]
fn handshake_timeout_moves_to_next_server() {
    let mut h = Harness::new(&["a", "b"], None);
    let first = h.s.poll_connect(h.now).unwrap();
    h.s.handle_connected(h.now);
    // 6 s shared by two servers: 3 s each.
    h.advance(2999);
    assert!(!h.s.poll_close());
    h.advance(1);
    assert!(h.s.poll_close());
    assert_ne!(h.s.poll_connect(h.now).unwrap(), first);
}

#[test]
fn null_data_is_kept_apart_from_empty_both_ways() {
    let mut h = Harness::new(&["a"], None);
    h.connect(1);
    h.events();
    let acl =
        vec![zk_proto::Acl { perms: 31, id: zk_proto::Id { scheme: "world".into(), id: "anyone".into() } }];
    h.submit(Op::CreateNullable {
        path: "/n".into(),
        data: None,
        acl: acl.clone(),
        mode: zk_proto::CreateMode::Persistent,
        ttl: None,
        with_stat: false,
    });
    h.submit(Op::SetDataNullable { path: "/n".into(), data: Some(Bytes::new()), version: -1 });
    h.submit(Op::SetDataNullable { path: "/n".into(), data: None, version: -1 });
    h.submit(Op::Multi(vec![MultiOp::SetDataNullable { path: "/n".into(), data: None, version: 3 }]));
    let sent = h.sent();
    // create: path, then the data buffer's length -1.
    assert_eq!(&sent[0].1[4..6], b"/n");
    assert_eq!(&sent[0].1[6..10], &(-1i32).to_be_bytes());
    assert_eq!(&sent[1].1[6..10], &0i32.to_be_bytes());
    assert_eq!(&sent[2].1[6..10], &(-1i32).to_be_bytes());
    // multi: header (op, done, err = 9 bytes), path, data length -1, version.
    assert_eq!(&sent[3].1[9 + 6..9 + 10], &(-1i32).to_be_bytes());
    // Replies: null data and empty data are told apart by GetDataNullable, not by GetData.
    let mut h = Harness::new(&["a"], None);
    h.connect(1);
    h.events();
    let a = h.submit(Op::GetDataNullable { path: "/n".into(), watch: true });
    let b = h.submit(Op::GetDataNullable { path: "/n".into(), watch: false });
    let c = h.submit(get_data("/n", false));
    h.sent();
    for (xid, null) in [(1, true), (2, false), (3, true)] {
        h.s.handle_bytes(
            h.now,
            &reply(xid, 1, 0, |o| {
                let d: Option<Bytes> = if null { None } else { Some(Bytes::new()) };
                d.write(o);
                Stat::default().write(o);
            }),
        );
    }
    let ev = h.events();
    assert_eq!(
        ev[0],
        Event::Completed {
            id: a,
            result: Ok(Response::NullableData { data: None, stat: Stat::default() }),
            watch_registered: true
        }
    );
    assert_eq!(
        ev[1],
        Event::Completed {
            id: b,
            result: Ok(Response::NullableData { data: Some(Bytes::new()), stat: Stat::default() }),
            watch_registered: false
        }
    );
    assert_eq!(
        ev[2],
        Event::Completed {
            id: c,
            result: Ok(Response::Data { data: Bytes::new(), stat: Stat::default() }),
            watch_registered: false
        }
    );
}

#[test]
fn check_watches_asks_the_server_and_keeps_the_registry() {
    let mut h = Harness::new(&["a"], None);
    h.connect(1);
    h.events();
    let kind = zk_proto::WatcherType::Data;
    // No local watch: NOWATCHER without a round trip.
    let x = h.submit(Op::CheckWatches { path: "/w".into(), kind });
    assert!(h.sent().is_empty());
    assert_eq!(
        h.events()[0],
        Event::Completed { id: x, result: Err(ErrorCode::NoWatcher), watch_registered: false }
    );
    let w = h.submit(get_data("/w", true));
    h.sent();
    h.s.handle_bytes(h.now, &reply(1, 1, 0, data_body));
    h.events();
    let c = h.submit(Op::CheckWatches { path: "/w".into(), kind });
    let sent = h.sent();
    assert_eq!(sent[0].0.op, OpCode::CheckWatches.code());
    let req = zk_proto::CheckWatchesRequest::read(&mut Reader::new(sent[0].1.clone())).unwrap();
    assert_eq!((req.path.as_str(), req.watcher_type), ("/w", kind.code()));
    h.s.handle_bytes(h.now, &reply(2, 1, 0, |_| {}));
    assert_eq!(h.events(), [Event::Completed { id: c, result: Ok(Response::Done), watch_registered: false }]);
    // The watcher is still registered until the driver forgets it.
    let notif = reply(-1, -1, 0, |o| WatcherEvent { event_type: 3, state: 3, path: "/w".into() }.write(o));
    h.s.handle_bytes(h.now, &notif);
    assert!(matches!(&h.events()[0], Event::Watch { watcher, .. } if *watcher == w));
}

#[test]
fn keep_host_order_and_replace_hosts() {
    let mut h = Harness::new(&["a", "b", "c", "d"], None);
    h.s.set_keep_host_order(true);
    let order: Vec<String> = h.s.hosts().iter().map(|p| p.host.clone()).collect();
    assert_eq!(order, ["a", "b", "c", "d"]);
    h.connect(1);
    h.events();
    assert!(!h.s.set_hosts(Vec::new(), h.now));
    // The same servers in another order: nothing changes.
    let hp = |n: &str| HostPort { host: n.into(), port: 2181 };
    assert!(h.s.set_hosts(vec![hp("d"), hp("c"), hp("b"), hp("a")], h.now));
    assert!(!h.s.poll_close());
    // The current server ("a") is no longer listed: the connection is dropped and the next dial
    // goes to the new list, in order.
    let op = h.submit(get_data("/x", false));
    h.sent();
    assert!(h.s.set_hosts(vec![hp("e"), hp("f")], h.now));
    assert!(h.s.poll_close());
    let ev = h.events();
    assert_eq!(
        ev[0],
        Event::Completed { id: op, result: Err(ErrorCode::ConnectionLoss), watch_registered: false }
    );
    assert_eq!(ev[1], Event::State(SessionState::Disconnected));
    assert_eq!(h.s.poll_connect(h.now).map(|p| p.host), Some("e".into()));
    h.s.handle_connected(h.now);
    h.sent();
    // A shrinking list that keeps the current server leaves the connection alone.
    assert!(h.s.set_hosts(vec![hp("e")], h.now));
    assert!(!h.s.poll_close());
}

mod read_only;

/// SASL DIGEST-MD5: the exchange goes first on each connection (xids 1, 2), a request submitted
/// meanwhile waits, and the application hears of the connection only once the server proved
/// itself; a server answering AUTHFAILED ends the session.
#[test]
fn sasl_runs_before_anything_else() {
    use zk_proto::digest_md5::{ServerExchange, ServerStep, SERVER_NAME};
    for password in ["bobpw", "wrong"] {
        let mut h = Harness::new(&["a"], None);
        h.s.cfg.sasl =
            Some(SaslCredentials { username: "bob".into(), password: password.into(), nonce_key: [3; 32] });
        h.connect(0x55);
        assert_eq!(h.events(), [], "not connected before the exchange is over");
        let early = h.submit(get_data("/x", false));
        let mut server = ServerExchange::new(SERVER_NAME, &[8; 16]);
        let users = |u: &str| (u == "bob").then(|| "bobpw".to_string());
        let sent = h.sent();
        assert_eq!(sent.len(), 1, "only the SASL request goes out");
        assert_eq!((sent[0].0.xid, sent[0].0.op), (1, OpCode::Sasl.code()));
        let token = zk_proto::GetSaslRequest::read(&mut Reader::new(sent[0].1.clone())).unwrap().token;
        let ServerStep::Challenge(challenge) = server.step(&token, users).unwrap() else { panic!() };
        let body = |t: Vec<u8>| move |o: &mut BytesMut| Some(Bytes::from(t)).write(o);
        h.s.handle_bytes(h.now, &reply(1, 0, 0, body(challenge)));
        let sent = h.sent();
        assert_eq!((sent.len(), sent[0].0.xid, sent[0].0.op), (1, 2, OpCode::Sasl.code()));
        let token = zk_proto::GetSaslRequest::read(&mut Reader::new(sent[0].1.clone())).unwrap().token;
        match server.step(&token, users) {
            Ok(ServerStep::Success { token, username }) => {
                assert_eq!((password, username.as_str()), ("bobpw", "bob"));
                h.s.handle_bytes(h.now, &reply(2, 0, 0, body(token)));
                assert_eq!(h.events(), [Event::State(SessionState::Connected)]);
                let sent = h.sent();
                assert_eq!((sent.len(), sent[0].0.xid, sent[0].0.op), (1, 3, OpCode::GetData.code()));
            }
            Err(_) => {
                assert_eq!(password, "wrong");
                h.s.handle_bytes(h.now, &reply(2, 0, ErrorCode::AuthFailed.code(), |o| o.put_i32(-1)));
                let ev = h.events();
                assert!(
                    ev.contains(&Event::Completed {
                        id: early,
                        result: Err(ErrorCode::AuthFailed),
                        watch_registered: false
                    }),
                    "{ev:?}"
                );
                assert_eq!(ev.last(), Some(&Event::State(SessionState::AuthFailed)));
                assert!(h.sent().is_empty());
            }
            Ok(other) => panic!("{other:?}"),
        }
    }
}

/// A GSSAPI mechanism whose contexts play a fixed script: the first token names the host asked
/// for, the context is established by the server's "ap-rep", wrap and unwrap add and strip "W".
struct ScriptedGss {
    fail_start: bool,
}

struct ScriptedCtx {
    host: String,
    steps: u8,
}

impl gssapi::GssInitiator for ScriptedCtx {
    fn step(&mut self, input: Option<&[u8]>) -> Result<(Vec<u8>, bool), String> {
        self.steps += 1;
        match input {
            None => Ok((format!("ap-req for zookeeper/{}", self.host).into_bytes(), false)),
            Some(b"ap-rep") => Ok((Vec::new(), true)),
            Some(other) => Err(format!("unexpected {other:?}")),
        }
    }
    fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
        msg.strip_prefix(b"W").map(<[u8]>::to_vec).ok_or_else(|| "not wrapped".into())
    }
    fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
        Ok([b"W", msg].concat())
    }
    fn authzid(&self) -> String {
        "alice@R".into()
    }
}

impl gssapi::GssMechanism for ScriptedGss {
    fn start(&self, host: &str) -> Result<Box<dyn gssapi::GssInitiator>, String> {
        if self.fail_start {
            return Err("No Kerberos credentials available".into());
        }
        Ok(Box::new(ScriptedCtx { host: host.into(), steps: 0 }))
    }
    fn describe(&self) -> String {
        "scripted".into()
    }
}

/// SASL GSSAPI: the context tokens for `zookeeper/<connected host>`, the empty answer once the
/// context is established, the security-layer answer (none, 0, the authzid), then the session is
/// connected and what waited goes out; a server's AUTHFAILED and a mechanism with no
/// credentials both end the session AUTHFAILED with the reason kept.
#[test]
fn gssapi_runs_before_anything_else() {
    use std::sync::Arc;
    let token_of = |b: &Bytes| zk_proto::GetSaslRequest::read(&mut Reader::new(b.clone())).unwrap().token;
    let body = |t: &'static [u8]| move |o: &mut BytesMut| Some(Bytes::from_static(t)).write(o);
    for refuse in [false, true] {
        let mut h = Harness::new(&["zk1"], None);
        h.s.cfg.gssapi = Some(gssapi::Gssapi(Arc::new(ScriptedGss { fail_start: false })));
        h.connect(0x55);
        let early = h.submit(get_data("/x", false));
        let sent = h.sent();
        assert_eq!((sent.len(), sent[0].0.xid, sent[0].0.op), (1, 1, OpCode::Sasl.code()));
        assert_eq!(&token_of(&sent[0].1)[..], b"ap-req for zookeeper/zk1");
        h.s.handle_bytes(h.now, &reply(1, 0, 0, body(b"ap-rep")));
        let sent = h.sent();
        assert_eq!((sent.len(), sent[0].0.xid), (1, 2));
        assert!(token_of(&sent[0].1).is_empty(), "the empty answer after the context");
        h.s.handle_bytes(h.now, &reply(2, 0, 0, body(b"W\x01\x00\x00\x00")));
        let sent = h.sent();
        assert_eq!(&token_of(&sent[0].1)[..], b"W\x01\x00\x00\x00alice@R");
        assert_eq!(h.events(), [], "not connected before the exchange is over");
        if refuse {
            h.s.handle_bytes(h.now, &reply(3, 0, ErrorCode::AuthFailed.code(), |o| o.put_i32(-1)));
            let ev = h.events();
            assert!(
                ev.contains(&Event::Completed {
                    id: early,
                    result: Err(ErrorCode::AuthFailed),
                    watch_registered: false
                }),
                "{ev:?}"
            );
            assert_eq!(ev.last(), Some(&Event::State(SessionState::AuthFailed)));
            assert!(h.s.sasl_failure().unwrap().contains("AuthFailed (-115)"), "{:?}", h.s.sasl_failure());
        } else {
            h.s.handle_bytes(h.now, &reply(3, 0, 0, |o| o.put_i32(-1)));
            assert_eq!(h.events(), [Event::State(SessionState::Connected)]);
            let sent = h.sent();
            assert_eq!((sent.len(), sent[0].0.xid, sent[0].0.op), (1, 4, OpCode::GetData.code()));
            assert_eq!(h.s.sasl_failure(), None);
        }
    }
    // No credentials: nothing is sent, the session is AUTHFAILED with the library's reason.
    let mut h = Harness::new(&["zk1"], None);
    h.s.cfg.gssapi = Some(gssapi::Gssapi(Arc::new(ScriptedGss { fail_start: true })));
    h.connect(0x55);
    assert!(h.sent().is_empty());
    assert_eq!(h.events().last(), Some(&Event::State(SessionState::AuthFailed)));
    let why = h.s.sasl_failure().unwrap();
    assert!(why.contains("No Kerberos credentials") && why.contains("scripted"), "{why}");
}
