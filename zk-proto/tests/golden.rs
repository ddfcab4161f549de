//! Golden frames: traffic between real clients (kazoo, zkCli.sh, the C client cli_mt, and a raw
//! client for exchanges no stock client makes) and a real Apache ZooKeeper 3.8 server, recorded by
//! `tests/golden/capture.py`. Every frame must decode with zk-proto and re-encode to the very same
//! bytes; a few decoded values are checked so a decoder that reads the wrong field fails loudly.

use bytes::{Bytes, BytesMut};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use zk_proto::jute::{Jute, Reader};
use zk_proto::response::{decode_multi_response, encode_multi_response};
use zk_proto::*;

const FRAMES: &str = include_str!("golden/frames.txt");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

struct Conn {
    id: u32,
    label: String,
    frames: Vec<(Dir, Vec<u8>)>,
}

fn parse_manifest() -> Vec<Conn> {
    let mut conns: Vec<Conn> = Vec::new();
    for (n, line) in FRAMES.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut parts = line.split(' ');
        let tag = parts.next().unwrap();
        if tag == "conn" {
            let id = parts.next().unwrap().parse().unwrap();
            let label = parts.next().unwrap().to_string();
            conns.push(Conn { id, label, frames: Vec::new() });
            continue;
        }
        let dir = match tag {
            ">" => Dir::Up,
            "<" => Dir::Down,
            other => panic!("line {}: unknown tag {other:?}", n + 1),
        };
        let bytes = hex(parts.next().unwrap_or(""));
        conns.last_mut().expect("frame before any conn line").frames.push((dir, bytes));
    }
    conns
}

fn hex(s: &str) -> Vec<u8> {
    assert_eq!(s.len() % 2, 0, "odd hex length");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Reads one `T`, re-encodes it onto `out`, and returns it.
fn rt<T: Jute + Debug>(r: &mut Reader, out: &mut Vec<u8>) -> T {
    let v = T::read(r).unwrap_or_else(|e| panic!("decode {}: {e}", std::any::type_name::<T>()));
    v.write(out);
    v
}

/// What the golden frames decoded to, for the value checks after the byte checks.
#[derive(Default)]
struct Seen {
    requests: Vec<(String, RequestHeader, Option<Request>)>,
    replies: Vec<(String, ReplyHeader, Option<OpCode>, Reply)>,
    connects: Vec<(String, ConnectRequest, ConnectResponse)>,
}

/// A decoded reply body.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Empty,
    Event(WatcherEvent),
    Create(CreateResponse),
    Create2(Create2Response),
    Stat(Stat),
    Data(GetDataResponse),
    Acl(GetAclResponse),
    Children(GetChildrenResponse),
    Children2(GetChildren2Response),
    Sync(SyncResponse),
    Multi(Vec<OpResult>),
    Ephemerals(GetEphemeralsResponse),
    Count(GetAllChildrenNumberResponse),
    WhoAmI(WhoAmIResponse),
    AddWatch(ErrorResponse),
}

/// Decodes and re-encodes every frame of one connection, asserting byte equality.
fn check_conn(conn: &Conn, seen: &mut Seen) {
    let ctx = |i: usize| format!("conn {} ({}) frame {i}", conn.id, conn.label);
    let mut ops: HashMap<i32, i32> = HashMap::new();
    let mut connect_req = None;
    let mut connect_resp = None;
    for (i, (dir, frame)) in conn.frames.iter().enumerate() {
        let mut r = Reader::new(Bytes::copy_from_slice(frame));
        let mut out = Vec::new();
        match dir {
            Dir::Up if connect_req.is_none() => {
                connect_req = Some(rt::<ConnectRequest>(&mut r, &mut out));
            }
            Dir::Down if connect_resp.is_none() => {
                connect_resp = Some(rt::<ConnectResponse>(&mut r, &mut out));
            }
            Dir::Up => {
                let h: RequestHeader = rt(&mut r, &mut out);
                ops.insert(h.xid, h.op);
                match Request::decode(h.op, &mut r) {
                    Ok(req) => {
                        assert_eq!(req.op().code(), h.op, "{}", ctx(i));
                        req.encode(&mut out);
                        seen.requests.push((conn.label.clone(), h, Some(req)));
                    }
                    Err(RequestError::Unknown(op)) => {
                        // The raw client's deliberately unknown opcode: nothing to re-encode.
                        assert_eq!(op, h.op);
                        out.extend_from_slice(r.rest());
                        r = Reader::new(Bytes::new());
                        seen.requests.push((conn.label.clone(), h, None));
                    }
                    Err(e) => panic!("{}: request op {} failed to decode: {e}", ctx(i), h.op),
                }
            }
            Dir::Down => {
                let h: ReplyHeader = rt(&mut r, &mut out);
                let op = if h.xid == xid::NOTIFICATION {
                    Some(OpCode::Notification)
                } else {
                    let op = *ops.get(&h.xid).unwrap_or_else(|| panic!("{}: no request for xid", ctx(i)));
                    OpCode::from_i32(op)
                };
                let body = if h.err != 0 {
                    // Error replies carry no record.
                    Reply::Empty
                } else {
                    decode_reply(op, &mut r, &mut out)
                };
                seen.replies.push((conn.label.clone(), h, op, body));
            }
        }
        assert_eq!(r.remaining(), 0, "{}: {} bytes left undecoded", ctx(i), r.remaining());
        assert_eq!(hexs(&out), hexs(frame), "{}: re-encoding differs from the captured bytes", ctx(i));
    }
    seen.connects.push((
        conn.label.clone(),
        connect_req.expect("connection without a ConnectRequest"),
        connect_resp.expect("connection without a ConnectResponse"),
    ));
}

fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn decode_reply(op: Option<OpCode>, r: &mut Reader, out: &mut Vec<u8>) -> Reply {
    use OpCode as O;
    match op.expect("reply to an unknown opcode with err 0") {
        O::Notification => Reply::Event(rt(r, out)),
        O::Create => Reply::Create(rt(r, out)),
        O::Create2 | O::CreateContainer | O::CreateTtl => Reply::Create2(rt(r, out)),
        O::Exists => Reply::Stat(rt::<ExistsResponse>(r, out).stat),
        O::SetData => Reply::Stat(rt::<SetDataResponse>(r, out).stat),
        O::SetAcl => Reply::Stat(rt::<SetAclResponse>(r, out).stat),
        O::GetData => Reply::Data(rt(r, out)),
        O::GetAcl => Reply::Acl(rt(r, out)),
        O::GetChildren => Reply::Children(rt(r, out)),
        O::GetChildren2 => Reply::Children2(rt(r, out)),
        O::Sync => Reply::Sync(rt(r, out)),
        O::GetEphemerals => Reply::Ephemerals(rt(r, out)),
        O::GetAllChildrenNumber => Reply::Count(rt(r, out)),
        O::WhoAmI => Reply::WhoAmI(rt(r, out)),
        // Apache answers addWatch with an ErrorResponse record holding 0, not an empty body.
        O::AddWatch => Reply::AddWatch(rt(r, out)),
        O::Multi | O::MultiRead => {
            let results = decode_multi_response(r).expect("multi reply decodes");
            encode_multi_response(&results, out);
            Reply::Multi(results)
        }
        O::Delete
        | O::Ping
        | O::Auth
        | O::SetWatches
        | O::SetWatches2
        | O::CheckWatches
        | O::RemoveWatches
        | O::CloseSession => Reply::Empty,
        other => panic!("no golden reply layout for {other:?}"),
    }
}

fn decode_all() -> Seen {
    let conns = parse_manifest();
    assert!(conns.len() >= 8, "manifest has only {} connections", conns.len());
    let mut seen = Seen::default();
    for c in &conns {
        check_conn(c, &mut seen);
    }
    seen
}

#[test]
fn every_golden_frame_round_trips_byte_for_byte() {
    let seen = decode_all();
    assert!(seen.requests.len() > 100, "only {} requests", seen.requests.len());
    assert!(seen.replies.len() > 100, "only {} replies", seen.replies.len());
}

#[test]
fn golden_frames_cover_the_protocol() {
    let seen = decode_all();
    let req_ops: BTreeSet<i32> = seen.requests.iter().map(|(_, h, _)| h.op).collect();
    for op in [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 14, 15, 17, 18, 19, 21, 22, 100, 101, 103, 104] {
        assert!(req_ops.contains(&op), "no request with op {op}; have {req_ops:?}");
    }
    for op in [105, 106, 107, -11, 999] {
        assert!(req_ops.contains(&op), "no request with op {op}; have {req_ops:?}");
    }
    let errs: BTreeSet<i32> = seen.replies.iter().map(|(_, h, _, _)| h.err).collect();
    for e in [ErrorCode::NoNode, ErrorCode::NodeExists, ErrorCode::NotEmpty, ErrorCode::BadVersion] {
        assert!(errs.contains(&e.code()), "no {e:?} reply; have {errs:?}");
    }
    for e in [ErrorCode::BadArguments, ErrorCode::NoWatcher, ErrorCode::Unimplemented] {
        assert!(errs.contains(&e.code()), "no {e:?} reply; have {errs:?}");
    }
    let clients: BTreeSet<&str> = seen.connects.iter().map(|(l, _, _)| l.as_str()).collect();
    for c in ["kazoo", "zkcli", "cli_mt", "raw"] {
        assert!(clients.contains(c), "no connection from {c}");
    }
}

#[test]
fn handshakes_with_and_without_the_read_only_byte() {
    let seen = decode_all();
    let (_, req, resp) = seen.connects.iter().find(|(l, _, _)| l == "kazoo").unwrap();
    assert_eq!(req.protocol_version, 0);
    assert_eq!(req.session_id, 0);
    assert_eq!(req.passwd.len(), 16);
    assert_eq!(req.read_only, Some(false));
    assert_eq!(resp.read_only, Some(false));
    assert_eq!(resp.passwd.len(), 16);
    assert_ne!(resp.session_id, 0);
    // kazoo asked for 4000 ms; tickTime 2000 gives a floor of 4000.
    assert_eq!(resp.time_out, 4000);

    // Reconnects resume the session with its id and password.
    let kazoo: Vec<_> = seen.connects.iter().filter(|(l, _, _)| l == "kazoo").collect();
    assert_eq!(kazoo.len(), 2);
    assert_eq!(kazoo[1].1.session_id, kazoo[0].2.session_id);
    assert_eq!(kazoo[1].1.passwd, kazoo[0].2.passwd);
    assert!(kazoo[1].1.last_zxid_seen > 0);

    // No readOnly byte in the request: none in the answer either.
    let old = seen.connects.iter().find(|(_, req, _)| req.read_only.is_none()).expect("old handshake");
    assert_eq!(old.0, "raw");
    assert_eq!(old.2.read_only, None);
    assert_eq!(old.2.time_out, 30000);
}

#[test]
fn golden_request_values() {
    let seen = decode_all();
    let find = |label: &str, pred: &dyn Fn(&Request) -> bool| -> Request {
        seen.requests
            .iter()
            .filter(|(l, _, _)| l == label)
            .filter_map(|(_, _, r)| r.clone())
            .find(|r| pred(r))
            .unwrap_or_else(|| panic!("no matching {label} request"))
    };
    let Request::Create(c) = find("kazoo", &|r| matches!(r, Request::Create(_))) else { unreachable!() };
    assert_eq!(c.path, "/k");
    assert_eq!(c.data.as_deref(), Some(&b"kazoo"[..]));
    assert_eq!(c.flags, CreateMode::Persistent.code());
    assert_eq!(
        c.acl,
        vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
    );

    let Request::Create(c) = find("zkcli", &|r| r.path() == Some("/z/eph")) else { unreachable!() };
    assert_eq!(c.flags, CreateMode::Ephemeral.code());
    let Request::CreateTtl(t) = find("zkcli", &|r| matches!(r, Request::CreateTtl(_))) else {
        unreachable!()
    };
    assert_eq!((t.path.as_str(), t.ttl, t.flags), ("/zt", 60000, CreateMode::PersistentWithTtl.code()));

    let Request::Auth(a) = find("zkcli", &|r| matches!(r, Request::Auth(_))) else { unreachable!() };
    assert_eq!((a.auth_type, a.scheme.as_str(), &a.auth[..]), (0, "digest", &b"alice:secret"[..]));

    let Request::AddWatch(w) = find("zkcli", &|r| r.path() == Some("/zc") && r.op() == OpCode::AddWatch)
    else {
        unreachable!()
    };
    assert_eq!(w.mode, AddWatchMode::PersistentRecursive.code());

    // The Java client re-registers standard watches with setWatches after the cut connection.
    let Request::SetWatches(sw) = find("zkcli-watches", &|r| matches!(r, Request::SetWatches(_))) else {
        unreachable!()
    };
    assert_eq!(sw.data_watches, vec!["/k".to_string()]);
    assert_eq!(sw.child_watches, vec!["/k".to_string()]);
    assert_eq!(sw.exist_watches, vec!["/zmissing".to_string()]);
    assert!(sw.relative_zxid > 0);
    // ... and persistent ones with setWatches2.
    let Request::SetWatches2(sw2) = find("zkcli", &|r| matches!(r, Request::SetWatches2(_))) else {
        unreachable!()
    };
    // zkCli's addWatch defaults to PERSISTENT_RECURSIVE; the client keeps the watch on /zc after
    // /zc was deleted, so it re-sends both.
    assert!(sw2.persistent_watches.is_empty());
    assert_eq!(sw2.persistent_recursive_watches, vec!["/zc".to_string(), "/z".to_string()]);

    let Request::Multi(ops) = find("kazoo", &|r| matches!(r, Request::Multi(_))) else { unreachable!() };
    let kinds: Vec<OpCode> = ops.iter().map(Request::op).collect();
    assert_eq!(kinds, [OpCode::Create, OpCode::SetData, OpCode::Check, OpCode::Delete]);

    let Request::MultiRead(ops) = find("raw", &|r| matches!(r, Request::MultiRead(_))) else {
        unreachable!()
    };
    assert_eq!(ops.len(), 3);
}

#[test]
fn golden_reply_values() {
    let seen = decode_all();
    let replies = |label: &str, op: OpCode| -> Vec<(ReplyHeader, Reply)> {
        seen.replies
            .iter()
            .filter(|(l, _, o, _)| l == label && *o == Some(op))
            .map(|(_, h, _, b)| (h.clone(), b.clone()))
            .collect()
    };

    // Sequential suffixes are the parent's cversion, %010d: /k/eph was /k's first child.
    let creates = replies("kazoo", OpCode::Create);
    assert!(creates
        .iter()
        .any(|(_, b)| *b == Reply::Create(CreateResponse { path: "/k/seq-0000000001".into() })));

    // The failing multi: its header says OK, the ops say 0, BADVERSION, RUNTIMEINCONSISTENCY.
    let multis = replies("kazoo", OpCode::Multi);
    assert_eq!(multis.len(), 2);
    let Reply::Multi(ok) = &multis[0].1 else { panic!() };
    assert!(matches!(ok[..], [OpResult::Create(_), OpResult::SetData(_), OpResult::Check, OpResult::Delete]));
    let (h, Reply::Multi(failed)) = &multis[1] else { panic!() };
    assert_eq!(h.err, 0);
    assert_eq!(
        failed,
        &vec![
            OpResult::Error(ErrorCode::Ok),
            OpResult::Error(ErrorCode::BadVersion),
            OpResult::Error(ErrorCode::RuntimeInconsistency),
        ]
    );

    // Watch notification on kazoo's data watch.
    let events = replies("kazoo", OpCode::Notification);
    assert!(events.iter().any(|(h, b)| h.xid == -1
        && h.err == 0
        && *b
            == Reply::Event(WatcherEvent {
                event_type: EventType::NodeDataChanged.code(),
                state: KeeperState::SyncConnected.code(),
                path: "/k/w".into(),
            })));

    // Pings are answered with xid -2 and an empty body.
    let pings = replies("kazoo", OpCode::Ping);
    assert!(!pings.is_empty());
    assert!(pings.iter().all(|(h, b)| h.xid == xid::PING && *b == Reply::Empty));

    let Reply::WhoAmI(who) = &replies("zkcli", OpCode::WhoAmI)[0].1 else { panic!() };
    assert!(who.client_info.contains(&ClientInfo { auth_scheme: "digest".into(), user: "alice".into() }));
    assert!(who.client_info.contains(&ClientInfo { auth_scheme: "ip".into(), user: "127.0.0.1".into() }));

    let Reply::Count(n) = &replies("zkcli", OpCode::GetAllChildrenNumber)[0].1 else { panic!() };
    assert_eq!(n.total_number, 2);
    let Reply::Ephemerals(e) = &replies("zkcli", OpCode::GetEphemerals)[0].1 else { panic!() };
    assert_eq!(e.ephemerals, vec!["/z/eph".to_string()]);

    // getData of null data (the raw client set it to null) keeps null apart from empty.
    let data = replies("raw", OpCode::GetData);
    assert!(data
        .iter()
        .any(|(_, b)| matches!(b, Reply::Data(d) if d.data.is_none() && d.stat.data_length == 0)));

    // The reply to an unknown opcode: UNIMPLEMENTED.
    let unknown = seen.replies.iter().find(|(_, _, op, _)| op.is_none()).expect("reply to op 999");
    assert_eq!(unknown.1.err, ErrorCode::Unimplemented.code());

    // Reply zxids: notifications carry -1 and auth replies 0; every other reply carries the
    // server's last processed zxid, which never goes back.
    let mut last = 0;
    for (l, h, _, _) in &seen.replies {
        match h.xid {
            xid::NOTIFICATION => assert_eq!(h.zxid, -1, "notification zxid"),
            xid::AUTH => assert_eq!(h.zxid, 0, "auth reply zxid"),
            _ if l == "kazoo" => {
                assert!(h.zxid >= last, "zxid went back from {last} to {}", h.zxid);
                last = h.zxid;
            }
            _ => {}
        }
    }
    assert!(last > 0);
}

#[test]
fn frame_decoder_splits_captured_streams_in_any_chunking() {
    for conn in parse_manifest() {
        for dir in [Dir::Up, Dir::Down] {
            let frames: Vec<&Vec<u8>> =
                conn.frames.iter().filter(|(d, _)| *d == dir).map(|(_, f)| f).collect();
            let mut stream = Vec::new();
            for f in &frames {
                stream.extend_from_slice(&(f.len() as u32).to_be_bytes());
                stream.extend_from_slice(f);
            }
            for chunk in [1, 3, 7, 64, 4096] {
                let dec = FrameDecoder::new(DEFAULT_MAX_FRAME);
                let mut buf = BytesMut::new();
                let mut got = Vec::new();
                for piece in stream.chunks(chunk) {
                    buf.extend_from_slice(piece);
                    while let Some(f) = dec.decode(&mut buf).unwrap() {
                        got.push(f);
                    }
                }
                assert!(buf.is_empty());
                assert_eq!(got.len(), frames.len());
                for (g, f) in got.iter().zip(&frames) {
                    assert_eq!(&g[..], &f[..]);
                }
            }
        }
    }
}
