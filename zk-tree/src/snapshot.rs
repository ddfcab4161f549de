//! Snapshots of the database: a fuzzy serialization taken in small steps between writes, the
//! loader that rebuilds a [`Database`] from it, and [`Recovery`], which replays the logged txns
//! that follow the snapshot's start zxid idempotently and checks that the snapshot reproduces
//! the tree digest it recorded.
//!
//! # Why fuzzy
//! A snapshot must never stall writes. [`Database::snapshot_begin`] records the start zxid `S`
//! (the last applied txn) and copies the small session table; each
//! [`Database::snapshot_step`] then serializes a bounded number of nodes, walking the node slab
//! in slot order, and the server applies more txns between steps. The result mixes states: each
//! node is captured as it was at the moment its slot was visited, some time at or after `S`. A
//! restart loads it and replays every txn with zxid > `S`; replay is idempotent (a create of a
//! present node changes nothing but the parent's cversion/pzxid, which only move forward; a
//! delete of a missing node changes nothing but the parent's pzxid; setData and setACL carry
//! explicit versions; a delete of a node that has children purges them, since their creates
//! follow in the log). So every path converges to the value the last txn touching it gives, and
//! the loaded-and-replayed tree equals the one that applied everything (proved by the property
//! test in `tests/snapshot_tests.rs`). Quota stats nodes are recomputed from the tree at the end
//! of recovery, as Apache recomputes them when it loads a snapshot.
//!
//! # What a snapshot must reproduce
//! When the end record is written, the snapshot also records the zxid the database had applied
//! at that moment (the end zxid `E`, at or above `S`) and, when the tree keeps one
//! ([`TreeConfig::tree_digest`]: ensembles do, standalone servers do not), the tree digest then.
//! Every node was captured at or before `E`, so loading the snapshot and replaying the log
//! exactly through `E` must give that digest. [`Recovery`] compares it at that point (at once
//! when `E = S`) and reports the verdict ([`Recovery::snapshot_check`]): a snapshot that lost
//! nodes (as one finished over another database did, the review's F1, before cursors were tied
//! to their database) fails the check, and a server can refuse it and fall back to an older
//! one. Comparing anywhere else would be wrong both ways: before `E` some captured nodes are
//! ahead of the tree, after it the tree has moved on.
//!
//! # Content layout (inside zk-log's checksummed chunks)
//! A sequence of records `u8 tag | u32 body length | body`, integers little-endian:
//! - `1` header: `u32 content version | i64 start zxid | u64 node count at begin | u64 next
//!   ephemeral rank` (28 bytes)
//! - `2` ACL list: `u32 index | u32 count | count × (i32 perms | str scheme | str id)`
//! - `3` session: `i64 id | i32 timeout ms`
//! - `4` node: `u8 flags | str path | [bytes data if flags&1] | u32 acl index | u32 rank |
//!   stat (i64 czxid, i64 mzxid, i64 ctime, i64 mtime, i32 version, i32 cversion, i32 aversion,
//!   i64 ephemeralOwner, i64 pzxid) | [u32 next child rank, u32 largest child count if flags&2] |
//!   [u64 ephemeral rank if flags&4]`
//! - `9` end, content version 2 (33 bytes): `u64 nodes | u32 ACL lists | u32 sessions` (what was
//!   written, checked on load) `| u8 end flags | i64 end zxid | i64 tree digest`. End flags: bit 0
//!   (`1`) the end zxid is recorded, bit 1 (`2`) the tree digest is recorded (only with bit 0);
//!   a field not recorded is 0, and other bits are refused. The end zxid is at or above the start
//!   zxid. Content built from another source ([`ContentBuilder`], e.g. an import) records
//!   neither (flags 0).
//! - `9` end, content version 1 (16 bytes): `u64 nodes | u32 ACL lists | u32 sessions` only.
//!   Version 1 content still loads exactly as before; it records nothing to check.
//!
//! `str` and `bytes` are `u32 length | bytes`. An ACL list is written once, before the first
//! node that uses it; a node written twice (deleted and re-created into a later slot while the
//! snapshot ran) is loaded from its later record.

use crate::acl::AclRef;
use crate::database::{Database, DatabaseId};
use crate::node::{owner_kind, Children, Node, OwnerKind, Slot};
use crate::nodes::PathHasher;
use crate::session::SessionTable;
use crate::tree::{parent_of, DataTree};
use crate::{SessionId, TreeConfig};
use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};
use zk_proto::{Acl, Id, StatPersisted, Txn, TxnHeader};

/// The content format this code writes, and the newest it reads (it reads every older one).
pub const CONTENT_VERSION: u32 = 2;
/// Largest record body accepted when loading: node data is bounded by jute.maxbuffer, far below.
pub const MAX_RECORD_BYTES: u32 = 256 << 20;

const TAG_HEADER: u8 = 1;
const TAG_ACL: u8 = 2;
const TAG_SESSION: u8 = 3;
const TAG_NODE: u8 = 4;
const TAG_END: u8 = 9;

const FLAG_DATA: u8 = 1;
const FLAG_CHILD_META: u8 = 2;
const FLAG_EPH_RANK: u8 = 4;

/// End record flags (content version 2): the end zxid is recorded; the tree digest is too.
const END_ZXID: u8 = 1;
const END_DIGEST: u8 = 2;
/// Bodies of the end record: counts only (version 1); counts, flags, end zxid, digest (2).
const END_BYTES_V1: usize = 8 + 4 + 4;
const END_BYTES_V2: usize = END_BYTES_V1 + 1 + 8 + 8;

/// What a snapshot recorded when its end record was written (content version 2): the state that
/// loading it and replaying the log exactly through `zxid` must reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndState {
    /// The zxid the database had applied when the end record was written: at or above the
    /// start zxid, and at or above the zxid every node was captured at.
    pub zxid: i64,
    /// The tree digest at that moment, if the tree kept one ([`TreeConfig::tree_digest`]).
    pub digest: Option<i64>,
}

/// Why snapshot content could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes do not follow the layout.
    #[error("snapshot content malformed at byte {offset}: {reason}")]
    Malformed {
        /// Offset in the content stream.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Written by a newer zkrs.
    #[error("snapshot content version {0} is newer than this zkrs reads ({CONTENT_VERSION})")]
    UnsupportedVersion(u32),
}

fn malformed(offset: u64, reason: impl Into<String>) -> SnapshotError {
    SnapshotError::Malformed { offset, reason: reason.into() }
}

// ---------------------------------------------------------------------------------------------
// Writing

/// Where a snapshot in progress stands; made by [`Database::snapshot_begin`], advanced by
/// [`Database::snapshot_step`]. Holds no borrow of the database, so writes go on between steps;
/// it belongs to the database that began it ([`SnapshotCursor::belongs_to`]), and a caller that
/// replaces its database must drop the cursor (and the snapshot) with it.
#[derive(Debug)]
pub struct SnapshotCursor {
    /// The database that began it, the only one it may step over.
    db: DatabaseId,
    start_zxid: i64,
    node_hint: u64,
    next_eph_rank: u64,
    sessions: Option<Vec<(SessionId, i32)>>,
    session_count: u32,
    next_slot: usize,
    /// ACL lists already written, by the address of their shared allocation. The `Weak` keeps the
    /// allocation (not the list) alive, so an address can never be reused by another list while
    /// the snapshot runs, and the ACL table's reference counts are untouched.
    acls: HashMap<usize, (u32, Weak<Vec<Acl>>)>,
    /// The last ACL list looked up (address, index): most trees use a handful of lists, runs of
    /// nodes share one, and this skips hashing the address for each of them.
    last_acl: Option<(usize, u32)>,
    nodes_written: u64,
    /// What the end record recorded, once written.
    end: Option<EndState>,
    done: bool,
}

impl SnapshotCursor {
    /// The zxid the snapshot starts from: every txn up to it is in the captured state, and a
    /// restart must replay every txn above it. Name the snapshot file after it.
    pub fn start_zxid(&self) -> i64 {
        self.start_zxid
    }

    /// Nodes written so far.
    pub fn nodes_written(&self) -> u64 {
        self.nodes_written
    }

    /// Whether the end record has been written.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// What the end record recorded (the end zxid and the tree digest then), once it has been
    /// written; None before.
    pub fn end_state(&self) -> Option<EndState> {
        self.end
    }

    /// The identity of the database that began it.
    pub fn database_id(&self) -> DatabaseId {
        self.db
    }

    /// Whether it was begun on `db`, the only database it may be stepped over.
    pub fn belongs_to(&self, db: &Database) -> bool {
        self.db == db.id()
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Paths and data are bounded by the request frame, so they always fit a u32.
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

/// Starts a record; returns the offset of its length field for [`end_record`].
fn begin_record(out: &mut Vec<u8>, tag: u8) -> usize {
    out.push(tag);
    let at = out.len();
    put_u32(out, 0);
    at
}

fn end_record(out: &mut [u8], at: usize) {
    let len = (out.len() - at - 4) as u32;
    debug_assert!(len <= MAX_RECORD_BYTES);
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

fn put_stat(out: &mut Vec<u8>, s: &StatPersisted) {
    put_i64(out, s.czxid);
    put_i64(out, s.mzxid);
    put_i64(out, s.ctime);
    put_i64(out, s.mtime);
    put_i32(out, s.version);
    put_i32(out, s.cversion);
    put_i32(out, s.aversion);
    put_i64(out, s.ephemeral_owner);
    put_i64(out, s.pzxid);
}

/// Appends a node record (the loader's and the Apache importer's common path).
#[allow(clippy::too_many_arguments)]
fn put_node(
    out: &mut Vec<u8>,
    path: &[u8],
    data: Option<&[u8]>,
    acl_index: u32,
    rank: u32,
    stat: &StatPersisted,
    child_meta: Option<(u32, u32)>,
    eph_rank: Option<u64>,
) {
    let at = begin_record(out, TAG_NODE);
    let mut flags = 0;
    if data.is_some() {
        flags |= FLAG_DATA;
    }
    if child_meta.is_some() {
        flags |= FLAG_CHILD_META;
    }
    if eph_rank.is_some() {
        flags |= FLAG_EPH_RANK;
    }
    out.push(flags);
    put_bytes(out, path);
    if let Some(d) = data {
        put_bytes(out, d);
    }
    put_u32(out, acl_index);
    put_u32(out, rank);
    put_stat(out, stat);
    if let Some((next, max)) = child_meta {
        put_u32(out, next);
        put_u32(out, max);
    }
    if let Some(r) = eph_rank {
        put_u64(out, r);
    }
    end_record(out, at);
}

fn put_acl_record(out: &mut Vec<u8>, index: u32, acl: &[Acl]) {
    let at = begin_record(out, TAG_ACL);
    put_u32(out, index);
    put_u32(out, acl.len() as u32);
    for a in acl {
        put_i32(out, a.perms);
        put_bytes(out, a.id.scheme.as_bytes());
        put_bytes(out, a.id.id.as_bytes());
    }
    end_record(out, at);
}

fn put_header(out: &mut Vec<u8>, start_zxid: i64, node_hint: u64, next_eph_rank: u64) {
    let at = begin_record(out, TAG_HEADER);
    put_u32(out, CONTENT_VERSION);
    put_i64(out, start_zxid);
    put_u64(out, node_hint);
    put_u64(out, next_eph_rank);
    end_record(out, at);
}

fn put_session(out: &mut Vec<u8>, id: SessionId, timeout: i32) {
    let at = begin_record(out, TAG_SESSION);
    put_i64(out, id);
    put_i32(out, timeout);
    end_record(out, at);
}

/// Appends the end record (content version 2): the counts, then `end` if known.
fn put_end(out: &mut Vec<u8>, nodes: u64, acls: u32, sessions: u32, end: Option<EndState>) {
    let at = begin_record(out, TAG_END);
    put_u64(out, nodes);
    put_u32(out, acls);
    put_u32(out, sessions);
    let (flags, zxid, digest) = match end {
        None => (0, 0, 0),
        Some(EndState { zxid, digest: None }) => (END_ZXID, zxid, 0),
        Some(EndState { zxid, digest: Some(d) }) => (END_ZXID | END_DIGEST, zxid, d),
    };
    out.push(flags);
    put_i64(out, zxid);
    put_i64(out, digest);
    end_record(out, at);
    debug_assert_eq!(out.len() - at - 4, END_BYTES_V2);
}

impl Database {
    /// Starts a snapshot of the state as of the last applied txn (`start_zxid`). Cheap: copies
    /// the session table (id, timeout) and nothing else; the nodes are written by later steps.
    pub fn snapshot_begin(&self) -> SnapshotCursor {
        let sessions: Vec<(SessionId, i32)> = self.sessions.iter().collect();
        SnapshotCursor {
            db: self.id,
            start_zxid: self.last_applied,
            node_hint: self.tree.len() as u64,
            next_eph_rank: self.tree.next_rank,
            session_count: sessions.len() as u32,
            sessions: Some(sessions),
            next_slot: 0,
            acls: HashMap::new(),
            last_acl: None,
            nodes_written: 0,
            end: None,
            done: false,
        }
    }

    /// Appends the next part of the snapshot to `out`: on the first call the header and the
    /// sessions, then up to `max_nodes` nodes (and the ACL lists they introduce), visiting at
    /// most `4 × max_nodes` slots so that a slab full of holes cannot make one step long. Returns
    /// true once the end record has been written; further calls append nothing and return true.
    ///
    /// Between steps the caller may apply any txns: nodes created or deleted meanwhile, in slots
    /// already visited or not, are taken care of by the replay of the txns above
    /// [`SnapshotCursor::start_zxid`] (see the module docs).
    ///
    /// Panics if `cur` was begun on another database ([`SnapshotCursor::belongs_to`]): a caller
    /// that replaces its database (a reload, a received snapshot) must abandon the snapshot
    /// under way, which over the new tree would silently lack nodes.
    pub fn snapshot_step(&self, cur: &mut SnapshotCursor, out: &mut Vec<u8>, max_nodes: usize) -> bool {
        self.assert_cursor_of(cur.db, "a snapshot cursor");
        if cur.done {
            return true;
        }
        if let Some(sessions) = cur.sessions.take() {
            put_header(out, cur.start_zxid, cur.node_hint, cur.next_eph_rank);
            for (id, t) in sessions {
                put_session(out, id, t);
            }
        }
        let max_nodes = max_nodes.max(1);
        let slot_budget = max_nodes.saturating_mul(4);
        let tree = &self.tree;
        let slots = tree.nodes.slot_count();
        let mut written = 0usize;
        let mut visited = 0usize;
        while cur.next_slot < slots && written < max_nodes && visited < slot_budget {
            let slot = cur.next_slot as Slot;
            cur.next_slot += 1;
            visited += 1;
            let Some(n) = tree.nodes.node(slot) else { continue };
            let acl_index = acl_index(cur, &n.acl, out);
            let eph_rank = match owner_kind(n.owner(), tree.extended) {
                OwnerKind::Normal => {
                    tree.ephemerals.get(&n.owner()).and_then(|s| s.paths.get(n.path()).copied())
                }
                _ => None,
            };
            put_node(
                out,
                n.path_bytes(),
                n.data(),
                acl_index,
                n.stat.rank,
                &n.stat_persisted(),
                tree.nodes.children(slot).map(|c| c.order_meta()),
                eph_rank,
            );
            written += 1;
        }
        cur.nodes_written += written as u64;
        if cur.next_slot >= slots {
            // Every node was captured by now, at or before this state: the one that loading the
            // snapshot and replaying the log through this zxid must give.
            let end = EndState { zxid: self.last_applied, digest: self.tree.digest() };
            debug_assert!(end.zxid >= cur.start_zxid);
            put_end(out, cur.nodes_written, cur.acls.len() as u32, cur.session_count, Some(end));
            cur.end = Some(end);
            cur.done = true;
            cur.acls.clear();
            cur.last_acl = None;
        }
        cur.done
    }

    /// The whole snapshot in one go (for tools, tests and imports, where nothing else writes):
    /// the start zxid and the content.
    pub fn snapshot_to_vec(&self) -> (i64, Vec<u8>) {
        let mut cur = self.snapshot_begin();
        let mut out = Vec::new();
        while !self.snapshot_step(&mut cur, &mut out, usize::MAX / 8) {}
        (cur.start_zxid, out)
    }
}

/// The index of `acl` in this snapshot, writing its record first if it is new here.
fn acl_index(cur: &mut SnapshotCursor, acl: &AclRef, out: &mut Vec<u8>) -> u32 {
    let key = Arc::as_ptr(acl) as usize;
    // Addresses stay unique while the snapshot runs (the map's Weak keeps each allocation), so
    // a matching address is the same list.
    if let Some((k, i)) = cur.last_acl {
        if k == key {
            return i;
        }
    }
    let i = match cur.acls.get(&key) {
        Some((i, _)) => *i,
        None => {
            let i = cur.acls.len() as u32;
            put_acl_record(out, i, acl);
            cur.acls.insert(key, (i, Arc::downgrade(acl)));
            i
        }
    };
    cur.last_acl = Some((key, i));
    i
}

// ---------------------------------------------------------------------------------------------
// Reading

/// The header record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentHeader {
    /// Content format version.
    pub version: u32,
    /// Every txn up to this zxid is in the snapshot; replay the ones above it.
    pub start_zxid: i64,
    /// Number of nodes when the snapshot began (a capacity hint).
    pub node_hint: u64,
    /// Next ephemeral insertion rank when the snapshot began.
    pub next_eph_rank: u64,
}

/// One node as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord<'a> {
    /// Full path.
    pub path: &'a str,
    /// Data; None is null data, kept apart from empty.
    pub data: Option<&'a [u8]>,
    /// Index of its ACL list in this snapshot.
    pub acl: u32,
    /// Insertion rank in its parent's child set.
    pub rank: u32,
    /// Persisted stat (cversion as stored: creates of children).
    pub stat: StatPersisted,
    /// Its child set's (next insertion rank, largest size reached), if it ever had children.
    pub child_meta: Option<(u32, u32)>,
    /// Insertion rank in its session's ephemeral set, for an ephemeral.
    pub eph_rank: Option<u64>,
}

/// One record of snapshot content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentRecord<'a> {
    /// The first record.
    Header(ContentHeader),
    /// An ACL list that nodes refer to by index.
    Acl {
        /// Its index.
        index: u32,
        /// The list.
        acl: Vec<Acl>,
    },
    /// A session.
    Session {
        /// Session id.
        id: SessionId,
        /// Its negotiated timeout.
        timeout_ms: i32,
    },
    /// A node.
    Node(NodeRecord<'a>),
    /// The last record: counts of what was written.
    End {
        /// Node records.
        nodes: u64,
        /// ACL records.
        acls: u32,
        /// Session records.
        sessions: u32,
    },
}

struct Body<'a> {
    b: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Body<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        if self.b.len() - self.pos < n {
            return Err(malformed(self.base + self.pos as u64, "record ends inside a field"));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    fn i32(&mut self) -> Result<i32, SnapshotError> {
        Ok(i32::from_le_bytes(self.arr()?))
    }
    fn u64(&mut self) -> Result<u64, SnapshotError> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    fn i64(&mut self) -> Result<i64, SnapshotError> {
        Ok(i64::from_le_bytes(self.arr()?))
    }
    fn bytes(&mut self) -> Result<&'a [u8], SnapshotError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn str(&mut self) -> Result<&'a str, SnapshotError> {
        let at = self.base + self.pos as u64;
        std::str::from_utf8(self.bytes()?).map_err(|_| malformed(at, "string is not UTF-8"))
    }
    fn stat(&mut self) -> Result<StatPersisted, SnapshotError> {
        Ok(StatPersisted {
            czxid: self.i64()?,
            mzxid: self.i64()?,
            ctime: self.i64()?,
            mtime: self.i64()?,
            version: self.i32()?,
            cversion: self.i32()?,
            aversion: self.i32()?,
            ephemeral_owner: self.i64()?,
            pzxid: self.i64()?,
        })
    }
    fn finish(&self) -> Result<(), SnapshotError> {
        if self.pos != self.b.len() {
            return Err(malformed(self.base + self.pos as u64, "trailing bytes in record"));
        }
        Ok(())
    }
}

/// Decodes one record's body. `header` is the content's header if already read: the end record's
/// layout depends on its version. The end state a version-2 end record holds comes apart from
/// the record (see [`ContentParser::end_state`]).
fn decode_record<'a>(
    tag: u8,
    body: &'a [u8],
    base: u64,
    header: Option<&ContentHeader>,
) -> Result<(ContentRecord<'a>, Option<EndState>), SnapshotError> {
    let mut b = Body { b: body, pos: 0, base };
    let mut end_state = None;
    let rec = match tag {
        TAG_HEADER => {
            let version = b.u32()?;
            if version > CONTENT_VERSION {
                return Err(SnapshotError::UnsupportedVersion(version));
            }
            ContentRecord::Header(ContentHeader {
                version,
                start_zxid: b.i64()?,
                node_hint: b.u64()?,
                next_eph_rank: b.u64()?,
            })
        }
        TAG_ACL => {
            let index = b.u32()?;
            let count = b.u32()? as usize;
            // Each entry takes at least 12 bytes, so the count is checked before allocating.
            if count > body.len() / 12 {
                return Err(malformed(base, format!("ACL count {count} exceeds the record")));
            }
            let mut acl = Vec::with_capacity(count);
            for _ in 0..count {
                let perms = b.i32()?;
                let scheme = b.str()?.to_string();
                let id = b.str()?.to_string();
                acl.push(Acl { perms, id: Id { scheme, id } });
            }
            ContentRecord::Acl { index, acl }
        }
        TAG_SESSION => ContentRecord::Session { id: b.i64()?, timeout_ms: b.i32()? },
        TAG_NODE => {
            let flags = b.u8()?;
            if flags & !(FLAG_DATA | FLAG_CHILD_META | FLAG_EPH_RANK) != 0 {
                return Err(malformed(base, format!("unknown node flags {flags:#x}")));
            }
            let path = b.str()?;
            let data = if flags & FLAG_DATA != 0 { Some(b.bytes()?) } else { None };
            let acl = b.u32()?;
            let rank = b.u32()?;
            let stat = b.stat()?;
            let child_meta = if flags & FLAG_CHILD_META != 0 { Some((b.u32()?, b.u32()?)) } else { None };
            let eph_rank = if flags & FLAG_EPH_RANK != 0 { Some(b.u64()?) } else { None };
            ContentRecord::Node(NodeRecord { path, data, acl, rank, stat, child_meta, eph_rank })
        }
        TAG_END => {
            let rec = ContentRecord::End { nodes: b.u64()?, acls: b.u32()?, sessions: b.u32()? };
            // Content without a header is refused by the loader; read its end as version 1.
            if header.is_some_and(|h| h.version >= 2) {
                end_state = decode_end_state(&mut b, header)?;
            }
            rec
        }
        other => return Err(malformed(base, format!("unknown record tag {other}"))),
    };
    b.finish()?;
    Ok((rec, end_state))
}

/// The part of a version-2 end record after the counts.
fn decode_end_state(
    b: &mut Body<'_>,
    header: Option<&ContentHeader>,
) -> Result<Option<EndState>, SnapshotError> {
    let at = b.base + b.pos as u64;
    let flags = b.u8()?;
    let (zxid, digest) = (b.i64()?, b.i64()?);
    if flags & !(END_ZXID | END_DIGEST) != 0 {
        return Err(malformed(at, format!("unknown end flags {flags:#x}")));
    }
    if flags & END_ZXID == 0 {
        if flags != 0 || zxid != 0 || digest != 0 {
            return Err(malformed(at, "end record holds a digest or zxid without recording its end zxid"));
        }
        return Ok(None);
    }
    if flags & END_DIGEST == 0 && digest != 0 {
        return Err(malformed(at, "end record holds a digest it does not record"));
    }
    let start = header.map_or(i64::MIN, |h| h.start_zxid);
    if zxid < start {
        return Err(malformed(at, format!("end zxid {zxid:#x} is below the start zxid {start:#x}")));
    }
    Ok(Some(EndState { zxid, digest: (flags & END_DIGEST != 0).then_some(digest) }))
}

/// What the parser hands each record to, with the end state a version-2 end record holds.
type RecordSink<'f> = dyn FnMut(ContentRecord<'_>, Option<EndState>) -> Result<(), SnapshotError> + 'f;

/// Splits a content stream, fed in arbitrary pieces, into records. A record cut by a piece
/// boundary is kept (bounded by [`MAX_RECORD_BYTES`]) until the rest arrives.
#[derive(Debug, Default)]
pub struct ContentParser {
    pending: Vec<u8>,
    offset: u64,
    /// The header, once read (the end record's layout follows its version).
    header: Option<ContentHeader>,
    /// What a version-2 end record recorded, once read.
    end_state: Option<EndState>,
}

impl ContentParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        ContentParser::default()
    }

    /// Bytes consumed so far (records handed out).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The end state the end record recorded (content version 2: the end zxid and, if kept,
    /// the tree digest then), once that record has been read. None before it, for version-1
    /// content, and for content that recorded none ([`ContentBuilder`]). Kept apart from
    /// [`ContentRecord::End`], whose shape is version 1's.
    pub fn end_state(&self) -> Option<EndState> {
        self.end_state
    }

    /// Feeds the next piece; calls `f` for every record completed by it, in order.
    ///
    /// Errors: [`SnapshotError::Malformed`] for an unknown tag, a length over
    /// [`MAX_RECORD_BYTES`] or a body that does not decode; [`SnapshotError::UnsupportedVersion`];
    /// or whatever `f` returns.
    pub fn feed(
        &mut self,
        data: &[u8],
        f: &mut dyn FnMut(ContentRecord<'_>) -> Result<(), SnapshotError>,
    ) -> Result<(), SnapshotError> {
        self.feed_with_end(data, &mut |r, _| f(r))
    }

    /// As [`ContentParser::feed`], handing each record with the end state an end record holds.
    fn feed_with_end(&mut self, data: &[u8], f: &mut RecordSink<'_>) -> Result<(), SnapshotError> {
        let mut pending = std::mem::take(&mut self.pending);
        let fed = split_records(&mut pending, self.offset, data, &mut |rec| self.parse_one(rec, f).map(drop));
        self.pending = pending;
        fed
    }

    fn parse_one(&mut self, rec: &[u8], f: &mut RecordSink<'_>) -> Result<usize, SnapshotError> {
        let (r, end) = decode_record(rec[0], &rec[5..], self.offset + 5, self.header.as_ref())?;
        if let ContentRecord::Header(h) = &r {
            // The first one counts; a second is the loader's error to report.
            self.header.get_or_insert(*h);
        }
        if end.is_some() {
            self.end_state = end;
        }
        f(r, end)?;
        self.offset += rec.len() as u64;
        Ok(rec.len())
    }

    /// Whether the stream ended on a record boundary.
    pub fn at_boundary(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Splits content fed in pieces into whole records: completes the record `pending` holds (cut by
/// the previous piece's end, at content offset `offset`) from `data`, then hands `each` every
/// whole record (head included) in order, and leaves the one `data`'s end cuts in `pending`.
/// `each` moves its owner's offset past the record; the offsets here follow along, for errors.
///
/// Errors: a length over [`MAX_RECORD_BYTES`] ([`record_len`]), or what `each` returns.
fn split_records(
    pending: &mut Vec<u8>,
    mut offset: u64,
    mut data: &[u8],
    each: &mut dyn FnMut(&[u8]) -> Result<(), SnapshotError>,
) -> Result<(), SnapshotError> {
    if !pending.is_empty() {
        // Complete the record cut at the previous boundary, then go on from `data` directly.
        if pending.len() < 5 {
            let take = (5 - pending.len()).min(data.len());
            pending.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        let Some(total) = record_len(pending, offset)? else { return Ok(()) };
        let take = (total - pending.len()).min(data.len());
        pending.extend_from_slice(&data[..take]);
        data = &data[take..];
        if pending.len() < total {
            return Ok(());
        }
        each(pending)?;
        pending.clear();
        offset += total as u64;
    }
    let mut pos = 0;
    while pos < data.len() {
        match record_len(&data[pos..], offset)? {
            Some(total) if total <= data.len() - pos => {
                each(&data[pos..pos + total])?;
                pos += total;
                offset += total as u64;
            }
            _ => break,
        }
    }
    pending.extend_from_slice(&data[pos..]);
    Ok(())
}

/// The full length of the record starting `b`, or None if its 5-byte head is not all there.
fn record_len(b: &[u8], offset: u64) -> Result<Option<usize>, SnapshotError> {
    if b.len() < 5 {
        return Ok(None);
    }
    let len = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
    if len > MAX_RECORD_BYTES {
        return Err(malformed(offset, format!("record length {len} over the limit")));
    }
    Ok(Some(5 + len as usize))
}

/// Snapshot content split into records and each node packed as the node table stores it: the
/// part of loading that needs no tree, so that a loader may run it on a thread of its own while
/// [`SnapshotLoader::feed_decoded`] builds the tree from what it already decoded. Besides
/// packing a node it takes its ACL list's shared reference, hashes its path for the node
/// table's index, and works out its size and (when asked, [`SnapshotDecoder::with_digest`]) its
/// digest, so that the building thread has as little as possible to do per node.
#[derive(Debug, Default)]
pub struct SnapshotDecoder {
    parser: ContentParser,
    /// The ACL lists read so far, by index (a list out of sequence is left out: the loader
    /// refuses it); for runs, those of the cutter's table this decoder has copied.
    acls: Vec<AclRef>,
    /// The path index's hash function, which the loader's table adopts.
    hasher: PathHasher,
    /// Whether to compute each node's digest.
    digest: bool,
}

/// What a [`SnapshotDecoder`] made of one piece of content. Once fed to a loader, its emptied
/// buffer can go back to the decoder ([`SnapshotDecoder::decode_into`]).
#[derive(Debug, Default)]
pub struct Decoded {
    items: Vec<Item>,
    /// The decoder's offset after this piece.
    offset: u64,
    /// Whether the piece ended on a record boundary.
    at_boundary: bool,
    /// The function the nodes' path hashes were made with.
    hasher: PathHasher,
}

/// One decoded record.
#[derive(Debug)]
enum Item {
    Header(ContentHeader),
    Acl { index: u32, acl: AclRef },
    Session { id: SessionId, timeout_ms: i32 },
    Node(PackedNode),
    End { nodes: u64, acls: u32, sessions: u32, end: Option<EndState> },
}

/// A node record with its buffer already packed.
#[derive(Debug)]
struct PackedNode {
    buf: Box<[u8]>,
    stat: crate::node::NodeStat,
    /// The index of its ACL list, and the list when the decoder knew it.
    acl: (u32, Option<AclRef>),
    child_meta: Option<(u32, u32)>,
    eph_rank: Option<u64>,
    /// Its path's hash for the node table's index ([`PathHasher::hash`]).
    hash: u32,
    /// Its size as the tree counts it ([`crate::tree::node_size`]).
    size: u64,
    /// Its digest, if the decoder was asked for digests.
    digest: Option<i64>,
    /// Whether its `ephemeralOwner` is not 0 (an ephemeral, container or TTL node).
    owned: bool,
}

impl SnapshotDecoder {
    /// A decoder at the start of the content.
    pub fn new() -> Self {
        SnapshotDecoder::default()
    }

    /// A decoder that also computes each node's digest (for a loader whose tree keeps one,
    /// [`TreeConfig::tree_digest`], which otherwise computes them itself).
    pub fn with_digest(digest: bool) -> Self {
        SnapshotDecoder { digest, ..SnapshotDecoder::default() }
    }

    /// Decodes the next piece of content (records cut at its end are completed by the next).
    ///
    /// Errors: as [`ContentParser::feed`], and `Malformed` for a node path that is not absolute.
    pub fn decode(&mut self, data: &[u8]) -> Result<Decoded, SnapshotError> {
        self.decode_into(data, Decoded::default())
    }

    /// As [`SnapshotDecoder::decode`], into the buffer of `reuse`, a [`Decoded`] a loader is
    /// done with: a load then allocates a few buffers instead of one a chunk, each freed on the
    /// loading thread (the allocator's slow path, and freed memory it kept resident after the
    /// load).
    ///
    /// Errors: as [`SnapshotDecoder::decode`].
    pub fn decode_into(&mut self, data: &[u8], reuse: Decoded) -> Result<Decoded, SnapshotError> {
        let mut items = reuse.items;
        items.clear();
        let SnapshotDecoder { parser, acls, hasher, digest } = self;
        decode_records(parser, data, &mut items, &mut AclLookup::Own(acls), hasher, *digest)?;
        Ok(Decoded {
            items,
            offset: self.parser.offset(),
            at_boundary: self.parser.at_boundary(),
            hasher: self.hasher.clone(),
        })
    }

    /// Another decoder for the same content's runs ([`RecordRuns`]): it hashes paths with this
    /// one's function, so that the loader takes every run's hashes as they are, whichever
    /// decoder made them, and computes digests if this one does.
    pub fn sibling(&self) -> SnapshotDecoder {
        SnapshotDecoder { hasher: self.hasher.clone(), digest: self.digest, ..SnapshotDecoder::default() }
    }

    /// Decodes one run of whole records ([`RecordRuns::cut`]) into the buffer of `reuse`. Runs
    /// of one content may be decoded by several decoders ([`SnapshotDecoder::sibling`]) on
    /// several threads, in any order; fed to the loader in their order, they load what
    /// [`SnapshotDecoder::decode_into`] fed the pieces would. The ACL lists come from the
    /// [`RecordRuns`] that cut the run, so every node of a list shares one reference. A decoder
    /// decodes either pieces or runs, never both.
    ///
    /// Errors: as [`SnapshotDecoder::decode`].
    pub fn decode_run(&mut self, run: &RecordRun, reuse: Decoded) -> Result<Decoded, SnapshotError> {
        let mut items = reuse.items;
        items.clear();
        // A run holds whole records: a parser placed at its start reads it to its end.
        let mut parser = ContentParser { offset: run.start, header: run.header, ..ContentParser::default() };
        let SnapshotDecoder { acls, hasher, digest, .. } = self;
        {
            // The cutter read every list this run names before handing it over: copy the new
            // ones into this decoder's own table, so that the cutter's next list never waits for
            // a whole run's decoding to finish.
            let table = run.acls.read().unwrap_or_else(|e| e.into_inner());
            if table.len() > acls.len() {
                acls.extend_from_slice(&table[acls.len()..]);
            }
        }
        decode_records(&mut parser, &run.bytes, &mut items, &mut AclLookup::Shared(acls), hasher, *digest)?;
        if !parser.at_boundary() {
            // Not from any cutter's run: whole records only, by construction.
            return Err(malformed(parser.offset(), "a run ends inside a record"));
        }
        Ok(Decoded {
            items,
            offset: parser.offset(),
            at_boundary: run.at_boundary,
            hasher: self.hasher.clone(),
        })
    }
}

/// Where a decoder finds the shared reference of each ACL list.
enum AclLookup<'a> {
    /// Its own: the lists it read, in index order.
    Own(&'a mut Vec<AclRef>),
    /// A [`RecordRuns`]'s, which read them first.
    Shared(&'a [AclRef]),
}

impl AclLookup<'_> {
    /// The reference for an ACL record (index `index`, list `acl`): a list in sequence is kept
    /// (one out of sequence is handed on as read: the loader refuses it).
    fn record(&mut self, index: u32, acl: Vec<Acl>) -> AclRef {
        match self {
            AclLookup::Own(v) => {
                let acl: AclRef = Arc::new(acl);
                if index as usize == v.len() {
                    v.push(acl.clone());
                }
                acl
            }
            AclLookup::Shared(t) => t.get(index as usize).cloned().unwrap_or_else(|| Arc::new(acl)),
        }
    }

    /// The list of index `index`, if known (the loader checks it against the lists it read).
    fn get(&self, index: u32) -> Option<AclRef> {
        let table: &[AclRef] = match self {
            AclLookup::Own(v) => v,
            AclLookup::Shared(t) => t,
        };
        table.get(index as usize).cloned()
    }
}

/// Parses `data` with `parser` and appends an [`Item`] per record to `items`: each node packed,
/// hashed with `hasher`, sized, and digested when `digest` is set.
fn decode_records(
    parser: &mut ContentParser,
    data: &[u8],
    items: &mut Vec<Item>,
    acls: &mut AclLookup<'_>,
    hasher: &PathHasher,
    digest: bool,
) -> Result<(), SnapshotError> {
    parser.feed_with_end(data, &mut |rec, end| {
        items.push(match rec {
            ContentRecord::Header(h) => Item::Header(h),
            ContentRecord::Acl { index, acl } => Item::Acl { index, acl: acls.record(index, acl) },
            ContentRecord::Session { id, timeout_ms } => Item::Session { id, timeout_ms },
            ContentRecord::Node(n) => {
                if !n.path.starts_with('/') {
                    return Err(malformed(0, format!("node path {:?} is not absolute", n.path)));
                }
                let path = n.path.as_bytes();
                let size = crate::tree::node_size(n.path, n.data);
                let digest = digest.then(|| crate::digest::node_digest(path, n.data, &n.stat));
                let owned = n.stat.ephemeral_owner != 0;
                let (buf, mut stat) = Node::packed(n.path, n.data, n.stat);
                stat.rank = n.rank;
                Item::Node(PackedNode {
                    hash: hasher.hash(path),
                    buf,
                    stat,
                    acl: (n.acl, acls.get(n.acl)),
                    child_meta: n.child_meta,
                    eph_rank: n.eph_rank,
                    size,
                    digest,
                    owned,
                })
            }
            ContentRecord::End { nodes, acls, sessions } => Item::End { nodes, acls, sessions, end },
        });
        Ok(())
    })
}

/// Cuts snapshot content, fed in arbitrary pieces, into runs of whole records that decode apart
/// from each other ([`SnapshotDecoder::decode_run`]), so that a loader on several cores decodes
/// runs on several threads and feeds what they make to one [`SnapshotLoader`] in order. It reads
/// each record's head only, except the header and the ACL lists, which it decodes itself: the
/// runs' decoding depends on them (the end record's layout on the header's version; a node's
/// shared ACL reference on its list).
#[derive(Debug, Default)]
pub struct RecordRuns {
    /// The part of a record cut by the previous piece's end (bounded by [`MAX_RECORD_BYTES`]).
    pending: Vec<u8>,
    /// Offset of the first byte not yet in a run (where `pending` starts).
    offset: u64,
    /// The header, once read.
    header: Option<ContentHeader>,
    /// The ACL lists read so far, in index order, shared with the runs' decoders.
    acls: Arc<RwLock<Vec<AclRef>>>,
}

/// A run of whole records cut by [`RecordRuns::cut`].
#[derive(Debug)]
pub struct RecordRun {
    bytes: Vec<u8>,
    /// The content offset of its first byte.
    start: u64,
    /// Whether no record was left cut after it.
    at_boundary: bool,
    /// The content's header, if read by the end of this run.
    header: Option<ContentHeader>,
    acls: Arc<RwLock<Vec<AclRef>>>,
}

impl RecordRun {
    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Its buffer, to cut the next run into.
    pub fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }
}

impl RecordRuns {
    /// At the start of the content.
    pub fn new() -> Self {
        RecordRuns::default()
    }

    /// Cuts the next piece: the run holds every record the piece completes (the one cut by its
    /// end waits for the next piece), copied into `buf`, which is cleared first. One run per
    /// piece, empty when the piece completes no record: the last says whether the content
    /// ended on a record boundary.
    ///
    /// Errors: [`SnapshotError::Malformed`] for a length over [`MAX_RECORD_BYTES`], or a header or
    /// ACL record that does not decode; [`SnapshotError::UnsupportedVersion`].
    pub fn cut(&mut self, data: &[u8], mut buf: Vec<u8>) -> Result<RecordRun, SnapshotError> {
        buf.clear();
        let start = self.offset;
        let mut pending = std::mem::take(&mut self.pending);
        let cut = split_records(&mut pending, self.offset, data, &mut |rec| {
            self.note(rec)?;
            buf.extend_from_slice(rec);
            Ok(())
        });
        self.pending = pending;
        cut?;
        Ok(RecordRun {
            bytes: buf,
            start,
            at_boundary: self.pending.is_empty(),
            header: self.header,
            acls: self.acls.clone(),
        })
    }

    /// Takes note of one whole record (`rec`, head included, at `self.offset`) and moves past it.
    fn note(&mut self, rec: &[u8]) -> Result<(), SnapshotError> {
        let at = self.offset + 5;
        match rec[0] {
            TAG_HEADER if self.header.is_none() => {
                if let (ContentRecord::Header(h), _) = decode_record(TAG_HEADER, &rec[5..], at, None)? {
                    self.header = Some(h);
                }
            }
            TAG_ACL => {
                if let (ContentRecord::Acl { index, acl }, _) = decode_record(TAG_ACL, &rec[5..], at, None)? {
                    let mut table = self.acls.write().unwrap_or_else(|e| e.into_inner());
                    if index as usize == table.len() {
                        table.push(Arc::new(acl));
                    }
                }
            }
            _ => {}
        }
        self.offset += rec.len() as u64;
        Ok(())
    }
}

/// Rebuilds a [`Database`] from snapshot content fed in pieces (as the container's chunks are
/// read and checked). Built for speed: while content is fed, each node only goes into the next
/// slot of the node table (everything a node needs that takes no tree was worked out by the
/// [`SnapshotDecoder`], which may run on another thread); the path index, the parent links and
/// the other indexes are made in a few passes at the end, each filling its tables in an order
/// that walks their memory instead of missing the cache on every node.
#[derive(Debug)]
pub struct SnapshotLoader {
    cfg: TreeConfig,
    /// Decodes what [`SnapshotLoader::feed`] is given (not used with
    /// [`SnapshotLoader::feed_decoded`]).
    decoder: SnapshotDecoder,
    /// Where the content decoded so far ends, and whether on a record boundary.
    decoded_to: (u64, bool),
    tree: DataTree,
    header: Option<ContentHeader>,
    /// The ACL lists by index: the shared reference, and whether the decoder's reference is
    /// that one (else the nodes that name it are given this one instead).
    acls: Vec<(AclRef, bool)>,
    sessions: Vec<(SessionId, i32)>,
    eph_ranks: hashbrown::HashMap<Slot, u64>,
    /// Every node stored, as `(path hash << 32) | slot`, for [`NodeTable::index_loaded`].
    ///
    /// [`NodeTable::index_loaded`]: crate::nodes::NodeTable::index_loaded
    index: Vec<u64>,
    /// The slots of nodes with an owner (ephemerals, containers, TTL nodes), in slot order.
    owned: Vec<Slot>,
    /// Sizes and digests of the nodes stored so far.
    sums: Sums,
    nodes_seen: u64,
    /// The end record: its counts, and the end state it recorded (version 2).
    end: Option<(u64, u32, u32, Option<EndState>)>,
}

/// The tree's size and digest, summed node by node (wrapping, as the digest is).
#[derive(Debug, Default, Clone, Copy)]
struct Sums {
    size: u64,
    digest: i64,
}

impl Sums {
    fn add(&mut self, size: u64, digest: i64) {
        self.size = self.size.wrapping_add(size);
        self.digest = self.digest.wrapping_add(digest);
    }

    /// Takes away a node that was counted and is gone.
    fn remove(&mut self, n: &Node, digest: bool) {
        self.size = self.size.wrapping_sub(crate::tree::node_size(n.path(), n.data()));
        if digest {
            self.digest = self.digest.wrapping_sub(crate::digest::of_node(n));
        }
    }
}

impl SnapshotLoader {
    /// A loader for a database with this configuration.
    pub fn new(cfg: TreeConfig) -> Self {
        SnapshotLoader {
            tree: DataTree::empty(cfg.extended_types_enabled),
            decoder: SnapshotDecoder::with_digest(cfg.tree_digest),
            cfg,
            decoded_to: (0, true),
            header: None,
            acls: Vec::new(),
            sessions: Vec::new(),
            eph_ranks: hashbrown::HashMap::new(),
            index: Vec::new(),
            owned: Vec::new(),
            sums: Sums::default(),
            nodes_seen: 0,
            end: None,
        }
    }

    /// The header, once read.
    pub fn header(&self) -> Option<ContentHeader> {
        self.header
    }

    /// What the end record recorded (content version 2), once it has been read: the zxid the
    /// writing database had applied when it wrote the end record, above the header's start zxid
    /// when txns were applied while the snapshot was written (a fuzzy snapshot). None before the
    /// end record, or for content that records none.
    pub fn end_state(&self) -> Option<EndState> {
        self.end.and_then(|(_, _, _, e)| e)
    }

    /// Node records read so far (for progress lines).
    pub fn nodes_loaded(&self) -> u64 {
        self.nodes_seen
    }

    /// Feeds the next piece of content.
    ///
    /// Errors: as [`ContentParser::feed`], plus `Malformed` for records out of place (anything
    /// before the header, after the end, an ACL index out of sequence, a node naming an unknown
    /// ACL, a path that is not absolute).
    pub fn feed(&mut self, data: &[u8]) -> Result<(), SnapshotError> {
        let decoded = self.decoder.decode(data)?;
        self.feed_decoded(decoded)
    }

    /// Feeds content decoded by a [`SnapshotDecoder`] (which may have run on another thread), in
    /// the order it was decoded.
    ///
    /// Errors: `Malformed` for records out of place, as [`SnapshotLoader::feed`].
    pub fn feed_decoded(&mut self, mut decoded: Decoded) -> Result<(), SnapshotError> {
        self.feed_decoded_mut(&mut decoded)
    }

    /// As [`SnapshotLoader::feed_decoded`], leaving `decoded` empty for reuse
    /// ([`SnapshotDecoder::decode_into`]).
    ///
    /// Errors: as [`SnapshotLoader::feed_decoded`].
    pub fn feed_decoded_mut(&mut self, decoded: &mut Decoded) -> Result<(), SnapshotError> {
        let SnapshotLoader {
            cfg,
            tree,
            header,
            acls,
            sessions,
            eph_ranks,
            index,
            owned,
            sums,
            nodes_seen,
            end,
            decoded_to,
            ..
        } = self;
        *decoded_to = (decoded.offset, decoded.at_boundary);
        // The decoder hashed the paths its own way: the table takes that way while it is empty
        // (a decoder's function is as randomly seeded as a table's); after that, a piece from
        // another decoder has its paths hashed again here.
        let same_hash = decoded.hasher.token() == tree.nodes.hasher().token()
            || (!decoded.items.is_empty() && tree.nodes.adopt_hasher(&decoded.hasher));
        let want_digest = cfg.tree_digest;
        for item in decoded.items.drain(..) {
            if end.is_some() {
                return Err(malformed(0, "record after the end record"));
            }
            match item {
                Item::Header(h) => {
                    if header.is_some() {
                        return Err(malformed(0, "second header"));
                    }
                    tree.next_rank = h.next_eph_rank;
                    // The hint comes from the file; cap it so a bad one cannot reserve gigabytes.
                    index.reserve(h.node_hint.min(1 << 24) as usize);
                    *header = Some(h);
                    continue;
                }
                _ if header.is_none() => return Err(malformed(0, "content does not start with a header")),
                Item::Acl { index, acl } => {
                    if index as usize != acls.len() {
                        return Err(malformed(0, format!("ACL index {index} out of sequence")));
                    }
                    let shared = tree.acls.adopt(acl.clone());
                    let same = Arc::ptr_eq(&shared, &acl);
                    acls.push((shared, same));
                }
                Item::Session { id, timeout_ms } => sessions.push((id, timeout_ms)),
                Item::Node(n) => {
                    let (acl_index, decoded_acl) = n.acl;
                    let acl = match (acls.get(acl_index as usize), decoded_acl) {
                        // The decoder's reference is the shared one (nearly always): no count
                        // to change here.
                        (Some((shared, true)), Some(a)) if Arc::ptr_eq(shared, &a) => a,
                        (Some((shared, _)), _) => shared.clone(),
                        (None, _) => {
                            // The node made only to name its path in the error.
                            let node = Node::from_packed(n.buf, AclRef::default(), n.stat);
                            return Err(malformed(
                                0,
                                format!("node {} names unknown ACL {acl_index}", node.path()),
                            ));
                        }
                    };
                    let node = Node::from_packed(n.buf, acl, n.stat);
                    let hash = if same_hash { n.hash } else { tree.nodes.hasher().hash(node.path_bytes()) };
                    let digest = match n.digest {
                        Some(d) => d,
                        None if want_digest => crate::digest::of_node(&node),
                        None => 0,
                    };
                    sums.add(n.size, digest);
                    let slot = tree.nodes.push_loaded(node);
                    index.push((u64::from(hash) << 32) | u64::from(slot));
                    if let Some((next, max)) = n.child_meta {
                        tree.nodes.set_children(slot, Some(Children::with_order_meta(next, max)));
                    }
                    if let Some(r) = n.eph_rank {
                        eph_ranks.insert(slot, r);
                    }
                    if n.owned {
                        owned.push(slot);
                    }
                    *nodes_seen += 1;
                }
                Item::End { nodes, acls: a, sessions: s, end: e } => *end = Some((nodes, a, s, e)),
            }
        }
        Ok(())
    }

    /// Indexes the nodes by path, links every node to its parent, builds the indexes and returns
    /// the database, whose last applied zxid is the snapshot's start zxid. Sessions are loaded
    /// as live and not yet bucketed by expiry time: run the log replay through [`Recovery`],
    /// whose `finish` starts their clocks. The database has an identity of its own
    /// ([`crate::DatabaseId`]).
    ///
    /// Errors: `Malformed` if the content was cut short (no end record, a partial record) or the
    /// end record's counts differ from what was read, or the root is missing.
    pub fn finish(self) -> Result<Database, SnapshotError> {
        let SnapshotLoader {
            cfg,
            decoded_to: (at, at_boundary),
            mut tree,
            header,
            acls,
            sessions,
            mut eph_ranks,
            index,
            mut owned,
            mut sums,
            nodes_seen,
            end,
            ..
        } = self;
        let header = header.ok_or_else(|| malformed(at, "no header"))?;
        let (nodes, acl_count, session_count, end_state) =
            end.ok_or_else(|| malformed(at, "no end record"))?;
        if !at_boundary {
            return Err(malformed(at, "content ends inside a record"));
        }
        if nodes != nodes_seen || acl_count as usize != acls.len() || session_count as usize != sessions.len()
        {
            return Err(malformed(
                at,
                format!(
                    "end record counts {nodes} nodes, {acl_count} ACLs, {session_count} sessions; read \
                     {nodes_seen}, {}, {}",
                    acls.len(),
                    sessions.len()
                ),
            ));
        }
        drop(acls);
        let digest = cfg.tree_digest;
        // A node read twice (a fuzzy snapshot) is loaded from its later record, in the slot of
        // its first.
        for (first, later) in tree.nodes.index_loaded(index) {
            let Some(old) = tree.nodes.move_loaded(later, first) else { continue };
            sums.remove(&old, digest);
            tree.acls.release(old.acl);
            match eph_ranks.remove(&later) {
                Some(r) => {
                    eph_ranks.insert(first, r);
                }
                None => {
                    eph_ranks.remove(&first);
                }
            }
            owned.push(first);
        }
        if !tree.nodes.contains("/") {
            return Err(malformed(at, "the snapshot has no root node"));
        }
        link_all(&mut tree, &mut |n| sums.remove(n, digest));
        build_indexes(&mut tree, &eph_ranks, owned);
        tree.data_size = sums.size;
        tree.digest = digest.then_some(sums.digest);
        // After the sums: these count their own.
        tree.ensure_special_nodes();
        tree.recompute_quotas();
        let mut table = SessionTable::new();
        for (id, t) in sessions {
            table.add(id, t);
        }
        let mut db = Database::new(cfg);
        db.tree = tree;
        db.sessions = table;
        db.last_applied = header.start_zxid;
        db.loaded_from =
            Some(LoadedContent { version: header.version, start_zxid: header.start_zxid, end: end_state });
        Ok(db)
    }
}

/// What the content a database was loaded from said of itself, for [`Recovery`]'s check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoadedContent {
    /// Its content version.
    pub(crate) version: u32,
    /// Its start zxid (the loaded database's last applied zxid).
    pub(crate) start_zxid: i64,
    /// What its end record recorded, if anything.
    pub(crate) end: Option<EndState>,
}

/// Puts every node into its parent's child set (with its saved rank); drops nodes whose parent
/// is not in the snapshot, with their subtrees, handing each node dropped to `dropped`. Such a
/// node was caught before its parent was deleted, so it is deleted by a txn the replay will see
/// too.
///
/// Each node's parent is found first; then the (parent, child) pairs are sorted by parent and
/// each parent's children go into its set at once ([`Children::extend_ranked`]), which sizes
/// the set once and fills a large one in bucket order.
fn link_all(tree: &mut DataTree, dropped: &mut dyn FnMut(&Node)) {
    let slots = tree.nodes.slot_count();
    let mut orphans = Vec::new();
    // (parent slot << 32) | child slot, in child order; and every node's rank, by slot.
    let mut pairs: Vec<u64> = Vec::with_capacity(slots);
    let mut ranks: Vec<u32> = vec![0; slots];
    let mut max_parent: Slot = 0;
    // Siblings tend to sit in neighbouring slots (created together), so the last parent found
    // is remembered: one path comparison instead of a hash lookup.
    let mut last: Option<Slot> = None;
    for s in 0..slots as Slot {
        let parent = {
            let Some(n) = tree.nodes.node(s) else { continue };
            // Bytes, not `path()`: that checks the UTF-8 on every call, twice a node here.
            let p = n.path_bytes();
            if p == b"/" {
                continue;
            }
            ranks[s as usize] = n.stat.rank;
            let pp = match p.iter().rposition(|&b| b == b'/') {
                Some(0) | None => &b"/"[..],
                Some(i) => &p[..i],
            };
            let cached = last.filter(|&ps| tree.nodes.node(ps).is_some_and(|c| c.path_bytes() == pp));
            let parent = cached.or_else(|| tree.nodes.find_bytes(pp));
            last = parent.or(last);
            parent
        };
        match parent {
            Some(p) => {
                max_parent = max_parent.max(p);
                pairs.push((u64::from(p) << 32) | u64::from(s));
            }
            None => orphans.push(s),
        }
    }
    // Stable: each parent's children stay in slot order.
    let parent_bits = u64::BITS - u64::from(max_parent).leading_zeros();
    crate::child_names::radix_sort(&mut pairs, parent_bits, |p| p >> 32);
    let mut members: Vec<u64> = Vec::new();
    for group in pairs.chunk_by(|a, b| a >> 32 == b >> 32) {
        let parent = (group[0] >> 32) as Slot;
        members.clear();
        members.extend(group.iter().map(|&p| {
            let child = p as u32;
            (u64::from(child) << 32) | u64::from(ranks[child as usize])
        }));
        if let Some(set) = tree.nodes.children_entry(parent) {
            set.extend_ranked(&mut members);
        }
    }
    drop(pairs);
    for s in orphans {
        tree.drop_subtree(s, dropped);
    }
}

/// The ephemeral, container and TTL indexes, from the nodes in `owned` (slots that held a node
/// with an owner at some point of the load; each is checked again, in slot order).
fn build_indexes(tree: &mut DataTree, eph_ranks: &hashbrown::HashMap<Slot, u64>, mut owned: Vec<Slot>) {
    owned.sort_unstable();
    owned.dedup();
    let mut next_rank = tree.next_rank;
    let mut unranked = Vec::new();
    for s in owned {
        let Some(n) = tree.nodes.node(s) else { continue };
        let owner = n.owner();
        match owner_kind(owner, tree.extended) {
            OwnerKind::Void => {}
            OwnerKind::Container => {
                tree.containers.insert(n.path().into());
            }
            OwnerKind::Ttl => {
                tree.ttls.insert(n.path().into());
            }
            OwnerKind::Normal => match eph_ranks.get(&s) {
                Some(&r) => {
                    next_rank = next_rank.max(r + 1);
                    tree.ephemerals.entry(owner).or_default().paths.insert(n.path().into(), r);
                }
                None => unranked.push((owner, Box::<str>::from(n.path()))),
            },
        }
    }
    // Ephemerals without a saved rank (an imported tree) are ranked in load order.
    for (owner, path) in unranked {
        tree.ephemerals.entry(owner).or_default().paths.insert(path, next_rank);
        next_rank += 1;
    }
    for set in tree.ephemerals.values_mut() {
        set.max_len = set.max_len.max(set.paths.len());
    }
    tree.next_rank = next_rank;
}

/// Loads a whole content buffer (see [`SnapshotLoader`]).
///
/// Errors: as [`SnapshotLoader::feed`] and [`SnapshotLoader::finish`].
pub fn load_snapshot(cfg: TreeConfig, content: &[u8]) -> Result<Database, SnapshotError> {
    let mut l = SnapshotLoader::new(cfg);
    l.feed(content)?;
    l.finish()
}

// ---------------------------------------------------------------------------------------------
// Building from another source (the Apache import)

/// Writes snapshot content from nodes given one by one, for importing another system's data:
/// the same records [`Database::snapshot_step`] writes, so [`SnapshotLoader`] reads them. Nodes
/// get child ranks in the order given (as Apache rebuilds its child sets when it loads).
#[derive(Debug)]
pub struct ContentBuilder {
    out: Vec<u8>,
    acls: HashMap<Vec<u8>, u32>,
    ranks: HashMap<String, u32>,
    nodes: u64,
    sessions: u32,
}

impl ContentBuilder {
    /// Starts content for a state that includes every txn up to `start_zxid`. `node_hint`
    /// sizes the loader's tables.
    pub fn new(start_zxid: i64, node_hint: u64) -> Self {
        let mut out = Vec::new();
        put_header(&mut out, start_zxid, node_hint, 0);
        ContentBuilder { out, acls: HashMap::new(), ranks: HashMap::new(), nodes: 0, sessions: 0 }
    }

    /// Adds a session (sessions may come before, between or after the nodes).
    pub fn session(&mut self, id: SessionId, timeout_ms: i32) {
        put_session(&mut self.out, id, timeout_ms);
        self.sessions += 1;
    }

    /// Nodes added so far.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Adds a node. Parents should come before their children for the child ranks to follow
    /// the order given; a node whose parent never comes is dropped at load.
    pub fn node(&mut self, path: &str, data: Option<&[u8]>, acl: &[Acl], stat: &StatPersisted) {
        let mut key = Vec::new();
        for a in acl {
            zk_proto::Jute::write(a, &mut key);
        }
        let next = self.acls.len() as u32;
        let index = *self.acls.entry(key).or_insert_with(|| {
            put_acl_record(&mut self.out, next, acl);
            next
        });
        let rank = match parent_of(path) {
            Some(p) if path != "/" => {
                let r = self.ranks.entry(p.to_string()).or_insert(0);
                *r += 1;
                *r - 1
            }
            _ => 0,
        };
        put_node(&mut self.out, path.as_bytes(), data, index, rank, stat, None, None);
        self.nodes += 1;
    }

    /// Takes the content written so far (keep feeding it to a loader to bound memory).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Writes the end record and returns the rest of the content. It records no end state: a
    /// tree from another source comes with no digest of its own to check ([`Recovery`] reports
    /// [`Unverifiable::NoEndState`]).
    pub fn finish(mut self) -> Vec<u8> {
        put_end(&mut self.out, self.nodes, self.acls.len() as u32, self.sessions, None);
        self.out
    }
}

// ---------------------------------------------------------------------------------------------
// Replay

/// Whether the snapshot a [`Recovery`] started from reproduced the tree digest it recorded
/// (see the module docs): [`Recovery::snapshot_check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotCheck {
    /// Loading the snapshot and replaying the log exactly through `zxid` (its end zxid) gave
    /// the tree digest it recorded.
    Verified {
        /// The snapshot's end zxid.
        zxid: i64,
        /// The digest, recorded and found.
        digest: i64,
    },
    /// Loading the snapshot and replaying the log exactly through `zxid` gave another tree
    /// digest than the recorded one: the snapshot (or the log replayed over it) does not hold
    /// the state it was taken from. Refuse it and fall back to an older snapshot.
    Mismatch {
        /// The snapshot's end zxid, where the digests were compared.
        zxid: i64,
        /// The digest the snapshot recorded.
        want: i64,
        /// The digest of the tree loaded and replayed through `zxid`.
        got: i64,
    },
    /// No verdict: nothing to compare, or the replay never stood at the end zxid.
    Unverifiable {
        /// Why.
        why: Unverifiable,
    },
}

/// Why a [`SnapshotCheck`] could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unverifiable {
    /// The database was not loaded from zkrs snapshot content (a fresh one, with no snapshot to
    /// start from), or it applied txns after it was loaded.
    NoSnapshot,
    /// The content records no end state: content `version` 1 (written before end states were
    /// recorded), or content built from another source by a [`ContentBuilder`] (an import, a
    /// SNAP received).
    NoEndState {
        /// The content version.
        version: u32,
    },
    /// The snapshot was written by a database that kept no tree digest (a standalone
    /// server's: [`TreeConfig::tree_digest`] off): it records its end zxid only.
    NoDigest {
        /// The snapshot's end zxid.
        end_zxid: i64,
    },
    /// The replay has not applied the end zxid: the log replayed so far ends at `last_zxid`,
    /// before it.
    LogEndsBefore {
        /// The snapshot's end zxid.
        end_zxid: i64,
        /// The last zxid replayed (the start zxid if none was).
        last_zxid: i64,
    },
    /// The replay went from `before` straight to `after`, over the end zxid: the log lacks the
    /// txn the snapshot ended at, and the state at the end zxid was never there to compare.
    EndZxidMissing {
        /// The snapshot's end zxid.
        end_zxid: i64,
        /// The last zxid replayed below it (the start zxid if none was).
        before: i64,
        /// The first zxid replayed above it.
        after: i64,
    },
}

impl std::fmt::Display for SnapshotCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotCheck::Verified { zxid, digest } => {
                write!(f, "verified: tree digest {digest:#x} at its end zxid {zxid:#x}, as recorded")
            }
            SnapshotCheck::Mismatch { zxid, want, got } => write!(
                f,
                "mismatch: tree digest {got:#x} at its end zxid {zxid:#x}, where it recorded {want:#x}"
            ),
            SnapshotCheck::Unverifiable { why } => write!(f, "unverifiable: {why}"),
        }
    }
}

impl std::fmt::Display for Unverifiable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unverifiable::NoSnapshot => write!(f, "the database was not loaded from a snapshot"),
            Unverifiable::NoEndState { version } => {
                write!(f, "the snapshot (content version {version}) records no end state")
            }
            Unverifiable::NoDigest { end_zxid } => {
                write!(f, "the snapshot records no tree digest (only its end zxid {end_zxid:#x})")
            }
            Unverifiable::LogEndsBefore { end_zxid, last_zxid } => write!(
                f,
                "the replay ends at zxid {last_zxid:#x}, before the snapshot's end zxid {end_zxid:#x}"
            ),
            Unverifiable::EndZxidMissing { end_zxid, before, after } => write!(
                f,
                "the log goes from zxid {before:#x} to {after:#x}, without the snapshot's end zxid \
                 {end_zxid:#x}"
            ),
        }
    }
}

/// Scratch space [`Recovery::warm`] reuses from one call to the next.
#[derive(Debug, Default)]
pub struct WarmScratch {
    hashes: Vec<(u32, Slot)>,
}

/// Where a [`Recovery`]'s check of its snapshot stands.
#[derive(Debug, Clone, Copy)]
enum CheckState {
    /// Compare the digest with `want` once the replay has applied exactly `end_zxid`.
    Waiting { end_zxid: i64, want: i64 },
    /// Settled.
    Done(SnapshotCheck),
}

/// Recovery after loading: replays the logged txns above the snapshot's start zxid
/// idempotently, checks the snapshot against the tree digest it recorded, then starts the
/// session clocks. Use it for every restart (with a fresh [`Database::new`] when there is no
/// snapshot):
///
/// ```text
/// let mut rec = Recovery::new(db_from_snapshot);
/// for entry in log.read_from(rec.start_zxid() + 1)? { rec.replay(&entry.header, &entry.txn); }
/// if let SnapshotCheck::Mismatch { .. } = rec.snapshot_check() { /* try an older snapshot */ }
/// let db = rec.finish(now_ms);
/// ```
#[derive(Debug)]
pub struct Recovery {
    db: Database,
    start_zxid: i64,
    replayed: u64,
    check: CheckState,
}

impl Recovery {
    /// Starts recovering `db` (a loaded snapshot, or a fresh database). If the snapshot's end
    /// zxid is its start zxid (nothing was applied while it was written), its check is made
    /// here, on the tree as loaded.
    pub fn new(mut db: Database) -> Self {
        db.replaying = true;
        let start_zxid = db.last_applied;
        let unverifiable = |why| CheckState::Done(SnapshotCheck::Unverifiable { why });
        // A database that applied txns since it was loaded no longer stands at the content's
        // start: there is nothing to check it against.
        let check = match db.loaded_from.take().filter(|l| l.start_zxid == start_zxid) {
            None => unverifiable(Unverifiable::NoSnapshot),
            Some(LoadedContent { version, end: None, .. }) => {
                unverifiable(Unverifiable::NoEndState { version })
            }
            Some(LoadedContent { end: Some(EndState { zxid, digest: None }), .. }) => {
                unverifiable(Unverifiable::NoDigest { end_zxid: zxid })
            }
            Some(LoadedContent { end: Some(EndState { zxid, digest: Some(want) }), .. }) => {
                CheckState::Waiting { end_zxid: zxid, want }
            }
        };
        let mut rec = Recovery { db, start_zxid, replayed: 0, check };
        if let CheckState::Waiting { end_zxid, want } = rec.check {
            // The loader refuses an end zxid below the start.
            debug_assert!(end_zxid >= start_zxid);
            if end_zxid == start_zxid {
                rec.check = CheckState::Done(rec.compare(end_zxid, want));
            }
        }
        rec
    }

    /// The verdict on the tree as it stands, which must be exactly the state at `zxid`.
    fn compare(&self, zxid: i64, want: i64) -> SnapshotCheck {
        debug_assert_eq!(self.db.last_applied, zxid);
        // A database that keeps no digest (the configuration changed since the snapshot was
        // written) sums it once, here.
        let got = self.db.tree.digest().unwrap_or_else(|| self.db.tree.sum_digests());
        if got == want {
            SnapshotCheck::Verified { zxid, digest: got }
        } else {
            SnapshotCheck::Mismatch { zxid, want, got }
        }
    }

    /// Whether the snapshot this recovery started from reproduces the tree digest it recorded:
    /// [`SnapshotCheck::Verified`] or [`SnapshotCheck::Mismatch`] once the replay has applied
    /// exactly its end zxid (or at once, when that is its start zxid), else
    /// [`SnapshotCheck::Unverifiable`] with the reason; [`Unverifiable::LogEndsBefore`] while
    /// the replay has not reached the end zxid. Ask it once the log is replayed, before
    /// [`Recovery::finish`]. The verdict is made at the end zxid and later txns do not change
    /// it.
    pub fn snapshot_check(&self) -> SnapshotCheck {
        match self.check {
            CheckState::Done(c) => c,
            CheckState::Waiting { end_zxid, .. } => SnapshotCheck::Unverifiable {
                why: Unverifiable::LogEndsBefore { end_zxid, last_zxid: self.db.last_applied },
            },
        }
    }

    /// Reads ahead what replaying `txns` (the next few, in order) will look up: each path they
    /// name and its parent's ([`Recovery::replay`] changes the tree; this only reads it). A
    /// replay that calls it for each small batch before replaying the batch spends far less
    /// time waiting on memory: over a tree of millions of nodes a look-up misses the cache
    /// three or four times in a row, and these misses overlap across the batch. `scratch` is
    /// reused between calls.
    pub fn warm<'t>(&self, txns: impl IntoIterator<Item = &'t Txn>, scratch: &mut WarmScratch) {
        let mut paths: Vec<&[u8]> = Vec::with_capacity(scratch.hashes.capacity());
        fn add<'p>(paths: &mut Vec<&'p [u8]>, txn: &'p Txn) {
            let (path, parent) = match txn {
                Txn::Create(t) => (&t.path, true),
                Txn::CreateTtl(t) => (&t.path, true),
                Txn::CreateContainer(t) => (&t.path, true),
                Txn::Delete(t) | Txn::DeleteContainer(t) => (&t.path, true),
                Txn::SetData(t) => (&t.path, false),
                Txn::SetAcl(t) => (&t.path, false),
                Txn::Multi(subs) => {
                    for (_, sub) in subs {
                        if !matches!(sub, Txn::Multi(_)) {
                            add(paths, sub);
                        }
                    }
                    return;
                }
                _ => return,
            };
            paths.push(path.as_bytes());
            if parent {
                if let Some(p) = parent_of(path) {
                    paths.push(p.as_bytes());
                }
            }
        }
        for t in txns {
            add(&mut paths, t);
        }
        self.db.tree.nodes.warm(&paths, &mut scratch.hashes);
    }

    /// The snapshot's start zxid: replay the log from the zxid after it.
    pub fn start_zxid(&self) -> i64 {
        self.start_zxid
    }

    /// Txns replayed so far.
    pub fn replayed(&self) -> u64 {
        self.replayed
    }

    /// Zxid of the last txn replayed (the start zxid before any).
    pub fn last_zxid(&self) -> i64 {
        self.db.last_applied
    }

    /// The state so far.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Applies one logged txn; txns at or below the start zxid are already in the snapshot and
    /// are skipped (returns false). A txn that does not apply over the fuzzy state (a create of
    /// a present node, a delete of a missing one) is expected and changes nothing that a later
    /// txn would not set anyway. No watch events are produced (nobody watches yet).
    pub fn replay(&mut self, hdr: &TxnHeader, txn: &Txn) -> bool {
        if hdr.zxid <= self.start_zxid {
            return false;
        }
        if let CheckState::Waiting { end_zxid, .. } = self.check {
            if hdr.zxid > end_zxid {
                // Zxids may skip (a new epoch restarts the counter), but the end zxid is one
                // the snapshot's database applied, so its log holds it: without it, the state
                // at the end zxid is never there to compare.
                let why =
                    Unverifiable::EndZxidMissing { end_zxid, before: self.db.last_applied, after: hdr.zxid };
                self.check = CheckState::Done(SnapshotCheck::Unverifiable { why });
            }
        }
        let _ = self.db.apply(hdr, txn);
        self.replayed += 1;
        if let CheckState::Waiting { end_zxid, want } = self.check {
            if hdr.zxid == end_zxid {
                self.check = CheckState::Done(self.compare(end_zxid, want));
            }
        }
        true
    }

    /// Ends recovery: quota stats are recomputed from the tree (as Apache does on load), and
    /// every session is live and expires its timeout after `now_ms` on the caller's monotonic
    /// clock (as Apache's session tracker starts the sessions it restores). The database
    /// handed over gets a new identity ([`crate::DatabaseId`]): no cursor begun on
    /// [`Recovery::database`] steps it.
    pub fn finish(mut self, now_ms: u64) -> Database {
        self.db.replaying = false;
        // The recovered database is another state than the one being recovered: a cursor begun
        // on `database()` meanwhile does not step it.
        self.db.renew_id();
        self.db.tree.recompute_quotas();
        self.db.start_leading(now_ms);
        self.db
    }
}
