//! The tree as Zab's SNAP sync carries it: Apache ZooKeeper's own DataTree serialization, which a
//! leader writes straight onto the quorum socket after the SNAP packet and a learner reads back.
//! zkrs speaks it both ways, so zkrs and Apache servers can sync from each other.
//!
//! # Layout (jute, big-endian; `ustring`/`buffer` = i32 length + bytes, -1 = null)
//! ```text
//! i32 n, n × {i64 session id, i32 timeout ms}
//! i32 n, n × {i64 ACL key, vector<ACL{i32 perms, ustring scheme, ustring id}>}
//! nodes, pre-order from the root: {ustring path, buffer data, i64 ACL key,
//!     StatPersisted{i64 czxid, mzxid, ctime, mtime, i32 version, cversion, aversion,
//!                   i64 ephemeralOwner, pzxid}}
//!     the root's path is written as "", the others in full ("/a/b")
//! ustring "/"            (ends the nodes)
//! ustring "BenWasHere"   (Apache's signature; the next QuorumPacket follows at once)
//! ```
//! No header, no length, no checksum and no digest: the stream ends where the signature does.
//! ACL key -1 is world:anyone with every permission and is never in the map; Apache gives it to
//! the nodes it makes itself ("/", "/zookeeper", "/zookeeper/quota") and numbers every other ACL
//! list 1, 2, ... by first use. Cversion is the stored one (creates of children).
//! A capture from Apache 3.8 (`tests/data/`, `tests/apache_snap_capture.rs`) pins all of this.
//!
//! # Writing: [`Database::apache_snap_begin`] and [`Database::apache_snap_step`]
//! A fuzzy serialization in bounded steps, so the leader applies writes between them and never
//! holds a copy of the tree: the sessions are copied at begin (as [`Database::snapshot_begin`]
//! does), then the ACL lists in use are found by a walk over the node slots, written, and the
//! nodes follow depth first. A node's child list (slots, 4 bytes each) is taken when the node is
//! written, in Apache's own order (Java HashSet iteration, [`crate::java`]), as Apache copies its
//! child array at the same point; a child gone by the time its turn comes is skipped. The stream
//! is therefore always in pre-order, and every node is captured as it was at some moment after
//! the begin zxid `S`. The learner then applies every committed txn above `S`.
//!
//! Every node created above `S` (czxid > S) is left out, with its subtree (whose nodes were all
//! created after it): the learner's applies of their creates bring them back. That is what
//! lets the learner apply those txns plainly, as a learner applies any commit (zk-server does,
//! and an Apache learner applies create2, createTTL and createContainer without repairing the
//! parent of a node it finds present), and still end with the leader's tree, stat for stat:
//! - A child is captured as a slot, and a slot freed after its parent was written can be taken
//!   by a new sibling before its turn. Such a node was created after its parent was captured, so
//!   the parent as written does not count it; streamed, its replayed create would find it
//!   present and leave the parent's cversion and pzxid behind (until the next create under that
//!   parent), and the next sequential name there would differ from the leader's. Left out, its
//!   create applies as on the leader and moves the parent.
//! - A node created above `S` but before its parent was written is counted by the parent as
//!   written; its create, applied again, finds the parent's cversion already there and changes
//!   nothing else. So leaving it out costs nothing but the bytes saved.
//! - A node of `S` or older is the node its slot held when the parent was written (slots only
//!   change hands through a create), so it is written as found; any change above `S` it has not
//!   seen yet is applied after (setData and setACL carry their versions; a delete moves the
//!   parent's pzxid whether or not it finds the node).
//!
//! Because the ACL map goes out before the nodes, a node may carry a list that is not in it: a
//! list not in use at begin, which a node of `S` or older can only have got by a setACL above
//! `S`. It is written with key -1, and the setACL applied after sets the real list.
//!
//! The cursor holds a reference to each list in the map until the signature is written, so a
//! list's address keeps naming it; a list released meanwhile leaves the ACL table at the
//! table's next sweep instead of at once.
//!
//! Sessions go out in the order Apache's copy of its session map iterates (Java HashMap order of
//! `Long` keys; ties inside one bucket, which Apache orders by insertion, by id). ACL lists are
//! numbered 1, 2, ... by the smallest czxid among the nodes using them, which is the order
//! Apache first used them in when they came with creates, whatever order the nodes were loaded
//! in. Apache's keys also carry history a tree does not hold (a list first used by a setACL, a
//! key freed when its last node went and never reused), so equal trees may be keyed
//! differently; no learner can tell.
//!
//! # Reading: [`ApacheSnapLoader`]
//! Takes the stream in pieces of any size, as they come off the socket, and says when the
//! signature has been read and how many bytes of the last piece were the stream's (the next
//! QuorumPacket starts right after). The nodes go through [`ContentBuilder`] into a
//! [`SnapshotLoader`], so the database comes out exactly as a loaded zkrs snapshot does: child
//! sets ranked in stream order (as an Apache learner rebuilds its HashSets), ephemeral,
//! container and TTL indexes, quota stats recounted, the session set; last applied zxid = the
//! SNAP packet's zxid. The learner then applies the committed txns above it with
//! [`Database::apply`], as it applies any commit (the writing notes above say why that is
//! enough for a zkrs leader's stream).
//! Apache learners rewrite /zookeeper/config from their own configuration when reconfig is off;
//! that is the caller's affair.
//!
//! Checks: the root comes first, every other node's parent is an ancestor of the node written
//! just before it (the stream is in pre-order: Apache's learner only needs the parent loaded
//! first, but both writers write depth first); a node naming an ACL key the map lacks is handled
//! as the writer's fuzzy cases above (left out with its subtree if created after the SNAP zxid,
//! else world:anyone until the replay), where an Apache learner would keep a dangling key.
//!
//! Bounded: counts are never used to reserve memory; an item cut by a piece boundary is kept
//! until it is whole, and no string, buffer or ACL list may exceed the loader's field limit, so
//! memory is the bytes seen plus the tree built. Bad input is an [`ApacheSnapError`] with the
//! stream offset, never a panic.

use crate::acl::AclRef;
use crate::database::{Database, DatabaseId};
use crate::java;
use crate::node::{Node, Slot};
use crate::snapshot::{ContentBuilder, SnapshotError, SnapshotLoader};
use crate::tree::parent_of;
use crate::{SessionId, TreeConfig};
use std::collections::HashMap;
use std::sync::Arc;
use zk_proto::{perms, Acl, Id, StatPersisted};

/// The string Apache writes after the nodes' end marker, and checks on reading.
pub const SIGNATURE: &str = "BenWasHere";
/// The ACL key meaning world:anyone with every permission, never in the ACL map.
pub const OPEN_ACL_KEY: i64 = -1;
/// Default bound on one string, buffer or ACL list in the stream: Apache's default
/// jute.maxbuffer (0xfffff), which bounds every path, data and ACL a leader accepted from a
/// client, plus 1 KiB of slack. A leader running with a larger jute.maxbuffer needs learners
/// with a matching limit ([`ApacheSnapLoader::with_max_field_bytes`]).
pub const DEFAULT_MAX_FIELD_BYTES: u32 = 0xfffff + 1024;

/// Bytes of a StatPersisted: 4 × i64, 3 × i32, 2 × i64.
const STAT_BYTES: usize = 4 * 8 + 3 * 4 + 2 * 8;

fn is_open(acl: &[Acl]) -> bool {
    matches!(acl, [a] if a.perms == perms::ALL && a.id.scheme == "world" && a.id.id == "anyone")
}

fn open_acl() -> Vec<Acl> {
    vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}

/// The nodes Apache creates with key -1 (and keeps so unless a client sets their ACL).
fn keyed_open_by_apache(path: &str) -> bool {
    matches!(path, "/" | "/zookeeper" | "/zookeeper/quota")
}

// ---------------------------------------------------------------------------------------------
// Writing

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put_buf(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        // Paths, data and ACL strings came in frames bounded by jute.maxbuffer: they fit an i32.
        Some(b) => {
            put_i32(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => put_i32(out, -1),
    }
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

/// Where the writer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Walking the slots for the ACL lists in use.
    Discover,
    /// Writing the sessions.
    Sessions,
    /// Writing the ACL map.
    Acls,
    /// Writing the root.
    Root,
    /// Writing the rest of the nodes, depth first.
    Nodes,
    /// End marker and signature written.
    Done,
}

/// A written node whose children are still being written.
#[derive(Debug)]
struct Frame {
    /// Its zkrs path ("/" for the root), to recognise its children.
    path: Box<str>,
    /// Its children when it was written, in Apache's order.
    children: Vec<Slot>,
    next: usize,
}

/// Where a SNAP stream in progress stands; made by [`Database::apache_snap_begin`], advanced by
/// [`Database::apache_snap_step`]. Holds no borrow of the database, so writes go on between
/// steps; it belongs to the database that began it ([`ApacheSnapCursor::belongs_to`]), and a
/// caller that replaces its database must drop the stream with it.
#[derive(Debug)]
pub struct ApacheSnapCursor {
    /// The database that began it, the only one it may step over.
    db: DatabaseId,
    begin_zxid: i64,
    phase: Phase,
    sessions: Vec<(SessionId, i32)>,
    next_session: usize,
    next_slot: usize,
    /// ACL lists found in use, with the smallest czxid among their nodes; once numbered, in key
    /// order (key = index + 1). Holding them keeps their addresses unique while the stream runs,
    /// so `keys` can be looked up by address.
    lists: Vec<(AclRef, i64)>,
    /// List address -> index in `lists` while discovering, key once numbered.
    keys: HashMap<usize, i64>,
    next_list: usize,
    stack: Vec<Frame>,
    nodes_written: u64,
    nodes_left_out: u64,
    placeholders: u64,
}

impl ApacheSnapCursor {
    /// The last applied zxid when the stream began: send it as the SNAP packet's zxid, and the
    /// learner replays every txn above it.
    pub fn begin_zxid(&self) -> i64 {
        self.begin_zxid
    }

    /// Nodes written so far.
    pub fn nodes_written(&self) -> u64 {
        self.nodes_written
    }

    /// Nodes (with their subtrees, counted once) left out because they were created after the
    /// begin zxid (the learner's applies of the txns above it create them).
    pub fn nodes_left_out(&self) -> u64 {
        self.nodes_left_out
    }

    /// Nodes written with key -1 because their ACL list was set after the begin zxid and is not
    /// in the map (the replayed setACL restores it).
    pub fn acl_placeholders(&self) -> u64 {
        self.placeholders
    }

    /// Whether the signature has been written.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The identity of the database that began it.
    pub fn database_id(&self) -> DatabaseId {
        self.db
    }

    /// Whether it was begun on `db`, the only database it may be stepped over.
    pub fn belongs_to(&self, db: &Database) -> bool {
        self.db == db.id()
    }

    /// The key of `n`'s ACL, or None if the list is not in the map.
    fn key_of(&self, n: &Node) -> Option<i64> {
        if keyed_open_by_apache(n.path()) && is_open(&n.acl) {
            return Some(OPEN_ACL_KEY);
        }
        self.keys.get(&(Arc::as_ptr(&n.acl) as usize)).copied()
    }
}

/// Numbers the lists found: by the smallest czxid among their nodes, then by the order they were
/// found. Apache numbers a list when it is first used, so for a tree whose lists came with
/// creates this gives Apache's keys, whatever slots or order the nodes were loaded in.
fn number_lists(cur: &mut ApacheSnapCursor) {
    let mut order: Vec<(i64, usize)> = cur.lists.iter().enumerate().map(|(i, (_, z))| (*z, i)).collect();
    order.sort_unstable();
    let mut lists = Vec::with_capacity(order.len());
    cur.keys.clear();
    for (_, i) in order {
        let list = cur.lists[i].clone();
        cur.keys.insert(Arc::as_ptr(&list.0) as usize, lists.len() as i64 + 1);
        lists.push(list);
    }
    cur.lists = lists;
}

/// Java's `Long.hashCode`, spread as HashMap and ConcurrentHashMap spread it.
fn long_spread(v: i64) -> u32 {
    let h = (v ^ ((v as u64) >> 32) as i64) as u32;
    h ^ (h >> 16)
}

/// The sessions in the order Apache writes them: it copies its ConcurrentHashMap of sessions
/// into a `new HashMap<>(map)` and iterates that. A copy's bucket comes first; inside one, entries
/// keep the order the source map gave them, which is its own bucket order (a table that doubled
/// whenever it reached three quarters full, from 16), then insertion order, which a session
/// table does not keep: ties go by id.
fn apache_session_order(mut sessions: Vec<(SessionId, i32)>) -> Vec<(SessionId, i32)> {
    let copy_cap = java::capacity_for_copy(sessions.len()) as u32;
    let mut chm_cap = 16u32;
    while sessions.len() as u64 >= (chm_cap as u64 * 3) / 4 && chm_cap < (1 << 30) {
        chm_cap *= 2;
    }
    sessions.sort_by_key(|&(id, _)| {
        let h = long_spread(id);
        (h & (copy_cap - 1), h & (chm_cap - 1), id)
    });
    sessions
}

impl Database {
    /// Starts a SNAP stream of the state as of the last applied txn
    /// ([`ApacheSnapCursor::begin_zxid`]). Cheap: copies the session table (id, timeout) and
    /// nothing else.
    pub fn apache_snap_begin(&self) -> ApacheSnapCursor {
        ApacheSnapCursor {
            db: self.id,
            begin_zxid: self.last_applied,
            phase: Phase::Discover,
            sessions: apache_session_order(self.sessions.iter().collect()),
            next_session: 0,
            next_slot: 0,
            lists: Vec::new(),
            keys: HashMap::new(),
            next_list: 0,
            stack: Vec::new(),
            nodes_written: 0,
            nodes_left_out: 0,
            placeholders: 0,
        }
    }

    /// Appends the next part of the stream to `out`: at most `max_items` sessions, ACL lists or
    /// nodes, visiting at most `4 × max_items` node slots or children (so neither a slab full of
    /// holes nor a run of vanished children makes a step long). A node's children are ordered
    /// when it is written, which costs `O(k log k)` for `k` children in that one step, as Apache
    /// copies its child array. Returns true once the signature has been written; further calls
    /// append nothing and return true. The caller may apply any txns between steps (see the
    /// module docs).
    ///
    /// Panics if `cur` was begun on another database ([`ApacheSnapCursor::belongs_to`]): a
    /// caller that replaces its database must drop the streams under way, which over the new
    /// tree would silently lack nodes.
    pub fn apache_snap_step(&self, cur: &mut ApacheSnapCursor, out: &mut Vec<u8>, max_items: usize) -> bool {
        self.apache_snap_step_bytes(cur, out, max_items, usize::MAX)
    }

    /// [`Self::apache_snap_step`], also ending the step once it has appended `max_bytes` or
    /// more (it appends at least one item, and at most one item past the bound: a node is
    /// written whole), so a step of large nodes stays near `max_bytes` whatever `max_items`.
    pub fn apache_snap_step_bytes(
        &self,
        cur: &mut ApacheSnapCursor,
        out: &mut Vec<u8>,
        max_items: usize,
        max_bytes: usize,
    ) -> bool {
        self.assert_cursor_of(cur.db, "a SNAP stream cursor");
        let budget = max_items.max(1);
        let mut visits = budget.saturating_mul(4);
        let mut items = 0usize;
        let tree = &self.tree;
        let start = out.len();
        while items < budget && visits > 0 && out.len() - start < max_bytes {
            match cur.phase {
                Phase::Discover => {
                    let slots = tree.nodes.slot_count();
                    if cur.next_slot >= slots {
                        number_lists(cur);
                        cur.phase = Phase::Sessions;
                        put_i32(out, cur.sessions.len() as i32);
                        continue;
                    }
                    let slot = cur.next_slot as Slot;
                    cur.next_slot += 1;
                    visits -= 1;
                    let Some(n) = tree.nodes.node(slot) else { continue };
                    // A node created after the begin zxid is left out of the stream: its list
                    // is not needed.
                    let left_out = n.stat.czxid > cur.begin_zxid;
                    if left_out || (keyed_open_by_apache(n.path()) && is_open(&n.acl)) {
                        continue;
                    }
                    let at = Arc::as_ptr(&n.acl) as usize;
                    match cur.keys.get(&at) {
                        Some(&i) => {
                            let first = &mut cur.lists[i as usize].1;
                            *first = (*first).min(n.stat.czxid);
                        }
                        None => {
                            cur.keys.insert(at, cur.lists.len() as i64);
                            cur.lists.push((n.acl.clone(), n.stat.czxid));
                        }
                    }
                }
                Phase::Sessions => {
                    let Some(&(id, timeout)) = cur.sessions.get(cur.next_session) else {
                        cur.sessions = Vec::new();
                        cur.phase = Phase::Acls;
                        put_i32(out, cur.lists.len() as i32);
                        continue;
                    };
                    put_i64(out, id);
                    put_i32(out, timeout);
                    cur.next_session += 1;
                    items += 1;
                }
                Phase::Acls => {
                    let Some((list, _)) = cur.lists.get(cur.next_list) else {
                        cur.phase = Phase::Root;
                        continue;
                    };
                    put_i64(out, cur.next_list as i64 + 1);
                    put_i32(out, list.len() as i32);
                    for a in list.iter() {
                        put_i32(out, a.perms);
                        put_buf(out, Some(a.id.scheme.as_bytes()));
                        put_buf(out, Some(a.id.id.as_bytes()));
                    }
                    cur.next_list += 1;
                    items += 1;
                }
                Phase::Root => {
                    cur.phase = Phase::Nodes;
                    // The root always exists; a tree without one writes no nodes at all.
                    if let Some(slot) = tree.nodes.find("/") {
                        self.write_node(cur, out, slot);
                    }
                    items += 1;
                }
                Phase::Nodes => {
                    let Some(top) = cur.stack.last_mut() else {
                        put_buf(out, Some(b"/"));
                        put_buf(out, Some(SIGNATURE.as_bytes()));
                        cur.phase = Phase::Done;
                        // The map's references go back now, not when the cursor is dropped.
                        cur.lists = Vec::new();
                        cur.keys = HashMap::new();
                        break;
                    };
                    let Some(&slot) = top.children.get(top.next) else {
                        cur.stack.pop();
                        continue;
                    };
                    top.next += 1;
                    visits -= 1;
                    // The slot may have been freed, or reused by a node elsewhere, since the
                    // parent was written: only a node under that parent is its child. A node
                    // that took it under the same parent is newer than the begin zxid, and
                    // `write_node` leaves it out.
                    let is_child = tree
                        .nodes
                        .node(slot)
                        .is_some_and(|n| parent_of(n.path()) == Some(&*top.path) && n.path() != "/");
                    if is_child && self.write_node(cur, out, slot) {
                        items += 1;
                    }
                }
                Phase::Done => break,
            }
        }
        cur.phase == Phase::Done
    }

    /// Writes the node in `slot` and pushes its children; false if it was left out (created
    /// after the begin zxid: see the module docs).
    fn write_node(&self, cur: &mut ApacheSnapCursor, out: &mut Vec<u8>, slot: Slot) -> bool {
        let tree = &self.tree;
        let Some(n) = tree.nodes.node(slot) else { return false };
        if n.stat.czxid > cur.begin_zxid {
            cur.nodes_left_out += 1;
            return false;
        }
        let key = match cur.key_of(n) {
            Some(k) => k,
            None => {
                cur.placeholders += 1;
                OPEN_ACL_KEY
            }
        };
        let path = n.path();
        put_buf(out, Some(if path == "/" { b"" } else { path.as_bytes() }));
        put_buf(out, n.data());
        put_i64(out, key);
        put_stat(out, &n.stat_persisted());
        cur.nodes_written += 1;
        if let Some(children) = tree.nodes.children(slot).filter(|c| !c.is_empty()) {
            let cap = children.java_capacity();
            let mut order: Vec<(usize, u32, Slot)> = children
                .iter()
                .filter_map(|s| tree.nodes.node(s).map(|c| (java::bucket(c.name(), cap), c.stat.rank, s)))
                .collect();
            order.sort_unstable();
            cur.stack.push(Frame {
                path: path.into(),
                children: order.into_iter().map(|(_, _, s)| s).collect(),
                next: 0,
            });
        }
        true
    }

    /// The whole stream in one go (for tests and tools, where nothing else writes), ending with
    /// the signature.
    pub fn apache_snap_to_vec(&self) -> Vec<u8> {
        let mut cur = self.apache_snap_begin();
        let mut out = Vec::new();
        while !self.apache_snap_step(&mut cur, &mut out, usize::MAX / 8) {}
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Reading

/// Why a SNAP stream could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApacheSnapError {
    /// The bytes do not follow the layout.
    #[error("SNAP stream malformed at byte {offset}: {reason}")]
    Malformed {
        /// Offset in the stream of the item or field at fault.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A string, buffer or ACL list longer than the loader's field limit.
    #[error("SNAP stream at byte {offset}: {what} of {len} bytes exceeds the limit of {limit}")]
    TooLong {
        /// Offset of its length field.
        offset: u64,
        /// Which field.
        what: &'static str,
        /// The length read (or reached).
        len: u64,
        /// The limit.
        limit: u32,
    },
    /// [`ApacheSnapLoader::finish`] before the signature was read.
    #[error("SNAP stream cut short at byte {offset}")]
    Incomplete {
        /// Bytes read.
        offset: u64,
    },
    /// The tree the stream describes could not be built (the checks above leave nothing the
    /// snapshot loader refuses; kept typed rather than assumed away).
    #[error("SNAP stream, by byte {offset}: {source}")]
    Build {
        /// Stream bytes read when the builder refused.
        offset: u64,
        /// The builder's error (its own offsets are into zkrs's snapshot content).
        source: SnapshotError,
    },
}

fn malformed(offset: u64, reason: impl Into<String>) -> ApacheSnapError {
    ApacheSnapError::Malformed { offset, reason: reason.into() }
}

/// What one [`ApacheSnapLoader::feed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of the piece that belong to the stream; less than the piece only when `done`, and
    /// the rest is the next QuorumPacket's.
    pub consumed: usize,
    /// The signature has been read: call [`ApacheSnapLoader::finish`].
    pub done: bool,
}

/// Counts of what a stream held, for log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApacheSnapStats {
    /// Sessions read.
    pub sessions: u64,
    /// ACL lists in the map.
    pub acl_lists: u64,
    /// Nodes loaded (the root included).
    pub nodes: u64,
    /// Nodes left out: an unknown ACL key on a node created after the SNAP zxid, and their
    /// descendants.
    pub nodes_left_out: u64,
    /// Nodes given world:anyone for an unknown ACL key (created at or before the SNAP zxid).
    pub acl_placeholders: u64,
}

/// Which item comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    SessionCount,
    Sessions(u32),
    AclCount,
    Acls(u32),
    Root,
    Nodes,
    Signature,
    Done,
}

/// Parsing an item ran past the bytes at hand, or found them bad.
enum Short {
    /// The item needs at least this many bytes in all.
    Need(usize),
    Bad(ApacheSnapError),
}

impl From<ApacheSnapError> for Short {
    fn from(e: ApacheSnapError) -> Short {
        Short::Bad(e)
    }
}

/// A reader over the bytes at hand, from the start of one item.
struct Input<'a> {
    b: &'a [u8],
    pos: usize,
    base: u64,
    limit: u32,
}

impl<'a> Input<'a> {
    fn at(&self) -> u64 {
        self.base + self.pos as u64
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], Short> {
        if self.b.len() - self.pos < n {
            return Err(Short::Need(self.pos + n));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn i32(&mut self) -> Result<i32, Short> {
        let s = self.take(4)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i64(&mut self) -> Result<i64, Short> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_be_bytes(a))
    }
    /// A buffer; None for length -1.
    fn buf(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, Short> {
        let at = self.at();
        let len = self.i32()?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(malformed(at, format!("{what}: negative length {len}")).into());
        }
        if len as u32 > self.limit {
            return Err(
                ApacheSnapError::TooLong { offset: at, what, len: len as u64, limit: self.limit }.into()
            );
        }
        Ok(Some(self.take(len as usize)?))
    }
    /// A string that may not be null.
    fn str(&mut self, what: &'static str) -> Result<&'a str, Short> {
        let at = self.at();
        let b = self.buf(what)?.ok_or_else(|| malformed(at, format!("{what} is null")))?;
        Ok(std::str::from_utf8(b).map_err(|_| malformed(at, format!("{what} is not UTF-8")))?)
    }
    fn stat(&mut self) -> Result<StatPersisted, Short> {
        // Ask for the whole stat at once, so a cut stat is waited for in one go.
        self.take(STAT_BYTES)?;
        self.pos -= STAT_BYTES;
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
}

/// One item, parsed whole; nothing is changed until it is.
enum Item<'a> {
    Count(i32),
    Session(SessionId, i32),
    AclList(i64, Vec<Acl>),
    Node { path: &'a str, data: Option<&'a [u8]>, key: i64, stat: StatPersisted },
    EndOfNodes,
    Signature,
}

/// Nodes between hand-overs of built content to the snapshot loader, bounding the content
/// buffered in between.
const NODES_PER_FLUSH: u64 = 1024;

/// Builds a [`Database`] from a SNAP stream fed in pieces of any size. See the module docs.
#[derive(Debug)]
pub struct ApacheSnapLoader {
    zxid: i64,
    limit: u32,
    stage: Stage,
    /// The start of an item cut by a piece boundary, and the length it needs before parsing is
    /// worth trying again.
    pending: Vec<u8>,
    need: usize,
    /// Stream bytes consumed by whole items.
    offset: u64,
    acls: HashMap<i64, Vec<Acl>>,
    /// The path of the node written last (the root as ""), with the length of each of its
    /// ancestors' paths (itself included) and whether that one was left out.
    chain: String,
    chain_marks: Vec<(usize, bool)>,
    builder: ContentBuilder,
    loader: SnapshotLoader,
    stats: ApacheSnapStats,
    failed: Option<ApacheSnapError>,
}

impl ApacheSnapLoader {
    /// A loader for the stream following a SNAP packet whose zxid is `zxid`, for a database
    /// with configuration `cfg`, with [`DEFAULT_MAX_FIELD_BYTES`].
    pub fn new(cfg: TreeConfig, zxid: i64) -> Self {
        ApacheSnapLoader {
            zxid,
            limit: DEFAULT_MAX_FIELD_BYTES,
            stage: Stage::SessionCount,
            pending: Vec::new(),
            need: 0,
            offset: 0,
            acls: HashMap::new(),
            chain: String::new(),
            chain_marks: Vec::new(),
            builder: ContentBuilder::new(zxid, 0),
            loader: SnapshotLoader::new(cfg),
            stats: ApacheSnapStats::default(),
            failed: None,
        }
    }

    /// Sets the bound on one string, buffer or ACL list (the learner's jute.maxbuffer plus
    /// its extra allowance).
    pub fn with_max_field_bytes(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// The SNAP packet's zxid, which the database will have applied.
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// Stream bytes taken so far (including those of an item not yet whole).
    pub fn offset(&self) -> u64 {
        self.offset + self.pending.len() as u64
    }

    /// Whether the signature has been read.
    pub fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// Counts so far.
    pub fn stats(&self) -> ApacheSnapStats {
        self.stats
    }

    /// Feeds the next piece. Returns how much of it was the stream's and whether the stream is
    /// complete; once it is, further calls consume nothing.
    ///
    /// Errors: [`ApacheSnapError::Malformed`] (a negative count, a null or non-UTF-8 string, a
    /// root path other than "", a node out of pre-order or with an empty name, a wrong
    /// signature, a repeated ACL key), [`ApacheSnapError::TooLong`], or
    /// [`ApacheSnapError::Build`]. After an error the loader is spent: every later call returns
    /// the same error.
    pub fn feed(&mut self, data: &[u8]) -> Result<Fed, ApacheSnapError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.feed_inner(data);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn feed_inner(&mut self, data: &[u8]) -> Result<Fed, ApacheSnapError> {
        let mut used = 0usize;
        if !self.pending.is_empty() {
            loop {
                let take = (self.need - self.pending.len()).min(data.len() - used);
                self.pending.extend_from_slice(&data[used..used + take]);
                used += take;
                if self.pending.len() < self.need {
                    return Ok(Fed { consumed: used, done: false });
                }
                let pending = std::mem::take(&mut self.pending);
                match self.item(&pending)? {
                    None => {
                        // `need` grew: `item` set it; keep the bytes and read on.
                        self.pending = pending;
                    }
                    Some(len) => {
                        // `need` was exact, so the item ends where the kept bytes do.
                        debug_assert_eq!(len, pending.len());
                        self.offset += len as u64;
                        break;
                    }
                }
            }
        }
        while self.stage != Stage::Done && used < data.len() {
            match self.item(&data[used..])? {
                Some(len) => {
                    used += len;
                    self.offset += len as u64;
                }
                None => {
                    self.pending.extend_from_slice(&data[used..]);
                    used = data.len();
                }
            }
        }
        self.flush()?;
        Ok(Fed { consumed: used, done: self.stage == Stage::Done })
    }

    /// Parses and takes in the item at the start of `b`: Some(its length), or None if `b` holds
    /// only part of it (then `self.need` says how much is needed).
    fn item(&mut self, b: &[u8]) -> Result<Option<usize>, ApacheSnapError> {
        let base = self.offset;
        let mut input = Input { b, pos: 0, base, limit: self.limit };
        let item = match self.parse(&mut input) {
            Ok(item) => item,
            Err(Short::Need(n)) => {
                self.need = n;
                return Ok(None);
            }
            Err(Short::Bad(e)) => return Err(e),
        };
        let len = input.pos;
        self.take_in(item, base)?;
        Ok(Some(len))
    }

    fn parse<'a>(&self, input: &mut Input<'a>) -> Result<Item<'a>, Short> {
        Ok(match self.stage {
            Stage::SessionCount | Stage::AclCount => Item::Count(input.i32()?),
            Stage::Sessions(_) => Item::Session(input.i64()?, input.i32()?),
            Stage::Acls(_) => {
                let key = input.i64()?;
                let at = input.at();
                let count = input.i32()?;
                if count < 0 {
                    return Err(malformed(at, format!("ACL list of key {key} has count {count}")).into());
                }
                let start = input.pos;
                let mut acl = Vec::new();
                for _ in 0..count {
                    let perms = input.i32()?;
                    let scheme = input.str("ACL scheme")?.to_string();
                    let id = input.str("ACL id")?.to_string();
                    acl.push(Acl { perms, id: Id { scheme, id } });
                    if input.pos - start > self.limit as usize {
                        let (len, limit) = ((input.pos - start) as u64, self.limit);
                        return Err(
                            ApacheSnapError::TooLong { offset: at, what: "ACL list", len, limit }.into()
                        );
                    }
                }
                Item::AclList(key, acl)
            }
            Stage::Root | Stage::Nodes => {
                let path = input.str("node path")?;
                if path == "/" {
                    Item::EndOfNodes
                } else {
                    let data = input.buf("node data")?;
                    let key = input.i64()?;
                    let stat = input.stat()?;
                    Item::Node { path, data, key, stat }
                }
            }
            Stage::Signature => {
                let at = input.at();
                let s = input.buf("signature")?;
                if s != Some(SIGNATURE.as_bytes()) {
                    let got = s.map(String::from_utf8_lossy);
                    return Err(malformed(at, format!("signature {got:?}, expected {SIGNATURE:?}")).into());
                }
                Item::Signature
            }
            Stage::Done => return Err(malformed(input.at(), "item after the signature").into()),
        })
    }

    fn take_in(&mut self, item: Item<'_>, at: u64) -> Result<(), ApacheSnapError> {
        match item {
            Item::Count(n) => {
                if n < 0 {
                    return Err(malformed(at, format!("negative count {n}")));
                }
                let n = n as u32;
                self.stage = match self.stage {
                    Stage::SessionCount if n == 0 => Stage::AclCount,
                    Stage::SessionCount => Stage::Sessions(n),
                    _ if n == 0 => Stage::Root,
                    _ => Stage::Acls(n),
                };
            }
            Item::Session(id, timeout) => {
                self.builder.session(id, timeout);
                self.stats.sessions += 1;
                if let Stage::Sessions(left) = self.stage {
                    self.stage = if left > 1 { Stage::Sessions(left - 1) } else { Stage::AclCount };
                }
            }
            Item::AclList(key, acl) => {
                if self.acls.insert(key, acl).is_some() {
                    return Err(malformed(at, format!("ACL key {key} appears twice")));
                }
                self.stats.acl_lists += 1;
                if let Stage::Acls(left) = self.stage {
                    self.stage = if left > 1 { Stage::Acls(left - 1) } else { Stage::Root };
                }
            }
            Item::EndOfNodes => {
                if self.stage == Stage::Root {
                    return Err(malformed(at, "the stream has no root node"));
                }
                self.stage = Stage::Signature;
            }
            Item::Signature => self.stage = Stage::Done,
            Item::Node { path, data, key, stat } => self.node(path, data, key, stat, at)?,
        }
        Ok(())
    }

    fn node(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        key: i64,
        stat: StatPersisted,
        at: u64,
    ) -> Result<(), ApacheSnapError> {
        let parent_left_out = if self.stage == Stage::Root {
            if !path.is_empty() {
                return Err(malformed(at, format!("the first node is {path:?}, not the root (\"\")")));
            }
            self.stage = Stage::Nodes;
            false
        } else {
            let cut = path.rfind('/').unwrap_or(0);
            if !path.starts_with('/') {
                return Err(malformed(at, format!("node path {path:?} is not absolute")));
            }
            if cut + 1 == path.len() || path.contains("//") {
                return Err(malformed(at, format!("node path {path:?} has an empty name")));
            }
            // The parent must be an ancestor of the node before (pre-order).
            let parent = &path[..cut];
            while self.chain_marks.last().is_some_and(|&(len, _)| len > parent.len()) {
                self.chain_marks.pop();
            }
            match self.chain_marks.last() {
                Some(&(len, left_out)) if len == parent.len() && self.chain[..len] == *parent => {
                    self.chain.truncate(len);
                    left_out
                }
                _ => {
                    return Err(malformed(
                        at,
                        format!("node {path} does not follow its parent (the stream is not in pre-order)"),
                    ))
                }
            }
        };
        let open;
        let acl: Option<&[Acl]> = if parent_left_out {
            None
        } else if key == OPEN_ACL_KEY {
            open = open_acl();
            Some(&open)
        } else if let Some(a) = self.acls.get(&key) {
            Some(a)
        } else if stat.czxid > self.zxid {
            None
        } else {
            self.stats.acl_placeholders += 1;
            open = open_acl();
            Some(&open)
        };
        self.chain.push_str(&path[self.chain.len()..]);
        self.chain_marks.push((path.len(), acl.is_none()));
        let Some(acl) = acl else {
            self.stats.nodes_left_out += 1;
            return Ok(());
        };
        let zk_path = if path.is_empty() { "/" } else { path };
        self.builder.node(zk_path, data, acl, &stat);
        self.stats.nodes += 1;
        if self.stats.nodes.is_multiple_of(NODES_PER_FLUSH) {
            self.flush()?;
        }
        Ok(())
    }

    /// Hands the content built so far to the snapshot loader.
    fn flush(&mut self) -> Result<(), ApacheSnapError> {
        let content = self.builder.take();
        if !content.is_empty() {
            let offset = self.offset;
            self.loader.feed(&content).map_err(|source| ApacheSnapError::Build { offset, source })?;
        }
        Ok(())
    }

    /// Builds the database: the tree and sessions the stream held, with its indexes, and last
    /// applied zxid = the SNAP zxid, with an identity of its own ([`crate::DatabaseId`]). Apply
    /// the committed txns that follow with [`Database::apply`] (see the module docs).
    ///
    /// Errors: [`ApacheSnapError::Incomplete`] before the signature; the error a feed returned;
    /// [`ApacheSnapError::Build`].
    pub fn finish(mut self) -> Result<Database, ApacheSnapError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.stage != Stage::Done {
            return Err(ApacheSnapError::Incomplete { offset: self.offset() });
        }
        // `self` goes with this call: an empty builder stands in for the one finished.
        let b = std::mem::replace(&mut self.builder, ContentBuilder::new(0, 0));
        let offset = self.offset;
        let build = |source| ApacheSnapError::Build { offset, source };
        self.loader.feed(&b.finish()).map_err(build)?;
        self.loader.finish().map_err(build)
    }
}

/// Loads a whole stream from the start of `bytes`: the database and how many bytes the stream
/// took (what follows is the next QuorumPacket's).
///
/// Errors: as [`ApacheSnapLoader::feed`] and [`ApacheSnapLoader::finish`].
pub fn load_apache_snap(
    cfg: TreeConfig,
    zxid: i64,
    bytes: &[u8],
) -> Result<(Database, usize), ApacheSnapError> {
    let mut l = ApacheSnapLoader::new(cfg, zxid);
    let fed = l.feed(bytes)?;
    Ok((l.finish()?, fed.consumed))
}

#[cfg(test)]
mod tests;
