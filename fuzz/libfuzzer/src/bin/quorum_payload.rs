//! libFuzzer target `quorum_payload`: [`zkrs_fuzz::quorum::payload`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::quorum::payload(data));
