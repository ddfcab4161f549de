//! libFuzzer target `election_handshake`: [`zkrs_fuzz::election::handshake`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::election::handshake(data));
