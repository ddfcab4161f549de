//! Apache ZooKeeper's snapshot file, written from a database that stands still while it is
//! written (the AdminServer's `snapshot` command serves one, [`crate::admin::snapshot`]).
//!
//! The layout is the one Apache 3.9 writes by default and `zk_log::apache::read_snapshot`
//! (and so `zkrs-server import`) reads, all big-endian jute:
//! ```text
//! FileHeader{int magic "ZKSN", int version 2, long dbid -1}
//! the SNAP stream's body (sessions, ACL map, nodes in pre-order, the path "/"),
//!     without the "BenWasHere" signature a learner's stream ends with (zk_tree::apache_snap)
//! seal: long adler32 of every byte before it, string "/"
//! ZxidDigest{long zxid, int digestVersion 2, long digest}, zxid 0 when the tree keeps no digest
//! seal
//! long lastProcessedZxid (3.9's serializeLastProcessedZxid, on by default)
//! seal
//! ```
//! Each seal's Adler32 runs over everything written before it, earlier seals included, as
//! Apache's `CheckedOutputStream` counts them. Apache 3.8 stops reading after the digest's seal,
//! 3.9 reads the last zxid too.
//!
//! The writer holds one chunk of about [`CHUNK_BYTES`] (plus the few nodes of the step that
//! crossed the line, each at most jute.maxbuffer): the caller's sink takes each chunk before the
//! next is made.

use zk_log::apache::{Adler32, APACHE_SNAP_MAGIC};
use zk_tree::apache_snap::SIGNATURE;
use zk_tree::Database;

/// Apache's snapshot file format version.
pub const APACHE_SNAP_VERSION: i32 = 2;

/// The dbid Apache writes in its file headers.
pub const APACHE_DBID: i64 = -1;

/// Apache's tree digest version (its `DigestCalculator.DIGEST_VERSION`).
pub const DIGEST_VERSION: i32 = 2;

/// Bytes gathered before a chunk goes to the sink.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Sessions, ACL lists or nodes serialized per step: a chunk is at most [`CHUNK_BYTES`] plus
/// this many items, each bounded by jute.maxbuffer (a node's data and path).
const ITEMS_PER_STEP: usize = 4;

/// The bytes not yet handed to the sink, and the checksum of those that were.
struct Sealed {
    buf: Vec<u8>,
    adler: Adler32,
    written: u64,
}

impl Sealed {
    fn flush<E>(&mut self, sink: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.adler.update(&self.buf);
        self.written += self.buf.len() as u64;
        sink(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    fn put_i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    fn put_i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A seal: the checksum of everything before it, then the string "/".
    fn seal<E>(&mut self, sink: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        self.flush(sink)?;
        self.put_i64(i64::from(self.adler.value()));
        self.put_i32(1);
        self.buf.push(b'/');
        Ok(())
    }
}

/// Writes `db` as an Apache snapshot file to `sink`, chunk by chunk, and returns the bytes
/// written. `db` must not change meanwhile (it is borrowed): every node is written as of its
/// last applied zxid, which is also the file's last processed zxid and the digest's zxid.
///
/// Errors: the sink's, which stop the writing.
pub fn write<E>(db: &Database, sink: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<u64, E> {
    let mut w = Sealed { buf: Vec::with_capacity(CHUNK_BYTES * 2), adler: Adler32::default(), written: 0 };
    w.put_i32(APACHE_SNAP_MAGIC);
    w.put_i32(APACHE_SNAP_VERSION);
    w.put_i64(APACHE_DBID);
    let mut cur = db.apache_snap_begin();
    let signature = 4 + SIGNATURE.len();
    loop {
        let done = db.apache_snap_step(&mut cur, &mut w.buf, ITEMS_PER_STEP);
        if done {
            // A file ends its nodes with "/" alone; the signature is the SNAP stream's.
            debug_assert!(w.buf.ends_with(SIGNATURE.as_bytes()) && w.buf.len() >= signature);
            let keep = w.buf.len().saturating_sub(signature);
            w.buf.truncate(keep);
        }
        if done || w.buf.len() >= CHUNK_BYTES {
            w.flush(sink)?;
        }
        if done {
            break;
        }
    }
    w.seal(sink)?;
    let zxid = db.last_applied_zxid();
    match db.tree_digest() {
        Some(digest) => {
            w.put_i64(zxid);
            w.put_i32(DIGEST_VERSION);
            w.put_i64(digest);
        }
        // Apache's empty digest: its reader logs that the snapshot has none.
        None => {
            w.put_i64(0);
            w.put_i32(DIGEST_VERSION);
            w.put_i64(0);
        }
    }
    w.seal(sink)?;
    w.put_i64(zxid);
    w.seal(sink)?;
    w.flush(sink)?;
    Ok(w.written)
}

/// The size [`write()`] gives `db`, found by writing it to nowhere.
pub fn size(db: &Database) -> u64 {
    write::<std::convert::Infallible>(db, &mut |_| Ok(())).unwrap_or_else(|never| match never {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use zk_tree::TreeConfig;

    fn tree() -> Database {
        use zk_proto::{perms, Acl, CreateRequest, Id, OpCode, Request, TxnHeader};
        use zk_tree::{AuthIds, RequestCtx};
        let mut db = Database::new(TreeConfig::default());
        let (session, now_ms) = (0x100, 1_700_000_000_000);
        let header = |zxid, txn_type: i32| TxnHeader {
            client_id: session,
            cxid: zxid as i32,
            zxid,
            time: now_ms,
            txn_type,
        };
        let txn = db.prep_create_session(session, 30_000);
        db.apply(&header(1, OpCode::CreateSession.code()), &txn);
        let auth = AuthIds::default();
        for (i, path) in ["/a", "/a/b", "/c"].into_iter().enumerate() {
            let zxid = i as i64 + 2;
            let request = Request::Create(CreateRequest {
                path: path.into(),
                data: Some("v".into()),
                acl: vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }],
                flags: 0,
            });
            let txn =
                db.prep(&RequestCtx { session, cxid: zxid as i32, auth: &auth }, &request, zxid, now_ms);
            db.apply(&header(zxid, zk_tree::txn_type(request.op(), &txn).code()), &txn);
        }
        db
    }

    #[test]
    fn the_file_reads_back_as_apaches() {
        let db = tree();
        let mut file = Vec::new();
        let mut chunks = 0;
        let n = write::<()>(&db, &mut |c| {
            assert!(c.len() <= 2 * CHUNK_BYTES);
            chunks += 1;
            file.extend_from_slice(c);
            Ok(())
        })
        .expect("write");
        assert_eq!(n, file.len() as u64);
        assert_eq!(size(&db), n);
        let mut paths = Vec::new();
        let snap =
            zk_log::apache::read_snapshot_bytes("snapshot.test".into(), Bytes::from(file.clone()), |node| {
                paths.push(node.path)
            })
            .expect("reads as Apache's");
        assert_eq!(paths[0], "/", "pre-order from the root");
        paths.sort();
        let want = ["/", "/a", "/a/b", "/c", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"];
        assert_eq!(paths, want.map(String::from).to_vec());
        assert!(snap.digest.is_none(), "a standalone tree's empty digest");
        // The last processed zxid, then its seal (a long and the string "/"), end the file.
        let seal = 8 + 4 + 1;
        let zxid = i64::from_be_bytes(file[file.len() - seal - 8..file.len() - seal].try_into().unwrap());
        assert_eq!(zxid, db.last_applied_zxid());
        assert_eq!(snap.last_processed_zxid, Some(zxid), "read back as Apache 3.9 reads it");
        let mut damaged = file;
        let at = damaged.len() / 2;
        damaged[at] ^= 0x40;
        assert!(
            zk_log::apache::read_snapshot_bytes("snapshot.bad".into(), Bytes::from(damaged), |_| {}).is_err()
        );
    }
}
