//! The one integration-test binary (so the suite links once). Each module is one area.

mod architecture;
mod bad_plans;
mod cases;
mod cli;
mod datasets;
mod examples;
mod faults;
mod golden;
mod guards;
mod loadgen;
mod multi_turn;
mod native_http;
mod optimize;
mod parity;
mod plans;
mod props;
mod reports;
mod run_plan;
mod server_metrics;
mod shards;
mod sim;
mod sim_timing;
mod support;
mod tokenizers;
