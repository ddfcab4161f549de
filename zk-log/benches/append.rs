//! Append + sync throughput on the real file backend, by append mode (through the mapping or with
//! pwrite) and batch size: the cost of one group commit (one fdatasync) spread over 1, 10, 100 and
//! 1000 records of about 150 bytes.
// criterion_group! defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use zk_log::{AppendMode, FileStorage, LogOptions, RecordBatch, SegmentLog};
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
    for mode in AppendMode::ALL {
        for n_records in [1i64, 10, 100, 1000] {
            let dir = tempfile::tempdir().expect("tempdir");
            let storage = FileStorage::open_dir_with(dir.path().join("zkrs-log"), mode).expect("open dir");
            let log =
                std::cell::RefCell::new(SegmentLog::open(storage, LogOptions::default()).expect("open log"));
            let mut next = 1i64;
            let bytes = batch(1, n_records).bytes();
            g.throughput(Throughput::Elements(n_records as u64));
            let id = BenchmarkId::new(format!("{mode}/records"), n_records);
            g.bench_with_input(id, &n_records, |b, &n| {
                // Encoding happens on the core's thread in the server, so it is left out of the
                // timing. prepare_next runs between commits, as the server's writer does.
                b.iter_batched(
                    || {
                        let rb = batch(next, n);
                        next += n;
                        log.borrow_mut().prepare_next();
                        rb
                    },
                    |rb| {
                        let mut log = log.borrow_mut();
                        log.append(&rb).expect("append");
                        log.sync().expect("sync");
                    },
                    BatchSize::PerIteration,
                )
            });
            eprintln!(
                "{mode}, batch of {n_records}: {bytes} bytes, {} segments",
                log.borrow().segment_names().len()
            );
        }
    }
    g.finish();
}

/// The floor a commit is measured against: 150 bytes written with pwrite into a preallocated,
/// zero-filled file, then fdatasync; and the same write made durable by itself with pwritev2's
/// RWF_DSYNC (the alternative to pwrite + fdatasync the log could use). The difference between
/// `append_sync/<mode>/records/1` and these is what the log adds.
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
    g.bench_function("pwritev2_rwf_dsync_150B", |b| {
        b.iter(|| {
            pwrite_dsync(&f, &rec, off);
            off = (off + 150) % (len - 150);
        })
    });
    g.finish();
}

/// One pwritev2 with RWF_DSYNC: the write returns once it is durable.
#[allow(unsafe_code)]
fn pwrite_dsync(f: &std::fs::File, data: &[u8], off: u64) {
    use std::os::unix::io::AsRawFd;
    let iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: one iovec pointing at `data`, which outlives the call; the descriptor is open.
    let n = unsafe { libc::pwritev2(f.as_raw_fd(), &iov, 1, off as libc::off_t, libc::RWF_DSYNC) };
    assert_eq!(n, data.len() as isize, "pwritev2: {}", std::io::Error::last_os_error());
}

criterion_group!(benches, append_sync, sync_floor);
criterion_main!(benches);
