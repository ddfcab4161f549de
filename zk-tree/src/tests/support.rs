//! A small driver: prep then apply with consecutive zxids and a controllable clock.

use crate::{Applied, AuthIds, Database, Outcome, RequestCtx, SessionId, TreeConfig};
use bytes::Bytes;
use zk_proto::*;

pub const S1: SessionId = 0x100;
pub const S2: SessionId = 0x200;

pub struct Harness {
    pub db: Database,
    pub zxid: i64,
    pub now: i64,
    pub auth: AuthIds,
}

pub fn world() -> Vec<Acl> {
    vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}

pub fn acl(p: i32, scheme: &str, id: &str) -> Acl {
    Acl { perms: p, id: Id { scheme: scheme.into(), id: id.into() } }
}

pub fn ip_auth(addr: &str) -> AuthIds {
    AuthIds { ids: vec![Id { scheme: "ip".into(), id: addr.into() }], is_super: false }
}

pub fn creq(path: &str, data: &[u8], flags: i32) -> CreateRequest {
    CreateRequest { path: path.into(), data: Some(Bytes::copy_from_slice(data)), acl: world(), flags }
}

impl Harness {
    pub fn new() -> Self {
        Self::with(TreeConfig { extended_types_enabled: true, tick_ms: 2000, ..TreeConfig::default() })
    }

    pub fn with(cfg: TreeConfig) -> Self {
        let mut h = Harness { db: Database::new(cfg), zxid: 0, now: 1000, auth: ip_auth("127.0.0.1") };
        h.open_session(S1, 30000);
        h.open_session(S2, 30000);
        h
    }

    pub fn open_session(&mut self, s: SessionId, timeout: i32) {
        let t = self.db.prep_create_session(s, timeout);
        self.commit(s, OpCode::CreateSession, &t);
    }

    pub fn hdr(&mut self, s: SessionId, op: OpCode) -> TxnHeader {
        self.zxid += 1;
        self.now += 1;
        TxnHeader { client_id: s, cxid: 1, zxid: self.zxid, time: self.now, txn_type: op.code() }
    }

    pub fn commit(&mut self, s: SessionId, op: OpCode, txn: &Txn) -> Applied {
        let hdr = self.hdr(s, crate::txn_type(op, txn));
        self.db.apply(&hdr, txn)
    }

    /// Preps (with the next zxid) without applying.
    pub fn prep(&mut self, s: SessionId, req: &Request) -> (TxnHeader, Txn) {
        let zxid = self.zxid + 1;
        let now = self.now + 1;
        let auth = self.auth.clone();
        let ctx = RequestCtx { session: s, cxid: 1, auth: &auth };
        let txn = self.db.prep(&ctx, req, zxid, now);
        self.zxid = zxid;
        self.now = now;
        let hdr = TxnHeader {
            client_id: s,
            cxid: 1,
            zxid,
            time: now,
            txn_type: crate::txn_type(req.op(), &txn).code(),
        };
        (hdr, txn)
    }

    pub fn run(&mut self, s: SessionId, req: Request) -> (Txn, Applied) {
        let (hdr, txn) = self.prep(s, &req);
        let a = self.db.apply(&hdr, &txn);
        (txn, a)
    }

    pub fn outcome(&mut self, s: SessionId, req: Request) -> Outcome {
        self.run(s, req).1.outcome
    }

    pub fn create(&mut self, path: &str, flags: i32) -> Outcome {
        self.outcome(S1, Request::Create(creq(path, b"d", flags)))
    }

    pub fn mkdir(&mut self, path: &str) {
        let o = self.create(path, 0);
        assert!(matches!(o, Outcome::Created { .. }), "{path}: {o:?}");
    }

    pub fn delete(&mut self, path: &str, version: i32) -> Outcome {
        self.outcome(S1, Request::Delete(DeleteRequest { path: path.into(), version }))
    }

    pub fn set_data(&mut self, path: &str, data: &[u8], version: i32) -> Outcome {
        self.outcome(
            S1,
            Request::SetData(SetDataRequest {
                path: path.into(),
                data: Some(Bytes::copy_from_slice(data)),
                version,
            }),
        )
    }

    pub fn stat(&mut self, path: &str) -> Stat {
        let auth = AuthIds { ids: vec![], is_super: true };
        self.db.exists(path, &auth, None).unwrap()
    }

    pub fn err(&mut self, s: SessionId, req: Request) -> ErrorCode {
        match self.run(s, req) {
            (Txn::Error(e), a) => {
                assert_eq!(a.outcome, Outcome::Error(ErrorCode::from_i32(e.err).unwrap()));
                ErrorCode::from_i32(e.err).unwrap()
            }
            other => panic!("expected an error txn, got {other:?}"),
        }
    }
}
