//! Content filters: filter text and payload from the input (see `y3_harness::filter`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| y3_harness::filter(data));
