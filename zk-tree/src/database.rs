//! The database: the replicated state (DataTree with its watches, the session set, the last
//! applied zxid) and the leader-only state prep works against (outstanding changes, session
//! expiry), and its introspection.

use crate::expiry::SessionExpiry;
use crate::memory::{PendingGrowth, NODE_OVERHEAD_BYTES};
use crate::outstanding::Outstanding;
use crate::session::SessionTable;
use crate::tree::DataTree;
use crate::{SessionId, TreeConfig, WatcherId};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The identity of one [`Database`]: every database made ([`Database::new`], and so every
/// snapshot or SNAP load) gets one no other database in the process has, and
/// [`crate::Recovery::finish`] gives the database it hands over a new one. Moving a database
/// keeps it. A [`crate::SnapshotCursor`] or [`crate::apache_snap::ApacheSnapCursor`] records
/// the identity of the database that began it, and stepping it over any other database is a
/// caller bug that panics (see [`Database::snapshot_step`]): the cursor's slot position, ACL
/// numbering and sessions describe that database alone, and over another one it would write a
/// snapshot silently missing nodes.
///
/// Not replicated state: it comes from a process-wide counter, differs between servers and
/// runs, and is never serialized or part of any reply; it only tells databases apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatabaseId(u64);

impl DatabaseId {
    /// An identity not given out before in this process.
    fn fresh() -> DatabaseId {
        // Only uniqueness matters, so no ordering with other memory is needed.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        DatabaseId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Display for DatabaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The replicated state machine. See the crate docs for the write path.
///
/// Two kinds of state live here. Replicated: the tree, the session set and the last applied
/// zxid are the same on every server that applied the same txns ([`Database::apply`] is the
/// only writer). Leader-only: the outstanding changes of prepped-but-unapplied txns and the
/// sessions' expiry and closing flags, which [`Database::prep`] consults; a follower's copy is
/// idle until it leads, when [`Database::start_leading`] resets it.
///
/// Each database has an identity ([`DatabaseId`]) that the snapshot cursors begun on it
/// record. It is deliberately not `Clone`: a copy is made through a snapshot, and gets an
/// identity of its own.
#[derive(Debug)]
pub struct Database {
    pub(crate) id: DatabaseId,
    pub(crate) cfg: TreeConfig,
    pub(crate) tree: DataTree,
    pub(crate) sessions: SessionTable,
    pub(crate) last_applied: i64,
    pub(crate) outstanding: Outstanding,
    /// Leader-only: the growth of the txns prepped but not applied, for the memory brake.
    pub(crate) pending_growth: PendingGrowth,
    /// Leader-only: writes prep refused for the memory brake (see [`crate::memory`]).
    pub(crate) memory_refusals: u64,
    pub(crate) expiry: SessionExpiry,
    /// Applying txns over a fuzzy snapshot (see [`crate::snapshot::Recovery`]): a create that
    /// finds its node present still moves the parent's cversion and pzxid forward, whatever its
    /// kind.
    pub(crate) replaying: bool,
    /// What the snapshot content this database was loaded from recorded, for the check
    /// [`crate::snapshot::Recovery`] makes; taken by [`crate::snapshot::Recovery::new`].
    pub(crate) loaded_from: Option<crate::snapshot::LoadedContent>,
}

impl Database {
    /// A database holding "/", "/zookeeper", "/zookeeper/quota" and "/zookeeper/config", no
    /// sessions, last applied zxid 0.
    pub fn new(cfg: TreeConfig) -> Self {
        let mut tree = DataTree::new(cfg.extended_types_enabled);
        tree.set_digest(cfg.tree_digest);
        Database {
            id: DatabaseId::fresh(),
            tree,
            sessions: SessionTable::new(),
            outstanding: Outstanding::default(),
            pending_growth: PendingGrowth::default(),
            memory_refusals: 0,
            expiry: SessionExpiry::new(cfg.tick_ms.max(1) as u64),
            last_applied: 0,
            replaying: false,
            loaded_from: None,
            cfg,
        }
    }

    /// Writes an ensemble's membership into /zookeeper/config as an Apache member does when it
    /// loads its database: `text` as the data, the configuration's `version` as mzxid, `wall_ms`
    /// as mtime, and -1 as the stat's version (Apache passes -1 through as the version itself).
    pub fn set_config_node(&mut self, text: &str, version: i64, wall_ms: i64) {
        let data = Some(bytes::Bytes::copy_from_slice(text.as_bytes()));
        let _ = self.tree.set_data("/zookeeper/config", data, -1, version, wall_ms, &mut Vec::new());
    }

    /// This database's identity (see [`DatabaseId`]).
    pub fn id(&self) -> DatabaseId {
        self.id
    }

    /// Gives this database a new identity: it now stands for another state than the one its
    /// cursors were begun on ([`crate::Recovery::finish`]).
    pub(crate) fn renew_id(&mut self) {
        self.id = DatabaseId::fresh();
    }

    /// Panics unless `cursor_db` is this database's identity: a snapshot or SNAP cursor
    /// (`what`) may only be stepped over the database that began it. Stepping one over another
    /// is a caller bug (an internal contract, never input from outside): it would go on from a
    /// slot position, ACL numbering and sessions that describe a different tree and write a
    /// snapshot that silently lacks nodes.
    pub(crate) fn assert_cursor_of(&self, cursor_db: DatabaseId, what: &str) {
        assert!(
            cursor_db == self.id,
            "{what} begun on database {cursor_db} stepped over database {}: a cursor belongs to the \
             database that began it (abandon it when the database is replaced)",
            self.id
        );
    }

    /// The configuration in force.
    pub fn config(&self) -> &TreeConfig {
        &self.cfg
    }

    /// The tree (read-only), e.g. for snapshots.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// The tree digest once every applied txn is in (Apache's `getTreeDigest`), when
    /// [`TreeConfig::tree_digest`] is on.
    pub fn tree_digest(&self) -> Option<i64> {
        self.tree.digest()
    }

    /// The tree digest the tree will have once every txn prepped so far is applied: the digest a
    /// proposal of the txn just prepped carries. None when [`TreeConfig::tree_digest`] is off.
    pub fn pending_digest(&self) -> Option<i64> {
        let now = self.tree.digest()?;
        Some(self.outstanding.last().map_or(now, |r| r.tree_digest))
    }

    /// Zxid of the last applied txn.
    pub fn last_applied_zxid(&self) -> i64 {
        self.last_applied
    }

    /// Counts the database as having applied everything through `zxid`, without a transaction:
    /// a tree put in place by a restore carries on above every zxid its server used before, so
    /// that no zxid is used twice and no client has seen one past the server's.
    ///
    /// Panics if `zxid` is below the last applied zxid (a caller's bug).
    pub fn advance_to(&mut self, zxid: i64) {
        assert!(
            zxid >= self.last_applied,
            "zxid {zxid:#x} is below the last applied {:#x}",
            self.last_applied
        );
        self.last_applied = zxid;
    }

    /// Prepped txns not yet applied (their change records).
    pub fn outstanding_count(&self) -> usize {
        self.outstanding.len()
    }

    /// Takes back every prepped txn after `zxid` that was not applied (its proposal was refused,
    /// e.g. by a full log): later preps validate against the state as of `zxid` again. Sessions
    /// marked closing by a taken-back closeSession are the caller's to reopen
    /// ([`SessionExpiry::reopen`]).
    pub fn abandon_after(&mut self, zxid: i64) {
        self.outstanding.rollback_after(zxid);
        self.pending_growth.rollback_after(zxid);
    }

    /// The replicated session set.
    pub fn sessions(&self) -> &SessionTable {
        &self.sessions
    }

    /// Session expiry and closing flags (leader-only state).
    pub fn expiry(&self) -> &SessionExpiry {
        &self.expiry
    }

    /// Session expiry, for touching, expiring and closing (leader-only state).
    pub fn expiry_mut(&mut self) -> &mut SessionExpiry {
        &mut self.expiry
    }

    /// Resets the leader-only state for a server that starts serving writes (at start-up, or on
    /// winning an election): no outstanding changes, and every replicated session live with its
    /// timeout counted afresh from `now_ms` on the caller's monotonic clock.
    pub fn start_leading(&mut self, now_ms: u64) {
        self.outstanding = Outstanding::default();
        self.pending_growth = PendingGrowth::default();
        let sessions: Vec<(SessionId, i32)> = self.sessions.iter().collect();
        self.expiry.restart_all(sessions.into_iter(), now_ms);
    }

    /// Apache's node count, which counts the root twice (it is stored under "" and "/"): a fresh
    /// tree reports 5.
    pub fn node_count(&self) -> usize {
        self.tree.len() + 1
    }

    /// Sum of path lengths (UTF-16 units) and data lengths, as Apache's approximateDataSize.
    pub fn approximate_data_size(&self) -> u64 {
        self.tree.data_size()
    }

    /// The tree's memory as the memory brake counts it ([`crate::memory`]): the approximate data
    /// size plus [`NODE_OVERHEAD_BYTES`] a node, plus the growth of the txns prepped and not yet
    /// applied (on a leader; elsewhere none are).
    pub fn tree_memory_bytes(&self) -> u64 {
        let nodes = (self.node_count() as u64).saturating_mul(NODE_OVERHEAD_BYTES);
        self.approximate_data_size().saturating_add(nodes).saturating_add(self.pending_growth.total())
    }

    /// The memory brake's limit, bytes (`TreeConfig::memory_soft_limit_bytes`; 0 = none).
    pub fn memory_soft_limit_bytes(&self) -> u64 {
        self.cfg.memory_soft_limit_bytes
    }

    /// Whether the memory brake is on: a limit is set and [`Self::tree_memory_bytes`] is over it,
    /// so prep refuses every write that would grow the tree.
    pub fn memory_brake_on(&self) -> bool {
        let limit = self.cfg.memory_soft_limit_bytes;
        limit > 0 && self.tree_memory_bytes() > limit
    }

    /// Writes prep refused for the memory brake on this database (leader-only: a learner preps
    /// nothing).
    pub fn memory_refusals(&self) -> u64 {
        self.memory_refusals
    }

    /// Ephemeral nodes in the tree.
    pub fn ephemerals_count(&self) -> usize {
        self.tree.ephemerals().values().map(|s| s.paths.len()).sum()
    }

    /// Each session with ephemerals, with its paths sorted.
    pub fn ephemerals_by_session(&self) -> BTreeMap<SessionId, Vec<String>> {
        self.tree
            .ephemerals()
            .iter()
            .filter(|(_, s)| !s.paths.is_empty())
            .map(|(id, s)| {
                let mut v: Vec<String> = s.paths.keys().map(|p| p.to_string()).collect();
                v.sort();
                (*id, v)
            })
            .collect()
    }

    /// Watches, counted per (watcher, path, table) as Apache's "Total watches".
    pub fn watch_count(&self) -> usize {
        self.tree.watches.data.len() + self.tree.watches.child.len()
    }

    /// Data watches in total (wchs's "Total watches").
    pub fn data_watch_count(&self) -> usize {
        self.tree.watches.data.len()
    }

    /// Paths each watcher has data watches on, sorted (wchc). Apache's wchs/wchc/wchp report the
    /// data-watch table only (exist and persistent watches included), so these do too.
    pub fn watches_by_watcher(&self) -> BTreeMap<WatcherId, Vec<String>> {
        let mut m: BTreeMap<WatcherId, BTreeSet<String>> = BTreeMap::new();
        for (w, paths) in self.tree.watches.data.watchers() {
            m.entry(w).or_default().extend(paths.map(String::from));
        }
        m.into_iter().map(|(w, s)| (w, s.into_iter().collect())).collect()
    }

    /// Watchers with a data watch on each path, sorted (wchp; data table only, as Apache).
    pub fn watches_by_path(&self) -> BTreeMap<String, Vec<WatcherId>> {
        let mut m: BTreeMap<String, BTreeSet<WatcherId>> = BTreeMap::new();
        for (p, ws) in self.tree.watches.data.paths() {
            m.entry(p.to_string()).or_default().extend(ws);
        }
        m.into_iter().map(|(p, s)| (p, s.into_iter().collect())).collect()
    }

    /// Distinct paths with data watches (wchs; data table only, as Apache).
    pub fn watched_path_count(&self) -> usize {
        self.tree.watches.data.paths().map(|(p, _)| p).collect::<BTreeSet<&str>>().len()
    }

    /// Connections with at least one watch.
    pub fn watcher_count(&self) -> usize {
        let mut s: BTreeSet<WatcherId> = BTreeSet::new();
        for t in [&self.tree.watches.data, &self.tree.watches.child] {
            s.extend(t.watchers().map(|(w, _)| w));
        }
        s.len()
    }

    /// Containers and TTL nodes due for deletion at `now_ms`, at most `max`, as Apache's
    /// ContainerManager picks them: empty containers with cversion > 0 (or never used and older
    /// than `container_max_never_used_ms` when set), and empty TTL nodes with
    /// `now - mtime > ttl`. The server turns each into a DeleteContainer request.
    pub fn reapable(&self, now_ms: i64, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.tree.containers() {
            if out.len() >= max {
                return out;
            }
            let Some(n) = self.tree.get(p) else { continue };
            if n.has_children() && self.tree.num_children(n) != 0 {
                continue;
            }
            let never_used_limit = self.cfg.container_max_never_used_ms;
            if n.stat.cversion > 0
                || (never_used_limit != 0 && now_ms.saturating_sub(n.mtime()) > never_used_limit)
            {
                out.push(p.to_string());
            }
        }
        for p in self.tree.ttls() {
            if out.len() >= max {
                return out;
            }
            let Some(n) = self.tree.get(p) else { continue };
            if n.has_children() && self.tree.num_children(n) != 0 {
                continue;
            }
            let ttl = crate::node::ttl_of(n.owner());
            if ttl != 0 && now_ms.saturating_sub(n.mtime()) > ttl {
                out.push(p.to_string());
            }
        }
        out
    }
}
