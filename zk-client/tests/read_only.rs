//! Read-only mode against real ensembles, Apache ZooKeeper 3.8 and zkrs: a client that accepts
//! read-only servers reads from a partitioned member, is refused writes, and moves to a read-write
//! server once one is back, found by its `isro` probes (the read-only member stays cut off
//! meanwhile, so nothing but the probes can lead the client away from it).

// Real servers on real time: deadlines read the clock.
#![allow(clippy::disallowed_methods)]

// Shared with zk-ffi's C read-only test.
#[path = "support/ensemble.rs"]
#[allow(dead_code)] // each test file uses a part of it
mod ensemble;
mod support;

use ensemble::{RoEnsemble, RoServer};
use std::time::{Duration, Instant};
use zk_client::{acl, Client, CreateMode, Error, SessionState};

const T: Duration = Duration::from_secs(10);

/// Polls `client.state()` until it is `want` (deadline: two minutes).
async fn wait_state(client: &Client, want: SessionState) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if client.state() == want {
            return;
        }
        assert!(Instant::now() < deadline, "never {want:?} (now {:?})", client.state());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_read_only_then_read_write() {
    read_only_then_read_write(RoServer::Apache).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkrs_read_only_then_read_write() {
    read_only_then_read_write(RoServer::Zkrs(support::zkrs_binary())).await;
}

async fn read_only_then_read_write(server: RoServer) {
    let mut e = RoEnsemble::start(server);
    // Written through member 3, which applies the write before answering, so it holds the data.
    let writer =
        Client::builder(&e.members[2].client.to_string()).session_timeout(T).connect().await.unwrap();
    writer.create("/ro", b"before", &acl::open_unsafe(), CreateMode::Persistent).await.unwrap();
    writer.close().await.unwrap();

    // Member 3 comes back alone, cut off from the other two for good, and goes read-only.
    e.cut_off_member_3();
    e.launch(2);
    e.wait_isro(2, "ro");

    let client = Client::builder(&e.connect_string())
        .session_timeout(T)
        .can_be_read_only(true)
        .reconnect_delay_max(Duration::from_millis(50))
        .connect()
        .await
        .unwrap_or_else(|err| panic!("no read-only session: {err}"));
    assert_eq!(client.state(), SessionState::ConnectedReadOnly);
    let ro_session = client.session_id();
    let (data, _) = client.get_data("/ro").await.unwrap();
    assert_eq!(&data[..], b"before");
    let refused = client.create("/ro/w", b"", &acl::open_unsafe(), CreateMode::Persistent).await;
    assert_eq!(refused, Err(Error::NotReadOnly));
    assert_eq!(client.set_data("/ro", b"x", -1).await, Err(Error::NotReadOnly));

    // Members 1 and 2 come back as a quorum of two; member 3 cannot reach them.
    e.launch(0);
    e.launch(1);
    wait_state(&client, SessionState::Connected).await;
    assert_eq!(e.isro(2).as_deref(), Some("ro"), "member 3 stayed read-only: the probes found the way");
    // A session made by a read-only server is only valid there: the read-write server made a new one.
    assert_ne!(client.session_id(), ro_session);
    client.create("/ro/w", b"after", &acl::open_unsafe(), CreateMode::Persistent).await.unwrap();
    let (data, _) = client.get_data("/ro/w").await.unwrap();
    assert_eq!(&data[..], b"after");
    client.close().await.unwrap();
}
