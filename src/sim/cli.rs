//! `benchplan sim`: the simulator as a standalone process.

use std::path::PathBuf;

use clap::Args;
use serde_json::{Map, Value};

use super::{SimConfig, Simulator};
use crate::diag::did_you_mean;
use crate::exit::Exit;
use crate::plan::PlanSource;
use crate::plan::sim::SimSpec;

/// `benchplan sim`: where to listen and how to behave.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Starting point for every parameter (default: the config file's, else tiny).
    #[arg(long, value_enum)]
    pub preset: Option<crate::plan::sim::Preset>,
    /// A TOML or YAML file with a preset and parameters, as in a plan's `sim = {…}`.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Set one parameter: --set itl=5ms --set max_num_seqs=8. Repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Record when each streamed token was actually sent, served at GET /sim/timings
    /// (ground truth for client-accuracy measurements).
    #[arg(long)]
    pub record_timings: bool,
}

/// Builds the simulator's spec from `--config`, `--preset` and `--set`, in that order.
pub fn spec_from_args(args: &SimArgs) -> Result<SimSpec, String> {
    let mut value = match &args.config {
        Some(path) => {
            let source = PlanSource::load(path, None).map_err(|d| d.to_string())?;
            source.value
        }
        None => Value::Object(Map::new()),
    };
    let map = value
        .as_object_mut()
        .ok_or("the simulator config must be a table of parameters")?;
    for kv in &args.set {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--set `{kv}` has no `=`; write --set itl=5ms"))?;
        let v =
            serde_json::from_str(v.trim()).unwrap_or_else(|_| Value::String(v.trim().to_string()));
        map.insert(k.trim().to_string(), v);
    }
    if let Some(p) = args.preset {
        map.insert(
            "preset".into(),
            serde_json::to_value(p).expect("preset serialises"),
        );
    }
    // Unknown names are errors with a suggestion, as in plans.
    let schema = schemars::schema_for!(SimSpec).to_value();
    let known: Vec<String> = schema["properties"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    for k in map.keys() {
        if !known.contains(k) {
            let hint = did_you_mean(k, known.iter().map(String::as_str))
                .map_or_else(String::new, |s| format!(" (did you mean `{s}`?)"));
            return Err(format!("unknown simulator parameter `{k}`{hint}"));
        }
    }
    serde_json::from_value(value).map_err(|e| format!("bad simulator parameter: {e}"))
}

pub fn run(args: &SimArgs) -> Exit {
    let spec = match spec_from_args(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let mut config = SimConfig::from_spec(&spec);
    config.record_timings = args.record_timings;
    let addr = match format!("{}:{}", args.host, args.port).parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: bad --host/--port: {e}");
            return Exit::BadPlan;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async move {
        let handle = match Simulator::start_on(config.clone(), addr).await {
            Ok(h) => h,
            Err(e) => {
                eprintln!("error: cannot listen on {addr}: {e}");
                return Exit::Runtime;
            }
        };
        println!(
            "benchplan sim: model {} on {} (preset {}, max_num_seqs {}, itl {} ms)",
            config.model,
            handle.base_url,
            serde_json::to_value(spec.preset.unwrap_or_default())
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            config.max_num_seqs,
            config.itl * 1e3
        );
        let _ = tokio::signal::ctrl_c().await;
        handle.stop();
        Exit::Ok
    })
}
