//! libFuzzer target `apache_snap`: [`zkrs_fuzz::snapshot::apache_snap`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::snapshot::apache_snap(data));
