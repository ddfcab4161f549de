//! Append + sync throughput on the real file backend, by batch size: the cost of one group commit
//! (one msync) spread over 1, 10, 100 and 1000 records of about 150 bytes.

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

criterion_group!(benches, append_sync);
criterion_main!(benches);
