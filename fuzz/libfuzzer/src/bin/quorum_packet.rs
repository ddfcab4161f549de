//! libFuzzer target `quorum_packet`: [`zkrs_fuzz::quorum::packet`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::quorum::packet(data));
