//! Per-request records → the case's summary, with vLLM's formulas and key names
//! (reference §2.2 and §3), plus benchplan's own additions kept apart.

pub mod checks;
pub mod hist;
pub mod ms;
pub mod oversaturation;
pub mod reasoning;
pub mod record;
pub mod sample;
pub mod server_timings;
pub mod significance;
pub mod spec_decode;
pub mod stats;
pub mod summary;
pub mod table;
pub mod turns;
pub mod window;
