//! libFuzzer target `client_connect`: [`zkrs_fuzz::client::connect`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::client::connect(data));
