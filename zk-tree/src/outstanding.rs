//! Outstanding changes: what prepped-but-not-yet-applied txns will do to each path (Apache's
//! outstandingChanges / ChangeRecord), so that prep validates against the future tree.

use crate::acl::AclRef;
use hashbrown::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use zk_proto::StatPersisted;

/// The state a path will have once earlier txns apply.
#[derive(Debug, Clone)]
pub struct ChangeRecord {
    /// Txn that produces this state.
    pub zxid: i64,
    /// None once the node is (to be) deleted.
    pub stat: Option<StatPersisted>,
    /// Children it will have.
    pub child_count: i32,
    /// Its ACL.
    pub acl: AclRef,
    /// The node's digest in this state (0 once deleted, and whenever the tree keeps no digest).
    pub digest: i64,
    /// The tree's digest once this record's change is applied (with every record before it).
    pub tree_digest: i64,
}

/// Records in prep order, with the newest per path at the back of that path's queue.
///
/// A busy parent (every create under one directory) gets a record per txn in flight, so its
/// queue can hold thousands: both ends are O(1), and a path's name is allocated once for as long
/// as it has records, shared by the global order and the per-path map.
#[derive(Debug, Default)]
pub struct Outstanding {
    order: VecDeque<(i64, Arc<str>)>,
    /// foldhash (seeded per map): SipHash on this per-write path lookup showed in profiles.
    by_path: HashMap<Arc<str>, VecDeque<ChangeRecord>>,
}

impl Outstanding {
    /// The newest record for `path`.
    pub fn get(&self, path: &str) -> Option<&ChangeRecord> {
        self.by_path.get(path).and_then(|v| v.back())
    }

    /// The record added last.
    pub fn last(&self) -> Option<&ChangeRecord> {
        let (_, path) = self.order.back()?;
        self.get(path)
    }

    /// Adds a record (`addChangeRecord`).
    pub fn add(&mut self, path: &str, rec: ChangeRecord) {
        let zxid = rec.zxid;
        if let Some((key, queue)) = self.by_path.get_key_value_mut(path) {
            queue.push_back(rec);
            self.order.push_back((zxid, Arc::clone(key)));
        } else {
            let key: Arc<str> = path.into();
            self.order.push_back((zxid, Arc::clone(&key)));
            self.by_path.insert(key, VecDeque::from([rec]));
        }
    }

    /// Drops every record of txn `zxid` added last (a failed multi's rollback).
    pub fn rollback(&mut self, zxid: i64) {
        while let Some((z, _)) = self.order.back() {
            if *z != zxid {
                break;
            }
            let Some((_, path)) = self.order.pop_back() else { break };
            if let Some(queue) = self.by_path.get_mut(&*path) {
                queue.pop_back();
                if queue.is_empty() {
                    self.by_path.remove(&*path);
                }
            }
        }
    }

    /// Drops every record of txns after `zxid` (proposals taken back, e.g. refused by a full
    /// log): prep then sees the state as of `zxid` again.
    pub fn rollback_after(&mut self, zxid: i64) {
        while let Some(&(z, _)) = self.order.back() {
            if z <= zxid {
                break;
            }
            self.rollback(z);
        }
    }

    /// Drops records of txns up to `zxid` once applied.
    pub fn applied(&mut self, zxid: i64) {
        while let Some((z, _)) = self.order.front() {
            if *z > zxid {
                break;
            }
            let Some((_, path)) = self.order.pop_front() else { break };
            if let Some(queue) = self.by_path.get_mut(&*path) {
                queue.pop_front();
                if queue.is_empty() {
                    self.by_path.remove(&*path);
                }
            }
        }
    }

    /// Records oldest first, with their paths (closeSession walks them).
    pub fn iter_in_order(&self) -> impl Iterator<Item = (&str, &ChangeRecord)> {
        // Each path's queue holds its records oldest first; walk the global order and take the
        // k-th record of that path for its k-th appearance.
        let mut seen: HashMap<&str, usize> = HashMap::default();
        self.order.iter().filter_map(move |(_, p)| {
            let k = seen.entry(&**p).or_insert(0);
            let r = self.by_path.get(&**p).and_then(|v| v.get(*k));
            *k += 1;
            r.map(|r| (&**p, r))
        })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(zxid: i64, alive: bool) -> ChangeRecord {
        ChangeRecord {
            zxid,
            stat: alive.then(StatPersisted::default),
            child_count: 0,
            acl: Arc::new(vec![]),
            digest: 0,
            tree_digest: zxid,
        }
    }

    #[test]
    fn newest_wins_and_applied_drops_oldest() {
        let mut o = Outstanding::default();
        o.add("/a", rec(1, true));
        o.add("/a", rec(2, false));
        o.add("/b", rec(2, true));
        assert!(o.get("/a").unwrap().stat.is_none());
        assert_eq!(o.last().map(|r| r.tree_digest), Some(2));
        o.applied(1);
        assert_eq!(o.get("/a").unwrap().zxid, 2);
        let order: Vec<_> = o.iter_in_order().map(|(p, r)| (p.to_string(), r.zxid)).collect();
        assert_eq!(order, vec![("/a".to_string(), 2), ("/b".to_string(), 2)]);
        o.applied(2);
        assert!(o.get("/a").is_none());
        assert_eq!(o.len(), 0);
    }

    #[test]
    fn rollback_restores_previous() {
        let mut o = Outstanding::default();
        o.add("/a", rec(1, true));
        o.add("/a", rec(2, false));
        o.add("/c", rec(2, true));
        o.rollback(2);
        assert_eq!(o.get("/a").unwrap().zxid, 1);
        assert!(o.get("/c").is_none());
        assert_eq!(o.len(), 1);
    }
}
