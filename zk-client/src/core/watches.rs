//! The client-side watch registry: which local watchers an incoming notification reaches.
//!
//! The rules follow Apache ZooKeeper's client (ZKWatchManager in 3.8), which matter because the
//! server sends one notification per (session, path, event) however many local watchers asked:
//! - NodeCreated / NodeDataChanged take the path's data and exist watchers (one-shot, removed);
//! - NodeChildrenChanged takes the path's child watchers;
//! - NodeDeleted takes the path's data, exist and child watchers;
//! - every node event also reaches persistent watchers on the path (kept) and persistent-recursive
//!   watchers on the path or any ancestor (kept).
//!
//! Paths here are client paths (chroot already stripped).

use std::collections::HashMap;
use zk_proto::{EventType, WatcherType};

/// Identifies one local watcher: the id of the operation that registered it.
pub type WatcherId = u64;

/// Which table a watcher sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// Set by getData (and exists on an existing node): one-shot.
    Data,
    /// Set by exists on a missing node: one-shot.
    Exist,
    /// Set by getChildren: one-shot.
    Child,
    /// addWatch PERSISTENT: stays until removed.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE: stays, covers descendants.
    PersistentRecursive,
}

impl WatchKind {
    /// Whether the watcher survives the events it receives.
    pub fn is_persistent(self) -> bool {
        matches!(self, WatchKind::Persistent | WatchKind::PersistentRecursive)
    }
}

/// The five watch tables, path to watcher ids.
#[derive(Debug, Default, Clone)]
pub struct WatchRegistry {
    data: HashMap<String, Vec<WatcherId>>,
    exist: HashMap<String, Vec<WatcherId>>,
    child: HashMap<String, Vec<WatcherId>>,
    persistent: HashMap<String, Vec<WatcherId>>,
    recursive: HashMap<String, Vec<WatcherId>>,
}

/// Every ancestor of `path` and the path itself, root first ("/a/b" -> "/", "/a", "/a/b").
fn self_and_ancestors(path: &str) -> impl Iterator<Item = &str> {
    let cuts = std::iter::once(1).chain(path.match_indices('/').skip(1).map(|(i, _)| i));
    let root_only = path == "/";
    cuts.map(move |end| if end == 1 { "/" } else { &path[..end] })
        .chain(std::iter::once(path).filter(move |_| !root_only))
}

impl WatchRegistry {
    fn table(&mut self, kind: WatchKind) -> &mut HashMap<String, Vec<WatcherId>> {
        match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Exist => &mut self.exist,
            WatchKind::Child => &mut self.child,
            WatchKind::Persistent => &mut self.persistent,
            WatchKind::PersistentRecursive => &mut self.recursive,
        }
    }

    /// Adds a watcher on `path`.
    pub fn add(&mut self, kind: WatchKind, path: &str, id: WatcherId) {
        self.table(kind).entry(path.to_owned()).or_default().push(id);
    }

    /// Whether no watcher is registered at all.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
            && self.exist.is_empty()
            && self.child.is_empty()
            && self.persistent.is_empty()
            && self.recursive.is_empty()
    }

    /// The watchers a node event on `path` reaches, with whether each one stays registered.
    /// One-shot watchers are removed from the registry.
    pub fn trigger(&mut self, event: EventType, path: &str) -> Vec<(WatcherId, bool)> {
        let mut out = Vec::new();
        let mut take = |t: &mut HashMap<String, Vec<WatcherId>>| {
            if let Some(ids) = t.remove(path) {
                out.extend(ids.into_iter().map(|id| (id, false)));
            }
        };
        match event {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                take(&mut self.data);
                take(&mut self.exist);
            }
            EventType::NodeChildrenChanged => take(&mut self.child),
            EventType::NodeDeleted => {
                take(&mut self.data);
                take(&mut self.exist);
                take(&mut self.child);
            }
            // Removal events are produced locally, never looked up; None is a state change.
            _ => return out,
        }
        if let Some(ids) = self.persistent.get(path) {
            out.extend(ids.iter().map(|&id| (id, true)));
        }
        for p in self_and_ancestors(path) {
            if let Some(ids) = self.recursive.get(p) {
                out.extend(ids.iter().map(|&id| (id, true)));
            }
        }
        out
    }

    /// Whether a removeWatches of `kind` on `path` would find a watcher locally (Apache checks this
    /// before asking the server, answering NOWATCHER itself).
    pub fn contains(&self, kind: WatcherType, path: &str) -> bool {
        let has = |t: &HashMap<String, Vec<WatcherId>>| t.get(path).is_some_and(|v| !v.is_empty());
        let persistent = has(&self.persistent) || has(&self.recursive);
        match kind {
            WatcherType::Children => has(&self.child) || persistent,
            WatcherType::Data => has(&self.data) || has(&self.exist) || persistent,
            _ => has(&self.child) || has(&self.data) || has(&self.exist) || persistent,
        }
    }

    /// Removes every watcher of `kind` on `path` after the server agreed, returning each with the
    /// removal event it gets (Apache's client tells removed watchers with these event types).
    pub fn remove(&mut self, kind: WatcherType, path: &str) -> Vec<(WatcherId, EventType)> {
        let mut out = Vec::new();
        let mut take = |t: &mut HashMap<String, Vec<WatcherId>>, ev: EventType| {
            if let Some(ids) = t.remove(path) {
                out.extend(ids.into_iter().map(|id| (id, ev)));
            }
        };
        match kind {
            WatcherType::Children => take(&mut self.child, EventType::ChildWatchRemoved),
            WatcherType::Data => {
                take(&mut self.data, EventType::DataWatchRemoved);
                take(&mut self.exist, EventType::DataWatchRemoved);
            }
            _ => {
                take(&mut self.child, EventType::ChildWatchRemoved);
                take(&mut self.data, EventType::DataWatchRemoved);
                take(&mut self.exist, EventType::DataWatchRemoved);
                take(&mut self.persistent, EventType::PersistentWatchRemoved);
                take(&mut self.recursive, EventType::PersistentWatchRemoved);
            }
        }
        out
    }

    /// Forgets one watcher wherever it is (its consumer went away).
    pub fn forget(&mut self, id: WatcherId) {
        for t in [&mut self.data, &mut self.exist, &mut self.child, &mut self.persistent, &mut self.recursive]
        {
            t.retain(|_, ids| {
                ids.retain(|&x| x != id);
                !ids.is_empty()
            });
        }
    }

    /// Empties the registry, returning every watcher (for terminal session states).
    pub fn drain(&mut self) -> Vec<WatcherId> {
        let mut out = Vec::new();
        for t in [&mut self.data, &mut self.exist, &mut self.child, &mut self.persistent, &mut self.recursive]
        {
            for (_, ids) in t.drain() {
                out.extend(ids);
            }
        }
        out
    }

    /// The registered paths of each kind, for SetWatches after a reconnect:
    /// (data, exist, child, persistent, persistent-recursive).
    pub fn paths(&self) -> [Vec<String>; 5] {
        let keys = |t: &HashMap<String, Vec<WatcherId>>| {
            let mut v: Vec<String> = t.keys().cloned().collect();
            v.sort();
            v
        };
        [
            keys(&self.data),
            keys(&self.exist),
            keys(&self.child),
            keys(&self.persistent),
            keys(&self.recursive),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors() {
        assert_eq!(self_and_ancestors("/").collect::<Vec<_>>(), ["/"]);
        assert_eq!(self_and_ancestors("/a").collect::<Vec<_>>(), ["/", "/a"]);
        assert_eq!(self_and_ancestors("/a/b/c").collect::<Vec<_>>(), ["/", "/a", "/a/b", "/a/b/c"]);
    }

    #[test]
    fn trigger_rules() {
        let mut w = WatchRegistry::default();
        w.add(WatchKind::Data, "/a", 1);
        w.add(WatchKind::Exist, "/a", 2);
        w.add(WatchKind::Child, "/a", 3);
        w.add(WatchKind::Persistent, "/a", 4);
        w.add(WatchKind::PersistentRecursive, "/", 5);
        w.add(WatchKind::PersistentRecursive, "/b", 6);
        let mut got = w.trigger(EventType::NodeDataChanged, "/a");
        got.sort();
        assert_eq!(got, [(1, false), (2, false), (4, true), (5, true)]);
        // Data and exist watchers were one-shot; the child watcher is still there.
        let mut got = w.trigger(EventType::NodeChildrenChanged, "/a");
        got.sort();
        assert_eq!(got, [(3, false), (4, true), (5, true)]);
        let mut got = w.trigger(EventType::NodeDeleted, "/a");
        got.sort();
        assert_eq!(got, [(4, true), (5, true)]);
        assert_eq!(w.trigger(EventType::NodeCreated, "/b/c"), [(5, true), (6, true)]);
    }

    #[test]
    fn remove_and_contains() {
        let mut w = WatchRegistry::default();
        w.add(WatchKind::Exist, "/a", 1);
        w.add(WatchKind::Child, "/a", 2);
        assert!(w.contains(WatcherType::Data, "/a"));
        assert!(!w.contains(WatcherType::Data, "/b"));
        assert_eq!(w.remove(WatcherType::Data, "/a"), [(1, EventType::DataWatchRemoved)]);
        assert!(!w.contains(WatcherType::Data, "/a"));
        assert!(w.contains(WatcherType::Any, "/a"));
        w.forget(2);
        assert!(w.is_empty());
    }
}
