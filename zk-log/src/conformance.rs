//! The behaviour every [`Storage`] backend must give the log, as a suite of checks.
//!
//! Tests call [`run_all`] with a function that returns a fresh, empty backend; each check gets its
//! own. The checks panic with a message on failure (they are test code), and work only through the
//! [`Storage`] trait, so a new backend is covered by adding one call.

use crate::format::{encode_segment_header_version, segment_name, RecordBatch, SEGMENT_HEADER_BYTES};
use crate::{
    EpochStore, LogError, LogOptions, LogReader, LogWriter, SegmentLog, Storage, StorageFile, WriterReport,
    ACCEPTED_EPOCH_FILE, CURRENT_EPOCH_FILE,
};
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

/// Runs the checks that crash, each on a fresh backend from `fresh`: `crash` stands for the
/// power failing (for the fault-injecting backend, [`crate::FaultStorage::crash`], which drops
/// unsynced state as its [`crate::CrashModel`] draws; for the real disk, where a test cannot cut
/// the power, nothing: a process crash, after which the page cache keeps everything).
pub fn run_crash_checks<S: Storage>(fresh: &mut dyn FnMut() -> S, crash: &mut dyn FnMut(&S)) {
    crash_cycles(fresh(), crash);
}

/// Rounds of appends (groups of up to 40 records, several pages), syncs, crashes and process
/// restarts: after each, the log opens (never refusing), holds every record a sync covered and
/// every record the previous open recovered, and is a contiguous run of what was appended.
pub fn crash_cycles<S: Storage>(s: S, crash: &mut dyn FnMut(&S)) {
    let opts = LogOptions { prealloc_bytes: 8192, segment_bytes_max: 32 << 10 };
    let mut rng = crate::fault::SplitMix64::new(0xC0FF_EE00);
    // Through this zxid the log must hold everything, whatever the crash kept.
    let mut durable = 0i64;
    for round in 0..20 {
        let mut log = SegmentLog::open(s.clone(), opts).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let last = log.last_zxid();
        assert!(last >= durable, "round {round}: the log ends at {last}, {durable} was durable");
        if last > 0 {
            assert_samples(&log, 1, last, 200);
        }
        // What recovery kept is durable before anything is appended after it, even when the last
        // stop was a process crash that left it unsynced in the page cache.
        durable = last;
        let mut z = last + 1;
        for _ in 0..1 + rng.upto(3) {
            let n = 1 + rng.upto(39) as i64;
            log.append(&sample_batch(z, z + n - 1, 200)).expect("append");
            z += n;
            if rng.chance(1, 2) {
                log.sync().expect("sync");
                durable = z - 1;
            }
        }
        drop(log);
        // A third of the stops are process crashes only: the next open sees the unsynced tail.
        if !rng.chance(1, 3) {
            crash(&s);
        }
    }
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
    torn_last_group(fresh());
    version_1_segment_is_read_and_closed(fresh());
    version_1_damage_is_judged_as_before(fresh());
    newer_version_refused(fresh());
    missing_segment_is_a_gap(fresh());
    stray_segments(fresh());
    writer_group_commit(fresh());
    reset_and_continue(fresh());
    interrupted_reset_is_finished(fresh());
    truncate_below_base_refused(fresh());
    base_of_an_epoch_log(fresh());
    reader_sees_durable_records_only(fresh());
    reader_reads_long_ranges(fresh());
    writer_truncate_and_reset_in_order(fresh());
    epoch_files(fresh());
}

/// Reads `from..=through` through `reader` in chunks of `chunk`, checking every entry against
/// the sample txn of its zxid (payload size `size`) and that zxids run without a hole.
pub fn assert_reader_samples<S: Storage>(
    reader: &LogReader<S>,
    from: i64,
    through: i64,
    size: usize,
    chunk: usize,
) {
    let mut next = from;
    while next <= through {
        let got = reader.read_range(next, through, chunk).expect("read_range");
        assert!(!got.is_empty(), "nothing read from {next} through {through}");
        assert!(got.len() <= chunk.max(1), "{} entries for a limit of {chunk}", got.len());
        for e in got {
            let (h, t) = sample_txn(next, size);
            assert_eq!(e.header, h, "header of zxid {next}");
            assert_eq!(e.txn, t, "body of zxid {next}");
            next += 1;
        }
    }
    assert_eq!(next, through + 1);
}

/// A reset empties the log durably and lets it continue above the reset zxid, in the same or a
/// later epoch; the base survives reopening, recovery from the snapshot at the reset zxid finds
/// no gap, and no old record is ever read again.
pub fn reset_and_continue<S: Storage>(s: S) {
    let opts = small_options();
    let mut log = open(&s, opts);
    for z in (1..=120).step_by(4) {
        log.append(&sample_batch(z, z + 3, 100)).expect("append");
        log.sync().expect("sync");
    }
    // Unsynced records go too.
    log.append(&sample_batch(121, 125, 100)).expect("append");
    assert!(log.segment_names().len() > 2);
    // A snapshot behind the log's end (the leader's history is shorter than ours).
    log.reset_to(60).expect("reset");
    assert_eq!((log.first_zxid(), log.last_zxid(), log.durable_zxid(), log.base_zxid()), (None, 60, 60, 60));
    assert!(log.segment_names().is_empty());
    assert!(matches!(log.read_from(60), Err(LogError::NotInLog { .. })));
    assert!(log.read_from(61).expect("above the base").next().is_none());
    assert!(matches!(log.append(&sample_batch(60, 61, 100)), Err(LogError::OutOfOrder { .. })));
    log.append(&sample_batch(61, 70, 77)).expect("append after reset");
    log.sync().expect("sync");
    drop(log);
    let mut log = open(&s, opts);
    assert_eq!(log.base_zxid(), 60);
    assert_samples(&log, 61, 70, 77);
    assert_eq!(log.reconcile_with_snapshot(60).expect("no gap"), Some(61));
    assert!(matches!(log.reconcile_with_snapshot(59), Err(LogError::NotInLog { .. })));
    // A snapshot far ahead, then the next epoch: the first zxid does not follow by one, and
    // that is no gap.
    let e3 = 3i64 << 32;
    log.reset_to(e3 - 5).expect("reset");
    let e4 = 4i64 << 32;
    log.append(&sample_batch(e4 + 1, e4 + 40, 100)).expect("next epoch");
    log.sync().expect("sync");
    drop(log);
    let mut log = open(&s, opts);
    assert_eq!(log.base_zxid(), e3 - 5);
    assert_eq!(log.first_zxid(), Some(e4 + 1));
    assert_eq!(log.reconcile_with_snapshot(e3 - 5).expect("no gap"), Some(e3 - 4));
    let first = log.read_from(e3 - 4).expect("above the base").next().expect("a record").expect("reads");
    assert_eq!(first.header.zxid, e4 + 1, "replay from the snapshot starts at the next epoch");
    assert_samples(&log, e4 + 1, e4 + 40, 100);
    assert!(matches!(log.read_from(61), Err(LogError::NotInLog { .. })));
    // Reset with nothing appended since, then reopen: empty, base kept, and a snapshot at the
    // base replays nothing; a newer snapshot than the log resets the log to it.
    log.reset_to(e4 + 50).expect("reset");
    drop(log);
    let mut log = open(&s, opts);
    assert_eq!((log.first_zxid(), log.last_zxid(), log.base_zxid()), (None, e4 + 50, e4 + 50));
    assert_eq!(log.reconcile_with_snapshot(e4 + 50).expect("nothing to replay"), None);
    assert_eq!(log.reconcile_with_snapshot(e4 + 70).expect("log behind the snapshot"), None);
    assert_eq!((log.last_zxid(), log.base_zxid()), (e4 + 70, e4 + 70));
    drop(log);
    let log = open(&s, opts);
    assert_eq!(log.base_zxid(), e4 + 70);
    let names: Vec<String> = s.list().expect("list").into_iter().filter(|n| n.starts_with("log.0")).collect();
    assert!(names.is_empty(), "{names:?}");
}

/// A reset whose marker was durable when the process stopped is finished by the next open:
/// every segment it named is removed, a segment it did not name is kept.
pub fn interrupted_reset_is_finished<S: Storage>(s: S) {
    let opts = small_options();
    let mut log = open(&s, opts);
    for z in (1..=80).step_by(4) {
        log.append(&sample_batch(z, z + 3, 100)).expect("append");
        log.sync().expect("sync");
    }
    let doomed = log.segment_names();
    drop(log);
    // As if the process stopped right after the reset's marker became durable.
    crate::base::write_marker(&s, &crate::base::BaseMarker { base: 200, doomed: doomed.clone() })
        .expect("marker");
    let log = open(&s, opts);
    assert_eq!(log.recovery().reset_finished, doomed);
    assert_eq!((log.first_zxid(), log.last_zxid(), log.base_zxid()), (None, 200, 200));
    drop(log);
    let mut log = open(&s, opts);
    assert!(log.recovery().reset_finished.is_empty(), "the marker no longer names segments");
    log.append(&sample_batch(201, 230, 100)).expect("append");
    log.sync().expect("sync");
    drop(log);
    let log = open(&s, opts);
    assert_samples(&log, 201, 230, 100);
}

/// Below the base, records are in a snapshot; truncating there is refused. A truncation that
/// removes every record is a reset to its zxid.
pub fn truncate_below_base_refused<S: Storage>(s: S) {
    let opts = small_options();
    let mut log = open(&s, opts);
    log.reset_to(100).expect("reset");
    log.append(&sample_batch(101, 140, 100)).expect("append");
    log.sync().expect("sync");
    assert!(matches!(log.truncate_after(99), Err(LogError::NotInLog { .. })));
    log.truncate_after(100).expect("truncate to the base");
    assert_eq!((log.first_zxid(), log.last_zxid(), log.base_zxid()), (None, 100, 100));
    log.append(&sample_batch(101, 110, 90)).expect("append");
    log.sync().expect("sync");
    drop(log);
    let log = open(&s, opts);
    assert_eq!(log.base_zxid(), 100);
    assert_samples(&log, 101, 110, 90);
}

/// A log that starts in epoch 1 (a server that joined an ensemble from scratch) holds
/// everything from 0 on: a restart from the empty snapshot at 0 replays it. After a purge its
/// base is the zxid before its first record, also after reopening (the marker says so: without
/// it, a first record in a later epoch would look like it directly follows 0).
pub fn base_of_an_epoch_log<S: Storage>(s: S) {
    let opts = small_options();
    let e1 = 1i64 << 32;
    let mut log = open(&s, opts);
    for z in (e1 + 1..=e1 + 200).step_by(4) {
        log.append(&sample_batch(z, z + 3, 100)).expect("append");
        log.sync().expect("sync");
    }
    drop(log);
    let mut log = open(&s, opts);
    assert_eq!(log.base_zxid(), 0);
    assert_eq!(log.reconcile_with_snapshot(0).expect("no gap from the empty snapshot"), Some(1));
    let first = log.read_from(1).expect("read").next().expect("a record").expect("reads");
    assert_eq!(first.header.zxid, e1 + 1);
    let segs = log.segment_names();
    let cut = crate::format::parse_segment_name(&segs[2]).expect("name");
    log.purge_before(cut).expect("purge");
    assert_eq!(log.base_zxid(), cut - 1);
    drop(log);
    let mut log = open(&s, opts);
    assert_eq!(log.base_zxid(), cut - 1);
    assert!(matches!(log.reconcile_with_snapshot(0), Err(LogError::NotInLog { .. })));
    assert!(matches!(log.read_from(1), Err(LogError::NotInLog { .. })));
    assert_eq!(log.reconcile_with_snapshot(cut - 1).expect("covered"), Some(cut));
}

/// A reader sees synced records only; truncation, reset and purge withdraw what they remove;
/// reads from at or below the base are `NotInLog`.
pub fn reader_sees_durable_records_only<S: Storage>(s: S) {
    let opts = small_options();
    let mut log = open(&s, opts);
    log.append(&sample_batch(1, 10, 100)).expect("append");
    log.sync().expect("sync");
    log.append(&sample_batch(11, 12, 100)).expect("append unsynced");
    // A reader made while records are unsynced does not see them.
    let r = log.reader();
    assert!(r.durable_zxid() <= 10, "{}", r.durable_zxid());
    log.sync().expect("sync");
    assert_eq!(r.durable_zxid(), 12);
    assert_reader_samples(&r, 1, 12, 100, 5);
    for z in (13..=300).step_by(3) {
        log.append(&sample_batch(z, z + 2, 100)).expect("append");
        assert_eq!(r.durable_zxid(), z - 1, "unsynced records are not published");
        log.sync().expect("sync");
    }
    let r2 = r.clone();
    assert_reader_samples(&r2, 1, 300, 100, 64);
    assert_reader_samples(&r, 150, 160, 100, 1000);
    // `through` is cut to the durable end; past the end is empty.
    assert_eq!(r.read_range(298, 10_000, 100).expect("read").len(), 3);
    assert!(r.read_range(301, 10_000, 100).expect("read").is_empty());
    // Truncation withdraws.
    log.truncate_after(200).expect("truncate");
    assert_eq!(r.durable_zxid(), 200);
    assert_eq!(r.read_range(190, 10_000, 100).expect("read").len(), 11);
    // Purge: below the new base is NotInLog.
    let segs = log.segment_names();
    let cut = crate::format::parse_segment_name(&segs[3]).expect("name");
    log.purge_before(cut).expect("purge");
    assert_eq!(r.base_zxid(), cut - 1);
    assert_eq!(r.first_zxid(), Some(cut));
    assert!(matches!(r.read_range(cut - 1, 200, 10), Err(LogError::NotInLog { .. })));
    assert_reader_samples(&r, cut, 200, 100, 7);
    // Reset: nothing old is readable, new records are.
    log.reset_to(500).expect("reset");
    assert_eq!((r.durable_zxid(), r.base_zxid(), r.first_zxid()), (500, 500, None));
    assert!(matches!(r.read_range(cut, 200, 10), Err(LogError::NotInLog { .. })));
    assert!(r.read_range(501, 600, 10).expect("read").is_empty());
    log.append(&sample_batch(501, 520, 100)).expect("append");
    log.sync().expect("sync");
    assert_reader_samples(&r, 501, 520, 100, 6);
    // A reader outlives its log, still reading what was published last.
    drop(log);
    assert_reader_samples(&r, 501, 520, 100, 100);
}

/// A range longer than one hold of the readers' lock ([`crate::READ_HOLD_BYTES`]) across many
/// segments is read whole, in order, in one call.
pub fn reader_reads_long_ranges<S: Storage>(s: S) {
    let mut log = open(&s, LogOptions { prealloc_bytes: 16 << 10, segment_bytes_max: 64 << 10 });
    let size = 3000;
    let mut bytes = 0;
    for z in (1..=1200).step_by(10) {
        let b = sample_batch(z, z + 9, size);
        bytes += b.bytes();
        log.append(&b).expect("append");
        log.sync().expect("sync");
    }
    assert!(log.segment_names().len() > 4, "{:?}", log.segment_names());
    assert!(bytes > 3 * crate::READ_HOLD_BYTES, "{bytes} bytes fit in too few holds");
    let r = log.reader();
    let got = r.read_range(5, 1190, usize::MAX).expect("read");
    assert_eq!(got.len(), 1186, "one call returns the whole range");
    for (e, z) in got.iter().zip(5..) {
        let (h, t) = sample_txn(z, size);
        assert_eq!((&e.header, &e.txn), (&h, &t), "zxid {z}");
    }
}

/// Truncations and resets queued on the writer run in order with batches, each reported when
/// durable, and what was queued after them follows them.
pub fn writer_truncate_and_reset_in_order<S: Storage>(s: S) {
    let log = open(&s, small_options());
    let (tx, rx) = std::sync::mpsc::channel();
    let w = LogWriter::spawn_with_reports(log, 8, move |r| {
        let _ = tx.send(r);
    })
    .expect("spawn");
    let reader = w.reader();
    for z in (1..=100).step_by(2) {
        w.submit(sample_batch(z, z + 1, 100)).expect("submit");
    }
    // Queued right behind batches, and followed by batches that must come after it.
    w.truncate_after(60).expect("queue truncate");
    w.submit(sample_batch(61, 80, 50)).expect("submit");
    w.reset_to(1000).expect("queue reset");
    w.submit(sample_batch(1001, 1010, 70)).expect("submit");
    w.submit(sample_batch(1011, 1020, 70)).expect("submit");
    assert!(matches!(w.truncate_after(-1), Err(LogError::NotInLog { .. })));
    let mut seen = Vec::new();
    while !matches!(seen.last(), Some(WriterReport::Durable(1020))) {
        let r = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("a report");
        if let WriterReport::Failed(e) = &r {
            panic!("writer failed: {e}");
        }
        seen.push(r);
    }
    let pos = |want: &dyn Fn(&WriterReport) -> bool| seen.iter().position(want).expect("report present");
    let t = pos(&|r| matches!(r, WriterReport::Truncated(60)));
    let z = pos(&|r| matches!(r, WriterReport::Reset(1000)));
    let durable_100 = pos(&|r| matches!(r, WriterReport::Durable(100)));
    assert!(durable_100 < t && t < z, "{seen:?}");
    // The batch queued after the truncation is reported between it and the reset.
    assert!(seen[t + 1..z].iter().any(|r| matches!(r, WriterReport::Durable(80))), "{seen:?}");
    assert!(seen[z + 1..].iter().all(|r| matches!(r, WriterReport::Durable(d) if *d > 1000)), "{seen:?}");
    // Durable reports rise between barriers.
    for w2 in seen.windows(2) {
        if let (WriterReport::Durable(a), WriterReport::Durable(b)) = (&w2[0], &w2[1]) {
            assert!(a < b, "{seen:?}");
        }
    }
    assert_eq!(reader.base_zxid(), 1000);
    assert_reader_samples(&reader, 1001, 1020, 70, 8);
    let log = w.shutdown().expect("shutdown");
    assert_eq!((log.base_zxid(), log.last_zxid()), (1000, 1020));
    drop(log);
    let log = open(&s, small_options());
    assert_eq!(log.base_zxid(), 1000);
    assert_eq!(log.first_zxid(), Some(1001));
    assert!(matches!(log.read_from(80), Err(LogError::NotInLog { .. })));
}

/// The epoch files: created from the last zxid, updated durably in Apache's format, checked at
/// start as Apache checks them.
pub fn epoch_files<S: Storage>(s: S) {
    let e5 = 5i64 << 32;
    let mut ep = EpochStore::open(s.clone(), e5 + 3).expect("open fresh");
    assert_eq!((ep.accepted(), ep.current()), (5, 5));
    let read = |name: &str| {
        let f = s.open(name).expect("open");
        let mut b = vec![0u8; f.len().expect("len") as usize];
        f.read_at(0, &mut b).expect("read");
        b
    };
    assert_eq!(read(CURRENT_EPOCH_FILE), b"5");
    ep.set_accepted(7).expect("accept");
    assert!(matches!(ep.set_current(8), Err(LogError::Epoch { .. })), "current above accepted");
    ep.set_current(7).expect("current");
    assert!(matches!(ep.set_accepted(6), Err(LogError::Epoch { .. })), "accepted goes back");
    assert!(matches!(ep.set_current(6), Err(LogError::Epoch { .. })), "current goes back");
    ep.set_accepted(12).expect("accept");
    assert_eq!((read(ACCEPTED_EPOCH_FILE), read(CURRENT_EPOCH_FILE)), (b"12".to_vec(), b"7".to_vec()));
    drop(ep);
    let ep = EpochStore::open(s.clone(), 7i64 << 32).expect("reopen");
    assert_eq!((ep.accepted(), ep.current()), (12, 7));
    drop(ep);
    // A log holding epoch 13 while currentEpoch says 7 and acceptedEpoch 12: refused, naming the
    // file...
    match EpochStore::open(s.clone(), (13i64 << 32) + 1) {
        Err(LogError::Epoch { file, reason }) => {
            assert!(file.ends_with(CURRENT_EPOCH_FILE), "{file}");
            assert!(reason.contains("older"), "{reason}");
        }
        other => panic!("expected an epoch error, got {other:?}"),
    }
    // ...but epoch 9, accepted, is one whose currentEpoch update had not begun: finished.
    let ep = EpochStore::open(s.clone(), (9i64 << 32) + 1).expect("repaired");
    assert_eq!((ep.accepted(), ep.current()), (12, 9));
    assert_eq!(read(CURRENT_EPOCH_FILE), b"9");
    drop(ep);
    // An interrupted update (the temp file of one) is finished with its value.
    let mut f = s.create("currentEpoch.tmp").expect("create");
    f.set_len(2).expect("len");
    f.write_at(0, b"11").expect("write");
    f.sync().expect("sync");
    drop(f);
    let ep = EpochStore::open(s.clone(), (10i64 << 32) + 1).expect("repaired");
    assert_eq!((ep.accepted(), ep.current()), (12, 11));
    assert!(!s.list().expect("list").iter().any(|n| n.ends_with(".tmp")), "temp removed");
    assert_eq!(read(CURRENT_EPOCH_FILE), b"11");
    drop(ep);
    // acceptedEpoch below currentEpoch, and garbage, are refused by name.
    crate::replace_file(&s, ACCEPTED_EPOCH_FILE, b"10").expect("write");
    match EpochStore::open(s.clone(), 1) {
        Err(LogError::Epoch { file, .. }) => assert!(file.ends_with(ACCEPTED_EPOCH_FILE), "{file}"),
        other => panic!("expected an epoch error, got {other:?}"),
    }
    crate::replace_file(&s, ACCEPTED_EPOCH_FILE, b"1x").expect("write");
    match EpochStore::open(s.clone(), 1) {
        Err(LogError::Epoch { file, reason }) => {
            assert!(file.ends_with(ACCEPTED_EPOCH_FILE), "{file}");
            assert!(reason.contains("byte 1"), "{reason}");
        }
        other => panic!("expected an epoch error, got {other:?}"),
    }
    crate::replace_file(&s, ACCEPTED_EPOCH_FILE, b"11\n").expect("write");
    let ep = EpochStore::open(s.clone(), 1).expect("a trailing newline is accepted");
    assert_eq!((ep.accepted(), ep.current()), (11, 11));
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

/// Flips one payload byte of the record at `at` in `name` (media damage), durably.
fn flip_payload_byte<S: Storage>(s: &S, name: &str, at: u64) {
    let off = at + 16 + 20;
    let mut f = s.open(name).expect("open");
    let mut b = [0u8; 1];
    f.read_at(off, &mut b).expect("read");
    f.write_at(off, &[b[0] ^ 0x10]).expect("write");
    f.sync().expect("sync");
}

/// Sync groups (docs/log-format.md): a group appended and never synced, whose first page is lost
/// while later pages of it are on disk (zeros are written over the page here, as the disk would
/// hold them), is cut whole and the log opens with every synced record; damage to a synced group
/// that a later group follows refuses with `Corrupt` naming the file and offset.
pub fn torn_last_group<S: Storage>(s: S) {
    // One allocation step holds it all: no allocation (which syncs) inside a group.
    let opts = LogOptions { prealloc_bytes: 64 << 10, segment_bytes_max: 1 << 20 };
    let mut log = open(&s, opts);
    let mut end = SEGMENT_HEADER_BYTES;
    for (a, b) in [(1, 5), (6, 10)] {
        let batch = sample_batch(a, b, 200);
        log.append(&batch).expect("append");
        log.sync().expect("sync");
        end += batch.bytes();
    }
    let torn = sample_batch(11, 120, 200);
    log.append(&torn).expect("append");
    let name = newest_segment(&s);
    drop(log);
    // The group's first page never reached the disk: its bytes from the group's start on are the
    // reservation's zeros. The pages after it did.
    let page_end = (end / 4096 + 1) * 4096;
    assert!(end + torn.bytes() > page_end + 4096, "the group spans more than two pages");
    let mut f = s.open(&name).expect("open");
    f.write_at(end, &vec![0u8; (page_end - end) as usize]).expect("write zeros");
    f.sync().expect("sync");
    drop(f);
    let mut log = open(&s, opts);
    let r = log.recovery().clone();
    assert_eq!(log.last_zxid(), 10, "{r:?}");
    assert_samples(&log, 1, 10, 200);
    let (file, off, _) = r.truncated_tail.clone().expect("the torn group is cut");
    assert!(file.ends_with(&name), "{file}");
    assert_eq!(off, end);
    assert!(!r.dropped_records.is_empty(), "intact records of the group were after the lost page");
    assert!(r.dropped_records.iter().all(|z| (11..=120).contains(z)), "{:?}", r.dropped_records);
    // Synced groups after that; media damage in one of them, with a later group behind it.
    let mut at = end;
    for (a, b) in [(11, 15), (16, 20)] {
        let batch = sample_batch(a, b, 200);
        log.append(&batch).expect("append");
        log.sync().expect("sync");
        at += batch.bytes();
    }
    drop(log);
    let twelfth = end + sample_batch(11, 11, 200).bytes();
    flip_payload_byte(&s, &name, twelfth);
    match SegmentLog::open(s.clone(), opts) {
        Err(LogError::Corrupt { file, offset, reason }) => {
            assert!(file.ends_with(&name), "{file}");
            assert_eq!(offset, twelfth, "{reason}");
            assert!(reason.contains("starts a later sync group"), "{reason}");
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|l| l.recovery().clone())),
    }
    flip_payload_byte(&s, &name, twelfth);
    let log = open(&s, opts);
    assert_samples(&log, 1, 20, 200);
    assert!(at > twelfth);
}

/// Writes a version-1 segment (the format before sync groups) holding `batch`, in `preallocated`
/// bytes, as an older zkrs left it.
fn write_version_1_segment<S: Storage>(s: &S, batch: &RecordBatch, preallocated: u64) -> String {
    let first = batch.first_zxid().expect("records");
    let name = segment_name(first);
    let mut f = s.create(&name).expect("create");
    f.allocate(preallocated).expect("allocate");
    f.write_at(0, &encode_segment_header_version(first, 1)).expect("header");
    // A version-1 frame is exactly an unmarked version-2 one: what RecordBatch encodes.
    f.write_at(SEGMENT_HEADER_BYTES, &batch.buf).expect("records");
    f.sync().expect("sync");
    drop(f);
    s.sync_dir().expect("sync dir");
    name
}

/// A version-1 segment (from an older zkrs) is read, is never appended to (the log closes it,
/// cut at its last record, and the next append starts a segment of the current format), and
/// the log reopens whole.
pub fn version_1_segment_is_read_and_closed<S: Storage>(s: S) {
    let old = sample_batch(1, 10, 100);
    let name = write_version_1_segment(&s, &old, 8192);
    let mut log = open(&s, small_options());
    assert_eq!(log.last_zxid(), 10);
    assert_samples(&log, 1, 10, 100);
    let len = s.open(&name).expect("open").len().expect("len");
    assert_eq!(len, SEGMENT_HEADER_BYTES + old.bytes(), "closed at its last record");
    log.append(&sample_batch(11, 15, 100)).expect("append");
    log.sync().expect("sync");
    assert_eq!(log.segment_names(), vec![name.clone(), segment_name(11)]);
    drop(log);
    let mut head = [0u8; 32];
    s.open(&segment_name(11)).expect("open").read_at(0, &mut head).expect("read");
    assert_eq!(crate::format::segment_header_version(&head), Some(crate::FORMAT_VERSION));
    let mut log = open(&s, small_options());
    assert_samples(&log, 1, 15, 100);
    // A truncation back into the old segment leaves it closed too.
    log.truncate_after(7).expect("truncate");
    log.append(&sample_batch(8, 9, 100)).expect("append");
    log.sync().expect("sync");
    assert_eq!(log.segment_names(), vec![name, segment_name(8)]);
    drop(log);
    let log = open(&s, small_options());
    assert_samples(&log, 1, 9, 100);
}

/// A version-1 segment is judged by version 1's rules: damage with any intact record after it
/// refuses (version 1 has no group marks to tell a torn group by), damage with nothing intact
/// after it is cut.
pub fn version_1_damage_is_judged_as_before<S: Storage>(s: S) {
    let old = sample_batch(1, 10, 100);
    let name = write_version_1_segment(&s, &old, 8192);
    let fifth = SEGMENT_HEADER_BYTES + sample_batch(1, 4, 100).bytes();
    flip_payload_byte(&s, &name, fifth);
    match SegmentLog::open(s.clone(), small_options()) {
        Err(LogError::Corrupt { file, offset, reason }) => {
            assert!(file.ends_with(&name), "{file}");
            assert_eq!(offset, fifth, "{reason}");
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|l| l.recovery().clone())),
    }
    flip_payload_byte(&s, &name, fifth);
    let tenth = SEGMENT_HEADER_BYTES + sample_batch(1, 9, 100).bytes();
    flip_payload_byte(&s, &name, tenth);
    let log = open(&s, small_options());
    assert_eq!(log.last_zxid(), 9);
    assert_eq!(log.recovery().truncated_tail.as_ref().map(|t| t.1), Some(tenth));
    assert_samples(&log, 1, 9, 100);
}

/// A segment with a newer format version is refused by version, even if it is the newest.
pub fn newer_version_refused<S: Storage>(s: S) {
    let mut log = open(&s, small_options());
    log.append(&sample_batch(1, 3, 100)).expect("append");
    log.sync().expect("sync");
    drop(log);
    let name = newest_segment(&s);
    let mut f = s.open(&name).expect("open");
    let newer = crate::FORMAT_VERSION + 1;
    f.write_at(8, &newer.to_le_bytes()).expect("write");
    f.sync().expect("sync");
    drop(f);
    match SegmentLog::open(s.clone(), small_options()) {
        Err(LogError::UnsupportedVersion { file, version, supported: crate::FORMAT_VERSION })
            if version == newer =>
        {
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
