//! Helpers shared by the integration tests.

use bytes::Bytes;

/// Walks the unframed snapshot stream that follows SNAP (sessions, ACL cache, nodes up to the "/"
/// terminator, the "BenWasHere" signature): the node paths and the stream's length, or an error if
/// `bytes` does not (yet) hold all of it.
pub fn parse_snapshot_stream(bytes: Bytes) -> Result<(Vec<String>, usize), String> {
    use zk_proto::jute::{Jute, Reader};
    let err = |e: zk_proto::DecodeError| e.to_string();
    let total = bytes.len();
    let mut r = Reader::new(bytes);
    for _ in 0..r.i32().map_err(err)? {
        r.i64().map_err(err)?; // session id
        r.i32().map_err(err)?; // timeout
    }
    for _ in 0..r.i32().map_err(err)? {
        r.i64().map_err(err)?; // ACL cache key
        Vec::<zk_proto::Acl>::read(&mut r).map_err(err)?;
    }
    let mut paths = Vec::new();
    loop {
        let path = String::read(&mut r).map_err(err)?;
        if path == "/" {
            break;
        }
        Option::<Bytes>::read(&mut r).map_err(err)?; // data
        r.i64().map_err(err)?; // ACL key
        zk_proto::StatPersisted::read(&mut r).map_err(err)?;
        paths.push(path);
    }
    let signature = String::read(&mut r).map_err(err)?;
    if signature != "BenWasHere" {
        return Err(format!("snapshot signature {signature:?}"));
    }
    Ok((paths, total - r.remaining()))
}
