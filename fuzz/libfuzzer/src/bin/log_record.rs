//! libFuzzer target `log_record`: [`zkrs_fuzz::log::record`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::log::record(data));
