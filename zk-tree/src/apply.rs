//! Apply: a committed txn changes the tree (DataTree.processTxn) and yields the reply's substance
//! (FinalRequestProcessor) and the watch events it fires.

use crate::database::Database;
use crate::node::{ttl_owner, CONTAINER_OWNER, MAX_TTL_MS};
use crate::tree::parent_of;
use crate::{Applied, Outcome, WatchDelivery};
use zk_proto::{ErrorCode, OpCode, OpResult, Txn, TxnHeader};

fn code(e: i32) -> ErrorCode {
    ErrorCode::from_i32(e).unwrap_or(ErrorCode::SystemError)
}

impl Database {
    /// Applies a committed txn whose header type is `hdr.txn_type`. Deterministic: the same
    /// header and txn on the same state give the same state, outcome and events. Drops the
    /// outstanding-change records of txns up to `hdr.zxid`. A txn that cannot apply (possible only
    /// when replaying a foreign log) yields `Outcome::Error` and changes nothing further.
    pub fn apply(&mut self, hdr: &TxnHeader, txn: &Txn) -> Applied {
        let mut events = Vec::new();
        let op = OpCode::from_i32(hdr.txn_type);
        let outcome = match txn {
            Txn::Multi(subs) => self.apply_multi(hdr, subs, &mut events),
            Txn::CreateSession(t) => {
                self.sessions.add(hdr.client_id, t.time_out);
                // Known to prep from now on; it starts expiring once the server touches it.
                self.expiry.track(hdr.client_id, t.time_out);
                Outcome::SessionCreated
            }
            Txn::CloseSession(t) => {
                self.tree.kill_session(hdr.client_id, hdr.zxid, &t.paths2_delete, &mut events);
                self.sessions.remove(hdr.client_id);
                self.expiry.remove(hdr.client_id);
                Outcome::SessionClosed
            }
            Txn::Error(e) => Outcome::Error(code(e.err)),
            // A check outside a multi changes nothing. Apache answers it with a SetDataResponse
            // holding a null stat (and fails to send it); the node's stat is the useful answer.
            Txn::Check(c) => match self.tree.get(&c.path) {
                Some(n) => Outcome::SetData { stat: self.tree.client_stat(n) },
                None => Outcome::Error(ErrorCode::NoNode),
            },
            other => match self.apply_single(hdr, op, other, &mut events) {
                Ok(o) => o,
                Err(e) => Outcome::Error(e),
            },
        };
        self.outstanding.applied(hdr.zxid);
        self.pending_growth.applied(hdr.zxid);
        if hdr.zxid > self.last_applied {
            self.last_applied = hdr.zxid;
        }
        Applied { outcome, events }
    }

    fn apply_single(
        &mut self,
        hdr: &TxnHeader,
        op: Option<OpCode>,
        txn: &Txn,
        events: &mut Vec<WatchDelivery>,
    ) -> Result<Outcome, ErrorCode> {
        let (zxid, time) = (hdr.zxid, hdr.time);
        match txn {
            Txn::Create(t) => {
                let owner = if t.ephemeral { hdr.client_id } else { 0 };
                let r = self.tree.create_node(
                    &t.path,
                    t.data.clone(),
                    &t.acl,
                    owner,
                    t.parent_cversion,
                    zxid,
                    time,
                    events,
                );
                if r == Err(ErrorCode::NodeExists) && (op == Some(OpCode::Create) || self.replaying) {
                    // Replaying over a fuzzy snapshot: Apache brings the parent's cversion and
                    // pzxid up to what the txn says.
                    if let Some(parent) = parent_of(&t.path) {
                        self.tree.set_cversion_pzxid(parent, t.parent_cversion, zxid)?;
                    }
                }
                let stat = r?;
                Ok(Outcome::Created { path: t.path.clone(), stat })
            }
            Txn::CreateTtl(t) => {
                if t.ttl <= 0 || t.ttl > MAX_TTL_MS {
                    return Err(ErrorCode::BadArguments);
                }
                let r = self.tree.create_node(
                    &t.path,
                    t.data.clone(),
                    &t.acl,
                    ttl_owner(t.ttl),
                    t.parent_cversion,
                    zxid,
                    time,
                    events,
                );
                self.replay_parent_fix(&r, &t.path, t.parent_cversion, zxid)?;
                Ok(Outcome::Created { path: t.path.clone(), stat: r? })
            }
            Txn::CreateContainer(t) => {
                let r = self.tree.create_node(
                    &t.path,
                    t.data.clone(),
                    &t.acl,
                    CONTAINER_OWNER,
                    t.parent_cversion,
                    zxid,
                    time,
                    events,
                );
                self.replay_parent_fix(&r, &t.path, t.parent_cversion, zxid)?;
                Ok(Outcome::Created { path: t.path.clone(), stat: r? })
            }
            Txn::Delete(t) | Txn::DeleteContainer(t) => {
                self.tree.delete_node(&t.path, zxid, events)?;
                Ok(Outcome::Deleted)
            }
            Txn::SetData(t) => {
                let stat = self.tree.set_data(&t.path, t.data.clone(), t.version, zxid, time, events)?;
                Ok(Outcome::SetData { stat })
            }
            Txn::SetAcl(t) => {
                let stat = self.tree.set_acl(&t.path, &t.acl, t.version)?;
                Ok(Outcome::SetAcl { stat })
            }
            Txn::Check(_) => Ok(Outcome::Multi(vec![OpResult::Check])),
            Txn::Error(e) => Err(code(e.err)),
            Txn::CreateSession(_) | Txn::CloseSession(_) | Txn::Multi(_) => {
                Err(ErrorCode::RuntimeInconsistency)
            }
        }
    }

    /// During a replay over a fuzzy snapshot, a create that finds its node already present (the
    /// snapshot caught it) still brings the parent's cversion and pzxid up to what the txn says,
    /// so the parent ends as a straight apply leaves it. Apache does this for `create` only; here
    /// every create kind gets it, since a straight apply never meets NODEEXISTS.
    fn replay_parent_fix(
        &mut self,
        r: &Result<zk_proto::Stat, ErrorCode>,
        path: &str,
        parent_cversion: i32,
        zxid: i64,
    ) -> Result<(), ErrorCode> {
        if self.replaying && *r == Err(ErrorCode::NodeExists) {
            if let Some(parent) = parent_of(path) {
                self.tree.set_cversion_pzxid(parent, parent_cversion, zxid)?;
            }
        }
        Ok(())
    }

    /// Apache's multi apply: if any sub-txn is an error, nothing applies; ops before the first
    /// error report OK (0), error sub-txns their own code, other ops after it
    /// RUNTIMEINCONSISTENCY.
    fn apply_multi(
        &mut self,
        hdr: &TxnHeader,
        subs: &[(OpCode, Txn)],
        events: &mut Vec<WatchDelivery>,
    ) -> Outcome {
        let failed = subs.iter().any(|(_, t)| matches!(t, Txn::Error(_)));
        let mut post_failed = false;
        let mut results = Vec::with_capacity(subs.len());
        for (op, t) in subs {
            if let Txn::Error(e) = t {
                post_failed = true;
                results.push(OpResult::Error(code(e.err)));
                continue;
            }
            if failed {
                let c = if post_failed { ErrorCode::RuntimeInconsistency } else { ErrorCode::Ok };
                results.push(OpResult::Error(c));
                continue;
            }
            let r = match self.apply_single(hdr, Some(*op), t, events) {
                Err(e) => OpResult::Error(e),
                Ok(Outcome::Created { path, stat }) => match op {
                    OpCode::Create => OpResult::Create(path),
                    _ => OpResult::Create2(path, stat),
                },
                Ok(Outcome::Deleted) => OpResult::Delete,
                Ok(Outcome::SetData { stat }) => OpResult::SetData(stat),
                Ok(Outcome::Multi(_)) => OpResult::Check,
                Ok(_) => OpResult::Error(ErrorCode::RuntimeInconsistency),
            };
            results.push(r);
        }
        Outcome::Multi(results)
    }
}
