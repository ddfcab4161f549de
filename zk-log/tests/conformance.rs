//! The backend conformance suite, run on the real disk and on the fault-injecting disk.

use zk_log::{conformance, AppendMode, CrashModel, FaultStorage, FileStorage};

#[test]
fn file_backend_conforms() {
    for mode in AppendMode::ALL {
        let dirs: std::cell::RefCell<Vec<tempfile::TempDir>> = Default::default();
        conformance::run_all(&mut || {
            let d = tempfile::tempdir().expect("tempdir");
            let s = FileStorage::open_dir_with(d.path().join("zkrs-log"), mode).expect("open dir");
            dirs.borrow_mut().push(d);
            s
        });
    }
}

#[test]
fn fault_backend_conforms() {
    for mode in AppendMode::ALL {
        for model in CrashModel::ALL {
            let mut seed = 0;
            conformance::run_all(&mut || {
                seed += 1;
                FaultStorage::with_models(seed, mode, model)
            });
        }
    }
}

/// The checks that crash: on the real disk a crash is a process crash (the page cache keeps what
/// was written); on the fault-injecting disk the power fails, in both append modes and both
/// crash models, over several seeds.
#[test]
fn crash_checks_conform() {
    for mode in AppendMode::ALL {
        let dirs: std::cell::RefCell<Vec<tempfile::TempDir>> = Default::default();
        conformance::run_crash_checks(
            &mut || {
                let d = tempfile::tempdir().expect("tempdir");
                let s = FileStorage::open_dir_with(d.path().join("zkrs-log"), mode).expect("open dir");
                dirs.borrow_mut().push(d);
                s
            },
            &mut |_| {},
        );
        for model in CrashModel::ALL {
            for seed in 0..12 {
                conformance::run_crash_checks(
                    &mut || FaultStorage::with_models(seed, mode, model),
                    &mut |s| s.crash(),
                );
            }
        }
    }
}

/// A log written in one append mode opens, recovers and takes appends in the other: the modes
/// share the format, so an operator can switch `txnLog.appendMode` between restarts.
#[test]
fn a_log_switches_append_modes_between_opens() {
    use zk_log::conformance::{assert_samples, sample_batch, small_options};
    use zk_log::SegmentLog;
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path().join("zkrs-log");
    let mut next = 1i64;
    for round in 0..6 {
        let mode = AppendMode::ALL[round % 2];
        let s = FileStorage::open_dir_with(&dir, mode).expect("open dir");
        let mut log = SegmentLog::open(s, small_options()).expect("log opens");
        assert_eq!(log.last_zxid(), next - 1, "{mode}: every earlier record is there");
        // Enough records to roll segments and cross preallocation steps in each mode.
        log.append(&sample_batch(next, next + 9, 150)).expect("append");
        log.sync().expect("sync");
        next += 10;
        log.append(&sample_batch(next, next + 9, 150)).expect("append");
        log.sync().expect("sync");
        next += 10;
        assert_samples(&log, 1, next - 1, 150);
    }
}

/// Every sync that made appends durable is counted, in the shared figures a metrics reader holds
/// while the log is written elsewhere; a sync with nothing to write is not.
#[test]
fn syncs_are_counted_and_timed() {
    use zk_log::conformance::{sample_batch, small_options};
    use zk_log::SegmentLog;
    let mut log = SegmentLog::open(FaultStorage::with_append_mode(7, AppendMode::ALL[0]), small_options())
        .expect("log opens");
    let times = log.sync_times();
    log.append(&sample_batch(1, 3, 100)).expect("append");
    log.sync().expect("sync");
    log.sync().expect("nothing new to sync");
    log.append(&sample_batch(4, 4, 100)).expect("append");
    log.sync().expect("sync");
    assert_eq!(times.count(), 2);
    assert!(times.total() <= std::time::Duration::from_secs(60));
    let recent = times.take_recent();
    assert_eq!(recent.len(), 2, "each counted sync's time, once");
    assert_eq!(std::time::Duration::from_micros(recent.iter().sum()), times.total());
    assert!(times.take_recent().is_empty());
    // Kept up to a bound, the latest ones.
    for us in 0..zk_log::SyncTimes::RECENT_MAX as u64 + 5 {
        times.record(std::time::Duration::from_micros(us));
    }
    let recent = times.take_recent();
    assert_eq!(recent.len(), zk_log::SyncTimes::RECENT_MAX);
    assert_eq!(recent[0], 5);
}
