//! libFuzzer target `election_notification`: [`zkrs_fuzz::election::notification`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::election::notification(data));
