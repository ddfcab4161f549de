//! Restoring a standalone server's tree from a snapshot (the AdminServer's `restore`, Apache
//! 3.9's command).
//!
//! Apache swaps the tree in memory and keeps numbering from its old counter; the restored tree
//! reaches the disk only with the next snapshot, so a crash before it loses the restore (and the
//! operator is told to move the data directory aside first). Here the restore is a decision of
//! the core, made once nothing proposed before it is still on its way to the log:
//!
//! 1. [`Event::Restore`]: every client connection is closed (their queued requests dropped), no
//!    connection is taken and nothing is proposed (session expiry, container reaping) until it
//!    is done.
//! 2. Once every proposal is committed (standalone: durable), the restored tree takes the old
//!    one's place as of the first zxid never used (one past every zxid the server used, and
//!    past the snapshot's), so no zxid is used twice, no client has seen a zxid past the
//!    server's, and no snapshot file of the old history has its name; the epoch stays (a data
//!    directory carried to an ensemble keeps its epoch files right); a snapshot under way of the
//!    old tree is abandoned. Nothing expires, is reaped or is snapshotted until the end.
//! 3. [`Action::InstallRestored`]: the driver writes the tree whole as the snapshot at that
//!    zxid, then resets the log to start after it (the path a learner's received snapshot
//!    takes). A crash before the snapshot is written leaves the old state; after it, a start
//!    loads the restored snapshot and fits the older log to it.
//! 4. [`Event::LogReset`]: the reset is durable; the restored sessions' timers start, clients
//!    are served again and the restore is answered as done. Nothing is logged before (a record
//!    logged beside a reset under way could land in the old log).
//!
//! In an ensemble it is refused: one member's tree replaced under its peers would diverge from
//! them (an ensemble is restored offline, each member from the same data directory).

use super::*;
use crate::view::RestoreAnswer;

/// A restore under way.
#[derive(Debug)]
pub(super) enum Restoring {
    /// Waiting for the proposals made before it to be durable: the tree to put in place.
    Waiting(Box<Database>),
    /// In place as of `zxid`; waiting for the driver to make it durable.
    Installing {
        /// The zxid the snapshot said it was at.
        snapshot_zxid: i64,
        /// The zxid the tree is in place as of.
        zxid: i64,
    },
}

impl ServerCore {
    /// [`Event::Restore`].
    pub(super) fn on_restore(&mut self, now: Now, db: Box<Database>) {
        let refused = if self.role != Role::Standalone {
            Some(
                "a restore replaces a standalone server's tree; an ensemble member's would diverge \
                 from its peers' (restore an ensemble offline: stop every member and give each the \
                 same data directory)",
            )
        } else if self.restoring.is_some() {
            Some("a restore is under way")
        } else {
            let limit = self.db.memory_soft_limit_bytes();
            (limit != 0 && db.tree_memory_bytes() > limit)
                .then_some("the restored tree is larger than zkrs.treeMemorySoftLimitBytes")
        };
        if let Some(why) = refused {
            info!("restore refused: {why}");
            self.restore_answer = Some(RestoreAnswer::Refused(why));
            return;
        }
        info!(
            "restore: closing every client connection, then putting in place a tree of {} nodes at \
             zxid {:#x} once the {} proposals in flight are durable",
            db.node_count(),
            db.last_applied_zxid(),
            self.proposer.in_flight()
        );
        self.drop_clients();
        self.restoring = Some(Restoring::Waiting(db));
        self.restore_answer = Some(RestoreAnswer::Pending);
        self.finish_restore(now);
    }

    /// Puts a waiting restore's tree in place once nothing proposed before it awaits the log.
    pub(super) fn finish_restore(&mut self, now: Now) {
        if !matches!(self.restoring, Some(Restoring::Waiting(_))) || self.proposer.in_flight() != 0 {
            return;
        }
        let Some(Restoring::Waiting(mut db)) = self.restoring.take() else { return };
        let snapshot_zxid = db.last_applied_zxid();
        let top = snapshot_zxid
            .max(self.proposer.last_zxid().to_i64())
            .max(self.db.last_applied_zxid())
            .max(self.log_durable);
        let Some(zxid) = top.checked_add(1) else {
            // Unreachable in practice (the whole zxid space used); the old tree stays, and
            // clients come back.
            warn!("restore refused: no zxid is left above {top:#x}");
            self.restore_answer = Some(RestoreAnswer::Refused("no zxid is left above the server's"));
            return;
        };
        db.advance_to(zxid);
        let voters = self.proposer.voters().clone();
        // Standalone to standalone: no connection is left to close; the database is replaced,
        // a snapshot under way abandoned, the proposer started at `zxid` and every session of
        // the restored tree given a fresh timeout.
        self.set_role(Role::Standalone, voters, Some(*db), now);
        self.actions.push_back(Action::InstallRestored { zxid });
        info!("restore: the tree of the snapshot at {snapshot_zxid:#x} is in place as of zxid {zxid:#x}; writing it");
        self.restoring = Some(Restoring::Installing { snapshot_zxid, zxid });
    }

    /// [`Event::LogReset`]: the log starts after `zxid`, durably. A restore installing its tree
    /// as of `zxid` is done: clients are served again.
    pub(super) fn on_log_reset(&mut self, now: Now, zxid: i64) {
        match self.restoring {
            Some(Restoring::Installing { snapshot_zxid, zxid: z }) if z == zxid => {
                self.restoring = None;
                // The sessions' timeouts count from now: none expired while the tree was written.
                let sessions: Vec<(SessionId, i32)> = self.db.sessions().iter().collect();
                self.db.expiry_mut().restart_all(sessions.into_iter(), now.mono_ms());
                info!("restore: done; serving the tree of the snapshot at {snapshot_zxid:#x} as of zxid {zxid:#x}");
                self.restore_answer = Some(RestoreAnswer::Restored { snapshot_zxid, zxid });
            }
            _ => warn!("the log was reset to {zxid:#x}, which no restore asked for; ignored"),
        }
    }

    /// A restore's install failed (the log could not be reset): the server stops; a start loads
    /// the restored snapshot, already durable, and fits the log to it.
    pub(super) fn restore_failed(&mut self, why: &str) -> bool {
        if matches!(self.restoring, Some(Restoring::Installing { .. })) {
            self.stop(format!("the restore's log reset failed ({why}); a restart finishes it"));
            return true;
        }
        false
    }

    /// Whether a restore is under way (no client is served and nothing proposed meanwhile).
    pub fn restore_pending(&self) -> bool {
        self.restoring.is_some()
    }

    /// What became of the last [`Event::Restore`], taken once when final; a pending one is
    /// answered as such and kept.
    pub fn take_restore_answer(&mut self) -> Option<RestoreAnswer> {
        match self.restore_answer {
            Some(RestoreAnswer::Pending) => Some(RestoreAnswer::Pending),
            _ => self.restore_answer.take(),
        }
    }
}
