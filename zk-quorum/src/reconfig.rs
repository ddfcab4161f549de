//! Dynamic reconfiguration, the leader's part before anything is proposed: from a client's
//! reconfig request and the configuration in force, the configuration to propose, or the error
//! Apache ZooKeeper 3.8's leader answers.
//!
//! A request is either incremental (servers joining, as `server.N=spec` entries, and servers
//! leaving, by id; both comma-separated) or a whole new member list (`newMembers`, entries
//! separated by commas or newlines). The checks run in the order Apache's leader runs them, so a
//! request with several faults gets the same error code:
//! 1. a reconfiguration already proposed and not yet committed: [`ReconfigError::InProgress`];
//! 2. `curConfigId` neither -1 nor the version in force: [`ReconfigError::BadVersion`];
//! 3. a malformed entry, an incremental change of a hierarchical (group/weight) configuration, a
//!    joining server without its client port, or two servers on one address:
//!    [`ReconfigError::BadArguments`];
//! 4. fewer than two voters (one, with `standaloneEnabled=false`): [`ReconfigError::BadArguments`];
//! 5. no quorum of the new configuration's voters connected and synced with the leader (the
//!    leader counts if it votes in it): [`ReconfigError::NoQuorum`].
//!
//! The configuration's version is the zxid of the transaction that carries it.

use std::collections::BTreeSet;

use crate::config::{LearnerType, QuorumConfig, ServerSpec};
use crate::quorum::QuorumVerifier;

/// A client's reconfig request, its three strings as they came (None: the field was null).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReconfigRequest<'a> {
    /// `server.N=spec` entries separated by commas.
    pub joining: Option<&'a str>,
    /// Server ids separated by commas.
    pub leaving: Option<&'a str>,
    /// The whole new configuration (commas or newlines between entries); when given, `joining`
    /// and `leaving` are not read.
    pub new_members: Option<&'a str>,
    /// The version the client based its change on, or -1 for any.
    pub cur_config_id: i64,
}

/// What the leader knows when it prepares a reconfiguration.
#[derive(Debug, Clone)]
pub struct ReconfigContext<'a> {
    /// The configuration in force (committed and activated).
    pub current: &'a QuorumConfig,
    /// Whether a reconfiguration was proposed and is not committed yet.
    pub in_progress: bool,
    /// The leader's server id.
    pub leader: i64,
    /// Followers connected to the leader and synced with it (ACKed NEWLEADER).
    pub synced_followers: &'a BTreeSet<i64>,
    /// `standaloneEnabled`: when true a configuration needs at least two voters.
    pub standalone_enabled: bool,
}

/// Why a reconfiguration was refused; [`ReconfigError::code`] gives the wire error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconfigError {
    /// Another reconfiguration is under way (RECONFIGINPROGRESS, -14).
    #[error("a reconfiguration is already in progress")]
    InProgress,
    /// The client's `curConfigId` is not the configuration in force (BADVERSION, -103).
    #[error("reconfiguration from version {asked:#x} failed: the version in force is {have:#x}")]
    BadVersion {
        /// What the client asked for.
        asked: i64,
        /// The version in force.
        have: i64,
    },
    /// A malformed request or an invalid resulting configuration (BADARGUMENTS, -8).
    #[error("{0}")]
    BadArguments(String),
    /// No quorum of the new configuration is connected and synced (NEWCONFIGNOQUORUM, -13).
    #[error("no quorum of the new configuration is connected and synced with the leader")]
    NoQuorum,
}

impl ReconfigError {
    /// The error code a client gets.
    pub fn code(&self) -> zk_proto::ErrorCode {
        use zk_proto::ErrorCode;
        match self {
            ReconfigError::InProgress => ErrorCode::ReconfigInProgress,
            ReconfigError::BadVersion { .. } => ErrorCode::BadVersion,
            ReconfigError::BadArguments(_) => ErrorCode::BadArguments,
            ReconfigError::NoQuorum => ErrorCode::NewConfigNoQuorum,
        }
    }
}

fn bad(msg: impl Into<String>) -> ReconfigError {
    ReconfigError::BadArguments(msg.into())
}

/// The configuration a reconfig request asks for, with version `zxid`, or why not. See the
/// module docs for the checks and their order.
pub fn plan(
    req: &ReconfigRequest<'_>,
    ctx: &ReconfigContext<'_>,
    zxid: i64,
) -> Result<QuorumConfig, ReconfigError> {
    if ctx.in_progress {
        return Err(ReconfigError::InProgress);
    }
    if req.cur_config_id != -1 && req.cur_config_id != ctx.current.version {
        return Err(ReconfigError::BadVersion { asked: req.cur_config_id, have: ctx.current.version });
    }
    let mut next = match req.new_members {
        Some(members) => whole(members)?,
        None => incremental(req, ctx.current)?,
    };
    next.version = zxid;
    let voters = QuorumVerifier::from_config(&next);
    let min = if ctx.standalone_enabled { 2 } else { 1 };
    if voters.voters().len() < min {
        return Err(bad(format!(
            "reconfiguration failed: the new configuration must have at least {min} voting members"
        )));
    }
    // A server the configuration in force lists as an observer does not acknowledge proposals.
    // A follower connection it still has is from before that configuration, and it is about to
    // come back as an observer: counting it let a configuration whose quorum needs it be
    // proposed right after the one that made it an observer, which no leader could then commit
    // or be elected with pending (node_sim seed 10001055 of `reconfig`; Apache counts the
    // follower connections too).
    let now = QuorumVerifier::from_config(ctx.current);
    let mut synced: BTreeSet<i64> = ctx
        .synced_followers
        .iter()
        .copied()
        .filter(|s| voters.is_voter(*s) && !now.observers().contains(s))
        .collect();
    if voters.is_voter(ctx.leader) {
        synced.insert(ctx.leader);
    }
    if !voters.contains_quorum(synced) {
        return Err(ReconfigError::NoQuorum);
    }
    Ok(next)
}

/// A whole new member list.
fn whole(members: &str) -> Result<QuorumConfig, ReconfigError> {
    let text = members.replace(',', "\n");
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let key = line.split_once('=').map_or(line, |(k, _)| k).trim();
        let known = key.starts_with("server.")
            || key.starts_with("group")
            || key.starts_with("weight")
            || key == "version";
        if !known {
            return Err(bad(format!("unrecognised parameter: {key}")));
        }
    }
    let next = QuorumConfig::parse(&text).map_err(|e| bad(e.to_string()))?;
    check_addresses(&next)?;
    Ok(next)
}

/// Servers joining and leaving a majority configuration.
fn incremental(req: &ReconfigRequest<'_>, current: &QuorumConfig) -> Result<QuorumConfig, ReconfigError> {
    if current.hierarchy.is_some() {
        return Err(bad(
            "incremental reconfiguration requested but the configuration is not a majority quorum system",
        ));
    }
    let mut next = current.clone();
    for leaving in req.leaving.into_iter().flat_map(|l| l.split(',')).map(str::trim) {
        if leaving.is_empty() {
            continue;
        }
        let sid: i64 = leaving.parse().map_err(|_| bad(format!("not a server id: {leaving:?}")))?;
        next.servers.remove(&sid);
    }
    for joiner in req.joining.into_iter().flat_map(|j| j.split(',')).map(str::trim) {
        if joiner.is_empty() {
            continue;
        }
        let parts: Vec<&str> = joiner.split('=').collect();
        let [key, spec] = parts[..] else {
            return Err(bad(format!("wrong format of server string: {joiner:?}")));
        };
        let id = key.trim().rsplit('.').next().unwrap_or_default();
        let sid: i64 = id.parse().map_err(|_| bad(format!("not a server id in {joiner:?}")))?;
        let spec = ServerSpec::parse(sid, spec.trim()).map_err(|e| bad(e.to_string()))?;
        if spec.client.is_none() {
            return Err(bad(format!(
                "wrong format of server string {joiner:?}: each server needs its quorum, election and client ports"
            )));
        }
        next.servers.insert(sid, spec);
    }
    check_addresses(&next)?;
    Ok(next)
}

/// No two servers share a quorum or election address.
fn check_addresses(config: &QuorumConfig) -> Result<(), ReconfigError> {
    let mut seen = std::collections::BTreeMap::new();
    for s in config.servers.values() {
        for a in &s.addresses {
            for (host, port) in [(&a.host, a.quorum_port), (&a.host, a.election_port)] {
                if let Some(other) = seen.insert((host.clone(), port), s.sid) {
                    if other != s.sid {
                        return Err(bad(format!(
                            "servers {other} and {} both use address {host}:{port}",
                            s.sid
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

/// What a committed configuration means for one server, as Apache's members decide it when they
/// activate a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A voter.
    Participant,
    /// An observer.
    Observer,
    /// Not in the configuration: it may stay connected to its leader as a non-voting follower.
    NonVoting,
}

/// Where `sid` stands in `config`.
pub fn placement(config: &QuorumConfig, sid: i64) -> Placement {
    match config.servers.get(&sid).map(|s| s.learner_type) {
        Some(LearnerType::Participant) => Placement::Participant,
        Some(LearnerType::Observer) => Placement::Observer,
        None => Placement::NonVoting,
    }
}

/// The server a leader hands leadership to when it commits `next`: itself when it votes in
/// `next` with the same quorum address; otherwise the voter of `next` that acknowledged the
/// reconfiguration and, among those, the one whose acknowledgements reach furthest (so that the
/// fewest proposals are dropped). `acked` maps each server to the highest zxid it has durable;
/// `reconfig_zxid` is the reconfiguration's zxid. None when no voter of `next` acknowledged it
/// (cannot happen once `next` committed: a quorum of it did).
pub fn designated_leader(
    me: i64,
    current: &QuorumConfig,
    next: &QuorumConfig,
    acked: &std::collections::BTreeMap<i64, i64>,
    reconfig_zxid: i64,
) -> Option<i64> {
    let voters = QuorumVerifier::from_config(next);
    let same_address = match (current.servers.get(&me), next.servers.get(&me)) {
        (Some(a), Some(b)) => {
            a.addresses.first().map(|x| x.quorum_addr()) == b.addresses.first().map(|x| x.quorum_addr())
        }
        _ => false,
    };
    if voters.is_voter(me) && same_address {
        return Some(me);
    }
    acked
        .iter()
        .filter(|(sid, z)| **sid != me && voters.is_voter(**sid) && **z >= reconfig_zxid)
        // Furthest first, the lowest id among equals, so every run picks the same one.
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(sid, _)| *sid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const THREE: &str = "server.1=127.0.0.1:2881:3881:participant;127.0.0.1:2181\n\
                         server.2=127.0.0.1:2882:3882:participant;127.0.0.1:2182\n\
                         server.3=127.0.0.1:2883:3883:participant;127.0.0.1:2183\nversion=100000000";

    fn ctx<'a>(current: &'a QuorumConfig, synced: &'a BTreeSet<i64>) -> ReconfigContext<'a> {
        ReconfigContext {
            current,
            in_progress: false,
            leader: 1,
            synced_followers: synced,
            standalone_enabled: true,
        }
    }

    /// An observer still counted among the synced followers (its follower connection from
    /// before the configuration that made it an observer) is no ACK a new configuration can
    /// count on: promoting it back is refused until it is a follower again.
    #[test]
    fn an_observer_with_a_stale_follower_connection_is_not_counted() {
        let text = THREE.replace(
            "version=100000000",
            "server.4=127.0.0.1:2884:3884:observer;127.0.0.1:2184\nversion=100000000",
        );
        let current = QuorumConfig::parse(&text).unwrap();
        let synced = BTreeSet::from([2, 4]);
        let req = ReconfigRequest {
            joining: Some("server.4=127.0.0.1:2884:3884:participant;127.0.0.1:2184"),
            ..ReconfigRequest { cur_config_id: -1, ..Default::default() }
        };
        // Voters 1 to 4 need three: the leader and 2, and 4 only through its stale connection.
        assert_eq!(plan(&req, &ctx(&current, &synced), 0x1_0000_0005), Err(ReconfigError::NoQuorum));
        // With 3 synced too, the quorum is there without 4.
        let synced = BTreeSet::from([2, 3, 4]);
        let next = plan(&req, &ctx(&current, &synced), 0x1_0000_0005).unwrap();
        assert!(QuorumVerifier::from_config(&next).is_voter(4));
        // The same as a whole member list.
        let members = THREE.replace("\nversion=100000000", "")
            + "\nserver.4=127.0.0.1:2884:3884:participant;127.0.0.1:2184";
        let whole = ReconfigRequest { new_members: Some(&members), cur_config_id: -1, ..Default::default() };
        let synced = BTreeSet::from([2, 4]);
        assert_eq!(plan(&whole, &ctx(&current, &synced), 0x1_0000_0005), Err(ReconfigError::NoQuorum));
        let synced = BTreeSet::from([2, 3, 4]);
        assert!(plan(&whole, &ctx(&current, &synced), 0x1_0000_0005).is_ok());
    }

    #[test]
    fn incremental_add_and_remove() {
        let current = QuorumConfig::parse(THREE).unwrap();
        let synced = BTreeSet::from([2, 3, 4]);
        let req = ReconfigRequest {
            joining: Some("server.4=127.0.0.1:2884:3884:participant;2184"),
            leaving: Some("3"),
            ..ReconfigRequest { cur_config_id: -1, ..Default::default() }
        };
        let next = plan(&req, &ctx(&current, &synced), 0x1_0000_0005).unwrap();
        assert_eq!(next.servers.keys().copied().collect::<Vec<_>>(), [1, 2, 4]);
        assert_eq!(next.version, 0x1_0000_0005);
        assert!(next.to_config_string().contains("server.4=127.0.0.1:2884:3884:participant;0.0.0.0:2184"));
        assert!(next.to_config_string().ends_with("version=100000005"));
    }

    #[test]
    fn whole_member_list_with_commas() {
        let current = QuorumConfig::parse(THREE).unwrap();
        let synced = BTreeSet::from([2, 3]);
        let req = ReconfigRequest {
            new_members: Some(
                "server.1=127.0.0.1:2881:3881:participant;2181,server.2=127.0.0.1:2882:3882:participant;2182,\
                 server.3=127.0.0.1:2883:3883:observer;2183",
            ),
            cur_config_id: 0x1_0000_0000,
            ..Default::default()
        };
        let next = plan(&req, &ctx(&current, &synced), 0x1_0000_0009).unwrap();
        assert_eq!(next.servers[&3].learner_type, LearnerType::Observer);
        let bad_key = ReconfigRequest { new_members: Some("server.1=h:1:2;3,clientPort=5"), ..req };
        assert!(matches!(plan(&bad_key, &ctx(&current, &synced), 9), Err(ReconfigError::BadArguments(_))));
    }

    #[test]
    fn errors_come_in_apaches_order() {
        let current = QuorumConfig::parse(THREE).unwrap();
        let synced = BTreeSet::from([2]);
        let any = ReconfigRequest { cur_config_id: -1, ..Default::default() };
        let mut busy = ctx(&current, &synced);
        busy.in_progress = true;
        let wrong_version = ReconfigRequest { cur_config_id: 7, leaving: Some("x"), ..any };
        assert_eq!(plan(&wrong_version, &busy, 1), Err(ReconfigError::InProgress));
        assert_eq!(
            plan(&wrong_version, &ctx(&current, &synced), 1),
            Err(ReconfigError::BadVersion { asked: 7, have: 0x1_0000_0000 })
        );
        let cases = [
            ReconfigRequest { leaving: Some("x"), ..any },
            ReconfigRequest { joining: Some("server.4=127.0.0.1:2884:3884"), ..any },
            ReconfigRequest { joining: Some("server.4"), ..any },
            ReconfigRequest { joining: Some("server.4=127.0.0.1:2881:3884;2184"), ..any },
            ReconfigRequest { leaving: Some("2,3"), ..any },
        ];
        for req in cases {
            let got = plan(&req, &ctx(&current, &synced), 1);
            assert!(matches!(got, Err(ReconfigError::BadArguments(_))), "{req:?}: {got:?}");
            assert_eq!(got.unwrap_err().code(), zk_proto::ErrorCode::BadArguments);
        }
        // Adding 4 and 5 with only 2 synced: 1, 2 of 1..5 is no quorum.
        let grow = ReconfigRequest {
            joining: Some("server.4=127.0.0.1:2884:3884;2184,server.5=127.0.0.1:2885:3885;2185"),
            ..any
        };
        assert_eq!(plan(&grow, &ctx(&current, &synced), 1), Err(ReconfigError::NoQuorum));
        assert_eq!(ReconfigError::NoQuorum.code().code(), -13);
        assert_eq!(ReconfigError::InProgress.code().code(), -14);
    }

    #[test]
    fn hierarchical_configurations_take_only_whole_lists() {
        let current = QuorumConfig::parse(&format!("{THREE}\ngroup.1=1:2:3")).unwrap();
        let synced = BTreeSet::from([2, 3]);
        let req = ReconfigRequest { leaving: Some("3"), cur_config_id: -1, ..Default::default() };
        assert!(matches!(plan(&req, &ctx(&current, &synced), 1), Err(ReconfigError::BadArguments(_))));
    }

    #[test]
    fn the_leader_stays_or_hands_over_to_the_furthest_acker() {
        let current = QuorumConfig::parse(THREE).unwrap();
        let mut without_me = current.clone();
        without_me.servers.remove(&1);
        let acked = BTreeMap::from([(1, 20), (2, 12), (3, 15)]);
        assert_eq!(designated_leader(1, &current, &current, &acked, 10), Some(1));
        assert_eq!(designated_leader(1, &current, &without_me, &acked, 10), Some(3));
        assert_eq!(designated_leader(1, &current, &without_me, &acked, 16), None);
        let mut moved = current.clone();
        moved.servers.get_mut(&1).unwrap().addresses[0].quorum_port = 2999;
        assert_eq!(
            designated_leader(1, &current, &moved, &acked, 10),
            Some(3),
            "a new quorum address hands over"
        );
        assert_eq!(placement(&without_me, 1), Placement::NonVoting);
        assert_eq!(placement(&current, 2), Placement::Participant);
    }
}
