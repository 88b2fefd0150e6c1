//! `Item` trees built with `arbitrary`: exact `encoded_len`, decode back, observe every path.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| y3_harness::encode_roundtrip(data));
