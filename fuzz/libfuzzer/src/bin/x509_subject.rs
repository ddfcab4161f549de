//! libFuzzer target `x509_subject`: [`zkrs_fuzz::x509::subject`] (its docs say the properties checked).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zkrs_fuzz::x509::subject(data));
