//! An in-memory disk that forgets what was not synced: the stand-in for power loss in crash tests.
//!
//! Every file keeps two images: the durable bytes (what survives a crash) and the pending
//! operations (writes and length changes) made since its last sync, in order. The directory keeps
//! its durable name table and the creates, renames and removes made since the last directory sync.
//!
//! An image is sparse in its trailing zeros: a logical length and the bytes up to the last one
//! ever written since the file was last cut below it; every byte past those reads as zero. So
//! growing a file (`allocate`, `reserve`, `set_len`) stores nothing, and a snapshot file reserved
//! in 16 MiB steps but holding a few KB costs a few KB. Nothing observable depends on this: every
//! read, [`FaultStorage::contents`], length, crash and capacity check sees the logical bytes.
//!
//! [`FaultStorage::crash`] simulates power loss, in one of two ways ([`CrashModel`]), drawn from
//! the seeded generator; the same seed always gives the same crash, so a failing case is
//! reproduced by its seed.
//!
//! - [`CrashModel::Prefix`]: for each file, how many of the pending operations reached the disk,
//!   in order, and whether the first one that did not was torn (a random prefix of that write
//!   lands and the rest of it does not); the same for the directory's pending operations.
//!   Everything later is dropped.
//! - [`CrashModel::Subset`]: the disk wrote back whatever it liked, in any order. Every pending
//!   write is cut into its [`FAULT_PAGE_BYTES`] pages, and each page keeps, independently of every
//!   other page, a prefix of its own pending pieces (the page as some writeback found it), the
//!   next piece perhaps landing in part (a random run of its bytes); the file's length changes
//!   keep an in-order prefix; each pending directory operation survives or not on its own. A
//!   later page of an unsynced batch can survive while an earlier one is lost: the out-of-order
//!   writeback case of docs/log-format.md.
//!
//! [`FaultStorage::crash_keeping_pages`] is the scripted form of the second: the test names the
//! pages that land.
//!
//! The disk takes the [`AppendMode`] the log writes with. Stored through a mapping
//! ([`AppendMode::Mapped`]), a write is one pending operation. Written with `pwrite`
//! ([`AppendMode::Pwrite`]), it is recorded as the page-cache pages it fills ([`FAULT_PAGE_BYTES`]
//! each, aligned on the file's offsets), each its own pending operation, because that is how the
//! kernel holds it until a sync: a prefix crash then keeps a prefix of the pwrite's pages, the
//! last of them torn at any byte, which is the torn pwrite of docs/log-format.md. (The subset
//! model cuts stores through the mapping into pages too, at the crash.)
//!
//! It can also refuse space beyond a capacity (ENOSPC from `allocate`, `reserve` or a growing
//! `set_len`, like a full disk), fail syncs with EIO, and cut the power after a given number of
//! operations ([`FaultStorage::fail_after`]), so a test can stop a multi-step job (a reset, a
//! truncation, an epoch update) at every step in turn.
//!
//! `allocate` makes the new length durable at once, syncing the file as the real backend's
//! fdatasync does; `reserve` only records it, like a `set_len`, and it is durable at the next
//! sync (a crash before keeps it or not as the crash model draws).

use crate::storage::{AppendMode, Storage, StorageFile, StorageRead};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// SplitMix64: a tiny deterministic generator, so a seed means the same faults on every platform
/// and every version of this crate's dependencies.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..=max` (slightly biased, which does not matter for fault drawing).
    pub fn upto(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            return self.next_u64();
        }
        self.next_u64() % (max + 1)
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        den != 0 && self.next_u64() % den < num
    }
}

#[derive(Debug, Clone)]
enum FileOp {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

/// How a simulated power loss ([`FaultStorage::crash`]) decides which unsynced changes reached
/// the disk. See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CrashModel {
    /// In order: per file a prefix of its pending operations, the next one torn half the time;
    /// a prefix of the directory's pending operations.
    #[default]
    Prefix,
    /// Out of order: any subset of the pending pages of each file (each page a prefix of its own
    /// pending pieces, the next one perhaps in part), an in-order prefix of its length changes,
    /// and any subset of the directory's pending operations.
    Subset,
}

impl CrashModel {
    /// Every model, for tests that cover them all.
    pub const ALL: [CrashModel; 2] = [CrashModel::Prefix, CrashModel::Subset];
}

/// How one crash chooses what lands.
enum Landing<'a> {
    /// Nothing unsynced lands.
    Nothing,
    /// Drawn by the model, from the disk's generator.
    Drawn(CrashModel),
    /// The pages the function accepts (file name as last listed, page index) land whole; no
    /// length change and no directory operation does.
    Pages(&'a mut dyn FnMut(&str, u64) -> bool),
}

/// Cuts the pending writes at page boundaries ([`FAULT_PAGE_BYTES`]); length changes stay whole.
fn page_pieces(pending: Vec<FileOp>) -> Vec<FileOp> {
    let mut out = Vec::with_capacity(pending.len());
    for op in pending {
        match op {
            FileOp::Write { offset, data } => {
                let mut at = offset;
                let mut rest = &data[..];
                while !rest.is_empty() {
                    let room = (FAULT_PAGE_BYTES - at % FAULT_PAGE_BYTES) as usize;
                    let (piece, tail) = rest.split_at(room.min(rest.len()));
                    out.push(FileOp::Write { offset: at, data: piece.to_vec() });
                    at += piece.len() as u64;
                    rest = tail;
                }
            }
            op @ FileOp::SetLen(_) => out.push(op),
        }
    }
    out
}

/// What of one page's pending pieces (in order) lands in a subset crash.
#[derive(Debug, Clone, Copy)]
struct PageLanding {
    /// This many of the pieces land whole.
    whole: usize,
    /// These bytes (a range within it) of the next piece land too.
    part: Option<(usize, usize)>,
}

/// Chooses a [`PageLanding`] for a page (by index), given its pending pieces.
type PageChooser<'a> = &'a mut dyn FnMut(u64, &[&[u8]]) -> PageLanding;

/// What of a file's pending operations lands on its durable image in a subset crash: `keep` says
/// it for each page; `lengths` says how many of the length changes land, in order.
fn land_subset(durable: &mut Image, pending: Vec<FileOp>, keep: PageChooser<'_>, lengths: usize) {
    let pieces = page_pieces(pending);
    // Each page's pieces, in order, by page (BTreeMap: the draws go in page order).
    let mut by_page: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, op) in pieces.iter().enumerate() {
        if let FileOp::Write { offset, .. } = op {
            by_page.entry(offset / FAULT_PAGE_BYTES).or_default().push(i);
        }
    }
    // For each piece: None = not landed, Some(range) = these bytes of it land.
    let mut lands: Vec<Option<(usize, usize)>> = vec![None; pieces.len()];
    for (page, idx) in &by_page {
        let datas: Vec<&[u8]> = idx
            .iter()
            .map(|&i| match &pieces[i] {
                FileOp::Write { data, .. } => &data[..],
                FileOp::SetLen(_) => unreachable!("only writes are grouped by page"),
            })
            .collect();
        let PageLanding { whole, part } = keep(*page, &datas);
        for (k, &i) in idx.iter().enumerate() {
            if k < whole {
                lands[i] = Some((0, datas[k].len()));
            } else if k == whole {
                lands[i] = part.filter(|(a, b)| a < b && *b <= datas[k].len());
            }
        }
    }
    let mut len_changes = 0;
    for (op, land) in pieces.iter().zip(lands) {
        match op {
            FileOp::SetLen(_) => {
                if len_changes < lengths {
                    durable.apply(op);
                }
                len_changes += 1;
            }
            FileOp::Write { offset, data } => {
                if let Some((a, b)) = land {
                    durable.apply(&FileOp::Write { offset: offset + a as u64, data: data[a..b].to_vec() });
                }
            }
        }
    }
}

/// A file's bytes, sparse in its trailing zeros: `len` bytes, of which the first `stored.len()`
/// are kept and every later one is zero. `stored.len() <= len` always; `stored` may end in
/// zeros too (written ones), which changes nothing but the memory used. Growing the length
/// stores nothing; a write stores up to its end (zero-filling any gap before it); a cut drops
/// the stored bytes past the new length.
#[derive(Debug, Clone, Default)]
struct Image {
    stored: Vec<u8>,
    len: u64,
}

impl Image {
    /// The logical length.
    fn len(&self) -> u64 {
        self.len
    }

    /// Applies one operation. A write reaching past the length grows the length to its end, as
    /// a write to a real file does (a subset crash can land a write without the length change
    /// that made room for it).
    fn apply(&mut self, op: &FileOp) {
        match op {
            FileOp::Write { offset, data } => {
                let end = *offset + data.len() as u64;
                if !data.is_empty() {
                    let (off, end) = (*offset as usize, end as usize);
                    if self.stored.len() < end {
                        self.stored.resize(end, 0);
                    }
                    self.stored[off..end].copy_from_slice(data);
                }
                self.len = self.len.max(end);
            }
            FileOp::SetLen(n) => {
                self.len = *n;
                self.stored.truncate(*n as usize);
            }
        }
    }

    /// Fills `buf` from `offset`; the range must lie inside the length.
    fn read(&self, offset: u64, buf: &mut [u8]) {
        debug_assert!(offset + buf.len() as u64 <= self.len);
        let have = self.stored.get(offset as usize..).unwrap_or(&[]);
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        buf[n..].fill(0);
    }

    /// Every byte, zeros past the stored ones included.
    fn to_vec(&self) -> Vec<u8> {
        let mut v = self.stored.clone();
        v.resize(self.len as usize, 0);
        v
    }
}

/// Equal as bytes, however much of each is stored.
impl PartialEq for Image {
    fn eq(&self, other: &Image) -> bool {
        let (short, long) = if self.stored.len() <= other.stored.len() {
            (&self.stored, &other.stored)
        } else {
            (&other.stored, &self.stored)
        };
        self.len == other.len
            && long[..short.len()] == short[..]
            && long[short.len()..].iter().all(|&b| b == 0)
    }
}

#[derive(Debug, Default)]
struct Inode {
    durable: Image,
    current: Image,
    pending: Vec<FileOp>,
}

#[derive(Debug, Clone)]
enum DirOp {
    Create(String, u64),
    Rename(String, String),
    Remove(String),
}

fn apply_dir_op(table: &mut BTreeMap<String, u64>, op: &DirOp) {
    match op {
        DirOp::Create(n, ino) => {
            table.insert(n.clone(), *ino);
        }
        DirOp::Rename(from, to) => {
            if let Some(ino) = table.remove(from) {
                table.insert(to.clone(), ino);
            }
        }
        DirOp::Remove(n) => {
            table.remove(n);
        }
    }
}

#[derive(Debug)]
struct State {
    inodes: HashMap<u64, Inode>,
    durable_dir: BTreeMap<String, u64>,
    current_dir: BTreeMap<String, u64>,
    pending_dir: Vec<DirOp>,
    next_ino: u64,
    /// Bumped by every crash: handles from before a crash refuse to work.
    generation: u64,
    rng: SplitMix64,
    capacity: Option<u64>,
    fail_sync: bool,
    /// Mutating operations left before the power fails (see `FaultStorage::fail_after`).
    power_left: Option<u64>,
    crashes: u64,
    mode: AppendMode,
    crash_model: CrashModel,
    /// File writes that carried data, and file syncs (see `FaultStorage::io_counts`).
    writes: u64,
    syncs: u64,
    /// How long each file sync takes (a test aid: lets work queue up behind it).
    sync_delay: std::time::Duration,
}

/// The page size [`FaultStorage`] splits a pwrite into (see the module docs).
pub const FAULT_PAGE_BYTES: u64 = 4096;

impl State {
    /// Counts one mutating operation against an armed power failure: fails it (and every later
    /// one) once the budget is spent.
    fn power(&mut self) -> io::Result<()> {
        match self.power_left {
            Some(0) => Err(io::Error::from_raw_os_error(libc::EIO)),
            Some(n) => {
                self.power_left = Some(n - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn used_bytes(&self) -> u64 {
        self.inodes.values().map(|i| i.current.len().max(i.durable.len())).sum()
    }
}

/// The fault-injecting in-memory backend. Clones share the same disk.
#[derive(Clone)]
pub struct FaultStorage {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FaultStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Terse on purpose: the file images can be megabytes.
        let st = self.lock();
        f.debug_struct("FaultStorage")
            .field("files", &st.current_dir.keys().collect::<Vec<_>>())
            .field("crashes", &st.crashes)
            .finish()
    }
}

impl FaultStorage {
    /// An empty disk whose crashes are drawn from `seed`, written through mappings
    /// ([`AppendMode::Mapped`]).
    pub fn new(seed: u64) -> FaultStorage {
        Self::with_append_mode(seed, AppendMode::Mapped)
    }

    /// An empty disk whose crashes are drawn from `seed`, whose files write as `mode` says.
    pub fn with_append_mode(seed: u64, mode: AppendMode) -> FaultStorage {
        Self::with_models(seed, mode, CrashModel::Prefix)
    }

    /// An empty disk whose crashes are drawn from `seed` by `model`, whose files write as `mode`
    /// says.
    pub fn with_models(seed: u64, mode: AppendMode, model: CrashModel) -> FaultStorage {
        FaultStorage {
            state: Arc::new(Mutex::new(State {
                inodes: HashMap::new(),
                durable_dir: BTreeMap::new(),
                current_dir: BTreeMap::new(),
                pending_dir: Vec::new(),
                next_ino: 1,
                generation: 0,
                rng: SplitMix64::new(seed),
                capacity: None,
                fail_sync: false,
                power_left: None,
                crashes: 0,
                mode,
                crash_model: model,
                writes: 0,
                syncs: 0,
                sync_delay: std::time::Duration::ZERO,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves consistent data behind (every
        // mutation completes under the lock before it is visible), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The model [`Self::crash`] draws by.
    pub fn crash_model(&self) -> CrashModel {
        self.lock().crash_model
    }

    /// Makes [`Self::crash`] draw by `model` from now on.
    pub fn set_crash_model(&self, model: CrashModel) {
        self.lock().crash_model = model;
    }

    /// The total bytes of all files (their lengths, stored or not), as [`Self::set_capacity`]
    /// counts them.
    pub fn used_bytes(&self) -> u64 {
        self.lock().used_bytes()
    }

    /// Limits the total bytes of all files (their lengths, stored or not): an `allocate`,
    /// `reserve` or `set_len` growing a file beyond it fails with ENOSPC.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.lock().capacity = bytes;
    }

    /// Makes every later `sync` and `sync_dir` fail with EIO (until set back to false).
    pub fn set_fail_sync(&self, fail: bool) {
        self.lock().fail_sync = fail;
    }

    /// Arms a power failure: after `ops` more mutating operations (create, rename, remove,
    /// directory sync, write, length change, allocation, sync) have succeeded, every further one
    /// fails with EIO, as if the machine had stopped there, until [`Self::crash`] (which also
    /// disarms it). `None` disarms. Lets a test stop the log in the middle of a multi-step job
    /// (a truncation, a reset, an epoch update) and check what a restart sees.
    pub fn fail_after(&self, ops: Option<u64>) {
        self.lock().power_left = ops;
    }

    /// Makes every later file sync take `delay` (slept without holding the disk), so that work
    /// queues up behind a sync as it does behind a real disk's.
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        self.lock().sync_delay = delay;
    }

    /// File writes that carried data and file syncs done so far (both successful), for tests
    /// that count system calls the log would make.
    pub fn io_counts(&self) -> (u64, u64) {
        let st = self.lock();
        (st.writes, st.syncs)
    }

    /// Whether an armed power failure has struck (its budget is spent).
    pub fn power_failed(&self) -> bool {
        self.lock().power_left == Some(0)
    }

    /// Simulates power loss: unsynced operations are dropped, except what the disk's
    /// [`CrashModel`] draws (by default a random in-order prefix of them per file, and for the
    /// directory, whose last member may be torn). Every handle opened before the crash fails from
    /// now on.
    pub fn crash(&self) {
        let model = self.lock().crash_model;
        self.crash_with(Landing::Drawn(model));
    }

    /// Simulates power loss that keeps nothing unsynced: every file and the directory are
    /// exactly as last synced (no draw is made). For scripted crash cases that need the worst
    /// loss rather than a random one.
    pub fn crash_losing_unsynced(&self) {
        self.crash_with(Landing::Nothing);
    }

    /// Simulates power loss that keeps exactly the unsynced pages `keep` accepts: it is asked,
    /// for each file with unsynced writes (by the name it had, or `""` for a removed one) and
    /// each [`FAULT_PAGE_BYTES`] page of it those writes touched (by index: offset / page size),
    /// whether that page reached the disk; an accepted page lands with every unsynced write to
    /// it, a refused one keeps its synced bytes. No unsynced length change and no unsynced
    /// directory operation survives. For scripted out-of-order writeback cases (a later page of a
    /// batch on disk, an earlier one not).
    pub fn crash_keeping_pages(&self, mut keep: impl FnMut(&str, u64) -> bool) {
        self.crash_with(Landing::Pages(&mut keep));
    }

    fn crash_with(&self, landing: Landing<'_>) {
        let mut st = self.lock();
        let st = &mut *st;
        // The names the files had, for a scripted choice (before the directory is settled).
        let names: HashMap<u64, String> = st.current_dir.iter().map(|(n, &ino)| (ino, n.clone())).collect();
        let mut landing = landing;
        // Directory first: decide which names survive.
        let pending_dir = std::mem::take(&mut st.pending_dir);
        match &landing {
            Landing::Drawn(CrashModel::Prefix) => {
                let keep = st.rng.upto(pending_dir.len() as u64) as usize;
                for op in &pending_dir[..keep] {
                    apply_dir_op(&mut st.durable_dir, op);
                }
            }
            Landing::Drawn(CrashModel::Subset) => {
                for op in &pending_dir {
                    if st.rng.chance(1, 2) {
                        apply_dir_op(&mut st.durable_dir, op);
                    }
                }
            }
            Landing::Nothing | Landing::Pages(_) => {}
        }
        st.current_dir = st.durable_dir.clone();
        // Files: iterate in inode order so the draws do not depend on HashMap order.
        let mut inos: Vec<u64> = st.inodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let node = st.inodes.get_mut(&ino).expect("inode listed above");
            let pending = std::mem::take(&mut node.pending);
            let mut durable = std::mem::take(&mut node.durable);
            match &mut landing {
                Landing::Nothing => {}
                Landing::Drawn(CrashModel::Prefix) => {
                    let keep = st.rng.upto(pending.len() as u64) as usize;
                    for op in &pending[..keep] {
                        durable.apply(op);
                    }
                    if let Some(FileOp::Write { offset, data }) = pending.get(keep) {
                        if st.rng.chance(1, 2) && !data.is_empty() {
                            let cut = st.rng.upto(data.len() as u64 - 1) as usize;
                            durable.apply(&FileOp::Write { offset: *offset, data: data[..cut].to_vec() });
                        }
                    }
                }
                Landing::Drawn(CrashModel::Subset) => {
                    let rng = &mut st.rng;
                    let lengths = pending.iter().filter(|op| matches!(op, FileOp::SetLen(_))).count();
                    let lengths = rng.upto(lengths as u64) as usize;
                    let mut keep = |_page: u64, pieces: &[&[u8]]| {
                        let whole = rng.upto(pieces.len() as u64) as usize;
                        // The next piece lands in part a third of the time: a random run of it.
                        let part = pieces.get(whole).filter(|p| !p.is_empty() && rng.chance(1, 3)).map(|p| {
                            let a = rng.upto(p.len() as u64 - 1) as usize;
                            let b = a + 1 + rng.upto((p.len() - a - 1) as u64) as usize;
                            (a, b)
                        });
                        PageLanding { whole, part }
                    };
                    land_subset(&mut durable, pending, &mut keep, lengths);
                }
                Landing::Pages(choose) => {
                    let name = names.get(&ino).map_or("", String::as_str);
                    let mut keep = |page: u64, pieces: &[&[u8]]| PageLanding {
                        whole: if choose(name, page) { pieces.len() } else { 0 },
                        part: None,
                    };
                    land_subset(&mut durable, pending, &mut keep, 0);
                }
            }
            node.current = durable.clone();
            node.durable = durable;
        }
        let live: std::collections::HashSet<u64> = st.durable_dir.values().copied().collect();
        st.inodes.retain(|ino, _| live.contains(ino));
        st.generation += 1;
        st.crashes += 1;
        st.power_left = None;
    }

    /// How many crashes this disk went through.
    pub fn crashes(&self) -> u64 {
        self.lock().crashes
    }

    /// How many writes, length changes and directory changes are not yet synced (a test aid).
    pub fn unsynced_ops(&self) -> usize {
        let st = self.lock();
        st.inodes.values().map(|i| i.pending.len()).sum::<usize>() + st.pending_dir.len()
    }

    /// The current contents of `name` (synced or not), for tests that inspect bytes.
    pub fn contents(&self, name: &str) -> Option<Vec<u8>> {
        let st = self.lock();
        st.current_dir.get(name).and_then(|ino| st.inodes.get(ino)).map(|i| i.current.to_vec())
    }

    /// The bytes the disk holds in memory for its file images, current and durable (a test
    /// aid: the images are sparse in their trailing zeros).
    #[cfg(test)]
    fn stored_bytes(&self) -> usize {
        self.lock().inodes.values().map(|i| i.current.stored.len() + i.durable.stored.len()).sum()
    }

    fn stale() -> io::Error {
        io::Error::other("file handle from before a simulated crash")
    }
}

fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad file name {name:?}")));
    }
    Ok(())
}

impl Storage for FaultStorage {
    type File = FaultFile;
    type ReadFile = FaultReadFile;

    fn open_read(&self, name: &str) -> io::Result<FaultReadFile> {
        self.open(name).map(FaultReadFile)
    }

    fn create(&self, name: &str) -> io::Result<FaultFile> {
        check_name(name)?;
        let mut st = self.lock();
        if st.current_dir.contains_key(name) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{name} exists")));
        }
        st.power()?;
        let ino = st.next_ino;
        st.next_ino += 1;
        st.inodes.insert(ino, Inode::default());
        st.current_dir.insert(name.to_string(), ino);
        st.pending_dir.push(DirOp::Create(name.to_string(), ino));
        Ok(FaultFile { state: self.state.clone(), ino, generation: st.generation })
    }

    fn open(&self, name: &str) -> io::Result<FaultFile> {
        check_name(name)?;
        let st = self.lock();
        let ino = *st
            .current_dir
            .get(name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{name} not found")))?;
        Ok(FaultFile { state: self.state.clone(), ino, generation: st.generation })
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        check_name(from)?;
        check_name(to)?;
        let mut st = self.lock();
        if !st.current_dir.contains_key(from) {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("{from} not found")));
        }
        st.power()?;
        let op = DirOp::Rename(from.to_string(), to.to_string());
        apply_dir_op(&mut st.current_dir, &op);
        st.pending_dir.push(op);
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        check_name(name)?;
        let mut st = self.lock();
        if !st.current_dir.contains_key(name) {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("{name} not found")));
        }
        st.power()?;
        let op = DirOp::Remove(name.to_string());
        apply_dir_op(&mut st.current_dir, &op);
        st.pending_dir.push(op);
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.lock().current_dir.keys().cloned().collect())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut st = self.lock();
        if st.fail_sync {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        st.power()?;
        st.durable_dir = st.current_dir.clone();
        st.pending_dir.clear();
        Ok(())
    }

    fn display_name(&self, name: &str) -> String {
        format!("fault:{name}")
    }

    fn append_mode(&self) -> AppendMode {
        self.lock().mode
    }
}

/// A file on a [`FaultStorage`].
pub struct FaultFile {
    state: Arc<Mutex<State>>,
    ino: u64,
    generation: u64,
}

impl std::fmt::Debug for FaultFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultFile").field("ino", &self.ino).field("generation", &self.generation).finish()
    }
}

impl FaultFile {
    fn with<R>(&self, f: impl FnOnce(&mut State, u64) -> io::Result<R>) -> io::Result<R> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.generation != self.generation || !st.inodes.contains_key(&self.ino) {
            return Err(FaultStorage::stale());
        }
        f(&mut st, self.ino)
    }

    /// One write of `head` then `rest` (one system call of the real backend's), recorded as the
    /// append mode says: one pending operation through the mapping, one per page with pwrite.
    fn write_parts(&mut self, offset: u64, head: &[u8], rest: &[u8]) -> io::Result<()> {
        self.with(|st, ino| {
            let n = node(st, ino);
            let total = head.len() + rest.len();
            let end = offset.checked_add(total as u64);
            if end.is_none_or(|e| e > n.current.len()) {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "write past the allocated length"));
            }
            if total == 0 {
                return Ok(());
            }
            st.power()?;
            st.writes += 1;
            let mode = st.mode;
            let n = node(st, ino);
            let data = if rest.is_empty() {
                head.to_vec()
            } else {
                let mut joined = Vec::with_capacity(total);
                joined.extend_from_slice(head);
                joined.extend_from_slice(rest);
                joined
            };
            let op = FileOp::Write { offset, data };
            n.current.apply(&op);
            match mode {
                AppendMode::Mapped => n.pending.push(op),
                // One pending operation per page the pwrite fills, in order.
                AppendMode::Pwrite => n.pending.extend(page_pieces(vec![op])),
            }
            Ok(())
        })
    }

    /// Grows the file to `len` (nothing if it is that long already): `allocate` when `sync`
    /// (the length made durable with the file's earlier writes, as the real backend's fdatasync
    /// does), `reserve` when not (the length is pending like a `set_len`'s, durable at the next
    /// sync). Either refuses past the capacity (ENOSPC), and counts against a power failure;
    /// only `allocate`, which syncs, fails under [`FaultStorage::set_fail_sync`].
    fn grow(&mut self, len: u64, sync: bool) -> io::Result<()> {
        self.with(|st, ino| {
            let cur = node(st, ino).current.len();
            if len <= cur {
                return Ok(());
            }
            st.power()?;
            if let Some(cap) = st.capacity {
                if st.used_bytes() + (len - cur) > cap {
                    return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                }
            }
            if sync && st.fail_sync {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            let n = node(st, ino);
            let op = FileOp::SetLen(len);
            n.current.apply(&op);
            n.pending.push(op);
            if sync {
                sync_node(n);
            }
            Ok(())
        })
    }
}

/// A read-only handle on a [`FaultStorage`]. It reads the file's current bytes (removed or not,
/// as an unlinked file stays readable through an open descriptor), so it reaches as far as the
/// file does now; after a simulated crash it fails like every older handle.
#[derive(Debug)]
pub struct FaultReadFile(FaultFile);

impl StorageRead for FaultReadFile {
    fn len(&self) -> u64 {
        self.0.with(|st, ino| Ok(node(st, ino).current.len())).unwrap_or(0)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        StorageFile::read_at(&self.0, offset, buf)
    }
}

fn node(st: &mut State, ino: u64) -> &mut Inode {
    st.inodes.get_mut(&ino).expect("checked by FaultFile::with")
}

fn sync_node(n: &mut Inode) {
    for op in std::mem::take(&mut n.pending) {
        n.durable.apply(&op);
    }
    // Lengths are part of the image: after applying every op the two images agree.
    debug_assert_eq!(n.durable, n.current);
}

impl StorageFile for FaultFile {
    fn len(&self) -> io::Result<u64> {
        self.with(|st, ino| Ok(node(st, ino).current.len()))
    }

    fn allocate(&mut self, len: u64) -> io::Result<()> {
        self.grow(len, true)
    }

    fn reserve(&mut self, len: u64) -> io::Result<()> {
        self.grow(len, false)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.with(|st, ino| {
            let cur = node(st, ino).current.len();
            st.power()?;
            if let Some(cap) = st.capacity {
                if len > cur && st.used_bytes() + (len - cur) > cap {
                    return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                }
            }
            let n = node(st, ino);
            let op = FileOp::SetLen(len);
            n.current.apply(&op);
            n.pending.push(op);
            Ok(())
        })
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_parts(offset, data, &[])
    }

    fn write_at_split(&mut self, offset: u64, head: &[u8], rest: &[u8]) -> io::Result<()> {
        self.write_parts(offset, head, rest)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.with(|st, ino| {
            let n = node(st, ino);
            let end = offset.checked_add(buf.len() as u64);
            match end {
                Some(e) if e <= n.current.len() => {
                    n.current.read(offset, buf);
                    Ok(())
                }
                _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file")),
            }
        })
    }

    fn sync(&mut self) -> io::Result<()> {
        let delay = self.state.lock().unwrap_or_else(|e| e.into_inner()).sync_delay;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        self.with(|st, ino| {
            if st.fail_sync {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            st.power()?;
            st.syncs += 1;
            sync_node(node(st, ino));
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_losing_unsynced_keeps_exactly_what_was_synced() {
        // Every seed: a random crash might keep part of it, this one never does.
        for seed in 0..50 {
            let disk = FaultStorage::new(seed);
            let mut f = disk.create("a").unwrap();
            f.allocate(16).unwrap();
            f.write_at(0, b"durable").unwrap();
            f.sync().unwrap();
            disk.sync_dir().unwrap();
            f.write_at(7, b" and not").unwrap();
            disk.create("b").unwrap();
            disk.crash_losing_unsynced();
            let a = disk.contents("a").unwrap();
            assert_eq!(&a[..7], b"durable");
            assert!(a[7..].iter().all(|b| *b == 0), "seed {seed}: unsynced bytes kept");
            assert_eq!(disk.contents("b"), None);
            assert_eq!(disk.unsynced_ops(), 0);
        }
    }

    #[test]
    fn a_torn_pwrite_keeps_a_prefix_of_its_pages() {
        let data: Vec<u8> = (0..3 * FAULT_PAGE_BYTES + 100).map(|i| (i % 251) as u8 + 1).collect();
        let mut torn_inside = 0;
        for seed in 0..200 {
            let disk = FaultStorage::with_append_mode(seed, AppendMode::Pwrite);
            let mut f = disk.create("a").unwrap();
            f.allocate(5 * FAULT_PAGE_BYTES).unwrap();
            disk.sync_dir().unwrap();
            // Starts mid-page: pieces of 4000, 4096, 4096 and 196 bytes.
            f.write_at(96, &data).unwrap();
            assert_eq!(disk.unsynced_ops(), 4);
            disk.crash();
            let a = disk.contents("a").unwrap();
            let kept = a[96..96 + data.len()].iter().zip(&data).take_while(|(x, y)| x == y).count();
            assert!(a[96 + kept..].iter().all(|&b| b == 0), "seed {seed}: bytes after the prefix");
            torn_inside += u32::from(
                kept > 0 && kept < data.len() && !((96 + kept) as u64).is_multiple_of(FAULT_PAGE_BYTES),
            );
        }
        assert!(torn_inside > 0, "no crash tore a page of the pwrite");
    }

    /// The subset model, in either append mode: every byte of a multi-page write is either its
    /// old (synced) value or its new one, each page on its own, and over the seeds a later page
    /// lands while an earlier one does not, and a page lands in part.
    #[test]
    fn a_subset_crash_keeps_pages_out_of_order() {
        let data: Vec<u8> = (0..3 * FAULT_PAGE_BYTES + 100).map(|i| (i % 251) as u8 + 1).collect();
        for mode in AppendMode::ALL {
            let (mut later_without_earlier, mut part_of_a_page) = (0, 0);
            for seed in 0..300 {
                let disk = FaultStorage::with_models(seed, mode, CrashModel::Subset);
                let mut f = disk.create("a").unwrap();
                f.allocate(5 * FAULT_PAGE_BYTES).unwrap();
                f.write_at(0, &[7; 96]).unwrap();
                f.sync().unwrap();
                disk.sync_dir().unwrap();
                f.write_at(96, &data).unwrap();
                disk.crash();
                let a = disk.contents("a").unwrap();
                assert_eq!(a.len() as u64, 5 * FAULT_PAGE_BYTES, "{mode} seed {seed}: length");
                assert_eq!(&a[..96], &[7; 96], "{mode} seed {seed}: synced bytes");
                assert!(a[96 + data.len()..].iter().all(|&b| b == 0), "{mode} seed {seed}: past the write");
                // Per page: landed whole, not at all, or in part (new bytes where any landed).
                let landed: Vec<(usize, usize)> = (0..4)
                    .map(|p| {
                        let lo = (p * FAULT_PAGE_BYTES as usize).max(96);
                        let hi = ((p + 1) * FAULT_PAGE_BYTES as usize).min(96 + data.len());
                        let new = (lo..hi).filter(|&i| a[i] == data[i - 96]).count();
                        assert!(
                            (lo..hi).all(|i| a[i] == data[i - 96] || a[i] == 0),
                            "{mode} seed {seed}: a byte that is neither old nor new"
                        );
                        (new, hi - lo)
                    })
                    .collect();
                let whole = |p: usize| landed[p].0 == landed[p].1;
                let none = |p: usize| landed[p].0 == 0;
                later_without_earlier += u32::from((1..4).any(|p| whole(p) && (0..p).any(none)));
                part_of_a_page += u32::from((0..4).any(|p| !whole(p) && !none(p)));
            }
            assert!(later_without_earlier > 0, "{mode}: no crash kept a later page without an earlier one");
            assert!(part_of_a_page > 0, "{mode}: no crash kept part of a page");
        }
    }

    /// Subset crashes of the directory: of two unsynced creates, the second can survive alone.
    #[test]
    fn a_subset_crash_keeps_any_directory_operations() {
        let mut second_alone = 0;
        for seed in 0..100 {
            let disk = FaultStorage::with_models(seed, AppendMode::Pwrite, CrashModel::Subset);
            disk.create("a").unwrap();
            disk.create("b").unwrap();
            disk.crash();
            second_alone += u32::from(disk.contents("a").is_none() && disk.contents("b").is_some());
        }
        assert!(second_alone > 0, "no crash kept the second create without the first");
    }

    /// The scripted crash lands exactly the pages chosen, whole, and nothing else unsynced.
    #[test]
    fn crash_keeping_pages_lands_exactly_the_pages_chosen() {
        for mode in AppendMode::ALL {
            let disk = FaultStorage::with_append_mode(1, mode);
            let mut f = disk.create("a").unwrap();
            f.allocate(4 * FAULT_PAGE_BYTES).unwrap();
            disk.sync_dir().unwrap();
            f.write_at(10, &vec![1; 3 * FAULT_PAGE_BYTES as usize]).unwrap();
            f.set_len(3 * FAULT_PAGE_BYTES).unwrap();
            disk.create("b").unwrap();
            let mut asked = Vec::new();
            disk.crash_keeping_pages(|name, page| {
                asked.push((name.to_string(), page));
                page == 2
            });
            assert_eq!(
                asked,
                [("a".to_string(), 0), ("a".to_string(), 1), ("a".to_string(), 2), ("a".to_string(), 3)]
            );
            let a = disk.contents("a").unwrap();
            assert_eq!(a.len() as u64, 4 * FAULT_PAGE_BYTES, "{mode}: the unsynced cut did not land");
            let p = FAULT_PAGE_BYTES as usize;
            assert!(a[..2 * p].iter().all(|&b| b == 0), "{mode}: pages 0 and 1 stayed as synced");
            assert!(a[2 * p..3 * p].iter().all(|&b| b == 1), "{mode}: page 2 landed whole");
            assert!(a[3 * p..].iter().all(|&b| b == 0), "{mode}: page 3 stayed as synced");
            assert_eq!(disk.contents("b"), None, "{mode}: no unsynced directory change lands");
        }
    }

    /// A snapshot-style file: reserved in 16 MiB, a few KB written. Its image stores what was
    /// written, not the reserved length, yet reads, `contents`, the length and the capacity all
    /// see the whole 16 MiB, zeros past the written bytes.
    #[test]
    fn a_reserved_file_stores_only_what_was_written() {
        const RESERVED: u64 = 16 << 20;
        for mode in AppendMode::ALL {
            let disk = FaultStorage::with_append_mode(3, mode);
            let mut f = disk.create("snap.tmp").unwrap();
            f.reserve(RESERVED).unwrap();
            let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8 + 1).collect();
            f.write_at(0, &data).unwrap();
            assert_eq!(f.len().unwrap(), RESERVED, "{mode}");
            assert_eq!(disk.stored_bytes(), data.len(), "{mode}: only the written bytes are stored");
            f.sync().unwrap();
            assert_eq!(disk.stored_bytes(), 2 * data.len(), "{mode}: current and durable, as written");

            let mut buf = vec![0xff; 8192];
            f.read_at(0, &mut buf).unwrap();
            assert_eq!(&buf[..data.len()], &data[..], "{mode}");
            assert!(buf[data.len()..].iter().all(|&b| b == 0), "{mode}: zeros past the written bytes");
            let r = disk.open_read("snap.tmp").unwrap();
            assert_eq!(r.len(), RESERVED, "{mode}");
            let mut tail = vec![0xff; 4096];
            r.read_at(RESERVED - 4096, &mut tail).unwrap();
            assert!(tail.iter().all(|&b| b == 0), "{mode}: zeros at the end");
            assert!(r.read_at(RESERVED - 1, &mut [0; 2]).is_err(), "{mode}: past the end");
            let all = disk.contents("snap.tmp").unwrap();
            assert_eq!(all.len() as u64, RESERVED, "{mode}");
            assert_eq!(&all[..data.len()], &data[..], "{mode}");
            assert!(all[data.len()..].iter().all(|&b| b == 0), "{mode}");

            // The capacity counts the whole length.
            disk.set_capacity(Some(RESERVED + 100));
            assert_eq!(f.reserve(RESERVED + 101).unwrap_err().raw_os_error(), Some(libc::ENOSPC), "{mode}");
            assert_eq!(f.len().unwrap(), RESERVED, "{mode}: unchanged by the refusal");
            disk.set_capacity(None);

            // The real snapshot writer, mid-snapshot: its header written in a reserved file.
            let writer = crate::snapshot::SnapshotWriter::create(&disk, 7).unwrap();
            let tmp = format!("{}{}", writer.name(), crate::storage::TMP_SUFFIX);
            assert_eq!(disk.open(&tmp).unwrap().len().unwrap(), RESERVED, "{mode}");
            assert!(disk.stored_bytes() < 3 * data.len(), "{mode}: {} bytes stored", disk.stored_bytes());
            writer.finish().unwrap();
            assert!(disk.stored_bytes() < 3 * data.len(), "{mode}: {} bytes stored", disk.stored_bytes());
        }
    }

    /// `reserve` grows the length without a sync: a crash before the next sync keeps or drops
    /// the new length (and the writes into it) as the crash model draws, never touching what was
    /// synced; both outcomes happen in each model.
    #[test]
    fn a_crash_between_a_reserve_and_its_sync_keeps_or_drops_it_per_model() {
        const OLD: u64 = 2 * FAULT_PAGE_BYTES;
        const RESERVED: u64 = 64 * FAULT_PAGE_BYTES;
        let data: Vec<u8> = (0..3 * FAULT_PAGE_BYTES).map(|i| (i % 251) as u8 + 1).collect();
        let at = OLD as usize + 100;
        for model in CrashModel::ALL {
            for mode in AppendMode::ALL {
                let (mut kept, mut dropped) = (0, 0);
                for seed in 0..200 {
                    let disk = FaultStorage::with_models(seed, mode, model);
                    let mut f = disk.create("a").unwrap();
                    f.allocate(OLD).unwrap();
                    f.write_at(0, &[7; 100]).unwrap();
                    f.sync().unwrap();
                    disk.sync_dir().unwrap();
                    let syncs = disk.io_counts().1;
                    f.reserve(RESERVED).unwrap();
                    assert_eq!(disk.io_counts().1, syncs, "{model:?} {mode}: reserve does not sync");
                    assert_eq!(disk.unsynced_ops(), 1, "{model:?} {mode}: the length is pending");
                    f.write_at(at as u64, &data).unwrap();
                    disk.crash();

                    let a = disk.contents("a").unwrap();
                    let ctx = format!("{model:?} {mode} seed {seed}");
                    assert_eq!(&a[..100], &[7; 100], "{ctx}: synced bytes");
                    assert!(a[100..at.min(a.len())].iter().all(|&b| b == 0), "{ctx}: synced zeros");
                    // Every byte of the write is its old value (zero) or its new one.
                    let written = &a[at.min(a.len())..(at + data.len()).min(a.len())];
                    assert!(
                        written.iter().zip(&data).all(|(&x, &y)| x == 0 || x == y),
                        "{ctx}: a byte that is neither old nor new"
                    );
                    assert!(a.get(at + data.len()..).unwrap_or(&[]).iter().all(|&b| b == 0), "{ctx}");
                    let len = a.len() as u64;
                    match model {
                        // In order: the write lands only after the length it needs.
                        CrashModel::Prefix => {
                            assert!(len == OLD || len == RESERVED, "{ctx}: length {len}");
                            if len == OLD {
                                assert!(written.is_empty(), "{ctx}: a write without its length");
                            }
                        }
                        // Out of order: pages of the write may land without the length change,
                        // extending the file only as far as they reach.
                        CrashModel::Subset => {
                            assert!(
                                len == RESERVED || len <= (at + data.len()) as u64,
                                "{ctx}: length {len}"
                            );
                            assert!(len >= OLD, "{ctx}: length {len}");
                            if len != RESERVED && len > OLD {
                                assert_ne!(a[len as usize - 1], 0, "{ctx}: grown past its last landed byte");
                            }
                        }
                    }
                    kept += u32::from(len == RESERVED);
                    dropped += u32::from(len != RESERVED);

                    // After the crash a reserve and a sync make the length durable.
                    let mut f = disk.open("a").unwrap();
                    f.reserve(RESERVED).unwrap();
                    f.sync().unwrap();
                    disk.crash();
                    assert_eq!(disk.open("a").unwrap().len().unwrap(), RESERVED, "{ctx}: synced length");
                }
                assert!(kept > 0 && dropped > 0, "{model:?} {mode}: kept {kept}, dropped {dropped}");
            }
        }
        // Nothing unsynced kept: exactly the synced length.
        let disk = FaultStorage::new(1);
        let mut f = disk.create("a").unwrap();
        f.allocate(OLD).unwrap();
        disk.sync_dir().unwrap();
        f.reserve(RESERVED).unwrap();
        disk.crash_losing_unsynced();
        assert_eq!(disk.contents("a").unwrap().len() as u64, OLD);
    }

    /// `reserve` counts against an armed power failure like `allocate`, and a failed one leaves
    /// the file as it was.
    #[test]
    fn reserve_stops_at_a_power_failure() {
        let disk = FaultStorage::new(5);
        let mut f = disk.create("a").unwrap();
        disk.fail_after(Some(0));
        assert_eq!(f.reserve(1 << 20).unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(f.len().unwrap(), 0);
        assert_eq!(f.allocate(1 << 20).unwrap_err().raw_os_error(), Some(libc::EIO));
        disk.fail_after(None);
        f.reserve(1 << 20).unwrap();
        assert_eq!(f.len().unwrap(), 1 << 20);
        // Not growing the file: nothing to do, so no operation is spent.
        disk.fail_after(Some(0));
        f.reserve(4096).unwrap();
    }

    /// The sparse image against a plain byte vector, over random operations: the same bytes.
    #[test]
    fn a_sparse_image_reads_as_the_plain_bytes() {
        let mut rng = SplitMix64::new(11);
        for _ in 0..200 {
            let (mut img, mut plain) = (Image::default(), Vec::<u8>::new());
            for _ in 0..30 {
                let op = if rng.chance(1, 3) {
                    FileOp::SetLen(rng.upto(3 * FAULT_PAGE_BYTES))
                } else {
                    let len = rng.upto(FAULT_PAGE_BYTES) as usize;
                    let data = (0..len).map(|_| rng.upto(2) as u8).collect();
                    FileOp::Write { offset: rng.upto(3 * FAULT_PAGE_BYTES), data }
                };
                img.apply(&op);
                match &op {
                    FileOp::Write { offset, data } => {
                        let end = *offset as usize + data.len();
                        if plain.len() < end {
                            plain.resize(end, 0);
                        }
                        plain[*offset as usize..end].copy_from_slice(data);
                    }
                    FileOp::SetLen(n) => plain.resize(*n as usize, 0),
                }
                assert_eq!(img.len(), plain.len() as u64);
                assert_eq!(img.to_vec(), plain);
                let from = rng.upto(plain.len() as u64) as usize;
                let to = from + rng.upto((plain.len() - from) as u64) as usize;
                let mut buf = vec![0xff; to - from];
                img.read(from as u64, &mut buf);
                assert_eq!(buf, plain[from..to]);
                let other = Image { stored: plain.clone(), len: plain.len() as u64 };
                assert_eq!(img, other);
            }
        }
    }
}
