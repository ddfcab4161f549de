//! The test harness itself works: a server starts, answers ruok, and a raw session can create and read.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use support::client::RawClient;
use support::*;
use zk_proto::*;

fn smoke(target: Target) {
    let server = start(target, "");
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_ne!(c.session.session_id, 0);
    assert_eq!(c.session.time_out, 30_000);
    let r = c.create("/smoke", b"hi", CreateMode::Persistent);
    assert_eq!(r.err(), ErrorCode::Ok);
    assert_eq!(r.decode::<CreateResponse>().path, "/smoke");
    let r = c.get_data("/smoke", false);
    let d: GetDataResponse = r.decode();
    assert_eq!(d.data.as_deref(), Some(&b"hi"[..]));
    assert_eq!(d.stat.czxid, r.header.zxid);
    // The session's createSession txn was zxid 1, the create zxid 2.
    assert_eq!(d.stat.czxid, 2);
}

#[test]
fn apache_smoke() {
    smoke(Target::Apache);
}

#[test]
fn zkrs_smoke() {
    smoke(Target::Zkrs);
}
