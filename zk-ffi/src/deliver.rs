//! Turning a core result into the C completion call, and building the C structures callers own.
//!
//! Memory handed to callbacks lives for the call only and is freed right after; memory handed
//! to sync callers comes from libc malloc and becomes theirs (deallocate_* or free()).

use crate::abi::{self, err, ACL_vector, Stat, String_vector, ACL};
use crate::handle::Completion;
use crate::jute::{deallocate_ACL_vector, deallocate_String_vector};
use libc::{c_char, c_int, c_void};
use std::ptr::{null, null_mut};
use zk_client::core::Response;
use zk_proto::OpResult;

/// A malloc'd NUL-terminated copy of `s` (NULL when memory is refused). Interior NULs end it.
pub fn malloc_str(s: &str) -> *mut c_char {
    let bytes = s.as_bytes();
    let n = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    // SAFETY: allocation of n+1 bytes, then a copy of n bytes into it.
    unsafe {
        let p = libc::malloc(n + 1).cast::<c_char>();
        if p.is_null() {
            return p;
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), p, n);
        *p.add(n) = 0;
        p
    }
}

/// Fills `v` with malloc'd copies of `items`.
pub fn fill_strings(v: &mut String_vector, items: &[String]) {
    v.count = 0;
    v.data = null_mut();
    if items.is_empty() {
        return;
    }
    // SAFETY: plain calloc of an array of pointers.
    let data = unsafe { libc::calloc(items.len(), std::mem::size_of::<*mut c_char>()) }.cast::<*mut c_char>();
    if data.is_null() {
        return;
    }
    for (i, s) in items.iter().enumerate() {
        // SAFETY: i < items.len().
        unsafe { *data.add(i) = malloc_str(s) };
    }
    v.count = items.len() as i32;
    v.data = data;
}

/// Fills `v` with malloc'd ACL entries.
pub fn fill_acl(v: &mut ACL_vector, items: &[zk_proto::Acl]) {
    v.count = 0;
    v.data = null_mut();
    if items.is_empty() {
        return;
    }
    // SAFETY: plain calloc of an ACL array.
    let data = unsafe { libc::calloc(items.len(), std::mem::size_of::<ACL>()) }.cast::<ACL>();
    if data.is_null() {
        return;
    }
    for (i, a) in items.iter().enumerate() {
        let e = ACL {
            perms: a.perms,
            id: abi::Id { scheme: malloc_str(&a.id.scheme), id: malloc_str(&a.id.id) },
        };
        // SAFETY: i < items.len().
        unsafe { *data.add(i) = e };
    }
    v.count = items.len() as i32;
    v.data = data;
}

/// Copies `s` into the caller's buffer of `len` bytes, truncating to len-1 and NUL-terminating.
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
pub unsafe fn copy_truncated(s: &str, buf: *mut c_char, len: c_int) {
    if buf.is_null() || len <= 0 {
        return;
    }
    let n = s.len().min(len as usize - 1);
    // SAFETY: n < len bytes fit, plus the NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast(), buf, n);
        *buf.add(n) = 0;
    }
}

/// The rc and results of a multi, written into the caller's arrays.
///
/// # Safety
/// `ops` and `results` hold `count` entries (results writable).
pub unsafe fn fill_multi(
    ops: *const abi::zoo_op_t,
    results: *mut abi::zoo_op_result_t,
    count: usize,
    res: &[OpResult],
) -> c_int {
    let mut rc = err::ZOK;
    for i in 0..count {
        // SAFETY: i < count.
        let (op, out) = unsafe { (&*ops.add(i), &mut *results.add(i)) };
        *out = abi::zoo_op_result_t { err: 0, value: null_mut(), valuelen: 0, stat: null_mut() };
        let Some(r) = res.get(i) else {
            out.err = err::ZRUNTIMEINCONSISTENCY;
            continue;
        };
        match r {
            OpResult::Create(path) | OpResult::Create2(path, _) => {
                // SAFETY: the op is a create (same index as the request), union read accordingly.
                let c = unsafe { op.u.create_op };
                // SAFETY: buf/buflen are the caller's buffer, per zoo_create_op_init.
                unsafe { copy_truncated(path, c.buf, c.buflen) };
                out.value = c.buf;
                out.valuelen = c.buflen;
            }
            OpResult::SetData(stat) => {
                // SAFETY: the op is a setData, union read accordingly.
                let s = unsafe { op.u.set_op };
                if !s.stat.is_null() {
                    // SAFETY: the caller's Stat out-pointer.
                    unsafe { *s.stat = Stat::from(stat) };
                }
                out.stat = s.stat;
            }
            OpResult::Error(e) => {
                out.err = e.code();
                if rc == err::ZOK && e.code() != 0 {
                    rc = e.code();
                }
            }
            _ => {}
        }
    }
    rc
}

/// The results of a multiRead, written into the caller's arrays and the ops' out-buffers.
///
/// Each op is answered on its own: a failing read sets its `err` and leaves the others alone, and
/// the rc is ZOK. When the request as a whole failed (`res` is `Err`, e.g. connection loss),
/// every result carries that error and the rc is it. A getChildren op's String_vector is always
/// left valid for deallocate_String_vector (empty unless its read succeeded).
///
/// # Safety
/// `ops` and `results` hold `count` entries (results writable), the ops' out-pointers as
/// zoo_get_data_op_init / zoo_get_children_op_init describe.
pub unsafe fn fill_multi_read(
    ops: *const abi::zoo_op_t,
    results: *mut abi::zoo_op_result_t,
    count: usize,
    res: Result<&[OpResult], c_int>,
) -> c_int {
    for i in 0..count {
        // SAFETY: i < count.
        let (op, out) = unsafe { (&*ops.add(i), &mut *results.add(i)) };
        *out = abi::zoo_op_result_t { err: 0, value: null_mut(), valuelen: 0, stat: null_mut() };
        let r = match res {
            Ok(all) => all.get(i),
            Err(_) => None,
        };
        if op.type_ == 8 {
            // SAFETY: the op is a getChildren (checked when the request was built).
            let g = unsafe { op.u.get_children_op };
            if !g.strings.is_null() {
                // SAFETY: the caller's String_vector out-pointer.
                let v = unsafe { &mut *g.strings };
                match r {
                    Some(OpResult::GetChildren(names)) => fill_strings(v, names),
                    _ => fill_strings(v, &[]),
                }
            }
        }
        match r {
            Some(OpResult::GetData(d)) if op.type_ == 4 => {
                // SAFETY: the op is a getData, union read accordingly.
                let g = unsafe { op.u.get_data_op };
                out.valuelen = match &d.data {
                    // Null data: length -1 as zoo_get reports it, nothing copied.
                    None => -1,
                    Some(data) => {
                        let n = if g.buf.is_null() { 0 } else { data.len().min(g.buflen.max(0) as usize) };
                        // SAFETY: n <= the capacity of the caller's buffer.
                        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast(), g.buf, n) };
                        n as c_int
                    }
                };
                out.value = g.buf;
                if !g.stat.is_null() {
                    // SAFETY: the caller's Stat out-pointer.
                    unsafe { *g.stat = Stat::from(&d.stat) };
                }
                out.stat = g.stat;
            }
            Some(OpResult::GetChildren(_)) if op.type_ == 8 => {}
            Some(OpResult::Error(e)) => out.err = e.code(),
            // A result of the wrong kind or a missing one: the server broke the protocol.
            Some(_) | None => out.err = res.err().unwrap_or(err::ZRUNTIMEINCONSISTENCY),
        }
    }
    match res {
        Ok(_) => err::ZOK,
        Err(e) => e,
    }
}

/// Calls the completion for a finished async operation.
pub fn deliver(completion: Completion, data: *const c_void, result: Result<Response, c_int>) {
    // SAFETY (all calls below): the application's callbacks, called with its own data pointer and
    // with pointers that stay valid for the duration of the call.
    unsafe {
        match completion {
            Completion::Nothing | Completion::Sync(_) => {}
            Completion::Void(Some(cb)) => cb(rc_of(&result), data),
            Completion::Stat(Some(cb)) => match result {
                Ok(Response::Stat(s)) | Ok(Response::Exists(Some(s))) => cb(0, &Stat::from(&s), data),
                Ok(Response::Exists(None)) => cb(zk_proto::ErrorCode::NoNode.code(), null(), data),
                Ok(Response::Data { stat, .. }) | Ok(Response::NullableData { stat, .. }) => {
                    cb(0, &Stat::from(&stat), data)
                }
                other => cb(rc_of(&other), null(), data),
            },
            Completion::Data(Some(cb)) => match result {
                Ok(Response::Data { data: d, stat }) | Ok(Response::NullableData { data: Some(d), stat }) => {
                    // Empty data still comes with a non-NULL pointer, as Apache's (malloc(0)).
                    let p: *const c_char = if d.is_empty() { c"".as_ptr() } else { d.as_ptr().cast() };
                    cb(0, p, d.len() as c_int, &Stat::from(&stat), data)
                }
                // Null data: NULL and -1, as Apache's client passes them.
                Ok(Response::NullableData { data: None, stat }) => {
                    cb(0, null(), -1, &Stat::from(&stat), data)
                }
                other => cb(rc_of(&other), null(), -1, null(), data),
            },
            Completion::Strings(Some(cb)) => match result {
                Ok(Response::Children { children, .. }) | Ok(Response::Paths(children)) => {
                    let mut v = String_vector { count: 0, data: null_mut() };
                    fill_strings(&mut v, &children);
                    cb(0, &v, data);
                    deallocate_String_vector(&mut v);
                }
                other => cb(rc_of(&other), null(), data),
            },
            Completion::StringsStat(Some(cb)) => match result {
                Ok(Response::Children { children, stat }) => {
                    let mut v = String_vector { count: 0, data: null_mut() };
                    fill_strings(&mut v, &children);
                    let st = stat.as_ref().map(Stat::from).unwrap_or_default();
                    cb(0, &v, &st, data);
                    deallocate_String_vector(&mut v);
                }
                other => cb(rc_of(&other), null(), null(), data),
            },
            Completion::String(Some(cb)) => match result {
                Ok(Response::Create { path, .. }) | Ok(Response::Sync(path)) => {
                    let c = std::ffi::CString::new(path.replace('\0', "")).unwrap_or_default();
                    cb(0, c.as_ptr(), data)
                }
                other => cb(rc_of(&other), null(), data),
            },
            Completion::StringStat(Some(cb)) => match result {
                Ok(Response::Create { path, stat }) => {
                    let c = std::ffi::CString::new(path.replace('\0', "")).unwrap_or_default();
                    let st = stat.as_ref().map(Stat::from).unwrap_or_default();
                    cb(0, c.as_ptr(), &st, data)
                }
                other => cb(rc_of(&other), null(), null(), data),
            },
            Completion::Acl(Some(cb)) => match result {
                Ok(Response::Acl { acl, stat }) => {
                    let mut v = ACL_vector { count: 0, data: null_mut() };
                    fill_acl(&mut v, &acl);
                    let mut st = Stat::from(&stat);
                    cb(0, &mut v, &mut st, data);
                    deallocate_ACL_vector(&mut v);
                }
                other => cb(rc_of(&other), null_mut(), null_mut(), data),
            },
            Completion::Multi { cb, read: true, ops, results, count } => {
                let rc = match result {
                    Ok(Response::Multi(res)) => fill_multi_read(ops, results, count, Ok(&res)),
                    other => fill_multi_read(ops, results, count, Err(multi_read_rc(&other))),
                };
                if let Some(cb) = cb {
                    cb(rc, data)
                }
            }
            Completion::Multi { cb, read: false, ops, results, count } => {
                let rc = match result {
                    Ok(Response::Multi(res)) => fill_multi(ops, results, count, &res),
                    other => rc_of(&other),
                };
                if let Some(cb) = cb {
                    cb(rc, data)
                }
            }
            _ => {}
        }
    }
}

/// The rc of a multiRead that did not come back as per-op results: its error, or
/// ZRUNTIMEINCONSISTENCY for a success of another kind (which the core never produces for it).
pub fn multi_read_rc(r: &Result<Response, c_int>) -> c_int {
    match r {
        Err(e) => *e,
        Ok(_) => err::ZRUNTIMEINCONSISTENCY,
    }
}

/// The rc of a result: 0 for success, else the error.
pub fn rc_of(r: &Result<Response, c_int>) -> c_int {
    match r {
        Ok(Response::Exists(None)) => zk_proto::ErrorCode::NoNode.code(),
        Ok(_) => 0,
        Err(e) => *e,
    }
}
