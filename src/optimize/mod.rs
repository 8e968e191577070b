//! Optimize: the highest load (or, with a fixed rate, the smallest concurrency) that
//! meets the SLOs. [`search`] is the procedure; `run` wires it to real runs.

pub mod run;
pub mod search;
