//! libFuzzer target `apache_snap_stream`: [`zkrs_fuzz::snapshot::apache_snap_stream`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::snapshot::apache_snap_stream(data));
