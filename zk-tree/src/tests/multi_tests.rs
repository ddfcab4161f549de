//! multi: the MultiTxn logged, the results clients see, rollback of the outstanding view.

use super::support::*;
use crate::Outcome;
use zk_proto::*;

fn del(p: &str, v: i32) -> Request {
    Request::Delete(DeleteRequest { path: p.into(), version: v })
}
fn check(p: &str, v: i32) -> Request {
    Request::Check(CheckVersionRequest { path: p.into(), version: v })
}
fn set(p: &str, v: i32) -> Request {
    Request::SetData(SetDataRequest { path: p.into(), data: None, version: v })
}

#[test]
fn successful_multi_results_by_op_type() {
    let mut h = Harness::new();
    h.mkdir("/a");
    let ops = vec![
        Request::Create(creq("/a/1", b"x", 0)),
        Request::Create2(creq("/a/2", b"x", 0)),
        Request::CreateContainer(creq("/a/3", b"x", 4)),
        Request::CreateTtl(CreateTtlRequest {
            path: "/a/4".into(),
            data: None,
            acl: world(),
            flags: 5,
            ttl: 10,
        }),
        check("/a", 0),
        set("/a/1", 0),
        Request::Create(creq("/a/1/s", b"", 2)),
        del("/a/2", -1),
    ];
    let (txn, applied) = h.run(S1, Request::Multi(ops));
    let Txn::Multi(subs) = &txn else { panic!("{txn:?}") };
    let types: Vec<OpCode> = subs.iter().map(|(t, _)| *t).collect();
    // create2 inside a multi is logged (and answered) as a plain create, as Apache's
    // MultiOperationRecord turns it into Op.create.
    assert_eq!(
        types,
        [
            OpCode::Create,
            OpCode::Create,
            OpCode::CreateContainer,
            OpCode::CreateTtl,
            OpCode::Check,
            OpCode::SetData,
            OpCode::Create,
            OpCode::Delete
        ]
    );
    let Outcome::Multi(res) = applied.outcome else { panic!() };
    assert_eq!(res[0], OpResult::Create("/a/1".into()));
    assert_eq!(res[1], OpResult::Create("/a/2".into()));
    assert!(matches!(&res[2], OpResult::Create2(p, s) if p == "/a/3" && s.ephemeral_owner == 0));
    assert!(matches!(&res[3], OpResult::Create2(p, _) if p == "/a/4"));
    assert_eq!(res[4], OpResult::Check);
    assert!(matches!(&res[5], OpResult::SetData(s) if s.version == 1));
    assert_eq!(res[6], OpResult::Create("/a/1/s0000000000".into()));
    assert_eq!(res[7], OpResult::Delete);
    // One zxid for the whole multi.
    let a = h.stat("/a");
    assert_eq!((a.pzxid, a.num_children), (h.zxid, 3));
    assert_eq!(h.stat("/a/3").czxid, h.zxid);
}

#[test]
fn failed_multi_logs_and_reports_like_apache() {
    let mut h = Harness::new();
    h.mkdir("/m1");
    let ops =
        vec![Request::Create(creq("/m3", b"a", 0)), Request::Create(creq("/m1", b"", 0)), del("/zz", -1)];
    let (txn, applied) = h.run(S1, Request::Multi(ops));
    let Txn::Multi(subs) = &txn else { panic!("{txn:?}") };
    assert_eq!(subs[0].0, OpCode::Create);
    assert!(matches!(&subs[0].1, Txn::Create(c) if c.path == "/m3"));
    assert_eq!(subs[1], (OpCode::Error, Txn::Error(ErrorTxn { err: ErrorCode::NodeExists.code() })));
    assert_eq!(
        subs[2],
        (OpCode::Error, Txn::Error(ErrorTxn { err: ErrorCode::RuntimeInconsistency.code() }))
    );
    // As kazoo reports against Apache: RolledBack (0), NodeExists, RuntimeInconsistency.
    assert_eq!(
        applied.outcome,
        Outcome::Multi(vec![
            OpResult::Error(ErrorCode::Ok),
            OpResult::Error(ErrorCode::NodeExists),
            OpResult::Error(ErrorCode::RuntimeInconsistency),
        ])
    );
    assert!(h.db.tree().get("/m3").is_none());
    assert!(applied.events.is_empty());
    assert_eq!(crate::txn_type(OpCode::Multi, &txn), OpCode::Multi);
}

#[test]
fn failed_multi_rolls_back_outstanding_view() {
    let mut h = Harness::new();
    // Prepped, not applied: the multi's own changes must vanish from the view, earlier ones stay.
    let (h0, t0) = h.prep(S1, &Request::Create(creq("/base", b"", 0)));
    let ops = vec![
        Request::Create(creq("/base/x", b"", 0)),
        set("/base", 0),
        check("/base", 0), // sees the multi's own setData: version is 1 now
    ];
    let (h1, t1) = h.prep(S1, &Request::Multi(ops));
    let Txn::Multi(subs) = &t1 else { panic!() };
    assert_eq!(subs[2].1, Txn::Error(ErrorTxn { err: ErrorCode::BadVersion.code() }));
    let (h2, t2) = h.prep(S1, &Request::Create(creq("/base/x", b"", 0)));
    assert!(matches!(&t2, Txn::Create(c) if c.parent_cversion == 1), "{t2:?}");
    let (h3, t3) = h.prep(S1, &set("/base", 0));
    assert!(matches!(&t3, Txn::SetData(s) if s.version == 1), "{t3:?}");
    for (hd, t) in [(h0, t0), (h1, t1), (h2, t2), (h3, t3)] {
        h.db.apply(&hd, &t);
    }
    assert_eq!(h.stat("/base").version, 1);
    assert_eq!(h.stat("/base").num_children, 1);
}

#[test]
fn multi_ops_see_earlier_ops() {
    let mut h = Harness::new();
    let ops = vec![
        Request::Create(creq("/p", b"", 0)),
        Request::Create(creq("/p/c", b"", 0)),
        del("/p/c", 0),
        del("/p", 0),
        check("/p", -1),
    ];
    let (_, applied) = h.run(S1, Request::Multi(ops));
    assert_eq!(
        applied.outcome,
        Outcome::Multi(vec![
            OpResult::Error(ErrorCode::Ok),
            OpResult::Error(ErrorCode::Ok),
            OpResult::Error(ErrorCode::Ok),
            OpResult::Error(ErrorCode::Ok),
            OpResult::Error(ErrorCode::NoNode),
        ])
    );
}

#[test]
fn ttl_flags_on_a_create_body_fail_the_whole_multi() {
    let mut h = Harness::new();
    let ops = vec![Request::Create(creq("/ok", b"", 0)), Request::Create2(creq("/t", b"", 5))];
    let (txn, applied) = h.run(S1, Request::Multi(ops));
    assert_eq!(txn, Txn::Error(ErrorTxn { err: ErrorCode::MarshallingError.code() }));
    assert_eq!(applied.outcome, Outcome::Error(ErrorCode::MarshallingError));
    assert_eq!(h.db.outstanding_count(), 0);
    // A createTTL body without a TTL mode is a plain create.
    let ops = vec![Request::CreateTtl(CreateTtlRequest {
        path: "/p".into(),
        data: None,
        acl: world(),
        flags: 0,
        ttl: 5,
    })];
    let (txn, _) = h.run(S1, Request::Multi(ops));
    assert!(matches!(&txn, Txn::Multi(s) if s[0].0 == OpCode::Create), "{txn:?}");
}

#[test]
fn empty_multi_and_session_checks() {
    let mut h = Harness::new();
    let (txn, a) = h.run(S1, Request::Multi(vec![]));
    assert_eq!(txn, Txn::Multi(vec![]));
    assert_eq!(a.outcome, Outcome::Multi(vec![]));
    let (_, a) = h.run(0x999, Request::Multi(vec![check("/", -1), check("/", -1)]));
    assert_eq!(
        a.outcome,
        Outcome::Multi(vec![
            OpResult::Error(ErrorCode::UnknownSession),
            OpResult::Error(ErrorCode::RuntimeInconsistency)
        ])
    );
}
