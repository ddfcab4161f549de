//! Append + sync throughput on the real file backend, by batch size: the cost of one group commit
//! (one msync) spread over 1, 10, 100 and 1000 records of about 150 bytes.
// criterion_group! defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use zk_log::{FileStorage, LogOptions, RecordBatch, SegmentLog};
use zk_proto::{OpCode, SetDataTxn, Txn, TxnHeader};

/// Zxids `from..from+n` as setData txns of 150 bytes each on disk (16-byte frame + 134-byte payload).
fn batch(from: i64, n: i64) -> RecordBatch {
    let mut b = RecordBatch::new();
    for z in from..from + n {
        let h = TxnHeader {
            client_id: 0x1234,
            cxid: z as i32,
            zxid: z,
            time: 1_700_000_000_000,
            txn_type: OpCode::SetData.code(),
        };
        let t =
            Txn::SetData(SetDataTxn { path: "/bench".into(), data: Some(vec![7u8; 84].into()), version: 1 });
        b.push(&h, &t).expect("zxids follow");
    }
    b
}

fn append_sync(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_sync");
    g.sample_size(20);
    for n_records in [1i64, 10, 100, 1000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = FileStorage::open_dir(dir.path().join("zkrs-log")).expect("open dir");
        let mut log = SegmentLog::open(storage, LogOptions::default()).expect("open log");
        let mut next = 1i64;
        let bytes = batch(1, n_records).bytes();
        g.throughput(Throughput::Elements(n_records as u64));
        g.bench_with_input(BenchmarkId::new("records", n_records), &n_records, |b, &n| {
            // Encoding happens on the core's thread in the server, so it is left out of the timing.
            b.iter_batched(
                || {
                    let rb = batch(next, n);
                    next += n;
                    rb
                },
                |rb| {
                    log.append(&rb).expect("append");
                    log.sync().expect("sync");
                },
                BatchSize::PerIteration,
            )
        });
        eprintln!("batch of {n_records}: {bytes} bytes, {} segments", log.segment_names().len());
    }
    g.finish();
}

/// The floor a commit is measured against: 150 bytes written with pwrite into a preallocated,
/// zero-filled file, then fdatasync. The log writes through its mapping instead, and on ext4 here
/// syncing pages dirtied through a mapping costs more than syncing pages dirtied by pwrite; the
/// difference between `append_sync/records/1` and this is that cost.
fn sync_floor(c: &mut Criterion) {
    use std::os::unix::fs::FileExt;
    let mut g = c.benchmark_group("sync_floor");
    g.sample_size(20);
    let dir = tempfile::tempdir().expect("tempdir");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(dir.path().join("floor"))
        .expect("create");
    let len = 64u64 << 20;
    let zeros = vec![0u8; 1 << 16];
    let mut at = 0;
    while at < len {
        f.write_all_at(&zeros, at).expect("zero-fill");
        at += zeros.len() as u64;
    }
    f.sync_all().expect("sync");
    let rec = [7u8; 150];
    let mut off = 0u64;
    g.bench_function("pwrite_fdatasync_150B", |b| {
        b.iter(|| {
            f.write_all_at(&rec, off).expect("pwrite");
            f.sync_data().expect("fdatasync");
            off = (off + 150) % (len - 150);
        })
    });
    g.finish();
}

criterion_group!(benches, append_sync, sync_floor);
criterion_main!(benches);
