//! The ACLs ZooKeeper names (ZooDefs.Ids).

use zk_proto::{perms, Acl, Id};

fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl { perms, id: Id { scheme: scheme.into(), id: id.into() } }
}

/// world:anyone with every permission.
pub fn open_unsafe() -> Vec<Acl> {
    vec![acl(perms::ALL, "world", "anyone")]
}

/// world:anyone may read.
pub fn read_unsafe() -> Vec<Acl> {
    vec![acl(perms::READ, "world", "anyone")]
}

/// Every permission for the identities the creating session authenticated as (`auth` scheme);
/// INVALIDACL when the session has none.
pub fn creator_all() -> Vec<Acl> {
    vec![acl(perms::ALL, "auth", "")]
}
