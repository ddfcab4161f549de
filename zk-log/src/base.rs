//! The log's base marker (`log.base`): the zxid above which the log holds every transaction this
//! server has, and, while a reset is being applied, the segments the reset removes.
//!
//! A log that has only ever been appended to holds everything from its creation on, so its
//! base is 0 and no marker is needed. Three things move the base, and each writes the marker
//! before it touches a segment:
//! - a reset (Zab SNAP: the state up to zxid Z is now in a snapshot) sets it to Z and names the
//!   segments to remove, so that once the marker is durable the reset is decided: a crash before
//!   the segments are gone is finished by the next open;
//! - a truncation that removes every record is a reset to the truncation point;
//! - a purge that removes the oldest segment sets it to the first zxid kept minus one.
//!
//! Layout (little-endian): `"ZKRSBASE"` · u32 version (1) · u32 name count · u64 base zxid ·
//! count × (u16 length · name bytes) · u32 CRC-32 of everything before it. docs/log-format.md
//! has the protocol and the crash cases.

use crate::error::LogError;
use crate::storage::{read_small_file, replace_file, Storage};

/// Name of the base marker in the log directory.
pub const BASE_FILE: &str = "log.base";
const BASE_MAGIC: [u8; 8] = *b"ZKRSBASE";
const BASE_VERSION: u32 = 1;
/// A marker names at most this many segments (a log of more segments than this cannot be reset
/// in one marker; it is far beyond any real log: 64 MiB segments would make 64 PiB).
const DOOMED_MAX: u32 = 1 << 20;
/// Bytes a marker may have at most: header, names of up to 255 bytes each, checksum.
const BASE_BYTES_MAX: u64 = 24 + DOOMED_MAX as u64 * 257 + 4;

/// The content of the base marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseMarker {
    /// Every transaction above this zxid that this server has is in the log (or was purged
    /// after a snapshot covered it, which moves the marker).
    pub base: i64,
    /// Segments a reset decided to remove and that may still exist; empty once it finished.
    pub doomed: Vec<String>,
}

impl BaseMarker {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(28 + self.doomed.iter().map(|n| n.len() + 2).sum::<usize>());
        b.extend_from_slice(&BASE_MAGIC);
        b.extend_from_slice(&BASE_VERSION.to_le_bytes());
        b.extend_from_slice(&(self.doomed.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.base as u64).to_le_bytes());
        for n in &self.doomed {
            b.extend_from_slice(&(n.len() as u16).to_le_bytes());
            b.extend_from_slice(n.as_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8], shown: &str) -> Result<BaseMarker, LogError> {
        let bad = |offset: usize, reason: String| LogError::Corrupt {
            file: shown.to_string(),
            offset: offset as u64,
            reason,
        };
        if b.len() < 28 {
            return Err(bad(0, format!("{} bytes, shorter than a base marker", b.len())));
        }
        if b[0..8] != BASE_MAGIC {
            return Err(bad(0, "bad magic".into()));
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        if version > BASE_VERSION {
            return Err(LogError::UnsupportedVersion {
                file: shown.to_string(),
                version,
                supported: BASE_VERSION,
            });
        }
        let body = b.len() - 4;
        let crc = u32::from_le_bytes(b[body..].try_into().expect("4 bytes"));
        if crc != crc32fast::hash(&b[..body]) {
            return Err(bad(body, "checksum mismatch".into()));
        }
        let count = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
        if count > DOOMED_MAX {
            return Err(bad(12, format!("names {count} segments, more than {DOOMED_MAX}")));
        }
        let base = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        let base = i64::try_from(base).map_err(|_| bad(16, format!("base zxid {base:#x} out of range")))?;
        let mut off = 24;
        let mut doomed = Vec::with_capacity(count as usize);
        for _ in 0..count {
            if off + 2 > body {
                return Err(bad(off, "segment name cut short".into()));
            }
            let len = u16::from_le_bytes(b[off..off + 2].try_into().expect("2 bytes")) as usize;
            off += 2;
            if off + len > body {
                return Err(bad(off, "segment name cut short".into()));
            }
            let name = std::str::from_utf8(&b[off..off + len])
                .ok()
                .filter(|n| crate::format::parse_segment_name(n).is_some())
                .ok_or_else(|| bad(off, "not a segment name".into()))?;
            doomed.push(name.to_string());
            off += len;
        }
        if off != body {
            return Err(bad(off, "bytes after the last name".into()));
        }
        Ok(BaseMarker { base, doomed })
    }
}

/// Reads the marker; `None` when there is none.
///
/// Errors: [`LogError::Corrupt`] naming the file and offset for a marker that does not check
/// out (it is always replaced whole, so a damaged one is media damage, not a torn write);
/// [`LogError::UnsupportedVersion`]; [`LogError::Io`].
pub(crate) fn read_marker<S: Storage>(storage: &S) -> Result<Option<BaseMarker>, LogError> {
    let shown = storage.display_name(BASE_FILE);
    match read_small_file(storage, BASE_FILE, BASE_BYTES_MAX) {
        Ok(None) => Ok(None),
        Ok(Some(b)) => BaseMarker::decode(&b, &shown).map(Some),
        Err(e) => Err(LogError::io("read", shown, e)),
    }
}

/// Replaces the marker durably (temp file, sync, rename, directory sync).
///
/// Errors: [`LogError::Io`]; the old marker then stays in place.
pub(crate) fn write_marker<S: Storage>(storage: &S, marker: &BaseMarker) -> Result<(), LogError> {
    debug_assert!(marker.doomed.len() <= DOOMED_MAX as usize);
    replace_file(storage, BASE_FILE, &marker.encode())
        .map_err(|e| LogError::io("write base marker", storage.display_name(BASE_FILE), e))
}

/// The base zxid the marker in the log directory `dir` records, read without opening the log
/// (no lock is taken, so a tool may read it beside a running server: the marker is always
/// replaced whole). `None` when there is none. The log's base is this zxid only while its first
/// record follows it; otherwise it is the zxid before its first record
/// ([`crate::SegmentLog::base_zxid`]).
///
/// Errors: [`LogError::Corrupt`]; [`LogError::UnsupportedVersion`]; [`LogError::Io`].
pub fn read_base_zxid(dir: &std::path::Path) -> Result<Option<i64>, LogError> {
    use std::io::Read;
    let p = dir.join(BASE_FILE);
    let shown = p.display().to_string();
    let f = match std::fs::File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io("read", shown, e)),
    };
    let mut b = Vec::new();
    f.take(BASE_BYTES_MAX).read_to_end(&mut b).map_err(|e| LogError::io("read", shown.clone(), e))?;
    BaseMarker::decode(&b, &shown).map(|m| Some(m.base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_base_zxid_reads_a_marker_in_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_base_zxid(dir.path()).expect("none"), None);
        let m = BaseMarker { base: 0x3_0000_0009, doomed: vec!["log.0000000000000001".into()] };
        std::fs::write(dir.path().join(BASE_FILE), m.encode()).expect("write");
        assert_eq!(read_base_zxid(dir.path()).expect("reads"), Some(0x3_0000_0009));
        std::fs::write(dir.path().join(BASE_FILE), &m.encode()[..20]).expect("write");
        assert!(read_base_zxid(dir.path()).is_err());
    }

    #[test]
    fn round_trip_and_damage() {
        let m = BaseMarker {
            base: 0x5_0000_0007,
            doomed: vec!["log.0000000000000001".into(), "log.0000000400000003".into()],
        };
        let b = m.encode();
        assert_eq!(BaseMarker::decode(&b, "f").expect("decodes"), m);
        // Every single-bit flip is caught (by the checksum, or by a field check before it).
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x08;
            assert!(BaseMarker::decode(&d, "f").is_err(), "flip at byte {i} went unnoticed");
        }
        for cut in 0..b.len() {
            assert!(BaseMarker::decode(&b[..cut], "f").is_err(), "cut at {cut} went unnoticed");
        }
        let empty = BaseMarker { base: 0, doomed: Vec::new() };
        assert_eq!(BaseMarker::decode(&empty.encode(), "f").expect("decodes"), empty);
    }
}
