//! Reads and watch registration, served from applied state as FinalRequestProcessor does.

use crate::acl::{check_acl, mask_digests, READ_OR_ADMIN};
use crate::database::Database;
use crate::watch::WatchMode;
use crate::{AuthIds, ChildNames, SessionId, WatcherId};
use bytes::Bytes;
use zk_proto::{
    perms, Acl, AddWatchMode, ErrorCode, EventType, KeeperState, SetWatches2, Stat, WatcherEvent, WatcherType,
};

impl Database {
    fn read_checked(&self, path: &str, auth: &AuthIds, perm: i32) -> Result<(), ErrorCode> {
        let n = self.tree.get(path).ok_or(ErrorCode::NoNode)?;
        check_acl(&self.cfg, &n.acl, perm, auth)
    }

    /// getData: data (None kept apart from empty) and stat; with `watch`, leaves a data watch.
    ///
    /// Errors: NONODE (no watch left), NOAUTH without READ (no watch left).
    pub fn get_data(
        &mut self,
        path: &str,
        auth: &AuthIds,
        watch: Option<WatcherId>,
    ) -> Result<(Option<Bytes>, Stat), ErrorCode> {
        self.read_checked(path, auth, perms::READ)?;
        if let Some(w) = watch {
            self.tree.watch_data(path, w);
        }
        let (n, count) = self.tree.get_counted(path).ok_or(ErrorCode::NoNode)?;
        Ok((n.data_bytes(), n.client_stat(self.tree.extended_types(), count)))
    }

    /// exists: the stat. Apache 3.8.0 checks no ACL; with `exists_requires_read` set it checks READ
    /// when the node exists, as later releases do. With `watch`, leaves a data watch even when the
    /// node is absent.
    ///
    /// Errors: BADARGUMENTS for a path with NUL, NOAUTH (no watch left), NONODE (watch left).
    pub fn exists(
        &mut self,
        path: &str,
        auth: &AuthIds,
        watch: Option<WatcherId>,
    ) -> Result<Stat, ErrorCode> {
        if path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        if let Some(n) = self.tree.get(path).filter(|_| self.cfg.exists_requires_read) {
            check_acl(&self.cfg, &n.acl, perms::READ, auth)?;
        }
        if let Some(w) = watch {
            self.tree.watch_data(path, w);
        }
        let (n, count) = self.tree.get_counted(path).ok_or(ErrorCode::NoNode)?;
        Ok(n.client_stat(self.tree.extended_types(), count))
    }

    /// getChildren / getChildren2: child names in Apache's (HashSet) order, as the jute list a
    /// reply carries ([`ChildNames::to_vec`] for strings), and the node's stat;
    /// with `watch`, leaves a child watch.
    ///
    /// Errors: NONODE, NOAUTH without READ (no watch left in either case).
    pub fn get_children(
        &mut self,
        path: &str,
        auth: &AuthIds,
        watch: Option<WatcherId>,
    ) -> Result<(ChildNames, Stat), ErrorCode> {
        self.read_checked(path, auth, perms::READ)?;
        if let Some(w) = watch {
            self.tree.watch_children(path, w);
        }
        let (n, count) = self.tree.get_counted(path).ok_or(ErrorCode::NoNode)?;
        Ok((self.tree.children_ordered(n), n.client_stat(self.tree.extended_types(), count)))
    }

    /// getACL: needs READ or ADMIN; without ADMIN, digest ids come back as `user:x`.
    ///
    /// Errors: NONODE, NOAUTH.
    pub fn get_acl(&self, path: &str, auth: &AuthIds) -> Result<(Vec<Acl>, Stat), ErrorCode> {
        let (n, count) = self.tree.get_counted(path).ok_or(ErrorCode::NoNode)?;
        check_acl(&self.cfg, &n.acl, READ_OR_ADMIN, auth)?;
        let stat = n.client_stat(self.tree.extended_types(), count);
        if check_acl(&self.cfg, &n.acl, perms::ADMIN, auth).is_ok() {
            Ok((n.acl.to_vec(), stat))
        } else {
            Ok((mask_digests(&n.acl), stat))
        }
    }

    /// getAllChildrenNumber: every descendant of `path`.
    ///
    /// Errors: NONODE, NOAUTH without READ.
    pub fn get_all_children_number(&self, path: &str, auth: &AuthIds) -> Result<i32, ErrorCode> {
        self.read_checked(path, auth, perms::READ)?;
        Ok(i32::try_from(self.tree.descendants(path)).unwrap_or(i32::MAX))
    }

    /// getEphemerals: the session's ephemerals starting with `prefix` (all of them for an empty,
    /// blank or "/" prefix), in Apache's order.
    pub fn get_ephemerals(&self, session: SessionId, prefix: &str) -> Vec<String> {
        let Some(set) = self.tree.ephemerals_of(session) else { return Vec::new() };
        let all = set.copy_order().into_iter().map(|(p, _)| p);
        let trimmed = prefix.trim_matches(|c: char| c <= ' ');
        if trimmed.is_empty() || trimmed == "/" {
            all.collect()
        } else {
            all.filter(|p| p.starts_with(prefix)).collect()
        }
    }

    /// addWatch: a persistent or persistent-recursive watch, in both tables. Apache checks nothing
    /// (not even that the node exists), so this never fails; `auth` is accepted for symmetry.
    pub fn add_watch(
        &mut self,
        path: &str,
        mode: AddWatchMode,
        watcher: WatcherId,
        _auth: &AuthIds,
    ) -> Result<(), ErrorCode> {
        let m = match mode {
            AddWatchMode::Persistent => WatchMode::Persistent,
            AddWatchMode::PersistentRecursive => WatchMode::PersistentRecursive,
        };
        self.tree.watches.child.add(path, watcher, m);
        self.tree.watches.data.add(path, watcher, m);
        Ok(())
    }

    /// checkWatches, with Apache's rule that any watch on the path satisfies it (see
    /// [`crate::watch::WatchTable::contains`]).
    ///
    /// Errors: NOWATCHER, also always for the Persistent and PersistentRecursive types.
    pub fn check_watches(&self, path: &str, kind: WatcherType, watcher: WatcherId) -> Result<(), ErrorCode> {
        let w = &self.tree.watches;
        let found = match kind {
            WatcherType::Children => w.child.contains(path, watcher),
            WatcherType::Data => w.data.contains(path, watcher),
            WatcherType::Any => w.child.contains(path, watcher) || w.data.contains(path, watcher),
            WatcherType::Persistent | WatcherType::PersistentRecursive => false,
        };
        if found {
            Ok(())
        } else {
            Err(ErrorCode::NoWatcher)
        }
    }

    /// removeWatches: removes this connection's watch of `kind` on `path`.
    ///
    /// Errors: NOWATCHER if none was removed (always for Persistent/PersistentRecursive kinds).
    pub fn remove_watches(
        &mut self,
        path: &str,
        kind: WatcherType,
        watcher: WatcherId,
    ) -> Result<(), ErrorCode> {
        let w = &mut self.tree.watches;
        let removed = match kind {
            WatcherType::Children => w.child.remove(path, watcher),
            WatcherType::Data => w.data.remove(path, watcher),
            WatcherType::Any => {
                let c = w.child.remove(path, watcher);
                let d = w.data.remove(path, watcher);
                c || d
            }
            WatcherType::Persistent | WatcherType::PersistentRecursive => false,
        };
        if removed {
            Ok(())
        } else {
            Err(ErrorCode::NoWatcher)
        }
    }

    /// setWatches / setWatches2 on reconnect. Data watch: node gone -> NodeDeleted, mzxid >
    /// relativeZxid -> NodeDataChanged, else re-registered; exist watch: node present ->
    /// NodeCreated, else re-registered; child watch: gone -> NodeDeleted, pzxid > relativeZxid ->
    /// NodeChildrenChanged, else re-registered; persistent and recursive ones are re-added.
    /// Returns the events to send at once, in that order. (Apache checks no ACL here.)
    pub fn set_watches(
        &mut self,
        watcher: WatcherId,
        _auth: &AuthIds,
        req: &SetWatches2,
    ) -> Vec<WatcherEvent> {
        let rel = req.relative_zxid;
        let ev = |t: EventType, p: &str| WatcherEvent {
            event_type: t.code(),
            state: KeeperState::SyncConnected.code(),
            path: p.to_string(),
        };
        let mut out = Vec::new();
        for p in &req.data_watches {
            match self.tree.get(p) {
                None => out.push(ev(EventType::NodeDeleted, p)),
                Some(n) if n.mzxid() > rel => out.push(ev(EventType::NodeDataChanged, p)),
                Some(_) => self.tree.watch_data(p, watcher),
            }
        }
        for p in &req.exist_watches {
            if self.tree.get(p).is_some() {
                out.push(ev(EventType::NodeCreated, p));
            } else {
                self.tree.watch_data(p, watcher);
            }
        }
        for p in &req.child_watches {
            match self.tree.get(p) {
                None => out.push(ev(EventType::NodeDeleted, p)),
                Some(n) if n.stat.pzxid > rel => out.push(ev(EventType::NodeChildrenChanged, p)),
                Some(_) => self.tree.watch_children(p, watcher),
            }
        }
        for p in &req.persistent_watches {
            self.tree.watches.child.add(p, watcher, WatchMode::Persistent);
            self.tree.watches.data.add(p, watcher, WatchMode::Persistent);
        }
        for p in &req.persistent_recursive_watches {
            self.tree.watches.child.add(p, watcher, WatchMode::PersistentRecursive);
            self.tree.watches.data.add(p, watcher, WatchMode::PersistentRecursive);
        }
        out
    }

    /// Takes `watcher`'s watches out of the tree, as the lists a reconnecting client's
    /// setWatches would carry (relative zxid 0: the caller sets it), so that they can be put
    /// back with [`Self::set_watches`] once the tree has been replaced or brought up to date: a
    /// one-shot watch in the data table is a data watch on a node that exists now, an exist
    /// watch on one that does not. `None`, and nothing taken, when the watcher has a persistent
    /// or recursive watch: those fire for every change, and setWatches puts them back without
    /// telling what changed meanwhile.
    pub fn detach_watches(&mut self, watcher: WatcherId) -> Option<SetWatches2> {
        let data = self.tree.watches.data.of_watcher(watcher);
        let child = self.tree.watches.child.of_watcher(watcher);
        if data.iter().chain(&child).any(|(_, m)| *m != WatchMode::Standard) {
            return None;
        }
        let mut out = SetWatches2 {
            relative_zxid: 0,
            data_watches: Vec::new(),
            exist_watches: Vec::new(),
            child_watches: child.into_iter().map(|(p, _)| p.into()).collect(),
            persistent_watches: Vec::new(),
            persistent_recursive_watches: Vec::new(),
        };
        for (p, _) in data {
            if self.tree.get(&p).is_some() {
                out.data_watches.push(p.into());
            } else {
                out.exist_watches.push(p.into());
            }
        }
        self.tree.watches.remove_watcher(watcher);
        Some(out)
    }

    /// The connection went away: drop all its watches.
    pub fn remove_watcher(&mut self, watcher: WatcherId) {
        self.tree.watches.remove_watcher(watcher);
    }
}
