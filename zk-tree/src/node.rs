//! One znode: data, shared ACL, persisted stat and child names; and how its owner field is read.

use crate::acl::AclRef;
use crate::java;
use crate::thin::ThinBytes;
use bytes::Bytes;
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

/// Slot number of a node in the tree's node table.
pub type Slot = u32;

fn slot_hash(s: Slot) -> u64 {
    // Slots are dense small integers chosen by us, so a multiplicative hash spreads them well.
    (s as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A node's children as slot numbers (4 bytes each: names live once, in the child's path), plus
/// what Java's HashSet order depends on: the largest size reached (its capacity never shrinks)
/// and the next insertion rank (each child keeps its own in [`NodeStat::rank`]).
#[derive(Debug, Default, Clone)]
pub struct Children {
    set: hashbrown::HashTable<Slot>,
    next_rank: u32,
    max_len: u32,
}

impl Children {
    /// Adds a child; returns the insertion rank it gets.
    pub fn insert(&mut self, slot: Slot) -> u32 {
        self.set.insert_unique(slot_hash(slot), slot, |s| slot_hash(*s));
        let rank = self.next_rank;
        self.next_rank = self.next_rank.wrapping_add(1);
        self.max_len = self.max_len.max(self.set.len() as u32);
        rank
    }

    /// Adds a child that already has an insertion rank (a snapshot being loaded). Later plain
    /// inserts get ranks above every rank seen, so a restored order is never shuffled.
    pub fn insert_ranked(&mut self, slot: Slot, rank: u32) {
        self.set.insert_unique(slot_hash(slot), slot, |s| slot_hash(*s));
        self.next_rank = self.next_rank.max(rank.wrapping_add(1));
        self.max_len = self.max_len.max(self.set.len() as u32);
    }

    /// Adds children that already have their insertion ranks, each `(slot << 32) | rank` (a
    /// snapshot being loaded links all of a parent's children at once): the same set as
    /// [`Children::insert_ranked`] of each in turn. The table is sized once, and a large one is
    /// filled in the order of its buckets, so that a parent of millions walks the table's memory
    /// once instead of missing the cache on every child (and rehashing at every doubling).
    /// `members` is left in some order.
    pub(crate) fn extend_ranked(&mut self, members: &mut Vec<u64>) {
        self.set.reserve(members.len(), |s| slot_hash(*s));
        if members.len() >= crate::nodes::BULK_SORT_MIN && self.set.is_empty() {
            if let Some(bits) = crate::nodes::bucket_bits(self.set.capacity()) {
                let mask = (1u64 << bits) - 1;
                crate::child_names::radix_sort(members, bits, |m| slot_hash((m >> 32) as Slot) & mask);
            }
        }
        for &m in members.iter() {
            self.insert_ranked((m >> 32) as Slot, m as u32);
        }
    }

    /// What the iteration order depends on besides the members: (next insertion rank, largest
    /// size reached).
    pub fn order_meta(&self) -> (u32, u32) {
        (self.next_rank, self.max_len)
    }

    /// An empty set that remembers a saved (next insertion rank, largest size reached).
    pub fn with_order_meta(next_rank: u32, max_len: u32) -> Self {
        Children { set: hashbrown::HashTable::new(), next_rank, max_len }
    }

    /// Removes a child; false if absent.
    pub fn remove(&mut self, slot: Slot) -> bool {
        match self.set.find_entry(slot_hash(slot), |s| *s == slot) {
            Ok(e) => {
                e.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Number of children.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Children in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        self.set.iter().copied()
    }

    /// Table capacity of Apache's `new HashSet<>(8)` after its largest size.
    pub fn java_capacity(&self) -> usize {
        java::capacity_for(self.max_len as usize, 8)
    }
}

/// Header flag: the data is null (kept apart from empty).
const NULL_DATA: u64 = 1;
/// Header flag: an `ephemeralOwner` other than 0 follows the header.
const HAS_OWNER: u64 = 2;
/// Header flag: the node table holds a child set for this node (see
/// [`crate::nodes::NodeTable::children`]); without it the node has no children.
const HAS_CHILDREN: u64 = 4;
/// Header flag: the data was changed since the create (mzxid, mtime and version follow the owner
/// in the buffer); without it they are the czxid, the ctime and 0.
const MODIFIED: u64 = 8;
/// Bits of the header below the path length.
const HEAD_SHIFT: u32 = 4;
/// Bytes of the data-change fields when [`MODIFIED`]: mzxid, mtime (8 each), version (4).
const MODIFIED_LEN: usize = 20;

/// The part of a node's persisted stat kept beside its buffer: everything but the
/// `ephemeralOwner` (almost always 0) and the data-change fields (mzxid, mtime, version: equal
/// to czxid, ctime and 0 until a setData, and then packed into the buffer, which a setData
/// rewrites anyway), plus the node's insertion rank in its parent's child set. 36 bytes where
/// [`StatPersisted`] takes 64: most znodes are never changed after their create.
///
/// Packed to an alignment of 4 (no padding after the last field), so that a [`Node`] is 56
/// bytes: its fields are read by value (`n.stat.czxid`), never borrowed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct NodeStat {
    /// Zxid of the create.
    pub czxid: i64,
    /// Create time, ms.
    pub ctime: i64,
    /// Zxid of the last change to the children.
    pub pzxid: i64,
    /// Stored child version (creates counted, as Apache stores it).
    pub cversion: i32,
    /// ACL version.
    pub aversion: i32,
    /// Insertion rank in the parent's child set.
    pub rank: u32,
}

/// The data-change fields of a stat: (mzxid, mtime, version).
type Modified = (i64, i64, i32);

/// The data-change fields to keep in a node's buffer: none while they are what a create gives
/// (the czxid, the ctime and version 0).
fn changed(czxid: i64, ctime: i64, (mzxid, mtime, version): Modified) -> Option<Modified> {
    (mzxid != czxid || mtime != ctime || version != 0).then_some((mzxid, mtime, version))
}

/// A znode as stored: 56 bytes besides its buffer. Its child set, when it has one, is kept by
/// the node table, keyed by slot (most nodes are leaves).
#[derive(Debug, Clone)]
pub struct Node {
    /// One allocation: a header (LEB128 of the path length shifted left by [`HEAD_SHIFT`], with
    /// the [`NULL_DATA`], [`HAS_OWNER`], [`HAS_CHILDREN`] and [`MODIFIED`] flags in the low
    /// bits), the owner (8 bytes, little endian) when [`HAS_OWNER`], mzxid, mtime and version
    /// (little endian) when [`MODIFIED`], the full path, the data. The path is the only copy:
    /// the path index and parents refer to the node by slot.
    buf: ThinBytes,
    /// Shared ACL.
    pub acl: AclRef,
    /// Persisted stat (cversion counts creates) but for the owner and the data-change fields,
    /// and the insertion rank.
    pub stat: NodeStat,
}

/// The header's value and its length in bytes (LEB128, written by [`pack`]).
fn read_head(buf: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    (v, buf.len().min(10))
}

fn pack(
    path: &[u8],
    data: Option<&[u8]>,
    owner: i64,
    has_children: bool,
    modified: Option<Modified>,
) -> Box<[u8]> {
    let d = data.unwrap_or(&[]);
    let mut head = (path.len() as u64) << HEAD_SHIFT;
    if has_children {
        head |= HAS_CHILDREN;
    }
    if data.is_none() {
        head |= NULL_DATA;
    }
    if owner != 0 {
        head |= HAS_OWNER;
    }
    if modified.is_some() {
        head |= MODIFIED;
    }
    let extra = if owner != 0 { 8 } else { 0 } + if modified.is_some() { MODIFIED_LEN } else { 0 };
    let mut buf = Vec::with_capacity(3 + extra + path.len() + d.len());
    loop {
        let b = (head & 0x7f) as u8;
        head >>= 7;
        if head == 0 {
            buf.push(b);
            break;
        }
        buf.push(b | 0x80);
    }
    if owner != 0 {
        buf.extend_from_slice(&owner.to_le_bytes());
    }
    if let Some((mzxid, mtime, version)) = modified {
        buf.extend_from_slice(&mzxid.to_le_bytes());
        buf.extend_from_slice(&mtime.to_le_bytes());
        buf.extend_from_slice(&version.to_le_bytes());
    }
    buf.extend_from_slice(path);
    buf.extend_from_slice(d);
    buf.into_boxed_slice()
}

impl Node {
    /// A new node with the persisted stat `stat` (owner included).
    pub fn new(path: &str, data: Option<&[u8]>, acl: AclRef, stat: StatPersisted) -> Self {
        let (buf, stat) = Node::packed(path, data, stat);
        Node::from_packed(buf, acl, stat)
    }

    /// A node's buffer and stat, made apart from its ACL (a snapshot's nodes are packed on a
    /// thread of their own, ahead of the table they go into; [`Node::from_packed`] finishes them).
    pub(crate) fn packed(path: &str, data: Option<&[u8]>, stat: StatPersisted) -> (Box<[u8]>, NodeStat) {
        let modified = changed(stat.czxid, stat.ctime, (stat.mzxid, stat.mtime, stat.version));
        let buf = pack(path.as_bytes(), data, stat.ephemeral_owner, false, modified);
        let stat = NodeStat {
            czxid: stat.czxid,
            ctime: stat.ctime,
            pzxid: stat.pzxid,
            cversion: stat.cversion,
            aversion: stat.aversion,
            rank: 0,
        };
        (buf, stat)
    }

    /// The node made of what [`Node::packed`] gave and its ACL.
    pub(crate) fn from_packed(buf: Box<[u8]>, acl: AclRef, stat: NodeStat) -> Self {
        Node { buf: ThinBytes::new(buf), acl, stat }
    }

    /// The buffer's bytes.
    #[inline]
    fn bytes(&self) -> &[u8] {
        self.buf.as_slice()
    }

    /// The header's value and length.
    #[inline]
    fn head(&self) -> (u64, usize) {
        match self.bytes().first() {
            // Paths under 16 bytes: a one-byte header.
            Some(&b) if b < 0x80 => (u64::from(b), 1),
            _ => read_head(self.bytes()),
        }
    }

    /// (header flags, where the path starts, where it ends).
    #[inline]
    fn layout(&self) -> (u64, usize, usize) {
        let (head, n) = self.head();
        let start = n
            + if head & HAS_OWNER != 0 { 8 } else { 0 }
            + if head & MODIFIED != 0 { MODIFIED_LEN } else { 0 };
        (head, start, start + (head >> HEAD_SHIFT) as usize)
    }

    /// The path as bytes (what the path index hashes and compares).
    pub fn path_bytes(&self) -> &[u8] {
        let (_, start, end) = self.layout();
        &self.bytes()[start..end]
    }

    /// The full path.
    pub fn path(&self) -> &str {
        // Built from a &str in `new`, so always valid UTF-8.
        std::str::from_utf8(self.path_bytes()).unwrap_or_default()
    }

    /// The data; None is kept apart from empty.
    pub fn data(&self) -> Option<&[u8]> {
        let (head, _, end) = self.layout();
        if head & NULL_DATA != 0 {
            None
        } else {
            Some(&self.bytes()[end..])
        }
    }

    /// The `ephemeralOwner` (0 for a persistent node).
    pub fn owner(&self) -> i64 {
        let (head, n) = self.head();
        if head & HAS_OWNER == 0 {
            return 0;
        }
        self.bytes().get(n..n + 8).and_then(|b| b.try_into().ok()).map_or(0, i64::from_le_bytes)
    }

    /// The data-change fields (mzxid, mtime, version) when the buffer holds them.
    fn modified(&self) -> Option<Modified> {
        let (head, n) = self.head();
        if head & MODIFIED == 0 {
            return None;
        }
        let at = n + if head & HAS_OWNER != 0 { 8 } else { 0 };
        let b = self.bytes().get(at..at + MODIFIED_LEN)?;
        let i64_at = |i: usize| b.get(i..i + 8).and_then(|x| x.try_into().ok()).map_or(0, i64::from_le_bytes);
        let version = b.get(16..20).and_then(|x| x.try_into().ok()).map_or(0, i32::from_le_bytes);
        Some((i64_at(0), i64_at(8), version))
    }

    /// (mzxid, mtime, version): from the buffer, or the create's when it holds none.
    fn data_change(&self) -> Modified {
        self.modified().unwrap_or((self.stat.czxid, self.stat.ctime, 0))
    }

    /// Zxid of the last data change (the create's until a setData).
    pub fn mzxid(&self) -> i64 {
        self.data_change().0
    }

    /// Time of the last data change, ms (the create's until a setData).
    pub fn mtime(&self) -> i64 {
        self.data_change().1
    }

    /// Data version.
    pub fn version(&self) -> i32 {
        self.data_change().2
    }

    /// The persisted stat, owner included (what snapshots and the txn path see).
    pub fn stat_persisted(&self) -> StatPersisted {
        let s = &self.stat;
        let (mzxid, mtime, version) = self.data_change();
        StatPersisted {
            czxid: s.czxid,
            mzxid,
            ctime: s.ctime,
            mtime,
            version,
            cversion: s.cversion,
            aversion: s.aversion,
            ephemeral_owner: self.owner(),
            pzxid: s.pzxid,
        }
    }

    /// Replaces the data, keeping the data-change fields.
    pub fn set_data(&mut self, data: Option<&[u8]>) {
        let buf = pack(self.path_bytes(), data, self.owner(), self.has_children(), self.modified());
        self.buf = ThinBytes::new(buf);
    }

    /// Replaces the data as a setData does: with the zxid, time and version of the change.
    pub fn set_data_changed(&mut self, data: Option<&[u8]>, mzxid: i64, mtime: i64, version: i32) {
        let modified = changed(self.stat.czxid, self.stat.ctime, (mzxid, mtime, version));
        self.buf = ThinBytes::new(pack(self.path_bytes(), data, self.owner(), self.has_children(), modified));
    }

    /// Whether the node table holds a child set for this node (possibly empty: an emptied set
    /// keeps what Java's iteration order depends on).
    pub fn has_children(&self) -> bool {
        self.bytes().first().is_some_and(|&b| u64::from(b) & HAS_CHILDREN != 0)
    }

    /// Marks whether the node table holds a child set for this node. The flag is in the header's
    /// first byte, so the buffer is changed in place.
    pub(crate) fn set_has_children(&mut self, on: bool) {
        if let Some(b) = self.buf.as_mut_slice().first_mut() {
            if on {
                *b |= HAS_CHILDREN as u8;
            } else {
                *b &= !(HAS_CHILDREN as u8);
            }
        }
    }

    /// The last path segment.
    pub fn name(&self) -> &str {
        let p = self.path();
        &p[p.rfind('/').map_or(0, |i| i + 1)..]
    }

    /// Data length as clients see it (0 for null).
    pub fn data_len(&self) -> i32 {
        self.data().map_or(0, |d| d.len() as i32)
    }

    /// The data as a buffer for a reply.
    pub fn data_bytes(&self) -> Option<Bytes> {
        self.data().map(Bytes::copy_from_slice)
    }

    /// The stat clients see, for a node with `num_children` children: cversion = stored*2 -
    /// numChildren, containers' and TTL nodes' owner 0.
    pub fn client_stat(&self, extended: bool, num_children: usize) -> Stat {
        let s = &self.stat;
        let n = num_children as i32;
        let owner = self.owner();
        let owner = if owner_kind(owner, extended) == OwnerKind::Normal { owner } else { 0 };
        let (mzxid, mtime, version) = self.data_change();
        Stat {
            czxid: s.czxid,
            mzxid,
            ctime: s.ctime,
            mtime,
            version,
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
        let mut n = Node::new("/c", None, Arc::new(vec![]), new_stat(5, 10, CONTAINER_OWNER));
        n.stat.cversion = 3;
        let s = n.client_stat(true, 1);
        assert_eq!(s.cversion, 5);
        assert_eq!(s.num_children, 1);
        assert_eq!(s.ephemeral_owner, 0);
        assert_eq!(s.data_length, 0);
        assert_eq!(n.name(), "c");
        assert_eq!(n.data(), None);
        n.set_data(Some(b""));
        assert_eq!((n.path(), n.data()), ("/c", Some(&b""[..])));
        n.set_data(Some(b"xyz"));
        assert_eq!((n.path(), n.data()), ("/c", Some(&b"xyz"[..])));
        assert_eq!(n.owner(), CONTAINER_OWNER);
        assert_eq!(std::mem::size_of::<Node>(), 56);
        assert_eq!(std::mem::size_of::<Option<Node>>(), 56);
    }

    #[test]
    fn buffer_layout() {
        // Paths of every header length (1 to 3 bytes), with and without owner and data.
        for len in [1, 31, 32, 100, 4095, 4096, 70_000] {
            let path = format!("/{}", "x".repeat(len - 1));
            for owner in [0, 7, CONTAINER_OWNER, ttl_owner(MAX_TTL_MS), -1] {
                // Never changed, changed by a setData, and fields only a snapshot could hold.
                for modified in
                    [None, Some((9, 20, 1)), Some((1, 2, -1)), Some((i64::MIN, i64::MAX, i32::MAX))]
                {
                    for data in [None, Some(&b""[..]), Some(&b"data"[..])] {
                        let mut stat = new_stat(1, 2, owner);
                        stat.cversion = 3;
                        if let Some((mzxid, mtime, version)) = modified {
                            (stat.mzxid, stat.mtime, stat.version) = (mzxid, mtime, version);
                        }
                        let mut n = Node::new(&path, data, Arc::new(vec![]), stat.clone());
                        assert_eq!((n.path(), n.data(), n.owner()), (path.as_str(), data, owner));
                        assert_eq!(n.stat_persisted(), stat);
                        assert_eq!(
                            (n.mzxid(), n.mtime(), n.version()),
                            (stat.mzxid, stat.mtime, stat.version)
                        );
                        assert!(!n.has_children());
                        n.set_has_children(true);
                        n.set_data(Some(b"new"));
                        assert!(n.has_children());
                        assert_eq!(
                            (n.path(), n.data(), n.owner()),
                            (path.as_str(), Some(&b"new"[..]), owner)
                        );
                        assert_eq!(n.stat_persisted(), stat, "set_data keeps the data-change fields");
                        n.set_has_children(false);
                        n.set_data(None);
                        assert_eq!((n.path(), n.data(), n.owner()), (path.as_str(), None, owner));
                        assert!(!n.has_children());
                        n.set_data_changed(Some(b"v2"), 40, 50, 7);
                        assert_eq!((n.path(), n.data(), n.owner()), (path.as_str(), Some(&b"v2"[..]), owner));
                        assert_eq!((n.mzxid(), n.mtime(), n.version()), (40, 50, 7));
                        assert_eq!(n.client_stat(true, 0).mzxid, 40);
                        // Back to the create's values: nothing kept in the buffer.
                        n.set_data_changed(Some(b"v3"), 1, 2, 0);
                        let fresh = Node::new(&path, Some(b"v3"), Arc::new(vec![]), new_stat(1, 2, owner));
                        assert_eq!(n.bytes().len(), fresh.bytes().len());
                        assert_eq!(n.stat_persisted().mzxid, 1);
                    }
                }
            }
        }
    }

    #[test]
    fn children_set() {
        let mut c = Children::default();
        assert_eq!(c.insert(3), 0);
        assert_eq!(c.insert(9), 1);
        assert!(c.remove(3));
        assert!(!c.remove(3));
        assert_eq!(c.len(), 1);
        assert_eq!(c.java_capacity(), 8);
    }
}
