//! The tree's hot operations as the server's core runs them: prep + apply of setData and create,
//! and getData, on a tree of 100,000 nodes (100 directories of 1,000).
//!
//! `cargo bench -p zk-tree --bench ops`
// criterion_group! defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;
use zk_proto::{perms, Acl, CreateRequest, GetDataRequest, Id, OpCode, Request, SetDataRequest, TxnHeader};
use zk_tree::{AuthIds, Database, RequestCtx, TreeConfig};

const SESSION: i64 = 0x1234;

struct Fixture {
    db: Database,
    zxid: i64,
    auth: AuthIds,
}

impl Fixture {
    fn new() -> Fixture {
        let mut f = Fixture { db: Database::new(TreeConfig::default()), zxid: 0, auth: AuthIds::default() };
        f.write(OpCode::CreateSession, None);
        for d in 0..100 {
            f.write(OpCode::Create, Some(create(format!("/d{d}"))));
            for i in 0..1000 {
                f.write(OpCode::Create, Some(create(format!("/d{d}/n{i}"))));
            }
        }
        f
    }

    /// Prep then apply, as a committed write; `None` creates the session.
    fn write(&mut self, op: OpCode, req: Option<Request>) {
        self.zxid += 1;
        let txn = match &req {
            Some(r) => {
                let ctx = RequestCtx { session: SESSION, cxid: 1, auth: &self.auth };
                self.db.prep(&ctx, r, self.zxid, self.zxid)
            }
            None => self.db.prep_create_session(SESSION, 30_000),
        };
        let hdr = TxnHeader {
            client_id: SESSION,
            cxid: 1,
            zxid: self.zxid,
            time: self.zxid,
            txn_type: zk_tree::txn_type(op, &txn).code(),
        };
        self.db.apply(&hdr, &txn);
    }
}

fn acl() -> Vec<Acl> {
    vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}

fn create(path: String) -> Request {
    Request::Create(CreateRequest { path, data: Some(Bytes::from_static(&[1u8; 100])), acl: acl(), flags: 0 })
}

fn ops(c: &mut Criterion) {
    let mut f = Fixture::new();
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
            f.write(OpCode::Create, Some(create(format!("/d{}/new{n}", n % 100))));
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
