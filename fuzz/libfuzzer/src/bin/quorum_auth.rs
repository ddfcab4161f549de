//! libFuzzer target `quorum_auth`: [`zkrs_fuzz::quorum::auth`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::quorum::auth(data));
