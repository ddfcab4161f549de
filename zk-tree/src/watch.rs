//! Watches, as Apache's WatchManager keeps them: two tables (data/exist and child), each mapping a
//! path to the watchers on it with one mode per (watcher, path): standard (one-shot), persistent,
//! or persistent-recursive. Setting a watch on a (watcher, path) replaces its mode, as in Apache.

use crate::WatcherId;
use hashbrown::{DefaultHashBuilder, HashMap, HashSet, HashTable};
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use zk_proto::EventType;

/// How a watch behaves when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// One-shot: removed when it fires.
    Standard,
    /// Stays; fires for its own path only.
    Persistent,
    /// Stays; fires for its path and every descendant, never with NodeChildrenChanged.
    PersistentRecursive,
}

/// A watched path's number in its table, while anyone watches it.
type PathId = u32;

/// A watched path and the watchers on it.
#[derive(Debug)]
struct Watched {
    path: Box<str>,
    /// Ordered by id, so that firing order is deterministic.
    watchers: BTreeMap<WatcherId, WatchMode>,
}

/// One of the two watch tables.
///
/// Each watched path is stored once and known by a 4-byte id: a watcher's own set holds 4-byte
/// ids, not copies of the paths (with 10,000 sessions of 100 watches each, copies were most of
/// what a watch cost).
#[derive(Debug, Default)]
pub struct WatchTable {
    /// Watched paths by id; a freed slot is reused.
    slots: Vec<Option<Watched>>,
    /// Ids of the empty slots.
    free: Vec<PathId>,
    /// Path -> id: the ids alone, hashed by their slot's path. foldhash, seeded per table: every
    /// write looks its path up here, twice.
    ids: HashTable<PathId>,
    hasher: DefaultHashBuilder,
    /// Watcher -> ids of the paths it watches.
    by_watcher: HashMap<WatcherId, HashSet<PathId>>,
    /// Recursive watches present; when 0 a trigger looks at the path only.
    recursive: usize,
}

/// The parent of a path as the watch walk sees it ("/" for top-level, None for "/").
fn walk_parent(path: &str) -> Option<&str> {
    if path == "/" || path.is_empty() {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// The live slot `id` names; a dangling id is a bug of this table.
fn slot(slots: &[Option<Watched>], id: PathId) -> &Watched {
    slots[id as usize].as_ref().expect("a watched path's id names a live slot")
}

impl WatchTable {
    /// The id of `path`, if anyone watches it.
    fn find(&self, path: &str) -> Option<PathId> {
        let slots = &self.slots;
        self.ids.find(self.hasher.hash_one(path), |&id| &*slot(slots, id).path == path).copied()
    }

    /// The id of `path`, given one (with no watchers yet) if nobody watched it.
    fn intern(&mut self, path: &str) -> PathId {
        let hash = self.hasher.hash_one(path);
        let Self { slots, free, ids, hasher, .. } = self;
        if let Some(&id) = ids.find(hash, |&id| &*slot(slots, id).path == path) {
            return id;
        }
        let watched = Watched { path: path.into(), watchers: BTreeMap::new() };
        let id = match free.pop() {
            Some(id) => {
                slots[id as usize] = Some(watched);
                id
            }
            None => {
                let id = PathId::try_from(slots.len()).expect("fewer than 2^32 watched paths");
                slots.push(Some(watched));
                id
            }
        };
        ids.insert_unique(hash, id, |&id| hasher.hash_one(&*slot(slots, id).path));
        id
    }

    /// Forgets path `id`, whose last watcher has gone.
    fn release(&mut self, id: PathId) {
        let watched = self.slots[id as usize].take().expect("a released id names a live slot");
        debug_assert!(watched.watchers.is_empty(), "a path released with watchers");
        let hash = self.hasher.hash_one(&*watched.path);
        match self.ids.find_entry(hash, |&other| other == id) {
            Ok(entry) => {
                entry.remove();
            }
            Err(_) => unreachable!("a live path's id is in the index"),
        }
        if self.ids.is_empty() {
            // Nothing watched: give back what a burst of watches grew.
            self.slots = Vec::new();
            self.free = Vec::new();
            self.ids = HashTable::new();
        } else {
            self.free.push(id);
        }
    }

    /// Takes `id` out of `watcher`'s own set.
    fn unlink(&mut self, watcher: WatcherId, id: PathId) {
        if let Some(ids) = self.by_watcher.get_mut(&watcher) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_watcher.remove(&watcher);
            }
        }
    }

    /// Sets `watcher`'s watch on `path` with `mode` (replacing any mode it had there).
    pub fn add(&mut self, path: &str, watcher: WatcherId, mode: WatchMode) {
        let id = self.intern(path);
        let watched = self.slots[id as usize].as_mut().expect("an interned id names a live slot");
        let old = watched.watchers.insert(watcher, mode);
        let was_rec = old == Some(WatchMode::PersistentRecursive);
        let is_rec = mode == WatchMode::PersistentRecursive;
        if was_rec && !is_rec {
            self.recursive -= 1;
        } else if is_rec && !was_rec {
            self.recursive += 1;
        }
        self.by_watcher.entry(watcher).or_default().insert(id);
    }

    /// Removes `watcher`'s watch on `path`; false if it had none.
    pub fn remove(&mut self, path: &str, watcher: WatcherId) -> bool {
        let Some(id) = self.find(path) else { return false };
        let watched = self.slots[id as usize].as_mut().expect("a found id names a live slot");
        let Some(mode) = watched.watchers.remove(&watcher) else { return false };
        let now_empty = watched.watchers.is_empty();
        if mode == WatchMode::PersistentRecursive {
            self.recursive -= 1;
        }
        self.unlink(watcher, id);
        if now_empty {
            self.release(id);
        }
        true
    }

    /// Drops every watch of `watcher`.
    pub fn remove_watcher(&mut self, watcher: WatcherId) {
        let Some(ids) = self.by_watcher.remove(&watcher) else { return };
        for id in ids {
            let watched = self.slots[id as usize].as_mut().expect("a watcher's path id names a live slot");
            if watched.watchers.remove(&watcher) == Some(WatchMode::PersistentRecursive) {
                self.recursive -= 1;
            }
            if watched.watchers.is_empty() {
                self.release(id);
            }
        }
    }

    /// Apache's `containsWatcher`: true when anyone watches `path`, or when `watcher` has a
    /// recursive watch there.
    pub fn contains(&self, path: &str, watcher: WatcherId) -> bool {
        // A recursive watch of `watcher` on `path` also lives in this set, so one lookup answers
        // both halves of Apache's rule.
        let _ = watcher;
        self.find(path).is_some()
    }

    /// Fires the watches an event of type `ty` on `path` triggers: every watch on `path` (one-shot
    /// ones are removed), and recursive watches on its ancestors unless `ty` is
    /// NodeChildrenChanged. Each watcher appears once, in discovery order.
    pub fn trigger(&mut self, path: &str, ty: EventType) -> Vec<WatcherId> {
        let mut fired = Vec::new();
        if self.ids.is_empty() {
            return fired;
        }
        let mut seen = HashSet::new();
        let mut at = Some(path);
        let mut first = true;
        while let Some(p) = at {
            if let Some(id) = self.find(p) {
                let watched = self.slots[id as usize].as_mut().expect("a found id names a live slot");
                let mut dropped = Vec::new();
                for (&w, &mode) in watched.watchers.iter() {
                    if mode == WatchMode::PersistentRecursive {
                        if ty != EventType::NodeChildrenChanged && seen.insert(w) {
                            fired.push(w);
                        }
                    } else if first {
                        if seen.insert(w) {
                            fired.push(w);
                        }
                        if mode == WatchMode::Standard {
                            dropped.push(w);
                        }
                    }
                }
                for &w in &dropped {
                    watched.watchers.remove(&w);
                }
                let now_empty = watched.watchers.is_empty();
                for w in dropped {
                    self.unlink(w, id);
                }
                if now_empty {
                    self.release(id);
                }
            }
            if self.recursive == 0 {
                break;
            }
            first = false;
            at = walk_parent(p);
        }
        fired
    }

    /// Watches in the table (one per (watcher, path)).
    pub fn len(&self) -> usize {
        self.by_watcher.values().map(|p| p.len()).sum()
    }

    /// Whether there are no watches.
    pub fn is_empty(&self) -> bool {
        self.by_watcher.is_empty()
    }

    /// Paths with at least one watch.
    pub fn paths(&self) -> impl Iterator<Item = (&str, impl Iterator<Item = WatcherId> + '_)> {
        self.slots.iter().flatten().map(|w| (&*w.path, w.watchers.keys().copied()))
    }

    /// Watchers with their paths.
    pub fn watchers(&self) -> impl Iterator<Item = (WatcherId, impl Iterator<Item = &str>)> {
        let slots = &self.slots;
        self.by_watcher.iter().map(move |(w, ids)| (*w, ids.iter().map(move |&id| &*slot(slots, id).path)))
    }

    /// The paths `watcher` watches in this table with their modes, sorted by path.
    pub fn of_watcher(&self, watcher: WatcherId) -> Vec<(Box<str>, WatchMode)> {
        let Some(ids) = self.by_watcher.get(&watcher) else { return Vec::new() };
        let mut out: Vec<(Box<str>, WatchMode)> = ids
            .iter()
            .map(|&id| {
                let w = slot(&self.slots, id);
                let mode = *w.watchers.get(&watcher).expect("a watcher's path lists it");
                (w.path.clone(), mode)
            })
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The mode `watcher` has on `path`, if any.
    pub fn mode(&self, path: &str, watcher: WatcherId) -> Option<WatchMode> {
        let id = self.find(path)?;
        slot(&self.slots, id).watchers.get(&watcher).copied()
    }
}

/// The data/exist table and the child table.
#[derive(Debug, Default)]
pub struct WatchManager {
    /// getData / exists watches, and persistent ones.
    pub data: WatchTable,
    /// getChildren watches, and persistent ones.
    pub child: WatchTable,
}

impl WatchManager {
    /// Drops every watch of a connection.
    pub fn remove_watcher(&mut self, watcher: WatcherId) {
        self.data.remove_watcher(watcher);
        self.child.remove_watcher(watcher);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EventType::*;

    #[test]
    fn one_shot_fires_once() {
        let mut t = WatchTable::default();
        t.add("/a", 1, WatchMode::Standard);
        t.add("/a", 2, WatchMode::Standard);
        assert_eq!(t.trigger("/a", NodeDataChanged), vec![1, 2]);
        assert!(t.trigger("/a", NodeDataChanged).is_empty());
        assert!(t.is_empty());
    }

    #[test]
    fn persistent_stays_and_ignores_descendants() {
        let mut t = WatchTable::default();
        t.add("/a", 1, WatchMode::Persistent);
        assert_eq!(t.trigger("/a", NodeDataChanged), vec![1]);
        assert_eq!(t.trigger("/a", NodeDeleted), vec![1]);
        t.add("/x", 9, WatchMode::PersistentRecursive); // forces the parent walk
        assert!(t.trigger("/a/b", NodeCreated).is_empty());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn recursive_covers_descendants_but_not_child_events() {
        let mut t = WatchTable::default();
        t.add("/a", 1, WatchMode::PersistentRecursive);
        t.add("/", 2, WatchMode::PersistentRecursive);
        assert_eq!(t.trigger("/a/b/c", NodeCreated), vec![1, 2]);
        assert_eq!(t.trigger("/a", NodeDataChanged), vec![1, 2]);
        assert!(t.trigger("/a", NodeChildrenChanged).is_empty());
    }

    #[test]
    fn standard_after_persistent_downgrades() {
        let mut t = WatchTable::default();
        t.add("/a", 1, WatchMode::Persistent);
        t.add("/a", 1, WatchMode::Standard);
        assert_eq!(t.trigger("/a", NodeDataChanged), vec![1]);
        assert!(t.trigger("/a", NodeDataChanged).is_empty());
    }

    #[test]
    fn dedup_between_path_and_ancestor() {
        let mut t = WatchTable::default();
        t.add("/a/b", 1, WatchMode::Standard);
        t.add("/a", 1, WatchMode::PersistentRecursive);
        assert_eq!(t.trigger("/a/b", NodeDataChanged), vec![1]);
        assert_eq!(t.mode("/a/b", 1), Option::None);
    }

    #[test]
    fn remove_and_contains() {
        let mut t = WatchTable::default();
        t.add("/a", 1, WatchMode::Standard);
        assert!(t.contains("/a", 1));
        // Apache answers true for anyone's watch on the path.
        assert!(t.contains("/a", 2));
        assert!(!t.remove("/a", 2));
        assert!(t.remove("/a", 1));
        assert!(!t.contains("/a", 1));
        t.add("/r", 3, WatchMode::PersistentRecursive);
        t.remove_watcher(3);
        assert!(t.is_empty());
        assert_eq!(t.recursive, 0);
    }
    #[test]
    fn emptied_table_gives_its_slots_back_and_reuses_ids() {
        let mut t = WatchTable::default();
        for i in 0..1000 {
            t.add(&format!("/n{i}"), 1, WatchMode::Standard);
        }
        t.remove("/n5", 1);
        t.add("/again", 2, WatchMode::Standard);
        assert_eq!(t.slots.len(), 1000, "the freed slot is reused");
        assert_eq!(t.find("/again"), Some(5));
        t.remove_watcher(1);
        t.remove_watcher(2);
        assert!(t.is_empty());
        assert_eq!((t.slots.capacity(), t.free.capacity(), t.ids.capacity()), (0, 0, 0));
    }

    /// One operation of the model check.
    #[derive(Debug, Clone)]
    enum Op {
        Add(usize, WatcherId, WatchMode),
        Remove(usize, WatcherId),
        RemoveWatcher(WatcherId),
        Trigger(usize, EventType),
    }

    const PATHS: [&str; 6] = ["/", "/a", "/a/b", "/a/b/c", "/x", "/x/y"];

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let mode = prop_oneof![
            Just(WatchMode::Standard),
            Just(WatchMode::Persistent),
            Just(WatchMode::PersistentRecursive)
        ];
        let ty = prop_oneof![
            Just(NodeCreated),
            Just(NodeDeleted),
            Just(NodeDataChanged),
            Just(NodeChildrenChanged)
        ];
        prop_oneof![
            4 => (0..PATHS.len(), 1..5u64, mode).prop_map(|(p, w, m)| Op::Add(p, w, m)),
            2 => (0..PATHS.len(), 1..5u64).prop_map(|(p, w)| Op::Remove(p, w)),
            1 => (1..5u64).prop_map(Op::RemoveWatcher),
            3 => (0..PATHS.len(), ty).prop_map(|(p, t)| Op::Trigger(p, t)),
        ]
    }

    /// The rules of the table, kept as plainly as possible: (path, watcher) -> mode.
    fn model_trigger(
        m: &mut BTreeMap<(String, WatcherId), WatchMode>,
        path: &str,
        ty: EventType,
    ) -> Vec<WatcherId> {
        let mut fired: Vec<WatcherId> = Vec::new();
        let recursive = m.values().any(|&mode| mode == WatchMode::PersistentRecursive);
        let mut at = Some(path);
        let mut first = true;
        while let Some(p) = at {
            let here: Vec<(WatcherId, WatchMode)> =
                m.iter().filter(|((q, _), _)| q == p).map(|((_, w), &mode)| (*w, mode)).collect();
            for (w, mode) in here {
                let fires =
                    if mode == WatchMode::PersistentRecursive { ty != NodeChildrenChanged } else { first };
                if fires && !fired.contains(&w) {
                    fired.push(w);
                }
                if first && mode == WatchMode::Standard {
                    m.remove(&(p.to_string(), w));
                }
            }
            if !recursive {
                break;
            }
            first = false;
            at = walk_parent(p);
        }
        fired
    }

    proptest::proptest! {
        #[test]
        fn behaves_as_the_plain_model(ops in proptest::collection::vec(op(), 1..80)) {
            let mut t = WatchTable::default();
            let mut m: BTreeMap<(String, WatcherId), WatchMode> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Add(p, w, mode) => {
                        t.add(PATHS[p], w, mode);
                        m.insert((PATHS[p].to_string(), w), mode);
                    }
                    Op::Remove(p, w) => {
                        let had = m.remove(&(PATHS[p].to_string(), w)).is_some();
                        proptest::prop_assert_eq!(t.remove(PATHS[p], w), had);
                    }
                    Op::RemoveWatcher(w) => {
                        t.remove_watcher(w);
                        m.retain(|(_, x), _| *x != w);
                    }
                    Op::Trigger(p, ty) => {
                        let want = model_trigger(&mut m, PATHS[p], ty);
                        proptest::prop_assert_eq!(t.trigger(PATHS[p], ty), want);
                    }
                }
                proptest::prop_assert_eq!(t.len(), m.len());
                proptest::prop_assert_eq!(
                    t.recursive,
                    m.values().filter(|&&mode| mode == WatchMode::PersistentRecursive).count()
                );
                for path in PATHS {
                    for w in 1..5 {
                        proptest::prop_assert_eq!(t.mode(path, w), m.get(&(path.to_string(), w)).copied());
                    }
                    proptest::prop_assert_eq!(t.contains(path, 0), m.keys().any(|(q, _)| q == path));
                }
                let mut by_watcher: Vec<(WatcherId, Vec<String>)> = t
                    .watchers()
                    .map(|(w, ps)| {
                        let mut ps: Vec<String> = ps.map(String::from).collect();
                        ps.sort();
                        (w, ps)
                    })
                    .collect();
                by_watcher.sort();
                let mut want: BTreeMap<WatcherId, Vec<String>> = BTreeMap::new();
                for (p, w) in m.keys() {
                    want.entry(*w).or_default().push(p.clone());
                }
                proptest::prop_assert_eq!(by_watcher, want.into_iter().collect::<Vec<_>>());
                let live = t.slots.iter().flatten().count();
                proptest::prop_assert_eq!(live, t.ids.len());
                proptest::prop_assert_eq!(live + t.free.len(), t.slots.len());
            }
        }
    }
}
