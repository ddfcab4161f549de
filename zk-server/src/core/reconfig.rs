//! Dynamic reconfiguration in the core (leader side): a reconfig request becomes a reconfig
//! transaction (a setData of `/zookeeper/config` holding the new configuration, version -1, as
//! Apache's leader writes it), or the error Apache answers; while it is in flight every proposal
//! needs a quorum of both configurations ([`VoterSet::begin_transition`]); its commit goes to the
//! learners as COMMITANDACTIVATE with the server that leads the new configuration
//! ([`Action::CommitAndActivate`]), and the client gets the new configuration and its stat.
//!
//! What to propose (and the checks' order) is zk-quorum's `reconfig::plan`; this part holds what
//! the plan needs: the configuration in force and which followers are synced, both told by the
//! quorum layer ([`Event::Membership`], [`Event::SyncedFollowers`]).

use super::*;
use std::collections::BTreeSet;
use zk_quorum::config::QuorumConfig;
use zk_quorum::quorum::QuorumVerifier;
use zk_quorum::reconfig::{self, ReconfigContext};

/// The znode holding the configuration.
const CONFIG_PATH: &str = "/zookeeper/config";

/// An ensemble's configuration as the core sees it.
#[derive(Debug, Clone)]
pub struct Membership {
    /// The configuration in force.
    pub config: QuorumConfig,
    /// `reconfigEnabled`.
    pub reconfig_enabled: bool,
    /// `standaloneEnabled`: a configuration needs two voters then.
    pub standalone_enabled: bool,
}

/// The core's reconfiguration state.
#[derive(Debug, Default)]
pub struct ReconfigState {
    /// The ensemble's configuration; None standalone.
    membership: Option<Membership>,
    /// Leader: followers synced with it.
    synced: BTreeSet<i64>,
    /// Leader: a reconfiguration proposed and not yet committed, with its configuration.
    pending: Option<(i64, QuorumConfig)>,
}

impl ServerCore {
    /// The quorum layer's configuration in force (at every role change and activation). With
    /// reconfiguration on, /zookeeper/config shows it once it is newer than what the node holds
    /// (a configuration stamped by a new leader, or one a learner activated), as Apache's members
    /// write theirs; a reconfiguration's own transaction already wrote it.
    pub(super) fn on_membership(&mut self, m: Membership, now: Now) {
        if m.reconfig_enabled {
            let held = self.db.tree().get(CONFIG_PATH).map_or(0, |n| n.mzxid());
            if m.config.version > held {
                self.db.set_config_node(&m.config.to_config_string(), m.config.version, now.wall_ms);
            }
        }
        self.reconfig.membership = Some(m);
    }

    /// Preps a write: reconfig requests here (on a leader with reconfiguration on), everything
    /// else (and reconfig without it: RECONFIGDISABLED) by the database.
    pub(super) fn prep_write(&mut self, ctx: &RequestCtx<'_>, req: &Request, zxid: i64, now: Now) -> Txn {
        let refusals = self.db.memory_refusals();
        let txn = match req {
            Request::Reconfig(r) => match self.prep_reconfig(ctx, r, zxid, now) {
                Some(txn) => txn,
                None => self.db.prep(ctx, req, zxid, now.wall_ms),
            },
            _ => self.db.prep(ctx, req, zxid, now.wall_ms),
        };
        if self.db.memory_refusals() != refusals {
            self.memory_brake_refused(ctx.session, req.op(), now);
        }
        txn
    }

    fn prep_reconfig(
        &mut self,
        ctx: &RequestCtx<'_>,
        r: &zk_proto::ReconfigRequest,
        zxid: i64,
        now: Now,
    ) -> Option<Txn> {
        let m = self.reconfig.membership.as_ref().filter(|m| m.reconfig_enabled)?;
        let error = |code: ErrorCode| Txn::Error(ErrorTxn { err: code.code() });
        if !matches!(self.role, Role::Leader { .. }) {
            // A standalone server: Apache has no reconfiguration there.
            return Some(error(ErrorCode::Unimplemented));
        }
        let plan = reconfig::plan(
            &reconfig::ReconfigRequest {
                joining: r.joining_servers.as_deref(),
                leaving: r.leaving_servers.as_deref(),
                new_members: r.new_members.as_deref(),
                cur_config_id: r.cur_config_id,
            },
            &ReconfigContext {
                current: &m.config,
                in_progress: self.reconfig.pending.is_some(),
                leader: self.proposer.voters().me(),
                synced_followers: &self.reconfig.synced,
                standalone_enabled: m.standalone_enabled,
            },
            zxid,
        );
        let next = match plan {
            Ok(next) => next,
            Err(e) => {
                info!("reconfiguration refused: {e}");
                return Some(error(e.code()));
            }
        };
        // The ACL of /zookeeper/config decides, last, as in Apache: a setData of it with the new
        // configuration, stored with version -1.
        let data = Bytes::from(next.to_config_string());
        let set =
            Request::SetData(SetDataRequest { path: CONFIG_PATH.to_owned(), data: Some(data), version: -1 });
        match self.db.prep(ctx, &set, zxid, now.wall_ms) {
            Txn::SetData(mut t) => {
                t.version = -1;
                info!(
                    "reconfiguration proposed at {zxid:#x}: {}",
                    next.to_config_string().replace('\n', ", ")
                );
                self.proposer.voters_mut().begin_transition(zxid, QuorumVerifier::from_config(&next));
                self.reconfig.pending = Some((zxid, next));
                Some(Txn::SetData(t))
            }
            other => Some(other),
        }
    }

    /// Leader: the followers synced with it changed.
    pub(super) fn on_synced_followers(&mut self, synced: BTreeSet<i64>) {
        self.reconfig.synced = synced;
    }

    /// Leader: `zxid` is committed. For the reconfiguration in flight: the new configuration
    /// counts from now on, and the learners are told to activate it with the server designated
    /// to lead it. Returns whether this was it (its COMMIT is then not sent).
    pub(super) fn commit_reconfig(&mut self, zxid: i64) -> bool {
        if self.reconfig.pending.as_ref().is_none_or(|(z, _)| *z != zxid) {
            return false;
        }
        let Some((_, next)) = self.reconfig.pending.take() else { return false };
        let me = self.proposer.voters().me();
        let current = self.reconfig.membership.as_ref().map(|m| m.config.clone());
        let designated = current
            .as_ref()
            .and_then(|c| reconfig::designated_leader(me, c, &next, self.proposer.acked(), zxid))
            .unwrap_or(me);
        self.proposer.voters_mut().finish_transition();
        if let Some(m) = self.reconfig.membership.as_mut() {
            m.config = next.clone();
        }
        info!("reconfiguration {zxid:#x} committed; leader of the new configuration: {designated}");
        self.actions.push_back(Action::CommitAndActivate {
            zxid,
            designated,
            config: Bytes::from(next.to_config_string()),
        });
        true
    }

    /// A role ends: no reconfiguration stays in flight (a new leader completes it from its log).
    pub(super) fn reset_reconfig(&mut self) {
        self.reconfig.pending = None;
        self.reconfig.synced.clear();
    }
}
