//! `cargo fuzz run http_response`: see `benchplan::fuzz::http_response`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| benchplan::fuzz::http_response(data));
