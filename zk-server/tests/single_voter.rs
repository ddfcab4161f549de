//! F2 of the replication review on real processes, against Apache ZooKeeper 3.8's behaviour: an
//! ensemble whose only voter is its leader still replicates to its learners.
//!
//! One participant and one observer with `standaloneEnabled=false` (with the default `true`,
//! Apache and zkrs run a lone participant standalone and the observer finds no leader). The
//! participant leads on its own quorum; every write must still reach the observer. Before the fix
//! a zkrs leader whose voter set was itself alone committed inline and never sent a proposal or a
//! commit: the observer stayed at zxid 0 and no client could open a session on it.
//!
//! The scenario, the same on Apache, zkrs and both mixed pairs (a zkrs participant with an
//! Apache observer and the reverse), transcripts compared line for line: writes through the
//! participant; a session opened on the observer, `sync` then reads there (data, every stat
//! field but the times, zxids as their counters in the epoch); writes forwarded by the observer,
//! an ephemeral node gone with its session; every znode equal on both servers, stat for stat.
//!
//! Against the build before the fix (`ZKRS_BIN`, tests/support; commit e9124b7) the zkrs pair
//! fails where the review said: Apache's observer serves a session and the leader's writes, zkrs's
//! opens no session at all.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};
use support::client::RawClient;
use support::ensemble::*;
use zk_proto::*;

/// zoo.cfg lines for both servers: the distributed stack even with one participant. Apache
/// 3.8 needs nothing more for this configuration (no `reconfigEnabled`); zkrs takes the same.
const CONFIG: &str = "standaloneEnabled=false\n";

/// A zxid as its counter within its epoch: the epochs two implementations reach may differ
/// (each elects at its own pace), the order of transactions in one must not.
fn counter(zxid: i64) -> i64 {
    zxid & 0xffff_ffff
}

/// A reply's error, and for a getData its data and stat (times left out, zxids as counters).
fn show(r: &support::client::Reply) -> String {
    if r.err() != ErrorCode::Ok {
        return format!("{:?}", r.err());
    }
    let d: GetDataResponse = r.decode();
    let s = &d.stat;
    format!(
        "{:?} v{} cv{} av{} children {} len {} czxid +{} mzxid +{} pzxid +{} eph {}",
        String::from_utf8_lossy(d.data.as_deref().unwrap_or_default()),
        s.version,
        s.cversion,
        s.aversion,
        s.num_children,
        s.data_length,
        counter(s.czxid),
        counter(s.mzxid),
        counter(s.pzxid),
        s.ephemeral_owner != 0
    )
}

/// A setData reply: its error, or the new data version.
fn set_version(r: &support::client::Reply) -> String {
    if r.err() != ErrorCode::Ok {
        return format!("{:?}", r.err());
    }
    let s: Stat = r.decode();
    format!("version {} mzxid +{}", s.version, counter(s.mzxid))
}

fn sync(c: &mut RawClient) -> ErrorCode {
    c.call(Request::Sync(SyncRequest { path: "/".into() })).err()
}

fn kids(c: &mut RawClient, path: &str) -> String {
    let r = c.call(Request::GetChildren(GetChildrenRequest { path: path.into(), watch: false }));
    if r.err() != ErrorCode::Ok {
        return format!("{:?}", r.err());
    }
    let mut v: Vec<String> = r.decode();
    v.sort();
    format!("{v:?}")
}

/// Opens a session on `addr`, retrying while the server is not serving yet (an observer syncing);
/// None if it never answers a handshake with a session within `wait`.
fn session_within(addr: std::net::SocketAddr, wait: Duration) -> Option<RawClient> {
    let deadline = Instant::now() + wait;
    loop {
        let req = ConnectRequest { time_out: 10_000, read_only: Some(false), ..Default::default() };
        if let Some(c) = RawClient::try_connect_with(addr, req).filter(|c| c.session.time_out > 0) {
            return Some(c);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn scenario(kinds: [Kind; 2]) -> Vec<String> {
    let mut t = Vec::new();
    let mut e = Ensemble::configure_with_extra(&kinds, &[1], CONFIG);
    e.launch(0);
    e.wait_mode(0, "leader");
    e.launch(1);
    e.wait_mode(1, "observer");
    t.push(format!("modes: {:?} {:?}", e.mode(0), e.mode(1)));

    let mut p = e.client(0);
    t.push(format!("create /x: {:?}", p.create("/x", b"one", CreateMode::Persistent).err()));
    t.push(format!("create /x/a: {:?}", p.create("/x/a", b"", CreateMode::Persistent).err()));
    t.push(format!("create /x/b: {:?}", p.create("/x/b", b"", CreateMode::Persistent).err()));
    t.push(format!("set /x: {}", set_version(&p.set_data("/x", b"two", 0))));
    t.push(format!("stale set /x: {:?}", p.set_data("/x", b"three", 0).err()));
    t.push(format!("delete /x/b: {:?}", p.delete("/x/b", -1).err()));
    t.push(format!("participant reads /x: {}", show(&p.get_data("/x", false))));

    // The observer: a session, then sync and reads.
    let Some(mut o) = session_within(e.members[1].client, Duration::from_secs(20)) else {
        t.push("no session on the observer".into());
        eprintln!("{kinds:?} transcript: {t:#?}\n{}", e.logs());
        return t;
    };
    t.push("session on the observer".into());
    t.push(format!("observer sync: {:?}", sync(&mut o)));
    t.push(format!("observer reads /x: {}", show(&o.get_data("/x", false))));
    t.push(format!("observer lists /x: {}", kids(&mut o, "/x")));
    t.push(format!("observer reads /x/b: {}", show(&o.get_data("/x/b", false))));

    // Writes forwarded by the observer, then read on both.
    t.push(format!(
        "observer creates /y: {:?}",
        o.create("/y", b"via-observer", CreateMode::Persistent).err()
    ));
    t.push(format!("observer sets /x: {}", set_version(&o.set_data("/x", b"four", 1))));
    t.push(format!("observer creates /x/e: {:?}", o.create("/x/e", b"", CreateMode::Ephemeral).err()));
    t.push(format!("participant sync: {:?}", sync(&mut p)));
    t.push(format!("participant reads /y: {}", show(&p.get_data("/y", false))));
    t.push(format!("participant reads /x/e: {}", show(&p.get_data("/x/e", false))));
    t.push(format!("observer reads /x: {}", show(&o.get_data("/x", false))));
    t.push(format!("observer closes: {:?}", o.close().map(|r| r.err())));
    t.push(format!("participant reads /x/e after: {}", show(&p.get_data("/x/e", false))));
    let mut o = e.client(1);
    t.push(format!("observer sync again: {:?}", sync(&mut o)));
    t.push(format!("observer lists /x: {}", kids(&mut o, "/x")));

    // More writes on the participant; both trees equal, stat for stat.
    for k in 0..20 {
        assert_eq!(p.create(&format!("/x/n{k}"), b"n", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    let (a, b) = (dump_tree(&mut p, "/"), dump_tree(&mut o, "/"));
    t.push(format!("trees equal: {} ({} znodes)", a == b, a.len()));
    t.push(format!("observer's zxid is the participant's: {}", e.zxid(0) == e.zxid(1)));
    eprintln!("{kinds:?} transcript: {t:#?}");
    t
}

/// Apache first, then zkrs, then each mixed pair: every transcript the same.
#[test]
fn one_participant_replicates_to_its_observer_as_apache_does() {
    let apache = scenario([Kind::Apache; 2]);
    assert!(apache.iter().any(|l| l.starts_with("trees equal: true")), "{apache:#?}");
    assert_eq!(scenario([Kind::Zkrs; 2]), apache, "zkrs answers as Apache does");
    for kinds in [[Kind::Zkrs, Kind::Apache], [Kind::Apache, Kind::Zkrs]] {
        assert_eq!(scenario(kinds), apache, "{kinds:?} answers as Apache does");
    }
}
