//! libFuzzer target `log_segment`: [`zkrs_fuzz::log::segment`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::log::segment(data));
