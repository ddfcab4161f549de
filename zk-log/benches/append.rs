//! Append + sync throughput on the real file backend, by batch size: the cost of one group commit
//! (one msync) spread over 1, 10, 100 and 1000 records of about 150 bytes.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use zk_log::conformance::sample_batch;
use zk_log::{FileStorage, LogOptions, SegmentLog};

fn append_sync(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_sync");
    g.sample_size(20);
    for batch in [1i64, 10, 100, 1000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = FileStorage::open_dir(dir.path().join("zkrs-log")).expect("open dir");
        let mut log = SegmentLog::open(storage, LogOptions::default()).expect("open log");
        let mut next = 1i64;
        let bytes = sample_batch(1, batch, 150).bytes();
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_with_input(BenchmarkId::new("records", batch), &batch, |b, &n| {
            // Encoding happens on the core's thread in the server, so it is left out of the timing.
            b.iter_batched(
                || {
                    let rb = sample_batch(next, next + n - 1, 150);
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
        eprintln!("batch {batch}: {bytes} bytes per batch, {} segments", log.segment_names().len());
    }
    g.finish();
}

criterion_group!(benches, append_sync);
criterion_main!(benches);
