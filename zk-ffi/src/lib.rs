//! libzkrs: Apache ZooKeeper's C client ABI (libzookeeper_mt 3.8) on zk-client's session core.
//!
//! Programs compiled against Apache's zookeeper.h link with `-lzkrs`, or run unchanged with
//! libzkrs.so installed as libzookeeper_mt.so.2 (the library carries that soname). Module map:
//! - [`abi`]: the C structs, field for field; [`consts`]: the exported data symbols;
//! - [`jute`]: deallocate_*/allocate_*; [`log`]: logLevel, streams, callbacks, log_message;
//! - `handle`: zhandle_t, its I/O and completion threads, and single-threaded driving;
//! - [`api`]: the zoo_* calls of Apache's API; [`ext`]: libzkrs's additions (zkrs_ext.h);
//! - [`lifecycle`]: init/close and the handle accessors;
//! - [`deliver`]: results into C callbacks and caller-owned memory;
//! - [`tls`]: zookeeper_init_ssl's certificate string and TLS on the I/O thread's socket (rustls).
//!
//! Architecture invariant: every byte on the wire comes from the session core; this crate only
//! moves bytes, runs callbacks and converts between C and Rust types.
//!
//! # Example
//!
//! C programs use the library through `<zookeeper/zookeeper.h>` (Apache's API) and
//! `<zookeeper/zkrs_ext.h>` (libzkrs's additions, generated from [`ext`] by cbindgen):
//!
//! ```c
//! #include <zookeeper/zkrs_ext.h>
//!
//! zhandle_t *zh = zookeeper_init("127.0.0.1:2181", watcher, 10000, NULL, NULL, 0);
//! int count;
//! if (zoo_get_all_children_number(zh, "/", &count) == ZOK) printf("%d nodes\n", count);
//! zookeeper_close(zh);
//! ```
//!
//! The same calls from Rust, through the `rlib`:
//!
//! ```no_run
//! use std::ptr::{null, null_mut};
//! use zkrs::{abi::err, ext, lifecycle};
//!
//! let zh = lifecycle::zookeeper_init(c"127.0.0.1:2181".as_ptr(), None, 10_000, null(), null_mut(), 0);
//! assert!(!zh.is_null());
//! let mut count = 0;
//! if ext::zoo_get_all_children_number(zh, c"/".as_ptr(), &mut count) == err::ZOK {
//!     println!("{count} nodes");
//! }
//! lifecycle::zookeeper_close(zh);
//! ```
#![deny(missing_docs)]
// The C entry points take raw pointers by contract (Apache's API): they check for NULL and trust the
// rest, as every C library does; marking them `unsafe fn` would change nothing for C callers.
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments, clippy::not_unsafe_ptr_arg_deref)]

// `unsafe_code` is denied across the workspace and allowed here module by module, so a new module
// starts out safe (`abi`, plain `#[repr(C)]` types, needs none). The others need it because a C ABI
// cannot be written without it: exported symbols are `#[no_mangle]` (unsafe: the linker trusts the
// name), and C hands over raw pointers to read, write and free. Every unsafe block says why it holds.
pub mod abi;
#[allow(unsafe_code)] // The exported zoo_* calls: reads the caller's pointers, writes its buffers.
pub mod api;
#[allow(unsafe_code)] // Exported data symbols (`#[no_mangle]` statics that C binds by name).
pub mod consts;
#[allow(unsafe_code)] // Writes results into memory the caller owns; calls C completion functions.
pub mod deliver;
#[allow(unsafe_code)] // libzkrs's own zoo_* calls (the source of zkrs_ext.h): as `api`.
pub mod ext;
#[allow(unsafe_code)] // C pointers (contexts, callbacks) carried across threads: `unsafe impl Send`.
pub(crate) mod handle;
#[allow(unsafe_code)] // Exported allocate_*/deallocate_*: frees memory C passes back.
pub mod jute;
#[allow(unsafe_code)] // zookeeper_init/close take and return the raw zhandle_t.
pub mod lifecycle;
#[allow(unsafe_code)] // Exported log symbols; calls the C log callback and writes to a C FILE.
pub mod log;
#[allow(unsafe_code)] // Reads Cyrus-style callback arrays and calls them; exports the basic callbacks.
pub mod sasl;
pub mod tls;
