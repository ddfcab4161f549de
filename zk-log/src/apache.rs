//! Readers for Apache ZooKeeper's own version-2 files, for importing an Apache data directory.
//!
//! - [`ApacheLog`]: the transactions of one `log.<hex zxid>` file from dataLogDir/version-2,
//!   each checked against its Adler32.
//! - [`read_snapshot`]: one uncompressed `snapshot.<hex zxid>` from dataDir/version-2: sessions,
//!   the ACL cache and every node, with the file's Adler32 seal(s) checked.
//!
//! Layouts (all jute, big-endian), as Apache 3.8 writes them:
//! - log: `FileHeader{int magic "ZKLG", int version 2, long dbid}`, then entries
//!   `long adler32 | int len | byte[len] | byte 'B'`, the checksum over the `len` bytes only. The
//!   bytes are a `TxnHeader`, the txn record for its type, and optionally a `TxnDigest`. A zero
//!   length (preallocated space) or a cut-off entry ends the file, as in Apache.
//! - snapshot: `FileHeader{"ZKSN", 2, dbid}`, `int count` then `count` x `(long session, int
//!   timeout)`, `int count` then `count` x `(long key, vector<ACL>)`, then nodes as
//!   `(string path, buffer data, long aclKey, StatPersisted)` depth first with the root's path
//!   written as the empty string, ended by the path "/". Then the seal: `long adler32` of every
//!   byte before it, and the string "/". 3.6+ may follow it with a digest `(long zxid, int version,
//!   long digest)` (a hex string instead of the long when version < 2) and a second seal over
//!   everything before that one.

use bytes::Bytes;
use std::path::Path;
use zk_proto::{Acl, DecodeError, Jute, OpCode, Reader, StatPersisted, Txn, TxnDigest, TxnHeader};

/// Magic of Apache's log files: "ZKLG".
pub const APACHE_LOG_MAGIC: i32 = i32::from_be_bytes(*b"ZKLG");
/// Magic of Apache's snapshot files: "ZKSN".
pub const APACHE_SNAP_MAGIC: i32 = i32::from_be_bytes(*b"ZKSN");
/// The only file format version Apache has written.
pub const APACHE_VERSION: i32 = 2;

/// Why an Apache file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ApacheError {
    /// Reading the file failed.
    #[error("reading {file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not what the format says.
    #[error("{file} at offset {offset}: {reason}")]
    Format {
        /// The file.
        file: String,
        /// Byte offset where reading failed.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The caller's node callback stopped the reading ([`try_read_snapshot_bytes`]) with this
    /// message: nothing was found wrong with the file.
    #[error("{0}")]
    Stopped(String),
}

/// Adler-32 as java.util.zip.Adler32 computes it.
#[derive(Debug, Clone, Copy)]
pub struct Adler32 {
    a: u32,
    b: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Adler32 { a: 1, b: 0 }
    }
}

impl Adler32 {
    const MOD: u32 = 65521;
    /// Largest run of bytes that cannot overflow `b` before the modulo.
    const RUN: usize = 5552;

    /// Feeds bytes.
    pub fn update(&mut self, data: &[u8]) {
        for chunk in data.chunks(Self::RUN) {
            for &x in chunk {
                self.a += x as u32;
                self.b += self.a;
            }
            self.a %= Self::MOD;
            self.b %= Self::MOD;
        }
    }

    /// The checksum of everything fed so far.
    pub fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }

    /// The checksum of `data`.
    pub fn of(data: &[u8]) -> u32 {
        let mut a = Adler32::default();
        a.update(data);
        a.value()
    }
}

/// The zxid in an Apache file name such as `log.1a00000001` or `snapshot.0` (Apache writes the
/// hex without padding), if `name` has that prefix.
pub fn zxid_from_apache_name(name: &str, prefix: &str) -> Option<i64> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('.')?;
    // Compressed snapshots carry a suffix after the hex.
    let hex = rest.split('.').next()?;
    u64::from_str_radix(hex, 16).ok().and_then(|v| i64::try_from(v).ok())
}

fn read_file(path: &Path) -> Result<Bytes, ApacheError> {
    std::fs::read(path)
        .map(Bytes::from)
        .map_err(|e| ApacheError::Io { file: path.display().to_string(), source: e })
}

struct Cursor {
    file: String,
    total: usize,
    r: Reader,
}

impl Cursor {
    fn new(file: String, data: Bytes) -> Cursor {
        Cursor { file, total: data.len(), r: Reader::new(data) }
    }

    fn offset(&self) -> u64 {
        (self.total - self.r.remaining()) as u64
    }

    fn err(&self, reason: impl Into<String>) -> ApacheError {
        ApacheError::Format { file: self.file.clone(), offset: self.offset(), reason: reason.into() }
    }

    fn read<T: Jute>(&mut self, what: &str) -> Result<T, ApacheError> {
        let at = self.offset();
        T::read(&mut self.r).map_err(|e: DecodeError| ApacheError::Format {
            file: self.file.clone(),
            offset: at,
            reason: format!("{what}: {e}"),
        })
    }

    fn header(&mut self, magic: i32) -> Result<i64, ApacheError> {
        let m: i32 = self.read("file magic")?;
        if m != magic {
            return Err(ApacheError::Format {
                file: self.file.clone(),
                offset: 0,
                reason: format!("magic {m:#x}, expected {magic:#x}"),
            });
        }
        let v: i32 = self.read("file version")?;
        if v != APACHE_VERSION {
            return Err(ApacheError::Format {
                file: self.file.clone(),
                offset: 4,
                reason: format!("format version {v}, only version {APACHE_VERSION} is known"),
            });
        }
        self.read("dbid")
    }
}

/// The transactions of one Apache `log.<zxid>` file, in file order.
pub struct ApacheLog {
    c: Cursor,
    dbid: i64,
    done: bool,
    torn_tail: bool,
}

impl std::fmt::Debug for ApacheLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApacheLog").field("file", &self.c.file).field("offset", &self.c.offset()).finish()
    }
}

impl ApacheLog {
    /// Reads the file at `path` (whole, into memory) and checks its header.
    ///
    /// Errors: [`ApacheError::Io`]; [`ApacheError::Format`] for a wrong magic or version.
    pub fn open(path: impl AsRef<Path>) -> Result<ApacheLog, ApacheError> {
        let path = path.as_ref();
        ApacheLog::from_bytes(path.display().to_string(), read_file(path)?)
    }

    /// As [`Self::open`], from bytes already read; `name` is used in errors.
    pub fn from_bytes(name: String, data: Bytes) -> Result<ApacheLog, ApacheError> {
        let mut c = Cursor::new(name, data);
        let dbid = c.header(APACHE_LOG_MAGIC)?;
        Ok(ApacheLog { c, dbid, done: false, torn_tail: false })
    }

    /// The header's dbid.
    pub fn dbid(&self) -> i64 {
        self.dbid
    }

    /// Whether iteration ended at a cut-off entry (a partial last write) rather than at the zero
    /// length of preallocated space or the end of the file. Apache treats both as the end.
    pub fn ended_torn(&self) -> bool {
        self.torn_tail
    }

    /// The next entry with the tree digest Apache 3.6+ writes after the txn (None in older logs
    /// or with digests disabled); the iterator gives the same entries without it.
    ///
    /// Errors: as the iterator's.
    pub fn next_digested(&mut self) -> Result<Option<(TxnHeader, Txn, Option<TxnDigest>)>, ApacheError> {
        let r = self.next_entry();
        if r.is_err() {
            self.done = true;
        }
        r
    }

    fn next_entry(&mut self) -> Result<Option<(TxnHeader, Txn, Option<TxnDigest>)>, ApacheError> {
        if self.done {
            return Ok(None);
        }
        let rest = self.c.r.remaining();
        if rest == 0 {
            self.done = true;
            return Ok(None);
        }
        if rest < 12 {
            self.done = true;
            self.torn_tail = self.c.r.rest().iter().any(|&b| b != 0);
            return Ok(None);
        }
        let at = self.c.offset();
        let crc: i64 = self.c.read("entry checksum")?;
        let len: i32 = self.c.read("entry length")?;
        if len == 0 {
            self.done = true;
            return Ok(None);
        }
        if len < 0 || len as usize + 1 > self.c.r.remaining() {
            // Apache reads a cut-off entry as the end of the file.
            self.done = true;
            self.torn_tail = true;
            return Ok(None);
        }
        let bytes = self.c.r.bytes(len as usize).map_err(|e| self.c.err(e.to_string()))?;
        let eor = self.c.r.u8().map_err(|e| self.c.err(e.to_string()))?;
        if eor != b'B' {
            self.done = true;
            self.torn_tail = true;
            return Ok(None);
        }
        if Adler32::of(&bytes) as u64 != crc as u64 {
            self.done = true;
            return Err(ApacheError::Format {
                file: self.c.file.clone(),
                offset: at,
                reason: "transaction checksum (Adler32) mismatch".into(),
            });
        }
        let mut r = Reader::new(bytes);
        let fmt = |reason: String| ApacheError::Format { file: self.c.file.clone(), offset: at, reason };
        let hdr = TxnHeader::read(&mut r).map_err(|e| fmt(format!("txn header: {e}")))?;
        let op = OpCode::from_i32(hdr.txn_type)
            .ok_or_else(|| fmt(format!("unknown txn type {}", hdr.txn_type)))?;
        let txn =
            Txn::decode(op, &mut r).map_err(|e| fmt(format!("txn body of zxid {:#x}: {e}", hdr.zxid)))?;
        let digest = crate::format::read_digest_trailer(&mut r)
            .map_err(|e| fmt(format!("txn digest of zxid {:#x}: {e}", hdr.zxid)))?;
        Ok(Some((hdr, txn, digest)))
    }
}

impl Iterator for ApacheLog {
    type Item = Result<(TxnHeader, Txn), ApacheError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_digested().map(|e| e.map(|(h, t, _)| (h, t))).transpose()
    }
}

/// One znode from an Apache snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApacheNode {
    /// Its path; the root is `"/"` (Apache writes it as the empty string).
    pub path: String,
    /// Its data (`None` where Apache wrote a null buffer).
    pub data: Option<Bytes>,
    /// Key into the snapshot's ACL cache (-1: world:anyone with all permissions).
    pub acl_key: i64,
    /// Its persisted stat.
    pub stat: StatPersisted,
}

/// The tree digest Apache 3.6+ appends to a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApacheDigest {
    /// Zxid the digest was taken at.
    pub zxid: i64,
    /// Digest version.
    pub version: i32,
    /// Digest value.
    pub digest: i64,
}

/// Everything in an Apache snapshot except the nodes, which [`read_snapshot`] streams.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApacheSnapshot {
    /// The header's dbid.
    pub dbid: i64,
    /// (session id, timeout ms).
    pub sessions: Vec<(i64, i32)>,
    /// The ACL cache: (key, ACL list).
    pub acls: Vec<(i64, Vec<Acl>)>,
    /// How many nodes were handed to the callback.
    pub nodes: u64,
    /// The digest, when the snapshot has one.
    pub digest: Option<ApacheDigest>,
    /// The zxid the tree had last applied, which Apache 3.9 writes after the digest
    /// (`serializeLastProcessedZxid`, on by default), when the snapshot has it.
    pub last_processed_zxid: Option<i64>,
}

fn check_seal(c: &mut Cursor, data: &Bytes) -> Result<(), ApacheError> {
    let at = c.offset();
    let expect = Adler32::of(&data[..at as usize]);
    let val: i64 = c.read("checksum seal")?;
    let slash: String = c.read("seal path")?;
    if val as u64 != expect as u64 {
        return Err(ApacheError::Format {
            file: c.file.clone(),
            offset: at,
            reason: format!(
                "snapshot checksum (Adler32) mismatch: stored {:#x}, computed {expect:#x}",
                val as u64
            ),
        });
    }
    if slash != "/" {
        return Err(c.err(format!("seal ends with {slash:?}, expected \"/\"")));
    }
    Ok(())
}

/// Reads an uncompressed Apache snapshot at `path`, handing each node to `on_node` in file order
/// (parents before children), and returns the rest.
///
/// Errors: [`ApacheError::Io`]; [`ApacheError::Format`] for a wrong magic or version, a
/// truncated or malformed record, a checksum mismatch, or a compressed (`.gz`, `.snappy`) file.
pub fn read_snapshot(
    path: impl AsRef<Path>,
    on_node: impl FnMut(ApacheNode),
) -> Result<ApacheSnapshot, ApacheError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    if name.ends_with(".gz") || name.ends_with(".snappy") {
        return Err(ApacheError::Format {
            file: name,
            offset: 0,
            reason: "compressed snapshots are not supported".into(),
        });
    }
    read_snapshot_bytes(name, read_file(path)?, on_node)
}

/// As [`read_snapshot`], from bytes already read; `name` is used in errors.
pub fn read_snapshot_bytes(
    name: String,
    data: Bytes,
    mut on_node: impl FnMut(ApacheNode),
) -> Result<ApacheSnapshot, ApacheError> {
    try_read_snapshot_bytes(name, data, |n| {
        on_node(n);
        Ok(())
    })
}

/// As [`read_snapshot_bytes`], with a callback that may stop the reading: its error ends the
/// reading at once (the rest of the file, seals included, is not looked at) and comes back as
/// [`ApacheError::Stopped`].
pub fn try_read_snapshot_bytes(
    name: String,
    data: Bytes,
    mut on_node: impl FnMut(ApacheNode) -> Result<(), String>,
) -> Result<ApacheSnapshot, ApacheError> {
    let mut c = Cursor::new(name, data.clone());
    let mut snap = ApacheSnapshot { dbid: c.header(APACHE_SNAP_MAGIC)?, ..Default::default() };
    let count: i32 = c.read("session count")?;
    if count < 0 || count as usize > c.r.remaining() / 12 {
        return Err(c.err(format!("bad session count {count}")));
    }
    for _ in 0..count {
        let id: i64 = c.read("session id")?;
        let timeout: i32 = c.read("session timeout")?;
        snap.sessions.push((id, timeout));
    }
    let count: i32 = c.read("ACL cache size")?;
    if count < 0 || count as usize > c.r.remaining() / 12 {
        return Err(c.err(format!("bad ACL cache size {count}")));
    }
    for _ in 0..count {
        let key: i64 = c.read("ACL key")?;
        let acls: Vec<Acl> = c.read("ACL list")?;
        snap.acls.push((key, acls));
    }
    loop {
        let path: String = c.read("node path")?;
        if path == "/" {
            break;
        }
        let data: Option<Bytes> = c.read("node data")?;
        let acl_key: i64 = c.read("node ACL key")?;
        let stat: StatPersisted = c.read("node stat")?;
        let path = if path.is_empty() { "/".to_string() } else { path };
        snap.nodes += 1;
        on_node(ApacheNode { path, data, acl_key, stat }).map_err(ApacheError::Stopped)?;
    }
    check_seal(&mut c, &data)?;
    // The digest and its seal are optional (absent before 3.6, or with digests disabled).
    if c.r.remaining() >= 12 {
        let zxid: i64 = c.read("digest zxid")?;
        let version: i32 = c.read("digest version")?;
        let digest = if version < 2 {
            let s: Option<String> = c.read("digest")?;
            match s {
                Some(s) => {
                    u64::from_str_radix(&s, 16).map_err(|_| c.err(format!("bad hex digest {s:?}")))? as i64
                }
                None => 0,
            }
        } else {
            c.read("digest")?
        };
        check_seal(&mut c, &data)?;
        if zxid > 0 {
            snap.digest = Some(ApacheDigest { zxid, version, digest });
        }
        // Apache 3.9's last processed zxid and its seal (3.8 and older end here).
        if c.r.remaining() >= 8 {
            let last: i64 = c.read("last processed zxid")?;
            check_seal(&mut c, &data)?;
            snap.last_processed_zxid = Some(last);
        }
    }
    Ok(snap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::sample_txn;

    #[test]
    fn adler32_matches_known_values() {
        assert_eq!(Adler32::of(b""), 1);
        assert_eq!(Adler32::of(b"Wikipedia"), 0x11E6_0398);
        let big = vec![0xFFu8; 100_000];
        let mut a = Adler32::default();
        a.update(&big[..7]);
        a.update(&big[7..]);
        assert_eq!(a.value(), Adler32::of(&big));
    }

    /// A log in Apache's layout, built here, with `n` sample txns and 16 bytes of preallocation.
    fn apache_log(n: i64) -> Vec<u8> {
        let mut out = Vec::new();
        APACHE_LOG_MAGIC.write(&mut out);
        APACHE_VERSION.write(&mut out);
        0i64.write(&mut out);
        for z in 1..=n {
            let (h, t) = sample_txn(z, 80);
            let mut bytes = Vec::new();
            h.write(&mut bytes);
            t.encode(&mut bytes);
            (Adler32::of(&bytes) as i64).write(&mut out);
            (bytes.len() as i32).write(&mut out);
            out.extend_from_slice(&bytes);
            out.push(b'B');
        }
        out.extend_from_slice(&[0u8; 16]);
        out
    }

    #[test]
    fn log_round_trip_torn_end_and_bad_checksum() {
        let data = apache_log(5);
        let got: Vec<i64> = ApacheLog::from_bytes("t".into(), data.clone().into())
            .expect("open")
            .map(|r| r.expect("txn").0.zxid)
            .collect();
        assert_eq!(got, vec![1, 2, 3, 4, 5]);
        // Cut in the middle of the last entry: four txns, then a torn end (as Apache reads it).
        let mut log = ApacheLog::from_bytes("t".into(), Bytes::copy_from_slice(&data[..data.len() - 40]))
            .expect("open");
        assert_eq!(log.by_ref().count(), 4);
        assert!(log.ended_torn());
        // A flipped byte inside an entry: a checksum error naming the offset of that entry.
        let mut bad = data.clone();
        bad[16 + 12 + 20] ^= 1;
        let first = ApacheLog::from_bytes("t".into(), bad.into()).expect("open").next().expect("an item");
        assert!(matches!(first, Err(ApacheError::Format { offset: 16, .. })), "{first:?}");
        // Wrong magic.
        let mut bad = data;
        bad[0] = b'X';
        assert!(ApacheLog::from_bytes("t".into(), bad.into()).is_err());
    }

    /// A snapshot in Apache's layout: no sessions, no ACL table, the root and `/a`, sealed.
    fn apache_snapshot() -> Vec<u8> {
        let mut out = Vec::new();
        APACHE_SNAP_MAGIC.write(&mut out);
        APACHE_VERSION.write(&mut out);
        (-1i64).write(&mut out);
        0i32.write(&mut out);
        0i32.write(&mut out);
        for path in ["", "/a"] {
            path.to_string().write(&mut out);
            Some(Bytes::from_static(b"d")).write(&mut out);
            (-1i64).write(&mut out);
            StatPersisted::default().write(&mut out);
        }
        "/".to_string().write(&mut out);
        i64::from(Adler32::of(&out)).write(&mut out);
        "/".to_string().write(&mut out);
        out
    }

    #[test]
    fn a_snapshot_read_whole_or_stopped_by_its_callback() {
        let data = Bytes::from(apache_snapshot());
        let mut paths = Vec::new();
        let snap = read_snapshot_bytes("s".into(), data.clone(), |n| paths.push(n.path)).expect("reads");
        assert_eq!((paths, snap.nodes), (vec!["/".to_string(), "/a".to_string()], 2));
        let mut seen = 0;
        let r = try_read_snapshot_bytes("s".into(), data.clone(), |_| {
            seen += 1;
            Err("enough".into())
        });
        assert!(matches!(r, Err(ApacheError::Stopped(ref m)) if m == "enough"), "{r:?}");
        assert_eq!(seen, 1, "nothing is read after the callback stops");
        let mut bad = data.to_vec();
        let at = bad.len() - 10;
        bad[at] ^= 1;
        let r = read_snapshot_bytes("s".into(), Bytes::from(bad), |_| {});
        assert!(matches!(r, Err(ApacheError::Format { .. })), "a damaged seal: {r:?}");
    }

    #[test]
    fn file_names() {
        assert_eq!(zxid_from_apache_name("log.1a", "log"), Some(0x1a));
        assert_eq!(zxid_from_apache_name("snapshot.100000002.snappy", "snapshot"), Some(0x1_0000_0002));
        assert_eq!(zxid_from_apache_name("logx.1", "log"), None);
        assert_eq!(zxid_from_apache_name("log.zz", "log"), None);
    }
}
