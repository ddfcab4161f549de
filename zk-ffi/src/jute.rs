//! deallocate_* and allocate_*: the memory helpers of Apache's generated jute code.
//!
//! A deallocate function frees what a struct points to (strings, buffers, vectors and what their
//! elements point to), leaves the struct itself to its owner, and nulls the pointers it freed.
//! Everything is libc memory: programs mix these helpers with plain free(), and memory the
//! library hands out must survive that. NULL struct pointers are ignored.
//!
//! Only the pointer-carrying prefix of each jute struct matters here; the shapes below repeat the
//! header's fields up to the last pointer (the layout test checks the full structs in abi.rs).

use crate::abi::{
    buffer, ACL_vector, ClientInfo, ClientInfo_vector, Id, Id_vector, String_vector, Txn, Txn_vector, ACL,
};
use libc::{c_char, c_int, c_void};

/// Frees a malloc'd string and nulls the pointer.
///
/// # Safety
/// `s` is NULL or points to a pointer that is NULL or came from malloc.
#[no_mangle]
pub unsafe extern "C" fn deallocate_String(s: *mut *mut c_char) {
    if s.is_null() {
        return;
    }
    // SAFETY: caller contract.
    unsafe {
        libc::free((*s).cast());
        *s = std::ptr::null_mut();
    }
}

/// Frees a buffer's bytes and nulls the pointer (the length is left as is, as Apache's does).
///
/// # Safety
/// `b` is NULL or points to a buffer whose `buff` is NULL or came from malloc.
#[no_mangle]
pub unsafe extern "C" fn deallocate_Buffer(b: *mut buffer) {
    if b.is_null() {
        return;
    }
    // SAFETY: caller contract.
    unsafe {
        libc::free((*b).buff.cast());
        (*b).buff = std::ptr::null_mut();
    }
}

/// Defines allocate_X_vector / deallocate_X_vector for a vector type and its element freer.
macro_rules! vector_fns {
    ($alloc:ident, $dealloc:ident, $vec:ty, $elem:ty, |$e:ident| $free_elem:expr) => {
        /// Sets `count` to `len` and points `data` at `len` zeroed elements from calloc (NULL for
        /// 0). Returns 0, or ZSYSTEMERROR (-1) when memory or `len` is refused.
        ///
        /// # Safety
        /// `v` is NULL or points to a writable vector struct.
        #[no_mangle]
        pub unsafe extern "C" fn $alloc(v: *mut $vec, len: i32) -> c_int {
            if v.is_null() || len < 0 {
                return -1;
            }
            // SAFETY: v is valid per the contract.
            let v = unsafe { &mut *v };
            if len == 0 {
                v.count = 0;
                v.data = std::ptr::null_mut();
                return 0;
            }
            // SAFETY: plain allocation.
            let data = unsafe { libc::calloc(len as usize, std::mem::size_of::<$elem>()) };
            if data.is_null() {
                return -1;
            }
            v.count = len;
            v.data = data.cast();
            0
        }

        /// Frees every element's memory and the element array; nulls `data`. Returns 0.
        ///
        /// # Safety
        /// `v` is NULL or points to a vector whose `data` holds `count` elements from malloc.
        #[no_mangle]
        pub unsafe extern "C" fn $dealloc(v: *mut $vec) -> c_int {
            if v.is_null() {
                return 0;
            }
            // SAFETY: v is valid per the contract.
            let v = unsafe { &mut *v };
            if !v.data.is_null() {
                for i in 0..v.count.max(0) as usize {
                    // SAFETY: i < count.
                    let $e = unsafe { v.data.add(i) };
                    #[allow(unused_unsafe)]
                    unsafe {
                        $free_elem
                    };
                }
                // SAFETY: data came from malloc.
                unsafe { libc::free(v.data.cast()) };
                v.data = std::ptr::null_mut();
            }
            0
        }
    };
}

vector_fns!(allocate_String_vector, deallocate_String_vector, String_vector, *mut c_char, |e| {
    deallocate_String(e)
});
vector_fns!(allocate_ACL_vector, deallocate_ACL_vector, ACL_vector, ACL, |e| deallocate_ACL(e.cast()));
vector_fns!(allocate_Id_vector, deallocate_Id_vector, Id_vector, Id, |e| deallocate_Id(e.cast()));
vector_fns!(allocate_ClientInfo_vector, deallocate_ClientInfo_vector, ClientInfo_vector, ClientInfo, |e| {
    deallocate_ClientInfo(e.cast())
});
vector_fns!(allocate_Txn_vector, deallocate_Txn_vector, Txn_vector, Txn, |e| deallocate_Txn(e.cast()));

/// Defines a deallocate function over a shape struct: `$body` frees through `v: &mut $shape`.
macro_rules! dealloc {
    ($($name:ident: $shape:ty => |$v:ident| $body:block)*) => {$(
        /// Frees what the struct points to (see the module docs); NULL is ignored.
        ///
        /// # Safety
        /// The argument is NULL or a valid struct of the named type whose pointers are NULL or
        /// from malloc.
        #[no_mangle]
        pub unsafe extern "C" fn $name(p: *mut c_void) {
            if p.is_null() {
                return;
            }
            // SAFETY: caller contract; the shape is a prefix of the real struct.
            let $v = unsafe { &mut *p.cast::<$shape>() };
            #[allow(unused_unsafe)]
            unsafe { $body }
        }
    )*};
}

/// Defines deallocate functions for structs that own nothing.
macro_rules! dealloc_nothing {
    ($($name:ident)*) => {$(
        /// The struct owns no memory: nothing to free.
        #[no_mangle]
        pub extern "C" fn $name(_p: *mut c_void) {}
    )*};
}

#[repr(C)]
struct PathFirst {
    path: *mut c_char,
}
#[repr(C)]
struct BufferFirst {
    b: buffer,
}
#[repr(C)]
struct StringsFirst {
    v: String_vector,
}
#[repr(C)]
struct AclsFirst {
    v: ACL_vector,
}
#[repr(C)]
struct PathBuffer {
    path: *mut c_char,
    data: buffer,
}
#[repr(C)]
struct PathBufferAcl {
    path: *mut c_char,
    data: buffer,
    acl: ACL_vector,
}
#[repr(C)]
struct PathAcl {
    path: *mut c_char,
    acl: ACL_vector,
}
#[repr(C)]
struct WatcherEventShape {
    type_: i32,
    state: i32,
    path: *mut c_char,
}
#[repr(C)]
struct AuthPacketShape {
    type_: i32,
    scheme: *mut c_char,
    auth: buffer,
}
#[repr(C)]
struct ThreeStrings {
    a: *mut c_char,
    b: *mut c_char,
    c: *mut c_char,
}
#[repr(C)]
struct ConnectRequestShape {
    protocol_version: i32,
    last_zxid: i64,
    timeout: i32,
    session: i64,
    passwd: buffer,
}
#[repr(C)]
struct ConnectResponseShape {
    protocol_version: i32,
    timeout: i32,
    session: i64,
    passwd: buffer,
}
#[repr(C)]
struct SetWatchesShape {
    zxid: i64,
    v: [String_vector; 5],
}
#[repr(C)]
struct QuorumPacketShape {
    type_: i32,
    zxid: i64,
    data: buffer,
    auth: Id_vector,
}
#[repr(C)]
struct QuorumAuthPacketShape {
    magic: i64,
    status: i32,
    token: buffer,
}
#[repr(C)]
struct TxnShape {
    type_: i32,
    data: buffer,
}
#[repr(C)]
struct ClientInfosFirst {
    v: ClientInfo_vector,
}
#[repr(C)]
struct TxnsFirst {
    v: Txn_vector,
}

dealloc! {
    deallocate_Id: Id => |v| { deallocate_String(&mut v.scheme); deallocate_String(&mut v.id); }
    deallocate_ACL: ACL => |v| { deallocate_Id((&mut v.id as *mut Id).cast()); }
    deallocate_ClientInfo: ClientInfo => |v| {
        deallocate_String(&mut v.authScheme);
        deallocate_String(&mut v.user);
    }
    deallocate_ConnectRequest: ConnectRequestShape => |v| { deallocate_Buffer(&mut v.passwd); }
    deallocate_ConnectResponse: ConnectResponseShape => |v| { deallocate_Buffer(&mut v.passwd); }
    deallocate_SetWatches: SetWatchesShape => |v| {
        for s in &mut v.v[..3] {
            deallocate_String_vector(s);
        }
    }
    deallocate_SetWatches2: SetWatchesShape => |v| {
        for s in &mut v.v {
            deallocate_String_vector(s);
        }
    }
    deallocate_AuthPacket: AuthPacketShape => |v| {
        deallocate_String(&mut v.scheme);
        deallocate_Buffer(&mut v.auth);
    }
    deallocate_ReconfigRequest: ThreeStrings => |v| {
        deallocate_String(&mut v.a);
        deallocate_String(&mut v.b);
        deallocate_String(&mut v.c);
    }
    deallocate_SetDataRequest: PathBuffer => |v| { deallocate_String(&mut v.path); deallocate_Buffer(&mut v.data); }
    deallocate_SetDataTxn: PathBuffer => |v| { deallocate_String(&mut v.path); deallocate_Buffer(&mut v.data); }
    deallocate_CreateRequest: PathBufferAcl => |v| {
        deallocate_String(&mut v.path);
        deallocate_Buffer(&mut v.data);
        deallocate_ACL_vector(&mut v.acl);
    }
    deallocate_CreateTTLRequest: PathBufferAcl => |v| {
        deallocate_String(&mut v.path);
        deallocate_Buffer(&mut v.data);
        deallocate_ACL_vector(&mut v.acl);
    }
    deallocate_CreateTxnV0: PathBufferAcl => |v| {
        deallocate_String(&mut v.path);
        deallocate_Buffer(&mut v.data);
        deallocate_ACL_vector(&mut v.acl);
    }
    deallocate_CreateTxn: PathBufferAcl => |v| {
        deallocate_String(&mut v.path);
        deallocate_Buffer(&mut v.data);
        deallocate_ACL_vector(&mut v.acl);
    }
    deallocate_CreateTTLTxn: PathBufferAcl => |v| {
        deallocate_String(&mut v.path);
        deallocate_Buffer(&mut v.data);
        deallocate_ACL_vector(&mut v.acl);
    }
    deallocate_CreateContainerTxn: PathBufferAcl => |v| {
        deallocate_String(&mut v.path);
        deallocate_Buffer(&mut v.data);
        deallocate_ACL_vector(&mut v.acl);
    }
    deallocate_SetACLRequest: PathAcl => |v| { deallocate_String(&mut v.path); deallocate_ACL_vector(&mut v.acl); }
    deallocate_SetACLTxn: PathAcl => |v| { deallocate_String(&mut v.path); deallocate_ACL_vector(&mut v.acl); }
    deallocate_WatcherEvent: WatcherEventShape => |v| { deallocate_String(&mut v.path); }
    deallocate_Create2Response: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_GetDataResponse: BufferFirst => |v| { deallocate_Buffer(&mut v.b); }
    deallocate_GetSASLRequest: BufferFirst => |v| { deallocate_Buffer(&mut v.b); }
    deallocate_SetSASLRequest: BufferFirst => |v| { deallocate_Buffer(&mut v.b); }
    deallocate_SetSASLResponse: BufferFirst => |v| { deallocate_Buffer(&mut v.b); }
    deallocate_GetChildrenResponse: StringsFirst => |v| { deallocate_String_vector(&mut v.v); }
    deallocate_GetChildren2Response: StringsFirst => |v| { deallocate_String_vector(&mut v.v); }
    deallocate_GetEphemeralsResponse: StringsFirst => |v| { deallocate_String_vector(&mut v.v); }
    deallocate_CloseSessionTxn: StringsFirst => |v| { deallocate_String_vector(&mut v.v); }
    deallocate_GetACLResponse: AclsFirst => |v| { deallocate_ACL_vector(&mut v.v); }
    deallocate_WhoAmIResponse: ClientInfosFirst => |v| { deallocate_ClientInfo_vector(&mut v.v); }
    deallocate_MultiTxn: TxnsFirst => |v| { deallocate_Txn_vector(&mut v.v); }
    deallocate_QuorumPacket: QuorumPacketShape => |v| {
        deallocate_Buffer(&mut v.data);
        deallocate_Id_vector(&mut v.auth);
    }
    deallocate_QuorumAuthPacket: QuorumAuthPacketShape => |v| { deallocate_Buffer(&mut v.token); }
    deallocate_Txn: TxnShape => |v| { deallocate_Buffer(&mut v.data); }
    deallocate_AddWatchRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_CheckVersionRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_CheckVersionTxn: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_CheckWatchesRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_CreateResponse: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_DeleteRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_DeleteTxn: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_ExistsRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_GetACLRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_GetAllChildrenNumberRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_GetChildren2Request: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_GetChildrenRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_GetDataRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_GetEphemeralsRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_GetMaxChildrenRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_RemoveWatchesRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_SetMaxChildrenRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_SetMaxChildrenTxn: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_SyncRequest: PathFirst => |v| { deallocate_String(&mut v.path); }
    deallocate_SyncResponse: PathFirst => |v| { deallocate_String(&mut v.path); }
}

dealloc_nothing! {
    deallocate_Stat deallocate_StatPersisted deallocate_CreateSessionTxn deallocate_ErrorResponse
    deallocate_ErrorTxn deallocate_FileHeader deallocate_GetAllChildrenNumberResponse
    deallocate_GetMaxChildrenResponse deallocate_LearnerInfo deallocate_MultiHeader
    deallocate_ReplyHeader deallocate_RequestHeader deallocate_TxnDigest deallocate_TxnHeader
    deallocate_ExistsResponse deallocate_SetACLResponse deallocate_SetDataResponse
}
