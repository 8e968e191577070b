//! benchplan: benchmark LLM serving endpoints from plan files.
//!
//! Data flow: plan file → [`plan`] (typed, located) → [`planner`] (validated cases) →
//! load generator → results → reports. See the README for what runs today.

// `!(x > 0.0)` is used on purpose in validation: unlike `x <= 0.0`, it also rejects NaN.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod base_url;
pub mod cli;
pub mod client;
pub mod clock;
pub mod commands;
pub mod dataset;
pub mod diag;
pub mod energy;
pub mod escape;
pub mod executor;
pub mod exit;
pub mod files;
pub mod fuzz;
pub mod hash;
pub mod load;
pub mod metrics;
pub mod optimize;
pub mod plan;
pub mod planner;
pub mod proxy;
pub mod redact;
pub mod report;
pub mod results;
pub mod rng;
pub mod servermetrics;
pub mod service;
pub mod signals;
pub mod sim;
pub mod slo;
pub mod timefmt;
pub mod tokenizer;
pub mod trend;
pub mod wav;
