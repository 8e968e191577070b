//! `cargo fuzz run set_override`: see `benchplan::fuzz::set_override`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| benchplan::fuzz::set_override(data));
