//! The backend conformance suite, run on the real disk and on the fault-injecting disk.

use zk_log::{conformance, AppendMode, FaultStorage, FileStorage};

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
        let mut seed = 0;
        conformance::run_all(&mut || {
            seed += 1;
            FaultStorage::with_append_mode(seed, mode)
        });
    }
}
