//! The data symbols of the ABI: `extern const int` constants, the well-known ids and ACL vectors.
//!
//! Executables compiled against Apache's header reach these through copy relocations, so each
//! is a real exported object of the header's size, and the writable ones (`struct Id`,
//! `struct ACL_vector`) live in writable memory as in Apache's library.
#![allow(non_upper_case_globals, missing_docs)]

use crate::abi::{ACL_vector, Id, ACL};
use libc::{c_char, c_int};

macro_rules! consts {
    ($($name:ident = $v:expr;)*) => {$(
        #[no_mangle]
        pub static $name: c_int = $v;
    )*};
}

consts! {
    ZOO_PERM_READ = 1; ZOO_PERM_WRITE = 2; ZOO_PERM_CREATE = 4; ZOO_PERM_DELETE = 8;
    ZOO_PERM_ADMIN = 16; ZOO_PERM_ALL = 31;
    ZOOKEEPER_WRITE = 1; ZOOKEEPER_READ = 2;
    ZOO_PERSISTENT = 0; ZOO_EPHEMERAL = 1; ZOO_PERSISTENT_SEQUENTIAL = 2;
    ZOO_EPHEMERAL_SEQUENTIAL = 3; ZOO_CONTAINER = 4; ZOO_PERSISTENT_WITH_TTL = 5;
    ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL = 6; ZOO_SEQUENCE = 2;
    ZOO_EXPIRED_SESSION_STATE = -112; ZOO_AUTH_FAILED_STATE = -113; ZOO_CONNECTING_STATE = 1;
    ZOO_ASSOCIATING_STATE = 2; ZOO_CONNECTED_STATE = 3; ZOO_READONLY_STATE = 5;
    ZOO_NOTCONNECTED_STATE = 999; ZOO_SSL_CONNECTING_STATE = 7;
    ZOO_CREATED_EVENT = 1; ZOO_DELETED_EVENT = 2; ZOO_CHANGED_EVENT = 3; ZOO_CHILD_EVENT = 4;
    ZOO_SESSION_EVENT = -1; ZOO_NOTWATCHING_EVENT = -2;
}

/// The same numbers for the library's own use (reading the exported statics from inside the
/// library could see a stale copy when an executable holds copy-relocated ones).
pub mod value {
    pub const CONNECTING: i32 = 1;
    pub const ASSOCIATING: i32 = 2;
    pub const CONNECTED: i32 = 3;
    pub const READONLY: i32 = 5;
    pub const EXPIRED: i32 = -112;
    pub const AUTH_FAILED: i32 = -113;
    pub const SESSION_EVENT: i32 = -1;
}

const fn cstr(s: &'static [u8]) -> *mut c_char {
    s.as_ptr() as *mut c_char
}

#[no_mangle]
pub static mut ZOO_ANYONE_ID_UNSAFE: Id = Id { scheme: cstr(b"world\0"), id: cstr(b"anyone\0") };
#[no_mangle]
pub static mut ZOO_AUTH_IDS: Id = Id { scheme: cstr(b"auth\0"), id: cstr(b"\0") };

static mut OPEN_ACL: [ACL; 1] =
    [ACL { perms: 31, id: Id { scheme: cstr(b"world\0"), id: cstr(b"anyone\0") } }];
static mut READ_ACL: [ACL; 1] =
    [ACL { perms: 1, id: Id { scheme: cstr(b"world\0"), id: cstr(b"anyone\0") } }];
static mut CREATOR_ACL: [ACL; 1] = [ACL { perms: 31, id: Id { scheme: cstr(b"auth\0"), id: cstr(b"\0") } }];

#[no_mangle]
pub static mut ZOO_OPEN_ACL_UNSAFE: ACL_vector = ACL_vector { count: 1, data: &raw mut OPEN_ACL as *mut ACL };
#[no_mangle]
pub static mut ZOO_READ_ACL_UNSAFE: ACL_vector = ACL_vector { count: 1, data: &raw mut READ_ACL as *mut ACL };
#[no_mangle]
pub static mut ZOO_CREATOR_ALL_ACL: ACL_vector =
    ACL_vector { count: 1, data: &raw mut CREATOR_ACL as *mut ACL };
