//! The behaviour every [`Storage`] backend must give the log, as a suite of checks.
//!
//! Tests call [`run_all`] with a function that returns a fresh, empty backend; each check gets its
//! own. The checks panic with a message on failure (they are test code), and work only through the
//! [`Storage`] trait, so a new backend is covered by adding one call.

use crate::format::{RecordBatch, SEGMENT_HEADER_BYTES};
use crate::{LogError, LogOptions, LogWriter, SegmentLog, Storage, StorageFile};
use bytes::Bytes;
use zk_proto::{
    CloseSessionTxn, CreateSessionTxn, CreateTxn, DeleteTxn, ErrorTxn, OpCode, SetDataTxn, Txn, TxnHeader,
};

/// A deterministic transaction for `zxid` whose encoding is about `size` bytes; the kind of txn
/// varies with the zxid so that the suite covers several bodies.
pub fn sample_txn(zxid: i64, size: usize) -> (TxnHeader, Txn) {
    let fill =
        |n: usize| Bytes::from((0..n).map(|i| (zxid as usize).wrapping_add(i) as u8).collect::<Vec<u8>>());
    let (op, txn) = match zxid % 7 {
        0 => (OpCode::CreateSession, Txn::CreateSession(CreateSessionTxn { time_out: 30_000 })),
        1 => (
            OpCode::Create,
            Txn::Create(CreateTxn {
                path: format!("/n{zxid}"),
                data: Some(fill(size.saturating_sub(60))),
                acl: Vec::new(),
                ephemeral: false,
                parent_cversion: zxid as i32,
            }),
        ),
        2 => (OpCode::Delete, Txn::Delete(DeleteTxn { path: format!("/n{zxid}") })),
        3 => (OpCode::Error, Txn::Error(ErrorTxn { err: -101 })),
        4 => (OpCode::CloseSession, Txn::CloseSession(CloseSessionTxn { paths2_delete: vec!["/e".into()] })),
        5 => (
            OpCode::Multi,
            Txn::Multi(vec![
                (OpCode::Delete, Txn::Delete(DeleteTxn { path: "/m".into() })),
                (
                    OpCode::SetData,
                    Txn::SetData(SetDataTxn { path: "/m2".into(), data: Some(fill(size / 4)), version: 3 }),
                ),
            ]),
        ),
        _ => (
            OpCode::SetData,
            Txn::SetData(SetDataTxn {
                path: "/a".into(),
                data: Some(fill(size.saturating_sub(50))),
                version: 1,
            }),
        ),
    };
    let hdr = TxnHeader {
        client_id: 0x1234,
        cxid: zxid as i32,
        zxid,
        time: 1_700_000_000_000 + zxid,
        txn_type: op.code(),
    };
    (hdr, txn)
}

/// Encodes sample txns `from..=to` (each about `size` bytes) as one batch.
pub fn sample_batch(from: i64, to: i64, size: usize) -> RecordBatch {
    let mut b = RecordBatch::new();
    for z in from..=to {
        let (h, t) = sample_txn(z, size);
        b.push(&h, &t).expect("sample zxids follow one another");
    }
    b
}

/// Small sizes so that a few records roll segments and cross preallocation steps.
pub fn small_options() -> LogOptions {
    LogOptions { prealloc_bytes: 1024, segment_bytes_max: 4096 }
}

/// Reads every record from `from` and checks it equals the sample txn of its zxid, that zxids run
/// `from..=to` without a hole. Panics otherwise.
pub fn assert_samples<S: Storage>(log: &SegmentLog<S>, from: i64, to: i64, size: usize) {
    let mut expect = from;
    for e in log.read_from(from).expect("read_from") {
        let e = e.expect("record reads back");
        let (h, t) = sample_txn(expect, size);
        assert_eq!(e.header, h, "header of zxid {expect}");
        assert_eq!(e.txn, t, "body of zxid {expect}");
        expect += 1;
    }
    assert_eq!(expect, to + 1, "records {from}..={to} expected, read up to {}", expect - 1);
}

fn open<S: Storage>(s: &S, opts: LogOptions) -> SegmentLog<S> {
    SegmentLog::open(s.clone(), opts).expect("log opens")
}

/// Runs every check, each on a fresh backend from `fresh`.
pub fn run_all<S: Storage>(fresh: &mut dyn FnMut() -> S) {
    round_trip(fresh());
    roll_and_seek(fresh());
    reopen_and_continue(fresh());
    truncate_after(fresh());
    purge(fresh());
    epochs_and_order(fresh());
    torn_tails(fresh());
    corruption_before_tail(fresh());
    newer_version_refused(fresh());
    missing_segment_is_a_gap(fresh());
    stray_segments(fresh());
    writer_group_commit(fresh());
}

/// Appended batches read back identically, before and after reopening.
pub fn round_trip<S: Storage>(s: S) {
    let mut log = open(&s, LogOptions { prealloc_bytes: 64 << 10, ..LogOptions::default() });
    assert_eq!(log.last_zxid(), 0);
    assert!(log.read_from(1).expect("empty read").next().is_none());
    let mut z = 1;
    for n in [1, 3, 10, 1, 50] {
        let batch: Vec<(TxnHeader, Txn)> = (z..z + n).map(|x| sample_txn(x, 150)).collect();
        let refs: Vec<(&TxnHeader, &Txn)> = batch.iter().map(|(h, t)| (h, t)).collect();
        assert_eq!(log.commit(&refs).expect("commit"), z + n - 1);
        z += n;
    }
    assert_eq!(log.durable_zxid(), z - 1);
    assert_samples(&log, 1, z - 1, 150);
    assert_samples(&log, 40, z - 1, 150);
    assert!(log.read_from(z).expect("read past end").next().is_none());
    drop(log);
    let log = open(&s, LogOptions::default());
    assert_eq!(log.last_zxid(), z - 1);
    assert_eq!(log.recovery().truncated_tail, None);
    assert_samples(&log, 1, z - 1, 150);
}

/// Small segments roll; every zxid can be sought (crossing index strides), also after reopening.
pub fn roll_and_seek<S: Storage>(s: S) {
    let mut log = open(&s, small_options());
    for z in (1..=400).step_by(4) {
        log.append(&sample_batch(z, z + 3, 100)).expect("append");
        log.sync().expect("sync");
    }
    let segs = log.segment_names();
    assert!(segs.len() > 5, "expected several segments, got {segs:?}");
    for from in [1, 2, 31, 32, 33, 64, 65, 200, 399, 400] {
        assert_samples(&log, from, 400, 100);
    }
    drop(log);
    let mut log = open(&s, small_options());
    assert_eq!(log.segment_names(), segs);
    for from in [1, 97, 250, 400] {
        assert_samples(&log, from, 400, 100);
    }
    // Explicit roll: the next batch starts a segment named for its first zxid.
    log.roll().expect("roll");
    log.roll().expect("second roll does nothing");
    log.append(&sample_batch(401, 401, 100)).expect("append");
    log.sync().expect("sync");
    assert_eq!(log.segment_names().last().map(String::as_str), Some("log.0000000000000191"));
    // Older segments are cut to their last record: file length == end.
    let first = &segs[0];
    let f = s.open(first).expect("open old segment");
    let len = f.len().expect("len");
    let mut hb = [0u8; 16];
    f.read_at(len - 16, &mut hb).expect("read");
    assert!(hb.iter().any(|&b| b != 0), "an older segment must end with record bytes, not zeros");
}

/// Appends continue after reopening, in the same segment.
pub fn reopen_and_continue<S: Storage>(s: S) {
    let opts = LogOptions { prealloc_bytes: 4096, segment_bytes_max: 1 << 20 };
    for round in 0..4i64 {
        let mut log = open(&s, opts);
        assert_eq!(log.last_zxid(), round * 10);
        log.append(&sample_batch(round * 10 + 1, round * 10 + 10, 120)).expect("append");
        log.sync().expect("sync");
        assert_eq!(log.segment_names().len(), 1);
    }
    let log = open(&s, opts);
    assert_samples(&log, 1, 40, 120);
}

/// truncate_after cuts mid-segment, at a segment boundary, and to before everything; appends then
/// continue from the cut, and all of it survives reopening.
pub fn truncate_after<S: Storage>(s: S) {
    let opts = small_options();
    let mut log = open(&s, opts);
    for z in (1..=200).step_by(5) {
        log.append(&sample_batch(z, z + 4, 90)).expect("append");
        log.sync().expect("sync");
    }
    log.truncate_after(500).expect("past the end is a no-op");
    assert_eq!(log.last_zxid(), 200);
    log.truncate_after(150).expect("truncate");
    assert_eq!(log.last_zxid(), 150);
    assert_eq!(log.durable_zxid(), 150);
    assert_samples(&log, 1, 150, 90);
    log.append(&sample_batch(151, 160, 90)).expect("append after truncate");
    log.sync().expect("sync");
    drop(log);
    let mut log = open(&s, opts);
    assert_samples(&log, 1, 160, 90);
    // At a segment boundary: cut to just before the newest segment's first zxid.
    let last_seg = log.segment_names().pop().expect("segments");
    let first_of_last = crate::format::parse_segment_name(&last_seg).expect("name");
    log.truncate_after(first_of_last - 1).expect("truncate at boundary");
    assert_eq!(log.last_zxid(), first_of_last - 1);
    assert!(!log.segment_names().contains(&last_seg));
    assert_samples(&log, 1, first_of_last - 1, 90);
    drop(log);
    let mut log = open(&s, opts);
    assert_eq!(log.last_zxid(), first_of_last - 1);
    // Before everything: the log empties, and takes any later zxid next.
    log.truncate_after(0).expect("truncate all");
    assert_eq!(log.last_zxid(), 0);
    assert!(log.segment_names().is_empty());
    log.append(&sample_batch(7, 9, 90)).expect("append");
    log.sync().expect("sync");
    drop(log);
    let log = open(&s, opts);
    assert_samples(&log, 7, 9, 90);
    assert!(matches!(log.read_from(3), Err(LogError::NotInLog { .. })));
}

/// purge_before removes exactly the segments wholly before the zxid, never the newest.
pub fn purge<S: Storage>(s: S) {
    let opts = small_options();
    let mut log = open(&s, opts);
    for z in (1..=300).step_by(3) {
        log.append(&sample_batch(z, z + 2, 100)).expect("append");
        log.sync().expect("sync");
    }
    let before = log.segment_names();
    assert!(log.purge_before(1).expect("purge").is_empty());
    let cut = crate::format::parse_segment_name(&before[3]).expect("name");
    let removed = log.purge_before(cut + 1).expect("purge");
    assert_eq!(removed, before[..3].to_vec());
    assert_eq!(log.first_zxid(), Some(cut));
    assert!(matches!(log.read_from(1), Err(LogError::NotInLog { .. })));
    assert_samples(&log, cut, 300, 100);
    let removed = log.purge_before(i64::MAX).expect("purge all but newest");
    assert_eq!(log.segment_names().len(), 1);
    assert_eq!(removed.len(), before.len() - 4);
    drop(log);
    let log = open(&s, opts);
    assert_eq!(log.last_zxid(), 300);
    let first = log.first_zxid().expect("newest kept");
    assert_samples(&log, first, 300, 100);
}

/// Zxids may jump to a new epoch but never go back or skip within an epoch.
pub fn epochs_and_order<S: Storage>(s: S) {
    let mut log = open(&s, small_options());
    log.append(&sample_batch(1, 5, 80)).expect("append");
    assert!(matches!(log.append(&sample_batch(7, 8, 80)), Err(LogError::OutOfOrder { .. })));
    assert!(matches!(log.append(&sample_batch(5, 6, 80)), Err(LogError::OutOfOrder { .. })));
    let e2 = 2i64 << 32;
    log.append(&sample_batch(e2 + 1, e2 + 3, 80)).expect("new epoch");
    log.sync().expect("sync");
    let mut b = RecordBatch::new();
    let (h, t) = sample_txn(e2 + 4, 80);
    b.push(&h, &t).expect("push");
    let (h, t) = sample_txn(e2 + 6, 80);
    assert!(matches!(b.push(&h, &t), Err(LogError::OutOfOrder { .. })), "gap inside a batch");
    drop(log);
    let log = open(&s, small_options());
    assert_eq!(log.last_zxid(), e2 + 3);
    let zs: Vec<i64> = log.read_from(1).expect("read").map(|e| e.expect("rec").header.zxid).collect();
    assert_eq!(zs, vec![1, 2, 3, 4, 5, e2 + 1, e2 + 2, e2 + 3]);
}

fn newest_segment<S: Storage>(s: &S) -> String {
    let mut names: Vec<String> =
        s.list().expect("list").into_iter().filter(|n| n.starts_with("log.")).collect();
    names.sort();
    names.pop().expect("a segment")
}

/// A torn record, a checksum-failing record and garbage after the last record of the newest
/// segment are cut off on open; zero-filled preallocation is left alone.
pub fn torn_tails<S: Storage>(s: S) {
    let opts = LogOptions { prealloc_bytes: 8192, segment_bytes_max: 1 << 20 };
    let mut log = open(&s, opts);
    log.append(&sample_batch(1, 10, 100)).expect("append");
    log.sync().expect("sync");
    drop(log);
    // Zero-filled preallocation is a clean end.
    let log = open(&s, opts);
    assert_eq!(log.recovery().truncated_tail, None);
    let end = 8192 - log_free_tail(&s);
    drop(log);

    let next = sample_batch(11, 13, 100);
    for (what, bytes) in [
        ("torn record", next.buf[..next.records[1].1 as usize - 5].to_vec()),
        ("checksum failure", {
            // A single whole record whose payload is damaged.
            let mut b = sample_batch(11, 11, 100).buf;
            let n = b.len();
            b[n - 3] ^= 0x55;
            b
        }),
        ("torn frame", next.buf[..7].to_vec()),
        ("garbage", vec![0xAB; 300]),
    ] {
        let name = newest_segment(&s);
        let mut f = s.open(&name).expect("open");
        f.allocate(8192).expect("allocate");
        f.write_at(end, &bytes).expect("write tail");
        f.sync().expect("sync");
        drop(f);
        let mut log = open(&s, opts);
        let (file, off, dropped) =
            log.recovery().truncated_tail.clone().unwrap_or_else(|| panic!("{what}: no cut"));
        assert!(file.ends_with(&name), "{what}: {file}");
        assert_eq!(off, end, "{what}");
        assert!(dropped > 0 && dropped <= bytes.len() as u64, "{what}: dropped {dropped}");
        assert_eq!(log.last_zxid(), 10, "{what}");
        assert_samples(&log, 1, 10, 100);
        // The cut bytes are zero now: appending and reopening works.
        assert_eq!(log_free_tail(&s), 8192 - end, "{what}: tail zeroed");
        log.append(&sample_batch(11, 11, 100)).expect("append");
        log.sync().expect("sync");
        log.truncate_after(10).expect("truncate back");
    }
    // A newest segment whose header never completed (a crash while starting it) is removed.
    let mut log = open(&s, opts);
    log.roll().expect("roll");
    drop(log);
    let mut f = s.create("log.000000000000000b").expect("create");
    f.allocate(4096).expect("allocate");
    f.write_at(0, b"ZKRSTX").expect("partial header");
    f.sync().expect("sync");
    drop(f);
    let log = open(&s, opts);
    assert_eq!(log.recovery().removed_segments, vec!["log.000000000000000b".to_string()]);
    assert_eq!(log.last_zxid(), 10);
    assert_samples(&log, 1, 10, 100);
}

/// Bytes of zeros at the end of the newest segment.
fn log_free_tail<S: Storage>(s: &S) -> u64 {
    let f = s.open(&newest_segment(s)).expect("open");
    let len = f.len().expect("len");
    let mut buf = vec![0u8; len as usize];
    f.read_at(0, &mut buf).expect("read");
    len - buf.iter().rposition(|&b| b != 0).map_or(0, |p| p as u64 + 1)
}

/// A bad record anywhere but the tail of the newest segment stops opening with an error naming
/// the file and offset.
pub fn corruption_before_tail<S: Storage>(s: S) {
    let opts = small_options();
    let mut log = open(&s, opts);
    for z in (1..=120).step_by(4) {
        log.append(&sample_batch(z, z + 3, 100)).expect("append");
        log.sync().expect("sync");
    }
    let names = log.segment_names();
    drop(log);
    let flip = |name: &str, off: u64| {
        let mut f = s.open(name).expect("open");
        let mut b = [0u8; 1];
        f.read_at(off, &mut b).expect("read");
        b[0] ^= 0x10;
        f.write_at(off, &b).expect("write");
        f.sync().expect("sync");
    };
    // In an older segment.
    let payload_byte = SEGMENT_HEADER_BYTES + 16 + 20;
    flip(&names[1], payload_byte);
    match SegmentLog::open(s.clone(), opts) {
        Err(LogError::Corrupt { file, offset, .. }) => {
            assert!(file.ends_with(&names[1]), "{file}");
            assert_eq!(offset, SEGMENT_HEADER_BYTES);
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|_| "an open log")),
    }
    flip(&names[1], payload_byte);
    // In the newest segment, with an intact record after it.
    let newest = names.last().expect("names");
    flip(newest, payload_byte);
    match SegmentLog::open(s.clone(), opts) {
        Err(LogError::Corrupt { file, offset, reason }) => {
            assert!(file.ends_with(newest.as_str()), "{file}");
            assert_eq!(offset, SEGMENT_HEADER_BYTES);
            assert!(reason.contains("intact record"), "{reason}");
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|_| "an open log")),
    }
    flip(newest, payload_byte);
    // A corrupt segment header in an older segment.
    flip(&names[0], 20);
    assert!(matches!(SegmentLog::open(s.clone(), opts), Err(LogError::Corrupt { offset: 0, .. })));
    flip(&names[0], 20);
    let log = open(&s, opts);
    assert_samples(&log, 1, 120, 100);
}

/// A segment with a newer format version is refused by version, even if it is the newest.
pub fn newer_version_refused<S: Storage>(s: S) {
    let mut log = open(&s, small_options());
    log.append(&sample_batch(1, 3, 100)).expect("append");
    log.sync().expect("sync");
    drop(log);
    let name = newest_segment(&s);
    let mut f = s.open(&name).expect("open");
    f.write_at(8, &2u32.to_le_bytes()).expect("write");
    f.sync().expect("sync");
    drop(f);
    match SegmentLog::open(s.clone(), small_options()) {
        Err(LogError::UnsupportedVersion { file, version: 2, supported: 1 }) => {
            assert!(file.ends_with(&name))
        }
        other => panic!("expected UnsupportedVersion, got {:?}", other.map(|_| "an open log")),
    }
}

/// A segment missing from the middle is a zxid gap, named by file and offset.
pub fn missing_segment_is_a_gap<S: Storage>(s: S) {
    let opts = small_options();
    let mut log = open(&s, opts);
    for z in (1..=300).step_by(5) {
        log.append(&sample_batch(z, z + 4, 100)).expect("append");
        log.sync().expect("sync");
    }
    let names = log.segment_names();
    assert!(names.len() >= 3, "{names:?}");
    drop(log);
    s.remove(&names[1]).expect("remove");
    match SegmentLog::open(s.clone(), opts) {
        Err(LogError::ZxidGap { file, offset, .. }) => {
            assert!(file.ends_with(&names[2]), "{file}");
            assert_eq!(offset, SEGMENT_HEADER_BYTES);
        }
        other => panic!("expected ZxidGap, got {:?}", other.map(|_| "an open log")),
    }
}

/// Files that are not segments are ignored.
pub fn stray_segments<S: Storage>(s: S) {
    let mut f = s.create("snapshot.tmp").expect("create");
    f.allocate(10).expect("allocate");
    drop(f);
    s.create("log.notahexname").expect("create");
    let mut log = open(&s, small_options());
    log.append(&sample_batch(1, 2, 100)).expect("append");
    log.sync().expect("sync");
    drop(log);
    let log = open(&s, small_options());
    assert_samples(&log, 1, 2, 100);
}

/// The background writer makes everything submitted durable, reports it in order, and hands the
/// log back on shutdown.
pub fn writer_group_commit<S: Storage>(s: S) {
    let log = open(&s, small_options());
    let (tx, rx) = std::sync::mpsc::channel();
    let w = LogWriter::spawn(log, 4, move |r| {
        let _ = tx.send(r.map_err(|e| e.to_string()));
    })
    .expect("spawn");
    for z in (1..=200).step_by(2) {
        w.submit(sample_batch(z, z + 1, 100)).expect("submit");
    }
    let log = w.shutdown().expect("shutdown");
    let reports: Vec<i64> = rx.iter().map(|r| r.expect("no error")).collect();
    assert!(!reports.is_empty());
    assert!(reports.windows(2).all(|w| w[0] < w[1]), "reports increase: {reports:?}");
    assert_eq!(*reports.last().expect("reports"), 200);
    assert_eq!(log.durable_zxid(), 200);
    assert_samples(&log, 1, 200, 100);
    // An out-of-order batch stops the writer with the error, after what came before is durable.
    let (tx, rx) = std::sync::mpsc::channel();
    let w = LogWriter::spawn(log, 4, move |r| {
        let _ = tx.send(r.map_err(|e| e.to_string()));
    })
    .expect("spawn");
    w.submit(sample_batch(201, 201, 100)).expect("submit");
    w.submit(sample_batch(300, 300, 100)).expect("submit");
    let got: Vec<Result<i64, String>> = rx.iter().take(2).collect();
    let log = w.shutdown().expect("shutdown");
    assert_eq!(got[0], Ok(201), "{got:?}");
    assert!(got[1].as_ref().is_err_and(|e| e.contains("cannot follow")), "{got:?}");
    assert_eq!(log.last_zxid(), 201);
}
