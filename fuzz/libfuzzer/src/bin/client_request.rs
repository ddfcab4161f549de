//! libFuzzer target `client_request`: [`zkrs_fuzz::client::request`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::client::request(data));
