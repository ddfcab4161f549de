//! The three kinds of stream an Apache ZooKeeper snapshot file can hold, and their decoding to
//! the snapshot's jute content, for `zkrs-server import` and `zkrs-cli export --from-snapshot`
//! (zk-server re-exports the module as `zk_server::apache_snap_stream`).
//!
//! Apache 3.6+ writes `snapshot.<hex zxid>` plain, or compressed when the Java system property
//! `zookeeper.snapshot.compression.method` is `gz` or `snappy`, naming the file
//! `snapshot.<hex zxid>.gz` or `.snappy`. Facts this module rests on, from Apache's `SnapStream`
//! (3.8) and snappy-java 1.1.8.3 (the version Debian ships beside Apache 3.8), and checked against
//! files a real Apache 3.8 wrote (`zk-server/tests/apache_import.rs`):
//!
//! - The kind comes from the file name alone: its last dot-separated part, compared ignoring
//!   case, `gz` or `snappy`; anything else (including no suffix) is a plain stream
//!   ([`SnapStreamKind::of_file_name`]).
//! - The Adler32 seals inside the content are computed over the **uncompressed** bytes: Apache
//!   wraps the compressing stream in the checksumming one, so the seals are checked after
//!   decompression, exactly as for a plain file ([`crate::apache::read_snapshot_bytes`]).
//! - gz: one `java.util.zip.GZIPOutputStream` stream (RFC 1952), so the file starts with the gzip
//!   magic `1f 8b` (Apache checks only that before reading) and ends with the CRC32 and length of
//!   the content, which [`gunzip`] checks too.
//! - snappy: snappy-java's `SnappyOutputStream`, not the standard snappy framing format: a
//!   16-byte header (the 8-byte magic [`SNAPPY_MAGIC`], then `int version` and `int compatible
//!   version`, both 1, big-endian; Apache checks only the magic before reading), then blocks of
//!   `int length` (big-endian) followed by that many bytes of one raw snappy block, each block
//!   the compression of at most 32 KiB of content. There is no end marker and no checksum: the
//!   file ends after its last block. A header may appear again where a block length would
//!   (concatenated streams; its first four bytes read as a length equal
//!   [`SNAPPY_MAGIC_HEAD`]).
//!
//! Everything is checked before it is used: a length in the file never sizes an allocation
//! beyond what the bytes present can produce ([`SNAPPY_EXPANSION_MAX`]), and the content as a
//! whole is bounded by the caller's limit. Damage is an [`ApacheError::Format`] naming the file,
//! the offset in the compressed file, and what is wrong; nothing panics.
//!
//! Stricter than Apache on purpose: Apache stops reading at the content's last seal, so it never
//! looks at a gzip trailer or at bytes after the last block; here the whole file must decode (a
//! damaged trailer, stray bytes after the last snappy block, or data after the gzip stream are
//! errors), so a file the import skips is one whose container is damaged, whatever the content
//! says.

use crate::apache::ApacheError;
use bytes::Bytes;
use std::io::{BufRead, Read};

/// Which stream an Apache snapshot file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapStreamKind {
    /// Uncompressed (`snapshot.<zxid>`).
    Plain,
    /// gzip (`snapshot.<zxid>.gz`).
    Gzip,
    /// snappy-java's stream (`snapshot.<zxid>.snappy`).
    Snappy,
}

impl SnapStreamKind {
    /// The kind Apache reads a file of this name as: the last of the name's dot-separated parts,
    /// ignoring case, `gz` or `snappy`; a name with no dot, or any other last part, is plain
    /// (as Apache, which splits the name at dots, dropping trailing empty parts).
    pub fn of_file_name(name: &str) -> SnapStreamKind {
        let trimmed = name.trim_end_matches('.');
        let Some((_, last)) = trimmed.rsplit_once('.') else {
            return SnapStreamKind::Plain;
        };
        if last.eq_ignore_ascii_case("gz") {
            SnapStreamKind::Gzip
        } else if last.eq_ignore_ascii_case("snappy") {
            SnapStreamKind::Snappy
        } else {
            SnapStreamKind::Plain
        }
    }

    /// The name Apache gives the kind in `zookeeper.snapshot.compression.method` (`""` for plain).
    pub fn method_name(self) -> &'static str {
        match self {
            SnapStreamKind::Plain => "",
            SnapStreamKind::Gzip => "gz",
            SnapStreamKind::Snappy => "snappy",
        }
    }
}

/// The default bound on a snapshot's decompressed content for [`snapshot_content`]'s callers:
/// 64 GiB, beyond any tree an Apache server holds in its JVM heap. It stops a decompression
/// bomb from taking all memory; a real snapshot never reaches it.
pub const CONTENT_BYTES_MAX: u64 = 64 << 30;

/// The gzip magic, the first two bytes of a gzip stream (RFC 1952).
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// snappy-java's stream magic: the first 8 bytes of a `SnappyOutputStream`.
pub const SNAPPY_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

/// Bytes of snappy-java's stream header: the magic, `int version`, `int compatible version`.
pub const SNAPPY_HEADER_BYTES: usize = 16;

/// The first four bytes of [`SNAPPY_MAGIC`] read as a big-endian `int`: where a block length
/// has this value, snappy-java's reader takes it as the start of another stream's header.
pub const SNAPPY_MAGIC_HEAD: i32 = i32::from_be_bytes([0x82, b'S', b'N', b'A']);

/// The lowest header version snappy-java's reader accepts.
pub const SNAPPY_VERSION_MIN: i32 = 1;

/// How many content bytes one byte of a raw snappy block can stand for, at most, rounded up:
/// the format's densest element is a 3-byte copy of 64 bytes (64/3 < 22). A block whose header
/// declares more than this many times its own length is damaged, and is refused before its
/// output is allocated.
pub const SNAPPY_EXPANSION_MAX: u64 = 22;

/// The jute content of an Apache snapshot file of `kind` whose bytes are `data`: the bytes
/// themselves for a plain file, decompressed otherwise. `file` names the file in errors;
/// decompressed content longer than `max_bytes` is refused.
///
/// Errors: [`ApacheError::Format`] for a damaged, truncated or oversized stream (see
/// [`gunzip`] and [`unsnappy`]).
pub fn snapshot_content(
    file: &str,
    kind: SnapStreamKind,
    data: Bytes,
    max_bytes: u64,
) -> Result<Bytes, ApacheError> {
    match kind {
        SnapStreamKind::Plain => Ok(data),
        SnapStreamKind::Gzip => gunzip(file, &data, max_bytes).map(Bytes::from),
        SnapStreamKind::Snappy => unsnappy(file, &data, max_bytes).map(Bytes::from),
    }
}

fn format_err(file: &str, offset: usize, reason: String) -> ApacheError {
    ApacheError::Format { file: file.to_string(), offset: offset as u64, reason }
}

fn too_large(file: &str, offset: usize, max_bytes: u64) -> ApacheError {
    format_err(file, offset, format!("decompresses to more than {max_bytes} bytes, the limit for a snapshot"))
}

/// A byte slice read through `BufRead` that knows how much of it the decoder consumed, so an
/// error can name the offset the decoder had reached.
struct Consumed<'a> {
    data: &'a [u8],
    at: usize,
}

impl Read for Consumed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (&self.data[self.at..]).read(buf)?;
        self.at += n;
        Ok(n)
    }
}

impl BufRead for Consumed<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(&self.data[self.at..])
    }

    fn consume(&mut self, amt: usize) {
        self.at = (self.at + amt).min(self.data.len());
    }
}

/// Decompresses a gzip snapshot file's bytes (one gzip member, as `GZIPOutputStream` writes, or
/// several one after another, which Java's reader also takes), checking each member's CRC32 and
/// length.
///
/// Errors: [`ApacheError::Format`] naming `file` and how far the decoder had read, for a file
/// that does not start with [`GZIP_MAGIC`], a damaged or truncated stream, a trailer that does
/// not match the content, bytes after the stream that are not another member, or content longer
/// than `max_bytes`.
pub fn gunzip(file: &str, data: &[u8], max_bytes: u64) -> Result<Vec<u8>, ApacheError> {
    if data.get(..2) != Some(&GZIP_MAGIC[..]) {
        let start: Vec<String> = data.iter().take(2).map(|b| format!("{b:02x}")).collect();
        return Err(format_err(
            file,
            0,
            format!("not a gzip stream: starts with [{}], expected [1f 8b]", start.join(" ")),
        ));
    }
    let mut dec = flate2::bufread::MultiGzDecoder::new(Consumed { data, at: 0 });
    let mut out = Vec::new();
    // One byte over the limit tells a stream at the limit from one beyond it; the Vec grows
    // only as content actually comes out.
    let read = (&mut dec).take(max_bytes.saturating_add(1)).read_to_end(&mut out);
    let at = dec.get_ref().at;
    match read {
        Err(e) => Err(format_err(
            file,
            at,
            format!("gzip stream damaged or truncated after {} bytes of content: {e}", out.len()),
        )),
        Ok(_) if out.len() as u64 > max_bytes => Err(too_large(file, at, max_bytes)),
        Ok(_) => Ok(out),
    }
}

/// Checks a snappy-java stream header at `at`.
fn snappy_header(file: &str, data: &[u8], at: usize) -> Result<(), ApacheError> {
    let head = &data[at..];
    // A short head that starts the magic is a truncated header rather than a missing one.
    let n = head.len().min(SNAPPY_MAGIC.len());
    if head.is_empty() || head[..n] != SNAPPY_MAGIC[..n] {
        return Err(format_err(
            file,
            at,
            "not a snappy-java stream: the magic header (82 'SNAPPY' 00) is missing".into(),
        ));
    }
    let Some(h) = head.get(..SNAPPY_HEADER_BYTES) else {
        return Err(format_err(
            file,
            at,
            format!("snappy-java header truncated: {} of {SNAPPY_HEADER_BYTES} bytes", head.len()),
        ));
    };
    let version = i32::from_be_bytes([h[8], h[9], h[10], h[11]]);
    if version < SNAPPY_VERSION_MIN {
        return Err(format_err(
            file,
            at + 8,
            format!("snappy-java stream version {version}, at least {SNAPPY_VERSION_MIN} is required"),
        ));
    }
    Ok(())
}

/// Decompresses a snappy-java snapshot file's bytes: its header, then every block to the end of
/// the file (a header met where a block length would be starts a concatenated stream).
///
/// Errors: [`ApacheError::Format`] naming `file` and the offset of the damage, for a missing
/// magic or a truncated header, a block length that is not positive, a block that runs past the
/// end of the file, 1 to 3 stray bytes where a block length would be, a raw snappy block that
/// does not decompress (or declares more content than its bytes can hold:
/// [`SNAPPY_EXPANSION_MAX`]), or content longer than `max_bytes`.
pub fn unsnappy(file: &str, data: &[u8], max_bytes: u64) -> Result<Vec<u8>, ApacheError> {
    snappy_header(file, data, 0)?;
    let mut at = SNAPPY_HEADER_BYTES;
    let mut out: Vec<u8> = Vec::new();
    let mut decoder = snap::raw::Decoder::new();
    while at < data.len() {
        let Some(len_bytes) = data[at..].get(..4) else {
            return Err(format_err(
                file,
                at,
                format!("{} stray bytes after the last block (a torn block length)", data.len() - at),
            ));
        };
        let len = i32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        if len == SNAPPY_MAGIC_HEAD {
            snappy_header(file, data, at)?;
            at += SNAPPY_HEADER_BYTES;
            continue;
        }
        if len <= 0 {
            return Err(format_err(file, at, format!("block length {len}, expected a positive length")));
        }
        let body_at = at + 4;
        let len = len as usize;
        let Some(block) = data[body_at..].get(..len) else {
            return Err(format_err(
                file,
                at,
                format!(
                    "block of {len} bytes, but the file ends {} bytes after its length (truncated)",
                    data.len() - body_at
                ),
            ));
        };
        let block_err =
            |what: String| format_err(file, body_at, format!("snappy block of {len} bytes: {what}"));
        let content_len = snap::raw::decompress_len(block).map_err(|e| block_err(e.to_string()))?;
        if content_len as u64 > len as u64 * SNAPPY_EXPANSION_MAX {
            return Err(block_err(format!(
                "declares {content_len} bytes of content, more than {len} compressed bytes can hold"
            )));
        }
        if out.len() as u64 + content_len as u64 > max_bytes {
            return Err(too_large(file, body_at, max_bytes));
        }
        let start = out.len();
        out.resize(start + content_len, 0);
        decoder.decompress(block, &mut out[start..]).map_err(|e| block_err(e.to_string()))?;
        at = body_at + len;
    }
    Ok(out)
}

/// The stream snappy-java's `SnappyOutputStream` writes for `content`, as Apache writes a
/// `.snappy` snapshot: the header (magic, version 1, compatible version 1), then each 32 KiB of
/// content as one raw snappy block after its length. The inverse of [`unsnappy`]; zkrs writes
/// no such file, but its tests and fuzz target build their inputs with it.
pub fn snappy_java_stream(content: &[u8]) -> Vec<u8> {
    let mut out = SNAPPY_MAGIC.to_vec();
    // Version, then compatible version: 1 and 1.
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for block in content.chunks(32 << 10) {
        let z = encoder.compress_vec(block).expect("raw snappy compression of a 32 KiB block");
        let len = i32::try_from(z.len()).expect("a compressed 32 KiB block fits an i32");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&z);
    }
    out
}

#[cfg(test)]
mod tests;
