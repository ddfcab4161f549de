//! The tree digest Apache ZooKeeper 3.6+ keeps and puts on every proposal, so that a learner can
//! tell whether applying a transaction left its tree as the leader expected (digest version 2).
//!
//! A znode's digest is the CRC-32 (IEEE) of its path, then its data, then 60 bytes of its stat
//! big-endian: czxid, mzxid, pzxid, ctime, mtime (8 bytes each), version, cversion, aversion (4
//! each), ephemeralOwner (8). The root's path counts as the empty string, and nodes under
//! `/zookeeper/` count as 0 (`/zookeeper` itself is counted). The tree's digest is the sum of
//! its nodes' digests as 64-bit integers, wrapping.
//!
//! Every change to a node touches its stat, and a change of stat alone (the parent of a create or
//! delete, a setACL) can be applied to a known digest without the path or the data: CRC-32 is
//! affine over GF(2), so for two messages of equal length that differ only in their last 60 bytes,
//! `crc(a) ^ crc(b) = crc(x) ^ crc(0⁶⁰)` where `x` is the XOR of those 60 bytes. See [`restat`].

use crate::node::Node;
use zk_proto::StatPersisted;

/// The digest version zkrs computes (Apache's `DigestCalculator.DIGEST_VERSION`).
pub const DIGEST_VERSION: i32 = 2;

/// Size of the stat fields that enter a digest.
const STAT_BYTES: usize = 60;

/// Whether a node at `path` enters the tree digest: nothing under `/zookeeper/` does.
pub fn counts(path: &[u8]) -> bool {
    !path.starts_with(b"/zookeeper/")
}

fn stat_bytes(s: &StatPersisted) -> [u8; STAT_BYTES] {
    let mut b = [0u8; STAT_BYTES];
    b[0..8].copy_from_slice(&s.czxid.to_be_bytes());
    b[8..16].copy_from_slice(&s.mzxid.to_be_bytes());
    b[16..24].copy_from_slice(&s.pzxid.to_be_bytes());
    b[24..32].copy_from_slice(&s.ctime.to_be_bytes());
    b[32..40].copy_from_slice(&s.mtime.to_be_bytes());
    b[40..44].copy_from_slice(&s.version.to_be_bytes());
    b[44..48].copy_from_slice(&s.cversion.to_be_bytes());
    b[48..52].copy_from_slice(&s.aversion.to_be_bytes());
    b[52..60].copy_from_slice(&s.ephemeral_owner.to_be_bytes());
    b
}

/// The digest of one node (0 for a node under `/zookeeper/`). No data and empty data give the
/// same digest, as in Apache.
pub fn node_digest(path: &[u8], data: Option<&[u8]>, stat: &StatPersisted) -> i64 {
    if !counts(path) {
        return 0;
    }
    let path: &[u8] = if path == b"/" { b"" } else { path };
    let mut h = crc32fast::Hasher::new();
    h.update(path);
    if let Some(d) = data {
        h.update(d);
    }
    h.update(&stat_bytes(stat));
    i64::from(h.finalize())
}

/// A stored node's digest as it stands.
pub(crate) fn of_node(n: &Node) -> i64 {
    node_digest(n.path_bytes(), n.data(), &n.stat_persisted())
}

/// The digest of the node at `path` whose digest was `digest` with stat `old`, once its stat is
/// `new` and its path and data are unchanged: no need to read either again.
pub fn restat(digest: i64, path: &[u8], old: &StatPersisted, new: &StatPersisted) -> i64 {
    if !counts(path) {
        return 0;
    }
    let (a, b) = (stat_bytes(old), stat_bytes(new));
    let mut x = [0u8; STAT_BYTES];
    for (o, (p, q)) in x.iter_mut().zip(a.iter().zip(b.iter())) {
        *o = p ^ q;
    }
    // The final XOR and initial value of CRC-32 cancel between the two terms, leaving the plain
    // polynomial remainder of the difference.
    let delta = crc32fast::hash(&x) ^ crc32fast::hash(&[0u8; STAT_BYTES]);
    i64::from(digest as u32 ^ delta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stat(v: [i64; 9]) -> StatPersisted {
        StatPersisted {
            czxid: v[0],
            mzxid: v[1],
            ctime: v[2],
            mtime: v[3],
            version: v[4] as i32,
            cversion: v[5] as i32,
            aversion: v[6] as i32,
            ephemeral_owner: v[7],
            pzxid: v[8],
        }
    }

    #[test]
    fn known_values() {
        // Printed by java.util.zip.CRC32 fed as DigestCalculator feeds it: the path's bytes, the
        // data, then the stat through a ByteBuffer (czxid 2, mzxid 3, pzxid 4, ctime, mtime,
        // version 1, cversion 2, aversion 3, ephemeralOwner 0x100000000abcd).
        let s = stat([2, 3, 1_700_000_000_000, 1_700_000_000_001, 1, 2, 3, 0x1_0000_0000_abcd, 4]);
        assert_eq!(node_digest(b"/app", Some(b"v1"), &s), 599_227_213);
        // The root counts as "" (an empty path, no data, a zero stat: 68323592 on the JVM).
        let z = StatPersisted::default();
        assert_eq!(node_digest(b"/", Some(b""), &z), 68_323_592);
        // Nothing under /zookeeper/ counts; /zookeeper itself does.
        assert_eq!(node_digest(b"/zookeeper/quota", None, &z), 0);
        assert_ne!(node_digest(b"/zookeeper", None, &z), 0);
        assert_eq!(node_digest(b"/a", None, &s), node_digest(b"/a", Some(b""), &s));
    }

    proptest! {
        #[test]
        fn restat_equals_computing_again(
            path in "/[a-z]{1,12}",
            data in proptest::collection::vec(any::<u8>(), 0..300),
            a in proptest::array::uniform9(any::<i64>()),
            b in proptest::array::uniform9(any::<i64>()),
        ) {
            let (old, new) = (stat(a), stat(b));
            let d = node_digest(path.as_bytes(), Some(&data), &old);
            prop_assert_eq!(
                restat(d, path.as_bytes(), &old, &new),
                node_digest(path.as_bytes(), Some(&data), &new)
            );
        }
    }
}
