//! Forced recovery of an ensemble whose quorum is lost for good (ClickHouse Keeper's `rcvr`):
//! one surviving server becomes the only voter of a new configuration, in an epoch far above
//! any the lost servers can have reached, and leads alone; the operator then adds fresh servers
//! back with ordinary reconfigurations.
//!
//! This module decides what a recovery would do ([`plan`]) and whether an operator's
//! confirmation matches it ([`RecoveryPlan::token`]). It is a last resort with a price, which
//! the plan states: the survivor's history becomes the ensemble's, so writes that a quorum of
//! the lost configuration acknowledged and the survivor never logged are gone, and the lost
//! servers, if they ever come back together on their old disks, still form a quorum of the old
//! configuration among themselves.
//!
//! # Why the epoch jumps
//!
//! Epochs name histories: a zxid is an epoch and a counter, and two servers holding the same
//! zxid are taken to hold the same transaction. The lost servers may have gone on electing
//! after the survivor was cut off (each election is a new epoch). Had the survivor simply led
//! the next epoch, its zxids could collide with theirs, and a lost server brought back later
//! would be synced as if it held the survivor's transactions. The recovered epoch starts
//! [`EPOCH_JUMP`] above everything the survivor has seen, plus its server id, so its zxids are
//! new to every server (two survivors that recovered apart, cut off from each other, lead
//! different epochs too), and an old member's history is found to diverge (and is truncated or
//! replaced) when it is synced.
//!
//! ```
//! use zk_quorum::config::QuorumConfig;
//! use zk_quorum::recovery::{plan, EPOCH_JUMP};
//!
//! let config = QuorumConfig::parse(
//!     "server.1=a:2888:3888\nserver.2=b:2888:3888\nserver.3=c:2888:3888\nversion=100000000",
//! )?;
//! let p = plan(&config, None, 1, (4, 4), 0x5a).expect("server 1 may recover");
//! assert_eq!(p.epoch, 4 + EPOCH_JUMP + 1);
//! assert_eq!(p.dropped, vec![2, 3]);
//! assert_eq!(p.config.servers.len(), 1);
//! assert!(p.config.version > config.version);
//! assert_eq!(p.token, "1-100000000-5a");
//! # Ok::<(), zk_quorum::config::ConfigError>(())
//! ```

use crate::config::{LearnerType, QuorumConfig};

/// The highest epoch a jump may reach: the leader's own bound ([`crate::zab::MAX_EPOCH`]; a zxid
/// is compared as a signed 64-bit number, Apache's `long`, so an epoch of 2^31 or more would make
/// zxids negative and older than every other).
pub const EPOCH_MAX: u32 = crate::zab::MAX_EPOCH;

/// How far above the highest epoch the survivor has seen the recovered history's epochs start.
/// The lost servers would have to run this many elections without the survivor to reach it.
pub const EPOCH_JUMP: u32 = 65_536;

/// What a forced recovery would do on this server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryPlan {
    /// The configuration put in force: this server the only voter, the observers of the
    /// configuration replaced kept as observers.
    pub config: QuorumConfig,
    /// The epoch written to both epoch files (`acceptedEpoch`, `currentEpoch`); the recovered
    /// leadership's epoch is the next one.
    pub epoch: u32,
    /// The voters the configuration drops.
    pub dropped: Vec<i64>,
    /// What the operator repeats to confirm: this server's id, the version (hex) of the
    /// configuration being replaced and the caller's `period` (hex: the replica passes when its
    /// election started), so that a confirmation meant for another server, written before the
    /// configuration changed, or kept from an earlier election, does not match.
    pub token: String,
}

impl std::fmt::Display for RecoveryPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dropped: Vec<String> = self.dropped.iter().map(i64::to_string).collect();
        write!(
            f,
            "this server would become the only voter (configuration version {:#x}, epoch {}), dropping \
             voters [{}]; writes they acknowledged that this server does not hold are lost",
            self.config.version,
            self.epoch,
            dropped.join(", ")
        )
    }
}

/// Why a recovery cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryRefusal {
    /// This server is not in the configuration in force.
    #[error("server {0} is not in the configuration in force")]
    NotAMember(i64),
    /// The epoch cannot jump that far (see [`EPOCH_MAX`]).
    #[error("epoch {0} is too close to the end of the epoch space to jump {EPOCH_JUMP} above it")]
    EpochExhausted(u32),
}

/// The confirmation token for server `me` replacing configuration `version` during `period`.
pub fn token(me: i64, version: i64, period: u64) -> String {
    format!("{me}-{:x}-{period:x}", version as u64)
}

/// What a forced recovery of server `me` would do, from the configuration in force, a newer
/// one its log holds that is not known to be committed (`pending`: the recovered version is
/// above it too, so that it never comes back into force), and its epochs (accepted, current);
/// `period` goes into the token (see [`RecoveryPlan::token`]).
pub fn plan(
    config: &QuorumConfig,
    pending: Option<&QuorumConfig>,
    me: i64,
    epochs: (u32, u32),
    period: u64,
) -> Result<RecoveryPlan, RecoveryRefusal> {
    let mine = config.servers.get(&me).ok_or(RecoveryRefusal::NotAMember(me))?;
    // A configuration's version is the zxid that made it, possibly in an epoch this server
    // never joined (one adopted from a peer's notification): the jump clears those too.
    let epoch_of = crate::zab::epoch_of;
    let seen =
        epochs.0.max(epochs.1).max(epoch_of(config.version)).max(pending.map_or(0, |p| epoch_of(p.version)));
    // The recovered leader leads `epoch + 1`, whose zxids must fit too.
    // Server ids of an ensemble are below 2^16 in practice; the id keeps two survivors' epochs
    // apart.
    let own = (me as u64 & 0xffff) as u32;
    let epoch = seen
        .checked_add(EPOCH_JUMP)
        .and_then(|e| e.checked_add(own))
        .filter(|e| *e < EPOCH_MAX)
        .ok_or(RecoveryRefusal::EpochExhausted(seen))?;
    let mut next = QuorumConfig { servers: Default::default(), hierarchy: None, version: 0 };
    let mut me_spec = mine.clone();
    me_spec.learner_type = LearnerType::Participant;
    next.servers.insert(me, me_spec);
    let mut dropped = Vec::new();
    for (sid, s) in &config.servers {
        if *sid == me {
            continue;
        }
        match s.learner_type {
            LearnerType::Observer => {
                next.servers.insert(*sid, s.clone());
            }
            LearnerType::Participant => dropped.push(*sid),
        }
    }
    // A version as a zxid of the jumped epoch: above every zxid (so every reconfiguration) this
    // server has seen, and below every zxid of the recovered leadership, whose reconfigurations
    // then supersede it as usual.
    next.version = i64::from(epoch) << 32;
    Ok(RecoveryPlan { config: next, epoch, dropped, token: token(me, config.version, period) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> QuorumConfig {
        QuorumConfig::parse(text).expect("a test configuration parses")
    }

    #[test]
    fn observers_stay_voters_go_and_the_survivor_votes() {
        let c = cfg("server.1=a:1:2\nserver.2=b:1:2\nserver.3=c:1:2:observer\nserver.4=d:1:2:observer\n\
                     version=500000003");
        // An observer may be the survivor: it becomes the voter.
        let p = plan(&c, None, 3, (5, 5), 7).expect("plans");
        assert_eq!(p.dropped, vec![1, 2]);
        assert_eq!(p.config.servers.keys().copied().collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(p.config.servers[&3].learner_type, LearnerType::Participant);
        assert_eq!(p.config.servers[&4].learner_type, LearnerType::Observer);
        assert_eq!(p.epoch, 5 + EPOCH_JUMP + 3);
        assert_eq!(p.config.version, i64::from(5 + EPOCH_JUMP + 3) << 32);
        assert_eq!(p.token, "3-500000003-7");
        // Another survivor of the same history leads another epoch.
        assert_eq!(plan(&c, None, 1, (5, 5), 7).expect("plans").epoch, 5 + EPOCH_JUMP + 1);
        // The new configuration round-trips as Apache writes it.
        assert_eq!(cfg(&p.config.to_config_string()), p.config);
    }

    #[test]
    fn the_version_clears_the_pending_configuration_and_the_higher_epoch() {
        let c = cfg("server.1=a:1:2\nserver.2=b:1:2\nversion=0");
        let p = plan(&c, None, 1, (7, 3), 0).expect("plans");
        assert_eq!(p.epoch, 7 + EPOCH_JUMP + 1, "the higher of the two epochs jumps");
        // A pending configuration (or one adopted from a peer) made in an epoch past this
        // server's own: the jump starts above it.
        let pending = cfg("server.1=a:1:2\nserver.2=b:1:2\nserver.3=c:1:2\nversion=2000000000005");
        let p = plan(&c, Some(&pending), 1, (7, 3), 0).expect("plans");
        assert_eq!(p.epoch, 0x20000 + EPOCH_JUMP + 1);
        assert!(p.config.version > pending.version);
        assert_eq!(p.config.version & 0xffff_ffff, 0, "a version below every zxid of the recovered epoch");
        let groups = cfg("server.1=a:1:2\nserver.2=b:1:2\nserver.3=c:1:2\ngroup.1=1:2:3\nversion=9");
        let p = plan(&groups, None, 2, (1, 1), 0xabc).expect("plans");
        assert!(p.config.hierarchy.is_none(), "one voter needs no groups");
        assert_eq!(p.token, "2-9-abc");
    }

    #[test]
    fn refusals() {
        let c = cfg("server.1=a:1:2\nserver.2=b:1:2\nversion=1");
        assert_eq!(plan(&c, None, 9, (1, 1), 0), Err(RecoveryRefusal::NotAMember(9)));
        let top = EPOCH_MAX - EPOCH_JUMP - 1;
        assert_eq!(plan(&c, None, 1, (top, 1), 0), Err(RecoveryRefusal::EpochExhausted(top)));
        assert!(plan(&c, None, 1, (top - 1, 1), 0).is_ok());
        // A version that reads as a negative zxid (the parser refuses one; a caller could
        // build it): its epoch is past any jump.
        let mut odd = cfg("server.1=a:1:2\nversion=1");
        odd.version = -2;
        assert!(matches!(plan(&odd, None, 1, (1, 1), 0), Err(RecoveryRefusal::EpochExhausted(_))));
    }
}
