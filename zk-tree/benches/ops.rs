//! The tree's hot operations as the server's core runs them: prep + apply of setData and create,
//! and getData, on a tree of 100,000 nodes (100 directories of 1,000).
//!
//! `cargo bench -p zk-tree --bench ops`
// criterion_group! defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;
use zk_proto::{GetDataRequest, OpCode, Request, SetDataRequest};

mod fixture;
use fixture::{create, Fixture};

/// A tree of 100 directories of 1,000 nodes each.
fn tree_100k() -> Fixture {
    let mut f = Fixture::with_session();
    for d in 0..100 {
        f.write(OpCode::Create, Some(create(format!("/d{d}"), 0)));
        for i in 0..1000 {
            f.write(OpCode::Create, Some(create(format!("/d{d}/n{i}"), 0)));
        }
    }
    f
}

fn ops(c: &mut Criterion) {
    let mut f = tree_100k();
    let mut g = c.benchmark_group("tree-100k");
    g.throughput(Throughput::Elements(1)).measurement_time(Duration::from_secs(3));
    let data = Bytes::from_static(&[2u8; 100]);
    let mut i = 0usize;
    g.bench_function("setData prep+apply", |b| {
        b.iter(|| {
            i = (i + 7919) % 100_000;
            let req = Request::SetData(SetDataRequest {
                path: format!("/d{}/n{}", i % 100, i / 100),
                data: Some(data.clone()),
                version: -1,
            });
            f.write(OpCode::SetData, Some(req));
        })
    });
    let mut n = 0u64;
    g.bench_function("create prep+apply", |b| {
        b.iter(|| {
            n += 1;
            f.write(OpCode::Create, Some(create(format!("/d{}/new{n}", n % 100), 0)));
        })
    });
    g.bench_function("getData", |b| {
        b.iter(|| {
            i = (i + 7919) % 100_000;
            let r = GetDataRequest { path: format!("/d{}/n{}", i % 100, i / 100), watch: false };
            f.db.get_data(&r.path, &f.auth, None).expect("node exists")
        })
    });
    g.finish();
}

criterion_group!(benches, ops);
criterion_main!(benches);
