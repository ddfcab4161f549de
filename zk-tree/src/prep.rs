//! Prep: validating a write against the tree as it will be once every earlier prepped txn is
//! applied, and building the txn to log, with PrepRequestProcessor's checks in its order.

use crate::acl::{check_acl, fixup_acl};
use crate::database::Database;
use crate::digest;
use crate::java;
use crate::memory::{MEMORY_BRAKE_ERROR, NODE_OVERHEAD_BYTES};
use crate::node::{new_stat, owner_kind, ttl_owner, OwnerKind, CONTAINER_OWNER, MAX_TTL_MS};
use crate::outstanding::ChangeRecord;
use crate::tree::{is_special_path, node_size, parent_of};
use crate::{RequestCtx, SessionId};
use bytes::Bytes;
use std::sync::Arc;
use zk_proto::path::validate_path;
use zk_proto::*;

/// One write operation, as PrepRequestProcessor sees it after decoding.
enum WriteOp<'a> {
    Create { ty: OpCode, path: &'a str, data: &'a Option<Bytes>, acl: &'a [Acl], flags: i32, ttl: i64 },
    Delete { path: &'a str, version: i32 },
    DeleteContainer { path: &'a str },
    SetData { path: &'a str, data: &'a Option<Bytes>, version: i32 },
    SetAcl { path: &'a str, acl: &'a [Acl], version: i32 },
    Check { path: &'a str, version: i32 },
}

fn error_txn(e: ErrorCode) -> Txn {
    Txn::Error(ErrorTxn { err: e.code() })
}

/// `checkAndIncVersion`: -1 matches anything.
fn check_version(current: i32, expected: i32) -> Result<i32, ErrorCode> {
    if expected != -1 && expected != current {
        return Err(ErrorCode::BadVersion);
    }
    Ok(current.wrapping_add(1))
}

/// `getParentPathAndValidate`: delete and deleteContainer refuse paths without '/', with NUL, and
/// the special paths.
fn parent_for_delete(path: &str) -> Result<&str, ErrorCode> {
    if !path.contains('/') || path.contains('\0') || is_special_path(path) {
        return Err(ErrorCode::BadArguments);
    }
    parent_of(path).ok_or(ErrorCode::BadArguments)
}

fn valid_path(path: &str) -> Result<(), ErrorCode> {
    validate_path(path).map_err(|_| ErrorCode::BadArguments)
}

impl Database {
    /// Validates a write request against the tree as it will be once every txn prepped so far is
    /// applied (as PrepRequestProcessor's outstanding changes), and returns the txn to propose:
    /// the real txn, `Txn::Error` for a failed write, or a `Txn::Multi` whose failing op and later
    /// ops are error sub-txns (ops before it keep their real txns, exactly as Apache logs it).
    /// `zxid` and `now_ms` are what the header will carry. Never panics.
    ///
    /// Handles Create, Create2, CreateContainer, CreateTtl, Delete, DeleteContainer (the reaper's
    /// request: no session or ACL check), SetData, SetAcl, Multi, CloseSession, Reconfig (always
    /// RECONFIGDISABLED), Check (also on its own, as Apache preps it). Any read request gives
    /// UNIMPLEMENTED (use [`crate::txn_type`] for the header's type).
    pub fn prep(&mut self, ctx: &RequestCtx, req: &Request, zxid: i64, now_ms: i64) -> Txn {
        let op = match req {
            Request::Multi(ops) => return self.prep_multi(ctx, ops, zxid, now_ms),
            Request::CloseSession => return self.prep_close_session(ctx.session, zxid),
            Request::Reconfig(_) => return error_txn(ErrorCode::ReconfigDisabled),
            Request::Create(r) => create_op(OpCode::Create, r),
            Request::Create2(r) => create_op(OpCode::Create2, r),
            Request::CreateContainer(r) => create_op(OpCode::CreateContainer, r),
            Request::CreateTtl(r) => WriteOp::Create {
                ty: OpCode::CreateTtl,
                path: &r.path,
                data: &r.data,
                acl: &r.acl,
                flags: r.flags,
                ttl: r.ttl,
            },
            Request::Delete(r) => WriteOp::Delete { path: &r.path, version: r.version },
            Request::DeleteContainer(r) => WriteOp::DeleteContainer { path: &r.path },
            Request::SetData(r) => WriteOp::SetData { path: &r.path, data: &r.data, version: r.version },
            Request::SetAcl(r) => WriteOp::SetAcl { path: &r.path, acl: &r.acl, version: r.version },
            // Apache preps a check sent on its own as it preps one inside a multi.
            Request::Check(r) => WriteOp::Check { path: &r.path, version: r.version },
            _ => return error_txn(ErrorCode::Unimplemented),
        };
        match self.prep_op(ctx, &op, zxid, now_ms) {
            Ok(t) => t,
            Err(e) => error_txn(e),
        }
    }

    /// Prep for a new session whose id the server picked: the CreateSession txn. The session is
    /// registered when the txn is applied.
    pub fn prep_create_session(&mut self, _session: SessionId, timeout_ms: i32) -> Txn {
        Txn::CreateSession(CreateSessionTxn { time_out: timeout_ms })
    }

    /// The state `path` will have: the newest outstanding record, else the tree's node.
    ///
    /// Errors: NONODE if absent or to be deleted.
    fn record(&self, path: &str) -> Result<ChangeRecord, ErrorCode> {
        if let Some(r) = self.outstanding.get(path) {
            return if r.stat.is_some() { Ok(r.clone()) } else { Err(ErrorCode::NoNode) };
        }
        let (n, child_count) = self.tree.get_counted(path).ok_or(ErrorCode::NoNode)?;
        let digest = if self.digest_kept() { digest::of_node(n) } else { 0 };
        Ok(ChangeRecord {
            zxid: -1,
            stat: Some(n.stat_persisted()),
            child_count: child_count as i32,
            acl: n.acl.clone(),
            digest,
            tree_digest: 0,
        })
    }

    fn digest_kept(&self) -> bool {
        self.tree.digest().is_some()
    }

    /// Adds a change record whose `digest` is the node's digest in its new state, `before` the
    /// digest it had: the record's tree digest follows from the one before it (Apache's
    /// `precalculateDigest`, against the exact state apply will leave).
    fn add_change(&mut self, path: &str, mut rec: ChangeRecord, before: i64) {
        if let Some(d) = self.pending_digest() {
            rec.tree_digest = d.wrapping_sub(before).wrapping_add(rec.digest);
        }
        self.outstanding.add(path, rec);
    }

    /// The digest of a node at `path` with `data` and `stat`; 0 when no digest is kept.
    fn new_digest(&self, path: &str, data: Option<&[u8]>, stat: &StatPersisted) -> i64 {
        if self.digest_kept() {
            digest::node_digest(path.as_bytes(), data, stat)
        } else {
            0
        }
    }

    /// The node digest `digest` of a node at `path` once its stat went from `old` to `new` (path
    /// and data unchanged); 0 when no digest is kept.
    fn restat(&self, path: &str, digest: i64, old: &StatPersisted, new: &StatPersisted) -> i64 {
        if self.digest_kept() {
            digest::restat(digest, path.as_bytes(), old, new)
        } else {
            0
        }
    }

    /// The memory brake ([`crate::memory`]): a write that would grow the tree by `growth` bytes
    /// is refused while the tree's accounted bytes (in-flight growth included) are over the
    /// limit. Writes that do not grow it, and writes under `/zookeeper/`, always pass.
    fn check_memory(&mut self, path: &str, growth: u64) -> Result<(), ErrorCode> {
        if growth == 0 || path.starts_with("/zookeeper/") || !self.memory_brake_on() {
            return Ok(());
        }
        self.memory_refusals += 1;
        Err(MEMORY_BRAKE_ERROR)
    }

    fn prep_op(&mut self, ctx: &RequestCtx, op: &WriteOp, zxid: i64, now: i64) -> Result<Txn, ErrorCode> {
        match *op {
            WriteOp::Create { ty, path, data, acl, flags, ttl } => {
                self.prep_create(ctx, ty, path, data, acl, flags, ttl, zxid, now)
            }
            WriteOp::Delete { path, version } => {
                self.expiry.check(ctx.session)?;
                let parent_path = parent_for_delete(path)?;
                let parent = self.record(parent_path)?;
                check_acl(&self.cfg, &parent.acl, perms::DELETE, ctx.auth)?;
                let node = self.record(path)?;
                check_version(node.stat.as_ref().map_or(0, |s| s.version), version)?;
                if node.child_count > 0 {
                    return Err(ErrorCode::NotEmpty);
                }
                self.add_delete_records(parent_path, parent, path, node.digest, zxid);
                Ok(Txn::Delete(DeleteTxn { path: path.to_string() }))
            }
            WriteOp::DeleteContainer { path } => {
                let parent_path = parent_for_delete(path)?;
                let node = self.record(path)?;
                if node.child_count > 0 {
                    return Err(ErrorCode::NotEmpty);
                }
                let owner = node.stat.as_ref().map_or(0, |s| s.ephemeral_owner);
                if owner_kind(owner, self.cfg.extended_types_enabled) == OwnerKind::Normal {
                    return Err(ErrorCode::BadVersion);
                }
                let parent = self.record(parent_path)?;
                self.add_delete_records(parent_path, parent, path, node.digest, zxid);
                Ok(Txn::DeleteContainer(DeleteTxn { path: path.to_string() }))
            }
            WriteOp::SetData { path, data, version } => {
                self.expiry.check(ctx.session)?;
                valid_path(path)?;
                let mut node = self.record(path)?;
                check_acl(&self.cfg, &node.acl, perms::WRITE, ctx.auth)?;
                if self.cfg.enforce_quota {
                    // Apache takes the old length from the outstanding record; the applied node
                    // is used here (they differ only while a setData on it is in flight).
                    let old = self.tree.get(path).and_then(|n| n.data()).map_or(0, |d| d.len() as i64);
                    let new = data.as_ref().map_or(0, |d| d.len() as i64);
                    self.tree.check_quota(path, new - old, 0)?;
                }
                let mut stat = node.stat.take().unwrap_or_default();
                let new_version = check_version(stat.version, version)?;
                // Growth against the applied node, as the quota check above measures it.
                let old_len = self.tree.get(path).and_then(|n| n.data()).map_or(0, |d| d.len() as u64);
                let growth = data.as_ref().map_or(0, |d| d.len() as u64).saturating_sub(old_len);
                self.check_memory(path, growth)?;
                self.pending_growth.add(zxid, growth);
                stat.version = new_version;
                stat.mtime = now;
                stat.mzxid = zxid;
                let (before, digest) = (node.digest, self.new_digest(path, data.as_deref(), &stat));
                self.add_change(path, ChangeRecord { zxid, stat: Some(stat), digest, ..node }, before);
                Ok(Txn::SetData(SetDataTxn {
                    path: path.to_string(),
                    data: data.clone(),
                    version: new_version,
                }))
            }
            WriteOp::SetAcl { path, acl, version } => {
                self.expiry.check(ctx.session)?;
                valid_path(path)?;
                let list = fixup_acl(&self.cfg, ctx.auth, acl)?;
                let node = self.record(path)?;
                check_acl(&self.cfg, &node.acl, perms::ADMIN, ctx.auth)?;
                let old = node.stat.clone().unwrap_or_default();
                let new_version = check_version(old.aversion, version)?;
                let stat = StatPersisted { aversion: new_version, ..old };
                let (before, digest) = (node.digest, self.restat(path, node.digest, &old, &stat));
                // Apache keeps the old ACL in the record; later preps see the new one only once
                // this txn is applied.
                self.add_change(path, ChangeRecord { zxid, stat: Some(stat), digest, ..node }, before);
                Ok(Txn::SetAcl(SetAclTxn { path: path.to_string(), acl: list, version: new_version }))
            }
            WriteOp::Check { path, version } => {
                self.expiry.check(ctx.session)?;
                valid_path(path)?;
                let node = self.record(path)?;
                check_acl(&self.cfg, &node.acl, perms::READ, ctx.auth)?;
                let v = check_version(node.stat.as_ref().map_or(0, |s| s.version), version)?;
                Ok(Txn::Check(CheckVersionTxn { path: path.to_string(), version: v }))
            }
        }
    }

    /// The records of a delete: the parent's pzxid moves, and the node goes (its digest was
    /// `node_digest`).
    fn add_delete_records(
        &mut self,
        parent_path: &str,
        mut parent: ChangeRecord,
        path: &str,
        node_digest: i64,
        zxid: i64,
    ) {
        parent.zxid = zxid;
        parent.child_count -= 1;
        self.move_pzxid(parent_path, parent, zxid);
        self.add_removal(path, node_digest, zxid, -1);
    }

    /// A parent record whose pzxid moves to `zxid` (a child deleted).
    fn move_pzxid(&mut self, parent_path: &str, mut parent: ChangeRecord, zxid: i64) {
        let before = parent.digest;
        if let Some(old) = parent.stat.clone() {
            let new = StatPersisted { pzxid: zxid, ..old };
            parent.digest = self.restat(parent_path, before, &old, &new);
            parent.stat = Some(new);
        }
        self.add_change(parent_path, parent, before);
    }

    /// The record of a node deleted by txn `zxid`; its digest was `node_digest`.
    fn add_removal(&mut self, path: &str, node_digest: i64, zxid: i64, child_count: i32) {
        let rec = ChangeRecord {
            zxid,
            stat: None,
            child_count,
            acl: Arc::new(Vec::new()),
            digest: 0,
            tree_digest: 0,
        };
        self.add_change(path, rec, node_digest);
    }

    #[allow(clippy::too_many_arguments)]
    fn prep_create(
        &mut self,
        ctx: &RequestCtx,
        ty: OpCode,
        path: &str,
        data: &Option<Bytes>,
        acl: &[Acl],
        flags: i32,
        ttl: i64,
        zxid: i64,
        now: i64,
    ) -> Result<Txn, ErrorCode> {
        let mode = CreateMode::from_i32(flags).ok_or(ErrorCode::BadArguments)?;
        // validateCreateRequest: extended types, the TTL range, then the session.
        if mode.is_ttl() && !self.cfg.extended_types_enabled {
            return Err(ErrorCode::Unimplemented);
        }
        if mode.is_ttl() {
            if ttl <= 0 || ttl > MAX_TTL_MS {
                return Err(ErrorCode::BadArguments);
            }
        } else if ttl >= 0 || ty == OpCode::CreateTtl {
            // A createTTL request without a TTL mode would log a txn that no server can apply;
            // Apache passes it when ttl < 0 and then fails in apply, so it is refused here.
            return Err(ErrorCode::BadArguments);
        }
        if mode.is_ephemeral() {
            self.expiry.check(ctx.session).map_err(|_| ErrorCode::SessionExpired)?;
        } else {
            self.expiry.check(ctx.session)?;
        }
        // validatePathForCreate: only '/' presence and NUL here; full validation follows the suffix.
        if !path.contains('/') || path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = parent_of(path).ok_or(ErrorCode::BadArguments)?;
        let list = fixup_acl(&self.cfg, ctx.auth, acl)?;
        let mut parent = self.record(parent_path)?;
        check_acl(&self.cfg, &parent.acl, perms::CREATE, ctx.auth)?;
        let mut pstat = parent.stat.take().unwrap_or_default();
        let parent_cv = pstat.cversion;
        let final_path =
            if mode.is_sequential() { format!("{path}{parent_cv:010}") } else { path.to_string() };
        valid_path(&final_path)?;
        if self.record(&final_path).is_ok() {
            return Err(ErrorCode::NodeExists);
        }
        if owner_kind(pstat.ephemeral_owner, self.cfg.extended_types_enabled) == OwnerKind::Normal {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        if self.cfg.enforce_quota {
            let bytes = data.as_ref().map_or(0, |d| d.len() as i64);
            self.tree.check_quota(&final_path, bytes, 1)?;
        }
        let growth = node_size(&final_path, data.as_deref()) + NODE_OVERHEAD_BYTES;
        self.check_memory(&final_path, growth)?;
        self.pending_growth.add(zxid, growth);
        let new_cv = parent_cv.wrapping_add(1);
        // The record shares the tree's copy of the list when it has one (nearly always: one ACL
        // for most nodes), and the txn takes the list itself.
        let acl_ref = self.tree.acls.shared(&list).unwrap_or_else(|| Arc::new(list.clone()));
        let owner = match ty {
            OpCode::CreateContainer => CONTAINER_OWNER,
            OpCode::CreateTtl => ttl_owner(ttl),
            _ if mode.is_ephemeral() => ctx.session,
            _ => 0,
        };
        let old_pstat = pstat.clone();
        pstat.cversion = new_cv;
        pstat.pzxid = zxid;
        parent.zxid = zxid;
        parent.child_count += 1;
        let before = parent.digest;
        parent.digest = self.restat(parent_path, before, &old_pstat, &pstat);
        parent.stat = Some(pstat);
        self.add_change(parent_path, parent, before);
        let stat = new_stat(zxid, now, owner);
        let digest = self.new_digest(&final_path, data.as_deref(), &stat);
        let rec =
            ChangeRecord { zxid, stat: Some(stat), child_count: 0, acl: acl_ref, digest, tree_digest: 0 };
        self.add_change(&final_path, rec, 0);
        let (path, data, acl) = (final_path, data.clone(), list);
        let txn = match ty {
            OpCode::CreateContainer => {
                Txn::CreateContainer(CreateContainerTxn { path, data, acl, parent_cversion: new_cv })
            }
            OpCode::CreateTtl => {
                Txn::CreateTtl(CreateTtlTxn { path, data, acl, parent_cversion: new_cv, ttl })
            }
            _ => Txn::Create(CreateTxn {
                path,
                data,
                acl,
                ephemeral: mode.is_ephemeral(),
                parent_cversion: new_cv,
            }),
        };
        Ok(txn)
    }

    fn prep_multi(&mut self, ctx: &RequestCtx, ops: &[Request], zxid: i64, now: i64) -> Txn {
        let mut txns: Vec<(OpCode, Txn)> = Vec::with_capacity(ops.len());
        let mut failed = false;
        for req in ops {
            if failed {
                txns.push((OpCode::Error, error_txn(ErrorCode::RuntimeInconsistency)));
                continue;
            }
            let Some((ty, op)) = multi_op(req) else {
                // Apache fails the whole request (a record of the wrong class for the op type, or
                // an op a multi may not hold) with MARSHALLINGERROR.
                self.outstanding.rollback(zxid);
                self.pending_growth.rollback_after(zxid - 1);
                return error_txn(ErrorCode::MarshallingError);
            };
            match self.prep_op(ctx, &op, zxid, now) {
                Ok(t) => txns.push((ty, t)),
                Err(e) => {
                    failed = true;
                    txns.push((OpCode::Error, error_txn(e)));
                    self.outstanding.rollback(zxid);
                    self.pending_growth.rollback_after(zxid - 1);
                }
            }
        }
        Txn::Multi(txns)
    }

    fn prep_close_session(&mut self, session: SessionId, zxid: i64) -> Txn {
        // The session's ephemerals as a copy of Apache's HashSet, then adjusted by outstanding
        // records; the txn lists them in that set's iteration order.
        let mut items: Vec<(String, u64)> =
            self.tree.ephemerals_of(session).map(|s| s.copy_order()).unwrap_or_default();
        let mut cap = java::capacity_for_copy(items.len());
        let mut next_rank = items.len() as u64;
        let mut present: std::collections::HashSet<String> = items.iter().map(|(p, _)| p.clone()).collect();
        for (path, rec) in self.outstanding.iter_in_order() {
            match &rec.stat {
                None => {
                    if present.remove(path) {
                        items.retain(|(p, _)| p != path);
                    }
                }
                Some(s) if s.ephemeral_owner == session => {
                    if present.insert(path.to_string()) {
                        items.push((path.to_string(), next_rank));
                        next_rank += 1;
                        if items.len() > cap * 3 / 4 {
                            cap *= 2;
                        }
                    }
                }
                Some(_) => {}
            }
        }
        java::hash_order(&mut items, cap);
        let paths: Vec<String> = items.into_iter().map(|(p, _)| p).collect();
        for p in &paths {
            let node_digest = self.record(p).map_or(0, |r| r.digest);
            if let Some(parent_path) = parent_of(p) {
                if let Ok(mut parent) = self.record(parent_path) {
                    // Apache (digest enabled) moves the parent's pzxid but not its child count.
                    parent.zxid = zxid;
                    self.move_pzxid(parent_path, parent, zxid);
                }
            }
            self.add_removal(p, node_digest, zxid, 0);
        }
        self.expiry.set_closing(session);
        Txn::CloseSession(CloseSessionTxn { paths2_delete: paths })
    }
}

fn create_op(ty: OpCode, r: &CreateRequest) -> WriteOp<'_> {
    WriteOp::Create { ty, path: &r.path, data: &r.data, acl: &r.acl, flags: r.flags, ttl: -1 }
}

/// How Apache's MultiOperationRecord turns a sub-request into an op: create, create2 and
/// createContainer bodies become `Op.create(flags)`, typed by the flags (container ->
/// createContainer, anything else -> create; a TTL mode there is a class mismatch, None); a
/// createTTL body is createTTL only with a TTL mode, else a plain create.
fn multi_op(req: &Request) -> Option<(OpCode, WriteOp<'_>)> {
    let by_flags = |flags: i32| CreateMode::from_i32(flags).unwrap_or(CreateMode::Persistent);
    Some(match req {
        Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => {
            let mode = by_flags(r.flags);
            if mode.is_ttl() {
                return None;
            }
            let ty = if mode.is_container() { OpCode::CreateContainer } else { OpCode::Create };
            (ty, create_op(ty, r))
        }
        Request::CreateTtl(r) => {
            let mode = by_flags(r.flags);
            if mode.is_ttl() {
                let op = WriteOp::Create {
                    ty: OpCode::CreateTtl,
                    path: &r.path,
                    data: &r.data,
                    acl: &r.acl,
                    flags: r.flags,
                    ttl: r.ttl,
                };
                (OpCode::CreateTtl, op)
            } else {
                let ty = if mode.is_container() { OpCode::CreateContainer } else { OpCode::Create };
                (
                    ty,
                    WriteOp::Create {
                        ty,
                        path: &r.path,
                        data: &r.data,
                        acl: &r.acl,
                        flags: r.flags,
                        ttl: -1,
                    },
                )
            }
        }
        Request::Delete(r) => (OpCode::Delete, WriteOp::Delete { path: &r.path, version: r.version }),
        Request::SetData(r) => {
            (OpCode::SetData, WriteOp::SetData { path: &r.path, data: &r.data, version: r.version })
        }
        Request::Check(r) => (OpCode::Check, WriteOp::Check { path: &r.path, version: r.version }),
        _ => return None,
    })
}
