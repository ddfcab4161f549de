//! Operations a user submits and the typed results they complete with, and their wire forms.
//!
//! Paths in [`Op`] and [`Response`] are client paths: the session core adds the chroot on the way
//! out and strips it on the way in.

use bytes::{Bytes, BytesMut};
use zk_proto::jute::Jute;
use zk_proto::path::{validate_create_path, validate_path};
use zk_proto::response::decode_multi_response;
use zk_proto::{
    Acl, AddWatchMode, ClientInfo, CreateMode, ErrorCode, OpCode, OpResult, Reader, RequestHeader, Stat,
    WatcherType,
};

/// One write inside a multi.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    /// Create a node; `ttl` is required for the TTL modes and ignored otherwise.
    Create {
        /// Node path.
        path: String,
        /// Initial data.
        data: Bytes,
        /// Its ACL.
        acl: Vec<Acl>,
        /// The create mode.
        mode: CreateMode,
        /// Time to live, ms, for the TTL modes.
        ttl: Option<i64>,
    },
    /// Delete a node at `version` (-1 for any).
    Delete {
        /// Node path.
        path: String,
        /// Expected version.
        version: i32,
    },
    /// Replace a node's data at `version` (-1 for any).
    SetData {
        /// Node path.
        path: String,
        /// New data.
        data: Bytes,
        /// Expected version.
        version: i32,
    },
    /// [`MultiOp::Create`] whose data may be null (`None` is sent as length -1, which a reader
    /// gets back as null data; `Some(empty)` is an empty array).
    CreateNullable {
        /// Node path.
        path: String,
        /// Initial data, `None` for null.
        data: Option<Bytes>,
        /// Its ACL.
        acl: Vec<Acl>,
        /// The create mode.
        mode: CreateMode,
        /// Time to live, ms, for the TTL modes.
        ttl: Option<i64>,
    },
    /// [`MultiOp::SetData`] whose data may be null.
    SetDataNullable {
        /// Node path.
        path: String,
        /// New data, `None` for null.
        data: Option<Bytes>,
        /// Expected version.
        version: i32,
    },
    /// Fail the multi unless the node is at `version`.
    Check {
        /// Node path.
        path: String,
        /// Expected version.
        version: i32,
    },
}

/// One read inside a multiRead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOp {
    /// getData without a watch.
    GetData(String),
    /// getChildren without a watch.
    GetChildren(String),
}

/// A request the session core can send. Watch flags register a one-shot watcher on success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// create / create2 / createContainer / createTTL, by mode and `with_stat`.
    Create {
        /// Node path (the prefix, for sequential modes).
        path: String,
        /// Initial data.
        data: Bytes,
        /// Its ACL.
        acl: Vec<Acl>,
        /// The create mode.
        mode: CreateMode,
        /// Time to live, ms; required for the TTL modes.
        ttl: Option<i64>,
        /// Ask for the Stat too (create2); containers and TTL nodes always return one.
        with_stat: bool,
    },
    /// delete.
    Delete {
        /// Node path.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// exists.
    Exists {
        /// Node path.
        path: String,
        /// Leave a watcher (data watch if it exists, exist watch if not).
        watch: bool,
    },
    /// getData.
    GetData {
        /// Node path.
        path: String,
        /// Leave a data watcher.
        watch: bool,
    },
    /// setData.
    SetData {
        /// Node path.
        path: String,
        /// New data.
        data: Bytes,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// getACL.
    GetAcl {
        /// Node path.
        path: String,
    },
    /// setACL.
    SetAcl {
        /// Node path.
        path: String,
        /// New ACL.
        acl: Vec<Acl>,
        /// Expected ACL version, -1 for any.
        version: i32,
    },
    /// getChildren (or getChildren2 when `with_stat`).
    GetChildren {
        /// Node path.
        path: String,
        /// Leave a child watcher.
        watch: bool,
        /// Also return the parent's Stat.
        with_stat: bool,
    },
    /// sync.
    Sync {
        /// Node path.
        path: String,
    },
    /// multi (atomic writes).
    Multi(Vec<MultiOp>),
    /// multiRead.
    MultiRead(Vec<ReadOp>),
    /// addWatch: a persistent or persistent-recursive watcher.
    AddWatch {
        /// Node path.
        path: String,
        /// Persistent or persistent-recursive.
        mode: AddWatchMode,
    },
    /// removeWatches: remove every local watcher of a type on a path, on the server too.
    RemoveWatches {
        /// Node path.
        path: String,
        /// Children, Data or Any.
        kind: WatcherType,
    },
    /// getEphemerals under a path prefix.
    GetEphemerals {
        /// Path prefix ("/" for all).
        prefix: String,
    },
    /// getAllChildrenNumber: count of all descendants.
    GetAllChildrenNumber {
        /// Node path.
        path: String,
    },
    /// whoAmI.
    WhoAmI,
    /// addAuth: also remembered and replayed after every reconnect.
    AddAuth {
        /// Auth scheme ("digest", ...).
        scheme: String,
        /// Scheme-specific credentials.
        auth: Bytes,
    },
    /// getConfig: getData of /zookeeper/config, never chrooted.
    GetConfig {
        /// Leave a data watcher on the config node.
        watch: bool,
    },
    /// reconfig (incremental with joining/leaving, or non-incremental with new members).
    Reconfig {
        /// Servers to add, comma separated.
        joining: Option<String>,
        /// Server ids to remove, comma separated.
        leaving: Option<String>,
        /// The whole new membership.
        new_members: Option<String>,
        /// Expected config version, -1 for any.
        from_config: i64,
    },
    /// closeSession.
    Close,
    /// [`Op::Create`] whose data may be null (`None` goes out as length -1). Completes like
    /// `Create`.
    CreateNullable {
        /// Node path (the prefix, for sequential modes).
        path: String,
        /// Initial data, `None` for null.
        data: Option<Bytes>,
        /// Its ACL.
        acl: Vec<Acl>,
        /// The create mode.
        mode: CreateMode,
        /// Time to live, ms; required for the TTL modes.
        ttl: Option<i64>,
        /// Ask for the Stat too (create2).
        with_stat: bool,
    },
    /// [`Op::SetData`] whose data may be null. Completes like `SetData` ([`Response::Stat`]).
    SetDataNullable {
        /// Node path.
        path: String,
        /// New data, `None` for null.
        data: Option<Bytes>,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// [`Op::GetData`] that keeps null data apart from empty data: completes with
    /// [`Response::NullableData`]. A watch registers exactly as for `GetData`.
    GetDataNullable {
        /// Node path.
        path: String,
        /// Leave a data watcher.
        watch: bool,
    },
    /// checkWatches: asks the server whether it holds a watch of `kind` on `path` (NOWATCHER if
    /// not) without removing anything. Apache's clients send it before forgetting one watcher
    /// locally; the core's registry is left alone (the driver forgets its watcher with
    /// [`super::Session::forget_watcher`] when this succeeds). Completes with [`Response::Done`];
    /// NOWATCHER at once when the core holds no watch of that kind on the path.
    CheckWatches {
        /// Node path.
        path: String,
        /// Children, Data or Any.
        kind: WatcherType,
    },
}

/// The path of the dynamic configuration node.
pub const CONFIG_NODE: &str = "/zookeeper/config";

/// A successful operation's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// create: the actual path (with sequence suffix) and, for create2-style requests, the Stat.
    Create {
        /// Created path (client path).
        path: String,
        /// Its Stat, when requested.
        stat: Option<Stat>,
    },
    /// Nothing to return (delete, addWatch, removeWatches, addAuth, closeSession).
    Done,
    /// exists: the Stat, or `None` when the node does not exist.
    Exists(Option<Stat>),
    /// getData, getConfig, reconfig.
    Data {
        /// The node's data (empty for null).
        data: Bytes,
        /// Its Stat.
        stat: Stat,
    },
    /// setData, setACL: the new Stat.
    Stat(Stat),
    /// getACL.
    Acl {
        /// The ACL.
        acl: Vec<Acl>,
        /// The node's Stat.
        stat: Stat,
    },
    /// getChildren(2).
    Children {
        /// Child names, unsorted as the server sends them.
        children: Vec<String>,
        /// The parent's Stat, for getChildren2.
        stat: Option<Stat>,
    },
    /// sync: the path synced.
    Sync(String),
    /// multi / multiRead: one result per op; on a failed multi, the failing op carries its error,
    /// the ones before it OK (0), later ones RUNTIMEINCONSISTENCY.
    Multi(Vec<OpResult>),
    /// getEphemerals: the session's ephemeral paths (as the server reports them).
    Paths(Vec<String>),
    /// getAllChildrenNumber.
    Count(i32),
    /// whoAmI.
    WhoAmI(Vec<ClientInfo>),
    /// getData through [`Op::GetDataNullable`]: `None` when the node holds null data.
    NullableData {
        /// The node's data, `None` for null.
        data: Option<Bytes>,
        /// Its Stat.
        stat: Stat,
    },
}

/// How a submitted op must be encoded and its reply decoded: a prepared op.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub opcode: OpCode,
    /// Body (no header), server paths.
    pub body: Bytes,
    /// The client path watches register under, if any.
    pub watch_path: Option<String>,
}

/// The chroot, applied to paths in both directions.
#[derive(Debug, Clone, Default)]
pub(crate) struct Chroot(pub Option<String>);

impl Chroot {
    pub fn add(&self, path: &str) -> String {
        match &self.0 {
            None => path.to_owned(),
            Some(root) if path == "/" => root.clone(),
            Some(root) => format!("{root}{path}"),
        }
    }

    /// Strips the chroot; a path outside it is returned unchanged, as Apache's client does.
    pub fn strip(&self, path: &str) -> String {
        match &self.0 {
            None => path.to_owned(),
            Some(root) => match path.strip_prefix(root.as_str()) {
                Some("") => "/".to_owned(),
                Some(rest) if rest.starts_with('/') => rest.to_owned(),
                _ => path.to_owned(),
            },
        }
    }
}

fn check(path: &str) -> Result<(), ErrorCode> {
    validate_path(path).map_err(|_| ErrorCode::BadArguments)
}

fn create_opcode(mode: CreateMode, ttl: Option<i64>, with_stat: bool) -> Result<OpCode, ErrorCode> {
    // The client refuses a TTL it knows the server will refuse, as Apache's does, and never sends a
    // TTL for other modes.
    if mode.is_ttl() {
        match ttl {
            Some(t) if t > 0 && t <= 0xFF_FFFF_FFFF => Ok(OpCode::CreateTtl),
            _ => Err(ErrorCode::BadArguments),
        }
    } else if ttl.is_some_and(|t| t != 0) {
        Err(ErrorCode::BadArguments)
    } else if mode.is_container() {
        Ok(OpCode::CreateContainer)
    } else if with_stat {
        Ok(OpCode::Create2)
    } else {
        Ok(OpCode::Create)
    }
}

fn write_create(
    out: &mut BytesMut,
    chroot: &Chroot,
    c: (&str, Option<&Bytes>, &[Acl], CreateMode, Option<i64>, bool),
) -> Result<OpCode, ErrorCode> {
    let (path, data, acl, mode, ttl, with_stat) = c;
    validate_create_path(path, mode.is_sequential()).map_err(|_| ErrorCode::BadArguments)?;
    if acl.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let opcode = create_opcode(mode, ttl, with_stat)?;
    chroot.add(path).write(out);
    data.cloned().write(out);
    acl.to_vec().write(out);
    mode.code().write(out);
    if opcode == OpCode::CreateTtl {
        ttl.unwrap_or(0).write(out);
    }
    Ok(opcode)
}

/// One create inside a multi. The header comes first but its opcode depends on the mode, so the
/// body is encoded aside.
fn multi_create(
    out: &mut BytesMut,
    chroot: &Chroot,
    c: (&str, Option<&Bytes>, &[Acl], CreateMode, Option<i64>, bool),
) -> Result<(), ErrorCode> {
    let mut body = BytesMut::new();
    let code = write_create(&mut body, chroot, c)?;
    // Inside a multi Apache's client always uses create2-style opcodes except for a plain create,
    // which it sends as create.
    let code = if code == OpCode::Create2 { OpCode::Create } else { code };
    multi_header(out, code);
    out.extend_from_slice(&body);
    Ok(())
}

fn multi_header(out: &mut BytesMut, op: OpCode) {
    zk_proto::MultiHeader { op: op.code(), done: false, err: -1 }.write(out);
}

/// Validates `op` and encodes its body with server paths.
pub(crate) fn prepare(op: &Op, chroot: &Chroot) -> Result<Prepared, ErrorCode> {
    let mut out = BytesMut::new();
    let mut watch_path = None;
    let opcode = match op {
        Op::Create { path, data, acl, mode, ttl, with_stat } => {
            write_create(&mut out, chroot, (path, Some(data), acl, *mode, *ttl, *with_stat))?
        }
        Op::CreateNullable { path, data, acl, mode, ttl, with_stat } => {
            write_create(&mut out, chroot, (path, data.as_ref(), acl, *mode, *ttl, *with_stat))?
        }
        Op::Delete { path, version } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            version.write(&mut out);
            OpCode::Delete
        }
        Op::Exists { path, watch } | Op::GetData { path, watch } | Op::GetDataNullable { path, watch } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            watch.write(&mut out);
            if *watch {
                watch_path = Some(path.clone());
            }
            if matches!(op, Op::Exists { .. }) {
                OpCode::Exists
            } else {
                OpCode::GetData
            }
        }
        Op::SetData { path, data, version } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            Some(data.clone()).write(&mut out);
            version.write(&mut out);
            OpCode::SetData
        }
        Op::SetDataNullable { path, data, version } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            data.clone().write(&mut out);
            version.write(&mut out);
            OpCode::SetData
        }
        Op::GetAcl { path } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            OpCode::GetAcl
        }
        Op::SetAcl { path, acl, version } => {
            check(path)?;
            if acl.is_empty() {
                return Err(ErrorCode::InvalidAcl);
            }
            chroot.add(path).write(&mut out);
            acl.write(&mut out);
            version.write(&mut out);
            OpCode::SetAcl
        }
        Op::GetChildren { path, watch, with_stat } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            watch.write(&mut out);
            if *watch {
                watch_path = Some(path.clone());
            }
            if *with_stat {
                OpCode::GetChildren2
            } else {
                OpCode::GetChildren
            }
        }
        Op::Sync { path } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            OpCode::Sync
        }
        Op::Multi(ops) => {
            for m in ops {
                match m {
                    MultiOp::Create { path, data, acl, mode, ttl } => {
                        multi_create(&mut out, chroot, (path, Some(data), acl, *mode, *ttl, true))?;
                    }
                    MultiOp::CreateNullable { path, data, acl, mode, ttl } => {
                        multi_create(&mut out, chroot, (path, data.as_ref(), acl, *mode, *ttl, true))?;
                    }
                    MultiOp::SetDataNullable { path, data, version } => {
                        check(path)?;
                        multi_header(&mut out, OpCode::SetData);
                        chroot.add(path).write(&mut out);
                        data.clone().write(&mut out);
                        version.write(&mut out);
                    }
                    MultiOp::Delete { path, version } => {
                        check(path)?;
                        multi_header(&mut out, OpCode::Delete);
                        chroot.add(path).write(&mut out);
                        version.write(&mut out);
                    }
                    MultiOp::SetData { path, data, version } => {
                        check(path)?;
                        multi_header(&mut out, OpCode::SetData);
                        chroot.add(path).write(&mut out);
                        Some(data.clone()).write(&mut out);
                        version.write(&mut out);
                    }
                    MultiOp::Check { path, version } => {
                        check(path)?;
                        multi_header(&mut out, OpCode::Check);
                        chroot.add(path).write(&mut out);
                        version.write(&mut out);
                    }
                }
            }
            zk_proto::MultiHeader { op: -1, done: true, err: -1 }.write(&mut out);
            OpCode::Multi
        }
        Op::MultiRead(ops) => {
            for r in ops {
                let (code, path) = match r {
                    ReadOp::GetData(p) => (OpCode::GetData, p),
                    ReadOp::GetChildren(p) => (OpCode::GetChildren, p),
                };
                check(path)?;
                multi_header(&mut out, code);
                chroot.add(path).write(&mut out);
                false.write(&mut out);
            }
            zk_proto::MultiHeader { op: -1, done: true, err: -1 }.write(&mut out);
            OpCode::MultiRead
        }
        Op::AddWatch { path, mode } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            mode.code().write(&mut out);
            watch_path = Some(path.clone());
            OpCode::AddWatch
        }
        Op::RemoveWatches { path, kind } | Op::CheckWatches { path, kind } => {
            check(path)?;
            if !matches!(kind, WatcherType::Children | WatcherType::Data | WatcherType::Any) {
                return Err(ErrorCode::BadArguments);
            }
            chroot.add(path).write(&mut out);
            kind.code().write(&mut out);
            if matches!(op, Op::RemoveWatches { .. }) {
                // Removal changes the client's watch registry once the server answers.
                watch_path = Some(path.clone());
                OpCode::RemoveWatches
            } else {
                OpCode::CheckWatches
            }
        }
        Op::GetEphemerals { prefix } => {
            check(prefix)?;
            chroot.add(prefix).write(&mut out);
            OpCode::GetEphemerals
        }
        Op::GetAllChildrenNumber { path } => {
            check(path)?;
            chroot.add(path).write(&mut out);
            OpCode::GetAllChildrenNumber
        }
        Op::WhoAmI => OpCode::WhoAmI,
        Op::AddAuth { scheme, auth } => {
            zk_proto::AuthPacket { auth_type: 0, scheme: scheme.clone(), auth: auth.clone() }.write(&mut out);
            OpCode::Auth
        }
        Op::GetConfig { watch } => {
            CONFIG_NODE.to_owned().write(&mut out);
            watch.write(&mut out);
            if *watch {
                watch_path = Some(CONFIG_NODE.to_owned());
            }
            OpCode::GetData
        }
        Op::Reconfig { joining, leaving, new_members, from_config } => {
            zk_proto::ReconfigRequest {
                joining_servers: joining.clone(),
                leaving_servers: leaving.clone(),
                new_members: new_members.clone(),
                cur_config_id: *from_config,
            }
            .write(&mut out);
            OpCode::Reconfig
        }
        Op::Close => OpCode::CloseSession,
    };
    Ok(Prepared { opcode, body: out.freeze(), watch_path })
}

/// Frames a request: length, header, body.
pub(crate) fn frame_request(xid: i32, opcode: OpCode, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + 8 + body.len());
    zk_proto::frame::write_frame(&mut out, |o| {
        RequestHeader { xid, op: opcode.code() }.write(o);
        o.extend_from_slice(body);
    });
    out.freeze()
}

fn strip_results(results: Vec<OpResult>, chroot: &Chroot) -> Vec<OpResult> {
    results
        .into_iter()
        .map(|r| match r {
            OpResult::Create(p) => OpResult::Create(chroot.strip(&p)),
            OpResult::Create2(p, s) => OpResult::Create2(chroot.strip(&p), s),
            other => other,
        })
        .collect()
}

/// Decodes the record that follows a successful reply header for `op`.
pub(crate) fn decode_response(
    op: &Op,
    r: &mut Reader,
    chroot: &Chroot,
) -> Result<Response, zk_proto::DecodeError> {
    Ok(match op {
        Op::Create { mode, ttl, with_stat, .. } | Op::CreateNullable { mode, ttl, with_stat, .. } => {
            let opcode = create_opcode(*mode, *ttl, *with_stat).unwrap_or(OpCode::Create);
            if opcode == OpCode::Create {
                Response::Create { path: chroot.strip(&String::read(r)?), stat: None }
            } else {
                let c = zk_proto::Create2Response::read(r)?;
                Response::Create { path: chroot.strip(&c.path), stat: Some(c.stat) }
            }
        }
        Op::Delete { .. }
        | Op::AddWatch { .. }
        | Op::RemoveWatches { .. }
        | Op::AddAuth { .. }
        | Op::CheckWatches { .. }
        | Op::Close => Response::Done,
        Op::Exists { .. } => Response::Exists(Some(Stat::read(r)?)),
        Op::GetData { .. } | Op::GetConfig { .. } | Op::Reconfig { .. } => {
            let d = zk_proto::GetDataResponse::read(r)?;
            Response::Data { data: d.data.unwrap_or_default(), stat: d.stat }
        }
        Op::GetDataNullable { .. } => {
            let d = zk_proto::GetDataResponse::read(r)?;
            Response::NullableData { data: d.data, stat: d.stat }
        }
        Op::SetData { .. } | Op::SetDataNullable { .. } | Op::SetAcl { .. } => Response::Stat(Stat::read(r)?),
        Op::GetAcl { .. } => {
            let a = zk_proto::GetAclResponse::read(r)?;
            Response::Acl { acl: a.acl, stat: a.stat }
        }
        Op::GetChildren { with_stat: false, .. } => {
            Response::Children { children: Vec::read(r)?, stat: None }
        }
        Op::GetChildren { with_stat: true, .. } => {
            let c = zk_proto::GetChildren2Response::read(r)?;
            Response::Children { children: c.children, stat: Some(c.stat) }
        }
        Op::Sync { .. } => Response::Sync(chroot.strip(&String::read(r)?)),
        Op::Multi(_) | Op::MultiRead(_) => Response::Multi(strip_results(decode_multi_response(r)?, chroot)),
        Op::GetEphemerals { .. } => Response::Paths(Vec::read(r)?),
        Op::GetAllChildrenNumber { .. } => Response::Count(i32::read(r)?),
        Op::WhoAmI => Response::WhoAmI(zk_proto::WhoAmIResponse::read(r)?.client_info),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chroot_both_ways() {
        let c = Chroot(Some("/app".into()));
        assert_eq!(c.add("/"), "/app");
        assert_eq!(c.add("/x"), "/app/x");
        assert_eq!(c.strip("/app"), "/");
        assert_eq!(c.strip("/app/x"), "/x");
        assert_eq!(c.strip("/apple"), "/apple");
        assert_eq!(c.strip("/zookeeper/config"), "/zookeeper/config");
        assert_eq!(Chroot(None).add("/x"), "/x");
    }

    #[test]
    fn create_opcodes() {
        assert_eq!(create_opcode(CreateMode::Persistent, None, false), Ok(OpCode::Create));
        assert_eq!(create_opcode(CreateMode::Persistent, None, true), Ok(OpCode::Create2));
        assert_eq!(create_opcode(CreateMode::Container, None, false), Ok(OpCode::CreateContainer));
        assert_eq!(create_opcode(CreateMode::PersistentWithTtl, Some(5), false), Ok(OpCode::CreateTtl));
        assert_eq!(create_opcode(CreateMode::PersistentWithTtl, None, false), Err(ErrorCode::BadArguments));
        assert_eq!(create_opcode(CreateMode::Persistent, Some(5), false), Err(ErrorCode::BadArguments));
    }

    #[test]
    fn bad_paths_refused_before_sending() {
        let c = Chroot(None);
        assert_eq!(prepare(&Op::GetAcl { path: "x".into() }, &c).unwrap_err(), ErrorCode::BadArguments);
        assert_eq!(
            prepare(&Op::Delete { path: "/a/".into(), version: -1 }, &c).unwrap_err(),
            ErrorCode::BadArguments
        );
        let p = prepare(&Op::GetData { path: "/a".into(), watch: true }, &Chroot(Some("/r".into()))).unwrap();
        assert_eq!(p.opcode, OpCode::GetData);
        assert_eq!(p.watch_path.as_deref(), Some("/a"));
        assert_eq!(&p.body[4..], b"/r/a\x01");
    }
}
