//! The C structs of Apache's zookeeper.h and zookeeper.jute.h, field for field (x86-64 layout).
//!
//! Every struct is `#[repr(C)]` with the same field order and types as the header, so a program
//! compiled against Apache's header sees the same bytes. The layout test in tests/ checks sizes and
//! offsets against a C program built with the real header.
#![allow(non_camel_case_types, non_snake_case, missing_docs)]

use libc::{c_char, c_int, c_void};

/// `struct buffer`: a length-prefixed byte array; `len` -1 means null.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct buffer {
    pub len: i32,
    pub buff: *mut c_char,
}

/// `struct Id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Id {
    pub scheme: *mut c_char,
    pub id: *mut c_char,
}

/// `struct ACL`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ACL {
    pub perms: i32,
    pub id: Id,
}

/// `struct Stat`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Stat {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeralOwner: i64,
    pub dataLength: i32,
    pub numChildren: i32,
    pub pzxid: i64,
}

/// `struct StatPersisted`.
#[repr(C)]
pub struct StatPersisted {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeralOwner: i64,
    pub pzxid: i64,
}

/// `struct ClientInfo`.
#[repr(C)]
pub struct ClientInfo {
    pub authScheme: *mut c_char,
    pub user: *mut c_char,
}

/// `struct String_vector`.
#[repr(C)]
#[derive(Debug)]
pub struct String_vector {
    pub count: i32,
    pub data: *mut *mut c_char,
}

/// `struct ACL_vector`.
#[repr(C)]
#[derive(Debug)]
pub struct ACL_vector {
    pub count: i32,
    pub data: *mut ACL,
}

/// `struct Id_vector`.
#[repr(C)]
pub struct Id_vector {
    pub count: i32,
    pub data: *mut Id,
}

/// `struct ClientInfo_vector`.
#[repr(C)]
pub struct ClientInfo_vector {
    pub count: i32,
    pub data: *mut ClientInfo,
}

/// `struct Txn`.
#[repr(C)]
pub struct Txn {
    pub type_: i32,
    pub data: buffer,
}

/// `struct Txn_vector`.
#[repr(C)]
pub struct Txn_vector {
    pub count: i32,
    pub data: *mut Txn,
}

/// `clientid_t`: session id and password.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct clientid_t {
    pub client_id: i64,
    pub passwd: [c_char; 16],
}

/// `create_op` member of `zoo_op_t`'s union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct zoo_create_op {
    pub path: *const c_char,
    pub data: *const c_char,
    pub datalen: c_int,
    pub buf: *mut c_char,
    pub buflen: c_int,
    pub acl: *const ACL_vector,
    pub flags: c_int,
    pub ttl: i64,
}

/// `delete_op` and `check_op` members of `zoo_op_t`'s union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct zoo_version_op {
    pub path: *const c_char,
    pub version: c_int,
}

/// `set_op` member of `zoo_op_t`'s union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct zoo_set_op {
    pub path: *const c_char,
    pub data: *const c_char,
    pub datalen: c_int,
    pub version: c_int,
    pub stat: *mut Stat,
}

/// `get_data_op` member of `zoo_op_t`'s union (multiRead only; smaller than `create_op`, so the
/// union's size and the other members' offsets are unchanged).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct zoo_get_data_op {
    pub path: *const c_char,
    pub buf: *mut c_char,
    pub buflen: c_int,
    pub stat: *mut Stat,
}

/// `get_children_op` member of `zoo_op_t`'s union (multiRead only).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct zoo_get_children_op {
    pub path: *const c_char,
    pub strings: *mut String_vector,
}

/// The anonymous union of `zoo_op_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union zoo_op_union {
    pub create_op: zoo_create_op,
    pub delete_op: zoo_version_op,
    pub set_op: zoo_set_op,
    pub check_op: zoo_version_op,
    pub get_data_op: zoo_get_data_op,
    pub get_children_op: zoo_get_children_op,
}

/// `zoo_op_t`: one operation of a multi.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct zoo_op_t {
    pub type_: c_int,
    pub u: zoo_op_union,
}

/// `zoo_op_result_t`: one result of a multi.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct zoo_op_result_t {
    pub err: c_int,
    pub value: *mut c_char,
    pub valuelen: c_int,
    pub stat: *mut Stat,
}

/// `zhandle_t`, opaque to C: a handle from zookeeper_init (an `Arc<Handle>` behind the pointer).
pub type zhandle_t = c_void;
/// `watcher_fn`.
pub type watcher_fn = Option<
    unsafe extern "C" fn(zh: *mut c_void, type_: c_int, state: c_int, path: *const c_char, ctx: *mut c_void),
>;
/// `log_callback_fn`.
pub type log_callback_fn = Option<unsafe extern "C" fn(message: *const c_char)>;
/// `void_completion_t`.
pub type void_completion_t = Option<unsafe extern "C" fn(rc: c_int, data: *const c_void)>;
/// `stat_completion_t`.
pub type stat_completion_t = Option<unsafe extern "C" fn(rc: c_int, stat: *const Stat, data: *const c_void)>;
/// `data_completion_t`.
pub type data_completion_t = Option<
    unsafe extern "C" fn(rc: c_int, value: *const c_char, len: c_int, stat: *const Stat, data: *const c_void),
>;
/// `strings_completion_t`.
pub type strings_completion_t =
    Option<unsafe extern "C" fn(rc: c_int, strings: *const String_vector, data: *const c_void)>;
/// `strings_stat_completion_t`.
pub type strings_stat_completion_t = Option<
    unsafe extern "C" fn(rc: c_int, strings: *const String_vector, stat: *const Stat, data: *const c_void),
>;
/// `string_completion_t`.
pub type string_completion_t =
    Option<unsafe extern "C" fn(rc: c_int, value: *const c_char, data: *const c_void)>;
/// `string_stat_completion_t`.
pub type string_stat_completion_t =
    Option<unsafe extern "C" fn(rc: c_int, value: *const c_char, stat: *const Stat, data: *const c_void)>;
/// `acl_completion_t`.
pub type acl_completion_t =
    Option<unsafe extern "C" fn(rc: c_int, acl: *mut ACL_vector, stat: *mut Stat, data: *const c_void)>;

/// Apache's error codes (enum ZOO_ERRORS) that the library itself produces.
pub mod err {
    use libc::c_int;
    pub const ZOK: c_int = 0;
    pub const ZSYSTEMERROR: c_int = -1;
    pub const ZRUNTIMEINCONSISTENCY: c_int = -2;
    pub const ZCONNECTIONLOSS: c_int = -4;
    pub const ZMARSHALLINGERROR: c_int = -5;
    pub const ZUNIMPLEMENTED: c_int = -6;
    pub const ZOPERATIONTIMEOUT: c_int = -7;
    pub const ZBADARGUMENTS: c_int = -8;
    pub const ZINVALIDSTATE: c_int = -9;
    pub const ZSESSIONEXPIRED: c_int = -112;
    pub const ZAUTHFAILED: c_int = -115;
    pub const ZCLOSING: c_int = -116;
    pub const ZNOTHING: c_int = -117;
    pub const ZNOWATCHER: c_int = -121;
}

impl From<&zk_proto::Stat> for Stat {
    fn from(s: &zk_proto::Stat) -> Stat {
        Stat {
            czxid: s.czxid,
            mzxid: s.mzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            ephemeralOwner: s.ephemeral_owner,
            dataLength: s.data_length,
            numChildren: s.num_children,
            pzxid: s.pzxid,
        }
    }
}
