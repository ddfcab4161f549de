//! Snapshot write (begin + steps of 10,000 nodes into memory, as the server's core does) and
//! load (content -> Database, links and indexes included) by tree size. Trees are 1,000-way
//! fan-outs of nodes with 32 bytes of data and the open ACL.
//!
//! `cargo bench -p zk-tree --bench snapshot`
// criterion_group! defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use zk_proto::{perms, Acl, CreateTxn, Id, OpCode, Txn, TxnHeader};
use zk_tree::{load_snapshot, Database, TreeConfig};

fn tree(n: usize) -> Database {
    let mut db = Database::new(TreeConfig::default());
    let acl = vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }];
    let data = Bytes::from_static(&[7u8; 32]);
    let mut zxid = 0i64;
    let mut create = |db: &mut Database, path: String| {
        zxid += 1;
        let hdr = TxnHeader { client_id: 1, cxid: 0, zxid, time: zxid, txn_type: OpCode::Create.code() };
        let txn = Txn::Create(CreateTxn {
            path,
            data: Some(data.clone()),
            acl: acl.clone(),
            ephemeral: false,
            parent_cversion: -1,
        });
        db.apply(&hdr, &txn);
    };
    let dirs = n.div_ceil(1000);
    for d in 0..dirs {
        create(&mut db, format!("/dir{d:04}"));
    }
    for i in 0..n.saturating_sub(dirs) {
        create(&mut db, format!("/dir{:04}/node{:06}", i % dirs, i));
    }
    db
}

fn write(db: &Database) -> Vec<u8> {
    let mut cur = db.snapshot_begin();
    let mut out = Vec::new();
    while !db.snapshot_step(&mut cur, &mut out, 10_000) {}
    out
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot");
    g.sample_size(10).measurement_time(Duration::from_secs(8)).warm_up_time(Duration::from_secs(1));
    for n in [10_000usize, 100_000, 1_000_000] {
        let db = tree(n);
        let content = write(&db);
        eprintln!("{n} nodes: {} content bytes ({} per node)", content.len(), content.len() / n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("write", n), &db, |b, db| b.iter(|| write(db).len()));
        g.bench_with_input(BenchmarkId::new("load", n), &content, |b, content| {
            // The database is dropped outside the timing: a restart keeps it.
            b.iter_with_large_drop(|| load_snapshot(TreeConfig::default(), content).expect("load"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
