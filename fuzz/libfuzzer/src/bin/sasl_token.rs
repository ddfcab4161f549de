//! libFuzzer target `sasl_token`: [`zkrs_fuzz::sasl::token`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::sasl::token(data));
