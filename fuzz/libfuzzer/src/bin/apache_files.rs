//! libFuzzer target `apache_files`: [`zkrs_fuzz::snapshot::apache_files`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::snapshot::apache_files(data));
