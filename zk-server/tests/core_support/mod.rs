//! What the tests driving `ServerCore` with events share: the clock, draining its actions, and a
//! client's handshake.
#![allow(dead_code)]

use bytes::Bytes;
use std::sync::Arc;
use zk_proto::ConnectRequest;
use zk_server::core::{Action, Event, Now, ServerCore};
use zk_server::stats::ConnStats;

/// The wall clock at mono 0.
pub const WALL: i64 = 1_700_000_000_000;

/// The instant `ms` ms after the start.
pub fn now(ms: u64) -> Now {
    Now { mono_us: ms * 1000, wall_ms: WALL + ms as i64 }
}

/// Every action the core has queued.
pub fn drain(c: &mut ServerCore) -> Vec<Action> {
    std::iter::from_fn(|| c.poll_action()).collect()
}

/// A client's handshake for a new session on connection 1 at `at` ms; returns what the core did.
pub fn connect(c: &mut ServerCore, at: u64) -> Vec<Action> {
    let req = new_session_request();
    let remote = "127.0.0.1:5000".parse().expect("address");
    c.handle(
        now(at),
        Event::Connect { conn: 1, remote, req, ids: vec![], stats: Arc::new(ConnStats::new()) },
    );
    drain(c)
}

/// A handshake asking for a new session of 30 s.
pub fn new_session_request() -> ConnectRequest {
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out: 30_000,
        session_id: 0,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
    }
}
