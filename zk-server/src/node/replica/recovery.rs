//! Forced recovery (`rcvr`, the AdminServer's `force_recovery`): a server whose ensemble lost
//! its quorum for good becomes the only voter of a new configuration and leads alone, in an
//! epoch [`zk_quorum::recovery::EPOCH_JUMP`] above every epoch it has seen.
//!
//! The replica decides, as for every other change of role. An operator's first request only
//! describes what would happen and gives a token; the same request with that token acts. It
//! acts in an order a crash cannot turn unsafe: both epoch files first (a server that stops
//! then keeps its old configuration, with epochs merely higher), then the configuration (from
//! then on the server leads alone, and a restart finds both), then an election under it, which
//! this server alone decides.

use super::{EpochFile, Output, Replica, State};
use crate::core::{Now, ServerCore};
use tracing::{error, info, warn};
use zk_quorum::config::QuorumConfig;

/// The machine number the recovery's epoch file writes carry: no Zab machine's
/// ([`Replica::machine`] counts up from 0 and never gets here).
pub(super) const RECOVERY_WRITES: u64 = u64::MAX;

/// How long after hearing another voter's notification a recovery is refused, ms: a voter that
/// answers the election runs, and the quorum is not lost for good (a looking peer's
/// notifications come at least this often; Apache's longest interval between them is a minute).
pub(super) const VOTER_HEARD_REFUSAL_MS: u64 = 60_000;

/// A confirmed recovery waiting for its epoch files.
#[derive(Debug)]
pub(super) struct Recovery {
    /// The version of the configuration it replaces: another in force when the files are
    /// written abandons it.
    base_version: i64,
    /// The configuration to put in force once both files are durable.
    config: QuorumConfig,
    /// The epoch both files get.
    epoch: u32,
    /// Writes not yet answered.
    writes_left: u8,
}

/// What a request for forced recovery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryAnswer {
    /// Confirmed: the epoch files are being written, then the configuration (`version`, this
    /// server its only voter, `dropped` gone) comes into force and this server leads alone.
    Recovering {
        /// The new configuration's version.
        version: i64,
        /// The epoch written (the leadership's is the next one).
        epoch: u32,
        /// The voters dropped.
        dropped: Vec<i64>,
    },
    /// Not confirmed (no token, or not this one): what a recovery would do, and the token
    /// that confirms it.
    Unconfirmed {
        /// What it would do.
        plan: String,
        /// The token to send back.
        token: String,
    },
    /// Refused, and why.
    Refused(String),
}

impl std::fmt::Display for RecoveryAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecoveryAnswer::Recovering { version, epoch, dropped } => write!(
                f,
                "recovering: epoch files at {epoch}, then configuration {version:#x} with this server its \
                 only voter (dropped {dropped:?}); it leads alone once they are written. Add servers back \
                 with reconfig, from empty data directories"
            ),
            RecoveryAnswer::Unconfirmed { plan, token } => {
                write!(f, "not confirmed: {plan}. To go ahead, repeat with the token {token}")
            }
            RecoveryAnswer::Refused(why) => write!(f, "refused: {why}"),
        }
    }
}

impl Replica {
    /// An operator asks this server to recover the ensemble alone (`token`: the confirmation,
    /// if given). Refused unless reconfiguration is on and standalone mode off, this server is electing (no leader is
    /// established or being joined: the quorum is not lost otherwise) with its log and epoch
    /// files settled, and it is in the configuration in force. Without the right token the
    /// answer describes the plan and gives the token.
    pub(in crate::node) fn recover(
        &mut self,
        now: Now,
        token: Option<&str>,
        core: &mut ServerCore,
    ) -> RecoveryAnswer {
        let refused = RecoveryAnswer::Refused;
        if !self.cfg.reconfig_enabled {
            return refused(
                "forced recovery puts a new configuration in force, which needs reconfigEnabled=true".into(),
            );
        }
        if self.cfg.standalone_enabled {
            return refused(
                "forced recovery leaves one voter, which needs standaloneEnabled=false (with it true, this \
                 server would start standalone after a restart, and refuse to start with observers)"
                    .into(),
            );
        }
        match &self.state {
            State::Leading(_) => return refused("this server leads: the quorum is not lost".into()),
            State::Learning { learner, .. } => {
                return refused(format!("server {} leads: the quorum is not lost", learner.leader_sid()))
            }
            State::Connecting { leader, .. } => {
                return refused(format!(
                    "server {leader} was elected and is being joined (if it cannot be reached, this server \
                     elects again): try again"
                ))
            }
            State::Looking => {}
        }
        if self.recovery.is_some() {
            return refused("a recovery is under way".into());
        }
        if self.decision.is_some()
            || self.reloading.is_some()
            || self.log_jobs > 0
            || self.log.durable < self.requested
            || !self.epoch_writes.is_empty()
        {
            return refused("the log or the epoch files are being written; try again".into());
        }
        let me = self.cfg.my_sid;
        let ms = now.mono_ms();
        if let Some((sid, at)) = self
            .voters_heard
            .iter()
            .filter(|(sid, at)| {
                **sid != me
                    && self.verifier.is_voter(**sid)
                    && ms.saturating_sub(**at) < VOTER_HEARD_REFUSAL_MS
            })
            .max_by_key(|(_, at)| **at)
        {
            return refused(format!(
                "voter {sid} answered this server's election {} ms ago: it runs, so the quorum is not lost for \
                 good. Recover one survivor only: stop the other voters (bring them back later from empty data \
                 directories) and ask again a minute after the last one stopped",
                ms.saturating_sub(*at)
            ));
        }
        let (Ok(accepted), Ok(current)) = (u32::try_from(self.epochs.0), u32::try_from(self.epochs.1)) else {
            return refused(format!("the epoch files hold {:?}, outside the epoch space", self.epochs));
        };
        // The token names this election: one kept from an earlier election (a restart, a
        // leadership since) does not confirm this one.
        let period = self.looking_since;
        let plan = match zk_quorum::recovery::plan(
            &self.cfg.config,
            self.pending.as_ref(),
            me,
            (accepted, current),
            period,
        ) {
            Ok(p) => p,
            Err(e) => return refused(e.to_string()),
        };
        if token != Some(plan.token.as_str()) {
            if let Some(t) = token {
                warn!(
                    "forced recovery: token {t:?} does not confirm this plan (its token is {})",
                    plan.token
                );
            }
            return RecoveryAnswer::Unconfirmed { plan: plan.to_string(), token: plan.token };
        }
        warn!(
            "forced recovery confirmed: {plan}; last logged zxid 0x{:x}; writing the epoch files",
            self.log.durable
        );
        for file in [EpochFile::Accepted, EpochFile::Current] {
            self.epoch_writes.push_back((file, plan.epoch, RECOVERY_WRITES));
            self.out.push_back(Output::PersistEpoch { file, epoch: plan.epoch });
        }
        let answer = RecoveryAnswer::Recovering {
            version: plan.config.version,
            epoch: plan.epoch,
            dropped: plan.dropped,
        };
        self.recovery = Some(Recovery {
            base_version: self.cfg.config.version,
            config: plan.config,
            epoch: plan.epoch,
            writes_left: 2,
        });
        self.drain(now, core);
        answer
    }

    /// One of the recovery's epoch files was written (or not). Once both are, the
    /// configuration comes into force and the election starts under it.
    pub(super) fn recovery_epoch_written(&mut self, now: Now, ok: bool) {
        let Some(r) = self.recovery.as_mut() else {
            // A recovery abandoned after its first write failed: its second answer.
            return;
        };
        if !ok {
            error!("forced recovery abandoned: an epoch file could not be written (see above); nothing else changed");
            self.recovery = None;
            return;
        }
        r.writes_left -= 1;
        if r.writes_left > 0 {
            return;
        }
        let Some(r) = self.recovery.take() else { return };
        assert_eq!(self.epochs, (i64::from(r.epoch), i64::from(r.epoch)), "both recovery epoch files are in");
        if self.cfg.config.version != r.base_version {
            // Adopted from a peer meanwhile (which therefore runs): the plan was made from
            // another configuration.
            warn!(
                "forced recovery abandoned: configuration {:#x} came into force while the epoch files were \
                 written (the plan replaced {:#x}); the epoch files stay at {}",
                self.cfg.config.version, r.base_version, r.epoch
            );
            return;
        }
        info!("forced recovery: epoch files at {}; putting the recovered configuration in force", r.epoch);
        self.install(r.config);
        self.look("forced recovery", now, false);
    }
}
