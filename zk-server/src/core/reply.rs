//! Reply bodies and how a committed write's outcome becomes one.

use bytes::{Bytes, BytesMut};
use zk_proto::jute::Jute;
use zk_proto::response::encode_multi_response;
use zk_proto::{Acl, ClientInfo, ErrorCode, OpCode, OpResult, Stat};
use zk_tree::{ChildNames, Outcome};

/// A reply body, encoded after the header when the error code is 0.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Nothing after the header.
    Empty,
    /// exists, setData, setACL.
    Stat(Stat),
    /// getData.
    Data(Option<Bytes>, Stat),
    /// create, sync.
    Path(String),
    /// create2, createContainer, createTTL.
    Path2(String, Stat),
    /// getChildren: the names already in their jute encoding (one copy into the frame, however
    /// many children).
    Children(ChildNames),
    /// getChildren2.
    Children2(ChildNames, Stat),
    /// getACL.
    Acl(Vec<Acl>, Stat),
    /// multi, multiRead.
    Multi(Vec<OpResult>),
    /// getAllChildrenNumber, addWatch.
    Int(i32),
    /// getEphemerals.
    Strings(Vec<String>),
    /// whoAmI.
    WhoAmI(Vec<ClientInfo>),
    /// A SASL answer: its token, or a null one.
    SaslToken(Option<Bytes>),
}

impl Body {
    /// Appends the body's jute encoding.
    pub fn encode(&self, b: &mut BytesMut) {
        match self {
            Body::Empty => {}
            Body::Stat(s) => s.write(b),
            Body::Data(d, s) => {
                d.write(b);
                s.write(b);
            }
            Body::Path(p) => p.write(b),
            Body::Path2(p, s) => {
                p.write(b);
                s.write(b);
            }
            Body::Children(c) => b.extend_from_slice(c.jute()),
            Body::Strings(c) => c.write(b),
            Body::Children2(c, s) => {
                b.extend_from_slice(c.jute());
                s.write(b);
            }
            Body::Acl(a, s) => {
                a.write(b);
                s.write(b);
            }
            Body::Multi(r) => encode_multi_response(r, b),
            Body::Int(n) => n.write(b),
            Body::WhoAmI(v) => v.write(b),
            Body::SaslToken(t) => t.write(b),
        }
    }
}

/// The error code and body a committed write answers with.
pub fn write_reply(op: OpCode, outcome: &Outcome) -> (ErrorCode, Body) {
    match outcome {
        Outcome::Error(e) => (*e, Body::Empty),
        Outcome::Created { path, stat } => match op {
            OpCode::Create => (ErrorCode::Ok, Body::Path(path.clone())),
            _ => (ErrorCode::Ok, Body::Path2(path.clone(), stat.clone())),
        },
        Outcome::SetData { stat } | Outcome::SetAcl { stat } => (ErrorCode::Ok, Body::Stat(stat.clone())),
        Outcome::Multi(results) => (ErrorCode::Ok, Body::Multi(results.clone())),
        Outcome::Deleted | Outcome::SessionCreated | Outcome::SessionClosed => (ErrorCode::Ok, Body::Empty),
    }
}
