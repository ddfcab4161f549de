//! A whole tree as a client sees it: every node's data, stat, ACL and children, read by walking
//! from the root, to compare what two servers (or one before and after) serve.

use super::client::RawClient;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use zk_proto::*;

/// One node as served.
#[derive(Debug, PartialEq)]
pub struct Served {
    /// Its data.
    pub data: Option<Bytes>,
    /// Its stat.
    pub stat: Stat,
    /// Its ACL (digest hashes shown only to a caller with ADMIN on it).
    pub acl: Vec<Acl>,
    /// Its children's names.
    pub children: BTreeSet<String>,
}

/// The path of `name` under `parent`.
pub fn child(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Every node `c` can read, by path.
pub fn walk(c: &mut RawClient) -> BTreeMap<String, Served> {
    let mut out = BTreeMap::new();
    let mut stack = vec!["/".to_string()];
    while let Some(p) = stack.pop() {
        let d: GetDataResponse = c.get_data(&p, false).decode();
        let a: GetAclResponse = c.call(Request::GetAcl(GetAclRequest { path: p.clone() })).decode();
        let ch: GetChildren2Response = c.children2(&p, false).decode();
        for n in &ch.children {
            stack.push(child(&p, n));
        }
        out.insert(
            p,
            Served { data: d.data, stat: d.stat, acl: a.acl, children: ch.children.into_iter().collect() },
        );
    }
    out
}
