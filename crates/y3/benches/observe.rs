//! Criterion benches for the observer (written next).
fn main() {}
