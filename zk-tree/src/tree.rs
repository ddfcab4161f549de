//! The DataTree: znodes by full path, child name sets, the ephemeral/container/TTL indexes, the
//! shared ACL table and the watch tables. Mutations here are the apply side (txns already
//! validated by prep); each one fires the watches Apache's DataTree fires, in the same order.

use crate::acl::{AclRef, AclTable};
use crate::child_names::{self, ChildNames};
use crate::digest;
use crate::java;
use crate::node::{new_stat, owner_kind, Node, OwnerKind, Slot};
use crate::nodes::NodeTable;
use crate::quota::{self, QuotaRoots, StatsTrack};
use crate::watch::{WatchManager, WatchMode};
use crate::{SessionId, WatchDelivery, WatcherId};
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use zk_proto::{perms, Acl, ErrorCode, EventType, Id, KeeperState, Stat, StatPersisted, WatcherEvent};

/// The special paths Apache refuses to delete.
pub fn is_special_path(path: &str) -> bool {
    matches!(path, "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config")
}

/// Apache's parent: everything before the last '/', with "" (Apache's root key) read as "/".
pub fn parent_of(path: &str) -> Option<&str> {
    let i = path.rfind('/')?;
    Some(if i == 0 { "/" } else { &path[..i] })
}

/// Approximate size Apache charges a node: path length in UTF-16 units plus data length.
pub(crate) fn node_size(path: &str, data: Option<&[u8]>) -> u64 {
    let plen = if path.is_ascii() { path.len() } else { path.encode_utf16().count() };
    plen as u64 + data.as_ref().map_or(0, |d| d.len() as u64)
}

/// Apache's split of a path into parent ("" for top-level nodes) and last segment.
fn split_apache(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

/// One session's ephemeral paths, with what Java's HashSet order depends on.
#[derive(Debug, Default, Clone)]
pub struct EphemeralSet {
    /// Path -> insertion rank.
    pub paths: HashMap<Box<str>, u64>,
    /// Largest size reached (the Java set's capacity never shrinks).
    pub max_len: usize,
}

impl EphemeralSet {
    /// Paths in the order of a copy of Apache's set (`new HashSet<>(set)` / `clone()`), each with
    /// its rank in that copy.
    pub fn copy_order(&self) -> Vec<(String, u64)> {
        let orig_cap = java::capacity_for(self.max_len, 16);
        let mut v: Vec<(&str, u64)> = self.paths.iter().map(|(p, s)| (&**p, *s)).collect();
        java::hash_order(&mut v, orig_cap);
        let mut ranked: Vec<(String, u64)> =
            v.into_iter().enumerate().map(|(i, (p, _))| (p.to_string(), i as u64)).collect();
        let cap = java::capacity_for_copy(ranked.len());
        java::hash_order(&mut ranked, cap);
        ranked
    }
}

/// Znodes and everything indexed from them.
#[derive(Debug)]
pub struct DataTree {
    pub(crate) nodes: NodeTable,
    pub(crate) acls: AclTable,
    pub(crate) ephemerals: HashMap<SessionId, EphemeralSet>,
    pub(crate) containers: BTreeSet<Box<str>>,
    pub(crate) ttls: BTreeSet<Box<str>>,
    /// Watch tables.
    pub watches: WatchManager,
    pub(crate) quotas: QuotaRoots,
    pub(crate) extended: bool,
    pub(crate) data_size: u64,
    /// Next insertion rank of an ephemeral path in its session's set.
    pub(crate) next_rank: u64,
    /// The tree digest ([`crate::digest`]), kept up to date through every change while on.
    pub(crate) digest: Option<i64>,
}

fn open_acl() -> Vec<Acl> {
    vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}

impl DataTree {
    /// A tree holding "/", "/zookeeper", "/zookeeper/quota" and "/zookeeper/config" (world-readable,
    /// aversion -1), as Apache's DataTree starts.
    pub fn new(extended_types: bool) -> Self {
        let mut t = DataTree::empty(extended_types);
        t.add_special_nodes();
        t
    }

    /// A tree without a single node, for a snapshot loader to fill.
    pub(crate) fn empty(extended_types: bool) -> Self {
        DataTree {
            nodes: NodeTable::default(),
            acls: AclTable::default(),
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            watches: WatchManager::default(),
            quotas: QuotaRoots::default(),
            extended: extended_types,
            data_size: 0,
            next_rank: 0,
            digest: None,
        }
    }

    /// Turns the tree digest on (summing every node once) or off.
    pub(crate) fn set_digest(&mut self, on: bool) {
        self.digest = on.then(|| self.sum_digests());
    }

    /// The sum of every node's digest, from scratch.
    pub(crate) fn sum_digests(&self) -> i64 {
        (0..self.nodes.slot_count() as Slot)
            .filter_map(|s| self.nodes.node(s))
            .fold(0i64, |acc, n| acc.wrapping_add(digest::of_node(n)))
    }

    /// The tree digest (Apache's `getTreeDigest`), when kept.
    pub fn digest(&self) -> Option<i64> {
        self.digest
    }

    /// Adds (`sign` 1) or takes away (-1) a node's digest from the tree's.
    fn count_digest(&mut self, n: &Node, sign: i64) {
        if let Some(d) = self.digest.as_mut() {
            *d = d.wrapping_add(sign.wrapping_mul(digest::of_node(n)));
        }
    }

    /// Changes the node in `slot` through `f`, keeping the tree digest in step (Apache's
    /// preChange / postChange pair).
    fn change<R>(&mut self, slot: Slot, f: impl FnOnce(&mut Node) -> R) -> Option<R> {
        let n = self.nodes.node_mut(slot)?;
        let Some(d) = self.digest.as_mut() else { return Some(f(n)) };
        let before = digest::of_node(n);
        let r = f(n);
        *d = d.wrapping_add(digest::of_node(n).wrapping_sub(before));
        Some(r)
    }

    /// As [`Self::change`] for an `f` that changes the stat only (not the path or the data): the
    /// new digest follows from the old one and the two stats, without reading the data again.
    fn change_stat<R>(&mut self, slot: Slot, f: impl FnOnce(&mut Node) -> R) -> Option<R> {
        let n = self.nodes.node_mut(slot)?;
        let Some(d) = self.digest.as_mut() else { return Some(f(n)) };
        let (before, old) = (digest::of_node(n), n.stat_persisted());
        let r = f(n);
        let after = digest::restat(before, n.path_bytes(), &old, &n.stat_persisted());
        *d = d.wrapping_add(after.wrapping_sub(before));
        Some(r)
    }

    /// Adds those of "/", "/zookeeper", "/zookeeper/quota" and "/zookeeper/config" that are
    /// missing, as a fresh tree has them. A tree being loaded gets them linked by the loader.
    fn add_special_nodes(&mut self) {
        let t = self;
        let open = t.acls.intern(&open_acl());
        if !t.nodes.contains("/") {
            t.insert_raw(Node::new("/", Some(&[]), open.clone(), StatPersisted::default()));
        }
        for p in ["/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
            if t.nodes.contains(p) {
                continue;
            }
            let node = Node::new(p, Some(&[]), open.clone(), StatPersisted::default());
            let slot = t.insert_raw(node);
            t.link(parent_of(p).unwrap_or("/"), slot);
            if p == "/zookeeper/config" {
                let read =
                    vec![Acl { perms: perms::READ, id: Id { scheme: "world".into(), id: "anyone".into() } }];
                let _ = t.set_acl(p, &read, -1);
            }
        }
    }

    /// For a loaded tree: adds the special nodes a snapshot lacks (a foreign snapshot may), linked
    /// to their parents.
    pub(crate) fn ensure_special_nodes(&mut self) {
        self.add_special_nodes();
    }

    /// Recomputes every quota from the tree, as Apache does when it loads a snapshot: each
    /// `/zookeeper/quota/<path>/zookeeper_limits` node makes `<path>` a quota root, and its
    /// `zookeeper_stats` node is rewritten with the subtree's current count and bytes.
    pub(crate) fn recompute_quotas(&mut self) {
        let suffix = format!("/{}", quota::LIMIT_NODE);
        let mut roots: Vec<String> = Vec::new();
        let mut stack: Vec<Slot> = self.nodes.find(quota::QUOTA_ROOT).into_iter().collect();
        while let Some(s) = stack.pop() {
            let Some(n) = self.nodes.node(s) else { continue };
            if let Some(c) = self.nodes.children(s) {
                stack.extend(c.iter());
            }
            if let Some(prefix) = n.path().strip_suffix(suffix.as_str()) {
                // An empty prefix (a limits node right under /zookeeper/quota) is never a root,
                // as when the node is created (Apache's trie refuses it).
                match prefix.strip_prefix(quota::QUOTA_ROOT) {
                    Some(trimmed) if !trimmed.is_empty() => roots.push(trimmed.to_string()),
                    _ => {}
                }
            }
        }
        self.quotas = QuotaRoots::default();
        for r in &roots {
            self.quotas.add(r);
        }
        for r in &roots {
            self.update_quota_for_path(r);
        }
    }

    /// Removes a node and its whole subtree without events or index upkeep (a loader dropping
    /// orphans before the indexes are built), handing each node removed to `dropped`.
    pub(crate) fn drop_subtree(&mut self, slot: Slot, dropped: &mut dyn FnMut(&Node)) {
        let mut stack = vec![slot];
        while let Some(s) = stack.pop() {
            if let Some((n, children)) = self.nodes.remove_slot(s) {
                if let Some(c) = &children {
                    stack.extend(c.iter());
                }
                dropped(&n);
                self.acls.release(n.acl);
            }
        }
    }

    fn insert_raw(&mut self, node: Node) -> Slot {
        debug_assert!(!self.nodes.contains(node.path()));
        self.data_size += node_size(node.path(), node.data());
        self.count_digest(&node, 1);
        self.nodes.insert(node)
    }

    /// Adds `child` to `parent`'s children, giving it its insertion rank.
    fn link(&mut self, parent: &str, child: Slot) {
        if let Some(p) = self.nodes.find(parent) {
            self.link_slot(p, child);
        }
    }

    /// [`Self::link`] with the parent's slot.
    fn link_slot(&mut self, parent: Slot, child: Slot) {
        let Some(set) = self.nodes.children_entry(parent) else { return };
        let rank = set.insert(child);
        if let Some(c) = self.nodes.node_mut(child) {
            c.stat.rank = rank;
        }
    }

    /// Child names of a node in the order Apache lists them (Java HashSet iteration order), as
    /// owned strings: [`Self::children_ordered`] for a reply.
    pub fn child_names(&self, node: &Node) -> Vec<String> {
        self.children_ordered(node).to_vec()
    }

    /// Child names of a node in the order Apache lists them (Java HashSet iteration order), held
    /// as the jute encoding a getChildren reply carries.
    pub fn children_ordered(&self, node: &Node) -> ChildNames {
        match self.nodes.children_of(node) {
            Some(children) => child_names::ordered(&self.nodes, children),
            None => ChildNames::default(),
        }
    }

    /// Whether TTL owners are read as TTL nodes.
    pub fn extended_types(&self) -> bool {
        self.extended
    }

    /// The node at `path`.
    pub fn get(&self, path: &str) -> Option<&Node> {
        // Apache stores the root under both "" and "/", so reads of "" see the root.
        if path.is_empty() {
            return self.nodes.get("/");
        }
        self.nodes.get(path)
    }

    /// Number of znodes (the root counted once).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: the root exists.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Sum of path lengths and data lengths.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Distinct ACL lists in use.
    pub fn acl_count(&self) -> usize {
        self.acls.len()
    }

    /// Every node, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Node)> {
        self.nodes.iter().map(|n| (n.path(), n))
    }

    /// A session's ephemerals set.
    pub fn ephemerals_of(&self, s: SessionId) -> Option<&EphemeralSet> {
        self.ephemerals.get(&s)
    }

    /// All sessions' ephemeral sets.
    pub fn ephemerals(&self) -> &HashMap<SessionId, EphemeralSet> {
        &self.ephemerals
    }

    /// Container paths.
    pub fn containers(&self) -> &BTreeSet<Box<str>> {
        &self.containers
    }

    /// TTL node paths.
    pub fn ttls(&self) -> &BTreeSet<Box<str>> {
        &self.ttls
    }

    fn deliver(
        &self,
        out: &mut Vec<WatchDelivery>,
        ws: Vec<WatcherId>,
        ty: EventType,
        path: &str,
        acl: &AclRef,
    ) {
        for w in ws {
            out.push(WatchDelivery {
                watcher: w,
                event: WatcherEvent {
                    event_type: ty.code(),
                    state: KeeperState::SyncConnected.code(),
                    path: path.to_string(),
                },
                acl: Some(acl.clone()),
            });
        }
    }

    /// `DataTree.createNode`. `parent_cversion` -1 means "parent's + 1"; the parent's cversion and
    /// pzxid move only when it is larger than the stored one. Fires NodeCreated on the path's data
    /// watches, then NodeChildrenChanged on the parent's child watches.
    ///
    /// Errors: NONODE without a parent, NODEEXISTS if present.
    #[allow(clippy::too_many_arguments)]
    pub fn create_node(
        &mut self,
        path: &str,
        data: Option<Bytes>,
        acl: &[Acl],
        owner: i64,
        parent_cversion: i32,
        zxid: i64,
        time: i64,
        events: &mut Vec<WatchDelivery>,
    ) -> Result<Stat, ErrorCode> {
        let parent_path = parent_of(path).ok_or(ErrorCode::NoNode)?;
        let exists = path == "/" || self.nodes.contains(path);
        let parent_slot = self.nodes.find(parent_path).ok_or(ErrorCode::NoNode)?;
        if exists {
            return Err(ErrorCode::NodeExists);
        }
        let parent_acl = self
            .change_stat(parent_slot, |parent| {
                let cv = if parent_cversion == -1 {
                    parent.stat.cversion.wrapping_add(1)
                } else {
                    parent_cversion
                };
                if cv > parent.stat.cversion {
                    parent.stat.cversion = cv;
                    parent.stat.pzxid = zxid;
                }
                parent.acl.clone()
            })
            .ok_or(ErrorCode::NoNode)?;
        let acl_ref = self.acls.intern(acl);
        let node = Node::new(path, data.as_deref(), acl_ref.clone(), new_stat(zxid, time, owner));
        let stat = node.client_stat(self.extended, 0);
        let slot = self.insert_raw(node);
        self.link_slot(parent_slot, slot);
        match owner_kind(owner, self.extended) {
            OwnerKind::Container => {
                self.containers.insert(path.into());
            }
            OwnerKind::Ttl => {
                self.ttls.insert(path.into());
            }
            OwnerKind::Normal => {
                let rank = self.next_rank;
                self.next_rank += 1;
                let set = self.ephemerals.entry(owner).or_default();
                set.paths.insert(path.into(), rank);
                set.max_len = set.max_len.max(set.paths.len());
            }
            OwnerKind::Void => {}
        }
        self.quota_on_create(path, data.as_ref().map_or(0, |d| d.len() as i64));
        let fired = self.watches.data.trigger(path, EventType::NodeCreated);
        self.deliver(events, fired, EventType::NodeCreated, path, &acl_ref);
        let fired = self.watches.child.trigger(parent_path, EventType::NodeChildrenChanged);
        self.deliver(events, fired, EventType::NodeChildrenChanged, parent_path, &parent_acl);
        Ok(stat)
    }

    /// `setCversionPzxid`, used when replaying a create that finds its node present.
    pub fn set_cversion_pzxid(&mut self, path: &str, cversion: i32, zxid: i64) -> Result<(), ErrorCode> {
        let slot = self.nodes.find(path).ok_or(ErrorCode::NoNode)?;
        self.change_stat(slot, |n| {
            let cv = if cversion == -1 { n.stat.cversion.wrapping_add(1) } else { cversion };
            if cv > n.stat.cversion {
                n.stat.cversion = cv;
                n.stat.pzxid = zxid;
            }
        })
        .ok_or(ErrorCode::NoNode)
    }

    /// `DataTree.deleteNode`: unlinks from the parent (pzxid moves forward only), then fires
    /// NodeDeleted on the data watches, NodeDeleted on the child watches of watchers not already
    /// told, and NodeChildrenChanged on the parent.
    ///
    /// Errors: NONODE.
    pub fn delete_node(
        &mut self,
        path: &str,
        zxid: i64,
        events: &mut Vec<WatchDelivery>,
    ) -> Result<(), ErrorCode> {
        let parent_path = parent_of(path).ok_or(ErrorCode::NoNode)?;
        if path == "/" {
            return Err(ErrorCode::NoNode);
        }
        // As Apache: the parent is unlinked (and its pzxid moved) before the node is looked up.
        let slot = self.nodes.find(path);
        let parent_slot = self.nodes.find(parent_path).ok_or(ErrorCode::NoNode)?;
        if let (Some(s), Some(c)) = (slot, self.nodes.children_mut(parent_slot)) {
            c.remove(s);
        }
        let parent_acl = self
            .change_stat(parent_slot, |parent| {
                if zxid > parent.stat.pzxid {
                    parent.stat.pzxid = zxid;
                }
                parent.acl.clone()
            })
            .ok_or(ErrorCode::NoNode)?;
        let (_, node, children) = self.nodes.remove(path).ok_or(ErrorCode::NoNode)?;
        self.count_digest(&node, -1);
        self.unindex(&node);
        let data_len = node.data().map_or(0, |d| d.len() as i64);
        let Node { acl, .. } = node;
        // Prep never deletes a node with children; a replayed log that does gets its orphans purged
        // (without events) so that every stored node keeps a parent.
        if let Some(children) = children {
            let mut stack: Vec<Slot> = children.iter().collect();
            while let Some(s) = stack.pop() {
                if let Some((n, grandchildren)) = self.nodes.remove_slot(s) {
                    self.count_digest(&n, -1);
                    self.unindex(&n);
                    if let Some(c) = &grandchildren {
                        stack.extend(c.iter());
                    }
                    self.acls.release(n.acl);
                }
            }
        }
        self.quota_on_delete(path, data_len);
        let told = self.watches.data.trigger(path, EventType::NodeDeleted);
        self.deliver(events, told.clone(), EventType::NodeDeleted, path, &acl);
        let told: HashSet<WatcherId> = told.into_iter().collect();
        let fired: Vec<WatcherId> = self
            .watches
            .child
            .trigger(path, EventType::NodeDeleted)
            .into_iter()
            .filter(|w| !told.contains(w))
            .collect();
        self.deliver(events, fired, EventType::NodeDeleted, path, &acl);
        let fired = self.watches.child.trigger(parent_path, EventType::NodeChildrenChanged);
        self.deliver(events, fired, EventType::NodeChildrenChanged, parent_path, &parent_acl);
        self.acls.release(acl);
        Ok(())
    }

    /// Drops a removed node from the size total and the ephemeral/container/TTL indexes.
    fn unindex(&mut self, node: &Node) {
        let path: &str = node.path();
        self.data_size = self.data_size.saturating_sub(node_size(path, node.data()));
        let owner = node.owner();
        match owner_kind(owner, self.extended) {
            OwnerKind::Container => {
                self.containers.remove(path);
            }
            OwnerKind::Ttl => {
                self.ttls.remove(path);
            }
            OwnerKind::Normal => {
                if let Some(set) = self.ephemerals.get_mut(&owner) {
                    set.paths.remove(path);
                }
            }
            OwnerKind::Void => {}
        }
    }

    /// `DataTree.setData`: new data, mtime, mzxid and version; fires NodeDataChanged.
    ///
    /// Errors: NONODE.
    pub fn set_data(
        &mut self,
        path: &str,
        data: Option<Bytes>,
        version: i32,
        zxid: i64,
        time: i64,
        events: &mut Vec<WatchDelivery>,
    ) -> Result<Stat, ErrorCode> {
        let (slot, num_children) = self.slot_counted(path).ok_or(ErrorCode::NoNode)?;
        let extended = self.extended;
        let (old, new, stat, acl) = self
            .change(slot, |n| {
                let old = node_size(path, n.data());
                // The node keeps its own exact copy, never a slice pinning a larger request frame.
                n.set_data_changed(data.as_deref(), zxid, time, version);
                let stat = n.client_stat(extended, num_children);
                (old, node_size(path, n.data()), stat, n.acl.clone())
            })
            .ok_or(ErrorCode::NoNode)?;
        let bytes_diff = new as i64 - old as i64;
        self.data_size = (self.data_size + new).saturating_sub(old);
        if let Some(prefix) = self.quotas.max_prefix(path) {
            self.update_quota_stat(&prefix, bytes_diff, 0);
        }
        let fired = self.watches.data.trigger(path, EventType::NodeDataChanged);
        self.deliver(events, fired, EventType::NodeDataChanged, path, &acl);
        Ok(stat)
    }

    /// `DataTree.setACL`: new ACL and aversion; fires nothing.
    ///
    /// Errors: NONODE.
    pub fn set_acl(&mut self, path: &str, acl: &[Acl], version: i32) -> Result<Stat, ErrorCode> {
        let (slot, num_children) = self.slot_counted(path).ok_or(ErrorCode::NoNode)?;
        let new = self.acls.intern(acl);
        let extended = self.extended;
        let changed = self.change_stat(slot, |n| {
            n.stat.aversion = version;
            let old = std::mem::replace(&mut n.acl, new.clone());
            (old, n.client_stat(extended, num_children))
        });
        let Some((old, stat)) = changed else {
            self.acls.release(new);
            return Err(ErrorCode::NoNode);
        };
        self.acls.release(old);
        Ok(stat)
    }

    /// `killSession`: deletes the txn's paths in order (missing ones skipped), then any other
    /// ephemeral the session still owns, and forgets the session's set.
    pub fn kill_session(
        &mut self,
        s: SessionId,
        zxid: i64,
        paths: &[String],
        events: &mut Vec<WatchDelivery>,
    ) {
        let local = self.ephemerals.remove(&s);
        for p in paths {
            let _ = self.delete_node(p, zxid, events);
        }
        if let Some(mut set) = local {
            for p in paths {
                set.paths.remove(p.as_str());
            }
            for (p, _) in set.copy_order() {
                if self.nodes.get(p.as_str()).is_some_and(|n| n.owner() == s) {
                    let _ = self.delete_node(&p, zxid, events);
                }
            }
        }
    }

    /// Registers a standard data watch (getData, exists).
    pub fn watch_data(&mut self, path: &str, w: WatcherId) {
        self.watches.data.add(path, w, WatchMode::Standard);
    }

    /// Registers a standard child watch (getChildren).
    pub fn watch_children(&mut self, path: &str, w: WatcherId) {
        self.watches.child.add(path, w, WatchMode::Standard);
    }

    /// Creating a quota's limits node makes its path a quota root; creating its stats node fills
    /// it with the subtree's current count and bytes; any create under a root counts there.
    fn quota_on_create(&mut self, path: &str, bytes: i64) {
        let (aparent, name) = split_apache(path);
        if let Some(trimmed) = aparent.strip_prefix(quota::QUOTA_ROOT) {
            if name == quota::LIMIT_NODE {
                self.quotas.add(trimmed);
            }
            if name == quota::STAT_NODE {
                self.update_quota_for_path(trimmed);
            }
        }
        if let Some(prefix) = self.quotas.max_prefix(path) {
            self.update_quota_stat(&prefix, bytes, 1);
        }
    }

    fn quota_on_delete(&mut self, path: &str, bytes: i64) {
        let (aparent, name) = split_apache(path);
        if aparent.starts_with("/zookeeper") && name == quota::LIMIT_NODE {
            if let Some(trimmed) = aparent.get(quota::QUOTA_ROOT.len()..) {
                self.quotas.remove(trimmed);
            }
        }
        if let Some(prefix) = self.quotas.max_prefix(path) {
            self.update_quota_stat(&prefix, -bytes, -1);
        }
    }

    /// Rewrites a stats node's data in place (no stat change, no watch), as Apache does.
    fn set_raw_data(&mut self, path: &str, text: String) {
        let Some(slot) = self.nodes.find(path) else { return };
        let sizes = self.change(slot, |n| {
            let old = node_size(path, n.data());
            n.set_data(Some(text.as_bytes()));
            (old, node_size(path, n.data()))
        });
        if let Some((old, new)) = sizes {
            self.data_size = (self.data_size + new).saturating_sub(old);
        }
    }

    fn update_quota_for_path(&mut self, path: &str) {
        // Apache's getCounts walks `path + "/" + child`: from "" that is the whole tree, from "/"
        // only the root itself.
        let start = if path.is_empty() { "/" } else { path };
        let (mut count, mut bytes) = (0i64, 0i64);
        let mut stack: Vec<Slot> = self.nodes.find(start).into_iter().collect();
        while let Some(s) = stack.pop() {
            let Some(n) = self.nodes.node(s) else { continue };
            count += 1;
            bytes += n.data().map_or(0, |d| d.len() as i64);
            if path != "/" {
                if let Some(c) = self.nodes.children(s) {
                    stack.extend(c.iter());
                }
            }
        }
        let mut st = StatsTrack::default();
        st.set("bytes", bytes);
        st.set("count", count);
        let sp = quota::stat_path(path);
        self.set_raw_data(&sp, st.to_text());
    }

    fn update_quota_stat(&mut self, prefix: &str, bytes_diff: i64, count_diff: i64) {
        let sp = quota::stat_path(prefix);
        let Some(mut st) = self.nodes.get(&sp).and_then(|n| StatsTrack::parse(n.data().unwrap_or(&[])))
        else {
            return;
        };
        st.set("count", st.get("count").wrapping_add(count_diff));
        st.set("bytes", st.get("bytes").wrapping_add(bytes_diff));
        self.set_raw_data(&sp, st.to_text());
    }

    /// Apache's checkQuota (with enforcement on): QUOTAEXCEEDED when adding `count_diff` nodes and
    /// `bytes_diff` bytes under `path` breaks a hard limit of its quota root.
    pub fn check_quota(&self, path: &str, bytes_diff: i64, count_diff: i64) -> Result<(), ErrorCode> {
        let Some(prefix) = self.quotas.max_prefix(path) else { return Ok(()) };
        let parse = |p: String| self.nodes.get(&p).and_then(|n| StatsTrack::parse(n.data().unwrap_or(&[])));
        let (Some(limits), Some(stats)) =
            (parse(quota::limit_path(&prefix)), parse(quota::stat_path(&prefix)))
        else {
            return Ok(());
        };
        if quota::exceeds(&limits, &stats, bytes_diff, count_diff) {
            return Err(ErrorCode::QuotaExceeded);
        }
        Ok(())
    }

    /// Number of descendants of `path` (Apache's getAllChildrenNumber).
    pub fn descendants(&self, path: &str) -> usize {
        if path == "/" {
            return self.nodes.len() - 1;
        }
        // Apache counts keys under "" + "/": every node, the root included.
        if path.is_empty() {
            return self.nodes.len();
        }
        let mut count = 0;
        let mut stack: Vec<Slot> = self.nodes.find(path).into_iter().collect();
        while let Some(s) = stack.pop() {
            if let Some(c) = self.nodes.children(s) {
                count += c.len();
                stack.extend(c.iter());
            }
        }
        count
    }

    /// The slot of the node at `path` and its number of children, with one look-up of the path.
    fn slot_counted(&self, path: &str) -> Option<(Slot, usize)> {
        let s = self.nodes.find(path)?;
        let n = self.nodes.node(s)?;
        let count = if n.has_children() { self.nodes.children(s).map_or(0, |c| c.len()) } else { 0 };
        Some((s, count))
    }

    /// The node at `path` (as [`Self::get`]) and its number of children, with one look-up of the
    /// path.
    pub fn get_counted(&self, path: &str) -> Option<(&Node, usize)> {
        let (s, count) = self.slot_counted(if path.is_empty() { "/" } else { path })?;
        Some((self.nodes.node(s)?, count))
    }

    /// Number of children of a node.
    pub fn num_children(&self, node: &Node) -> usize {
        self.nodes.num_children(node)
    }

    /// The stat clients see of a node (see [`Node::client_stat`]).
    pub fn client_stat(&self, node: &Node) -> Stat {
        node.client_stat(self.extended, self.nodes.num_children(node))
    }

    /// Shared ACL of a node.
    pub fn acl_of(&self, path: &str) -> Option<Arc<Vec<Acl>>> {
        self.nodes.get(path).map(|n| n.acl.clone())
    }
}
