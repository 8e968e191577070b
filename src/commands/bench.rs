//! `benchplan bench`: one case from the command line, with `vllm bench serve`'s flags,
//! names and meanings, so a script can swap the command and keep its arguments.
//! Internally it builds a one-case plan, validates it like any plan, and runs it.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use clap::Args;
use serde_json::{Map, Value, json};

use crate::cli::exit;
use crate::load::case::{CaseResult, execute};
use crate::load::run::RunOptions;
use crate::load::target::resolve;
use crate::metrics::summary::Summary;
use crate::plan::{CaseParams, PlanSource, Service};
use crate::results::vllm_json::{Header, result_json, vllm_file_name};
use crate::results::write::{append_json_line, write_atomic};
use crate::slo::percentile_label;

/// `vllm bench serve` flags (same names, same defaults), plus a few of benchplan's own.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Request function: vllm, openai, openai-chat, openai-embeddings, vllm-rerank
    /// (default openai; openai-chat with --multi-turn).
    #[arg(long)]
    pub backend: Option<String>,
    /// Result label and file-name prefix (defaults to the backend).
    #[arg(long)]
    pub label: Option<String>,
    /// Server base URL, such as http://127.0.0.1:8000 (overrides --host and --port).
    #[arg(long)]
    pub base_url: Option<String>,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// API path; inferred from the backend when absent.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Extra headers KEY=VALUE (several may follow one flag).
    #[arg(long, num_args = 1..)]
    pub header: Vec<String>,
    /// Skip TLS certificate verification.
    #[arg(long)]
    pub insecure: bool,
    /// Model name; asked of /v1/models when absent.
    #[arg(long)]
    pub model: Option<String>,
    /// Name sent in the request's `model` field.
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Tokenizer: a tokenizer.json or a folder holding one.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// JSON merged into every request body last (null removes a key).
    #[arg(long)]
    pub extra_body: Option<String>,
    /// Prefix of x-request-id.
    #[arg(long)]
    pub request_id_prefix: Option<String>,

    #[arg(long, default_value_t = 1000)]
    pub num_prompts: u64,
    /// Requests per second, or inf.
    #[arg(long, default_value = "inf")]
    pub request_rate: String,
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    #[arg(long)]
    pub max_concurrency: Option<u64>,
    /// linear or exponential.
    #[arg(long)]
    pub ramp_up_strategy: Option<String>,
    #[arg(long)]
    pub ramp_up_start_rps: Option<f64>,
    #[arg(long)]
    pub ramp_up_end_rps: Option<f64>,
    #[arg(long, default_value_t = 0)]
    pub num_warmups: u64,
    /// Retry the first request until it succeeds or this many seconds pass (0 skips).
    #[arg(long, default_value_t = 0.0)]
    pub ready_check_timeout_sec: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long)]
    pub disable_tqdm: bool,

    #[arg(long)]
    pub temperature: Option<f64>,
    #[arg(long)]
    pub top_p: Option<f64>,
    #[arg(long)]
    pub top_k: Option<i64>,
    #[arg(long)]
    pub min_p: Option<f64>,
    #[arg(long)]
    pub frequency_penalty: Option<f64>,
    #[arg(long)]
    pub presence_penalty: Option<f64>,
    #[arg(long)]
    pub repetition_penalty: Option<f64>,
    #[arg(long)]
    pub ignore_eos: bool,

    /// Metrics with mean/median/std/percentiles: ttft,tpot,itl,e2el,client_queue_time,e2el_including_client_queue.
    #[arg(long)]
    pub percentile_metrics: Option<String>,
    /// Percentiles to report, such as 50,90,99,99.9.
    #[arg(long, default_value = "99")]
    pub metric_percentiles: String,
    /// Per-request SLOs in ms for goodput: ttft:500 tpot:50 e2el:2000.
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    #[arg(long)]
    pub save_result: bool,
    #[arg(long)]
    pub save_detailed: bool,
    #[arg(long)]
    pub append_result: bool,
    #[arg(long)]
    pub result_dir: Option<PathBuf>,
    #[arg(long)]
    pub result_filename: Option<String>,
    /// KEY=VALUE pairs written as top-level keys of the result.
    #[arg(long, num_args = 1..)]
    pub metadata: Vec<String>,

    #[arg(long, default_value = "random")]
    pub dataset_name: String,
    #[arg(long)]
    pub dataset_path: Option<PathBuf>,
    /// Alias of --random-input-len.
    #[arg(long)]
    pub input_len: Option<u64>,
    /// Alias of the output length of every dataset.
    #[arg(long)]
    pub output_len: Option<u64>,
    #[arg(long, default_value_t = 1024)]
    pub random_input_len: u64,
    #[arg(long, default_value_t = 128)]
    pub random_output_len: u64,
    #[arg(long, default_value_t = 0.0)]
    pub random_range_ratio: f64,
    #[arg(long, default_value_t = 0)]
    pub random_prefix_len: u64,
    #[arg(long, default_value_t = 1)]
    pub random_batch_size: u64,
    /// random-mm: base number of images per request.
    #[arg(long, default_value_t = 1)]
    pub random_mm_base_items_per_request: u64,
    /// random-mm: range ratio of the image count.
    #[arg(long, default_value_t = 0.0)]
    pub random_mm_num_mm_items_range_ratio: f64,
    /// random-mm: caps per modality as JSON, such as {"image": 3}.
    #[arg(long)]
    pub random_mm_limit_mm_per_prompt: Option<String>,
    /// random-mm: buckets as vLLM writes them: {(256,256,1):0.5,(720,1280,1):0.5} (height, width, frames).
    #[arg(long)]
    pub random_mm_bucket_config: Option<String>,
    /// benchplan: build the dataset, print its lengths, send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// ShareGPT: fixed output length instead of each reply's own.
    #[arg(long)]
    pub sharegpt_output_len: Option<u64>,
    /// custom: output length, or -1 for each line's `output_tokens`.
    #[arg(long, default_value_t = 256, allow_hyphen_values = true)]
    pub custom_output_len: i64,
    /// Do not repeat samples to reach --num-prompts.
    #[arg(long)]
    pub no_oversample: bool,
    /// Keep the file order.
    #[arg(long)]
    pub disable_shuffle: bool,
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_prefix_len: u64,
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_suffix_len: u64,
    #[arg(long, default_value_t = 10)]
    pub prefix_repetition_num_prefixes: u64,
    #[arg(long, default_value_t = 128)]
    pub prefix_repetition_output_len: u64,

    /// Multi-turn chat: --num-prompts counts conversations, each resending its history.
    #[arg(long)]
    pub multi_turn: bool,
    /// Turns per conversation (overrides --multi-turn-min-turns/--multi-turn-max-turns).
    #[arg(long)]
    pub multi_turn_num_turns: Option<u64>,
    #[arg(long, default_value_t = 2)]
    pub multi_turn_min_turns: u64,
    #[arg(long, default_value_t = 5)]
    pub multi_turn_max_turns: u64,
    /// Input tokens of each turn after the first; 0 means --random-input-len.
    #[arg(long, default_value_t = 0)]
    pub per_turn_input_len: u64,
    /// Conversations in flight at once (--max-concurrency still bounds requests).
    #[arg(long)]
    pub multi_turn_concurrency: Option<u64>,
    /// Think time between a turn's answer and the next turn, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub multi_turn_delay_ms: u64,
    /// Share of each turn from a prefix common to all conversations (no history).
    #[arg(long, default_value_t = 0.0)]
    pub multi_turn_prefix_global_ratio: f64,
    /// Share of each turn from a prefix common to its conversation (no history).
    #[arg(long, default_value_t = 0.0)]
    pub multi_turn_prefix_conversation_ratio: f64,
    /// benchplan: think-time distribution: constant, exponential or uniform.
    #[arg(long, default_value = "constant")]
    pub multi_turn_delay_distribution: String,
    /// benchplan: header carrying the conversation id ("" sends none).
    #[arg(long, default_value = "X-Session-ID")]
    pub multi_turn_session_header: String,

    /// benchplan: target an embedded simulator with this preset instead of a server.
    #[arg(long, value_enum)]
    pub sim: Option<crate::plan::sim::Preset>,
    /// benchplan: set a simulator parameter (with --sim): --sim-set itl=5ms.
    #[arg(long = "sim-set", value_name = "NAME=VALUE")]
    pub sim_set: Vec<String>,
    /// benchplan: give up on one request after this many seconds.
    #[arg(long)]
    pub request_timeout: Option<f64>,
    /// benchplan: skip the unmeasured smoke request before the run.
    #[arg(long)]
    pub no_smoke: bool,
}

fn kv(items: &[String], sep: char, flag: &str) -> Result<Vec<(String, String)>, String> {
    items
        .iter()
        .map(|s| {
            s.split_once(sep)
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("{flag} `{s}` is not KEY{sep}VALUE"))
        })
        .collect()
}

impl BenchArgs {
    /// The one-case plan these flags describe, as a plan document.
    pub fn plan_value(&self) -> Result<Value, String> {
        let mut d = Map::new();
        let backend = match (&self.backend, self.multi_turn) {
            (Some(b), _) => b.as_str(),
            (None, true) => "openai-chat",
            (None, false) => "openai",
        };
        d.insert("backend".into(), json!(backend));
        if let Some(e) = &self.endpoint {
            d.insert("endpoint".into(), json!(e));
        }
        d.insert("num_prompts".into(), json!(self.num_prompts));
        d.insert(
            "request_rate".into(),
            match self.request_rate.parse::<f64>() {
                Ok(r) if r.is_finite() => json!(r),
                _ => json!(self.request_rate),
            },
        );
        d.insert("burstiness".into(), json!(self.burstiness));
        let opt = |d: &mut Map<String, Value>, k: &str, v: Option<Value>| {
            if let Some(v) = v {
                d.insert(k.into(), v);
            }
        };
        opt(
            &mut d,
            "max_concurrency",
            self.max_concurrency.map(|v| json!(v)),
        );
        opt(
            &mut d,
            "ramp_up_strategy",
            self.ramp_up_strategy.as_ref().map(|v| json!(v)),
        );
        opt(
            &mut d,
            "ramp_up_start_rps",
            self.ramp_up_start_rps.map(|v| json!(v)),
        );
        opt(
            &mut d,
            "ramp_up_end_rps",
            self.ramp_up_end_rps.map(|v| json!(v)),
        );
        d.insert("num_warmups".into(), json!(self.num_warmups));
        d.insert(
            "ready_check_timeout".into(),
            json!(format!("{}s", self.ready_check_timeout_sec)),
        );
        d.insert("seed".into(), json!(self.seed));
        for (k, v) in [
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("min_p", self.min_p),
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
            ("repetition_penalty", self.repetition_penalty),
        ] {
            opt(&mut d, k, v.map(|v| json!(v)));
        }
        opt(&mut d, "top_k", self.top_k.map(|v| json!(v)));
        if self.ignore_eos {
            d.insert("ignore_eos".into(), json!(true));
        }
        if let Some(m) = &self.percentile_metrics {
            d.insert(
                "percentile_metrics".into(),
                json!(m.split(',').map(str::trim).collect::<Vec<_>>()),
            );
        }
        let pcts: Result<Vec<f64>, _> = self
            .metric_percentiles
            .split(',')
            .map(|p| p.trim().parse::<f64>())
            .collect();
        d.insert(
            "metric_percentiles".into(),
            json!(pcts.map_err(|_| format!(
                "--metric-percentiles `{}` is not a list of numbers",
                self.metric_percentiles
            ))?),
        );
        if !self.goodput.is_empty() {
            let mut g = Map::new();
            for (k, v) in kv(&self.goodput, ':', "--goodput")? {
                let ms: f64 = v.parse().map_err(|_| {
                    format!("--goodput {k}:{v}: the value must be a number of milliseconds")
                })?;
                g.insert(k, json!(format!("{ms}ms")));
            }
            d.insert("goodput".into(), Value::Object(g));
        }
        if let Some(e) = &self.extra_body {
            let v: Value = serde_json::from_str(e)
                .map_err(|err| format!("--extra-body is not JSON: {err}"))?;
            d.insert("extra_body".into(), v);
        }
        opt(
            &mut d,
            "request_id_prefix",
            self.request_id_prefix.as_ref().map(|v| json!(v)),
        );
        opt(
            &mut d,
            "request_timeout",
            self.request_timeout.map(|t| json!(format!("{t}s"))),
        );
        if !self.metadata.is_empty() {
            d.insert(
                "metadata".into(),
                json!(
                    kv(&self.metadata, '=', "--metadata")?
                        .into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect::<Map<String, Value>>()
                ),
            );
        }
        let output = self.output_len;
        opt(
            &mut d,
            "multi_turn_concurrency",
            self.multi_turn_concurrency
                .filter(|_| self.multi_turn)
                .map(|c| json!(c)),
        );
        let dataset = match self.dataset_name.as_str() {
            _ if self.multi_turn => self.multi_turn_dataset()?,
            "random" => {
                json!({"name": "random", "input_len": self.input_len.unwrap_or(self.random_input_len),
                "output_len": output.unwrap_or(self.random_output_len), "range_ratio": self.random_range_ratio,
                "prefix_len": self.random_prefix_len, "batch_size": self.random_batch_size})
            }
            "random-mm" => {
                let mut m = json!({"name": "random-mm", "input_len": self.input_len.unwrap_or(self.random_input_len),
                    "output_len": output.unwrap_or(self.random_output_len), "range_ratio": self.random_range_ratio,
                    "prefix_len": self.random_prefix_len, "base_items_per_request": self.random_mm_base_items_per_request,
                    "num_mm_items_range_ratio": self.random_mm_num_mm_items_range_ratio});
                if let Some(l) = &self.random_mm_limit_mm_per_prompt {
                    m["limit_mm_per_prompt"] = serde_json::from_str(l)
                        .map_err(|e| format!("--random-mm-limit-mm-per-prompt is not JSON: {e}"))?;
                }
                if let Some(b) = &self.random_mm_bucket_config {
                    m["buckets"] = parse_buckets(b)?;
                }
                m
            }
            "random-rerank" => {
                json!({"name": "random-rerank", "input_len": self.input_len.unwrap_or(self.random_input_len),
                "range_ratio": self.random_range_ratio, "batch_size": self.random_batch_size})
            }
            "prefix_repetition" => {
                json!({"name": "prefix_repetition", "prefix_len": self.prefix_repetition_prefix_len,
                "suffix_len": self.prefix_repetition_suffix_len, "num_prefixes": self.prefix_repetition_num_prefixes,
                "output_len": output.unwrap_or(self.prefix_repetition_output_len)})
            }
            other => {
                let mut m = Map::new();
                m.insert("name".into(), json!(other));
                if let Some(p) = &self.dataset_path {
                    m.insert("path".into(), json!(p));
                }
                match other {
                    "sharegpt" => {
                        if let Some(o) = output.or(self.sharegpt_output_len) {
                            m.insert("output_len".into(), json!(o));
                        }
                        m.insert("no_oversample".into(), json!(self.no_oversample));
                        m.insert("disable_shuffle".into(), json!(self.disable_shuffle));
                    }
                    "custom" => {
                        m.insert(
                            "output_len".into(),
                            json!(output.map_or(self.custom_output_len, |o| o as i64)),
                        );
                        m.insert("no_oversample".into(), json!(self.no_oversample));
                        m.insert("disable_shuffle".into(), json!(self.disable_shuffle));
                    }
                    _ => {}
                }
                Value::Object(m)
            }
        };
        d.insert("dataset".into(), dataset);

        let mut svc = Map::new();
        match self.sim {
            Some(preset) => {
                let mut sim = Map::new();
                sim.insert(
                    "preset".into(),
                    serde_json::to_value(preset).expect("preset serialises"),
                );
                for (k, v) in kv(&self.sim_set, '=', "--sim-set")? {
                    sim.insert(k, serde_json::from_str(&v).unwrap_or(Value::String(v)));
                }
                svc.insert("sim".into(), Value::Object(sim));
            }
            None => {
                let url = self
                    .base_url
                    .clone()
                    .unwrap_or_else(|| format!("http://{}:{}", self.host, self.port));
                svc.insert("base_url".into(), json!(url));
            }
        }
        opt(&mut svc, "model", self.model.as_ref().map(|v| json!(v)));
        opt(
            &mut svc,
            "served_model_name",
            self.served_model_name.as_ref().map(|v| json!(v)),
        );
        opt(
            &mut svc,
            "tokenizer",
            self.tokenizer.as_ref().map(|v| json!(v)),
        );
        if !self.header.is_empty() {
            svc.insert(
                "headers".into(),
                json!(
                    kv(&self.header, '=', "--header")?
                        .into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect::<Map<String, Value>>()
                ),
            );
        }
        Ok(
            json!({"name": "bench", "services": {"target": Value::Object(svc)}, "defaults": Value::Object(d)}),
        )
    }
}

impl BenchArgs {
    /// The `multi_turn` dataset of `--multi-turn`: synthetic from the random flags, or
    /// the conversations of `--dataset-path` with `--dataset-name sharegpt`.
    fn multi_turn_dataset(&self) -> Result<Value, String> {
        let mut m = Map::new();
        m.insert("name".into(), json!("multi_turn"));
        match self.dataset_name.as_str() {
            "random" => {
                m.insert(
                    "input_len".into(),
                    json!(self.input_len.unwrap_or(self.random_input_len)),
                );
                m.insert(
                    "output_len".into(),
                    json!(self.output_len.unwrap_or(self.random_output_len)),
                );
                m.insert("per_turn_input_len".into(), json!(self.per_turn_input_len));
                m.insert(
                    "prefix_global_ratio".into(),
                    json!(self.multi_turn_prefix_global_ratio),
                );
                m.insert(
                    "prefix_conversation_ratio".into(),
                    json!(self.multi_turn_prefix_conversation_ratio),
                );
            }
            "sharegpt" => {
                let path = self
                    .dataset_path
                    .as_ref()
                    .ok_or("--multi-turn with --dataset-name sharegpt needs --dataset-path")?;
                m.insert("path".into(), json!(path));
                if let Some(o) = self.output_len.or(self.sharegpt_output_len) {
                    m.insert("output_len".into(), json!(o));
                }
            }
            other => {
                return Err(format!(
                    "--multi-turn takes --dataset-name random or sharegpt, not `{other}`"
                ));
            }
        }
        match self.multi_turn_num_turns {
            Some(n) => {
                m.insert("num_turns".into(), json!(n));
            }
            None => {
                m.insert("min_turns".into(), json!(self.multi_turn_min_turns));
                m.insert("max_turns".into(), json!(self.multi_turn_max_turns));
            }
        }
        m.insert(
            "delay".into(),
            json!(format!("{}ms", self.multi_turn_delay_ms)),
        );
        m.insert(
            "delay_distribution".into(),
            json!(self.multi_turn_delay_distribution),
        );
        m.insert(
            "session_header".into(),
            json!(self.multi_turn_session_header),
        );
        Ok(Value::Object(m))
    }
}

/// vLLM's `--random-mm-bucket-config`: `{(H, W, T): p, …}` as a Python literal.
fn parse_buckets(text: &str) -> Result<Value, String> {
    let bad = || {
        format!(
            "--random-mm-bucket-config `{text}` is not {{(height, width, frames): probability, …}}"
        )
    };
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(bad)?;
    let mut out = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        let open = rest.strip_prefix('(').ok_or_else(bad)?;
        let (dims, after) = open.split_once(')').ok_or_else(bad)?;
        let after = after.trim_start().strip_prefix(':').ok_or_else(bad)?;
        let (p, next) = after.split_once(',').unwrap_or((after, ""));
        let nums: Vec<u32> = dims
            .split(',')
            .map(|x| x.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        let [h, w, t] = nums[..] else {
            return Err(bad());
        };
        let p: f64 = p.trim().parse().map_err(|_| bad())?;
        out.push(json!({"height": h, "width": w, "frames": t, "probability": p}));
        rest = next.trim();
    }
    Ok(Value::Array(out))
}

/// `bench_{model_short}_{dataset}_{backend}_{YYYYMMDD_HHMMSS}.json` in bench_results/single/.
fn single_name(h: &Header, p: &CaseParams, started: SystemTime) -> String {
    let model = h.model_id.rsplit('/').next().unwrap_or(&h.model_id);
    format!(
        "bench_{model}_{}_{}_{}.json",
        p.dataset.name(),
        p.backend().name(),
        crate::timefmt::stamp_underscore(started)
    )
}

/// The command line as run, with header values hidden (they may hold keys).
fn redacted_command() -> String {
    let mut out = Vec::new();
    let mut in_header = false;
    for a in std::env::args() {
        if a.starts_with("--") {
            in_header = a == "--header";
            out.push(a);
        } else if in_header {
            out.push(a.split_once('=').map_or_else(
                || "<redacted>".to_string(),
                |(k, _)| format!("{k}=<redacted>"),
            ));
        } else {
            out.push(a);
        }
    }
    out.join(" ")
}

/// vLLM's result block, plus failures by kind.
pub fn print_summary(s: &Summary, p: &CaseParams) {
    let line = |k: &str, v: String| println!("{k:<40}{v}");
    println!("{:=^50}", " Serving Benchmark Result ");
    line("Successful requests:", s.completed.to_string());
    line("Failed requests:", s.failed.to_string());
    if let Some(c) = p.max_concurrency {
        line("Maximum request concurrency:", c.to_string());
    }
    if p.request_rate.is_finite() {
        line(
            "Request rate configured (RPS):",
            format!("{:.2}", p.request_rate.0),
        );
    }
    line("Benchmark duration (s):", format!("{:.2}", s.duration));
    line("Total input tokens:", s.total_input_tokens.to_string());
    if !s.pooling {
        line("Total generated tokens:", s.total_output_tokens.to_string());
    }
    line(
        "Request throughput (req/s):",
        format!("{:.2}", s.request_throughput),
    );
    if let Some(g) = s.request_goodput {
        line("Request goodput (req/s):", format!("{g:.2}"));
    }
    if !s.pooling {
        line(
            "Output token throughput (tok/s):",
            format!("{:.2}", s.output_throughput),
        );
        line(
            "Peak output token throughput (tok/s):",
            format!("{:.2}", s.max_output_tokens_per_s),
        );
        line(
            "Peak concurrent requests:",
            format!("{:.2}", s.max_concurrent_requests as f64),
        );
    }
    line(
        "Total token throughput (tok/s):",
        format!("{:.2}", s.total_token_throughput),
    );
    for st in &s.stats {
        let (title, short) = match st.metric.name() {
            "ttft" => ("Time to First Token", "TTFT"),
            "tpot" => ("Time per Output Token (excl. 1st token)", "TPOT"),
            "itl" => ("Inter-token Latency", "ITL"),
            "e2el" => ("End-to-end Latency", "E2EL"),
            "client_queue_time" => ("Client Queue Time", "Client Queue"),
            _ => ("E2EL incl. Client Queue", "E2EL+Queue"),
        };
        println!("{:-^50}", title);
        line(&format!("Mean {short} (ms):"), format!("{:.2}", st.mean));
        line(
            &format!("Median {short} (ms):"),
            format!("{:.2}", st.median),
        );
        for (q, v) in &st.percentiles {
            line(
                &format!("P{} {short} (ms):", percentile_label(*q)),
                format!("{v:.2}"),
            );
        }
    }
    if !s.errors_by_kind.is_empty() {
        println!("{:-^50}", "Failures by kind");
        for (k, n) in &s.errors_by_kind {
            line(
                &format!("{k}:"),
                format!(
                    "{n}  (first: {})",
                    s.first_errors.get(k).map_or("", |m| m.as_str())
                ),
            );
        }
    }
    if let Some(src) = s.token_source {
        line("Output tokens counted from:", src.as_str().to_string());
    }
    if let Some(mt) = &s.multi_turn {
        print_turns(mt);
    }
    println!("{}", "=".repeat(50));
}

/// The multi-turn block: conversation outcomes, then one line per turn index.
fn print_turns(mt: &crate::metrics::turns::MultiTurnSummary) {
    let line = |k: &str, v: String| println!("{k:<40}{v}");
    println!("{:-^50}", "Conversations");
    line(
        "Conversations completed:",
        format!(
            "{} of {}",
            mt.conversations_completed, mt.conversations_total
        ),
    );
    line(
        "Conversations ended by a failure:",
        mt.conversations_failed.to_string(),
    );
    if mt.conversations_incomplete > 0 {
        line(
            "Conversations incomplete:",
            mt.conversations_incomplete.to_string(),
        );
    }
    line(
        "Successful turns:",
        format!("{} of {}", mt.turns_successful, mt.turns_planned),
    );
    line(
        "Mean conversation duration (ms):",
        format!("{:.2}", mt.avg_conversation_duration_ms),
    );
    println!("{:-^50}", "Per turn");
    println!(
        "{:>4} {:>5} {:>5} {:>9} {:>9} {:>10} {:>10}",
        "turn", "ok", "fail", "input", "cached", "TTFT ms", "E2EL ms"
    );
    for t in &mt.per_turn {
        let mean = |m: crate::plan::Metric| t.summary.stat(m).map_or(0.0, |x| x.mean);
        println!(
            "{:>4} {:>5} {:>5} {:>9.1} {:>9.1} {:>10.2} {:>10.2}",
            t.turn_index + 1,
            t.summary.completed,
            t.summary.failed,
            t.input_tokens.mean,
            t.mean_cached_tokens,
            mean(crate::plan::Metric::Ttft),
            mean(crate::plan::Metric::E2el)
        );
    }
}

pub fn run(args: &BenchArgs) -> u8 {
    let value = match args.plan_value() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_PLAN;
        }
    };
    let planned = match crate::planner::plan(PlanSource::from_value("<command line>", value)) {
        Ok(p) => p,
        Err(d) => {
            eprintln!("{d}");
            return exit::BAD_PLAN;
        }
    };
    for w in &planned.warnings {
        eprintln!("{w}");
    }
    let case = planned.cases[0].clone();
    if args.dry_run {
        return crate::commands::dry_run::print(&planned);
    }
    let service: Service = planned.plan.services["target"].clone();
    // One thread against an external server (as the client benchmark measures it), two
    // workers when the simulator runs in this process.
    let runtime = crate::load::runtime(service.sim.is_some());
    runtime.block_on(async move {
        let resolved = match resolve(
            &service,
            args.insecure,
            case.params.max_concurrency.map(|c| c as usize),
        )
        .await
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return exit::RUNTIME;
            }
        };
        let mut opts = RunOptions {
            progress: !args.disable_tqdm && std::io::stderr().is_terminal(),
            smoke: !args.no_smoke,
            ..RunOptions::default()
        };
        if let Some(p) = &case.params.request_id_prefix {
            opts.request_id_prefix = p.clone();
        }
        let stop = opts.stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ninterrupted: no new requests; waiting briefly for those in flight");
                stop.store(true, Ordering::Relaxed);
            }
        });
        let started = SystemTime::now();
        let result: CaseResult = match execute(&resolved, &service, &case.params, &opts).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return exit::RUNTIME;
            }
        };
        print_summary(&result.summary, &case.params);
        if args.save_result || args.append_result || args.save_detailed {
            let header = Header {
                date: crate::timefmt::stamp_dash(started),
                label: args.label.clone(),
                model_id: resolved.model.clone(),
                tokenizer_id: Some(resolved.tokenizer_id.clone()),
            };
            let mut extras = Map::new();
            extras.insert("case_id".into(), json!(case.id));
            extras.insert("interrupted".into(), json!(result.run.interrupted));
            extras.insert("smoke".into(), json!(result.run.smoke));
            extras.insert("warmups_failed".into(), json!(result.run.warmups_failed));
            extras.insert("seed".into(), json!(case.params.seed));
            extras.insert("command".into(), json!(redacted_command()));
            extras.insert(
                "params".into(),
                serde_json::to_value(&case.params).expect("params serialise"),
            );
            let json = result_json(
                &header,
                &case.params,
                &result.summary,
                args.save_detailed,
                extras,
            );
            // With --result-dir or --result-filename, vLLM's names and places; without, the results tree.
            let path = match (&args.result_dir, &args.result_filename) {
                (None, None) => PathBuf::from("bench_results")
                    .join("single")
                    .join(single_name(&header, &case.params, started)),
                (dir, name) => dir.clone().unwrap_or_default().join(
                    name.clone()
                        .unwrap_or_else(|| vllm_file_name(&header, &case.params)),
                ),
            };
            let bytes = serde_json::to_vec(&Value::Object(json)).expect("result serialises");
            let written = if args.append_result {
                append_json_line(&path, &bytes)
            } else {
                write_atomic(&path, &bytes)
            };
            match written {
                Ok(()) => eprintln!("result written to {}", path.display()),
                Err(e) => {
                    eprintln!("error: cannot write {}: {e}", path.display());
                    return exit::RUNTIME;
                }
            }
        }
        if result.run.interrupted {
            exit::RUNTIME
        } else {
            exit::OK
        }
    })
}
