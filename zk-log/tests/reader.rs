//! Readers on other threads while the writer thread appends, rolls segments, truncates, resets
//! and purges them, on the real disk (reads go through read-only mappings): every read returns
//! records in zxid order without a hole, each exactly as appended, and nothing ever faults
//! (a read of a cut mapping would be SIGBUS and kill the test).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use zk_log::conformance::{sample_batch, sample_txn};
use zk_log::fault::SplitMix64;
use zk_log::{FileStorage, LogError, LogOptions, LogWriter, SegmentLog, WriterReport};

/// Every record's content is a function of its zxid alone, so a record truncated and appended
/// again is the same record, and readers can check any record they meet.
const SIZE: usize = 120;

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
                let max = 1 + rng.upto(300) as usize;
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
                            let (h, txn) = sample_txn(z, SIZE);
                            assert_eq!((&e.header, &e.txn), (&h, &txn), "content of zxid {z}");
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
    let (mut truncations, mut purges, mut resets) = (0, 0, 0);
    for _ in 0..3000 {
        let n = 1 + rng.upto(8) as i64;
        w.submit(sample_batch(next, next + n - 1, SIZE)).expect("submit");
        next += n;
        match rng.upto(99) {
            0..=2 if next > 40 => {
                // Cut back a little and append the same records again.
                // Never below the last reset: that part is in a snapshot, not the log.
                let to = (next - 1 - rng.upto(30) as i64).max(floor);
                w.truncate_after(to).expect("truncate");
                next = to + 1;
                truncations += 1;
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
