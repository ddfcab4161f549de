//! The write path: zxids, proposals, the batch handed to the log, commits counted by ACKs, apply
//! in zxid order, and taking proposals back when the log's disk is full.

use super::*;

/// Rebuilds a divergence may cause within [`DIVERGENCE_WINDOW_MS`].
const DIVERGENCE_REBUILDS_MAX: usize = 3;

/// The window those rebuilds are counted in, ms.
const DIVERGENCE_WINDOW_MS: u64 = 10 * 60_000;

/// The memory brake's refusals are logged at most once in this many ms.
const MEMORY_BRAKE_LOG_EVERY_MS: u64 = 10_000;

impl ServerCore {
    /// The next zxid, or None when the epoch is exhausted. A leader then leaves its role (the
    /// request is not answered; its client reconnects elsewhere), and the next election starts
    /// a new epoch, as Apache's leader does: clients see a failover, and no process exits.
    pub(super) fn next_zxid(&mut self, now: Now) -> Option<i64> {
        if self.restore_pending() {
            // Nothing is proposed while a restore waits for the log (expiry, reaping): the tree
            // it would change is being replaced.
            return None;
        }
        if self.writes_held {
            // A leader handing over proposes nothing (learners' forwarded writes are dropped).
            return None;
        }
        match self.proposer.next_zxid() {
            Ok(z) => Some(z.to_i64()),
            Err(e) => {
                let reason = format!(
                    "zxid counter exhausted in epoch {} (last zxid {}): a new epoch is needed",
                    e.0.epoch, e.0
                );
                warn!("{reason}; leaving the {:?} role", self.role);
                let me = self.proposer.voters().me();
                self.set_role(Role::Down, VoterSet::solo(me), None, now);
                self.actions.push_back(Action::StepDown { reason, diverged: false });
                None
            }
        }
    }

    /// Learner: hands the leader's proposals to the log (they were logged as they came, and
    /// count towards the next snapshot as the leader's own writes do).
    pub fn persist_replicated(&mut self, records: zk_log::RecordBatch) {
        debug_assert!(
            matches!(self.role, Role::Down | Role::Learner { .. }),
            "only a learner logs a leader's proposals"
        );
        if let Some(s) = self.snapshots.as_mut() {
            s.bytes_since = s.bytes_since.saturating_add(records.bytes());
        }
        self.actions.push_back(Action::Persist { records, inline: false });
    }

    /// Prep refused a write for the memory brake (zk-tree's `memory`): counted, and logged at
    /// most once every [`MEMORY_BRAKE_LOG_EVERY_MS`] with the refusals since the last line, so a
    /// client retrying in a loop cannot flood the log.
    pub(super) fn memory_brake_refused(&mut self, session: SessionId, op: OpCode, now: Now) {
        self.stats.writes_refused_memory += 1;
        let (last, unlogged) = &mut self.memory_brake_log;
        *unlogged += 1;
        let now_ms = now.mono_ms();
        if last.is_some_and(|t| now_ms < t + MEMORY_BRAKE_LOG_EVERY_MS) {
            return;
        }
        warn!(
            "{op:?} from session 0x{session:x} refused with SYSTEMERROR: the tree's accounted memory, \
             {} bytes with the writes in flight, is over zkrs.treeMemorySoftLimitBytes={}; writes \
             that grow the tree are refused until deletes bring it under ({} refused since the last \
             such line)",
            self.db.tree_memory_bytes(),
            self.db.memory_soft_limit_bytes(),
            unlogged
        );
        *last = Some(now_ms);
        *unlogged = 0;
    }

    /// Proposes a txn just prepped: it carries the tree digest prep predicts for the tree once it
    /// applies (when the tree keeps one), as Apache's leader stamps its proposals.
    pub(super) fn propose(&mut self, mut p: Proposal) {
        p.digest = self
            .db
            .pending_digest()
            .map(|tree_digest| TxnDigest { version: zk_tree::digest::DIGEST_VERSION, tree_digest });
        self.proposer.propose(p);
    }

    /// Preps and proposes a request the server issues itself (session expiry, reaping): cxid 0,
    /// with the super identity, as Apache's own requests carry no ACL restrictions.
    pub(super) fn propose_internal(&mut self, now: Now, session: SessionId, req: &Request) {
        let Some(zxid) = self.next_zxid(now) else { return };
        let auth = AuthIds { ids: vec![], is_super: true };
        let ctx = RequestCtx { session, cxid: 0, auth: &auth };
        let txn = self.db.prep(&ctx, req, zxid, now.wall_ms);
        let txn_type = zk_tree::txn_type(req.op(), &txn).code();
        let hdr = TxnHeader { client_id: session, cxid: 0, zxid, time: now.wall_ms, txn_type };
        self.propose(Proposal::new(hdr, txn, true));
    }

    pub(super) fn propose_close_session(&mut self, now: Now, sid: SessionId) {
        self.db.expiry_mut().set_closing(sid);
        self.propose_internal(now, sid, &Request::CloseSession);
    }

    pub(super) fn reap_containers(&mut self, now: Now) {
        let per_tick = (self.settings.container_max_per_minute as u64
            * self.settings.container_check_interval_ms
            / 60_000)
            .max(1) as usize;
        // Container and TTL ages are against znode mtimes, which are wall-clock times.
        for path in self.db.reapable(now.wall_ms, per_tick) {
            debug!("reaping {path}");
            let req = Request::DeleteContainer(DeleteRequest { path, version: -1 });
            self.propose_internal(now, 0, &req);
        }
    }

    /// Hands the proposals made since the last call to the log as one batch. They are committed
    /// once a quorum has them durable ([`Event::Durable`] for this server, [`Event::Ack`] for the
    /// others).
    pub(super) fn flush(&mut self) {
        let n = self.proposer.unhanded().count();
        if n == 0 {
            return;
        }
        let mut records = zk_log::RecordBatch::new();
        let encoded = self
            .proposer
            .unhanded()
            .try_for_each(|p| records.push_digested(&p.hdr, &p.txn, p.digest.as_ref()));
        if let Err(e) = encoded {
            self.stop(format!("transaction log failed: {e}"));
            return;
        }
        // A few writes with nothing else in flight (a lone client's write) may be written and
        // synced on the driver's thread, which saves the two thread hand-offs of the queue. Only
        // valid for a standalone server: an ensemble leader's quorum may be itself alone (one
        // voter and observers), but its learners still get every proposal and commit.
        let standalone = self.role == Role::Standalone;
        debug_assert!(standalone || matches!(self.role, Role::Leader { .. }), "only a leader proposes");
        let inline = standalone && self.proposer.handed() == 0 && n <= INLINE_RECORDS_MAX;
        self.proposer.mark_all_handed();
        if let Some(s) = self.snapshots.as_mut() {
            s.bytes_since = s.bytes_since.saturating_add(records.bytes());
        }
        if !standalone {
            // The learners get the bytes just encoded for the log.
            self.actions.push_back(Action::Propose { payloads: records.shared_payloads() });
        }
        self.actions.push_back(Action::Persist { records, inline });
    }

    /// Everything through `zxid` is durable here: it counts as this server's ACK.
    pub(super) fn on_durable(&mut self, now: Now, zxid: i64) {
        self.log_durable = self.log_durable.max(zxid);
        self.maybe_finish_snapshot();
        if let Some(since) = self.disk_full_since_ms.take() {
            self.stats.disk_full = false;
            info!(
                "transaction log has space again: writes accepted (refused for {:.1?})",
                Duration::from_millis(now.mono_ms().saturating_sub(since))
            );
        }
        let me = self.proposer.voters().me();
        if self.proposer.ack(me, zxid).is_some() {
            self.commit_ready(now);
        }
    }

    pub(super) fn on_log_failed(&mut self, now: Now, e: zk_log::LogError) {
        if e.is_storage_full() {
            // In an ensemble, every role steps down, a learner still syncing (Down) too: what it
            // was told to log must be in its log before it acknowledges anything after it, and
            // a refused batch leaves a hole the next batch would not show.
            if self.role != Role::Standalone {
                return self.step_down_for_log(now, e);
            }
            return self.refuse_proposals(now, e);
        }
        self.stop(format!(
            "transaction log failed: {e}; stopping with {} unacknowledged transactions",
            self.proposer.in_flight()
        ));
    }

    /// Ensemble: the log refused a batch for a full disk. Proposals cannot be taken back here as
    /// a standalone server takes them back: a leader has sent them to its learners already (its
    /// learners may even commit them without it), and a learner must log every proposal of its
    /// leader in order. So the server leaves its role at once (the connections waiting for a
    /// write close; idle ones are kept, as through any election, `super::kept`) and elects again; whichever role comes next starts from what is
    /// on disk, and a learner whose disk is still full leaves again at its next write, until
    /// space returns.
    fn step_down_for_log(&mut self, now: Now, e: zk_log::LogError) {
        let me = self.proposer.voters().me();
        if self.disk_full_since_ms.is_none() {
            self.disk_full_since_ms = Some(now.mono_ms());
            self.stats.disk_full = true;
        }
        let reason = format!(
            "transaction log is out of space ({e}) with {} transactions not yet durable",
            self.proposer.in_flight()
        );
        error!("{reason}: leaving the {:?} role to elect again", self.role);
        self.set_role(Role::Down, VoterSet::solo(me), None, now);
        self.actions.push_back(Action::ResumeLog);
        self.actions.push_back(Action::StepDown { reason, diverged: false });
    }

    /// The log refused a batch for a full disk. Everything durable before it was committed already,
    /// so every proposal still uncommitted is taken back: its changes leave prep's view, the zxid
    /// counter returns to the last committed zxid, the clients get SYSTEMERROR (the write was not
    /// applied; a session being created is closed, a refused closeSession leaves the session
    /// open), and the log takes batches again. The next write tries the disk again, so the server
    /// recovers by itself when space returns.
    pub(super) fn refuse_proposals(&mut self, now: Now, e: zk_log::LogError) {
        let base = self.db.last_applied_zxid();
        let refused = self.proposer.take_back_uncommitted();
        self.db.abandon_after(base);
        self.stats.writes_refused += refused.len() as u64;
        if self.disk_full_since_ms.is_none() {
            self.disk_full_since_ms = Some(now.mono_ms());
            self.stats.disk_full = true;
            error!(
                "transaction log is out of space ({e}): refusing writes until space is freed \
                 (last durable zxid 0x{base:x}; {} pending writes refused)",
                refused.len()
            );
        } else {
            debug!("transaction log still out of space: {} writes refused", refused.len());
        }
        let err = ErrorCode::SystemError.code();
        for p in refused {
            let sid = p.hdr.client_id;
            if p.hdr.txn_type == OpCode::CreateSession.code() {
                // The session was never created: the client sees the connection drop and tries
                // again.
                if let Some((conn, _)) = self.connecting.remove(&sid) {
                    self.actions.push_back(Action::Close { conn });
                }
            } else if p.internal {
                if p.hdr.txn_type == OpCode::CloseSession.code() {
                    // An expiry: try again after one tick.
                    self.db.expiry_mut().reopen(sid, 0, now.mono_ms());
                }
            } else if let Some(w) = self.queues.complete_write(sid, p.hdr.cxid) {
                if w.op == OpCode::CloseSession {
                    let t = self.db.sessions().timeout_ms(sid).unwrap_or(0);
                    self.db.expiry_mut().reopen(sid, t, now.mono_ms());
                }
                self.reply(w.conn, ReplyHeader { xid: w.cxid, zxid: base, err }, &Body::Empty);
                self.run_ready_reads(now, sid);
            }
        }
        self.actions.push_back(Action::ResumeLog);
    }

    pub(super) fn commit_ready(&mut self, now: Now) {
        let tell_followers = matches!(self.role, Role::Leader { .. });
        while let Some(p) = self.proposer.pop_committed() {
            let zxid = p.hdr.zxid;
            if tell_followers && !self.commit_reconfig(zxid) {
                self.actions.push_back(Action::Commit { zxid });
            }
            self.apply(now, p);
            // A learner's sync is answered right after the commit it waited for, before any
            // later one, as Apache's leader does: an Apache learner matches the commits of its
            // forwarded writes and the answers to its syncs against one queue, in the order it
            // sent them, and a later write's COMMIT arriving before the SYNC it sent first is
            // taken for another server's write; its client is never answered, nor is any client
            // of that learner after it.
            self.answer_syncs_through(zxid);
        }
        self.answer_syncs_through(self.proposer.committed());
    }

    /// Leader: SYNC to every learner whose forwarded sync waited for `zxid` or less.
    fn answer_syncs_through(&mut self, zxid: i64) {
        while self.syncs_waiting.front().is_some_and(|&(after, _)| after <= zxid) {
            if let Some((_, to)) = self.syncs_waiting.pop_front() {
                self.actions.push_back(Action::SyncReady { to });
            }
        }
    }

    /// Applies a committed transaction: watch events first, then the reply.
    pub(super) fn apply(&mut self, now: Now, p: Proposal) {
        // Commits come in zxid order: the proposer pops them so, and a learner's machine checks
        // its leader's order before any reaches here (a hole or a repeat disconnects it).
        assert!(
            p.hdr.zxid > self.db.last_applied_zxid(),
            "commit 0x{:x} applied after 0x{:x}: commits are applied in zxid order",
            p.hdr.zxid,
            self.db.last_applied_zxid()
        );
        let applied = self.db.apply(&p.hdr, &p.txn);
        if let (Some(want), Some(got)) = (&p.digest, self.db.tree_digest()) {
            if self.check_digest(now, &p.hdr, want, got) {
                // The server left its role: nothing more is answered from this tree.
                return;
            }
        }
        if let Some(s) = self.snapshots.as_mut() {
            if let Some(pace) = s.applied(now.mono_ms()) {
                info!(
                    "writes again: the snapshot under way is written at up to {:.1} MB/s",
                    pace as f64 / 1e6
                );
                self.actions.push_back(Action::Snapshot(SnapJob::Pace(pace)));
            }
        }
        for d in applied.events {
            self.deliver_event(d.watcher, &d.event, d.acl.as_deref().map(|v| v.as_slice()));
        }
        let zxid = self.db.last_applied_zxid();
        let sid = p.hdr.client_id;
        if let Outcome::SessionCreated = applied.outcome {
            // Its expiry starts now, on this server's clock.
            self.db.expiry_mut().touch(sid, now.mono_ms());
            if let Some((conn, timeout_ms)) = self.connecting.remove(&sid) {
                if self.conns.contains(conn) {
                    self.bind(conn, sid);
                    let pw = Bytes::copy_from_slice(&zk_tree::session_password(sid));
                    self.send_connect_response(conn, timeout_ms, sid, pw);
                    debug!("session 0x{sid:x} established");
                }
            }
            return;
        }
        let closed = matches!(applied.outcome, Outcome::SessionClosed);
        if !p.internal {
            if let Some(w) = self.complete_queued_write(sid, p.hdr.cxid) {
                let (err, mut body) = write_reply(w.op, &applied.outcome);
                if let (OpCode::Reconfig, Body::Stat(stat)) = (w.op, &body) {
                    // A reconfig answers with the configuration it installed and its stat.
                    let data = match &p.txn {
                        Txn::SetData(t) => t.data.clone(),
                        _ => None,
                    };
                    body = Body::Data(data, stat.clone());
                }
                let latency = Duration::from_micros(now.mono_us.saturating_sub(w.received_us));
                self.note_answered(w.conn, w.op, w.cxid, zxid, latency, now);
                self.reply(w.conn, ReplyHeader { xid: w.cxid, zxid, err: err.code() }, &body);
            }
        }
        if closed {
            self.session_gone(sid);
        } else if !p.internal {
            self.run_ready_reads(now, sid);
        }
    }

    /// Compares the tree digest after applying `hdr`'s txn with the one its proposal carried, as
    /// Apache's `compareDigest` does: a mismatch means this tree and the leader's prediction
    /// differ. Another digest version is not compared. Returns true when the server left its
    /// role for it.
    ///
    /// A learner still syncing (Down) does not compare each pair: after a SNAP streamed while
    /// the leader went on committing (a fuzzy snapshot, as Apache's are), the pairs that
    /// follow pass through trees the leader never had, and only the last is comparable. The
    /// last pair's digest is kept and checked when the sync ends ([`Self::check_sync_digest`]).
    fn check_digest(&mut self, now: Now, hdr: &TxnHeader, want: &TxnDigest, got: i64) -> bool {
        if want.version != zk_tree::digest::DIGEST_VERSION {
            return false;
        }
        if self.role == Role::Down {
            self.sync_digest = Some((hdr.zxid, want.clone()));
            return false;
        }
        if want.tree_digest == got {
            return false;
        }
        self.diverged(now, hdr.zxid, want.tree_digest, got, OpCode::from_i32(hdr.txn_type))
    }

    /// A learner's sync ended: its tree must be the one the last pair's digest predicted.
    pub(super) fn check_sync_digest(&mut self, now: Now) {
        let Some((zxid, want)) = self.sync_digest.take() else { return };
        let Some(got) = self.db.tree_digest() else { return };
        if zxid == self.db.last_applied_zxid() && want.tree_digest != got {
            self.diverged(now, zxid, want.tree_digest, got, None);
        }
    }

    /// This tree is not the one the ensemble agreed on: counted, and the server leaves its
    /// role (the replica rebuilds the tree from the snapshot and log on disk, a snapshot whose
    /// recorded digest does not check out not loaded, and syncs again; a repeated divergence
    /// asks the leader for a SNAP). A standalone server keeps no digest.
    fn diverged(&mut self, now: Now, zxid: i64, want: i64, got: i64, op: Option<OpCode>) -> bool {
        self.stats.digest_mismatches += 1;
        if !matches!(self.role, Role::Leader { .. } | Role::Learner { .. }) || self.stopped {
            warn!("tree digest mismatch at zxid 0x{zxid:x} ({} so far)", self.stats.digest_mismatches);
            return false;
        }
        // A budget of rebuilds: a divergence that persists through them (its source is not this
        // server's disk, or a leader ignores the request for a SNAP) is counted and logged, and
        // the server serves on, as Apache's do, rather than leave its role for ever.
        let ms = now.mono_ms();
        while self.divergences.front().is_some_and(|&t| ms.saturating_sub(t) > DIVERGENCE_WINDOW_MS) {
            self.divergences.pop_front();
        }
        if self.divergences.len() >= DIVERGENCE_REBUILDS_MAX {
            error!(
                "tree digest mismatch at zxid 0x{zxid:x} ({op:?}): the proposal says {want:x}, this tree has \
                 {got:x}; {} rebuilds in the last {} minutes did not heal it: serving on",
                self.divergences.len(),
                DIVERGENCE_WINDOW_MS / 60_000
            );
            return false;
        }
        self.divergences.push_back(ms);
        error!(
            "tree digest mismatch at zxid 0x{zxid:x} ({op:?}): the proposal says {want:x}, this tree has \
             {got:x}; leaving the {:?} role to rebuild the tree from disk and sync again",
            self.role
        );
        self.stats.digest_resyncs += 1;
        let me = self.proposer.voters().me();
        // What its clients saw came from a tree the ensemble did not agree on: none is kept.
        self.drop_kept();
        self.drop_clients();
        self.set_role(Role::Down, VoterSet::solo(me), None, now);
        self.actions.push_back(Action::StepDown { reason: "tree digest mismatch".into(), diverged: true });
        true
    }

    /// The session's closeSession was applied: requests still queued behind it are answered
    /// SESSIONEXPIRED (as Apache answers a closing session), then its connection is closed.
    pub(super) fn session_gone(&mut self, sid: SessionId) {
        self.owners.remove(&sid);
        let last = self.db.last_applied_zxid();
        for r in self.queues.remove_session(sid) {
            let err = ErrorCode::SessionExpired.code();
            self.reply(r.conn, ReplyHeader { xid: r.xid, zxid: last, err }, &Body::Empty);
        }
        if let Some(conn) = self.conns.unbind_session(sid) {
            // Kept while down (a sync's commits apply meanwhile): no longer.
            self.forget_kept(conn);
            self.actions.push_back(Action::Close { conn });
        }
    }
}
