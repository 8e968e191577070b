//! `cargo fuzz run slo`: see `benchplan::fuzz::slo`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| benchplan::fuzz::slo(data));
