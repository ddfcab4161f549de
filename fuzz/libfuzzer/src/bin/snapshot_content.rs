//! libFuzzer target `snapshot_content`: [`zkrs_fuzz::snapshot::content`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::snapshot::content(data));
