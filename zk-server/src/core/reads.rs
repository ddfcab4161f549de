//! Reads: a function of the database and the request, nothing else of the core's.
//!
//! A read may register a watch (for the asking connection) and setWatches may fire events at
//! once for changes the client missed; both are returned, never sent from here.

use super::conns::ConnId;
use super::reply::Body;
use zk_proto::*;
use zk_tree::{AuthIds, Database, SessionId};

/// What a read produced.
#[derive(Debug)]
pub struct ReadAnswer {
    /// The reply: a body, or the error code.
    pub result: Result<Body, ErrorCode>,
    /// Events for the asking connection, sent before the reply (setWatches on changed nodes).
    pub events: Vec<WatcherEvent>,
}

impl ReadAnswer {
    fn reply(result: Result<Body, ErrorCode>) -> ReadAnswer {
        ReadAnswer { result, events: Vec::new() }
    }
}

/// Answers read request `req` of session `sid` on connection `conn` (whose identities are
/// `auth`) from `db`'s applied state. Pings, auth and SASL are the caller's; a write reaching here is
/// UNIMPLEMENTED.
pub fn read(db: &mut Database, conn: ConnId, sid: SessionId, auth: &AuthIds, req: Request) -> ReadAnswer {
    let watch = |w: bool| w.then_some(conn);
    let result = match req {
        Request::Exists(r) => {
            if r.path.contains('\0') {
                Err(ErrorCode::BadArguments)
            } else {
                db.exists(&r.path, auth, watch(r.watch)).map(Body::Stat)
            }
        }
        Request::GetData(r) => db.get_data(&r.path, auth, watch(r.watch)).map(|(d, s)| Body::Data(d, s)),
        Request::GetChildren(r) => {
            db.get_children(&r.path, auth, watch(r.watch)).map(|(c, _)| Body::Children(c))
        }
        Request::GetChildren2(r) => {
            db.get_children(&r.path, auth, watch(r.watch)).map(|(c, s)| Body::Children2(c, s))
        }
        Request::GetAcl(r) => db.get_acl(&r.path, auth).map(|(a, s)| Body::Acl(a, s)),
        Request::Sync(r) => Ok(Body::Path(r.path)),
        Request::SetWatches(sw) => {
            let sw2 = SetWatches2 {
                relative_zxid: sw.relative_zxid,
                data_watches: sw.data_watches,
                exist_watches: sw.exist_watches,
                child_watches: sw.child_watches,
                persistent_watches: vec![],
                persistent_recursive_watches: vec![],
            };
            return ReadAnswer { result: Ok(Body::Empty), events: db.set_watches(conn, auth, &sw2) };
        }
        Request::SetWatches2(sw2) => {
            return ReadAnswer { result: Ok(Body::Empty), events: db.set_watches(conn, auth, &sw2) };
        }
        Request::AddWatch(r) => match AddWatchMode::from_i32(r.mode) {
            None => Err(ErrorCode::MarshallingError),
            Some(mode) => db.add_watch(&r.path, mode, conn, auth).map(|()| Body::Int(0)),
        },
        Request::CheckWatches(r) => match removable_watcher_type(r.watcher_type) {
            None => Err(ErrorCode::MarshallingError),
            Some(t) => db.check_watches(&r.path, t, conn).map(|()| Body::Empty),
        },
        Request::RemoveWatches(r) => match removable_watcher_type(r.watcher_type) {
            None => Err(ErrorCode::MarshallingError),
            Some(t) => db.remove_watches(&r.path, t, conn).map(|()| Body::Empty),
        },
        Request::GetEphemerals(r) => Ok(Body::Strings(db.get_ephemerals(sid, &r.prefix_path))),
        Request::GetAllChildrenNumber(r) => db.get_all_children_number(&r.path, auth).map(Body::Int),
        Request::WhoAmI => Ok(Body::WhoAmI(
            apache_set_order(&auth.ids)
                .into_iter()
                .map(|id| ClientInfo {
                    auth_scheme: id.scheme.clone(),
                    user: match id.scheme.as_str() {
                        "digest" => id.id.split(':').next().unwrap_or("").to_string(),
                        "super" => String::new(),
                        _ => id.id.clone(),
                    },
                })
                .collect(),
        )),
        Request::MultiRead(ops) => {
            let mut results = Vec::with_capacity(ops.len());
            for o in ops {
                results.push(match o {
                    Request::GetChildren(r) => match db.get_children(&r.path, auth, watch(r.watch)) {
                        Ok((c, _)) => OpResult::GetChildren(c.to_vec()),
                        Err(e) => OpResult::Error(e),
                    },
                    Request::GetData(r) => match db.get_data(&r.path, auth, None) {
                        Ok((data, stat)) => OpResult::GetData(GetDataResponse { data, stat }),
                        Err(e) => OpResult::Error(e),
                    },
                    _ => OpResult::Error(ErrorCode::Unimplemented),
                });
            }
            Ok(Body::Multi(results))
        }
        other => {
            tracing::warn!("session 0x{sid:x}: {:?} reached the read path", other.op());
            Err(ErrorCode::Unimplemented)
        }
    };
    ReadAnswer::reply(result)
}

/// A connection's identities in the order Apache's `ConcurrentHashMap`-backed set iterates them:
/// by bucket of jute's `Id.hashCode` in a 16-slot table (it holds few ids), then insertion order.
fn apache_set_order(ids: &[Id]) -> Vec<&Id> {
    let hash = |id: &Id| {
        let h = 17i32.wrapping_mul(37).wrapping_add(zk_tree::java::string_hash(&id.scheme));
        h.wrapping_mul(37).wrapping_add(zk_tree::java::string_hash(&id.id))
    };
    let mut capacity = 16usize;
    while ids.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let mut v: Vec<(usize, &Id)> = ids.iter().enumerate().collect();
    v.sort_by_key(|(rank, id)| {
        let h = hash(id) as u32;
        (((h ^ (h >> 16)) & 0x7fff_ffff) as usize & (capacity - 1), *rank)
    });
    v.into_iter().map(|(_, id)| id).collect()
}

/// The watcher types checkWatches and removeWatches accept: Apache 3.8 refuses the persistent ones
/// (MARSHALLINGERROR).
fn removable_watcher_type(t: i32) -> Option<WatcherType> {
    WatcherType::from_i32(t)
        .filter(|t| matches!(t, WatcherType::Children | WatcherType::Data | WatcherType::Any))
}
