//! Memory use of a tree of one million znodes: `cargo run --release -p zk-tree --example mem_1m`.
//! Builds 1,000 parents with 1,000 children each (paths like /app/p0042/n000123, 16 bytes of
//! data, the open ACL) through prep + apply, then prints the resident set size.

use bytes::Bytes;
use zk_proto::*;
use zk_tree::{AuthIds, Database, RequestCtx, TreeConfig};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let before = rss_kib();
    let mut db = Database::new(TreeConfig::default());
    let auth = AuthIds { ids: vec![Id { scheme: "ip".into(), id: "127.0.0.1".into() }], is_super: false };
    let acl = vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }];
    let mut zxid = 0i64;
    let mut apply = |db: &mut Database, req: Request| {
        zxid += 1;
        let ctx = RequestCtx { session: 1, cxid: 0, auth: &auth };
        let t = db.prep(&ctx, &req, zxid, zxid);
        let h = TxnHeader {
            client_id: 1,
            cxid: 0,
            zxid,
            time: zxid,
            txn_type: zk_tree::txn_type(req.op(), &t).code(),
        };
        db.apply(&h, &t);
    };
    let t = db.prep_create_session(1, 30000);
    db.apply(
        &TxnHeader { client_id: 1, cxid: 0, zxid: 0, time: 0, txn_type: OpCode::CreateSession.code() },
        &t,
    );
    let data = Bytes::from_static(b"0123456789abcdef");
    let mk = |path: String| {
        Request::Create(CreateRequest { path, data: Some(data.clone()), acl: acl.clone(), flags: 0 })
    };
    apply(&mut db, mk("/app".into()));
    for p in 0..1000 {
        apply(&mut db, mk(format!("/app/p{p:04}")));
        for n in 0..1000 {
            apply(&mut db, mk(format!("/app/p{p:04}/n{n:06}")));
        }
    }
    let after = rss_kib();
    println!(
        "znodes: {}  rss: {} MiB  per znode: {} bytes",
        db.node_count(),
        (after - before) / 1024,
        (after - before) * 1024 / db.node_count() as u64
    );
}
