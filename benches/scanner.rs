//! Benchmark placeholder (filled by its owner).
fn main() {}
