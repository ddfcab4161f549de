//! libzkrs: Apache ZooKeeper's C client ABI (libzookeeper_mt 3.8) on zk-client's session core.
//!
//! Programs compiled against Apache's zookeeper.h link with `-lzkrs`, or run unchanged with
//! libzkrs.so installed as libzookeeper_mt.so.2 (the library carries that soname). Module map:
//! - [`abi`]: the C structs, field for field; [`consts`]: the exported data symbols;
//! - [`jute`]: deallocate_*/allocate_*; [`log`]: logLevel, streams, callbacks, log_message;
//! - [`handle`]: zhandle_t, its I/O and completion threads, and single-threaded driving;
//! - [`api`]: the zoo_* calls; [`lifecycle`]: init/close and the handle accessors;
//! - [`deliver`]: results into C callbacks and caller-owned memory.
//!
//! Architecture invariant: every byte on the wire comes from the session core; this crate only
//! moves bytes, runs callbacks and converts between C and Rust types.
#![deny(missing_docs)]
// The C entry points take raw pointers by contract (Apache's API): they check for NULL and trust the
// rest, as every C library does; marking them `unsafe fn` would change nothing for C callers.
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments, clippy::not_unsafe_ptr_arg_deref)]

pub mod abi;
pub mod api;
pub mod consts;
pub mod deliver;
#[allow(missing_docs)]
pub mod handle;
pub mod jute;
pub mod lifecycle;
pub mod log;
