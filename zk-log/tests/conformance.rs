//! The backend conformance suite, run on the real disk and on the fault-injecting disk.

use zk_log::{conformance, FaultStorage, FileStorage};

#[test]
fn file_backend_conforms() {
    let dirs: std::cell::RefCell<Vec<tempfile::TempDir>> = Default::default();
    conformance::run_all(&mut || {
        let d = tempfile::tempdir().expect("tempdir");
        let s = FileStorage::open_dir(d.path().join("zkrs-log")).expect("open dir");
        dirs.borrow_mut().push(d);
        s
    });
}

#[test]
fn fault_backend_conforms() {
    let mut seed = 0;
    conformance::run_all(&mut || {
        seed += 1;
        FaultStorage::new(seed)
    });
}
