//! `cargo fuzz run plan`: see `benchplan::fuzz::plan_any`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| benchplan::fuzz::plan_any(data));
