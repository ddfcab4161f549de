//! A full transaction-log disk on a member of an ensemble, on real processes: the member leaves
//! its role and elects again, as Apache's servers do when their log fails (ZOOKEEPER-2247), and
//! the ensemble serves again once space is freed, with every member's tree the same.
//!
//! The case that needs it: a zkrs leader with Apache followers. An Apache follower answers the
//! writes it forwarded in the order it sent them, each at its commit; a leader that silently
//! dropped one (as a standalone server refuses writes on a full disk) left that follower
//! answering none of its clients again, even after the disk had space (`FAULT_TARGET=mixed`
//! seed 345). The zkrs log goes on a small tmpfs (mounting needs root, as on the CI machines;
//! elsewhere the test says it cannot run and returns).
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};
use support::disk::{fill, Tmpfs};
use support::ensemble::*;
use zk_proto::*;

/// Creates `path` with `value` through member `i` on a new session: the answer, or `None` when
/// the server could not be reached or closed the connection.
fn try_create(e: &Ensemble, i: usize, path: &str, value: &[u8]) -> Option<ErrorCode> {
    let req = ConnectRequest { time_out: 10_000, read_only: Some(false), ..Default::default() };
    let mut c = support::client::RawClient::try_connect_with(e.members[i].client, req)?;
    try_create_on(&mut c, path, value)
}

/// As [`try_create`] on the session of `c`.
fn try_create_on(c: &mut support::client::RawClient, path: &str, value: &[u8]) -> Option<ErrorCode> {
    let req = Request::Create(CreateRequest {
        path: path.into(),
        data: Some(bytes::Bytes::copy_from_slice(value)),
        acl: support::client::open_acl(),
        flags: 0,
    });
    let xid = c.try_send_request(&req)?;
    c.recv(xid).map(|r| r.err())
}

/// Creates `path` through member `i`, retrying (a new session each time) for up to 60 s while
/// the ensemble elects.
fn create_eventually(e: &Ensemble, i: usize, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match try_create(e, i, path, b"v") {
            Some(ErrorCode::Ok | ErrorCode::NodeExists) => return,
            err => {
                assert!(
                    Instant::now() < deadline,
                    "create {path} via server {}: {err:?}\n{}",
                    i + 1,
                    e.logs()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

#[test]
fn a_zkrs_leader_with_a_full_log_disk_steps_down_and_apache_followers_keep_answering() {
    let Some(tmpfs) = Tmpfs::mount(48 << 20) else { return };
    let mut e = Ensemble::configure(&[Kind::Apache, Kind::Apache, Kind::Zkrs]);
    {
        use std::io::Write;
        let mut f =
            std::fs::OpenOptions::new().append(true).open(e.members[2].dir.join("zoo.cfg")).expect("zoo.cfg");
        // Small preallocation steps, so that the log needs new space soon after the disk fills.
        writeln!(f, "dataLogDir={}\npreAllocSize=64", tmpfs.path().display()).expect("zoo.cfg");
    }
    // zkrs (the largest id) leads Apache's followers.
    e.launch(2);
    e.launch(0);
    e.wait_mode(2, "leader");
    e.launch(1);
    assert_eq!(e.wait_for_leader(), 2, "{}", e.logs());
    e.write_and_read(0, "/before", &[0, 1, 2]);

    // The leader's log disk fills. Writes through an Apache follower reach it until one cannot
    // be logged: the leader leaves its role (that write's outcome is unknown to its client).
    let filler = fill(tmpfs.path(), 0);
    let value = vec![b'x'; 1000];
    let mut c = e.client(0);
    for i in 0.. {
        assert!(i < 5_000, "the leader's log disk never filled\n{}", e.logs());
        if try_create_on(&mut c, &format!("/fill-{i}"), &value) != Some(ErrorCode::Ok) {
            break;
        }
    }
    drop(c);
    e.wait_log(2, "leaving the Leader");

    // Space returns: the ensemble serves writes through every member again, Apache's
    // followers included, and every tree is the same.
    std::fs::remove_file(&filler).expect("free the disk");
    e.wait_for_leader();
    for (i, path) in [(0, "/after-1"), (1, "/after-2"), (2, "/after-3")] {
        create_eventually(&e, i, path);
    }
    let leader = e.wait_for_leader();
    e.write_and_read(0, "/last", &[0, 1, 2]);
    let trees: Vec<Vec<Znode>> = (0..3).map(|i| dump_tree(&mut e.client(i), "/")).collect();
    assert_eq!(trees[0], trees[1], "leader {}\n{}", leader + 1, e.logs());
    assert_eq!(trees[0], trees[2], "leader {}\n{}", leader + 1, e.logs());
}
