//! Runs every fuzz target's function over its checked-in corpus (`corpus/<target>/`), so the
//! properties the targets check hold in the ordinary test run, and an input a fuzz run saved
//! stays fixed once copied there.

use std::path::Path;

#[test]
fn every_target_passes_its_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, target) in zkrs_fuzz::TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: empty corpus");
        for file in &files {
            let data = std::fs::read(file).expect("corpus file");
            eprintln!("{name}: {}", file.display());
            target(&data);
        }
    }
}

#[test]
fn every_target_has_a_libfuzzer_binary() {
    let bins = Path::new(env!("CARGO_MANIFEST_DIR")).join("libfuzzer/src/bin");
    for (name, _) in zkrs_fuzz::TARGETS {
        assert!(bins.join(format!("{name}.rs")).exists(), "no libfuzzer/src/bin/{name}.rs");
    }
}
