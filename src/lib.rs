//! benchplan: benchmark LLM serving endpoints from plan files.
//!
//! Data flow: plan file → [`plan`] (typed, located) → [`planner`] (validated cases) →
//! load generator → results → reports. See the README for what runs today.

pub mod cli;
pub mod diag;
pub mod plan;
pub mod planner;
pub mod slo;
