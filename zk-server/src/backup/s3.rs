//! An archive in S3 (or an S3-compatible store), `s3://bucket/prefix`, through object_store.
//!
//! The same keys as a directory archive, under the prefix. Installing a file is one PUT (or one
//! multipart upload, for files over [`SINGLE_PUT_BYTES_MAX`]): S3 makes an object visible only
//! once it is complete, so a key holds a whole file or nothing. The manifest is one PUT too,
//! always after the files it names. Copies are staged in a local directory (the system's
//! temporary directory, one per archive), whose lock keeps a second backup on this machine
//! from writing the same archive; two backups on different machines must not share one.
//!
//! Configuration is the usual AWS environment, read by object_store: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`),
//! `AWS_ENDPOINT` (or `AWS_ENDPOINT_URL`, for an S3-compatible server) and `AWS_ALLOW_HTTP=true`
//! (for a plain-HTTP endpoint, as a local test server has).

use super::manifest::{Manifest, MANIFEST_BYTES_MAX, MANIFEST_KEY};
use super::target::{check_copy, ArchiveTarget, COPY_BUF_BYTES};
use super::{io_err, BackupError};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, PutPayload, WriteMultipart};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Files up to this size are uploaded with one PUT (read whole into memory); larger ones in
/// multipart uploads of [`PART_BYTES`] parts, at most [`PARTS_IN_FLIGHT`] at a time.
pub const SINGLE_PUT_BYTES_MAX: u64 = 16 << 20;
/// The part size of a multipart upload.
pub const PART_BYTES: usize = 8 << 20;
/// Parts of one upload in flight at once (what an upload holds in memory: this many parts).
pub const PARTS_IN_FLIGHT: usize = 4;

/// An archive at `s3://bucket/prefix`.
pub struct S3Target {
    url: String,
    bucket: String,
    prefix: String,
    store: AmazonS3,
    rt: tokio::runtime::Runtime,
    staging: PathBuf,
}

impl S3Target {
    /// Opens `url` (`s3://bucket` or `s3://bucket/prefix`) with the AWS environment.
    ///
    /// Errors: [`BackupError::Target`] for a URL without a bucket, or a configuration
    /// object_store refuses (a missing region or an endpoint that is not a URL, say).
    pub fn open(url: &str) -> Result<Self, BackupError> {
        let refuse = |why: String| BackupError::Target { target: url.to_string(), why };
        let rest = url.strip_prefix("s3://").ok_or_else(|| refuse("not an s3:// URL".into()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(refuse("no bucket: give s3://bucket/prefix".into()));
        }
        let prefix = prefix.trim_matches('/').to_string();
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| refuse(e.to_string()))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| refuse(format!("cannot start the I/O runtime: {e}")))?;
        let tag: String = format!("{bucket}-{prefix}")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
            .collect();
        let staging = std::env::temp_dir().join(format!("zkrs-backup-{tag}"));
        Ok(S3Target { url: url.to_string(), bucket: bucket.to_string(), prefix, store, rt, staging })
    }

    fn path(&self, key: &str) -> ObjPath {
        if self.prefix.is_empty() {
            ObjPath::from(key)
        } else {
            ObjPath::from(format!("{}/{key}", self.prefix))
        }
    }

    fn failed(&self, key: &str, e: object_store::Error) -> BackupError {
        BackupError::Remote { key: self.show(key), why: e.to_string() }
    }

    /// A manifest error, named by the manifest's URL.
    fn named(&self, e: BackupError) -> BackupError {
        e.naming(&self.show(MANIFEST_KEY))
    }
}

impl ArchiveTarget for S3Target {
    fn describe(&self) -> String {
        self.url.clone()
    }

    fn show(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}/{key}", self.bucket)
        } else {
            format!("s3://{}/{}/{key}", self.bucket, self.prefix)
        }
    }

    fn staging_dir(&self) -> PathBuf {
        self.staging.clone()
    }

    fn read_manifest(&self) -> Result<Option<Manifest>, BackupError> {
        let path = self.path(MANIFEST_KEY);
        let bytes = self.rt.block_on(async {
            let got = match self.store.get(&path).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            if got.meta.size > MANIFEST_BYTES_MAX {
                return Ok(Some(Err(got.meta.size)));
            }
            got.bytes().await.map(|b| Some(Ok(b)))
        });
        match bytes.map_err(|e| self.failed(MANIFEST_KEY, e))? {
            None => Ok(None),
            Some(Err(size)) => Err(self.named(super::manifest::too_big(size))),
            Some(Ok(b)) => Manifest::from_json(&b).map(Some).map_err(|e| self.named(e)),
        }
    }

    fn write_manifest(&self, m: &Manifest) -> Result<(), BackupError> {
        let path = self.path(MANIFEST_KEY);
        let json = m.to_json_bounded()?;
        self.rt
            .block_on(self.store.put(&path, PutPayload::from(json)))
            .map(|_| ())
            .map_err(|e| self.failed(MANIFEST_KEY, e))
    }

    fn put_file(&self, key: &str, local: &Path) -> Result<(), BackupError> {
        let path = self.path(key);
        let mut f = File::open(local).map_err(io_err(local))?;
        let size = f.metadata().map_err(io_err(local))?.len();
        if size <= SINGLE_PUT_BYTES_MAX {
            let mut bytes = Vec::with_capacity(size as usize);
            f.read_to_end(&mut bytes).map_err(io_err(local))?;
            self.rt
                .block_on(self.store.put(&path, PutPayload::from(bytes)))
                .map_err(|e| self.failed(key, e))?;
        } else {
            self.rt.block_on(async {
                let upload = self.store.put_multipart(&path).await.map_err(|e| self.failed(key, e))?;
                let mut w = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
                let mut buf = vec![0u8; COPY_BUF_BYTES];
                loop {
                    let n = match f.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) => {
                            let _ = w.abort().await;
                            return Err(io_err(local)(e));
                        }
                    };
                    if let Err(e) = w.wait_for_capacity(PARTS_IN_FLIGHT).await {
                        let _ = w.abort().await;
                        return Err(self.failed(key, e));
                    }
                    w.write(&buf[..n]);
                }
                w.finish().await.map(|_| ()).map_err(|e| self.failed(key, e))
            })?;
        }
        std::fs::remove_file(local).map_err(io_err(local))
    }

    fn fetch(&self, key: &str, bytes: u64, crc32: u32, local: &Path) -> Result<(), BackupError> {
        let path = self.path(key);
        let shown = self.show(key);
        let meta = match self.rt.block_on(self.store.head(&path)) {
            Ok(m) => m,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(BackupError::Damaged {
                    key: shown,
                    why: "missing from the archive, though the manifest names it".into(),
                })
            }
            Err(e) => return Err(self.failed(key, e)),
        };
        if meta.size != bytes {
            return Err(BackupError::Damaged {
                key: shown,
                why: format!("{} bytes, the manifest says {bytes}", meta.size),
            });
        }
        let mut out = File::create(local).map_err(io_err(local))?;
        let mut hasher = crc32fast::Hasher::new();
        let mut at = 0u64;
        // Ranged reads of at most one part each: what a fetch holds in memory is bounded.
        while at < bytes {
            let end = (at + PART_BYTES as u64).min(bytes);
            let chunk =
                self.rt.block_on(self.store.get_range(&path, at..end)).map_err(|e| self.failed(key, e))?;
            if chunk.len() as u64 > end - at {
                return Err(BackupError::Damaged {
                    key: shown,
                    why: format!("the store sent {} bytes for a range of {}", chunk.len(), end - at),
                });
            }
            hasher.update(&chunk);
            out.write_all(&chunk).map_err(io_err(local))?;
            at += chunk.len() as u64;
            if chunk.is_empty() {
                break;
            }
        }
        check_copy(&shown, at, hasher.finalize(), bytes, crc32)
    }
}
