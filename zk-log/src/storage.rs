//! The storage backend the log is written through: a flat directory of files.
//!
//! The log never touches the file system directly. It goes through [`Storage`] and [`StorageFile`],
//! so the same log code runs on the real disk ([`crate::FileStorage`]) and on the in-memory
//! fault-injecting disk ([`crate::FaultStorage`]) that crash tests use.
//!
//! # Durability contract every backend keeps
//! - Bytes given to [`StorageFile::write_at`] and lengths set by [`StorageFile::set_len`] may be lost
//!   at a crash until [`StorageFile::sync`] returns, each page of them on its own: any subset of
//!   the unsynced pages may land, in any order, and a page may land in part.
//! - [`StorageFile::allocate`] reserves the blocks and makes the new length durable before it returns,
//!   so a later write inside the allocated length cannot fail for lack of space.
//! - Creating, renaming and removing a file may be lost at a crash until [`Storage::sync_dir`]
//!   returns.

use std::io;

/// How a file backend writes the bytes the log appends. Both modes write the same bytes to the
/// same file, synced with the same `fdatasync`; everything is still read through mappings
/// (recovery, the index, readers), and the page cache is one, so a mapping sees what `pwrite`
/// wrote. Only the path of an append differs (docs/log-format.md, "Append modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AppendMode {
    /// Stores through the file's shared writable mapping (`memcpy` into the page cache). Syncing
    /// pages dirtied through a mapping makes writeback write-protect them again (a TLB shootdown
    /// in a multi-threaded process) and the next store fault: measured to cost a lone commit more.
    Mapped,
    /// `pwrite` of the same file (the kernel copies into the page cache); the mapping is only
    /// read. The default: no slower for a lone commit in this project's alternating measurements
    /// (bench/RESULTS.md), it keeps the log's pages out of the process's resident memory, and a
    /// failed write is an error returned, not a SIGBUS.
    #[default]
    Pwrite,
}

impl AppendMode {
    /// Every mode, for tests that cover them all.
    pub const ALL: [AppendMode; 2] = [AppendMode::Mapped, AppendMode::Pwrite];

    /// The mode's name as configuration spells it: `mmap` or `pwrite`.
    pub fn name(self) -> &'static str {
        match self {
            AppendMode::Mapped => "mmap",
            AppendMode::Pwrite => "pwrite",
        }
    }

    /// Parses a name given by [`Self::name`] (ASCII case ignored); `None` for anything else.
    pub fn parse(s: &str) -> Option<AppendMode> {
        AppendMode::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(s.trim()))
    }
}

impl std::fmt::Display for AppendMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A directory of files, the unit a log lives in.
///
/// Names are plain file names (no separators). Handles are cheap to clone and refer to the same
/// directory.
pub trait Storage: Clone + Send + std::fmt::Debug + 'static {
    /// An open file of this backend.
    type File: StorageFile;

    /// A read-only handle of this backend, shareable between threads (see [`Self::open_read`]).
    type ReadFile: StorageRead;

    /// Creates a new empty file `name`.
    ///
    /// Errors: `AlreadyExists` if it exists; any I/O error of the backend.
    fn create(&self, name: &str) -> io::Result<Self::File>;

    /// Opens the existing file `name` for reading and writing.
    ///
    /// Errors: `NotFound` if there is no such file; any I/O error of the backend.
    fn open(&self, name: &str) -> io::Result<Self::File>;

    /// Opens the existing file `name` for reading only, with a handle that may be shared by many
    /// threads while another handle of the same file is written. The handle reads the file's
    /// current bytes; see [`StorageRead::len`] for how far it reaches.
    ///
    /// The caller must not read, through this handle, a range that another handle is cutting
    /// off at the same time: the file backend reads through a mapping, and bytes past the end of
    /// the file fault (SIGBUS). The log keeps this rule by withdrawing a range from its readers
    /// before it cuts or removes it.
    ///
    /// Errors: `NotFound` if there is no such file; any I/O error of the backend.
    fn open_read(&self, name: &str) -> io::Result<Self::ReadFile>;

    /// Renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;

    /// Removes the file `name`.
    ///
    /// Errors: `NotFound` if there is no such file.
    fn remove(&self, name: &str) -> io::Result<()>;

    /// The names of all files in the directory, in no particular order.
    fn list(&self) -> io::Result<Vec<String>>;

    /// Makes every create, rename and remove done so far durable.
    fn sync_dir(&self) -> io::Result<()>;

    /// How `name` should be shown in log lines and errors (a full path for the file backend).
    fn display_name(&self, name: &str) -> String;

    /// How files of this handle write ([`StorageFile::write_at`]): through the mapping or with
    /// `pwrite`. Chosen when the handle is made; every file it opens or creates writes that way.
    fn append_mode(&self) -> AppendMode;
}

/// One open file of a [`Storage`].
pub trait StorageFile: Send + std::fmt::Debug + 'static {
    /// The file's current length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Grows the file to `len` bytes with its blocks reserved (zero-filled), and makes the new
    /// length durable before returning. A `len` not above the current length does nothing.
    ///
    /// Errors: `StorageFull` (ENOSPC) when the disk has no room; the file is then unchanged.
    fn allocate(&mut self, len: u64) -> io::Result<()>;

    /// Grows the file to `len` bytes with its blocks reserved, like [`Self::allocate`], but
    /// without zero-filling them or syncing: for a file written once and synced once at the end
    /// (a snapshot), where the zero-fill would only double the writes. The new length is durable
    /// after the next [`Self::sync`]. The default allocates.
    ///
    /// Errors: `StorageFull` (ENOSPC) when the disk has no room; the file is then unchanged.
    fn reserve(&mut self, len: u64) -> io::Result<()> {
        self.allocate(len)
    }

    /// Starts writing back `len` bytes from `offset` without waiting (a hint that keeps dirty
    /// data from piling up into one long sync at the end). The default does nothing.
    fn start_writeback(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Waits until `len` bytes from `offset` are written back (not made durable: the device may
    /// still cache them; [`Self::sync`] does that). The default does nothing.
    fn wait_writeback(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Sets the length to `len`, cutting or zero-extending. Not durable until [`Self::sync`].
    fn set_len(&mut self, len: u64) -> io::Result<()>;

    /// Writes all of `data` at `offset`, as the storage's [`AppendMode`] says: stored through the
    /// mapping, or with `pwrite`. The range must lie inside the current length (grow the file
    /// with [`Self::allocate`] first): a write past the end is refused with `InvalidInput` in
    /// either mode, so that every byte written lies in reserved blocks (and, mapped, inside the
    /// mapping).
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Writes `head` and then `rest` back to back from `offset`, as one write: the same as
    /// [`Self::write_at`] of the two joined (one `pwritev`, or two copies into the mapping), so
    /// that a caller who changes the first bytes of a buffer it cannot modify need not copy it.
    /// The default joins them and calls [`Self::write_at`].
    ///
    /// Errors: as [`Self::write_at`].
    fn write_at_split(&mut self, offset: u64, head: &[u8], rest: &[u8]) -> io::Result<()> {
        let mut joined = Vec::with_capacity(head.len() + rest.len());
        joined.extend_from_slice(head);
        joined.extend_from_slice(rest);
        self.write_at(offset, &joined)
    }

    /// Fills `buf` from `offset`.
    ///
    /// Errors: `UnexpectedEof` if the file ends first.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Makes every write and length change made through this file durable.
    fn sync(&mut self) -> io::Result<()>;

    /// Makes the whole file durable, whoever wrote it: also bytes written through other handles,
    /// or by an earlier process, and never synced (they may still be in the page cache after a
    /// process crash). An `fdatasync` even when this handle wrote nothing. The default is
    /// [`Self::sync`], for backends whose sync already covers the whole file.
    fn sync_all_data(&mut self) -> io::Result<()> {
        self.sync()
    }

    /// A hint that the next write will start at `offset`: a backend may do now, off the write's
    /// path, the work that write would otherwise wait for. Changes no content. The default does
    /// nothing.
    fn prepare_write(&mut self, offset: u64) {
        let _ = offset;
    }

    /// Whether [`Self::prepare_write`] does anything for this file, so that a caller can skip
    /// waking a thread to run it. The default: no.
    fn prepares_writes(&self) -> bool {
        false
    }
}

/// A read-only handle of a [`Storage`] file, usable from several threads at once.
pub trait StorageRead: Send + Sync + std::fmt::Debug + 'static {
    /// How far this handle can read: bytes at or past this offset are out of its reach even if
    /// the file has grown since (the file backend maps the length the file had when the handle
    /// was opened; open a new handle to see more).
    fn len(&self) -> u64;

    /// Whether the handle reaches no byte.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` from `offset`.
    ///
    /// Errors: `UnexpectedEof` if the range is not inside [`Self::len`] (or the file is shorter
    /// now); any I/O error of the backend.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

/// Writes `data` as the whole content of `name`, atomically as far as a crash can tell: the
/// bytes go to `<name>.tmp` (any leftover of that name is replaced), which is synced, and the
/// directory synced so the temp file itself is durable (it tells a reader after a crash that an
/// update was under way); then it is renamed over `name` and the directory synced again. After
/// a crash `name` holds either its old content or `data`, never a mix.
///
/// Errors: any I/O error; `name` then still holds its old content (a temp file may be left).
pub fn replace_file<S: Storage>(storage: &S, name: &str, data: &[u8]) -> io::Result<()> {
    let tmp = format!("{name}{TMP_SUFFIX}");
    match storage.remove(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut f = storage.create(&tmp)?;
    f.set_len(data.len() as u64)?;
    f.write_at(0, data)?;
    f.sync()?;
    drop(f);
    storage.sync_dir()?;
    storage.rename(&tmp, name)?;
    storage.sync_dir()
}

/// Reads the whole of the small file `name`; `Ok(None)` if it does not exist.
///
/// Errors: any I/O error other than `NotFound`; `InvalidData` if it is longer than `max_bytes`.
pub fn read_small_file<S: Storage>(storage: &S, name: &str, max_bytes: u64) -> io::Result<Option<Vec<u8>>> {
    let f = match storage.open(name) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = f.len()?;
    if len > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{len} bytes, more than the {max_bytes} such a file can hold"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    f.read_at(0, &mut buf)?;
    Ok(Some(buf))
}

/// Suffix of the temp file [`replace_file`] writes before renaming it into place.
pub const TMP_SUFFIX: &str = ".tmp";

/// Prefix of a file renamed for removal: it holds nothing anyone needs and is removed gradually
/// ([`remove_gradually`]); one left by a crash is removed when its directory is opened again.
pub const TRASH_PREFIX: &str = "trash.";

/// A large file is cut by this much at a time before it is unlinked (see [`remove_gradually`]).
pub const REMOVE_STEP_BYTES: u64 = 8 << 20;
const REMOVE_STEP_PAUSE: std::time::Duration = std::time::Duration::from_millis(3);

/// Renames `name` to its [`TRASH_PREFIX`] name and syncs the directory, so that it is gone from
/// its owner's view durably (a crash leaves trash, which the next open removes); returns the trash
/// name, for [`remove_gradually`].
///
/// Errors: the rename or the directory sync fails.
pub fn move_to_trash<S: Storage>(storage: &S, name: &str) -> io::Result<String> {
    let trash = format!("{TRASH_PREFIX}{name}");
    storage.rename(name, &trash)?;
    storage.sync_dir()?;
    Ok(trash)
}

/// Removes `name`, first cutting it down [`REMOVE_STEP_BYTES`] at a time with a short pause
/// between cuts. Unlinking a 200 MB file at once took 110 ms here and held every fdatasync of
/// the log meanwhile up for as long (the file system frees, and discards, all its blocks in one
/// go); cut gradually, no sync waited more than a few milliseconds. Slow by design: run it on a
/// thread no commit waits for.
///
/// Errors: any I/O error; the file may then be shorter than it was, or gone.
pub fn remove_gradually<S: Storage>(storage: &S, name: &str) -> io::Result<()> {
    match storage.open(name) {
        Ok(mut f) => {
            let mut len = f.len()?;
            while len > REMOVE_STEP_BYTES {
                len -= REMOVE_STEP_BYTES;
                f.set_len(len)?;
                std::thread::sleep(REMOVE_STEP_PAUSE);
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    storage.remove(name)
}
