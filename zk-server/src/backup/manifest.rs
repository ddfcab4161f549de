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
use serde_json::{json, Map, Value};

/// The manifest's key (file name) at the archive's root.
pub const MANIFEST_KEY: &str = "manifest.json";
/// The value of the manifest's `format` field.
pub const FORMAT_NAME: &str = "zkrs-backup";
/// The manifest version this build writes (and the newest it reads). Version 2 added each
/// segment's `prev_zxid`; a version 1 manifest reads with it unknown. Version 3 added each
/// segment's `last_payload_crc` and the archive's `rewritten_after` (older versions read with
/// them unknown and unset), which a version 2 reader must not ignore.
pub const MANIFEST_VERSION: u64 = 3;
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
    /// unknown (the server had purged or reset the log before it; a version 1 manifest). The
    /// archived log is whole from one segment to the next only when the next one's
    /// `prev_zxid` is the last zxid of the one before ([`LogFile::continues`]).
    pub prev_zxid: Option<i64>,
    /// The payload CRC of its last record ([`super::segment::SegmentRecord::payload_crc`]), so
    /// that an archiver started again tells the transaction the archive ends with from another
    /// one under the same zxid in the server's log. None when unknown (an older manifest).
    pub last_payload_crc: Option<u32>,
}

impl LogFile {
    /// Whether this segment's first transaction comes right after the transaction `after` in
    /// the server's history: its `prev_zxid` says so, or, with `prev_zxid` unknown, its first
    /// zxid is the next one of the same epoch (a leader numbers an epoch's transactions one
    /// by one, so nothing can lie between). Zxids of different epochs never prove it: the end
    /// of an epoch may be missing.
    pub fn continues(&self, after: i64) -> bool {
        match self.prev_zxid {
            Some(p) => p == after,
            None => {
                let first = self.summary.first_zxid;
                first == after.wrapping_add(1) && first >> 32 == after >> 32
            }
        }
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
}

fn bad(key: &str, what: impl std::fmt::Display) -> BackupError {
    BackupError::Damaged { key: key.to_string(), why: what.to_string() }
}

fn field<'a>(o: &'a Map<String, Value>, at: &str, name: &str) -> Result<&'a Value, BackupError> {
    o.get(name).ok_or_else(|| bad(MANIFEST_KEY, format!("{at}: field `{name}` missing")))
}

fn int(o: &Map<String, Value>, at: &str, name: &str) -> Result<i64, BackupError> {
    field(o, at, name)?
        .as_i64()
        .ok_or_else(|| bad(MANIFEST_KEY, format!("{at}: field `{name}` is not an integer")))
}

fn uint(o: &Map<String, Value>, at: &str, name: &str) -> Result<u64, BackupError> {
    field(o, at, name)?
        .as_u64()
        .ok_or_else(|| bad(MANIFEST_KEY, format!("{at}: field `{name}` is not a non-negative integer")))
}

fn opt_int(o: &Map<String, Value>, at: &str, name: &str) -> Result<Option<i64>, BackupError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad(MANIFEST_KEY, format!("{at}: field `{name}` is not an integer"))),
    }
}

fn text<'a>(o: &'a Map<String, Value>, at: &str, name: &str) -> Result<&'a str, BackupError> {
    field(o, at, name)?
        .as_str()
        .ok_or_else(|| bad(MANIFEST_KEY, format!("{at}: field `{name}` is not a string")))
}

fn crc(o: &Map<String, Value>, at: &str) -> Result<u32, BackupError> {
    hex32(o, at, "crc32")
}

fn hex32(o: &Map<String, Value>, at: &str, name: &str) -> Result<u32, BackupError> {
    let s = text(o, at, name)?;
    let not = || bad(MANIFEST_KEY, format!("{at}: {name} `{s}` is not 8 hex digits"));
    if s.len() != 8 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(not());
    }
    u32::from_str_radix(s, 16).map_err(|_| not())
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

fn objects<'a>(root: &'a Map<String, Value>, name: &str) -> Result<Vec<&'a Map<String, Value>>, BackupError> {
    let list = field(root, "manifest", name)?
        .as_array()
        .ok_or_else(|| bad(MANIFEST_KEY, format!("`{name}` is not a list")))?;
    if list.len() > FILES_MAX {
        return Err(bad(MANIFEST_KEY, format!("`{name}` lists {} files, more than {FILES_MAX}", list.len())));
    }
    list.iter()
        .enumerate()
        .map(|(i, v)| v.as_object().ok_or_else(|| bad(MANIFEST_KEY, format!("{name}[{i}] is not an object"))))
        .collect()
}

impl Manifest {
    /// The manifest as JSON bytes, pretty-printed (an operator reads it).
    pub fn to_json(&self) -> Vec<u8> {
        let logs: Vec<Value> = self
            .logs
            .iter()
            .map(|l| {
                json!({
                    "name": l.name, "bytes": l.bytes, "crc32": format!("{:08x}", l.crc32),
                    "first_zxid": l.summary.first_zxid, "last_zxid": l.summary.last_zxid, "records": l.summary.records,
                    "first_time_ms": l.summary.first_time_ms, "last_time_ms": l.summary.last_time_ms,
                    "max_time_ms": l.summary.max_time_ms, "digests": l.summary.digests, "prev_zxid": l.prev_zxid,
                    "last_payload_crc": l.last_payload_crc.map(|c| format!("{c:08x}")),
                })
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
        let mut v = json!({
            "format": FORMAT_NAME,
            "version": MANIFEST_VERSION,
            "generation": self.generation,
            "log_from_start": self.log_from_start,
            "rewritten_after": self.rewritten_after,
            "logs": logs,
            "snapshots": snaps,
        });
        let crc = body_crc(&v);
        if let Value::Object(root) = &mut v {
            root.insert(MANIFEST_CRC_FIELD.to_string(), Value::String(format!("{crc:08x}")));
        }
        let mut out = serde_json::to_vec_pretty(&v).expect("a JSON value serializes");
        out.push(b'\n');
        out
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
        let mut v: Value =
            serde_json::from_slice(bytes).map_err(|e| bad(MANIFEST_KEY, format!("not JSON: {e}")))?;
        let stored = match &mut v {
            Value::Object(root) => root.shift_remove(MANIFEST_CRC_FIELD),
            _ => None,
        };
        let root = v.as_object().ok_or_else(|| bad(MANIFEST_KEY, "not a JSON object"))?;
        let format = text(root, "manifest", "format")?;
        if format != FORMAT_NAME {
            return Err(bad(MANIFEST_KEY, format!("format is `{format}`, not `{FORMAT_NAME}`")));
        }
        let version = uint(root, "manifest", "version")?;
        if version > MANIFEST_VERSION {
            return Err(bad(
                MANIFEST_KEY,
                format!("manifest version {version} is newer than this zkrs reads ({MANIFEST_VERSION})"),
            ));
        }
        let mut m = Manifest {
            generation: uint(root, "manifest", "generation")?,
            log_from_start: field(root, "manifest", "log_from_start")?
                .as_bool()
                .ok_or_else(|| bad(MANIFEST_KEY, "`log_from_start` is not true or false"))?,
            rewritten_after: opt_int(root, "manifest", "rewritten_after")?,
            ..Manifest::default()
        };
        for (i, o) in objects(root, "logs")?.into_iter().enumerate() {
            let at = format!("logs[{i}]");
            m.logs.push(LogFile {
                name: text(o, &at, "name")?.to_string(),
                bytes: uint(o, &at, "bytes")?,
                crc32: crc(o, &at)?,
                summary: SegmentSummary {
                    first_zxid: int(o, &at, "first_zxid")?,
                    last_zxid: int(o, &at, "last_zxid")?,
                    records: uint(o, &at, "records")?,
                    first_time_ms: int(o, &at, "first_time_ms")?,
                    last_time_ms: int(o, &at, "last_time_ms")?,
                    max_time_ms: int(o, &at, "max_time_ms")?,
                    digests: uint(o, &at, "digests")?,
                },
                prev_zxid: opt_int(o, &at, "prev_zxid")?,
                last_payload_crc: match o.get("last_payload_crc") {
                    None | Some(Value::Null) => None,
                    Some(_) => Some(hex32(o, &at, "last_payload_crc")?),
                },
            });
        }
        let any_digests = m.logs.iter().any(|l| l.summary.digests > 0);
        for (i, o) in objects(root, "snapshots")?.into_iter().enumerate() {
            let at = format!("snapshots[{i}]");
            let tree_digest = opt_int(o, &at, "tree_digest")?;
            let member = match o.get("member") {
                None => any_digests || tree_digest.is_some(),
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| bad(MANIFEST_KEY, format!("{at}: field `member` is not true or false")))?,
            };
            m.snapshots.push(SnapFile {
                name: text(o, &at, "name")?.to_string(),
                bytes: uint(o, &at, "bytes")?,
                crc32: crc(o, &at)?,
                start_zxid: int(o, &at, "start_zxid")?,
                end_zxid: opt_int(o, &at, "end_zxid")?,
                tree_digest,
                nodes: uint(o, &at, "nodes")?,
                member,
            });
        }
        m.check_order()?;
        // Last, so that a field that does not parse is named as such.
        match stored {
            None if version >= 3 => {
                return Err(bad(MANIFEST_KEY, format!("field `{MANIFEST_CRC_FIELD}` missing")));
            }
            None => {}
            Some(c) => {
                let want = c.as_str().filter(|c| c.len() == 8).and_then(|c| u32::from_str_radix(c, 16).ok());
                let got = body_crc(&v);
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

    /// A segment continues another by the zxid the server's log held before it; with that
    /// unknown, only the next zxid of the same epoch does.
    #[test]
    fn segments_continue_by_the_zxid_before_them() {
        let mut l = sample().logs[1].clone();
        assert!(l.continues(0x64) && !l.continues(0x63));
        l.prev_zxid = None;
        assert!(l.continues(0x64) && !l.continues(0x63));
        l.summary.first_zxid = 2 << 32 | 1;
        assert!(!l.continues(1 << 32 | 0x90), "the end of epoch 1 may be missing");
        l.prev_zxid = Some(1 << 32 | 0x90);
        assert!(l.continues(1 << 32 | 0x90));
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

    #[test]
    fn damage_names_the_field() {
        let text = String::from_utf8(sample().to_json()).unwrap();
        let e = Manifest::from_json(text.replace("\"crc32\": \"deadbeef\"", "\"crc32\": 5").as_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("logs[1]: field `crc32` is not a string"), "{e}");
        let e = Manifest::from_json(text.replace("\"records\": 44,", "").as_bytes()).unwrap_err();
        assert!(e.to_string().contains("logs[1]: field `records` missing"), "{e}");
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
