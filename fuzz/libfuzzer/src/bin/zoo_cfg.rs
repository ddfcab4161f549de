//! libFuzzer target `zoo_cfg`: [`zkrs_fuzz::config::zoo_cfg`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::config::zoo_cfg(data));
