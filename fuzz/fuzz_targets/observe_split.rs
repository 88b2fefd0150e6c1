//! The streaming observer fed whole, byte by byte and in uneven chunks must agree with itself,
//! with `get` and with `Packet::find`. The first five bytes choose dialect, path and chunking.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| y3_harness::observe_split(data));
