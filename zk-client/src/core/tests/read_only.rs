//! The search for a read-write server while connected read-only: the probe schedule, what each
//! answer does, and the session id the switch asks for.

use super::*;

/// Three servers tried in the order a, b, c; the first dial goes to a.
fn three() -> Harness {
    let mut h = Harness::new(&["a", "b", "c"], None);
    h.s.cfg.can_be_read_only = true;
    h.s.set_keep_host_order(true);
    h
}

fn host(name: &str) -> HostPort {
    HostPort { host: name.into(), port: 2181 }
}

/// Moves time without handle_timeout (no pings, no read timeout): only the probe schedule counts.
fn skip(h: &mut Harness, ms: u64) {
    h.now += Duration::from_millis(ms);
}

/// The request of the pending dial, answered as a read-write server with `session_id`.
fn handshake_request(h: &mut Harness) -> ConnectRequest {
    h.s.handle_connected(h.now);
    let f = h.s.poll_transmit().expect("connect request");
    ConnectRequest::read(&mut Reader::new(f.slice(4..))).unwrap()
}

#[test]
fn probes_back_off_and_switch_only_on_rw() {
    let mut h = three();
    let req = h.connect_as(0x77, true);
    assert_eq!((req.session_id, req.read_only), (0, Some(true)));
    assert_eq!(h.events(), [Event::State(SessionState::ConnectedReadOnly)]);
    // The first probe is due rw_probe_min (100 ms) after the connection, and the core wakes for it.
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_millis(100)));
    assert_eq!(h.s.poll_probe(h.now), None);
    skip(&mut h, 99);
    assert_eq!(h.s.poll_probe(h.now), None);
    skip(&mut h, 1);
    let p1 = h.s.poll_probe(h.now).expect("first probe");
    assert_eq!(p1.host, host("b"));
    // One at a time.
    assert_eq!(h.s.poll_probe(h.now), None);
    h.s.handle_probe_answer(h.now, p1.id, Some(b"ro"));
    assert_eq!((h.events(), h.s.poll_close(), h.s.state()), (vec![], false, SessionState::ConnectedReadOnly));
    // Then 200 ms after the first probe, to c, which fails.
    skip(&mut h, 199);
    assert_eq!(h.s.poll_probe(h.now), None);
    skip(&mut h, 1);
    let p2 = h.s.poll_probe(h.now).expect("second probe");
    assert_eq!(p2.host, host("c"));
    h.s.handle_probe_answer(h.now, p2.id, None);
    assert_eq!((h.events(), h.s.poll_close()), (vec![], false));
    // Then 400 ms later; a, the server connected to, is skipped.
    skip(&mut h, 399);
    assert_eq!(h.s.poll_probe(h.now), None);
    skip(&mut h, 1);
    let p3 = h.s.poll_probe(h.now).expect("third probe");
    assert_eq!(p3.host, host("b"));
    // An operation in flight when the core leaves the read-only server is lost.
    let op = h.submit(get_data("/x", false));
    assert_eq!(h.sent().len(), 1);
    h.s.handle_probe_answer(h.now, p3.id, Some(b"rw\n"));
    assert_eq!(
        h.events(),
        [
            Event::Completed { id: op, result: Err(ErrorCode::ConnectionLoss), watch_registered: false },
            Event::State(SessionState::Disconnected),
        ]
    );
    assert!(h.s.poll_close());
    assert_eq!(h.s.poll_probe(h.now), None);
    // The read-write server is dialled at once, asking for a new session: the read-only server's
    // session is only valid there.
    assert_eq!(h.s.poll_connect(h.now), Some(host("b")));
    let req = handshake_request(&mut h);
    assert_eq!((req.session_id, req.read_only), (0, Some(true)));
    let resp = ConnectResponse {
        protocol_version: 0,
        time_out: 6000,
        session_id: 0x88,
        passwd: Bytes::from_static(&[3; 16]),
        read_only: Some(false),
    };
    h.s.handle_bytes(h.now, &frame(|o| resp.write(o)));
    assert_eq!(h.events(), [Event::State(SessionState::Connected)]);
    assert_eq!(h.s.session_id(), 0x88);
    // Connected read-write: no more probes, whatever the time.
    skip(&mut h, 120_000);
    assert_eq!(h.s.poll_probe(h.now), None);
}

#[test]
fn back_off_doubles_up_to_the_maximum() {
    let mut h = three();
    h.s.cfg.rw_probe_max = Duration::from_millis(1000);
    h.connect_as(0x77, true);
    skip(&mut h, 100);
    let mut gaps = Vec::new();
    let mut probe = h.s.poll_probe(h.now).expect("first probe");
    for _ in 0..6 {
        h.s.handle_probe_answer(h.now, probe.id, Some(b"ro"));
        let mut waited = 0;
        probe = loop {
            skip(&mut h, 10);
            waited += 10;
            if let Some(p) = h.s.poll_probe(h.now) {
                break p;
            }
            assert!(waited < 10_000, "no probe after {waited} ms");
        };
        gaps.push(waited);
    }
    assert_eq!(gaps, [200, 400, 800, 1000, 1000, 1000]);
    assert_eq!(h.s.state(), SessionState::ConnectedReadOnly);
}

#[test]
fn lost_probes_time_out_and_stale_answers_are_ignored() {
    let mut h = three();
    h.connect_as(0x77, true);
    h.advance(100);
    let p1 = h.s.poll_probe(h.now).expect("probe");
    // The driver never answers: the core gives the probe up and the search goes on.
    assert!(h.s.poll_timeout().is_some_and(|t| t <= h.now + RW_PROBE_TIMEOUT * 3));
    h.advance(RW_PROBE_TIMEOUT.as_millis() as u64 * 3);
    let p2 = h.s.poll_probe(h.now).expect("probe after the lost one");
    assert_ne!(p1.id, p2.id);
    // The lost probe's late rw changes nothing.
    h.s.handle_probe_answer(h.now, p1.id, Some(b"rw"));
    assert_eq!((h.s.state(), h.s.poll_close()), (SessionState::ConnectedReadOnly, false));
    // Nor does an answer after the connection dropped.
    h.s.handle_connection_lost(h.now);
    h.events();
    h.s.handle_probe_answer(h.now, p2.id, Some(b"rw"));
    assert_eq!(h.events(), []);
    // Probes went to b, then c: the rotation goes on from there, not to the server probed last.
    assert_eq!(h.s.poll_connect(h.now), Some(host("a")));
}

#[test]
fn a_new_read_only_connection_restarts_the_schedule() {
    let mut h = three();
    h.connect_as(0x77, true);
    for ms in [100, 200, 400] {
        skip(&mut h, ms);
        let p = h.s.poll_probe(h.now).expect("probe");
        h.s.handle_probe_answer(h.now, p.id, Some(b"ro"));
    }
    h.s.handle_connection_lost(h.now);
    h.events();
    h.connect_as(0x79, true);
    assert_eq!(h.events(), [Event::State(SessionState::ConnectedReadOnly)]);
    skip(&mut h, 100);
    assert!(h.s.poll_probe(h.now).is_some());
}

#[test]
fn single_server_and_read_write_sessions_never_probe() {
    let mut h = Harness::new(&["a"], None);
    h.connect_as(0x77, true);
    assert_eq!(h.s.state(), SessionState::ConnectedReadOnly);
    skip(&mut h, 60_000);
    assert_eq!(h.s.poll_probe(h.now), None);
    let mut h = three();
    h.connect(0x55);
    skip(&mut h, 60_000);
    assert_eq!(h.s.poll_probe(h.now), None);
}

#[test]
fn a_session_a_read_write_server_accepted_is_resumed_after_read_only() {
    let mut h = three();
    h.connect(0x55);
    h.s.handle_connection_lost(h.now);
    h.events();
    // b, read-only, keeps the session (a read-only server accepts a global session it knows).
    let req = h.connect_as(0x55, true);
    assert_eq!(req.session_id, 0x55);
    skip(&mut h, 100);
    let p = h.s.poll_probe(h.now).expect("probe");
    assert_eq!(p.host, host("c"));
    h.s.handle_probe_answer(h.now, p.id, Some(b"rw"));
    assert_eq!(h.s.poll_connect(h.now), Some(host("c")));
    assert_eq!(handshake_request(&mut h).session_id, 0x55);
}

#[test]
fn given_credentials_are_resumed_even_from_read_only() {
    let mut h = three();
    h.s = Session::new(
        Config {
            session: Some(SessionCredentials { id: 0x66, password: Bytes::from_static(&[1; 16]) }),
            can_be_read_only: true,
            ..h.s.cfg.clone()
        },
        7,
        h.now,
    );
    h.s.set_keep_host_order(true);
    assert_eq!(h.connect_as(0x66, true).session_id, 0x66);
    h.s.handle_connection_lost(h.now);
    assert_eq!(h.s.poll_connect(h.now), Some(host("b")));
    assert_eq!(handshake_request(&mut h).session_id, 0x66);
}
