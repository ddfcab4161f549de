//! libFuzzer target `snapshot_file`: [`zkrs_fuzz::snapshot::file`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::snapshot::file(data));
