//! Seeded crash tests on the fault-injecting backend, checked against a model that only counts a
//! record as acknowledged once a sync for it returned.
//!
//! Each seed runs a random mix of appends, syncs, rolls, truncations, purges and crashes. After
//! every crash the reopened log must hold every acknowledged record, nothing partial, nothing
//! that was never appended, and contiguous zxids. A failure prints its seed; rerun one seed with
//! `ZK_LOG_SEED=<n> cargo test -p zk-log --test crash`.

use std::collections::BTreeMap;
use zk_log::conformance::sample_txn;
use zk_log::conformance::{assert_samples, sample_batch};
use zk_log::fault::SplitMix64;
use zk_log::{
    AppendMode, CrashModel, EpochStore, FaultStorage, LogError, LogOptions, RecordBatch, SegmentLog, Storage,
    StorageFile, FAULT_PAGE_BYTES,
};

/// The disk for a seed: about half the seeds write with pwrite, the others through the mapping
/// (drawn from a bit of the seed no test uses for anything else), so every seeded test covers
/// both append modes; its crashes are drawn by `model`. The seeded tests run every seed under
/// each [`CrashModel`] (a seed given in `ZK_LOG_SEED` too).
fn disk(seed: u64, model: CrashModel) -> FaultStorage {
    FaultStorage::with_models(seed, mode_of(seed), model)
}

/// The append mode [`disk`] gives a seed.
fn mode_of(seed: u64) -> AppendMode {
    AppendMode::ALL[(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63) as usize]
}

/// What the test appended: zxid -> payload size (the content is a function of zxid and size).
type Model = BTreeMap<i64, usize>;

fn size_for(zxid: i64, generation: u64) -> usize {
    40 + ((zxid as u64).wrapping_mul(2654435761) ^ generation.wrapping_mul(7919)) as usize % 260
}

/// `purged_below`: the highest zxid given to `purge_before` (records below it may be gone by
/// request, as a snapshot covers them).
fn verify(
    seed: u64,
    log: &SegmentLog<FaultStorage>,
    model: &Model,
    acked: i64,
    purged_below: i64,
    first_kept: Option<i64>,
) {
    let last = log.last_zxid();
    assert!(
        last >= acked || acked < purged_below,
        "seed {seed}: acknowledged through {acked:#x} but the log ends at {last:#x}"
    );
    let Some(first) = log.first_zxid() else {
        // Empty is right only if every acknowledged record was purged or truncated away (a
        // truncation that empties the log leaves its zxid as the log's end).
        assert!(
            model.range(..=acked).all(|(&k, _)| k < purged_below),
            "seed {seed}: empty log after acknowledging {acked:#x}"
        );
        return;
    };
    if let Some(fk) = first_kept {
        // Purges sync the directory after each removal, so they survive crashes exactly.
        assert_eq!(first, fk, "seed {seed}: oldest zxid after purge");
    }
    let mut prev: Option<i64> = None;
    for e in log.read_from(first).unwrap_or_else(|e| panic!("seed {seed}: read_from: {e}")) {
        let e = e.unwrap_or_else(|e| panic!("seed {seed}: record: {e}"));
        let z = e.header.zxid;
        if let Some(p) = prev {
            assert!(
                z == p + 1 || (z >> 32) > (p >> 32),
                "seed {seed}: zxid {z:#x} after {p:#x} is not contiguous"
            );
        }
        let size = *model.get(&z).unwrap_or_else(|| panic!("seed {seed}: zxid {z:#x} was never appended"));
        let (h, t) = sample_txn(z, size);
        assert_eq!((e.header, e.txn), (h, t), "seed {seed}: content of {z:#x}");
        prev = Some(z);
    }
    assert_eq!(prev, Some(last), "seed {seed}: iteration ended before the last zxid");
}

/// A batch of one sample record for `zxid`.
fn one_record(zxid: i64, size: usize) -> RecordBatch {
    let (h, t) = sample_txn(zxid, size);
    RecordBatch::encode(&[(&h, &t)]).expect("encode")
}

/// What the crashes of one seed's run did.
#[derive(Debug, Default, Clone, Copy)]
struct CrashCounts {
    crashes: u64,
    /// Recoveries that cut a torn tail.
    torn: u64,
    /// Recoveries that cut intact records after a gap with the torn last group (the case a
    /// crash that keeps pages out of order makes).
    intact_dropped: u64,
}

impl std::ops::AddAssign for CrashCounts {
    fn add_assign(&mut self, o: CrashCounts) {
        self.crashes += o.crashes;
        self.torn += o.torn;
        self.intact_dropped += o.intact_dropped;
    }
}

/// Notes what a recovery cut.
fn count_recovery(c: &mut CrashCounts, log: &SegmentLog<FaultStorage>) {
    c.torn += u64::from(log.recovery().truncated_tail.is_some());
    c.intact_dropped += u64::from(!log.recovery().dropped_records.is_empty());
}

/// Runs one seed, its crashes drawn by `model`.
fn run_seed(seed: u64, model: CrashModel) -> CrashCounts {
    let s = disk(seed, model);
    let mut rng = SplitMix64::new(seed ^ 0x5EED_0FC0_FFEE);
    let opts = LogOptions { prealloc_bytes: 128 + rng.upto(2048), segment_bytes_max: 512 + rng.upto(6000) };
    let mut log = SegmentLog::open(s.clone(), opts).expect("open empty");
    let mut model = Model::new();
    let mut acked = 0i64;
    let mut generation = 0u64;
    let mut first_kept: Option<i64> = None;
    let mut purged_below = 0i64;
    let steps = 20 + rng.upto(100);
    let mut counts = CrashCounts::default();
    for _ in 0..steps {
        match rng.upto(99) {
            0..=49 => {
                let last = log.last_zxid();
                let start = if rng.chance(1, 20) { (((last >> 32) + 1) << 32) | 1 } else { last + 1 };
                let count = 1 + rng.upto(6) as i64;
                let mut b = RecordBatch::new();
                for z in start..start + count {
                    let size = size_for(z, generation);
                    let (h, t) = sample_txn(z, size);
                    b.push(&h, &t).expect("push");
                    model.insert(z, size);
                }
                log.append(&b).unwrap_or_else(|e| panic!("seed {seed}: append: {e}"));
            }
            50..=79 => {
                log.sync().unwrap_or_else(|e| panic!("seed {seed}: sync: {e}"));
                acked = log.last_zxid();
                // Sometimes a spare segment file is prepared (as the writer's helper thread
                // does), so later segment starts rename it into place.
                if rng.chance(1, 3) {
                    if let Some(job) = log.spare_needed() {
                        log.install_spare(job.run());
                    }
                }
            }
            80..=84 => log.roll().unwrap_or_else(|e| panic!("seed {seed}: roll: {e}")),
            85..=89 => {
                let last = log.last_zxid();
                // At or above the base: the log cannot truncate into what a snapshot holds.
                let lo = log.base_zxid();
                let z = lo + rng.upto((last - lo).max(0) as u64) as i64;
                log.truncate_after(z).unwrap_or_else(|e| panic!("seed {seed}: truncate_after({z:#x}): {e}"));
                if z < last {
                    model.retain(|&k, _| k <= z);
                    // A truncation that cut something syncs: what is left is durable.
                    acked = log.last_zxid();
                    generation += 1;
                    first_kept = None;
                }
            }
            90..=93 => {
                let last = log.last_zxid();
                let z = rng.upto(last.max(0) as u64) as i64;
                log.purge_before(z).unwrap_or_else(|e| panic!("seed {seed}: purge_before: {e}"));
                first_kept = log.first_zxid();
                purged_below = purged_below.max(z);
            }
            _ => {
                drop(log);
                s.crash();
                log =
                    SegmentLog::open(s.clone(), opts).unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
                verify(seed, &log, &model, acked, purged_below, first_kept);
                count_recovery(&mut counts, &log);
                first_kept = log.first_zxid();
                // Records past the recovered end are gone; the log is now all durable.
                let last = log.last_zxid();
                model.retain(|&k, _| k <= last);
                acked = last;
                generation += 1;
            }
        }
    }
    drop(log);
    s.crash();
    let log = SegmentLog::open(s.clone(), opts).unwrap_or_else(|e| panic!("seed {seed}: final reopen: {e}"));
    verify(seed, &log, &model, acked, purged_below, first_kept);
    count_recovery(&mut counts, &log);
    counts.crashes = s.crashes();
    counts
}

/// Runs seeds `0..seeds` under `model` (or only `ZK_LOG_SEED`); returns the counts per append
/// mode, in [`AppendMode::ALL`] order.
fn run_seeds(seeds: u64, model: CrashModel) -> Option<[CrashCounts; 2]> {
    if let Some(seed) = std::env::var("ZK_LOG_SEED").ok().and_then(|v| v.parse().ok()) {
        run_seed(seed, model);
        return None;
    }
    let mut counts = [CrashCounts::default(); AppendMode::ALL.len()];
    for seed in 0..seeds {
        let m = AppendMode::ALL.iter().position(|&m| m == mode_of(seed)).expect("a mode");
        counts[m] += run_seed(seed, model);
    }
    Some(counts)
}

#[test]
fn seeded_crashes_keep_every_synced_record() {
    let Some(counts) = run_seeds(1500, CrashModel::Prefix) else { return };
    for (mode, c) in AppendMode::ALL.iter().zip(counts) {
        eprintln!("{mode}: {} simulated crashes, {} recoveries cut a torn tail", c.crashes, c.torn);
        // The suite must actually exercise torn tails in each mode, not only clean ends.
        assert!(c.torn > c.crashes / 20, "{mode}: only {} torn tails in {} crashes", c.torn, c.crashes);
    }
}

/// The same random runs with crashes that keep any subset of the unsynced pages (each page of a
/// write on its own, a later one without an earlier one) and of the unsynced directory changes:
/// every record reported durable survives, nothing after a gap survives (the recovered log is a
/// contiguous run of what was appended), and opening never fails. Before sync groups were marked
/// in the frames, a later page of an unsynced group kept without an earlier one made recovery
/// refuse to start ("not a torn tail").
#[test]
fn seeded_out_of_order_crashes_keep_every_synced_record() {
    let Some(counts) = run_seeds(1500, CrashModel::Subset) else { return };
    for (mode, c) in AppendMode::ALL.iter().zip(counts) {
        eprintln!(
            "{mode}: {} simulated crashes, {} recoveries cut a torn tail, {} of them with intact records \
             after the gap",
            c.crashes, c.torn, c.intact_dropped
        );
        assert!(c.torn > c.crashes / 20, "{mode}: only {} torn tails in {} crashes", c.torn, c.crashes);
        // The case this model exists for must come up in each mode.
        assert!(c.intact_dropped > 0, "{mode}: no crash left an intact record after a lost page");
    }
}

/// Where a segment's records start (its header's size).
const HEADER_BYTES: u64 = 32;

/// Options for the scripted cases: one segment holds them all, and no allocation step (which
/// syncs) falls inside a group.
const SCRIPTED: LogOptions = LogOptions { prealloc_bytes: 64 << 10, segment_bytes_max: 1 << 20 };

/// Commits `groups` (inclusive zxid ranges of records of about 300 bytes), each synced on its
/// own; returns the offset of each record in the segment, by zxid, starting from `at`.
fn commit_groups(
    log: &mut SegmentLog<FaultStorage>,
    groups: &[(i64, i64)],
    mut at: u64,
) -> BTreeMap<i64, u64> {
    let mut offsets = BTreeMap::new();
    for &(a, b) in groups {
        for z in a..=b {
            offsets.insert(z, at);
            at += sample_batch(z, z, 300).bytes();
        }
        log.append(&sample_batch(a, b, 300)).expect("append");
        log.sync().expect("sync");
    }
    offsets.insert(groups.last().expect("groups").1 + 1, at);
    offsets
}

/// The pages (by index) that bytes `from..to` of a file lie in.
fn pages_of(from: u64, to: u64) -> std::ops::RangeInclusive<u64> {
    from / FAULT_PAGE_BYTES..=(to - 1) / FAULT_PAGE_BYTES
}

/// The finding this format version fixes: a group appended over several pages, whose sync never
/// completed, reaches the disk out of order (a later page of it without an earlier one, as a
/// device that reorders writes before a flush, or the kernel's writeback of a shared mapping,
/// can leave). Opening must succeed, with every synced record intact and the whole torn group cut
/// (the intact records after the gap with it, named in the report). Both append modes; the
/// group either continues a segment or starts one after a roll.
#[test]
fn a_later_page_of_an_unsynced_group_without_an_earlier_one_is_cut() {
    for mode in AppendMode::ALL {
        for starts_a_segment in [false, true] {
            later_page_without_an_earlier_one(mode, starts_a_segment);
        }
    }
}

fn later_page_without_an_earlier_one(mode: AppendMode, starts_a_segment: bool) {
    let case = format!("{mode}, starts a segment: {starts_a_segment}");
    let s = FaultStorage::with_append_mode(21, mode);
    let mut log = SegmentLog::open(s.clone(), SCRIPTED).expect("open");
    let offsets = commit_groups(&mut log, &[(1, 5), (6, 10), (11, 15), (16, 20)], HEADER_BYTES);
    let mut start = offsets[&21];
    if starts_a_segment {
        log.roll().expect("roll");
        start = HEADER_BYTES;
    }
    // Appended, never synced: the power fails while its sync is in flight.
    let torn = sample_batch(21, 120, 300);
    log.append(&torn).expect("append");
    let seg = log.segment_names().last().cloned().expect("a segment");
    drop(log);
    let pages = pages_of(start, start + torn.bytes());
    assert!(pages.end() - pages.start() >= 3, "{case}: the group spans {pages:?}");
    // Only the group's third page reaches the disk: whole records in it, none of its first two.
    let kept = pages.start() + 2;
    s.crash_keeping_pages(|name, page| name == seg && page == kept);
    let mut log = SegmentLog::open(s.clone(), SCRIPTED)
        .unwrap_or_else(|e| panic!("{case}: a torn group that was never synced refused the start: {e}"));
    assert_eq!(log.last_zxid(), 20, "{case}: the log ends with the last synced group");
    assert_samples(&log, 1, 20, 300);
    let r = log.recovery().clone();
    let (file, offset, _) = r.truncated_tail.clone().unwrap_or_else(|| panic!("{case}: nothing was cut"));
    assert!(file.ends_with(&seg), "{case}: {file}");
    assert_eq!(offset, start, "{case}: cut where the group began");
    assert!(
        !r.dropped_records.is_empty() && r.dropped_records.iter().all(|z| (21..=120).contains(z)),
        "{case}: the intact records after the gap are named as dropped: {:?}",
        r.dropped_records
    );
    if starts_a_segment {
        assert_eq!(r.removed_segments, vec![seg.clone()], "{case}: the group's segment held nothing else");
    }
    // The log goes on from the synced end, and what it takes next survives a crash.
    log.append(&sample_batch(21, 30, 300)).expect("append");
    log.sync().expect("sync");
    drop(log);
    s.crash();
    let log = SegmentLog::open(s.clone(), SCRIPTED).expect("reopen");
    assert_samples(&log, 1, 30, 300);
}

/// The other side of the same rule: damage to a synced group that a later group follows is
/// corruption, not a torn tail, and opening refuses with `Corrupt` naming the file and the offset
/// of the damage. The damaged record is inside its group or its last; the later group was
/// synced, or is an unsynced, torn one of which only the first record reached the disk.
#[test]
fn a_bad_frame_in_a_group_a_later_group_follows_is_corrupt() {
    for mode in AppendMode::ALL {
        for damaged in [6, 8] {
            for later_synced in [true, false] {
                bad_frame_before_a_later_group(mode, damaged, later_synced);
            }
        }
    }
}

fn bad_frame_before_a_later_group(mode: AppendMode, damaged: i64, later_synced: bool) {
    let case = format!("{mode}, record {damaged} damaged, later group synced: {later_synced}");
    let s = FaultStorage::with_append_mode(23, mode);
    let mut log = SegmentLog::open(s.clone(), SCRIPTED).expect("open");
    let offsets = commit_groups(&mut log, &[(1, 4), (5, 8)], HEADER_BYTES);
    let mut later = BTreeMap::new();
    let mut at = offsets[&9];
    for z in 9..=40 {
        later.insert(z, at);
        at += sample_batch(z, z, 300).bytes();
    }
    log.append(&sample_batch(9, 40, 300)).expect("append");
    let seg = log.segment_names().last().cloned().expect("a segment");
    if later_synced {
        log.sync().expect("sync");
        drop(log);
    } else {
        drop(log);
        // Only the later group's first record reaches the disk.
        let first = pages_of(later[&9], later[&10]);
        s.crash_keeping_pages(|name, page| name == seg && first.contains(&page));
    }
    // Media damage to a synced record: one payload byte flipped.
    let at = offsets[&damaged] + 16 + 20;
    let mut f = s.open(&seg).expect("open segment");
    let mut b = [0u8; 1];
    f.read_at(at, &mut b).expect("read");
    f.write_at(at, &[b[0] ^ 0x10]).expect("write");
    f.sync().expect("sync");
    drop(f);
    match SegmentLog::open(s.clone(), SCRIPTED) {
        Err(LogError::Corrupt { file, offset, reason }) => {
            assert!(file.ends_with(&seg), "{case}: {file}");
            assert_eq!(offset, offsets[&damaged], "{case}: {reason}");
            assert!(reason.contains("starts a later sync group"), "{case}: {reason}");
            assert!(reason.contains(&format!("offset {}", later[&9])), "{case}: names the proof: {reason}");
        }
        other => panic!("{case}: expected Corrupt, got {:?}", other.map(|l| l.recovery().clone())),
    }
}

/// What the rule cannot tell apart, pinned so that a change to it is a decision: damage inside
/// the last group on disk, with no record of a later group after it, is cut like a torn group,
/// because a group whose sync never completed looks exactly like that (docs/log-format.md,
/// "Media corruption"). The groups before it are untouched.
#[test]
fn damage_in_the_last_group_with_nothing_after_it_is_cut() {
    for mode in AppendMode::ALL {
        let s = FaultStorage::with_append_mode(25, mode);
        let mut log = SegmentLog::open(s.clone(), SCRIPTED).expect("open");
        let offsets = commit_groups(&mut log, &[(1, 4), (5, 8)], HEADER_BYTES);
        let seg = log.segment_names().last().cloned().expect("a segment");
        drop(log);
        let at = offsets[&6] + 16 + 20;
        let mut f = s.open(&seg).expect("open segment");
        let mut b = [0u8; 1];
        f.read_at(at, &mut b).expect("read");
        f.write_at(at, &[b[0] ^ 0x10]).expect("write");
        f.sync().expect("sync");
        drop(f);
        let log = SegmentLog::open(s.clone(), SCRIPTED).expect("opens");
        assert_eq!(log.last_zxid(), 5, "{mode}");
        assert_eq!(log.recovery().dropped_records, vec![7, 8], "{mode}");
        assert_samples(&log, 1, 5, 300);
    }
}

#[test]
fn crash_during_segment_start_and_roll() {
    // Tiny segments so that nearly every batch rolls, and a crash right after each append: the
    // crash lands between creating a segment, writing its header and syncing the directory.
    for (seed, model) in (0..300u64).flat_map(|seed| CrashModel::ALL.map(|m| (seed, m))) {
        let s = disk(seed, model);
        let opts = LogOptions { prealloc_bytes: 64, segment_bytes_max: 200 };
        let mut acked = 0;
        let mut model = Model::new();
        for round in 0..12 {
            let mut log = SegmentLog::open(s.clone(), opts).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            verify(seed, &log, &model, acked, 0, None);
            let last = log.last_zxid();
            model.retain(|&k, _| k <= last);
            let z = last + 1;
            let size = size_for(z, round);
            let (h, t) = sample_txn(z, size);
            model.insert(z, size);
            // Some seeds start their segments from a prepared spare file.
            if seed % 3 == 0 {
                if let Some(job) = log.spare_needed() {
                    log.install_spare(job.run());
                }
            }
            log.append(&RecordBatch::encode(&[(&h, &t)]).expect("encode")).expect("append");
            if seed % 2 == 0 {
                log.sync().expect("sync");
                acked = z;
            } else {
                acked = last;
            }
            drop(log);
            s.crash();
        }
    }
}

#[test]
fn full_disk_refuses_the_append_and_recovers_when_space_returns() {
    for mode in AppendMode::ALL {
        full_disk_refuses_the_append_and_recovers_when_space_returns_in(mode);
    }
}

fn full_disk_refuses_the_append_and_recovers_when_space_returns_in(mode: AppendMode) {
    let s = FaultStorage::with_append_mode(7, mode);
    let opts = LogOptions { prealloc_bytes: 1024, segment_bytes_max: 1 << 20 };
    let mut log = SegmentLog::open(s.clone(), opts).expect("open");
    let mut z = 1;
    let mut full = None;
    s.set_capacity(Some(8 * 1024));
    for _ in 0..200 {
        let (h, t) = sample_txn(z, 150);
        match log.commit(&[(&h, &t)]) {
            Ok(_) => z += 1,
            Err(e) => {
                full = Some(e);
                break;
            }
        }
    }
    let e = full.expect("the disk fills up");
    assert!(e.is_storage_full(), "{e}");
    assert_eq!(log.last_zxid(), z - 1, "nothing of the refused batch was appended");
    // Still usable: a retry fails the same way, then works once space is back.
    let (h, t) = sample_txn(z, 150);
    assert!(log.commit(&[(&h, &t)]).expect_err("still full").is_storage_full());
    s.set_capacity(None);
    log.commit(&[(&h, &t)]).expect("space is back");
    drop(log);
    s.crash();
    let log = SegmentLog::open(s.clone(), opts).expect("reopen");
    assert_eq!(log.last_zxid(), z);
}

/// The background writer on a full disk: what was appended before is reported durable, the
/// refusal is reported once, every batch queued behind it is dropped (it would leave a gap), and
/// after `resume` the batches that follow the last durable zxid are written once space is back.
#[test]
fn writer_refuses_on_a_full_disk_and_resumes() {
    for mode in AppendMode::ALL {
        writer_refuses_on_a_full_disk_and_resumes_in(mode);
    }
}

/// A writer over a log opened on `s`, and its reports: the durable zxid, or whether a failure was
/// a full disk.
fn writer_reporting_full_disks(
    s: &FaultStorage,
    opts: LogOptions,
) -> (zk_log::LogWriter<FaultStorage>, std::sync::mpsc::Receiver<Result<i64, bool>>) {
    let log = SegmentLog::open(s.clone(), opts).expect("open");
    let (tx, rx) = std::sync::mpsc::channel();
    let w = zk_log::LogWriter::spawn(log, 4, move |r| {
        let _ = tx.send(r.map_err(|e| e.is_storage_full()));
    })
    .expect("spawn");
    (w, rx)
}

fn writer_refuses_on_a_full_disk_and_resumes_in(mode: AppendMode) {
    let s = FaultStorage::with_append_mode(11, mode);
    let opts = LogOptions { prealloc_bytes: 1024, segment_bytes_max: 1 << 20 };
    let (w, rx) = writer_reporting_full_disks(&s, opts);
    s.set_capacity(Some(8 * 1024));
    let batch = |z: i64| one_record(z, 150);
    // Submit one at a time until the refusal arrives.
    let mut z = 1;
    let durable = loop {
        w.submit(batch(z)).expect("submit");
        match rx.recv().expect("report") {
            Ok(d) => {
                assert_eq!(d, z);
                z += 1;
            }
            Err(full) => {
                assert!(full, "the error is a full disk");
                break z - 1;
            }
        }
        assert!(z < 200, "the disk never filled");
    };
    // Batches that follow the refused one are dropped while refusing: no report, no gap.
    w.submit(batch(z + 1)).expect("submit");
    w.submit(batch(z + 2)).expect("submit");
    // Still full after resuming: refused again.
    w.resume().expect("resume");
    w.submit(batch(z)).expect("submit");
    assert_eq!(rx.recv().expect("report"), Err(true));
    s.set_capacity(None);
    w.resume().expect("resume");
    w.submit(batch(z)).expect("submit");
    w.submit(batch(z + 1)).expect("submit");
    let mut last = 0;
    while last < z + 1 {
        last = rx.recv().expect("report").expect("durable");
    }
    let log = w.shutdown().expect("shutdown");
    assert_eq!(log.durable_zxid(), z + 1);
    assert!(durable >= 1);
    drop(log);
    s.crash();
    let log = SegmentLog::open(s.clone(), opts).expect("reopen");
    assert_eq!(log.first_zxid(), Some(1));
    assert_eq!(log.last_zxid(), z + 1);
}

/// A reset that finds the disk full stops the writer, full disk or not (a barrier that failed
/// half-way leaves nothing to resume from): the report says so and `is_stopped` tells the
/// caller, whose server must stop rather than wait for a resume that cannot come.
#[test]
fn a_reset_on_a_full_disk_stops_the_writer() {
    let s = FaultStorage::with_append_mode(13, AppendMode::Pwrite);
    let opts = LogOptions { prealloc_bytes: 1024, segment_bytes_max: 1 << 20 };
    let (w, rx) = writer_reporting_full_disks(&s, opts);
    w.submit(one_record(1, 150)).expect("submit");
    assert_eq!(rx.recv().expect("report"), Ok(1));
    assert!(!w.is_stopped());
    s.set_capacity(Some(s.used_bytes()));
    w.reset_to(100).expect("queued");
    assert_eq!(rx.recv().expect("report"), Err(true), "the reset is refused for a full disk");
    assert!(w.is_stopped(), "and the writer has stopped");
    s.set_capacity(None);
    assert!(w.resume().is_err() || w.is_stopped(), "a resume does not bring it back");
}

/// Batches that queue up behind a sync go to the log in one write: a follower submits a batch
/// per PROPOSAL, and a write per batch was most of its system calls. A crash keeps a prefix.
#[test]
fn queued_batches_are_written_with_one_write_per_sync() {
    for mode in AppendMode::ALL {
        queued_batches_are_written_with_one_write_per_sync_in(mode);
    }
}

fn queued_batches_are_written_with_one_write_per_sync_in(mode: AppendMode) {
    let s = FaultStorage::with_append_mode(17, mode);
    let opts = LogOptions { prealloc_bytes: 64 * 1024, segment_bytes_max: 16 << 20 };
    let log = SegmentLog::open(s.clone(), opts).expect("open");
    let (tx, rx) = std::sync::mpsc::channel();
    let w = zk_log::LogWriter::spawn(log, 256, move |r| {
        let _ = tx.send(r.map_err(|e| e.to_string()));
    })
    .expect("spawn");
    s.set_sync_delay(std::time::Duration::from_millis(2));
    let (writes_before, syncs_before) = s.io_counts();
    const BATCHES: i64 = 400;
    for z in 1..=BATCHES {
        w.submit(one_record(z, 120)).expect("submit");
    }
    let mut last = 0;
    while last < BATCHES {
        last = rx.recv().expect("report").expect("durable");
    }
    let (writes, syncs) = s.io_counts();
    let (writes, syncs) = (writes - writes_before, syncs - syncs_before);
    assert!(syncs < BATCHES as u64 / 4, "{mode}: batches did not queue behind the syncs ({syncs} syncs)");
    // One data write per sync, and the odd segment header (written and synced on its own).
    assert!(writes <= syncs, "{mode}: {writes} writes for {syncs} syncs of {BATCHES} batches");
    let log = w.shutdown().expect("shutdown");
    drop(log);
    s.crash();
    let log = SegmentLog::open(s.clone(), opts).expect("reopen");
    assert_eq!((log.first_zxid(), log.last_zxid()), (Some(1), BATCHES));
}

#[test]
fn failed_sync_poisons_the_log() {
    for mode in AppendMode::ALL {
        failed_sync_poisons_the_log_in(mode);
    }
}

fn failed_sync_poisons_the_log_in(mode: AppendMode) {
    let s = FaultStorage::with_append_mode(3, mode);
    let mut log = SegmentLog::open(s.clone(), LogOptions { prealloc_bytes: 4096, ..LogOptions::default() })
        .expect("open");
    let (h, t) = sample_txn(1, 100);
    log.commit(&[(&h, &t)]).expect("commit");
    s.set_fail_sync(true);
    let (h, t) = sample_txn(2, 100);
    let e = log.commit(&[(&h, &t)]).expect_err("sync fails");
    assert!(matches!(e, LogError::Io { op: "sync", .. }), "{e}");
    s.set_fail_sync(false);
    let (h, t) = sample_txn(3, 100);
    assert!(matches!(log.commit(&[(&h, &t)]), Err(LogError::Poisoned(_))));
    assert_eq!(log.durable_zxid(), 1);
}

/// `commit_inline` writes on the caller's thread only when the writer is idle, keeps zxid order
/// with queued batches, and survives a crash like a queued commit.
#[test]
fn inline_commits_only_when_the_writer_is_idle() {
    for mode in AppendMode::ALL {
        inline_commits_only_when_the_writer_is_idle_in(mode);
    }
}

fn inline_commits_only_when_the_writer_is_idle_in(mode: AppendMode) {
    let s = FaultStorage::with_append_mode(5, mode);
    let opts = LogOptions { prealloc_bytes: 4096, segment_bytes_max: 1 << 20 };
    let log = SegmentLog::open(s.clone(), opts).expect("open");
    let (tx, rx) = std::sync::mpsc::channel();
    let w = zk_log::LogWriter::spawn(log, 4, move |r| {
        let _ = tx.send(r.map_err(|e| e.to_string()));
    })
    .expect("spawn");
    let batch = |z: i64| one_record(z, 100);
    // The thread takes the log's lock for a moment as it starts (to ask for a spare segment):
    // an inline commit is refused until it lets go.
    let inline_when_idle = |z: i64| loop {
        match w.commit_inline(&batch(z)) {
            Some(r) => break r,
            None => std::thread::yield_now(),
        }
    };
    assert_eq!(inline_when_idle(1).expect("durable"), 1);
    assert_eq!(inline_when_idle(2).expect("durable"), 2);
    // Interleave queued batches and inline attempts: an attempt made while a batch is queued or
    // being written is refused; an accepted one comes after everything queued (else it would be
    // out of order and fail).
    let (mut next, mut accepted, mut declined, mut last_submitted) = (3, 0, 0, 0);
    while next <= 400 {
        w.submit(batch(next)).expect("submit");
        last_submitted = next;
        next += 1;
        match w.commit_inline(&batch(next)) {
            None => declined += 1,
            Some(r) => {
                assert_eq!(r.expect("in order"), next);
                next += 1;
                accepted += 1;
            }
        }
    }
    assert!(declined > 0, "some attempts met a busy writer ({accepted} accepted)");
    // Reports cover the queued batches (inline commits are answered by their call).
    let mut last = 0;
    while last < last_submitted {
        last = rx.recv().expect("report").expect("durable");
    }
    // Idle again: inline works and follows the queued batches.
    let mut ok = None;
    for _ in 0..1000 {
        if let Some(r) = w.commit_inline(&batch(next)) {
            ok = Some(r);
            break;
        }
        std::thread::yield_now();
    }
    assert_eq!(ok.expect("the writer goes idle").expect("durable"), next);
    // Out of order is an error, as for a queued batch.
    assert!(w.commit_inline(&batch(next + 5)).expect("idle").is_err());
    let log = w.shutdown().expect("shutdown");
    assert_eq!(log.durable_zxid(), next);
    drop(log);
    s.crash();
    let log = SegmentLog::open(s.clone(), opts).expect("reopen");
    assert_eq!((log.first_zxid(), log.last_zxid()), (Some(1), next));
}

/// A lone writer's inline commits, the writer thread woken only when there is something to
/// prepare, still keep a spare ready: each segment that takes the spare gets the next one
/// prepared, and every record survives.
#[test]
fn inline_commits_alone_keep_a_spare_segment_ready() {
    for mode in AppendMode::ALL {
        let s = FaultStorage::with_append_mode(9, mode);
        let opts = LogOptions { prealloc_bytes: 4096, segment_bytes_max: 16 << 10 };
        let log = SegmentLog::open(s.clone(), opts).expect("open");
        let w = zk_log::LogWriter::spawn(log, 4, |_| {}).expect("spawn");
        let mut z = 1;
        while z <= 600 {
            // Only inline commits: a lone client's writes. The writer may be busy preparing.
            match w.commit_inline(&one_record(z, 100)) {
                Some(r) => {
                    assert_eq!(r.expect("durable"), z);
                    z += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        // 600 records of about 140 bytes in segments of 16 KiB: more than one segment, and a spare
        // prepared for the next (the helper takes a moment).
        let spare = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            let _ = w.commit_inline(&one_record(z, 100)).map(|r| {
                r.expect("durable");
                z += 1;
            });
            s.list().expect("list").iter().any(|n| n == "log.spare")
        });
        assert!(spare, "{mode:?}: a spare segment is prepared for inline commits alone");
        let log = w.shutdown().expect("shutdown");
        assert_eq!(log.last_zxid(), z - 1);
        let segments =
            s.list().expect("list").iter().filter(|n| n.starts_with("log.") && *n != "log.spare").count();
        assert!(segments >= 2, "{mode:?}: {segments} segments");
    }
}

/// What the job-level crash test expects the log to hold: (zxid, payload size), oldest first.
type Records = Vec<(i64, usize)>;

/// A multi-step job the power failed in the middle of.
#[derive(Debug, Clone, Copy)]
enum InFlight {
    /// Appends, syncs, rolls, purges: what recovery keeps is judged by the acknowledged prefix.
    Plain,
    /// `truncate_after` that would keep `keep` records.
    Truncate { keep: usize, zxid: i64 },
    /// `reset_to(zxid)`.
    Reset(i64),
}

/// The job-level model: what the log holds if every job so far completed, and how much of it
/// was acknowledged.
#[derive(Debug, Clone)]
struct JobModel {
    recs: Records,
    /// `recs[..acked]` were acknowledged (their sync, or the truncation or reset that left them
    /// as the whole log, returned).
    acked: usize,
    /// Records below this may be gone by request (purge).
    purged_below: i64,
    /// The zxid of the last completed reset, while no purge has moved the log's start since.
    reset_base: Option<i64>,
    generation: u64,
}

/// Checks the reopened log against the model and the job the power failed in, then makes the
/// model what was recovered.
fn verify_jobs(seed: u64, log: &mut SegmentLog<FaultStorage>, m: &mut JobModel, inflight: InFlight) {
    let got: Vec<(i64, zk_log::LogEntry)> = match log.first_zxid() {
        None => Vec::new(),
        Some(first) => log
            .read_from(first)
            .unwrap_or_else(|e| panic!("seed {seed}: read_from: {e}"))
            .map(|e| e.unwrap_or_else(|e| panic!("seed {seed}: record: {e}")))
            .map(|e| (e.header.zxid, e))
            .collect(),
    };
    let base = log.base_zxid();
    // The state the in-flight reset (or truncation that empties the log) leads to.
    let reset_target = match inflight {
        InFlight::Reset(z) => Some(z),
        InFlight::Truncate { keep: 0, zxid } => Some(zxid),
        _ => None,
    };
    if got.is_empty() && reset_target == Some(base) {
        // The reset took: nothing old is left, and the log continues above it.
        assert_eq!(log.last_zxid(), base, "seed {seed}: end of a reset log");
        m.recs.clear();
        m.acked = 0;
        m.reset_base = Some(base);
        m.generation += 1;
        return;
    }
    // Otherwise: a run of the expected records, starting where purges allow, reaching at least
    // what was acknowledged (or, for a truncation under way, what it keeps).
    let need = match inflight {
        InFlight::Truncate { keep, .. } if keep > 0 => m.acked.min(keep),
        _ => m.acked,
    };
    let p =
        match got.first() {
            None => m.recs.len().min(need),
            Some((z, _)) => m.recs.iter().position(|(k, _)| k == z).unwrap_or_else(|| {
                panic!("seed {seed}: first zxid {z:#x} was never appended (or was removed)")
            }),
        };
    assert!(
        m.recs[..p].iter().all(|&(k, _)| k < m.purged_below),
        "seed {seed}: records before {:#x} are missing but were not purged",
        got.first().map_or(0, |g| g.0)
    );
    for (i, (z, e)) in got.iter().enumerate() {
        let Some(&(mz, size)) = m.recs.get(p + i) else {
            panic!("seed {seed}: zxid {z:#x} is beyond everything appended")
        };
        assert_eq!(*z, mz, "seed {seed}: zxid {z:#x} where {mz:#x} was expected");
        let (h, t) = sample_txn(mz, size);
        assert_eq!((&e.header, &e.txn), (&h, &t), "seed {seed}: content of {z:#x} (a stale record?)");
    }
    let q = p + got.len();
    assert!(
        q >= need,
        "seed {seed}: {} records recovered, {need} were acknowledged ({inflight:?}); log ends at {:#x}",
        q,
        log.last_zxid()
    );
    if let Some(b) = m.reset_base {
        assert_eq!(base, b, "seed {seed}: the base of the last reset was lost");
    }
    if let Some((first, _)) = got.first() {
        assert!(base < *first, "seed {seed}: base {base:#x} not below the first zxid {first:#x}");
    }
    m.recs.truncate(q);
    m.recs.drain(..p);
    m.acked = m.recs.len();
    m.generation += 1;
}

fn job_seed(seed: u64, model: CrashModel) -> u64 {
    let s = disk(seed, model);
    let mut rng = SplitMix64::new(seed ^ 0x7E57_AB1E);
    let opts = LogOptions { prealloc_bytes: 128 + rng.upto(1024), segment_bytes_max: 400 + rng.upto(3000) };
    let mut log = SegmentLog::open(s.clone(), opts).expect("open empty");
    let mut ep = EpochStore::open(s.clone(), 0).expect("epochs");
    let mut m = JobModel { recs: Vec::new(), acked: 0, purged_below: 0, reset_base: None, generation: 0 };
    let (mut accepted, mut current) = (0i64, 0i64);
    let mut resets_taken = 0;
    for _ in 0..(30 + rng.upto(120)) {
        // Epoch writes in flight: (old, new) for acceptedEpoch and currentEpoch.
        let mut epoch_flight: (Option<i64>, Option<i64>) = (None, None);
        let mut inflight = InFlight::Plain;
        let last = log.last_zxid();
        let res: Result<(), LogError> = match rng.upto(99) {
            0..=39 => (|| {
                let mut start = last + 1;
                if rng.chance(1, 8) {
                    // A new epoch: as a leader would, accept it and make it current first.
                    let e = current.max(last >> 32) + 1;
                    if accepted < e {
                        epoch_flight.0 = Some(e);
                        ep.set_accepted(e)?;
                        accepted = e;
                        epoch_flight.0 = None;
                    }
                    epoch_flight.1 = Some(e);
                    ep.set_current(e)?;
                    current = e;
                    epoch_flight.1 = None;
                    start = (e << 32) | 1;
                }
                let mut b = RecordBatch::new();
                for z in start..start + 1 + rng.upto(5) as i64 {
                    let size = size_for(z, m.generation);
                    let (h, t) = sample_txn(z, size);
                    b.push(&h, &t).expect("push");
                    m.recs.push((z, size));
                }
                log.append(&b)
            })(),
            40..=59 => log.sync().map(|()| m.acked = m.recs.len()),
            60..=63 => log.roll().map(|()| m.acked = m.recs.len()),
            64..=71 => {
                let lo = log.base_zxid();
                let z = lo + rng.upto((last - lo).max(0) as u64) as i64;
                let keep = m.recs.iter().take_while(|(k, _)| *k <= z).count();
                if z < last {
                    inflight = InFlight::Truncate { keep, zxid: z };
                }
                log.truncate_after(z).map(|()| {
                    if z < last {
                        m.recs.truncate(keep);
                        m.acked = keep;
                        m.generation += 1;
                        if keep == 0 {
                            m.reset_base = Some(z);
                        }
                    }
                })
            }
            72..=76 => {
                // A snapshot from a leader, behind or ahead of this log, in an epoch it has.
                let z = rng.upto((last + 20) as u64) as i64;
                inflight = InFlight::Reset(z);
                log.reset_to(z).map(|()| {
                    m.recs.clear();
                    m.acked = 0;
                    m.reset_base = Some(z);
                    m.generation += 1;
                })
            }
            77..=80 => {
                let z = rng.upto(last.max(0) as u64) as i64;
                m.purged_below = m.purged_below.max(z);
                let before = log.first_zxid();
                let res = log.purge_before(z).map(|_| ());
                // A purge that removed (or may have begun to remove) the oldest segment moves
                // the base to just before the first record kept.
                if res.is_err() || log.first_zxid() != before {
                    m.reset_base = None;
                }
                res
            }
            81..=85 => {
                if rng.chance(1, 2) {
                    let e = accepted + rng.upto(1) as i64;
                    epoch_flight.0 = Some(e);
                    ep.set_accepted(e).map(|()| accepted = e)
                } else {
                    let e = current + rng.upto((accepted - current) as u64) as i64;
                    epoch_flight.1 = Some(e);
                    ep.set_current(e).map(|()| current = e)
                }
            }
            86..=89 => {
                s.fail_after(Some(rng.upto(12)));
                Ok(())
            }
            _ => Err(LogError::WriterStopped),
        };
        let Err(e) = res else { continue };
        // The power failed (or this is a clean crash point): restart.
        assert!(
            s.power_failed() || matches!(e, LogError::WriterStopped),
            "seed {seed}: a job failed without a power failure: {e}"
        );
        drop(log);
        drop(ep);
        s.crash();
        log = SegmentLog::open(s.clone(), opts).unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        let was_reset = m.reset_base;
        verify_jobs(seed, &mut log, &mut m, inflight);
        resets_taken += u64::from(m.reset_base != was_reset && matches!(inflight, InFlight::Reset(_)));
        // A reader on the recovered log sees the same records.
        if let Some(first) = log.first_zxid() {
            let r = log.reader();
            let got =
                r.read_range(first, i64::MAX, usize::MAX).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(got.len(), m.recs.len(), "seed {seed}: reader and log disagree");
        }
        // Recovery from a snapshot at the base finds no gap.
        let base = log.base_zxid();
        log.reconcile_with_snapshot(base)
            .unwrap_or_else(|e| panic!("seed {seed}: reconcile at the base: {e}"));
        ep = EpochStore::open(s.clone(), log.last_zxid())
            .unwrap_or_else(|e| panic!("seed {seed}: epochs after the crash: {e}"));
        let ok_accepted = ep.accepted() == accepted || Some(ep.accepted()) == epoch_flight.0;
        let ok_current = ep.current() == current || Some(ep.current()) == epoch_flight.1;
        assert!(
            ok_accepted && ok_current,
            "seed {seed}: epochs ({}, {}) after a crash; expected ({accepted}, {current}) or the update under way \
             {epoch_flight:?}",
            ep.accepted(),
            ep.current()
        );
        (accepted, current) = (ep.accepted(), ep.current());
    }
    resets_taken
}

/// Truncations, resets, purges and epoch updates interleaved with appends, and the power failing
/// at a random operation inside any of them: the reopened log is exactly a run of what was
/// appended in job order, holding every acknowledged record, with no record a completed (or
/// decided) truncation or reset removed; the epoch files hold their old or their new value.
#[test]
fn seeded_power_failures_inside_truncate_reset_and_epoch_writes() {
    if let Some(seed) = std::env::var("ZK_LOG_SEED").ok().and_then(|v| v.parse().ok()) {
        for model in CrashModel::ALL {
            job_seed(seed, model);
        }
        return;
    }
    for model in CrashModel::ALL {
        let mut taken = 0;
        for seed in 0..1200 {
            taken += job_seed(seed, model);
        }
        // Some power failures must land after a reset's marker became durable, so that recovery
        // finishing a reset is exercised, not only resets that never started.
        assert!(taken > 0, "{model:?}: no interrupted reset was finished by recovery");
    }
}

/// The learner's order at NEWLEADER: the synced transactions of the new epoch are durable, then
/// currentEpoch is written. The power fails at every operation of that write in turn: a restart
/// always finishes the update, from the temp file when it shows the update under way, else
/// because the log holds records of an epoch acceptedEpoch covers (the update had not begun:
/// Apache covers that window with its updatingEpoch file); it never reads a torn value, and
/// acceptedEpoch is untouched.
#[test]
fn power_failure_inside_a_learners_current_epoch_write() {
    let (mut finished, mut kept) = (0, 0);
    for seed in 0..40u64 {
        for ops in 0..8u64 {
            let model = CrashModel::ALL[(ops % 2) as usize];
            let s = disk(seed * 31 + ops, model);
            let opts = LogOptions { prealloc_bytes: 1024, segment_bytes_max: 1 << 20 };
            let mut log = SegmentLog::open(s.clone(), opts).expect("open");
            let mut ep = EpochStore::open(s.clone(), 0).expect("epochs");
            log.append(&one_record(1, 100)).expect("append");
            log.sync().expect("sync");
            ep.set_accepted(5).expect("accept");
            let e5 = 5i64 << 32;
            log.append(&one_record(e5 + 1, 100)).expect("append");
            log.sync().expect("sync");
            s.fail_after(Some(ops));
            let done = ep.set_current(5).is_ok();
            drop((log, ep));
            s.crash();
            let log = SegmentLog::open(s.clone(), opts).expect("reopen");
            assert_eq!(log.last_zxid(), e5 + 1, "seed {seed}/{ops}: the synced txns survive");
            match EpochStore::open(s.clone(), log.last_zxid()) {
                Ok(ep) => {
                    assert_eq!((ep.accepted(), ep.current()), (5, 5), "seed {seed}/{ops}");
                    if done {
                        kept += 1;
                    } else {
                        finished += 1;
                    }
                }
                Err(e) => panic!("seed {seed}/{ops}: a restart refused: {e}"),
            }
        }
    }
    eprintln!("{finished} updates finished at restart, {kept} completed before the crash");
    assert!(finished > 0 && kept > 0);
}

/// One job given to the writer in the writer crash test.
#[derive(Debug, Clone, Copy)]
enum WJob {
    Batch(i64, i64),
    Truncate(i64),
    Reset(i64),
}

/// The writer under a power failure at a random point: reports come in job order, and the
/// reopened log is what the reported jobs left, plus at most the effect of the jobs after them
/// (a truncation acknowledged stays truncated, a reset acknowledged leaves no old record, nothing
/// acknowledged is lost).
/// Returns what was in flight when the power failed: 0 nothing (all done), 1 batches, 2 a
/// truncation, 3 a reset.
fn writer_seed(seed: u64, model: CrashModel) -> usize {
    let s = disk(seed, model);
    let mut rng = SplitMix64::new(seed ^ 0x0034_17E5);
    let opts = LogOptions { prealloc_bytes: 256 + rng.upto(1024), segment_bytes_max: 600 + rng.upto(3000) };
    let gen = seed; // content differs from other seeds' but is fixed within the run
                    // Plan the jobs and the state each leaves: (records, base).
    let mut jobs = Vec::new();
    let mut states: Vec<(Records, i64)> = vec![(Vec::new(), 0)];
    for _ in 0..(10 + rng.upto(60)) {
        let (recs, base) = states.last().expect("a state").clone();
        let last = recs.last().map_or(base, |r| r.0);
        let (job, next) = match rng.upto(9) {
            0 if last > base => {
                let z = base + rng.upto((last - base) as u64) as i64;
                let keep: Records = recs.iter().copied().take_while(|r| r.0 <= z).collect();
                let nb = if keep.is_empty() { z } else { base };
                (WJob::Truncate(z), (keep, nb))
            }
            1 => {
                let z = rng.upto((last + 20) as u64) as i64;
                (WJob::Reset(z), (Vec::new(), z))
            }
            _ => {
                let start = if rng.chance(1, 10) { (((last >> 32) + 1) << 32) | 1 } else { last + 1 };
                let end = start + rng.upto(6) as i64;
                let mut r = recs.clone();
                r.extend((start..=end).map(|z| (z, size_for(z, gen))));
                (WJob::Batch(start, end), (r, base))
            }
        };
        jobs.push(job);
        states.push(next);
    }
    let log = SegmentLog::open(s.clone(), opts).expect("open");
    let (tx, rx) = std::sync::mpsc::channel();
    let w = zk_log::LogWriter::spawn_with_reports(log, 1 + rng.upto(6) as usize, move |r| {
        let _ = tx.send(r);
    })
    .expect("spawn");
    s.fail_after(Some(rng.upto(400)));
    for job in &jobs {
        let sent = match *job {
            WJob::Batch(a, b) => {
                let mut batch = RecordBatch::new();
                for z in a..=b {
                    let (h, t) = sample_txn(z, size_for(z, gen));
                    batch.push(&h, &t).expect("push");
                }
                w.submit(batch)
            }
            WJob::Truncate(z) => w.truncate_after(z),
            WJob::Reset(z) => w.reset_to(z),
        };
        if sent.is_err() {
            break; // the writer stopped after the power failure
        }
    }
    // Joining the thread delivers every report it will make.
    let _ = w.shutdown();
    let mut done = 0; // jobs acknowledged, in order
    for r in rx.try_iter() {
        match r {
            zk_log::WriterReport::Durable(z) => {
                while let Some(WJob::Batch(_, b)) = jobs.get(done) {
                    if *b > z {
                        break;
                    }
                    done += 1;
                }
                assert!(
                    done > 0 && matches!(jobs[done - 1], WJob::Batch(_, b) if b == z),
                    "seed {seed}: Durable({z:#x}) does not end a batch at job {done}: {jobs:?}"
                );
            }
            zk_log::WriterReport::Truncated(z) => {
                let WJob::Truncate(t) = jobs[done] else { panic!("seed {seed}: Truncated out of order") };
                let end = states[done + 1].0.last().map_or(states[done + 1].1, |r| r.0);
                assert_eq!(z, end, "seed {seed}: Truncated({z:#x}) for truncate_after({t:#x})");
                done += 1;
            }
            zk_log::WriterReport::Reset(z) => {
                assert!(matches!(jobs[done], WJob::Reset(r) if r == z), "seed {seed}: Reset out of order");
                done += 1;
            }
            zk_log::WriterReport::Failed(e) => {
                assert!(s.power_failed(), "seed {seed}: writer failed without a power failure: {e}");
                break;
            }
        }
    }
    s.crash();
    let log = SegmentLog::open(s.clone(), opts).unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
    let got: Records = match log.first_zxid() {
        None => Vec::new(),
        Some(f) => log
            .read_from(f)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"))
            .map(|e| {
                let e = e.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                let z = e.header.zxid;
                assert_eq!(
                    (e.header, e.txn),
                    sample_txn(z, size_for(z, gen)),
                    "seed {seed}: content of {z:#x}"
                );
                (z, size_for(z, gen))
            })
            .collect(),
    };
    let (acked, acked_base) = &states[done];
    let is_prefix =
        |of: &Records, min: usize| got.len() >= min && got.len() <= of.len() && of[..got.len()] == got[..];
    let ok = match jobs.get(done) {
        None => got == *acked,
        Some(WJob::Batch(..)) => {
            // Batches up to the next truncation or reset may have landed, in part.
            let b = (done..jobs.len()).find(|&k| !matches!(jobs[k], WJob::Batch(..))).unwrap_or(jobs.len());
            is_prefix(&states[b].0, acked.len())
        }
        Some(WJob::Truncate(z)) if !states[done + 1].0.is_empty() => {
            is_prefix(acked, states[done + 1].0.len()) && log.base_zxid() <= *z
        }
        Some(WJob::Truncate(z) | WJob::Reset(z)) => {
            got == *acked || (got.is_empty() && log.base_zxid() == *z && log.last_zxid() == *z)
        }
    };
    assert!(
        ok,
        "seed {seed}: recovered {:?}.. ({} records) after {done} acknowledged jobs; next {:?}",
        got.first(),
        got.len(),
        jobs.get(done)
    );
    if got == *acked && acked.first().map(|r| r.0) == Some(acked_base + 1) {
        assert_eq!(log.base_zxid(), *acked_base, "seed {seed}: base");
    }
    match jobs.get(done) {
        None => 0,
        Some(WJob::Batch(..)) => 1,
        Some(WJob::Truncate(_)) => 2,
        Some(WJob::Reset(_)) => 3,
    }
}

#[test]
fn seeded_power_failures_under_the_writer() {
    if let Some(seed) = std::env::var("ZK_LOG_SEED").ok().and_then(|v| v.parse().ok()) {
        for model in CrashModel::ALL {
            writer_seed(seed, model);
        }
        return;
    }
    for model in CrashModel::ALL {
        let mut kinds = [0u32; 4];
        for seed in 0..400 {
            kinds[writer_seed(seed, model)] += 1;
        }
        eprintln!(
            "{model:?}: in flight at the power failure: none {}, batches {}, truncate {}, reset {}",
            kinds[0], kinds[1], kinds[2], kinds[3]
        );
        assert!(
            kinds.iter().all(|&k| k > 0),
            "{model:?}: every kind of job must meet a power failure: {kinds:?}"
        );
    }
}
