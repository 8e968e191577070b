//! `cargo fuzz run sse`: see `benchplan::fuzz::sse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| benchplan::fuzz::sse(data));
