//! Snapshots: zkrs's own snapshot content (zk-tree) and file (zk-log), the SNAP stream an Apache
//! leader sends (zk-tree `apache_snap`), Apache's snapshot and log files read for import
//! (zk-log `apache`), and the gz and snappy streams of Apache's compressed snapshots (zk-server
//! `apache_snap_stream`).

use bytes::Bytes;
use zk_log::apache::{read_snapshot_bytes as read_apache_snapshot, ApacheLog};
use zk_log::format::decode_payload;
use zk_log::snapshot::{read_snapshot_bytes, SnapshotWriter};
use zk_log::FaultStorage;
use zk_proto::{Acl, Jute, StatPersisted};
use zk_tree::apache_snap::ApacheSnapLoader;
use zk_tree::{load_snapshot, Database, SnapshotLoader, TreeConfig};

/// Where to split an input fed in two pieces: its first byte, scaled to the rest.
fn split(data: &[u8]) -> Option<(usize, &[u8])> {
    let (&at, rest) = data.split_first()?;
    Some((rest.len() * at as usize / 255, rest))
}

/// zkrs snapshot content, as a snapshot file's chunks hand it to the loader. Fed whole or in two
/// pieces, it loads the same way (the same error, or databases that serialize alike); a loaded
/// database serializes to content that loads to a database serializing the same again.
pub fn content(data: &[u8]) {
    let Some((at, data)) = split(data) else {
        return;
    };
    let whole = load_snapshot(TreeConfig::default(), data);
    let mut loader = SnapshotLoader::new(TreeConfig::default());
    let pieces =
        loader.feed(&data[..at]).and_then(|()| loader.feed(&data[at..])).and_then(|()| loader.finish());
    match (&whole, &pieces) {
        (Ok(a), Ok(b)) => assert_eq!(a.snapshot_to_vec(), b.snapshot_to_vec(), "split feeding loads alike"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "split feeding fails alike"),
        _ => panic!("whole: {:?}, in two pieces: {:?}", whole.is_ok(), pieces.is_ok()),
    }
    let Ok(db) = whole else {
        return;
    };
    let (zxid, bytes) = db.snapshot_to_vec();
    let again = load_snapshot(TreeConfig::default(), &bytes).expect("a database's own snapshot loads");
    assert_eq!(again.snapshot_to_vec(), (zxid, bytes), "a reloaded snapshot serializes the same");
}

/// A zkrs snapshot file (header, checksummed chunks, trailer; format 1, or format 2 with each
/// chunk a zstd frame). When it reads, the content
/// handed out matches the counts reported, and written again as a snapshot of the same zxid it
/// reads back to the same content.
pub fn file(data: &[u8]) {
    // The reader checks the file name against the header's start zxid (bytes 16..24); name the
    // file after it so the checks past the name are reached.
    let start = data.get(16..24).map_or(0, |b| i64::from_le_bytes(b.try_into().expect("8 bytes")));
    let name = zk_log::snapshot::snapshot_name(start);
    let mut content = Vec::new();
    let Ok(info) = read_snapshot_bytes(&name, data, &mut |c| {
        content.extend_from_slice(c);
        Ok(())
    }) else {
        return;
    };
    assert_eq!(info.content_bytes, content.len() as u64);
    assert_eq!(info.file_bytes, data.len() as u64, "the whole file is read");
    let storage = FaultStorage::new(0);
    // Written again in the format it was read in (compressed or not).
    let compression = match info.codec {
        zk_log::snapshot::Codec::None => zk_log::snapshot::Compression::None,
        zk_log::snapshot::Codec::Zstd => zk_log::snapshot::Compression::Zstd { level: 1 },
    };
    let mut w = SnapshotWriter::create_with(&storage, info.start_zxid, compression).expect("create");
    w.write(&content).expect("write");
    let written = w.finish().expect("finish");
    let mut back = Vec::new();
    zk_log::snapshot::read_snapshot(&storage, &written.name, &mut |c| {
        back.extend_from_slice(c);
        Ok(())
    })
    .expect("a written snapshot reads");
    assert_eq!(back, content);
    assert_eq!(written.codec, info.codec);
}

/// The SNAP stream following a SNAP packet (the leader's DataTree serialization), fed in two
/// pieces as packets bring it. Whole or split, it loads alike; a loaded database's own SNAP
/// stream loads to the same database (nodes, ACL lists, stats, sessions: equal trees may number
/// their ACL lists differently, as the module docs allow, so neither the stream's bytes nor
/// zkrs's snapshot content need be equal); the consumed counts never exceed what was fed.
pub fn apache_snap(data: &[u8]) {
    let Some((at, data)) = split(data) else {
        return;
    };
    let whole = load_apache(&[data]);
    let pieces = load_apache(&[&data[..at], &data[at..]]);
    match (&whole, &pieces) {
        (Some(a), Some(b)) => {
            assert_eq!(a.snapshot_to_vec(), b.snapshot_to_vec(), "split feeding loads alike")
        }
        (None, None) => {}
        _ => panic!("whole: {:?}, in two pieces: {:?}", whole.is_some(), pieces.is_some()),
    }
    let Some(db) = whole else {
        return;
    };
    let again = load_apache(&[&db.apache_snap_to_vec()]).expect("a database's own SNAP stream loads");
    assert_eq!(tree_view(&again), tree_view(&db), "a reloaded SNAP stream is the same database");
}

/// A database as a learner can observe it: the nodes by path (data, ACL list, stat), the
/// sessions, the last zxid; not the numbering of shared ACL lists.
type TreeView = (i64, Vec<(String, Option<Vec<u8>>, Vec<Acl>, StatPersisted)>, Vec<(i64, i32)>);

fn tree_view(db: &Database) -> TreeView {
    let mut nodes: Vec<_> = db
        .tree()
        .iter()
        .map(|(path, n)| (path.to_string(), n.data().map(<[u8]>::to_vec), n.acl.to_vec(), n.stat_persisted()))
        .collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut sessions: Vec<_> = db.sessions().iter().collect();
    sessions.sort_unstable();
    (db.last_applied_zxid(), nodes, sessions)
}

/// Feeds the pieces; the database if it loaded.
fn load_apache(pieces: &[&[u8]]) -> Option<Database> {
    let mut loader = ApacheSnapLoader::new(TreeConfig::default(), 1 << 32);
    for piece in pieces {
        let mut piece: &[u8] = piece;
        while !piece.is_empty() {
            let fed = loader.feed(piece).ok()?;
            assert!(fed.consumed <= piece.len());
            if fed.done {
                break;
            }
            assert_eq!(fed.consumed, piece.len(), "a loader not done takes the whole piece");
            piece = &piece[fed.consumed..];
        }
    }
    loader.finish().ok()
}

/// Apache's snapshot and log files, as `zkrs-server import` reads them; the first byte picks
/// which. Snapshot: the node count reported is the count handed out. Log:
/// every transaction read re-encodes to a payload that decodes to the same transaction.
pub fn apache_files(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let rest = Bytes::copy_from_slice(rest);
    if which & 1 == 0 {
        let mut nodes = 0u64;
        if let Ok(snap) = read_apache_snapshot("snapshot.1".into(), rest, |n| {
            let _ = n;
            nodes += 1;
        }) {
            assert_eq!(snap.nodes, nodes);
        }
        return;
    }
    let Ok(log) = ApacheLog::from_bytes("log.1".into(), rest) else {
        return;
    };
    for entry in log {
        let Ok((hdr, txn)) = entry else {
            break;
        };
        let mut out = Vec::new();
        hdr.write(&mut out);
        txn.encode(&mut out);
        let (hdr2, txn2) = decode_payload(Bytes::from(out)).expect("a re-encoded transaction decodes");
        assert_eq!((hdr2, txn2), (hdr, txn));
    }
}

/// The limit [`apache_snap_stream`] runs the decoders under: small, so that inputs that
/// decompress far reach it.
const STREAM_CONTENT_MAX: u64 = 1 << 20;

/// A decoder of one compressed stream kind: file name, bytes, content limit.
type StreamDecoder = fn(&str, &[u8], u64) -> Result<Vec<u8>, zk_log::apache::ApacheError>;
/// Compresses content again into the same kind of stream.
type StreamEncoder = fn(&[u8]) -> Vec<u8>;

fn gzip_again(content: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(content).expect("gzip to memory");
    e.finish().expect("gzip to memory")
}

/// The streams of Apache's compressed snapshot files, as `zkrs-server import` decompresses them;
/// the first byte picks gz (even) or snappy-java's stream (odd). What decodes is at most the
/// limit; compressed again (gzip, or snappy-java's framing around raw snappy blocks of 32 KiB)
/// it decodes to the same bytes; an error names the file.
pub fn apache_snap_stream(data: &[u8]) {
    use zk_server::apache_snap_stream::{gunzip, unsnappy};
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let (name, decode, again): (&str, StreamDecoder, StreamEncoder) = if which & 1 == 0 {
        ("snapshot.1.gz", gunzip, gzip_again)
    } else {
        ("snapshot.1.snappy", unsnappy, zk_server::apache_snap_stream::snappy_java_stream)
    };
    match decode(name, rest, STREAM_CONTENT_MAX) {
        Ok(content) => {
            assert!(content.len() as u64 <= STREAM_CONTENT_MAX);
            let round = decode(name, &again(&content), STREAM_CONTENT_MAX);
            assert_eq!(round.expect("compressed again, it decodes"), content);
        }
        Err(e) => assert!(e.to_string().starts_with(name), "{e}"),
    }
}
