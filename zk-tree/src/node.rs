//! One znode: data, shared ACL, persisted stat and child names; and how its owner field is read.

use crate::acl::AclRef;
use crate::java;
use bytes::Bytes;
use std::collections::HashMap;
use zk_proto::{Stat, StatPersisted};

/// `ephemeralOwner` of a container node (Long.MIN_VALUE).
pub const CONTAINER_OWNER: i64 = i64::MIN;
/// High byte marking an extended owner (TTL).
const EXTENDED_MASK: i64 = 0xff00_0000_0000_0000_u64 as i64;
/// Bits reserved for the extended feature kind (0 = TTL).
const RESERVED_BITS_MASK: i64 = 0x00ff_ff00_0000_0000;
/// Largest TTL, ms (0xFF_FFFF_FFFF, about 34 years).
pub const MAX_TTL_MS: i64 = 0xff_ffff_ffff;

/// What a node's `ephemeralOwner` says it is (Apache's EphemeralType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKind {
    /// Persistent (owner 0).
    Void,
    /// Ephemeral of a session.
    Normal,
    /// Container.
    Container,
    /// TTL node (only when extended types are enabled).
    Ttl,
}

/// Classifies an owner. Without extended types, TTL-looking owners count as sessions, as in Apache.
/// An extended owner with unknown feature bits is treated as a session owner too (Apache throws).
pub fn owner_kind(owner: i64, extended: bool) -> OwnerKind {
    if extended && owner & EXTENDED_MASK == EXTENDED_MASK && owner != CONTAINER_OWNER {
        if owner & RESERVED_BITS_MASK == 0 {
            return OwnerKind::Ttl;
        }
        return OwnerKind::Normal;
    }
    if owner == CONTAINER_OWNER {
        OwnerKind::Container
    } else if owner == 0 {
        OwnerKind::Void
    } else {
        OwnerKind::Normal
    }
}

/// The owner stored for a TTL node.
pub fn ttl_owner(ttl: i64) -> i64 {
    EXTENDED_MASK | ttl
}

/// The TTL carried by a TTL owner.
pub fn ttl_of(owner: i64) -> i64 {
    owner & !(EXTENDED_MASK | RESERVED_BITS_MASK)
}

/// The child names of a node, with what Java's HashSet order depends on: each name's insertion
/// rank and the largest size the set reached (its table capacity never shrinks).
#[derive(Debug, Default, Clone)]
pub struct Children {
    /// Name (last path segment) -> insertion rank.
    names: HashMap<Box<str>, u32>,
    next_seq: u32,
    max_len: u32,
}

impl Children {
    fn insert(&mut self, name: &str) -> bool {
        if self.names.contains_key(name) {
            return false;
        }
        self.names.insert(name.into(), self.next_seq);
        self.next_seq = self.next_seq.wrapping_add(1);
        self.max_len = self.max_len.max(self.names.len() as u32);
        true
    }

    /// Names in the order Apache lists them (`new HashSet<>(8)` grown to the largest size seen).
    pub fn ordered(&self) -> Vec<String> {
        let cap = java::capacity_for(self.max_len as usize, 8);
        let mut v: Vec<(&str, u64)> = self.names.iter().map(|(n, s)| (&**n, *s as u64)).collect();
        java::hash_order(&mut v, cap);
        v.into_iter().map(|(n, _)| n.to_string()).collect()
    }

    /// Names in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.names.keys().map(|k| &**k)
    }
}

/// A znode as stored.
#[derive(Debug, Clone)]
pub struct Node {
    /// Data; None is kept apart from empty.
    pub data: Option<Bytes>,
    /// Shared ACL.
    pub acl: AclRef,
    /// Persisted stat (cversion counts creates).
    pub stat: StatPersisted,
    /// Child names; None until the first child arrives, to keep leaves small.
    pub children: Option<Box<Children>>,
}

impl Node {
    /// A new node.
    pub fn new(data: Option<Bytes>, acl: AclRef, stat: StatPersisted) -> Self {
        Node { data, acl, stat, children: None }
    }

    /// Number of children.
    pub fn num_children(&self) -> usize {
        self.children.as_ref().map_or(0, |c| c.names.len())
    }

    /// Adds a child name; false if present.
    pub fn add_child(&mut self, name: &str) -> bool {
        self.children.get_or_insert_with(Default::default).insert(name)
    }

    /// Removes a child name; false if absent.
    pub fn remove_child(&mut self, name: &str) -> bool {
        self.children.as_mut().is_some_and(|c| c.names.remove(name).is_some())
    }

    /// Whether `name` is a child.
    pub fn has_child(&self, name: &str) -> bool {
        self.children.as_ref().is_some_and(|c| c.names.contains_key(name))
    }

    /// Children in Apache's listing order.
    pub fn child_list(&self) -> Vec<String> {
        self.children.as_ref().map_or_else(Vec::new, |c| c.ordered())
    }

    /// Data length as clients see it (0 for null).
    pub fn data_len(&self) -> i32 {
        self.data.as_ref().map_or(0, |d| d.len() as i32)
    }

    /// The stat clients see: cversion = stored*2 - numChildren, containers' and TTL nodes' owner 0.
    pub fn client_stat(&self, extended: bool) -> Stat {
        let s = &self.stat;
        let n = self.num_children() as i32;
        let owner =
            if owner_kind(s.ephemeral_owner, extended) == OwnerKind::Normal { s.ephemeral_owner } else { 0 };
        Stat {
            czxid: s.czxid,
            mzxid: s.mzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion.wrapping_mul(2).wrapping_sub(n),
            aversion: s.aversion,
            ephemeral_owner: owner,
            data_length: self.data_len(),
            num_children: n,
            pzxid: s.pzxid,
        }
    }
}

/// A fresh node's persisted stat (`DataTree.createStat`).
pub fn new_stat(zxid: i64, time: i64, owner: i64) -> StatPersisted {
    StatPersisted {
        czxid: zxid,
        mzxid: zxid,
        ctime: time,
        mtime: time,
        version: 0,
        cversion: 0,
        aversion: 0,
        ephemeral_owner: owner,
        pzxid: zxid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn owner_kinds() {
        assert_eq!(owner_kind(0, true), OwnerKind::Void);
        assert_eq!(owner_kind(5, true), OwnerKind::Normal);
        assert_eq!(owner_kind(CONTAINER_OWNER, false), OwnerKind::Container);
        assert_eq!(owner_kind(CONTAINER_OWNER, true), OwnerKind::Container);
        assert_eq!(owner_kind(ttl_owner(1000), true), OwnerKind::Ttl);
        assert_eq!(owner_kind(ttl_owner(1000), false), OwnerKind::Normal);
        assert_eq!(ttl_of(ttl_owner(MAX_TTL_MS)), MAX_TTL_MS);
    }

    #[test]
    fn client_stat_translation() {
        let mut n = Node::new(None, Arc::new(vec![]), new_stat(5, 10, CONTAINER_OWNER));
        n.stat.cversion = 3;
        n.add_child("a");
        let s = n.client_stat(true);
        assert_eq!(s.cversion, 5);
        assert_eq!(s.num_children, 1);
        assert_eq!(s.ephemeral_owner, 0);
        assert_eq!(s.data_length, 0);
    }

    #[test]
    fn child_order_matches_java_hashset() {
        // Orders printed by a JVM for `new HashSet<>(8)` filled in this order.
        let mut n = Node::new(None, Arc::new(vec![]), new_stat(1, 1, 0));
        for c in ["zookeeper", "a", "b", "c", "foo", "bar", "x1"] {
            n.add_child(c);
        }
        assert_eq!(n.child_list(), ["a", "b", "bar", "c", "zookeeper", "foo", "x1"]);
        let mut m = Node::new(None, Arc::new(vec![]), new_stat(1, 1, 0));
        for i in 0..20 {
            m.add_child(&format!("n{i}"));
        }
        let want: Vec<String> = "n0 n1 n2 n3 n4 n5 n6 n7 n8 n9 n10 n12 n11 n14 n13 n16 n15 n18 n17 n19"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(m.child_list(), want);
    }
}
