//! Readers on other threads while the writer thread appends, rolls segments, truncates, resets
//! and purges them, on the real disk (reads go through read-only mappings): every read returns
//! records in zxid order without a hole, each whole (checksum) and the one of its zxid, and
//! nothing ever faults (a read of a cut mapping would be SIGBUS and kill the test).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use zk_log::conformance::{sample_batch, sample_txn};
use zk_log::fault::SplitMix64;
use zk_log::{FileStorage, LogError, LogOptions, LogWriter, SegmentLog, WriterReport};

/// Records are about this big; each truncation or reset changes the size of what is appended
/// after it, so that a reader resuming at an offset from before a truncation would land inside a
/// different record and fail its checks. A record's header is a function of its zxid alone.
const SIZE: usize = 120;

fn size_of_generation(gen: u64) -> usize {
    SIZE + 13 * (gen % 20) as usize
}

#[test]
fn readers_follow_a_busy_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = FileStorage::open_dir(dir.path().join(zk_log::LOG_DIR_NAME)).expect("open dir");
    let opts = LogOptions { prealloc_bytes: 4096, segment_bytes_max: 12 << 10 };
    let log = SegmentLog::open(storage, opts).expect("open");
    let failed = Arc::new(AtomicBool::new(false));
    let failed_cb = failed.clone();
    let w = LogWriter::spawn_with_reports(log, 16, move |r| {
        if let WriterReport::Failed(e) = r {
            eprintln!("writer failed: {e}");
            failed_cb.store(true, Ordering::SeqCst);
        }
    })
    .expect("spawn");
    let stop = Arc::new(AtomicBool::new(false));
    let entries_read = Arc::new(AtomicU64::new(0));
    let not_in_log = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for t in 0..2u64 {
        let r = w.reader();
        let (stop, entries_read, not_in_log) = (stop.clone(), entries_read.clone(), not_in_log.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = SplitMix64::new(t + 1);
            while !stop.load(Ordering::Relaxed) {
                let base = r.base_zxid();
                let durable = r.durable_zxid();
                if durable <= base {
                    std::thread::yield_now();
                    continue;
                }
                // Often the oldest record, which a purge or reset may take away under the read.
                let from = if rng.chance(1, 4) {
                    base + 1
                } else {
                    base + 1 + rng.upto((durable - base - 1) as u64) as i64
                };
                // Up to several holds of the view lock per call (READ_HOLD_BYTES).
                let max = 1 + rng.upto(5000) as usize;
                match r.read_range(from, durable + 10, max) {
                    Ok(got) => {
                        assert!(got.len() <= max);
                        let mut prev: Option<i64> = None;
                        for e in &got {
                            let z = e.header.zxid;
                            assert!(z >= from, "zxid {z} read from {from}");
                            if let Some(p) = prev {
                                assert!(z == p + 1 || (z >> 32) > (p >> 32), "zxid {z} after {p}");
                            }
                            // The checksum was verified by the read; the header (zxid, type,
                            // cxid, time) must be this zxid's whatever the generation.
                            let (h, _) = sample_txn(z, SIZE);
                            assert_eq!(e.header, h, "header of zxid {z}");
                            prev = Some(z);
                        }
                        entries_read.fetch_add(got.len() as u64, Ordering::Relaxed);
                    }
                    // Purged, truncated or reset between the two loads above and the read.
                    Err(LogError::NotInLog { .. }) => {
                        not_in_log.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("read from {from}: {e}"),
                }
            }
        }));
    }
    let mut rng = SplitMix64::new(99);
    let mut next = 1i64;
    let mut floor = 0i64;
    let mut gen = 0u64;
    let (mut truncations, mut purges, mut resets) = (0, 0, 0);
    for _ in 0..3000 {
        let n = 1 + rng.upto(8) as i64;
        w.submit(sample_batch(next, next + n - 1, size_of_generation(gen))).expect("submit");
        next += n;
        match rng.upto(99) {
            0..=2 if next > 40 => {
                // Cut back a little and append the same records again.
                // Never below the last reset: that part is in a snapshot, not the log.
                let to = (next - 1 - rng.upto(30) as i64).max(floor);
                w.truncate_after(to).expect("truncate");
                next = to + 1;
                truncations += 1;
                gen += 1;
            }
            3..=5 if next > 600 => {
                w.purge_before(next - 500).expect("purge");
                purges += 1;
            }
            6 if rng.chance(1, 4) => {
                // A snapshot from a leader, ahead of this log.
                let to = next + 50;
                w.reset_to(to).expect("reset");
                next = to + 1;
                floor = to;
                resets += 1;
                gen += 1;
            }
            _ => {}
        }
    }
    let log = w.shutdown().expect("shutdown");
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a reader thread failed");
    }
    assert!(!failed.load(Ordering::SeqCst), "the writer reported a failure");
    assert_eq!(log.last_zxid(), next - 1);
    let read = entries_read.load(Ordering::Relaxed);
    eprintln!(
        "{read} entries read, {} NotInLog, {truncations} truncations, {purges} purges, {resets} resets, {} segments",
        not_in_log.load(Ordering::Relaxed),
        log.segment_names().len()
    );
    assert!(read > 10_000, "the readers barely read ({read} entries)");
    assert!(truncations > 0 && purges > 0 && resets > 0);
}
