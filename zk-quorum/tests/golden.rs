//! Golden bytes: what Apache ZooKeeper 3.8.0 (Debian) sent our election peer, captured by
//! `tests/apache_election.rs` with `ZKQ_CAPTURE_DIR` set, must decode to the expected values and
//! re-encode byte for byte.
//!
//! The ensemble of the captures: server.1..3 on 127.0.0.1 with ephemeral ports, all fresh (zxid 0,
//! epoch 0), round 1. `looking` is server 2's first notification to our peer 1: its initial vote, for
//! itself. `votes-3` is server 2's first notification to our peer 3 (another run, other ports), sent
//! after it had already switched to 3: Apache keeps only the newest queued message per peer.

use bytes::Bytes;
use zk_quorum::config::QuorumConfig;
use zk_quorum::wire::{
    decode_handshake, ElectionHandshake, HandshakeVersion, HostPort, Notification, PeerState,
};

const HANDSHAKE_SID2: &[u8] = include_bytes!("golden/apache380-handshake-sid2.bin");
const NOTIFICATION_LOOKING: &[u8] = include_bytes!("golden/apache380-notification-sid2-looking.bin");
const CONFIG_LOOKING: &str = include_str!("golden/apache380-config-looking.txt");
const NOTIFICATION_VOTES_3: &[u8] = include_bytes!("golden/apache380-notification-sid2-votes-3.bin");
const CONFIG_VOTES_3: &str = include_str!("golden/apache380-config-votes-3.txt");

#[test]
fn handshake_from_apache_decodes_and_reencodes() {
    let (hs, used) = decode_handshake(HANDSHAKE_SID2).unwrap().unwrap();
    assert_eq!(used, HANDSHAKE_SID2.len());
    assert_eq!(hs.version, HandshakeVersion::V1);
    assert_eq!(hs.sid, 2);
    assert_eq!(hs.addresses, vec![HostPort { host: "127.0.0.1".into(), port: 45201 }]);
    assert_eq!(ElectionHandshake::v1(2, hs.addresses[0].clone()).encode().unwrap(), HANDSHAKE_SID2);
    // The address is server 2's election address in the config it sent.
    let config = QuorumConfig::parse(CONFIG_LOOKING).unwrap();
    assert_eq!(config.servers[&2].addresses[0].election_addr(), hs.addresses[0]);
}

fn check_notification(bytes: &[u8], config_text: &str, leader: i64) {
    assert_eq!(bytes.len(), 182, "44 bytes of header and a 138-byte config, as ZAB-FACTS §1 says");
    let n = Notification::decode(&Bytes::copy_from_slice(bytes)).unwrap();
    assert_eq!(
        (n.state, n.leader, n.zxid, n.election_epoch, n.peer_epoch, n.version),
        (PeerState::Looking, leader, 0, 1, 0, 2)
    );
    assert_eq!(n.config.as_deref(), Some(config_text.as_bytes()));
    assert_eq!(n.encode(), bytes);
    // The config string parses and formats back to the same bytes.
    let config = QuorumConfig::parse(config_text).unwrap();
    assert_eq!(config.servers.len(), 3);
    assert_eq!(config.version, 0);
    assert_eq!(config.to_config_string(), config_text);
}

#[test]
fn looking_notification_from_apache_decodes_and_reencodes() {
    check_notification(NOTIFICATION_LOOKING, CONFIG_LOOKING, 2);
}

#[test]
fn switched_notification_from_apache_decodes_and_reencodes() {
    check_notification(NOTIFICATION_VOTES_3, CONFIG_VOTES_3, 3);
}
