//! A commit writes back the few bytes it changed, not a whole large folio.
//!
//! The page cache keeps the folio size a page was created with, and a store through a mapping
//! dirties its whole folio. When a segment's zeros were written with 64 KiB `pwrite`s, every
//! 200-byte commit wrote back 64 KiB on a kernel with large folios (Linux 6.18, ext4): 44 KB of
//! disk writes per setData. The file backend now zero-fills through a mapping, which creates
//! single pages. A `pwrite` into such a page dirties that page alone too, so both append modes
//! write back the page or two a commit changed.

use zk_log::{AppendMode, FileStorage, Storage, StorageFile};

/// Bytes this thread has dirtied for writing to storage (Linux per-thread I/O accounting, which
/// counts a whole folio each time a store makes a clean one dirty).
fn thread_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    io.lines().find_map(|l| l.strip_prefix("write_bytes:")).and_then(|v| v.trim().parse().ok())
}

#[test]
fn small_commits_dirty_small_pages() {
    for mode in AppendMode::ALL {
        small_commits_dirty_small_pages_in(mode);
    }
}

fn small_commits_dirty_small_pages_in(mode: AppendMode) {
    let Some(start) = thread_write_bytes() else {
        eprintln!("NOT RUN: /proc/thread-self/io is not readable here");
        return;
    };
    let d = tempfile::tempdir().expect("tempdir");
    let s = FileStorage::open_dir_with(d.path().join("zkrs-log"), mode).expect("open dir");
    let mut f = s.create("segment").expect("create");
    // As the log's spare is prepared: 1 MiB at a time.
    for step in 1..=8u64 {
        f.allocate(step << 20).expect("allocate");
    }
    let prepared = thread_write_bytes().expect("io accounting");
    const COMMITS: u64 = 256;
    const RECORD: u64 = 200;
    for i in 0..COMMITS {
        f.write_at(i * RECORD, &[7u8; RECORD as usize]).expect("write");
        f.sync().expect("sync");
    }
    let committed = thread_write_bytes().expect("io accounting") - prepared;
    eprintln!("{mode}: zero-fill dirtied {} bytes; {COMMITS} commits dirtied {committed}", prepared - start);
    // Each commit dirties the page its record lands in (two when it straddles a boundary).
    assert!(
        committed <= COMMITS * 2 * 4096,
        "{mode}: {COMMITS} commits of {RECORD} bytes dirtied {committed} bytes: whole large folios each time"
    );
}
