//! The memory brake: a soft limit on the tree's own memory (zoo.cfg's
//! `zkrs.treeMemorySoftLimitBytes`), in the manner of ClickHouse Keeper's
//! `max_memory_usage_soft_limit`. Past it, prep refuses the writes that would grow the tree
//! (creates, setData with longer data, a multi holding either) with [`MEMORY_BRAKE_ERROR`];
//! reads, deletes and shrinking writes go on, and once deletes bring the tree back under the
//! limit growing writes are taken again.
//!
//! What "memory" means here, and why. The measure is the tree's accounted bytes: Apache's
//! approximate data size (each node's path and data) plus [`NODE_OVERHEAD_BYTES`] a node for the
//! slot, index and child-set entries, plus the growth of every write prepped but not yet applied.
//! Not the process's RSS, for three reasons:
//! - the brake's only lever is refusing writes that grow the tree, so it must measure what those
//!   writes grow and what deletes shrink; RSS also holds connections, watches, outboxes and
//!   allocator slack that no refused write gives back, and the allocator rarely returns freed
//!   pages, so an RSS brake, once on, could stay on after the tree is emptied;
//! - the decision is a function of the replicated tree and the prep sequence, so it is
//!   deterministic: the seeded simulation and a replay decide the same, and a test can trip it
//!   at an exact size;
//! - the tree is what grows without bound: everything else a connection or session holds is
//!   bounded by the server's other limits (`maxCnxns`, `globalOutstandingLimit`, the outbox).
//!
//! In an ensemble only the leader preps, so only the leader refuses, before proposing: the
//! refusal is a failed write (an `ErrorTxn`, as for any other failed check), which followers
//! apply like any other and never refuse themselves; a learner's client gets its answer at
//! commit, in order with its other writes. Writes under `/zookeeper/` (quotas, the ensemble's
//! configuration) are never refused, so an operator can always reconfigure.

use std::collections::VecDeque;
use zk_proto::ErrorCode;

/// What a refused write gets. SYSTEMERROR (-1), because every client knows it: kazoo (2.8)
/// raises `SystemZookeeperError`, Apache's Java client `SystemErrorException`, its C client
/// `ZSYSTEMERROR`, and none of them retries it on its own. ClickHouse Keeper's own code
/// (ZOUTOFMEMORY, -10) is known to no Apache client; Apache's QUOTAEXCEEDED (-125) and
/// THROTTLEDOP (-127) are unknown to kazoo, which fails its connection on a code it cannot
/// map, and Debian's 3.8 C client has no QUOTAEXCEEDED. The server's log line and its metrics
/// say which limit refused the write.
pub const MEMORY_BRAKE_ERROR: ErrorCode = ErrorCode::SystemError;

/// Bytes a znode costs beyond its path and data: its slot in the node slab, its path-index and
/// child-set entries, and the allocator's rounding of its buffer. The live-heap bench measured
/// about 236 bytes a znode of 100 data bytes (bench/RESULTS.md, 2026-11-25): about 120 beyond
/// its path and data.
pub const NODE_OVERHEAD_BYTES: u64 = 120;

/// The growth of prepped-but-unapplied txns, by zxid (prep order), so that writes in flight
/// count against the limit before they are applied: the limit is overshot by at most one write.
/// Shrinking is not counted ahead: a delete frees its bytes when it applies.
///
/// Bounded as the outstanding changes are: one entry per growing txn in flight, each dropped at
/// its apply or when prep takes it back.
#[derive(Debug, Default)]
pub(crate) struct PendingGrowth {
    by_zxid: VecDeque<(i64, u64)>,
    total: u64,
}

impl PendingGrowth {
    /// Txn `zxid` will grow the tree by `bytes` (added to what its earlier ops, in a multi, grow).
    pub(crate) fn add(&mut self, zxid: i64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.total = self.total.saturating_add(bytes);
        match self.by_zxid.back_mut() {
            Some((z, b)) if *z == zxid => *b = b.saturating_add(bytes),
            _ => self.by_zxid.push_back((zxid, bytes)),
        }
    }

    /// Drops the growth of txns prepped after `zxid` (a failed multi's own with `zxid - 1`,
    /// proposals taken back).
    pub(crate) fn rollback_after(&mut self, zxid: i64) {
        while let Some(&(z, b)) = self.by_zxid.back() {
            if z <= zxid {
                break;
            }
            self.by_zxid.pop_back();
            self.total = self.total.saturating_sub(b);
        }
    }

    /// Drops the growth of txns up to `zxid`, applied: the tree counts it now.
    pub(crate) fn applied(&mut self, zxid: i64) {
        while let Some(&(z, b)) = self.by_zxid.front() {
            if z > zxid {
                break;
            }
            self.by_zxid.pop_front();
            self.total = self.total.saturating_sub(b);
        }
    }

    /// Bytes in flight.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_counted_until_applied_or_taken_back() {
        let mut p = PendingGrowth::default();
        p.add(1, 100);
        p.add(2, 10);
        p.add(2, 5);
        p.add(3, 0);
        p.add(4, 7);
        assert_eq!(p.total(), 122);
        p.rollback_after(2);
        assert_eq!(p.total(), 115);
        p.applied(1);
        assert_eq!(p.total(), 15);
        p.applied(2);
        assert_eq!(p.total(), 0);
        assert!(p.by_zxid.is_empty());
    }
}
