//! Every decoding entry point and typed accessor, in all three dialects, over arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| y3_harness::decode(data));
