//! The zoo_* functions: argument checks with Apache's error codes, then a core operation.
//!
//! Every function takes a `zhandle_t *` that is NULL (ZBADARGUMENTS) or a handle from
//! zookeeper_init not yet closed. Paths are checked here, so a bad path returns ZBADARGUMENTS
//! from the call itself and the completion is never called, as with Apache's client.

use crate::abi::{self, err, zoo_op_result_t, zoo_op_t, ACL_vector, Stat, String_vector};
use crate::deliver::{copy_truncated, fill_acl, fill_multi, fill_strings};
use crate::handle::{
    side_matches, Completion, Handle, Pending, Removal, SyncSlot, WatchEntry, WatchSide, Watcher,
};
use bytes::Bytes;
use libc::{c_char, c_int, c_void};
use std::ffi::CStr;
use std::ptr::null;
use std::sync::Arc;
use zk_client::core::{MultiOp, Op, Response, CONFIG_NODE};
use zk_proto::{Acl, CreateMode, Id, WatcherType};

/// The handle behind a zhandle_t pointer.
pub(crate) fn handle<'a>(zh: *mut c_void) -> Option<&'a Handle> {
    if zh.is_null() {
        None
    } else {
        // SAFETY: a non-NULL zhandle_t is an Arc<Handle> pointer from zookeeper_init, alive until
        // zookeeper_close.
        Some(unsafe { &*(zh as *const Handle) })
    }
}

pub(crate) fn cstr(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the C API takes NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_str().ok().map(str::to_owned)
}

pub(crate) fn path_arg(p: *const c_char) -> Result<String, c_int> {
    let s = cstr(p).ok_or(err::ZBADARGUMENTS)?;
    zk_proto::path::validate_path(&s).map_err(|_| err::ZBADARGUMENTS)?;
    Ok(s)
}

/// Request data: a negative length is null data (Apache sends the length as given and -1 means
/// null), 0 is empty. NULL with a positive length would make Apache's client read through NULL;
/// here it is ZBADARGUMENTS.
fn data_arg(p: *const c_char, len: c_int) -> Result<Option<Bytes>, c_int> {
    if len < 0 {
        return Ok(None);
    }
    if len == 0 {
        return Ok(Some(Bytes::new()));
    }
    if p.is_null() {
        return Err(err::ZBADARGUMENTS);
    }
    // SAFETY: the caller gives `len` readable bytes at `p`.
    Ok(Some(Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len as usize) })))
}

fn acl_arg(acl: *const ACL_vector) -> Vec<Acl> {
    if acl.is_null() {
        return Vec::new();
    }
    // SAFETY: a valid ACL_vector per the API.
    let v = unsafe { &*acl };
    if v.data.is_null() || v.count <= 0 {
        return Vec::new();
    }
    (0..v.count as usize)
        .map(|i| {
            // SAFETY: i < count.
            let a = unsafe { &*v.data.add(i) };
            Acl {
                perms: a.perms,
                id: Id {
                    scheme: cstr(a.id.scheme).unwrap_or_default(),
                    id: cstr(a.id.id).unwrap_or_default(),
                },
            }
        })
        .collect()
}

/// A create request. Like Apache's client, a TTL mode needs 0 < ttl <= 2^40-1 and any other mode
/// needs a negative ttl (the non-TTL entry points pass -1); `None` (multi ops) skips the latter.
fn create_op(
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    ttl: Option<i64>,
    with_stat: bool,
) -> Result<Op, c_int> {
    let path = cstr(path).ok_or(err::ZBADARGUMENTS)?;
    let mode = CreateMode::from_i32(mode).ok_or(err::ZBADARGUMENTS)?;
    zk_proto::path::validate_create_path(&path, mode.is_sequential()).map_err(|_| err::ZBADARGUMENTS)?;
    let ttl = if mode.is_ttl() {
        match ttl {
            Some(t) if t > 0 && t <= 0xFF_FFFF_FFFF => Some(t),
            _ => return Err(err::ZBADARGUMENTS),
        }
    } else if ttl.is_some_and(|t| t >= 0) {
        return Err(err::ZBADARGUMENTS);
    } else {
        None
    };
    let data = data_arg(value, valuelen)?;
    Ok(Op::CreateNullable { path, data, acl: acl_arg(acl), mode, ttl, with_stat })
}

pub(crate) fn pending(completion: Completion, data: *const c_void) -> Pending {
    Pending { completion, data, watch: None }
}

fn watch_entry(h: &Handle, watch: c_int, path: &str, side: WatchSide) -> Option<WatchEntry> {
    (watch != 0).then(|| WatchEntry { watcher: h.global_watcher(), path: path.to_owned(), side })
}

pub(crate) fn wentry(
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    path: &str,
    side: WatchSide,
) -> Option<WatchEntry> {
    watcher.map(|_| WatchEntry { watcher: Watcher { func: watcher, ctx }, path: path.to_owned(), side })
}

/// Submits and returns the call's rc.
pub(crate) fn go(zh: *mut c_void, op: Result<Op, c_int>, p: Pending) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    match op {
        Ok(op) => h.submit(op, p),
        Err(e) => e,
    }
}

/// Runs a sync call: submit, then wait for the I/O thread's answer.
pub(crate) fn sync(
    zh: *mut c_void,
    op: Result<Op, c_int>,
    watch: Option<WatchEntry>,
) -> Result<Response, c_int> {
    let h = handle(zh).ok_or(err::ZBADARGUMENTS)?;
    let op = op?;
    if !h.threaded {
        return Err(err::ZINVALIDSTATE);
    }
    let slot = Arc::new(SyncSlot::default());
    let rc = h.submit(op, Pending { completion: Completion::Sync(Arc::clone(&slot)), data: null(), watch });
    if rc != err::ZOK {
        return Err(rc);
    }
    slot.wait(None).unwrap_or(Err(err::ZCLOSING))
}

fn put_stat(out: *mut Stat, s: &zk_proto::Stat) {
    if !out.is_null() {
        // SAFETY: the caller's Stat out-pointer.
        unsafe { *out = Stat::from(s) };
    }
}

// ---------------------------------------------------------------- async

/// Creates a node; the completion gets the created path. See zookeeper.h for the contract.
#[no_mangle]
pub extern "C" fn zoo_acreate(
    zh: *mut c_void,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    completion: abi::string_completion_t,
    data: *const c_void,
) -> c_int {
    go(
        zh,
        create_op(path, value, valuelen, acl, mode, Some(-1), false),
        pending(Completion::String(completion), data),
    )
}

/// Creates a TTL (or any other) node; the completion gets the created path.
#[no_mangle]
pub extern "C" fn zoo_acreate_ttl(
    zh: *mut c_void,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    ttl: i64,
    completion: abi::string_completion_t,
    data: *const c_void,
) -> c_int {
    go(
        zh,
        create_op(path, value, valuelen, acl, mode, Some(ttl), false),
        pending(Completion::String(completion), data),
    )
}

/// Creates a node; the completion gets the created path and its Stat.
#[no_mangle]
pub extern "C" fn zoo_acreate2(
    zh: *mut c_void,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    completion: abi::string_stat_completion_t,
    data: *const c_void,
) -> c_int {
    go(
        zh,
        create_op(path, value, valuelen, acl, mode, Some(-1), true),
        pending(Completion::StringStat(completion), data),
    )
}

/// zoo_acreate2 with a TTL.
#[no_mangle]
pub extern "C" fn zoo_acreate2_ttl(
    zh: *mut c_void,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    ttl: i64,
    completion: abi::string_stat_completion_t,
    data: *const c_void,
) -> c_int {
    go(
        zh,
        create_op(path, value, valuelen, acl, mode, Some(ttl), true),
        pending(Completion::StringStat(completion), data),
    )
}

/// Deletes a node at `version` (-1 any).
#[no_mangle]
pub extern "C" fn zoo_adelete(
    zh: *mut c_void,
    path: *const c_char,
    version: c_int,
    completion: abi::void_completion_t,
    data: *const c_void,
) -> c_int {
    go(
        zh,
        path_arg(path).map(|path| Op::Delete { path, version }),
        pending(Completion::Void(completion), data),
    )
}

/// exists, optionally leaving the global watcher; ZNONODE reaches the completion with NULL stat.
#[no_mangle]
pub extern "C" fn zoo_aexists(
    zh: *mut c_void,
    path: *const c_char,
    watch: c_int,
    completion: abi::stat_completion_t,
    data: *const c_void,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = watch_entry(h, watch, &p, WatchSide::Data);
    go(
        zh,
        Ok(Op::Exists { path: p, watch: watch != 0 }),
        Pending { completion: Completion::Stat(completion), data, watch: w },
    )
}

/// exists with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_awexists(
    zh: *mut c_void,
    path: *const c_char,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    completion: abi::stat_completion_t,
    data: *const c_void,
) -> c_int {
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = wentry(watcher, ctx, &p, WatchSide::Data);
    go(
        zh,
        Ok(Op::Exists { path: p, watch: w.is_some() }),
        Pending { completion: Completion::Stat(completion), data, watch: w },
    )
}

/// getData, optionally leaving the global watcher.
#[no_mangle]
pub extern "C" fn zoo_aget(
    zh: *mut c_void,
    path: *const c_char,
    watch: c_int,
    completion: abi::data_completion_t,
    data: *const c_void,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = watch_entry(h, watch, &p, WatchSide::Data);
    go(
        zh,
        Ok(Op::GetDataNullable { path: p, watch: watch != 0 }),
        Pending { completion: Completion::Data(completion), data, watch: w },
    )
}

/// getData with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_awget(
    zh: *mut c_void,
    path: *const c_char,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    completion: abi::data_completion_t,
    data: *const c_void,
) -> c_int {
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = wentry(watcher, ctx, &p, WatchSide::Data);
    go(
        zh,
        Ok(Op::GetDataNullable { path: p, watch: w.is_some() }),
        Pending { completion: Completion::Data(completion), data, watch: w },
    )
}

/// getConfig (the /zookeeper/config node, never chrooted).
#[no_mangle]
pub extern "C" fn zoo_agetconfig(
    zh: *mut c_void,
    watch: c_int,
    completion: abi::data_completion_t,
    data: *const c_void,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let w = watch_entry(h, watch, CONFIG_NODE, WatchSide::Data);
    go(
        zh,
        Ok(Op::GetConfig { watch: watch != 0 }),
        Pending { completion: Completion::Data(completion), data, watch: w },
    )
}

/// getConfig with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_awgetconfig(
    zh: *mut c_void,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    completion: abi::data_completion_t,
    data: *const c_void,
) -> c_int {
    let w = wentry(watcher, ctx, CONFIG_NODE, WatchSide::Data);
    go(
        zh,
        Ok(Op::GetConfig { watch: w.is_some() }),
        Pending { completion: Completion::Data(completion), data, watch: w },
    )
}

fn reconfig_op(
    joining: *const c_char,
    leaving: *const c_char,
    members: *const c_char,
    version: i64,
) -> Result<Op, c_int> {
    Ok(Op::Reconfig {
        joining: cstr(joining),
        leaving: cstr(leaving),
        new_members: cstr(members),
        from_config: version,
    })
}

/// reconfig (incremental or with a new member list); the completion gets the new config.
#[no_mangle]
pub extern "C" fn zoo_areconfig(
    zh: *mut c_void,
    joining: *const c_char,
    leaving: *const c_char,
    members: *const c_char,
    version: i64,
    completion: abi::data_completion_t,
    data: *const c_void,
) -> c_int {
    go(zh, reconfig_op(joining, leaving, members, version), pending(Completion::Data(completion), data))
}

/// setData at `version` (-1 any).
#[no_mangle]
pub extern "C" fn zoo_aset(
    zh: *mut c_void,
    path: *const c_char,
    buffer: *const c_char,
    buflen: c_int,
    version: c_int,
    completion: abi::stat_completion_t,
    data: *const c_void,
) -> c_int {
    let op = path_arg(path)
        .and_then(|path| Ok(Op::SetDataNullable { path, data: data_arg(buffer, buflen)?, version }));
    go(zh, op, pending(Completion::Stat(completion), data))
}

fn children(
    zh: *mut c_void,
    path: *const c_char,
    w: Result<Option<WatchEntry>, c_int>,
    with_stat: bool,
    completion: Completion,
    data: *const c_void,
) -> c_int {
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = match w {
        Ok(w) => w.map(|mut e| {
            e.path = p.clone();
            e
        }),
        Err(e) => return e,
    };
    go(
        zh,
        Ok(Op::GetChildren { path: p, watch: w.is_some(), with_stat }),
        Pending { completion, data, watch: w },
    )
}

fn global_child_watch(zh: *mut c_void, watch: c_int) -> Result<Option<WatchEntry>, c_int> {
    let h = handle(zh).ok_or(err::ZBADARGUMENTS)?;
    Ok(watch_entry(h, watch, "", WatchSide::Child))
}

/// getChildren, optionally leaving the global watcher.
#[no_mangle]
pub extern "C" fn zoo_aget_children(
    zh: *mut c_void,
    path: *const c_char,
    watch: c_int,
    completion: abi::strings_completion_t,
    data: *const c_void,
) -> c_int {
    children(zh, path, global_child_watch(zh, watch), false, Completion::Strings(completion), data)
}

/// getChildren with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_awget_children(
    zh: *mut c_void,
    path: *const c_char,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    completion: abi::strings_completion_t,
    data: *const c_void,
) -> c_int {
    children(
        zh,
        path,
        Ok(wentry(watcher, ctx, "", WatchSide::Child)),
        false,
        Completion::Strings(completion),
        data,
    )
}

/// getChildren2 (children and the parent's Stat), optionally leaving the global watcher.
#[no_mangle]
pub extern "C" fn zoo_aget_children2(
    zh: *mut c_void,
    path: *const c_char,
    watch: c_int,
    completion: abi::strings_stat_completion_t,
    data: *const c_void,
) -> c_int {
    children(zh, path, global_child_watch(zh, watch), true, Completion::StringsStat(completion), data)
}

/// getChildren2 with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_awget_children2(
    zh: *mut c_void,
    path: *const c_char,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    completion: abi::strings_stat_completion_t,
    data: *const c_void,
) -> c_int {
    children(
        zh,
        path,
        Ok(wentry(watcher, ctx, "", WatchSide::Child)),
        true,
        Completion::StringsStat(completion),
        data,
    )
}

/// sync: the completion gets the path once the server is up to date with the leader.
#[no_mangle]
pub extern "C" fn zoo_async(
    zh: *mut c_void,
    path: *const c_char,
    completion: abi::string_completion_t,
    data: *const c_void,
) -> c_int {
    go(zh, path_arg(path).map(|path| Op::Sync { path }), pending(Completion::String(completion), data))
}

/// getACL.
#[no_mangle]
pub extern "C" fn zoo_aget_acl(
    zh: *mut c_void,
    path: *const c_char,
    completion: abi::acl_completion_t,
    data: *const c_void,
) -> c_int {
    go(zh, path_arg(path).map(|path| Op::GetAcl { path }), pending(Completion::Acl(completion), data))
}

/// setACL at ACL `version` (-1 any).
#[no_mangle]
pub extern "C" fn zoo_aset_acl(
    zh: *mut c_void,
    path: *const c_char,
    version: c_int,
    acl: *mut ACL_vector,
    completion: abi::void_completion_t,
    data: *const c_void,
) -> c_int {
    go(
        zh,
        path_arg(path).map(|path| Op::SetAcl { path, acl: acl_arg(acl), version }),
        pending(Completion::Void(completion), data),
    )
}

fn multi_ops(count: c_int, ops: *const zoo_op_t) -> Result<Vec<MultiOp>, c_int> {
    if count < 0 || (count > 0 && ops.is_null()) {
        return Err(err::ZBADARGUMENTS);
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        // SAFETY: i < count entries at ops.
        let op = unsafe { &*ops.add(i) };
        // SAFETY: each arm reads the union member its type selects.
        let m = unsafe {
            match op.type_ {
                1 | 15 => {
                    let c = op.u.create_op;
                    let Op::CreateNullable { path, data, acl, mode, ttl, .. } = create_op(
                        c.path,
                        c.data,
                        c.datalen,
                        c.acl,
                        c.flags,
                        CreateMode::from_i32(c.flags).filter(|m| m.is_ttl()).map(|_| c.ttl),
                        false,
                    )?
                    else {
                        return Err(err::ZBADARGUMENTS);
                    };
                    MultiOp::CreateNullable { path, data, acl, mode, ttl }
                }
                2 => {
                    MultiOp::Delete { path: path_arg(op.u.delete_op.path)?, version: op.u.delete_op.version }
                }
                5 => {
                    let s = op.u.set_op;
                    MultiOp::SetDataNullable {
                        path: path_arg(s.path)?,
                        data: data_arg(s.data, s.datalen)?,
                        version: s.version,
                    }
                }
                13 => MultiOp::Check { path: path_arg(op.u.check_op.path)?, version: op.u.check_op.version },
                _ => return Err(err::ZUNIMPLEMENTED),
            }
        };
        out.push(m);
    }
    Ok(out)
}

/// multi: the ops run atomically; `results` (count entries) is filled before the completion.
#[no_mangle]
pub extern "C" fn zoo_amulti(
    zh: *mut c_void,
    count: c_int,
    ops: *const zoo_op_t,
    results: *mut zoo_op_result_t,
    completion: abi::void_completion_t,
    data: *const c_void,
) -> c_int {
    if count > 0 && results.is_null() {
        return err::ZBADARGUMENTS;
    }
    let op = multi_ops(count, ops).map(Op::Multi);
    go(
        zh,
        op,
        pending(
            Completion::Multi { cb: completion, read: false, ops, results, count: count.max(0) as usize },
            data,
        ),
    )
}

/// Removes local watchers matching (path, type, watcher); None matches any watcher function.
fn remove_local(h: &Handle, path: &str, wtype: c_int, w: Option<Watcher>) -> usize {
    h.lock().remove_watchers(path, wtype, w)
}

fn watcher_kind(wtype: c_int) -> Option<WatcherType> {
    match wtype {
        1 => Some(WatcherType::Children),
        2 => Some(WatcherType::Data),
        3 => Some(WatcherType::Any),
        _ => None,
    }
}

fn has_local(h: &Handle, path: &str, wtype: c_int, w: Option<Watcher>) -> bool {
    h.lock()
        .watchers
        .values()
        .any(|e| e.path == path && side_matches(wtype, e.side) && w.is_none_or(|w| w == e.watcher))
}

/// Removes one watcher (function and context) of `wtype` from `path`. With `local` set, only the
/// client side is changed and no completion is called. Errors: ZBADARGUMENTS (NULL handle, bad
/// path or type), ZNOWATCHER when the client holds no such watcher, ZINVALIDSTATE for an ended
/// session (unless `local`).
///
/// As Apache's client does, it asks the server whether it holds the watch (checkWatches) and
/// forgets the watcher only when the server says yes; the completion gets the server's answer
/// (ZNOWATCHER if the server has no such watch, the watcher then stays).
#[no_mangle]
pub extern "C" fn zoo_aremove_watches(
    zh: *mut c_void,
    path: *const c_char,
    wtype: c_int,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    local: c_int,
    completion: abi::void_completion_t,
    data: *const c_void,
) -> c_int {
    remove_one(zh, path, wtype, watcher, ctx, local, pending(Completion::Void(completion), data), &mut false)
}

/// zoo_aremove_watches and zoo_remove_watches: checks, then a checkWatches op delivered by `p`.
fn remove_one(
    zh: *mut c_void,
    path: *const c_char,
    wtype: c_int,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    local: c_int,
    p: Pending,
    submitted: &mut bool,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let path = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    // An unknown type matches no watcher: ZNOWATCHER, as Apache's client answers.
    let Some(kind) = watcher_kind(wtype) else { return err::ZNOWATCHER };
    if local == 0 && h.lock().core.state().is_terminal() {
        return err::ZINVALIDSTATE;
    }
    let w = Watcher { func: watcher, ctx };
    if !has_local(h, &path, wtype, Some(w)) {
        return err::ZNOWATCHER;
    }
    if local != 0 {
        remove_local(h, &path, wtype, Some(w));
        return err::ZOK;
    }
    let removal = Removal { path: path.clone(), wtype, watcher: w };
    let rc = h.submit_removal(Op::CheckWatches { path, kind }, p, Some(removal));
    *submitted = rc == err::ZOK;
    rc
}

/// Removes every watcher of `wtype` on `path`, on the server too unless `local`.
#[no_mangle]
pub extern "C" fn zoo_aremove_all_watches(
    zh: *mut c_void,
    path: *const c_char,
    wtype: c_int,
    local: c_int,
    completion: abi::void_completion_t,
    data: *const c_void,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    // An unknown type matches no watcher: ZNOWATCHER, as Apache's client answers.
    let Some(kind) = watcher_kind(wtype) else { return err::ZNOWATCHER };
    if !has_local(h, &p, wtype, None) {
        return err::ZNOWATCHER;
    }
    if local != 0 {
        remove_local(h, &p, wtype, None);
        return err::ZOK;
    }
    h.submit(Op::RemoveWatches { path: p, kind }, pending(Completion::Void(completion), data))
}

// ---------------------------------------------------------------- sync

pub(crate) fn rc(r: Result<Response, c_int>) -> c_int {
    crate::deliver::rc_of(&r)
}

/// Sync create; `path_buffer` receives the created path (chroot stripped), truncated to
/// `path_buffer_len - 1` bytes and NUL-terminated.
#[no_mangle]
pub extern "C" fn zoo_create(
    zh: *mut c_void,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    path_buffer: *mut c_char,
    path_buffer_len: c_int,
) -> c_int {
    zoo_create2_ttl(
        zh,
        path,
        value,
        valuelen,
        acl,
        mode,
        -1,
        path_buffer,
        path_buffer_len,
        std::ptr::null_mut(),
    )
}

/// Sync create with a TTL.
#[no_mangle]
pub extern "C" fn zoo_create_ttl(
    zh: *mut c_void,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    ttl: i64,
    path_buffer: *mut c_char,
    path_buffer_len: c_int,
) -> c_int {
    zoo_create2_ttl(
        zh,
        path,
        value,
        valuelen,
        acl,
        mode,
        ttl,
        path_buffer,
        path_buffer_len,
        std::ptr::null_mut(),
    )
}

/// Sync create returning the new node's Stat too.
#[no_mangle]
pub extern "C" fn zoo_create2(
    zh: *mut c_void,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    path_buffer: *mut c_char,
    path_buffer_len: c_int,
    stat: *mut Stat,
) -> c_int {
    zoo_create2_ttl(zh, path, value, valuelen, acl, mode, -1, path_buffer, path_buffer_len, stat)
}

/// Sync create with a TTL, returning the Stat.
#[no_mangle]
pub extern "C" fn zoo_create2_ttl(
    zh: *mut c_void,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    ttl: i64,
    path_buffer: *mut c_char,
    path_buffer_len: c_int,
    stat: *mut Stat,
) -> c_int {
    match sync(zh, create_op(path, value, valuelen, acl, mode, Some(ttl), !stat.is_null()), None) {
        Ok(Response::Create { path, stat: s }) => {
            // SAFETY: the caller's buffer of path_buffer_len bytes.
            unsafe { copy_truncated(&path, path_buffer, path_buffer_len) };
            if let Some(s) = s {
                put_stat(stat, &s);
            }
            err::ZOK
        }
        other => rc(other),
    }
}

/// Sync delete.
#[no_mangle]
pub extern "C" fn zoo_delete(zh: *mut c_void, path: *const c_char, version: c_int) -> c_int {
    rc(sync(zh, path_arg(path).map(|path| Op::Delete { path, version }), None))
}

/// Sync exists: ZOK and the Stat, or ZNONODE.
#[no_mangle]
pub extern "C" fn zoo_exists(zh: *mut c_void, path: *const c_char, watch: c_int, stat: *mut Stat) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = watch_entry(h, watch, &p, WatchSide::Data);
    exists_result(sync(zh, Ok(Op::Exists { path: p, watch: watch != 0 }), w), stat)
}

fn exists_result(r: Result<Response, c_int>, stat: *mut Stat) -> c_int {
    match r {
        Ok(Response::Exists(Some(s))) => {
            put_stat(stat, &s);
            err::ZOK
        }
        other => rc(other),
    }
}

/// Sync exists with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_wexists(
    zh: *mut c_void,
    path: *const c_char,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    stat: *mut Stat,
) -> c_int {
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = wentry(watcher, ctx, &p, WatchSide::Data);
    exists_result(sync(zh, Ok(Op::Exists { path: p, watch: w.is_some() }), w), stat)
}

/// Copies data into the caller's buffer: `*buffer_len` is the capacity in, the bytes copied out.
fn data_result(
    r: Result<Response, c_int>,
    buffer: *mut c_char,
    buffer_len: *mut c_int,
    stat: *mut Stat,
) -> c_int {
    match r {
        Ok(Response::NullableData { data: None, stat: s }) => {
            // Null data: Apache's client reports length -1 and copies nothing.
            // SAFETY: buffer_len was checked non-NULL by the caller of this function.
            unsafe { *buffer_len = -1 };
            put_stat(stat, &s);
            err::ZOK
        }
        Ok(Response::Data { data, stat: s }) | Ok(Response::NullableData { data: Some(data), stat: s }) => {
            // SAFETY: buffer_len was checked non-NULL by the caller of this function.
            let cap = unsafe { *buffer_len }.max(0) as usize;
            let n = if buffer.is_null() { 0 } else { data.len().min(cap) };
            // SAFETY: n <= capacity of the caller's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr().cast(), buffer, n);
                *buffer_len = n as c_int;
            }
            put_stat(stat, &s);
            err::ZOK
        }
        other => rc(other),
    }
}

/// Sync getData (see data copy rules above); optionally leaves the global watcher.
#[no_mangle]
pub extern "C" fn zoo_get(
    zh: *mut c_void,
    path: *const c_char,
    watch: c_int,
    buffer: *mut c_char,
    buffer_len: *mut c_int,
    stat: *mut Stat,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    if buffer_len.is_null() {
        return err::ZBADARGUMENTS;
    }
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = watch_entry(h, watch, &p, WatchSide::Data);
    data_result(sync(zh, Ok(Op::GetDataNullable { path: p, watch: watch != 0 }), w), buffer, buffer_len, stat)
}

/// Sync getData with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_wget(
    zh: *mut c_void,
    path: *const c_char,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    buffer: *mut c_char,
    buffer_len: *mut c_int,
    stat: *mut Stat,
) -> c_int {
    if buffer_len.is_null() {
        return err::ZBADARGUMENTS;
    }
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = wentry(watcher, ctx, &p, WatchSide::Data);
    data_result(
        sync(zh, Ok(Op::GetDataNullable { path: p, watch: w.is_some() }), w),
        buffer,
        buffer_len,
        stat,
    )
}

/// Sync getConfig.
#[no_mangle]
pub extern "C" fn zoo_getconfig(
    zh: *mut c_void,
    watch: c_int,
    buffer: *mut c_char,
    buffer_len: *mut c_int,
    stat: *mut Stat,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    if buffer_len.is_null() {
        return err::ZBADARGUMENTS;
    }
    let w = watch_entry(h, watch, CONFIG_NODE, WatchSide::Data);
    data_result(sync(zh, Ok(Op::GetConfig { watch: watch != 0 }), w), buffer, buffer_len, stat)
}

/// Sync getConfig with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_wgetconfig(
    zh: *mut c_void,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    buffer: *mut c_char,
    buffer_len: *mut c_int,
    stat: *mut Stat,
) -> c_int {
    if buffer_len.is_null() {
        return err::ZBADARGUMENTS;
    }
    let w = wentry(watcher, ctx, CONFIG_NODE, WatchSide::Data);
    data_result(sync(zh, Ok(Op::GetConfig { watch: w.is_some() }), w), buffer, buffer_len, stat)
}

/// Sync reconfig; the new config is copied like zoo_get's data.
#[no_mangle]
pub extern "C" fn zoo_reconfig(
    zh: *mut c_void,
    joining: *const c_char,
    leaving: *const c_char,
    members: *const c_char,
    version: i64,
    buffer: *mut c_char,
    buffer_len: *mut c_int,
    stat: *mut Stat,
) -> c_int {
    if buffer_len.is_null() {
        return err::ZBADARGUMENTS;
    }
    data_result(sync(zh, reconfig_op(joining, leaving, members, version), None), buffer, buffer_len, stat)
}

/// Sync setData.
#[no_mangle]
pub extern "C" fn zoo_set(
    zh: *mut c_void,
    path: *const c_char,
    buffer: *const c_char,
    buflen: c_int,
    version: c_int,
) -> c_int {
    zoo_set2(zh, path, buffer, buflen, version, std::ptr::null_mut())
}

/// Sync setData returning the new Stat.
#[no_mangle]
pub extern "C" fn zoo_set2(
    zh: *mut c_void,
    path: *const c_char,
    buffer: *const c_char,
    buflen: c_int,
    version: c_int,
    stat: *mut Stat,
) -> c_int {
    match sync(
        zh,
        path_arg(path)
            .and_then(|path| Ok(Op::SetDataNullable { path, data: data_arg(buffer, buflen)?, version })),
        None,
    ) {
        Ok(Response::Stat(s)) => {
            put_stat(stat, &s);
            err::ZOK
        }
        other => rc(other),
    }
}

fn children_sync(
    zh: *mut c_void,
    path: *const c_char,
    w: Result<Option<WatchEntry>, c_int>,
    strings: *mut String_vector,
    stat: *mut Stat,
) -> c_int {
    if strings.is_null() {
        return err::ZBADARGUMENTS;
    }
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let w = match w {
        Ok(w) => w.map(|mut e| {
            e.path = p.clone();
            e
        }),
        Err(e) => return e,
    };
    match sync(zh, Ok(Op::GetChildren { path: p, watch: w.is_some(), with_stat: !stat.is_null() }), w) {
        Ok(Response::Children { children, stat: s }) => {
            // SAFETY: the caller's String_vector out-pointer.
            fill_strings(unsafe { &mut *strings }, &children);
            if let Some(s) = s {
                put_stat(stat, &s);
            }
            err::ZOK
        }
        other => rc(other),
    }
}

/// Sync getChildren: `strings` gets malloc'd memory (free with deallocate_String_vector).
#[no_mangle]
pub extern "C" fn zoo_get_children(
    zh: *mut c_void,
    path: *const c_char,
    watch: c_int,
    strings: *mut String_vector,
) -> c_int {
    children_sync(zh, path, global_child_watch(zh, watch), strings, std::ptr::null_mut())
}

/// Sync getChildren with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_wget_children(
    zh: *mut c_void,
    path: *const c_char,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    strings: *mut String_vector,
) -> c_int {
    children_sync(zh, path, Ok(wentry(watcher, ctx, "", WatchSide::Child)), strings, std::ptr::null_mut())
}

/// Sync getChildren2.
#[no_mangle]
pub extern "C" fn zoo_get_children2(
    zh: *mut c_void,
    path: *const c_char,
    watch: c_int,
    strings: *mut String_vector,
    stat: *mut Stat,
) -> c_int {
    children_sync(zh, path, global_child_watch(zh, watch), strings, stat)
}

/// Sync getChildren2 with a watcher of the caller's.
#[no_mangle]
pub extern "C" fn zoo_wget_children2(
    zh: *mut c_void,
    path: *const c_char,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    strings: *mut String_vector,
    stat: *mut Stat,
) -> c_int {
    children_sync(zh, path, Ok(wentry(watcher, ctx, "", WatchSide::Child)), strings, stat)
}

/// Sync getACL: `acl` gets malloc'd memory (free with deallocate_ACL_vector).
#[no_mangle]
pub extern "C" fn zoo_get_acl(
    zh: *mut c_void,
    path: *const c_char,
    acl: *mut ACL_vector,
    stat: *mut Stat,
) -> c_int {
    if acl.is_null() {
        return err::ZBADARGUMENTS;
    }
    match sync(zh, path_arg(path).map(|path| Op::GetAcl { path }), None) {
        Ok(Response::Acl { acl: a, stat: s }) => {
            // SAFETY: the caller's ACL_vector out-pointer.
            fill_acl(unsafe { &mut *acl }, &a);
            put_stat(stat, &s);
            err::ZOK
        }
        other => rc(other),
    }
}

/// Sync setACL.
#[no_mangle]
pub extern "C" fn zoo_set_acl(
    zh: *mut c_void,
    path: *const c_char,
    version: c_int,
    acl: *const ACL_vector,
) -> c_int {
    rc(sync(zh, path_arg(path).map(|path| Op::SetAcl { path, acl: acl_arg(acl), version }), None))
}

/// Sync multi; returns the first failing op's error (ZOK when all succeeded).
#[no_mangle]
pub extern "C" fn zoo_multi(
    zh: *mut c_void,
    count: c_int,
    ops: *const zoo_op_t,
    results: *mut zoo_op_result_t,
) -> c_int {
    if count > 0 && results.is_null() {
        return err::ZBADARGUMENTS;
    }
    match sync(zh, multi_ops(count, ops).map(Op::Multi), None) {
        // SAFETY: ops/results hold count entries per the API.
        Ok(Response::Multi(res)) => unsafe { fill_multi(ops, results, count.max(0) as usize, &res) },
        other => rc(other),
    }
}

/// Sync zoo_aremove_watches.
#[no_mangle]
pub extern "C" fn zoo_remove_watches(
    zh: *mut c_void,
    path: *const c_char,
    wtype: c_int,
    watcher: abi::watcher_fn,
    ctx: *mut c_void,
    local: c_int,
) -> c_int {
    if handle(zh).is_some_and(|h| !h.threaded) {
        return err::ZINVALIDSTATE;
    }
    let slot = Arc::new(SyncSlot::default());
    let p = Pending { completion: Completion::Sync(Arc::clone(&slot)), data: null(), watch: None };
    let mut submitted = false;
    let rc = remove_one(zh, path, wtype, watcher, ctx, local, p, &mut submitted);
    if rc != err::ZOK || !submitted {
        return rc;
    }
    slot.wait(None).map_or(err::ZCLOSING, |r| crate::deliver::rc_of(&r))
}

/// Sync zoo_aremove_all_watches.
#[no_mangle]
pub extern "C" fn zoo_remove_all_watches(
    zh: *mut c_void,
    path: *const c_char,
    wtype: c_int,
    local: c_int,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let p = match path_arg(path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    // An unknown type matches no watcher: ZNOWATCHER, as Apache's client answers.
    let Some(kind) = watcher_kind(wtype) else { return err::ZNOWATCHER };
    if !has_local(h, &p, wtype, None) {
        return err::ZNOWATCHER;
    }
    if local != 0 {
        remove_local(h, &p, wtype, None);
        return err::ZOK;
    }
    rc(sync(zh, Ok(Op::RemoveWatches { path: p, kind }), None))
}
