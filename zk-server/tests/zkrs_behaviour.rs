//! Behaviour where zkrs deliberately differs from Apache ZooKeeper 3.8 (each a bug or an accident of
//! Apache's implementation that no client relies on), and server limits only zkrs has. Each test
//! says what Apache does and why zkrs does otherwise.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use std::time::Duration;
use support::client::RawClient;
use support::*;
use zk_proto::*;

/// Apache preps a `check` sent outside a multi and uses a zxid, then fails to serialize its reply
/// (a null stat) and never answers, leaving the client waiting forever. zkrs answers with the node's
/// stat (BADVERSION and NONODE as Apache).
#[test]
fn bare_check_is_answered() {
    let server = start(Target::Zkrs, "");
    let mut c = RawClient::connect(server.addr(), 30_000);
    let created = c.create("/chk", b"x", CreateMode::Persistent);
    assert_eq!(created.err(), ErrorCode::Ok);
    let ok = c.call(Request::Check(CheckVersionRequest { path: "/chk".into(), version: 0 }));
    assert_eq!(ok.err(), ErrorCode::Ok);
    assert_eq!(ok.header.zxid, created.header.zxid + 1, "a check uses a zxid, as in Apache");
    let stat: SetDataResponse = ok.decode();
    assert_eq!(stat.stat.czxid, created.header.zxid);
    assert_eq!(stat.stat.version, 0);
    let bad = c.call(Request::Check(CheckVersionRequest { path: "/chk".into(), version: 3 }));
    assert_eq!(bad.err(), ErrorCode::BadVersion);
    let none = c.call(Request::Check(CheckVersionRequest { path: "/none".into(), version: 0 }));
    assert_eq!(none.err(), ErrorCode::NoNode);
}

/// A client that pipelines requests but never reads its replies: once its unread replies pass a
/// limit it is no longer read from (nothing buffers without bound), it holds none of the
/// outstanding-request permits the other connections need, so the server keeps serving everyone
/// else; and its connection is closed when its session expires, though it never reads.
#[test]
fn client_that_never_reads_does_not_stall_others() {
    let server = start(Target::Zkrs, "globalOutstandingLimit=100");
    let mut other = RawClient::connect(server.addr(), 30_000);
    let big = vec![b'x'; 512 * 1024];
    assert_eq!(other.create("/keep", &big, CreateMode::Persistent).err(), ErrorCode::Ok);
    let mut hog = RawClient::connect(server.addr(), 4_000);
    hog.stream.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut writes = 0;
    // Pipelined reads of a large value the hog never consumes: far more than the permits and the
    // socket buffers hold.
    for _ in 0..2000 {
        let req = Request::GetData(GetDataRequest { path: "/keep".into(), watch: false });
        let mut payload = Vec::new();
        RequestHeader { xid: 1, op: OpCode::GetData.code() }.write(&mut payload);
        req.encode(&mut payload);
        let mut framed = (payload.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&payload);
        if std::io::Write::write_all(&mut hog.stream, &framed).is_err() {
            break;
        }
        writes += 1;
    }
    assert!(writes > 100, "the hog sent more requests than there are permits: {writes}");
    // Meanwhile another client is served normally, many more requests than the permits.
    for i in 0..300 {
        let r = other.get_data("/keep", false);
        assert_eq!(r.err(), ErrorCode::Ok, "read {i}");
        let d: GetDataResponse = r.decode();
        assert_eq!(d.data.map(|b| b.len()), Some(big.len()));
    }
    assert_eq!(other.set_data("/keep", b"small", -1).err(), ErrorCode::Ok);
    let srvr = server.four_letter("srvr");
    assert!(srvr.starts_with("Zookeeper version:"), "{srvr}");
    // The hog's session expires (it is not read from, so its pings are not seen) and the server
    // closes its connection even though the hog never drains what was queued for it.
    let connections = |server: &ServerProc| {
        let srvr = server.four_letter("srvr");
        srvr.lines().find_map(|l| l.strip_prefix("Connections: ")?.trim().parse::<u32>().ok())
    };
    // The count includes the connection asking.
    assert_eq!(connections(&server), Some(3), "the hog, the other and the asker");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while connections(&server) != Some(2) {
        assert!(std::time::Instant::now() < deadline, "the hog's connection stays open");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(other.exists("/keep", false).err(), ErrorCode::Ok);
    drop(hog);
}

/// Seeded random bytes — as handshakes, as frames after a valid handshake, with plausible and
/// absurd lengths — on many connections: the server answers or closes each one, never falls over,
/// and keeps serving a well-behaved session throughout. Reproduce a failure with its seed.
#[test]
fn random_garbage_never_takes_the_server_down() {
    use std::io::Write;
    let server = start(Target::Zkrs, "");
    let mut good = RawClient::connect(server.addr(), 30_000);
    assert_eq!(good.create("/g", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..300u32 {
        let mut bytes = Vec::new();
        let mode = next() % 3;
        if mode > 0 {
            // A valid handshake first, so the garbage reaches the request decoder.
            let req = ConnectRequest { time_out: 30_000, read_only: Some(false), ..Default::default() };
            let body = zk_proto::jute::to_bytes(&req);
            bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
            bytes.extend_from_slice(&body);
        }
        let n = (next() % 200) as usize;
        let mut body: Vec<u8> = (0..n).map(|_| next() as u8).collect();
        if mode == 2 && body.len() >= 8 {
            // A plausible frame: a correct length and a known opcode with a random body.
            let ops: [i32; 22] =
                [1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 19, 21, 22, 100, 101, 103, 104, 105, 106, 107];
            let op = ops[(next() as usize) % ops.len()];
            body[4..8].copy_from_slice(&op.to_be_bytes());
            bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
        }
        bytes.extend_from_slice(&body);
        let Ok(mut s) = std::net::TcpStream::connect(server.addr()) else { panic!("round {round}: refused") };
        let _ = s.write_all(&bytes);
        drop(s);
        if round % 50 == 0 {
            assert_eq!(good.exists("/g", false).err(), ErrorCode::Ok, "round {round}");
        }
    }
    assert_eq!(good.create("/g/after", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    // The garbage connections count against maxClientCnxns (60 from one address) until the
    // server has read each one's end: on a loaded machine a new connection can still be turned
    // away for a moment, so the four-letter word is asked again for up to 5 s.
    let mut answer = String::new();
    for _ in 0..50 {
        answer = server.four_letter("ruok");
        if answer == "imok" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(answer, "imok");
}

/// A watcher that never reads while other clients' writes keep firing its watch: once its socket
/// buffers and its bounded outbox are full, the server closes that connection (rather than queue
/// without bound), and keeps serving everyone else.
#[test]
fn watcher_that_never_reads_is_closed_when_its_outbox_overflows() {
    use std::io::Read;
    let server = start(Target::Zkrs, "");
    // A small receive buffer: Linux grows a loopback socket's up to tcp_rmem's maximum (32 MiB
    // on some machines, room for most of the events below), which would hide the outbox.
    let mut watcher = RawClient::connect_with_recv_buffer(server.addr(), 30_000, 64 * 1024);
    let add = Request::AddWatch(AddWatchRequest {
        path: "/".into(),
        mode: AddWatchMode::PersistentRecursive.code(),
    });
    assert_eq!(watcher.call(add).err(), ErrorCode::Ok);
    // The watcher now stops reading (reading would make room): whether the server closed it is
    // asked of the server. Each multi below fires 1000 events at it.
    let mut writer = RawClient::connect(server.addr(), 30_000);
    // mntr counts the connection that asks it too.
    let connections = || server.mntr_value("zk_num_alive_connections");
    assert_eq!(connections(), "3", "the watcher, the writer and the asker");
    let mut closed = false;
    for batch in 0..400 {
        let ops = (0..1000)
            .map(|i| {
                Request::Create(CreateRequest {
                    path: format!("/f{batch}-{i}"),
                    data: None,
                    acl: support::client::open_acl(),
                    flags: 0,
                })
            })
            .collect();
        assert_eq!(writer.call(Request::Multi(ops)).err(), ErrorCode::Ok, "batch {batch}");
        if batch % 10 == 9 && connections() == "2" {
            closed = true;
            break;
        }
    }
    assert!(closed, "the non-reading watcher was never closed");
    // What the kernel holds, then the end of the stream.
    watcher.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut reads = 0;
    while watcher.stream.read(&mut buf).expect("the watcher's socket ends in EOF") > 0 {
        reads += 1;
        assert!(reads < 100_000, "the watcher's socket never ends");
    }
    assert_eq!(writer.exists("/f0-0", false).err(), ErrorCode::Ok);
    assert_eq!(server.four_letter("ruok"), "imok");
}
