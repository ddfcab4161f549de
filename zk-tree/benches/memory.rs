//! Where the memory of a large tree goes: 1,000,000 znodes of 100 bytes created through prep and
//! apply (as the server's core does, with zkrs-bench's populate paths: 4 writers' nodes under one
//! parent), counted by a global allocator that tracks every live allocation by size. Prints the
//! live heap per znode and the allocation sizes holding most of it. Not timed: a report, not a
//! criterion benchmark.
//!
//! `cargo bench -p zk-tree --bench memory` (`ZNODES=n` for another count)
// A bench binary has no API to document; the allocator needs unsafe (GlobalAlloc is an unsafe trait).
#![allow(missing_docs, unsafe_code)]

use bytes::Bytes;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use zk_proto::{perms, Acl, CreateRequest, Id, OpCode, Request, TxnHeader};
use zk_tree::{AuthIds, Database, RequestCtx, TreeConfig};

/// Size classes: exact to 256 bytes in steps of 8, then one class per power of two.
const CLASSES: usize = 32 + 40;
static LIVE_BYTES: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];
static LIVE_COUNT: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];

fn class(size: usize) -> usize {
    if size <= 256 {
        size.div_ceil(8).max(1) - 1
    } else {
        32 + (usize::BITS - (size - 1).leading_zeros()) as usize
    }
}

fn class_name(c: usize) -> String {
    if c < 32 {
        format!("{}..={} B", c * 8 + 1, c * 8 + 8)
    } else {
        let hi = 1u64 << (c - 32);
        format!("{}..={} B", hi / 2 + 1, hi)
    }
}

struct Counting;

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let c = class(l.size());
        LIVE_BYTES[c].fetch_add(l.size() as i64, Relaxed);
        LIVE_COUNT[c].fetch_add(1, Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let c = class(l.size());
        LIVE_BYTES[c].fetch_sub(l.size() as i64, Relaxed);
        LIVE_COUNT[c].fetch_sub(1, Relaxed);
        // SAFETY: a pointer this allocator returned, with its layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let (a, b) = (class(l.size()), class(new));
        LIVE_BYTES[a].fetch_sub(l.size() as i64, Relaxed);
        LIVE_COUNT[a].fetch_sub(1, Relaxed);
        LIVE_BYTES[b].fetch_add(new as i64, Relaxed);
        LIVE_COUNT[b].fetch_add(1, Relaxed);
        // SAFETY: as given by the caller.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn snapshot() -> Vec<(i64, i64)> {
    (0..CLASSES).map(|c| (LIVE_BYTES[c].load(Relaxed), LIVE_COUNT[c].load(Relaxed))).collect()
}

const SESSION: i64 = 0x1234;

fn main() {
    let n: i64 = std::env::var("ZNODES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let acl = vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }];
    let data = Bytes::from(vec![7u8; 100]);
    let auth = AuthIds::default();
    let mut db = Database::new(TreeConfig::default());
    let mut zxid = 0;
    let mut write = |db: &mut Database, op: OpCode, req: Option<Request>| {
        zxid += 1;
        let txn = match &req {
            Some(r) => db.prep(&RequestCtx { session: SESSION, cxid: 1, auth: &auth }, r, zxid, zxid),
            None => db.prep_create_session(SESSION, 30_000),
        };
        let hdr = TxnHeader {
            client_id: SESSION,
            cxid: 1,
            zxid,
            time: zxid,
            txn_type: zk_tree::txn_type(op, &txn).code(),
        };
        db.apply(&hdr, &txn);
    };
    let create = |path: String, data: Option<Bytes>| {
        Request::Create(CreateRequest { path, data, acl: acl.clone(), flags: 0 })
    };
    write(&mut db, OpCode::CreateSession, None);
    write(&mut db, OpCode::Create, Some(create("/zkrs-bench".into(), None)));
    let nodes_before = db.node_count() as i64;
    let before = snapshot();
    for i in 0..n {
        // zkrs-bench's populate: 4 connections, each counting its share down.
        let (conn, left) = (i % 4, n / 4 - i / 4);
        write(
            &mut db,
            OpCode::Create,
            Some(create(format!("/zkrs-bench/pop-c{conn}-{left}"), Some(data.clone()))),
        );
    }
    let after = snapshot();
    assert_eq!(db.node_count() as i64, nodes_before + n, "every create applied");
    let mut rows: Vec<(usize, i64, i64)> =
        (0..CLASSES).map(|c| (c, after[c].0 - before[c].0, after[c].1 - before[c].1)).collect();
    let total: i64 = rows.iter().map(|r| r.1).sum();
    let path_and_data: i64 =
        (0..n).map(|i| format!("/zkrs-bench/pop-c{}-{}", i % 4, n / 4 - i / 4).len() as i64 + 100).sum();
    println!(
        "{n} znodes of 100 bytes: live heap {:.1} MB, {:.1} bytes per znode ({:.1} of them path and data)",
        total as f64 / 1e6,
        total as f64 / n as f64,
        path_and_data as f64 / n as f64
    );
    rows.sort_by_key(|r| -r.1);
    println!("| allocation size | live allocations | live MB | bytes per znode |");
    println!("|---|---:|---:|---:|");
    for (c, bytes, count) in rows.into_iter().filter(|r| r.1 > 0).take(8) {
        println!(
            "| {} | {count} | {:.1} | {:.1} |",
            class_name(c),
            bytes as f64 / 1e6,
            bytes as f64 / n as f64
        );
    }
    drop(db);
}
