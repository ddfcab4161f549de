//! Where an archive lives: a directory (here) or object storage ([`super::object`]) behind
//! [`ArchiveTarget`], the few operations backup and restore need. A target installs a file so
//! that it is either whole or absent under its key, and replaces the manifest atomically; the
//! archiver puts files before the manifest that names them, so a crash at any point leaves a
//! manifest naming only whole files.

use super::manifest::{Manifest, MANIFEST_BYTES_MAX, MANIFEST_KEY};
use super::{io_err, BackupError};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Bytes a copy moves at a time.
pub const COPY_BUF_BYTES: usize = 1 << 20;

/// Copies `r` into `w` in pieces of [`COPY_BUF_BYTES`], returning the bytes copied and their
/// CRC-32.
pub fn copy_with_crc(r: &mut impl Read, w: &mut impl Write) -> std::io::Result<(u64, u32)> {
    let mut buf = vec![0u8; COPY_BUF_BYTES];
    let mut hasher = crc32fast::Hasher::new();
    let mut n = 0u64;
    loop {
        let got = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(g) => g,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..got]);
        w.write_all(&buf[..got])?;
        n += got as u64;
    }
    Ok((n, hasher.finalize()))
}

/// A reader that counts and checksums what passes through it.
#[derive(Debug)]
pub struct CrcReader<R> {
    inner: R,
    hasher: crc32fast::Hasher,
    bytes: u64,
}

impl<R: Read> CrcReader<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        CrcReader { inner, hasher: crc32fast::Hasher::new(), bytes: 0 }
    }

    /// Reads what is left (so the checksum covers the whole source), then returns the bytes
    /// read and their CRC-32.
    pub fn finish(mut self) -> std::io::Result<(u64, u32)> {
        std::io::copy(&mut self, &mut std::io::sink())?;
        Ok((self.bytes, self.hasher.finalize()))
    }
}

impl<R: Read> Read for CrcReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// Syncs a directory, so that names created or renamed in it survive a power loss.
pub fn sync_dir(dir: &Path) -> Result<(), BackupError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))
}

/// What backup and restore do with an archive.
pub trait ArchiveTarget {
    /// How the target is shown (its path or URL).
    fn describe(&self) -> String;

    /// How `key` is shown in messages: the file's path or the object's URL.
    fn show(&self, key: &str) -> String;

    /// A local directory the archiver stages copies in, on the same file system as the
    /// archive when the archive is a directory (so installing a file is a rename).
    fn staging_dir(&self) -> PathBuf;

    /// The manifest, or None for an archive not yet written to.
    ///
    /// Errors: it cannot be read, or is damaged ([`Manifest::from_json`]).
    fn read_manifest(&self) -> Result<Option<Manifest>, BackupError>;

    /// Replaces the manifest, atomically: a reader sees the old one or the new one whole.
    ///
    /// Errors: it cannot be written.
    fn write_manifest(&self, m: &Manifest) -> Result<(), BackupError>;

    /// Installs the complete local file `local` (in [`Self::staging_dir`]) under `key`, durably,
    /// so that the key holds the whole file or nothing. Consumes the local file.
    ///
    /// Errors: it cannot be moved or uploaded.
    fn put_file(&self, key: &str, local: &Path) -> Result<(), BackupError>;

    /// Copies `key` to the local path `local`, checking that it has `bytes` bytes and CRC-32
    /// `crc32`, as the manifest says.
    ///
    /// Errors: [`BackupError::Damaged`] naming the key when it is missing, of another size or
    /// another checksum; [`BackupError::Io`] when the local file cannot be written.
    fn fetch(&self, key: &str, bytes: u64, crc32: u32, local: &Path) -> Result<(), BackupError>;
}

/// Opens the target an operator named: an object-store URL ([`super::cloud`]: `s3://`, `gs://`,
/// `az://` and Azure's other forms) is that store ([`super::object`]), anything without `://` a
/// directory path.
///
/// Errors: [`BackupError::Target`] for another URL scheme, an object-store URL without a bucket
/// or container, or a store configuration that does not build.
pub fn open(target: &str) -> Result<Box<dyn ArchiveTarget>, BackupError> {
    if let Some(parsed) = super::cloud::StoreUrl::parse(target) {
        return Ok(Box::new(super::object::ObjectTarget::open(target, parsed?)?));
    }
    if let Some((scheme, _)) = target.split_once("://") {
        return Err(BackupError::Target {
            target: target.to_string(),
            why: format!(
                "`{scheme}://` archives are not supported by this build; give a directory path, \
                 s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or \
                 https://account.blob.core.windows.net/container/prefix (docs/guide: Backup and restore)"
            ),
        });
    }
    if target.is_empty() {
        return Err(BackupError::Target { target: String::new(), why: "empty path".into() });
    }
    Ok(Box::new(DirTarget::new(PathBuf::from(target))))
}

/// An archive in a local (or mounted) directory: `manifest.json`, `log/`, `snap/`, and
/// `.staging/` for copies being made.
#[derive(Debug, Clone)]
pub struct DirTarget {
    root: PathBuf,
}

impl DirTarget {
    /// The archive at `root` (created by the first backup).
    pub fn new(root: PathBuf) -> Self {
        DirTarget { root }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }
}

impl ArchiveTarget for DirTarget {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn show(&self, key: &str) -> String {
        self.path(key).display().to_string()
    }

    fn staging_dir(&self) -> PathBuf {
        self.root.join(".staging")
    }

    fn read_manifest(&self) -> Result<Option<Manifest>, BackupError> {
        let p = self.path(MANIFEST_KEY);
        let f = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&p)(e)),
        };
        // At most one byte past the limit is read: enough to tell a manifest that is too big.
        let mut bytes = Vec::new();
        f.take(MANIFEST_BYTES_MAX + 1).read_to_end(&mut bytes).map_err(io_err(&p))?;
        let shown = p.display().to_string();
        if bytes.len() as u64 > MANIFEST_BYTES_MAX {
            let size = std::fs::metadata(&p).map_or(bytes.len() as u64, |m| m.len());
            return Err(super::manifest::too_big(size).naming(&shown));
        }
        Manifest::from_json(&bytes).map(Some).map_err(|e| e.naming(&shown))
    }

    fn write_manifest(&self, m: &Manifest) -> Result<(), BackupError> {
        std::fs::create_dir_all(&self.root).map_err(io_err(&self.root))?;
        let p = self.path(MANIFEST_KEY);
        let tmp = self.path(&format!("{MANIFEST_KEY}.tmp"));
        let json = m.to_json_bounded()?;
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&json).and_then(|_| f.sync_all()).map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &p).map_err(io_err(&p))?;
        sync_dir(&self.root)
    }

    fn put_file(&self, key: &str, local: &Path) -> Result<(), BackupError> {
        let dest = self.path(key);
        let dir = dest.parent().expect("a key names a file under the root").to_path_buf();
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        File::open(local).and_then(|f| f.sync_all()).map_err(io_err(local))?;
        std::fs::rename(local, &dest).map_err(io_err(&dest))?;
        sync_dir(&dir)
    }

    fn fetch(&self, key: &str, bytes: u64, crc32: u32, local: &Path) -> Result<(), BackupError> {
        let src = self.path(key);
        let shown = src.display().to_string();
        let f = match File::open(&src) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(BackupError::Damaged {
                    key: shown,
                    why: "missing from the archive, though the manifest names it".into(),
                })
            }
            Err(e) => return Err(io_err(&src)(e)),
        };
        // A file of another size than the manifest's is refused before anything is copied, and
        // the copy stops one byte past the manifest's size (the file may grow meanwhile).
        let size = f.metadata().map_err(io_err(&src))?.len();
        if size != bytes {
            return Err(BackupError::Damaged {
                key: shown,
                why: format!("{size} bytes, the manifest says {bytes}"),
            });
        }
        let mut out = File::create(local).map_err(io_err(local))?;
        let (n, crc) = copy_with_crc(&mut f.take(bytes.saturating_add(1)), &mut out)
            .map_err(|e| BackupError::Io { path: shown.clone(), source: e })?;
        check_copy(&shown, n, crc, bytes, crc32)
    }
}

/// Compares a copy's size and CRC-32 with what the manifest says.
///
/// Errors: [`BackupError::Damaged`] naming `shown`.
pub fn check_copy(shown: &str, n: u64, crc: u32, bytes: u64, crc32: u32) -> Result<(), BackupError> {
    if n != bytes {
        return Err(BackupError::Damaged {
            key: shown.to_string(),
            why: format!("{n} bytes, the manifest says {bytes}"),
        });
    }
    if crc != crc32 {
        return Err(BackupError::Damaged {
            key: shown.to_string(),
            why: format!("CRC-32 is {crc:08x}, the manifest says {crc32:08x}: the archived copy is damaged"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fetch is bounded by the manifest's size: a file of another size is refused before
    /// anything is copied, so a damaged archive cannot fill the restore's disk.
    #[test]
    fn a_fetch_copies_no_more_than_the_manifest_says() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("archive");
        std::fs::create_dir_all(archive.join("log")).unwrap();
        std::fs::write(archive.join("log/log.0000000000000001"), vec![7u8; 1 << 20]).unwrap();
        let t = DirTarget::new(archive);
        let local = dir.path().join("copy");
        let e = t.fetch("log/log.0000000000000001", 10, 0, &local).unwrap_err();
        assert!(e.to_string().contains("1048576 bytes, the manifest says 10"), "{e}");
        assert!(std::fs::metadata(&local).map_or(0, |m| m.len()) <= 11);
        let crc = crc32fast::hash(&vec![7u8; 1 << 20]);
        t.fetch("log/log.0000000000000001", 1 << 20, crc, &local).unwrap();
    }
}
