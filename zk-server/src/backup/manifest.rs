//! The archive's manifest: which files an archive holds, with what size, checksum and zxid
//! range. It is the only file a restore trusts to say what is there: a file in the archive that
//! the manifest does not name (an upload a crash interrupted) is ignored.
//!
//! It is JSON (docs/guide's "Backup and restore" chapter shows an example), written whole on
//! every change and installed atomically by the target (a rename, or one object PUT), always
//! after the files it adds. Zxids and times are JSON integers (i64); checksums are the CRC-32
//! (IEEE) of the whole file, as 8 hex digits.

use super::segment::SegmentSummary;
use super::BackupError;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// The manifest's key (file name) at the archive's root.
pub const MANIFEST_KEY: &str = "manifest.json";
/// The value of the manifest's `format` field.
pub const FORMAT_NAME: &str = "zkrs-backup";
/// The manifest version this build writes (and the newest it reads). Version 2 added each
/// segment's `prev_zxid`; a version 1 manifest reads with it unknown. Version 3 added each
/// segment's `last_payload_crc` and the archive's `rewritten_after` (older versions read with
/// them unknown and unset), which a version 2 reader must not ignore. Version 4 changed what
/// an unknown `prev_zxid` means: before it, a segment whose first zxid is the next one of the
/// same epoch after the segment before was taken as continuing it; from version 4 an unknown
/// `prev_zxid` proves nothing (the archiver records every continuity it can prove), and an
/// older manifest's unknown ones are read as that inference said ([`Manifest::from_json`]).
/// Version 5 added each segment's `prev_inferred`, so that such a filled-in predecessor stays
/// told from a recorded one once the manifest is written again.
/// A field added to a later
/// manifest needs a new version: a version 3 reader checks the manifest's CRC over the fields it
/// knows, so an unknown field makes it fail as damaged rather than be skipped.
pub const MANIFEST_VERSION: u64 = 5;
/// The manifest's own checksum field (from version 3): the CRC-32 (IEEE), as 8 hex digits, of
/// the manifest without it, serialized compactly with its fields in the order written. It is
/// written last; a manifest of version 3 or later without it, or whose content does not match
/// it, is refused as damaged.
pub const MANIFEST_CRC_FIELD: &str = "manifest_crc32";
/// The folder (key prefix) archived log segments go under.
pub const LOG_PREFIX: &str = "log/";
/// The folder (key prefix) archived snapshots go under.
pub const SNAP_PREFIX: &str = "snap/";
/// The most files a manifest may list, segments and snapshots together. With
/// [`ENTRY_BYTES_MAX`] it bounds the manifest's size ([`MANIFEST_BYTES_MAX`]), and so what reading
/// one allocates.
pub const FILES_MAX: usize = 1 << 18;
/// The most bytes one file's entry takes in the manifest as written (every field at its
/// widest, pretty-printed, is under 500).
pub const ENTRY_BYTES_MAX: u64 = 512;
/// The largest manifest read or written: a manifest file longer than this is refused before
/// any of it is parsed. The archiver refuses to write one that would not fit.
pub const MANIFEST_BYTES_MAX: u64 = FILES_MAX as u64 * ENTRY_BYTES_MAX + 4096;

/// An archived log segment (closed: it never changes after it is archived).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Its name, as in the server's log directory (`log.<first zxid in 16 hex digits>`).
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// CRC-32 of the whole file.
    pub crc32: u32,
    /// Its records' zxid range, count and times (the leader's clock when it proposed them),
    /// and how many carry a tree digest (an ensemble's do; a standalone server's do not).
    pub summary: SegmentSummary,
    /// The zxid of the transaction right before its first, as the server's log held it when
    /// the segment was archived: 0 when its first is the server's first transaction, None when
    /// unknown (the server had purged or reset the log before it: a gap). The
    /// archived log is whole from one segment to the next only when the next one's
    /// `prev_zxid` is the last zxid of the one before ([`LogFile::continues`]).
    pub prev_zxid: Option<i64>,
    /// The payload CRC of its last record ([`super::segment::SegmentRecord::payload_crc`]), so
    /// that an archiver started again tells the transaction the archive ends with from another
    /// one under the same zxid in the server's log. None when unknown (an older manifest).
    pub last_payload_crc: Option<u32>,
    /// Its `prev_zxid` was not recorded by the archiver but inferred, when the manifest was read
    /// as one of version 3 or older (those took an unknown predecessor to be the zxid before the
    /// first one, in the same epoch): the archive cannot tell a log reset below it and purged up
    /// to there. A restore that chains across it says so. Written only when set, with
    /// `prev_zxid` written as unknown (it is inferred again when read).
    pub prev_inferred: bool,
}

impl LogFile {
    /// Whether this segment's first transaction comes right after the transaction `after` in
    /// the server's history: only when its `prev_zxid` says so. An unknown `prev_zxid` proves
    /// nothing, not even for a first zxid that is the next one of `after`'s epoch: the server's
    /// log may have been reset below `after` and the new history's records up to there purged
    /// before the archiver read them, so the zxids after the gap are another history's.
    pub fn continues(&self, after: i64) -> bool {
        self.prev_zxid == Some(after)
    }
}

/// An archived snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapFile {
    /// Its name, as in the server's snapshot directory (`snapshot.<start zxid in 16 hex digits>`).
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// CRC-32 of the whole file.
    pub crc32: u32,
    /// Every transaction through this zxid is in it.
    pub start_zxid: i64,
    /// The zxid the server had applied when it finished writing it: replayed through this zxid,
    /// the snapshot is exact. None when it recorded none (imported, or an old content version).
    pub end_zxid: Option<i64>,
    /// The tree digest at `end_zxid`, if the server kept one (an ensemble member does).
    pub tree_digest: Option<i64>,
    /// Node records in it.
    pub nodes: u64,
    /// Archived from an ensemble member's directories. A member also writes the snapshot a
    /// leader sends it (SNAP), which the leader read from its tree while writes went on: fuzzy,
    /// yet recording its own zxid as its end, with the digest of the tree it holds. So a
    /// member's snapshot whose end is its start is exact only once shown to be (see the
    /// restore). A version 2 manifest reads it as whether the archive holds any tree digest.
    pub member: bool,
}

impl SnapFile {
    /// The zxid from which replaying the log gives an exact tree: its end zxid. None when it
    /// recorded none: then nothing says which transactions after its start zxid it already
    /// holds (a fuzzy snapshot holds some), so it is no base for a restore.
    pub fn exact_from(&self) -> Option<i64> {
        self.end_zxid
    }
}

/// What an archive holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// Bumped on every write.
    pub generation: u64,
    /// The archive's log starts at the server's first transaction (the oldest segment was
    /// archived while the server's log had never been purged or reset), so a restore may
    /// replay from an empty tree without a snapshot.
    pub log_from_start: bool,
    /// Archived log segments, in zxid order.
    pub logs: Vec<LogFile>,
    /// Archived snapshots, in zxid order.
    pub snapshots: Vec<SnapFile>,
    /// Set when the archiver found the server's log cut below the archive's newest zxid: the
    /// transactions archived after this zxid are not in the server's history (they were never
    /// committed), so a restore refuses points after it, and no backup adds to the archive.
    pub rewritten_after: Option<i64>,
    /// The restore (its marker's identity, [`super::restore::RestoreMarker::id`]) of the data
    /// directory this archive goes on from: the archiver found the directory restored to a
    /// point at or after everything the archive held, so the server's new history continues
    /// the archive's. A directory restored below the archive's newest zxid is refused instead.
    /// Written only when set (older readers ignore it).
    pub after_restore: Option<String>,
}

fn bad(key: &str, what: impl std::fmt::Display) -> BackupError {
    BackupError::Damaged { key: key.to_string(), why: what.to_string() }
}

/// A manifest as its JSON reads (`format` and `version` are [`RawHead`]'s), each list at most [`FILES_MAX`] files (a longer one is
/// refused before it is all read). Typed, so that what a manifest takes in memory is about its
/// size (a generic JSON value would take many times that for a manifest of small values).
/// Fields this build does not know are skipped while parsing, but from version 3 the manifest's
/// checksum ([`MANIFEST_CRC_FIELD`]) is computed over the fields this build reads, so a version 3
/// manifest holding an unknown field fails it as damaged: only a version 1 or 2 manifest (no
/// checksum) reads with unknown fields skipped. A field added later needs a version bump.
#[derive(Deserialize)]
struct RawManifest {
    generation: u64,
    log_from_start: bool,
    #[serde(default)]
    rewritten_after: Option<i64>,
    #[serde(default)]
    after_restore: Option<String>,
    logs: Bounded<RawLog>,
    snapshots: Bounded<RawSnap>,
    #[serde(default, rename = "manifest_crc32")]
    crc: Option<String>,
}

/// Only `format` and `version`, read first, so that another format or a newer version is
/// named as such rather than by a field it lacks.
#[derive(Deserialize)]
struct RawHead {
    format: String,
    version: u64,
}

#[derive(Deserialize)]
#[serde(expecting = "a segment's entry (an object)")]
struct RawLog {
    name: String,
    bytes: u64,
    #[serde(deserialize_with = "hex32")]
    crc32: u32,
    first_zxid: i64,
    last_zxid: i64,
    records: u64,
    first_time_ms: i64,
    last_time_ms: i64,
    max_time_ms: i64,
    digests: u64,
    #[serde(default)]
    prev_zxid: Option<i64>,
    #[serde(default, deserialize_with = "opt_hex32")]
    last_payload_crc: Option<u32>,
    #[serde(default)]
    prev_inferred: bool,
}

#[derive(Deserialize)]
#[serde(expecting = "a snapshot's entry (an object)")]
struct RawSnap {
    name: String,
    bytes: u64,
    #[serde(deserialize_with = "hex32")]
    crc32: u32,
    start_zxid: i64,
    #[serde(default)]
    end_zxid: Option<i64>,
    #[serde(default)]
    tree_digest: Option<i64>,
    nodes: u64,
    #[serde(default)]
    member: Option<bool>,
}

/// A list of at most [`FILES_MAX`] items.
struct Bounded<T>(Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Bounded<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Items<T> {
            type Value = Bounded<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "a list of at most {FILES_MAX} files")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(item) = seq.next_element()? {
                    if v.len() == FILES_MAX {
                        return Err(serde::de::Error::custom(format_args!(
                            "a list of more than {FILES_MAX} files"
                        )));
                    }
                    v.push(item);
                }
                Ok(Bounded(v))
            }
        }
        d.deserialize_seq(Items(std::marker::PhantomData))
    }
}

/// 8 hex digits, as a CRC-32 is written.
fn parse_hex32(s: &str) -> Option<u32> {
    (s.len() == 8 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| u32::from_str_radix(s, 16).ok())?
}

fn hex32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let s = String::deserialize(d)?;
    parse_hex32(&s).ok_or_else(|| serde::de::Error::custom(format_args!("`{s}` is not 8 hex digits")))
}

fn opt_hex32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) => parse_hex32(&s)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format_args!("`{s}` is not 8 hex digits"))),
    }
}

/// The CRC-32 of a manifest's JSON without its checksum field, serialized compactly.
fn body_crc(v: &Value) -> u32 {
    let mut h = crc32fast::Hasher::new();
    // Writing into a hasher cannot fail.
    let _ = serde_json::to_writer(HashWriter(&mut h), v);
    h.finalize()
}

/// Feeds what is written to a CRC-32.
struct HashWriter<'a>(&'a mut crc32fast::Hasher);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.update(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The error for a manifest of `bytes` bytes, over [`MANIFEST_BYTES_MAX`].
pub fn too_big(bytes: u64) -> BackupError {
    bad(
        MANIFEST_KEY,
        format!("{bytes} bytes, more than a manifest may have ({MANIFEST_BYTES_MAX}): not read"),
    )
}

impl Manifest {
    /// The manifest as JSON bytes, pretty-printed (an operator reads it).
    pub fn to_json(&self) -> Vec<u8> {
        let mut v = self.body(MANIFEST_VERSION);
        let crc = body_crc(&v);
        if let Value::Object(root) = &mut v {
            root.insert(MANIFEST_CRC_FIELD.to_string(), Value::String(format!("{crc:08x}")));
        }
        let mut out = serde_json::to_vec_pretty(&v).expect("a JSON value serializes");
        out.push(b'\n');
        out
    }

    /// The manifest's JSON without its checksum, as a manifest of `version` writes it: its
    /// fields in the order written, which the checksum covers.
    fn body(&self, version: u64) -> Value {
        let logs: Vec<Value> = self
            .logs
            .iter()
            .map(|l| {
                let mut v = json!({
                    "name": l.name, "bytes": l.bytes, "crc32": format!("{:08x}", l.crc32),
                    "first_zxid": l.summary.first_zxid, "last_zxid": l.summary.last_zxid, "records": l.summary.records,
                    "first_time_ms": l.summary.first_time_ms, "last_time_ms": l.summary.last_time_ms,
                    "max_time_ms": l.summary.max_time_ms, "digests": l.summary.digests,
                    "prev_zxid": l.prev_zxid.filter(|_| !l.prev_inferred),
                    "last_payload_crc": l.last_payload_crc.map(|c| format!("{c:08x}")),
                });
                if let (true, Value::Object(o)) = (l.prev_inferred, &mut v) {
                    o.insert("prev_inferred".into(), true.into());
                }
                v
            })
            .collect();
        let snaps: Vec<Value> = self
            .snapshots
            .iter()
            .map(|s| {
                json!({
                    "name": s.name, "bytes": s.bytes, "crc32": format!("{:08x}", s.crc32),
                    "start_zxid": s.start_zxid, "end_zxid": s.end_zxid, "tree_digest": s.tree_digest,
                    "nodes": s.nodes, "member": s.member,
                })
            })
            .collect();
        let mut root = Map::new();
        root.insert("format".into(), FORMAT_NAME.into());
        root.insert("version".into(), version.into());
        root.insert("generation".into(), self.generation.into());
        root.insert("log_from_start".into(), self.log_from_start.into());
        root.insert("rewritten_after".into(), self.rewritten_after.into());
        if let Some(r) = &self.after_restore {
            root.insert("after_restore".into(), r.clone().into());
        }
        root.insert("logs".into(), logs.into());
        root.insert("snapshots".into(), snaps.into());
        Value::Object(root)
    }

    /// Reads a manifest, checking every field and that the lists are in zxid order without
    /// overlaps.
    ///
    /// Errors: [`BackupError::Damaged`] naming the manifest and what is wrong (not JSON, another
    /// format, a newer version, a field missing or of the wrong type, files out of order).
    pub fn from_json(bytes: &[u8]) -> Result<Manifest, BackupError> {
        if bytes.len() as u64 > MANIFEST_BYTES_MAX {
            return Err(too_big(bytes.len() as u64));
        }
        let not_json = |e: serde_json::Error| bad(MANIFEST_KEY, format!("not JSON: {e}"));
        let damaged = |e: serde_json::Error| {
            if e.is_syntax() || e.is_eof() {
                not_json(e)
            } else {
                bad(MANIFEST_KEY, e)
            }
        };
        let head: RawHead = serde_json::from_slice(bytes).map_err(damaged)?;
        if head.format != FORMAT_NAME {
            return Err(bad(MANIFEST_KEY, format!("format is `{}`, not `{FORMAT_NAME}`", head.format)));
        }
        let version = head.version;
        if version > MANIFEST_VERSION {
            return Err(bad(
                MANIFEST_KEY,
                format!("manifest version {version} is newer than this zkrs reads ({MANIFEST_VERSION})"),
            ));
        }
        let raw: RawManifest = serde_json::from_slice(bytes).map_err(damaged)?;
        let any_digests = raw.logs.0.iter().any(|l| l.digests > 0);
        let mut m = Manifest {
            generation: raw.generation,
            log_from_start: raw.log_from_start,
            rewritten_after: raw.rewritten_after,
            after_restore: raw.after_restore,
            logs: raw
                .logs
                .0
                .into_iter()
                .map(|l| LogFile {
                    name: l.name,
                    bytes: l.bytes,
                    crc32: l.crc32,
                    summary: SegmentSummary {
                        first_zxid: l.first_zxid,
                        last_zxid: l.last_zxid,
                        records: l.records,
                        first_time_ms: l.first_time_ms,
                        last_time_ms: l.last_time_ms,
                        max_time_ms: l.max_time_ms,
                        digests: l.digests,
                    },
                    prev_zxid: l.prev_zxid,
                    last_payload_crc: l.last_payload_crc,
                    prev_inferred: l.prev_inferred,
                })
                .collect(),
            snapshots: raw
                .snapshots
                .0
                .into_iter()
                .map(|s| SnapFile {
                    member: s.member.unwrap_or(any_digests || s.tree_digest.is_some()),
                    name: s.name,
                    bytes: s.bytes,
                    crc32: s.crc32,
                    start_zxid: s.start_zxid,
                    end_zxid: s.end_zxid,
                    tree_digest: s.tree_digest,
                    nodes: s.nodes,
                })
                .collect(),
        };
        m.check_order()?;
        // Last, so that a field that does not parse is named as such. The checksum is of the
        // manifest as this build writes it: one written otherwise (fields reordered, added or
        // left out, numbers or digits spelt another way) does not match.
        match raw.crc {
            None if version >= 3 => {
                return Err(bad(MANIFEST_KEY, format!("field `{MANIFEST_CRC_FIELD}` missing")));
            }
            None => {}
            Some(c) => {
                let want = parse_hex32(&c);
                let got = body_crc(&m.body(version));
                if want != Some(got) {
                    return Err(bad(
                        MANIFEST_KEY,
                        format!(
                            "its content has CRC-32 {got:08x}, not the {c} it records: damaged or edited"
                        ),
                    ));
                }
            }
        }
        // Before version 4 an unknown prev_zxid was taken to continue the zxid before the
        // segment's first when both are of one epoch: keep reading older archives so, marked as
        // inferred; a later manifest keeps the mark (with the zxid left out: it is not recorded).
        for l in m.logs.iter_mut().filter(|l| l.prev_zxid.is_none() && (version < 4 || l.prev_inferred)) {
            let first = l.summary.first_zxid;
            let before = first.wrapping_sub(1);
            l.prev_inferred = before >> 32 == first >> 32;
            if l.prev_inferred {
                l.prev_zxid = Some(before);
            }
        }
        Ok(m)
    }

    /// Names are the server's own (so they say the zxid they start at), segments do not overlap,
    /// and both lists are in zxid order.
    fn check_order(&self) -> Result<(), BackupError> {
        for (i, l) in self.logs.iter().enumerate() {
            if zk_log::format::parse_segment_name(&l.name) != Some(l.summary.first_zxid)
                || l.summary.last_zxid < l.summary.first_zxid
            {
                return Err(bad(
                    MANIFEST_KEY,
                    format!("logs[{i}] ({}): name and zxid range disagree", l.name),
                ));
            }
            if let Some(prev) = i.checked_sub(1).map(|p| &self.logs[p]) {
                if l.summary.first_zxid <= prev.summary.last_zxid {
                    return Err(bad(MANIFEST_KEY, format!("logs[{i}] ({}) overlaps {}", l.name, prev.name)));
                }
            }
        }
        for (i, s) in self.snapshots.iter().enumerate() {
            if zk_log::snapshot::parse_snapshot_name(&s.name) != Some(s.start_zxid)
                || s.end_zxid.is_some_and(|e| e < s.start_zxid)
            {
                return Err(bad(
                    MANIFEST_KEY,
                    format!("snapshots[{i}] ({}): name and zxids disagree", s.name),
                ));
            }
            if i > 0 && self.snapshots[i - 1].start_zxid >= s.start_zxid {
                return Err(bad(MANIFEST_KEY, format!("snapshots[{i}] ({}) is out of order", s.name)));
            }
        }
        Ok(())
    }

    /// The manifest as JSON, checked to be within the bounds a reader accepts
    /// ([`FILES_MAX`], [`MANIFEST_BYTES_MAX`]).
    ///
    /// Errors: [`BackupError::Refused`] when it is too big: the archive is full, and a new one
    /// (a new target) must be started.
    pub fn to_json_bounded(&self) -> Result<Vec<u8>, BackupError> {
        let files = self.logs.len() + self.snapshots.len();
        let full = |what: String| {
            BackupError::Refused(format!(
                "the archive is full: its manifest would {what}, more than a manifest may ({FILES_MAX} files, \
                 {MANIFEST_BYTES_MAX} bytes); start a new archive (another --to)"
            ))
        };
        if files > FILES_MAX {
            return Err(full(format!("list {files} files")));
        }
        let json = self.to_json();
        if json.len() as u64 > MANIFEST_BYTES_MAX {
            return Err(full(format!("take {} bytes", json.len())));
        }
        Ok(json)
    }

    /// The newest zxid the archived log holds (None: no segment archived).
    pub fn last_log_zxid(&self) -> Option<i64> {
        self.logs.last().map(|l| l.summary.last_zxid)
    }

    /// The newest zxid the archive holds anything of: its log's newest, or a snapshot's start
    /// or end zxid past it.
    pub fn newest_zxid(&self) -> Option<i64> {
        let snaps = self.snapshots.iter().map(|s| s.end_zxid.unwrap_or(s.start_zxid).max(s.start_zxid));
        self.last_log_zxid().into_iter().chain(snaps).max()
    }

    /// Adds a segment, keeping the list in order.
    pub fn add_log(&mut self, l: LogFile) {
        let at = self.logs.partition_point(|x| x.summary.first_zxid < l.summary.first_zxid);
        self.logs.insert(at, l);
    }

    /// Adds a snapshot, keeping the list in order.
    pub fn add_snapshot(&mut self, s: SnapFile) {
        let at = self.snapshots.partition_point(|x| x.start_zxid < s.start_zxid);
        self.snapshots.insert(at, s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let mut m = Manifest {
            generation: 3,
            log_from_start: true,
            rewritten_after: Some(0x70),
            ..Manifest::default()
        };
        m.add_log(LogFile {
            name: "log.0000000000000065".into(),
            bytes: 4000,
            crc32: 0xdead_beef,
            summary: SegmentSummary {
                first_zxid: 0x65,
                last_zxid: 0x90,
                records: 44,
                first_time_ms: 1_700_000_000_100,
                last_time_ms: 1_700_000_000_900,
                max_time_ms: 1_700_000_000_900,
                digests: 0,
            },
            prev_zxid: Some(0x64),
            prev_inferred: false,
            last_payload_crc: Some(0x1234_abcd),
        });
        m.add_log(LogFile {
            name: "log.0000000000000001".into(),
            bytes: 9000,
            crc32: 7,
            summary: SegmentSummary {
                first_zxid: 1,
                last_zxid: 0x64,
                records: 100,
                first_time_ms: 1_700_000_000_000,
                last_time_ms: 1_700_000_000_050,
                max_time_ms: 1_700_000_000_050,
                digests: 100,
            },
            prev_zxid: Some(0),
            last_payload_crc: None,
            prev_inferred: false,
        });
        m.add_snapshot(SnapFile {
            name: "snapshot.0000000000000064".into(),
            bytes: 500,
            crc32: 1,
            start_zxid: 0x64,
            end_zxid: Some(0x66),
            tree_digest: None,
            nodes: 12,
            member: true,
        });
        m
    }

    #[test]
    fn round_trips_in_order() {
        let m = sample();
        assert_eq!(m.logs[0].summary.first_zxid, 1);
        let back = Manifest::from_json(&m.to_json()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.last_log_zxid(), Some(0x90));
    }

    /// A segment continues another only by the zxid the server's log held before it: with
    /// that unknown (a gap the archiver saw), not even the next zxid of the same epoch does.
    /// An older manifest's unknown ones read as the same-epoch inference those versions made.
    #[test]
    fn segments_continue_by_the_zxid_before_them() {
        let mut l = sample().logs[1].clone();
        assert!(l.continues(0x64) && !l.continues(0x63));
        l.prev_zxid = None;
        assert!(!l.continues(0x64) && !l.continues(0x63), "an unknown predecessor is a gap");
        l.summary.first_zxid = 2 << 32 | 1;
        assert!(!l.continues(1 << 32 | 0x90), "the end of epoch 1 may be missing");
        l.prev_zxid = Some(1 << 32 | 0x90);
        assert!(l.continues(1 << 32 | 0x90));

        let mut m = sample();
        m.logs[1].prev_zxid = None;
        m.logs.push(LogFile {
            name: zk_log::format::segment_name(2 << 32 | 1),
            summary: SegmentSummary { first_zxid: 2 << 32 | 1, last_zxid: 2 << 32 | 5, ..m.logs[1].summary },
            prev_zxid: None,
            ..m.logs[1].clone()
        });
        let written = |version: u64| {
            let mut v = m.body(version);
            let crc = body_crc(&v);
            v.as_object_mut().unwrap().insert(MANIFEST_CRC_FIELD.into(), format!("{crc:08x}").into());
            Manifest::from_json(&serde_json::to_vec(&v).unwrap()).unwrap()
        };
        assert_eq!(Manifest::from_json(&m.to_json()).unwrap(), m, "an unknown predecessor stays unknown");
        assert_eq!(written(4), m, "in a version 4 manifest too");
        let old = written(3);
        assert!(old.logs[1].continues(0x64), "a version 3 manifest's same-epoch inference is kept");
        assert!(old.logs[1].prev_inferred, "and marked as inferred");
        assert!(!old.logs[2].continues(1 << 32 | 0x90), "no inference across epochs");
        assert!(!old.logs[0].prev_inferred, "a recorded one is not");
        // Written again (as a backup of the old archive does), the mark stays, the zxid is not
        // written as recorded.
        let json = String::from_utf8(old.to_json()).unwrap();
        assert!(
            json.contains(
                "\"prev_zxid\": null,\n      \"last_payload_crc\": \"1234abcd\",\n      \"prev_inferred\": true"
            ),
            "{json}"
        );
        assert_eq!(Manifest::from_json(json.as_bytes()).unwrap(), old);
    }

    /// A manifest over the bound is refused before it is parsed, with a message saying so;
    /// an entry at its widest fits the room the bound allows each.
    #[test]
    fn size_is_bounded_before_parsing() {
        let e = Manifest::from_json(&vec![b' '; MANIFEST_BYTES_MAX as usize + 1]).unwrap_err();
        assert!(e.to_string().contains("more than a manifest may have"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join(MANIFEST_KEY)).unwrap();
        f.set_len(MANIFEST_BYTES_MAX + 10).unwrap();
        let e = crate::backup::target::ArchiveTarget::read_manifest(&crate::backup::target::DirTarget::new(
            dir.path().to_path_buf(),
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("{} bytes, more than a manifest may have", MANIFEST_BYTES_MAX + 10)),
            "{e}"
        );
        let wide = LogFile {
            name: zk_log::format::segment_name(i64::MAX),
            bytes: u64::MAX,
            crc32: u32::MAX,
            summary: SegmentSummary {
                first_zxid: i64::MIN,
                last_zxid: i64::MIN,
                records: u64::MAX,
                first_time_ms: i64::MIN,
                last_time_ms: i64::MIN,
                max_time_ms: i64::MIN,
                digests: u64::MAX,
            },
            prev_zxid: Some(i64::MIN),
            prev_inferred: true,
            last_payload_crc: Some(u32::MAX),
        };
        let one = Manifest { logs: vec![wide], ..Manifest::default() }.to_json().len();
        let none = Manifest::default().to_json().len();
        assert!((one - none) as u64 <= ENTRY_BYTES_MAX, "{}", one - none);
        let full = Manifest { logs: vec![sample().logs[0].clone(); FILES_MAX + 1], ..Manifest::default() };
        let e = full.to_json_bounded().unwrap_err();
        assert!(e.to_string().contains("the archive is full"), "{e}");
    }

    /// The manifest carries its own CRC-32: a changed value (one that still parses) is refused,
    /// and so is a version 3 manifest without the field; a version 2 one has none and reads.
    #[test]
    fn the_manifest_checks_its_own_crc() {
        let text = String::from_utf8(sample().to_json()).unwrap();
        assert!(text.trim_end().ends_with(&format!("\"{MANIFEST_CRC_FIELD}\": \"{:08x}\"\n}}", {
            let mut v: Value = serde_json::from_str(&text).unwrap();
            v.as_object_mut().unwrap().shift_remove(MANIFEST_CRC_FIELD);
            body_crc(&v)
        })));
        let e =
            Manifest::from_json(text.replace("\"records\": 44,", "\"records\": 45,").as_bytes()).unwrap_err();
        assert!(e.to_string().contains("damaged or edited"), "{e}");
        let mut v: Value = serde_json::from_str(&text).unwrap();
        v.as_object_mut().unwrap().shift_remove(MANIFEST_CRC_FIELD);
        let e = Manifest::from_json(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(e.to_string().contains("`manifest_crc32` missing"), "{e}");
        v["version"] = 2.into();
        let back = Manifest::from_json(&serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(back.logs, sample().logs);
    }

    /// The restore an archive goes on from is written only when set, and read back.
    #[test]
    fn after_restore_round_trips_and_is_left_out_when_unset() {
        let mut m = sample();
        assert!(!String::from_utf8(m.to_json()).unwrap().contains("after_restore"));
        m.after_restore = Some("0x4@1700000000000".into());
        assert_eq!(Manifest::from_json(&m.to_json()).unwrap(), m);
    }

    /// What a manifest takes in memory is about its size: unknown content is skipped, not
    /// kept (nor covered by the checksum, which is of what this build reads), a list holding
    /// anything but entries is refused at its first other item, and a list longer than
    /// [`FILES_MAX`] is refused as it is read.
    #[test]
    fn a_hostile_manifest_is_not_held_as_generic_json() {
        let text = String::from_utf8(sample().to_json()).unwrap();
        let zeros = vec!["0"; 1 << 20].join(",");
        let padded = text.replacen('{', &format!("{{\"x\": [{zeros}],"), 1);
        assert_eq!(Manifest::from_json(padded.as_bytes()).unwrap(), sample());
        let e = Manifest::from_json(text.replace("\"logs\": [", &format!("\"logs\": [{zeros},")).as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("invalid type: integer `0`, expected a segment's entry"), "{e}");
        let snap = r#"{"name":"","bytes":0,"crc32":"00000000","start_zxid":0,"nodes":0}"#;
        let many = vec![snap; FILES_MAX + 1].join(",");
        let e = Manifest::from_json(
            text.replace("\"snapshots\": [", &format!("\"snapshots\": [{many},")).as_bytes(),
        )
        .unwrap_err();
        assert!(e.to_string().contains(&format!("a list of more than {FILES_MAX} files")), "{e}");
    }

    #[test]
    fn damage_names_the_field() {
        let text = String::from_utf8(sample().to_json()).unwrap();
        let e = Manifest::from_json(text.replace("\"crc32\": \"deadbeef\"", "\"crc32\": 5").as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("invalid type: integer `5`, expected a string"), "{e}");
        let e = Manifest::from_json(text.replace("\"records\": 44,", "").as_bytes()).unwrap_err();
        assert!(e.to_string().contains("missing field `records`"), "{e}");
        let e = Manifest::from_json(
            text.replace("\"crc32\": \"deadbeef\"", "\"crc32\": \"deadbeeg\"").as_bytes(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("`deadbeeg` is not 8 hex digits"), "{e}");
        let e = Manifest::from_json(b"{\"format\": \"zkrs-backup\", \"version\": 9}").unwrap_err();
        assert!(e.to_string().contains("newer"), "{e}");
        let e = Manifest::from_json(&sample().to_json()[..50]).unwrap_err();
        assert!(e.to_string().starts_with("manifest.json: not JSON"), "{e}");
        let mut m = sample();
        m.logs[1].summary.first_zxid = 0x64;
        m.logs[1].name = "log.0000000000000064".into();
        let e = Manifest::from_json(&m.to_json()).unwrap_err();
        assert!(e.to_string().contains("overlaps"), "{e}");
    }
}
