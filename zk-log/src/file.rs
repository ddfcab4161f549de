//! The real disk: files in one directory, grown with `posix_fallocate`, written through a shared
//! memory mapping or with `pwrite` ([`AppendMode`]), read through mappings, and made durable with
//! `fdatasync`.
//!
//! Why the mapping is safe to write: a store into a mapped page beyond the blocks the file system
//! has reserved can fail only asynchronously, as SIGBUS, when the disk is full. Every byte this
//! backend writes lies inside a length reserved by [`StorageFile::allocate`] (fallocate reserves the
//! blocks up front, or fails with ENOSPC before anything is written), so a full disk surfaces as an
//! error from `allocate`, never as a signal. The mapping is dropped and rebuilt around every length
//! change so it never covers bytes past the end of the file.
//!
//! The directory must not be shared with another process that truncates these files (that would
//! turn reads of the mapping into SIGBUS); [`FileStorage::open_dir`] takes an exclusive lock on a
//! `LOCK` file to keep a second zkrs process out.
#![allow(unsafe_code)]

use crate::storage::{AppendMode, Storage, StorageFile, StorageRead};
use memmap2::{Mmap, MmapMut};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Name of the lock file [`FileStorage::open_dir`] holds.
pub const LOCK_FILE: &str = "LOCK";

/// A directory on the real file system.
#[derive(Debug, Clone)]
pub struct FileStorage {
    inner: Arc<DirInner>,
}

#[derive(Debug)]
struct DirInner {
    dir: PathBuf,
    mode: AppendMode,
    // Held open for the flock; dropping the last handle releases the lock.
    _lock: File,
}

impl FileStorage {
    /// Opens (creating if needed, with its parents) the directory `dir`, and takes an exclusive
    /// advisory lock on `dir/LOCK` for as long as any clone of the handle lives. Its files write
    /// through their mappings ([`AppendMode::Mapped`]); [`Self::open_dir_with`] chooses.
    ///
    /// Errors: any error creating the directory; `WouldBlock` if another process (or another
    /// handle in this process) holds the lock.
    pub fn open_dir(dir: impl AsRef<Path>) -> io::Result<FileStorage> {
        Self::open_dir_with(dir, AppendMode::Mapped)
    }

    /// [`Self::open_dir`], with files that write as `mode` says.
    ///
    /// Errors: as [`Self::open_dir`].
    pub fn open_dir_with(dir: impl AsRef<Path>, mode: AppendMode) -> io::Result<FileStorage> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))?;
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                err.kind(),
                format!("{} is locked by another process: {err}", dir.display()),
            ));
        }
        Ok(FileStorage { inner: Arc::new(DirInner { dir, mode, _lock: lock }) })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    fn path_of(&self, name: &str) -> io::Result<PathBuf> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad file name {name:?}")));
        }
        Ok(self.inner.dir.join(name))
    }
}

impl Storage for FileStorage {
    type File = MappedFile;
    type ReadFile = MappedReadFile;

    fn open_read(&self, name: &str) -> io::Result<MappedReadFile> {
        let file = OpenOptions::new().read(true).open(self.path_of(name)?)?;
        let len = file.metadata()?.len();
        let map = if len == 0 {
            None
        } else {
            let n = usize::try_from(len)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
            // SAFETY: a read-only shared mapping of exactly the file's current length, in a
            // directory this process holds the exclusive lock on (the handle keeps the lock
            // alive), so no other process cuts the file. Within this process the log never cuts
            // or rewrites a range it has published to readers without first withdrawing it, and
            // readers only touch published ranges (see `Storage::open_read`).
            Some(unsafe { memmap2::MmapOptions::new().len(n).map(&file)? })
        };
        Ok(MappedReadFile { map, len, _dir: self.inner.clone() })
    }

    fn create(&self, name: &str) -> io::Result<MappedFile> {
        let f = OpenOptions::new().read(true).write(true).create_new(true).open(self.path_of(name)?)?;
        MappedFile::new(f, self.inner.mode)
    }

    fn open(&self, name: &str) -> io::Result<MappedFile> {
        let f = OpenOptions::new().read(true).write(true).open(self.path_of(name)?)?;
        MappedFile::new(f, self.inner.mode)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        fs::rename(self.path_of(from)?, self.path_of(to)?)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.path_of(name)?)
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in fs::read_dir(&self.inner.dir)? {
            let e = e?;
            if e.file_type()?.is_file() {
                if let Some(n) = e.file_name().to_str() {
                    if n != LOCK_FILE {
                        out.push(n.to_string());
                    }
                }
            }
        }
        Ok(out)
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.inner.dir)?.sync_all()
    }

    fn display_name(&self, name: &str) -> String {
        self.inner.dir.join(name).display().to_string()
    }

    fn append_mode(&self) -> AppendMode {
        self.inner.mode
    }
}

/// A read-only mapping of a file, fixed at the length the file had when it was opened; see
/// [`Storage::open_read`]. It keeps the directory's lock alive, so no other process can take
/// the directory (and cut the mapped file) while the handle lives.
#[derive(Debug)]
pub struct MappedReadFile {
    map: Option<Mmap>,
    len: u64,
    _dir: Arc<DirInner>,
}

impl StorageRead for MappedReadFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the mapped length"))?;
        if buf.is_empty() {
            return Ok(());
        }
        let map = self.map.as_ref().ok_or_else(|| io::Error::other("file has no mapping"))?;
        buf.copy_from_slice(&map[offset as usize..end as usize]);
        Ok(())
    }
}

/// A file mapped (shared) over its whole length: read through the mapping, written through it or
/// with `pwrite` ([`AppendMode`]).
#[derive(Debug)]
pub struct MappedFile {
    file: File,
    mode: AppendMode,
    map: Option<MmapMut>,
    len: u64,
    /// Byte range written (through the map or with pwrite) since the last sync (empty when
    /// lo >= hi).
    dirty_lo: u64,
    dirty_hi: u64,
    /// A length change not yet made durable.
    len_dirty: bool,
}

impl MappedFile {
    fn new(file: File, mode: AppendMode) -> io::Result<MappedFile> {
        let len = file.metadata()?.len();
        let mut f =
            MappedFile { file, mode, map: None, len, dirty_lo: u64::MAX, dirty_hi: 0, len_dirty: false };
        f.remap()?;
        Ok(f)
    }

    /// Rebuilds the mapping to cover exactly the current length. Flushes dirty pages of the old
    /// mapping first: a shared mapping's pages are the page cache, so nothing is lost by dropping
    /// it, but msync-ing the range we tracked keeps `sync` from having to remember old mappings.
    fn remap(&mut self) -> io::Result<()> {
        self.flush_map()?;
        self.map = None;
        if self.len == 0 {
            return Ok(());
        }
        let len = usize::try_from(self.len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
        // SAFETY: the mapping is of a file this process created or opened in a directory it holds
        // the exclusive lock on, so nothing else truncates it underneath us; it covers exactly the
        // file's current length, and is rebuilt whenever this handle changes the length.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(&self.file)? };
        self.map = Some(map);
        Ok(())
    }

    /// Reserves real blocks up to `len` (the length grows to `len`; `self.len` is the caller's to
    /// update). On failure the file is put back to its length.
    fn fallocate_to(&mut self, len: u64) -> io::Result<()> {
        let start = i64::try_from(self.len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let add = i64::try_from(len - self.len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: plain syscall on a descriptor we own. posix_fallocate reserves real blocks (glibc
        // falls back to writing zeros where the file system lacks fallocate), so a later store
        // through the mapping cannot hit ENOSPC.
        let rc = unsafe { libc::posix_fallocate(self.file.as_raw_fd(), start, add) };
        if rc != 0 {
            let err = io::Error::from_raw_os_error(rc);
            // A failed fallocate may have extended the file partly; put the length back so the
            // file is unchanged, as the contract says.
            let _ = self.file.set_len(self.len);
            return Err(err);
        }
        Ok(())
    }

    /// Writes zeros over `[from, to)` through the mapping and syncs, making the new length durable
    /// too, so later syncs only need the data.
    ///
    /// Why zeros: on ext4 and xfs, fallocate leaves the new blocks as "unwritten" extents, and
    /// every later sync of data written into them must commit the extent conversion through the
    /// journal: measured here, an msync of a few hundred bytes grew from 0.2 ms to 2 ms as a
    /// 64 MiB segment filled. Writing zeros once makes the extents ordinary written ones, so a
    /// commit's sync flushes data pages only. The cost is paid once per preallocation step.
    ///
    /// Why through the mapping: the page cache keeps whatever folio size created a page, and a
    /// store through a mapping dirties its whole folio. Zeros written with `pwrite` in 64 KiB
    /// pieces left 64 KiB folios (1 MiB pieces, 1 MiB folios) on this machine's kernel (6.18,
    /// ext4 with large folios), so every commit's sync wrote back 64 KiB for a 200-byte record:
    /// 44 KB of disk writes per setData. Pages first touched through the mapping are single
    /// pages: a commit then writes back the page or two it changed (3.7 KB per setData).
    ///
    /// The zeros go through a mapping of the new range only, dropped right after: the file's own
    /// mapping stays unpopulated there, so rebuilding it for the new length (once per step while
    /// a spare is prepared) does not tear down thousands of page-table entries each time.
    fn zero_fill(&mut self, from: u64, to: u64) -> io::Result<()> {
        // SAFETY: sysconf has no memory arguments. A mapping's offset must be a multiple of the
        // page size, which is not 4 KiB everywhere (64 KiB on some arm64 kernels).
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as u64,
            _ => 4096,
        };
        let start = from - from % page;
        let len = usize::try_from(to - start).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        if len > 0 {
            // SAFETY: a shared mapping of a range inside the file's length (fallocate_to grew it),
            // in a directory this process holds the exclusive lock on, dropped before returning.
            let mut map = unsafe { memmap2::MmapOptions::new().offset(start).len(len).map_mut(&self.file)? };
            // Bytes below `from` are the file's own (a partial page): left as they are.
            map[(from - start) as usize..].fill(0);
        }
        self.file.sync_data()?;
        self.remap()
    }

    /// sync_file_range over `[offset, offset + len)` clipped to the file; pages dirtied through
    /// the mapping are page-cache pages, so this reaches them too.
    fn sync_range(&mut self, offset: u64, len: u64, flags: libc::c_uint) -> io::Result<()> {
        let end = offset.saturating_add(len).min(self.len);
        if offset >= end {
            return Ok(());
        }
        let (Ok(off), Ok(n)) = (i64::try_from(offset), i64::try_from(end - offset)) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: plain syscall on a descriptor we own; no memory is passed.
        let rc = unsafe { libc::sync_file_range(self.file.as_raw_fd(), off, n, flags) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes the bytes written since the last sync durable. Stored through the mapping or written
    /// with pwrite, they are dirty pages of the one page cache, so fdatasync writes them back and
    /// waits, like msync(MS_SYNC) of the range would for the mapping (and measured here it is
    /// markedly cheaper per commit than msync).
    fn flush_map(&mut self) -> io::Result<()> {
        if self.dirty_lo < self.dirty_hi {
            if self.dirty_lo < self.dirty_hi.min(self.len) {
                self.file.sync_data()?;
            }
            self.dirty_lo = u64::MAX;
            self.dirty_hi = 0;
        }
        Ok(())
    }
}

impl StorageFile for MappedFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.len)
    }

    fn allocate(&mut self, len: u64) -> io::Result<()> {
        if len <= self.len {
            return Ok(());
        }
        let old = self.len;
        self.fallocate_to(len)?;
        self.len = len;
        if let Err(e) = self.zero_fill(old, len) {
            // Put the file back to its length, as the contract says.
            self.map = None;
            let _ = self.file.set_len(old);
            self.len = old;
            let _ = self.remap();
            return Err(e);
        }
        Ok(())
    }

    fn reserve(&mut self, len: u64) -> io::Result<()> {
        if len <= self.len {
            return Ok(());
        }
        self.fallocate_to(len)?;
        self.len = len;
        self.len_dirty = true;
        self.remap()
    }

    fn start_writeback(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.sync_range(offset, len, libc::SYNC_FILE_RANGE_WRITE)
    }

    fn wait_writeback(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.sync_range(
            offset,
            len,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        )
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        // Drop the mapping before shrinking: pages past the new end would fault with SIGBUS.
        self.flush_map()?;
        self.map = None;
        self.file.set_len(len)?;
        self.len = len;
        self.len_dirty = true;
        self.remap()
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "write past the allocated length"))?;
        if data.is_empty() {
            return Ok(());
        }
        match self.mode {
            AppendMode::Mapped => {
                let map = self.map.as_mut().ok_or_else(|| io::Error::other("file has no mapping"))?;
                map[offset as usize..end as usize].copy_from_slice(data);
            }
            // The page cache is shared with the mapping, so reads through it see these bytes.
            // write_all_at repeats a short write and retries EINTR; any other error (EIO, or
            // ENOSPC on a file system that cannot honour the reservation) is returned, and the
            // log poisons itself: the range may hold a prefix of `data`, never synced as whole.
            AppendMode::Pwrite => self.file.write_all_at(data, offset)?,
        }
        self.dirty_lo = self.dirty_lo.min(offset);
        self.dirty_hi = self.dirty_hi.max(end);
        Ok(())
    }

    fn write_at_split(&mut self, offset: u64, head: &[u8], rest: &[u8]) -> io::Result<()> {
        let end = offset
            .checked_add(head.len() as u64)
            .and_then(|e| e.checked_add(rest.len() as u64))
            .filter(|&e| e <= self.len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "write past the allocated length"))?;
        if offset == end {
            return Ok(());
        }
        let mid = offset + head.len() as u64;
        match self.mode {
            AppendMode::Mapped => {
                let map = self.map.as_mut().ok_or_else(|| io::Error::other("file has no mapping"))?;
                map[offset as usize..mid as usize].copy_from_slice(head);
                map[mid as usize..end as usize].copy_from_slice(rest);
            }
            // One system call for both pieces, as write_at makes one for a whole batch; errors
            // are handled as there.
            AppendMode::Pwrite => pwritev_all(&self.file, offset, head, rest)?,
        }
        self.dirty_lo = self.dirty_lo.min(offset);
        self.dirty_hi = self.dirty_hi.max(end);
        Ok(())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file"))?;
        if buf.is_empty() {
            return Ok(());
        }
        let map = self.map.as_ref().ok_or_else(|| io::Error::other("file has no mapping"))?;
        buf.copy_from_slice(&map[offset as usize..end as usize]);
        Ok(())
    }

    /// After a sync the kernel write-protects the mapping's cleaned pages, so the next store into
    /// the page holding the log's tail faults (and ext4 runs its page_mkwrite path) on the
    /// critical path of the next commit: about 30 µs measured here. Storing the byte already at
    /// `offset` takes that fault now, between commits, and changes nothing on disk.
    ///
    /// With [`AppendMode::Pwrite`] nothing is stored through the mapping, so there is no such
    /// fault to take: this does nothing.
    fn prepare_write(&mut self, offset: u64) {
        if !self.prepares_writes() {
            return;
        }
        let Some(map) = self.map.as_mut() else { return };
        let Some(b) = usize::try_from(offset).ok().and_then(|i| map.get_mut(i)) else { return };
        // SAFETY: `b` is a valid, exclusive reference into our mapping; volatile accesses keep
        // the compiler from eliding a store of the value just read.
        unsafe {
            let p: *mut u8 = b;
            std::ptr::write_volatile(p, std::ptr::read_volatile(p));
        }
    }

    fn prepares_writes(&self) -> bool {
        self.mode != AppendMode::Pwrite
    }

    fn sync(&mut self) -> io::Result<()> {
        self.flush_map()?;
        if self.len_dirty {
            self.file.sync_data()?;
            self.len_dirty = false;
        }
        Ok(())
    }

    fn sync_all_data(&mut self) -> io::Result<()> {
        // fdatasync covers every dirty page of the file, whichever handle or process dirtied it.
        self.file.sync_data()?;
        self.dirty_lo = u64::MAX;
        self.dirty_hi = 0;
        self.len_dirty = false;
        Ok(())
    }
}

/// `pwritev` of `head` then `rest` at `offset`, repeated until both are written (a short write
/// continues where it stopped; EINTR is retried), as `write_all_at` does for one buffer.
fn pwritev_all(file: &File, mut offset: u64, mut head: &[u8], mut rest: &[u8]) -> io::Result<()> {
    while !head.is_empty() || !rest.is_empty() {
        let iov = [
            libc::iovec { iov_base: head.as_ptr() as *mut libc::c_void, iov_len: head.len() },
            libc::iovec { iov_base: rest.as_ptr() as *mut libc::c_void, iov_len: rest.len() },
        ];
        let at = i64::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: both iovecs describe live slices borrowed for the duration of the call, which
        // only reads them; the descriptor is ours.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), 2, at) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        let mut n = n as usize;
        offset += n as u64;
        let from_head = n.min(head.len());
        head = &head[from_head..];
        n -= from_head;
        rest = &rest[n..];
    }
    Ok(())
}
