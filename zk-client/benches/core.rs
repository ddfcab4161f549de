//! The session core's hot path: encoding a request into a frame, and decoding a reply frame into a
//! completed event. Run with `cargo bench -p zk-client --bench core`.
// criterion_group! defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};
use zk_client::core::{Config, HostPort, Op, Session};
use zk_proto::jute::Jute;
use zk_proto::{ConnectResponse, ReplyHeader, Stat};

fn connected_session(now: Instant) -> Session {
    let mut cfg = Config::new(vec![HostPort { host: "h".into(), port: 1 }], Duration::from_secs(30));
    cfg.max_pending = usize::MAX;
    let mut s = Session::new(cfg, 1, now);
    s.poll_connect(now);
    s.handle_connected(now);
    s.poll_transmit();
    let mut out = BytesMut::new();
    let resp = ConnectResponse {
        time_out: 30_000,
        session_id: 1,
        passwd: Bytes::from_static(&[1; 16]),
        ..Default::default()
    };
    zk_proto::frame::write_frame(&mut out, |o| resp.write(o));
    s.handle_bytes(now, &out);
    while s.poll_event().is_some() {}
    s
}

fn get_data_reply(xid: i32, data: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    zk_proto::frame::write_frame(&mut out, |o| {
        ReplyHeader { xid, zxid: 5, err: 0 }.write(o);
        Some(Bytes::copy_from_slice(data)).write(o);
        Stat::default().write(o);
    });
    out.to_vec()
}

// The clock is read once, as the session's origin; the bench never moves time on.
#[allow(clippy::disallowed_methods)]
fn bench(c: &mut Criterion) {
    let now = Instant::now();
    c.bench_function("core/getData round trip (128 B)", |b| {
        let mut s = connected_session(now);
        let mut xid = 1;
        let payload = [7u8; 128];
        b.iter(|| {
            let id = s.submit(Op::GetData { path: "/bench/node".into(), watch: false }, now).unwrap();
            black_box(s.poll_transmit());
            s.handle_bytes(now, &get_data_reply(xid, &payload));
            xid += 1;
            let ev = s.poll_event();
            assert!(matches!(ev, Some(zk_client::core::Event::Completed { id: i, .. }) if i == id));
        })
    });
    c.bench_function("core/encode setData (1 KiB)", |b| {
        let mut s = connected_session(now);
        let data = Bytes::from(vec![1u8; 1024]);
        let mut xid = 1;
        let mut reply = BytesMut::new();
        b.iter(|| {
            s.submit(Op::SetData { path: "/bench/node".into(), data: data.clone(), version: -1 }, now)
                .unwrap();
            black_box(s.poll_transmit());
            // Answer it so nothing accumulates in flight; the reply is a bare Stat, cheap next to the
            // 1 KiB request.
            reply.clear();
            zk_proto::frame::write_frame(&mut reply, |o| {
                ReplyHeader { xid, zxid: 5, err: 0 }.write(o);
                Stat::default().write(o);
            });
            xid += 1;
            s.handle_bytes(now, &reply);
            black_box(s.poll_event());
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
