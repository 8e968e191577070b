//! Cross-field checks, before any traffic: the plan as a whole ([`check_plan`]), then
//! each resolved case ([`check_case`]), and what a case implies ([`resolve_target`],
//! [`resolve_implied`]).

mod case;
mod plan;
mod resolve;
#[cfg(test)]
mod tests;

pub use case::check_case;
pub use plan::check_plan;
pub use resolve::{resolve_implied, resolve_target};

/// The most requests one case may send: every one is built and kept in memory.
pub const MAX_PROMPTS: u64 = 10_000_000;
