//! libzkrs's additions to Apache's C client API: the ZooKeeper 3.6+ server operations Apache's
//! C client lacks (persistent watches, getEphemerals, multiRead, getAllChildrenNumber, whoAmI).
//!
//! This module is the source of `include/zookeeper/zkrs_ext.h`: cbindgen reads this file alone
//! (`zk-ffi/cbindgen.toml`) and writes its constants and `extern "C"` functions, with these doc
//! comments, as the header's declarations; `tests/ext_header.rs` fails when the committed header
//! differs from what cbindgen writes now. Keep every item here C-facing: the types it names
//! (`zhandle_t`, `watcher_fn`, `zoo_op_t`, the jute structs) are declared by zookeeper.h, which the
//! generated header includes. Apache's API stays in the other modules and in the hand-kept
//! zookeeper.h.
//!
//! The synchronous calls carry `#[cfg(threaded)]`, a cfg build.rs always sets (libzkrs.so exports
//! them; only the single-threaded library leaves them out, by its version script): cbindgen turns
//! it into `#if defined(THREADED)`, as zookeeper.h guards Apache's synchronous calls.

use crate::abi::{self, err, zhandle_t, zoo_op_result_t, zoo_op_t, Stat, String_vector};
use crate::api::{go, path_arg, pending, wentry};
#[cfg(threaded)]
use crate::api::{handle, rc, sync};
#[cfg(threaded)]
use crate::deliver::{fill_multi_read, fill_strings, malloc_str, multi_read_rc};
use crate::handle::{Completion, Pending, WatchEntry, WatchSide};
use crate::lifecycle::op_mut;
use libc::{c_char, c_int, c_void};
#[cfg(threaded)]
use zk_client::core::Response;
use zk_client::core::{Op, ReadOp};
use zk_proto::AddWatchMode;

/// zoo_aadd_watch's `mode`: a persistent watch on the node itself (data changes, deletion,
/// children changes), kept after each event.
pub const ZOO_ADD_WATCH_PERSISTENT: c_int = 0;
/// zoo_aadd_watch's `mode`: a persistent watch on the node and every node below it.
pub const ZOO_ADD_WATCH_PERSISTENT_RECURSIVE: c_int = 1;

/// Fills `op` as a getData read of a multiRead (zoo_amulti_read / zoo_multi_read; op type 4, no
/// watch is left): the data is copied into `buf` (at most `buflen` bytes, silently truncated) and
/// the node's Stat into `stat` (may be NULL). zoo_amulti / zoo_multi refuse such an op
/// (ZUNIMPLEMENTED).
#[no_mangle]
pub extern "C" fn zoo_get_data_op_init(
    op: *mut zoo_op_t,
    path: *const c_char,
    buf: *mut c_char,
    buflen: c_int,
    stat: *mut Stat,
) {
    if let Some(o) = op_mut(op) {
        o.type_ = 4;
        o.u.get_data_op = abi::zoo_get_data_op { path, buf, buflen, stat };
    }
}

/// Fills `op` as a getChildren read of a multiRead (op type 8, no watch is left): `strings`
/// receives malloc'd child names (free with deallocate_String_vector); it is emptied when the op
/// fails. zoo_amulti / zoo_multi refuse such an op (ZUNIMPLEMENTED).
#[no_mangle]
pub extern "C" fn zoo_get_children_op_init(
    op: *mut zoo_op_t,
    path: *const c_char,
    strings: *mut String_vector,
) {
    if let Some(o) = op_mut(op) {
        o.type_ = 8;
        o.u.get_children_op = abi::zoo_get_children_op { path, strings };
    }
}

/// The reads of a multiRead: only ops from zoo_get_data_op_init / zoo_get_children_op_init
/// (ZBADARGUMENTS for any other kind, a negative count or NULL arrays).
fn read_ops(count: c_int, ops: *const zoo_op_t, results: *mut zoo_op_result_t) -> Result<Vec<ReadOp>, c_int> {
    if count < 0 || (count > 0 && (ops.is_null() || results.is_null())) {
        return Err(err::ZBADARGUMENTS);
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        // SAFETY: i < count entries at ops.
        let op = unsafe { &*ops.add(i) };
        // SAFETY: each arm reads the union member its type selects.
        let r = unsafe {
            match op.type_ {
                4 => ReadOp::GetData(path_arg(op.u.get_data_op.path)?),
                8 => ReadOp::GetChildren(path_arg(op.u.get_children_op.path)?),
                _ => return Err(err::ZBADARGUMENTS),
            }
        };
        out.push(r);
    }
    Ok(out)
}

/// multiRead (server opcode 22, ZooKeeper 3.6+): `count` reads built with zoo_get_data_op_init /
/// zoo_get_children_op_init, answered independently and seen at one point of the server's
/// history. Before the completion runs, `results[i].err` holds each read's own outcome (ZNONODE
/// for one missing node while the others are ZOK) and the ops' out-buffers are filled; the
/// completion's rc is ZOK unless the request as a whole failed (ZCONNECTIONLOSS, say), and then
/// every `results[i].err` is that rc too. Every getChildren op's String_vector is left valid for
/// deallocate_String_vector (empty when its read failed). `ops`, `results` and the ops' buffers
/// must stay valid until the completion. Returns ZBADARGUMENTS, without calling the completion,
/// for a bad path, an op of another kind, a negative count or NULL arrays.
#[no_mangle]
pub extern "C" fn zoo_amulti_read(
    zh: *mut zhandle_t,
    count: c_int,
    ops: *const zoo_op_t,
    results: *mut zoo_op_result_t,
    completion: abi::void_completion_t,
    data: *const c_void,
) -> c_int {
    go(
        zh,
        read_ops(count, ops, results).map(Op::MultiRead),
        pending(
            Completion::Multi { cb: completion, read: true, ops, results, count: count.max(0) as usize },
            data,
        ),
    )
}

/// The addWatch request and the watcher to register with it, or ZBADARGUMENTS.
fn add_watch(
    path: *const c_char,
    mode: c_int,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
) -> Result<(Op, Option<WatchEntry>), c_int> {
    let path = path_arg(path)?;
    let (Some(mode), Some(_)) = (AddWatchMode::from_i32(mode), watcher) else {
        return Err(err::ZBADARGUMENTS);
    };
    let watch = wentry(watcher, ctx, &path, WatchSide::Persistent);
    Ok((Op::AddWatch { path, mode }, watch))
}

/// addWatch (ZooKeeper 3.6+): leaves a persistent watch on `path`, `mode`
/// ZOO_ADD_WATCH_PERSISTENT or ZOO_ADD_WATCH_PERSISTENT_RECURSIVE. `watcher` gets every event
/// until the watch is removed with zoo_remove_all_watches(ZWATCHTYPE_ANY) or the session ends;
/// the completion gets the server's answer. Returns ZBADARGUMENTS, without calling the
/// completion, for a bad path, an unknown mode or a NULL watcher.
#[no_mangle]
pub extern "C" fn zoo_aadd_watch(
    zh: *mut zhandle_t,
    path: *const c_char,
    mode: c_int,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    completion: abi::void_completion_t,
    data: *const c_void,
) -> c_int {
    match add_watch(path, mode, watcher, ctx) {
        Ok((op, watch)) => go(zh, Ok(op), Pending { completion: Completion::Void(completion), data, watch }),
        Err(e) => e,
    }
}

/// getEphemerals (ZooKeeper 3.6+): the paths of this session's ephemeral nodes under `prefix`
/// ("/" for all), to the completion as getChildren's names are.
#[no_mangle]
pub extern "C" fn zoo_aget_ephemerals(
    zh: *mut zhandle_t,
    prefix: *const c_char,
    completion: abi::strings_completion_t,
    data: *const c_void,
) -> c_int {
    go(
        zh,
        path_arg(prefix).map(|prefix| Op::GetEphemerals { prefix }),
        pending(Completion::Strings(completion), data),
    )
}

// ---------------------------------------------------------------- synchronous (mt library only)

/// zoo_aadd_watch, waiting for the server's answer (mt library only).
#[cfg(threaded)]
#[no_mangle]
pub extern "C" fn zoo_add_watch(
    zh: *mut zhandle_t,
    path: *const c_char,
    mode: c_int,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
) -> c_int {
    match add_watch(path, mode, watcher, ctx) {
        Ok((op, watch)) => rc(sync(zh, Ok(op), watch)),
        Err(e) => e,
    }
}

/// zoo_aget_ephemerals, waiting for the answer (mt library only): on ZOK `strings` holds malloc'd
/// paths (free with deallocate_String_vector).
#[cfg(threaded)]
#[no_mangle]
pub extern "C" fn zoo_get_ephemerals(
    zh: *mut zhandle_t,
    prefix: *const c_char,
    strings: *mut String_vector,
) -> c_int {
    if strings.is_null() {
        return err::ZBADARGUMENTS;
    }
    match sync(zh, path_arg(prefix).map(|prefix| Op::GetEphemerals { prefix }), None) {
        Ok(Response::Paths(p)) => {
            // SAFETY: the caller's String_vector out-pointer.
            fill_strings(unsafe { &mut *strings }, &p);
            err::ZOK
        }
        other => rc(other),
    }
}

/// getAllChildrenNumber (ZooKeeper 3.6+, mt library only): the number of all nodes below
/// `path`, at any depth, in `*count`.
#[cfg(threaded)]
#[no_mangle]
pub extern "C" fn zoo_get_all_children_number(
    zh: *mut zhandle_t,
    path: *const c_char,
    count: *mut c_int,
) -> c_int {
    if count.is_null() {
        return err::ZBADARGUMENTS;
    }
    match sync(zh, path_arg(path).map(|path| Op::GetAllChildrenNumber { path }), None) {
        Ok(Response::Count(n)) => {
            // SAFETY: the caller's int out-pointer.
            unsafe { *count = n };
            err::ZOK
        }
        other => rc(other),
    }
}

/// whoAmI (ZooKeeper 3.7+, mt library only): the identities the server knows this session by;
/// on ZOK `infos` holds malloc'd entries (free with deallocate_ClientInfo_vector).
#[cfg(threaded)]
#[no_mangle]
pub extern "C" fn zoo_whoami(zh: *mut zhandle_t, infos: *mut abi::ClientInfo_vector) -> c_int {
    if infos.is_null() {
        return err::ZBADARGUMENTS;
    }
    match sync(zh, Ok(Op::WhoAmI), None) {
        Ok(Response::WhoAmI(list)) => {
            // SAFETY: the caller's out-pointer; allocate_ClientInfo_vector callocs the array.
            unsafe {
                let v = &mut *infos;
                if crate::jute::allocate_ClientInfo_vector(v, list.len() as i32) != 0 {
                    return err::ZSYSTEMERROR;
                }
                for (i, c) in list.iter().enumerate() {
                    let e = &mut *v.data.add(i);
                    e.authScheme = malloc_str(&c.auth_scheme);
                    e.user = malloc_str(&c.user);
                }
            }
            err::ZOK
        }
        other => rc(other),
    }
}

/// zoo_amulti_read, waiting for the answer (mt library only): ZOK with each read's outcome in
/// `results[i].err`, or the request's error (then in every `results[i].err` as well; argument
/// errors leave `results` untouched).
#[cfg(threaded)]
#[no_mangle]
pub extern "C" fn zoo_multi_read(
    zh: *mut zhandle_t,
    count: c_int,
    ops: *const zoo_op_t,
    results: *mut zoo_op_result_t,
) -> c_int {
    if handle(zh).is_none() {
        return err::ZBADARGUMENTS;
    }
    let op = match read_ops(count, ops, results) {
        Ok(r) => Op::MultiRead(r),
        Err(e) => return e,
    };
    let n = count.max(0) as usize;
    // SAFETY: ops/results hold count entries per the API (checked non-NULL by read_ops).
    match sync(zh, Ok(op), None) {
        Ok(Response::Multi(res)) => unsafe { fill_multi_read(ops, results, n, Ok(&res)) },
        other => unsafe { fill_multi_read(ops, results, n, Err(multi_read_rc(&other))) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The C constants are the modes the wire carries.
    #[test]
    fn add_watch_modes_are_the_wire_values() {
        assert_eq!(AddWatchMode::from_i32(ZOO_ADD_WATCH_PERSISTENT), Some(AddWatchMode::Persistent));
        assert_eq!(
            AddWatchMode::from_i32(ZOO_ADD_WATCH_PERSISTENT_RECURSIVE),
            Some(AddWatchMode::PersistentRecursive)
        );
    }
}
