//! Watches, as Apache's WatchManager keeps them: two tables (data/exist and child), each mapping a
//! path to the watchers on it with one mode per (watcher, path): standard (one-shot), persistent,
//! or persistent-recursive. Setting a watch on a (watcher, path) replaces its mode, as in Apache.

use crate::WatcherId;
use hashbrown::{HashMap, HashSet};
use std::collections::BTreeMap;
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

/// One of the two watch tables.
#[derive(Debug, Default)]
pub struct WatchTable {
    /// Path -> watchers on it (ordered by id so that firing order is deterministic). foldhash,
    /// seeded per table (hashbrown's default): every write looks its path up here, twice.
    by_path: HashMap<Box<str>, BTreeMap<WatcherId, WatchMode>>,
    /// Watcher -> paths it watches.
    by_watcher: HashMap<WatcherId, HashSet<Box<str>>>,
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

impl WatchTable {
    /// Sets `watcher`'s watch on `path` with `mode` (replacing any mode it had there).
    pub fn add(&mut self, path: &str, watcher: WatcherId, mode: WatchMode) {
        let set = self.by_path.entry(path.into()).or_default();
        let old = set.insert(watcher, mode);
        let was_rec = old == Some(WatchMode::PersistentRecursive);
        let is_rec = mode == WatchMode::PersistentRecursive;
        if was_rec && !is_rec {
            self.recursive -= 1;
        } else if is_rec && !was_rec {
            self.recursive += 1;
        }
        self.by_watcher.entry(watcher).or_default().insert(path.into());
    }

    /// Removes `watcher`'s watch on `path`; false if it had none.
    pub fn remove(&mut self, path: &str, watcher: WatcherId) -> bool {
        let Some(paths) = self.by_watcher.get_mut(&watcher) else { return false };
        if !paths.remove(path) {
            return false;
        }
        if paths.is_empty() {
            self.by_watcher.remove(&watcher);
        }
        let Some(set) = self.by_path.get_mut(path) else { return false };
        let Some(mode) = set.remove(&watcher) else { return false };
        if mode == WatchMode::PersistentRecursive {
            self.recursive -= 1;
        }
        if set.is_empty() {
            self.by_path.remove(path);
        }
        true
    }

    /// Drops every watch of `watcher`.
    pub fn remove_watcher(&mut self, watcher: WatcherId) {
        let Some(paths) = self.by_watcher.remove(&watcher) else { return };
        for p in paths {
            if let Some(set) = self.by_path.get_mut(&p) {
                if set.remove(&watcher) == Some(WatchMode::PersistentRecursive) {
                    self.recursive -= 1;
                }
                if set.is_empty() {
                    self.by_path.remove(&p);
                }
            }
        }
    }

    /// Apache's `containsWatcher`: true when anyone watches `path`, or when `watcher` has a
    /// recursive watch there.
    pub fn contains(&self, path: &str, watcher: WatcherId) -> bool {
        // A recursive watch of `watcher` on `path` also lives in this set, so one lookup answers
        // both halves of Apache's rule.
        let _ = watcher;
        self.by_path.contains_key(path)
    }

    /// Fires the watches an event of type `ty` on `path` triggers: every watch on `path` (one-shot
    /// ones are removed), and recursive watches on its ancestors unless `ty` is
    /// NodeChildrenChanged. Each watcher appears once, in discovery order.
    pub fn trigger(&mut self, path: &str, ty: EventType) -> Vec<WatcherId> {
        let mut fired = Vec::new();
        if self.by_path.is_empty() {
            return fired;
        }
        let mut seen = HashSet::new();
        let mut at = Some(path);
        let mut first = true;
        while let Some(p) = at {
            if let Some(set) = self.by_path.get_mut(p) {
                let mut dropped = Vec::new();
                for (&w, &mode) in set.iter() {
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
                for w in dropped {
                    set.remove(&w);
                    if let Some(paths) = self.by_watcher.get_mut(&w) {
                        paths.remove(p);
                        if paths.is_empty() {
                            self.by_watcher.remove(&w);
                        }
                    }
                }
                if set.is_empty() {
                    self.by_path.remove(p);
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
        self.by_path.iter().map(|(p, set)| (&**p, set.keys().copied()))
    }

    /// Watchers with their paths.
    pub fn watchers(&self) -> impl Iterator<Item = (WatcherId, impl Iterator<Item = &str>)> {
        self.by_watcher.iter().map(|(w, ps)| (*w, ps.iter().map(|p| &**p)))
    }

    /// The mode `watcher` has on `path`, if any.
    pub fn mode(&self, path: &str, watcher: WatcherId) -> Option<WatchMode> {
        self.by_path.get(path).and_then(|s| s.get(&watcher)).copied()
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
}
