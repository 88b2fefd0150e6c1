//! Content filters: filter text and payload from the input (see `y3::harness::filter`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| y3::harness::filter(data));
