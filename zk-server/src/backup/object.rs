//! An archive in object storage, through object_store: S3 (or an S3-compatible store), Google
//! Cloud Storage or Azure Blob Storage, whichever store [`super::cloud`] opened for the URL.
//!
//! The same keys as a directory archive, under the prefix. Installing a file is one PUT (or one
//! multipart upload, for files over [`SINGLE_PUT_BYTES_MAX`]), and each store makes an object
//! visible only once it is complete, so a key holds a whole file or nothing: S3 and Google
//! Cloud Storage put the object together when the multipart upload is completed (GCS's XML API
//! multipart upload, which object_store uses, works as S3's), Azure when the block list naming
//! the staged blocks is committed (Put Block List); a single PUT replaces an object whole in
//! all three. The manifest is one PUT too, always after the files it names, and all three read
//! an object back as last written (strong read-after-write consistency). No conditional
//! request is made: the archiver's check that the manifest is still its own is a read then a
//! write ([`super::archiver`]). Copies are staged in a local directory (the system's temporary
//! directory, one per archive), whose lock keeps a second backup on this machine from writing
//! the same archive; two backups on different machines must not share one.
//!
//! Configuration is the store's usual environment, read by object_store
//! ([`StoreUrl::open_store`] lists the variables).

use super::cloud::StoreUrl;
use super::manifest::{Manifest, MANIFEST_BYTES_MAX, MANIFEST_KEY};
use super::target::{check_copy, ArchiveTarget, COPY_BUF_BYTES};
use super::{io_err, BackupError};
use object_store::path::Path as ObjPath;
use object_store::{GetOptions, ObjectStore, PutPayload, WriteMultipart};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Files up to this size are uploaded with one PUT (read whole into memory); larger ones in
/// multipart uploads of [`PART_BYTES`] parts, at most [`PARTS_IN_FLIGHT`] at a time.
pub const SINGLE_PUT_BYTES_MAX: u64 = 16 << 20;
/// The part size of a multipart upload (an Azure block). S3 and GCS allow 10,000 parts, so a
/// file there may be up to 78 GiB; Azure allows 50,000 blocks (390 GiB).
pub const PART_BYTES: usize = 8 << 20;
/// Parts of one upload in flight at once (what an upload holds in memory: this many parts).
pub const PARTS_IN_FLIGHT: usize = 4;

/// An archive under a prefix of an object store's bucket or container.
pub struct ObjectTarget {
    url: String,
    root: String,
    prefix: String,
    store: Box<dyn ObjectStore>,
    rt: tokio::runtime::Runtime,
    staging: PathBuf,
}

impl ObjectTarget {
    /// Opens the archive at `url`, which [`StoreUrl::parse`] took apart as `parsed`, with the
    /// store's environment.
    ///
    /// Errors: [`BackupError::Target`] for a configuration object_store refuses (a missing
    /// region or an endpoint that is not a URL, say).
    pub fn open(url: &str, parsed: StoreUrl) -> Result<Self, BackupError> {
        let store =
            parsed.open_store().map_err(|why| BackupError::Target { target: url.to_string(), why })?;
        Self::with_store(url, parsed, store)
    }

    /// [`Self::open`] with `store` instead of the one the environment configures.
    ///
    /// Errors: the I/O runtime does not start.
    pub fn with_store(url: &str, parsed: StoreUrl, store: Box<dyn ObjectStore>) -> Result<Self, BackupError> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            BackupError::Target { target: url.to_string(), why: format!("cannot start the I/O runtime: {e}") }
        })?;
        let staging = std::env::temp_dir().join(format!("zkrs-backup-{}", parsed.staging_tag()));
        Ok(ObjectTarget {
            url: url.to_string(),
            root: parsed.root,
            prefix: parsed.prefix,
            store,
            rt,
            staging,
        })
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

    /// Reads the object at `path`, the bytes `range` of it or all of it, into memory: None when
    /// there is no such object, `Err(n)` as soon as more than `max` bytes (`n` so far) have
    /// come. The body is read as it arrives, so a store that sends more than it was asked
    /// (whatever its headers said) is cut off there.
    async fn get_bounded(
        &self,
        path: &ObjPath,
        range: Option<std::ops::Range<u64>>,
        max: u64,
    ) -> Result<Option<Result<Vec<u8>, u64>>, object_store::Error> {
        let whole = range.is_none();
        let opts = GetOptions { range: range.map(Into::into), ..GetOptions::default() };
        let got = match self.store.get_opts(path, opts).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        if whole && got.meta.size > max {
            return Ok(Some(Err(got.meta.size)));
        }
        let mut body = got.into_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = std::future::poll_fn(|cx| body.as_mut().poll_next(cx)).await {
            let chunk = chunk?;
            let n = bytes.len() as u64 + chunk.len() as u64;
            if n > max {
                return Ok(Some(Err(n)));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(Ok(bytes)))
    }

    /// A manifest error, named by the manifest's URL.
    fn named(&self, e: BackupError) -> BackupError {
        e.naming(&self.show(MANIFEST_KEY))
    }
}

impl ArchiveTarget for ObjectTarget {
    fn describe(&self) -> String {
        self.url.clone()
    }

    fn show(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            format!("{}/{key}", self.root)
        } else {
            format!("{}/{}/{key}", self.root, self.prefix)
        }
    }

    fn staging_dir(&self) -> PathBuf {
        self.staging.clone()
    }

    fn read_manifest(&self) -> Result<Option<Manifest>, BackupError> {
        let path = self.path(MANIFEST_KEY);
        let bytes = self.rt.block_on(self.get_bounded(&path, None, MANIFEST_BYTES_MAX));
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
            let chunk = match self
                .rt
                .block_on(self.get_bounded(&path, Some(at..end), end - at))
                .map_err(|e| self.failed(key, e))?
            {
                Some(Ok(chunk)) => chunk,
                Some(Err(n)) => {
                    return Err(BackupError::Damaged {
                        key: shown,
                        why: format!("the store sent at least {n} bytes for a range of {}", end - at),
                    })
                }
                None => {
                    return Err(BackupError::Damaged {
                        key: shown,
                        why: "missing from the archive, though the manifest names it".into(),
                    })
                }
            };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    /// A store that answers a HEAD with the object's size (10 bytes) and any GET with a range
    /// that looks right but a body far longer than asked: a fetch stops reading once the body
    /// passes the range, instead of taking in all of it. Returns the address and what the
    /// store managed to send.
    fn overlong_store() -> (std::net::SocketAddr, std::sync::mpsc::Receiver<u64>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { return };
                let tx = tx.clone();
                std::thread::spawn(move || loop {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut first = String::new();
                    if r.read_line(&mut first).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    let common = "Last-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\nETag: \"e\"\r\n";
                    if first.starts_with("HEAD") {
                        let head = format!("HTTP/1.1 200 OK\r\n{common}Content-Length: 10\r\n\r\n");
                        if conn.write_all(head.as_bytes()).is_err() {
                            return;
                        }
                        continue;
                    }
                    let head = format!(
                        "HTTP/1.1 206 Partial Content\r\n{common}Content-Range: bytes 0-9/10\r\n\
                         Content-Length: 536870912\r\n\r\n"
                    );
                    let _ = conn.write_all(head.as_bytes());
                    let block = vec![b'x'; 64 << 10];
                    let mut sent = 0u64;
                    while sent < 512 << 20 && conn.write_all(&block).is_ok() {
                        sent += block.len() as u64;
                    }
                    let _ = tx.send(sent);
                    return;
                });
            }
        });
        (addr, rx)
    }

    #[test]
    fn a_range_answered_with_more_bytes_is_cut_off_as_it_arrives() {
        let (addr, sent) = overlong_store();
        let store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(format!("http://{addr}"))
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id("k")
            .with_secret_access_key("s")
            .with_virtual_hosted_style_request(false)
            .with_bucket_name("b")
            .build()
            .unwrap();
        let parsed = StoreUrl::parse("s3://b/p").unwrap().unwrap();
        let t = ObjectTarget::with_store("s3://b/p", parsed, Box::new(store)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let e = t.fetch("log/x", 10, 0, &dir.path().join("x")).unwrap_err();
        assert!(e.to_string().contains("bytes for a range of 10"), "{e}");
        // The connection closes with the target's runtime.
        drop(t);
        let sent = sent.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
        assert!(sent < 64 << 20, "the store sent {sent} bytes before the fetch hung up");
    }
}
