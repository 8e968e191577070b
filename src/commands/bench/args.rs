//! `benchplan bench`'s flag surface: `vllm bench serve`'s flags (same names, same
//! defaults, same meanings) and benchplan's few additions, and their translation into
//! a one-case plan document. Adding a flag touches this file only; the run path takes
//! the plan it produces.

use std::path::PathBuf;

use clap::Args;
use serde_json::{Map, Value, json};

/// `vllm bench serve` flags (same names, same defaults), plus a few of benchplan's own.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Request function: vllm, openai, openai-chat, openai-responses, openai-audio, openai-embeddings, vllm-rerank
    /// (default openai; openai-chat with --multi-turn).
    #[arg(long)]
    pub backend: Option<String>,
    /// Result label and file-name prefix (defaults to the backend).
    #[arg(long)]
    pub label: Option<String>,
    /// Server base URL, such as http://127.0.0.1:8000 (overrides --host and --port).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Server host when --base-url is not given.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port when --base-url is not given.
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
    /// auto or hf: both load tokenizer.json with Hugging Face tokenizers (mistral and deepseek_v32 are refused).
    #[arg(long, default_value = "auto")]
    pub tokenizer_mode: String,
    /// Accepted for vLLM command lines: benchplan runs no model code, and tokenizer.json needs none.
    #[arg(long)]
    pub trust_remote_code: bool,
    /// LoRA adapters the server serves: each request sends one of them as its `model`.
    #[arg(long, num_args = 1..)]
    pub lora_modules: Vec<String>,
    /// How requests pick a LoRA adapter: random or round-robin.
    #[arg(long, value_enum, default_value_t)]
    pub lora_assignment: crate::plan::params::LoraAssignment,
    /// JSON merged into every request body last (null removes a key).
    #[arg(long)]
    pub extra_body: Option<String>,
    /// Prefix of x-request-id.
    #[arg(long)]
    pub request_id_prefix: Option<String>,
    /// The request-id header's value: prefixed (vLLM's), uuid, or none (no header).
    /// Unset: vLLM's, or what the server takes when it refuses vLLM's.
    #[arg(long)]
    pub request_id: Option<crate::plan::shape::RequestIdForm>,
    /// The request-id header's name (default x-request-id).
    #[arg(long)]
    pub request_id_header: Option<String>,
    /// Chat message content: parts (vLLM's) or string.
    #[arg(long)]
    pub chat_content: Option<crate::plan::shape::ChatContent>,
    /// Send stream_options (on: vLLM's) or not (off).
    #[arg(long, value_parser = ["on", "off"])]
    pub stream_options: Option<String>,
    /// The output-length key of chat requests: max_completion_tokens (vLLM's) or max_tokens.
    #[arg(long)]
    pub max_tokens_key: Option<crate::plan::shape::MaxTokensKey>,

    /// Number of measured requests (conversations with --multi-turn).
    #[arg(long, default_value_t = 1000)]
    pub num_prompts: u64,
    /// Requests per second, or inf.
    #[arg(long, default_value = "inf")]
    pub request_rate: String,
    /// Gamma shape of the arrival gaps (1 = Poisson), or inf for constant gaps.
    #[arg(long, default_value = "1.0")]
    pub burstiness: String,
    /// Most requests in flight at once (a client-side cap).
    #[arg(long)]
    pub max_concurrency: Option<u64>,
    /// linear or exponential.
    #[arg(long)]
    pub ramp_up_strategy: Option<String>,
    /// Ramp-up: the request rate at the start (requests per second).
    #[arg(long)]
    pub ramp_up_start_rps: Option<f64>,
    /// Ramp-up: the request rate at the end (requests per second).
    #[arg(long)]
    pub ramp_up_end_rps: Option<f64>,
    /// Unmeasured copies of the first request sent before the run.
    #[arg(long, default_value_t = 0)]
    pub num_warmups: u64,
    /// Retry the first request until it succeeds or this many seconds pass (0 skips).
    #[arg(long, default_value_t = 0.0)]
    pub ready_check_timeout_sec: f64,
    /// Seed of the dataset and the arrival schedule.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// No progress bar.
    #[arg(long)]
    pub disable_tqdm: bool,

    /// Sampling temperature (unset: the server's default).
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Nucleus sampling threshold.
    #[arg(long)]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[arg(long)]
    pub top_k: Option<i64>,
    /// Min-p sampling.
    #[arg(long)]
    pub min_p: Option<f64>,
    /// Frequency penalty.
    #[arg(long)]
    pub frequency_penalty: Option<f64>,
    /// Presence penalty.
    #[arg(long)]
    pub presence_penalty: Option<f64>,
    /// Repetition penalty (completions send 1.0 unless set, as vLLM).
    #[arg(long)]
    pub repetition_penalty: Option<f64>,
    /// Ask the server to ignore EOS (on by default for random datasets, as vLLM).
    #[arg(long)]
    pub ignore_eos: bool,
    /// Completions: log-probabilities per token to return (sent as null when unset).
    #[arg(long)]
    pub logprobs: Option<u32>,

    /// Metrics with mean/median/std/percentiles: ttft,tpot,itl,e2el,client_queue_time,e2el_including_client_queue.
    #[arg(long)]
    pub percentile_metrics: Option<String>,
    /// Percentiles to report, such as 50,90,99,99.9.
    #[arg(long, default_value = "99")]
    pub metric_percentiles: String,
    /// Per-request SLOs in ms for goodput: ttft:500 tpot:50 e2el:2000.
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    /// Write the result JSON.
    #[arg(long)]
    pub save_result: bool,
    /// Keep the per-request lists in the result (input/output lengths, TTFTs, ITLs, texts, errors).
    #[arg(long)]
    pub save_detailed: bool,
    /// Append the result to the file as one JSON line.
    #[arg(long)]
    pub append_result: bool,
    /// Folder for the result file (vLLM's file name unless --result-filename).
    #[arg(long)]
    pub result_dir: Option<PathBuf>,
    /// File name of the result (inside --result-dir).
    #[arg(long)]
    pub result_filename: Option<String>,
    /// KEY=VALUE pairs written as top-level keys of the result.
    #[arg(long, num_args = 1..)]
    pub metadata: Vec<String>,

    /// The workload: random, random-mm, random-rerank, prefix_repetition, sharegpt, custom, burstgpt (also the embeddings batch form of random), random-audio and custom_audio (openai-audio), and timed_trace (a JSONL trace with hash ids: see "Replaying production traces").
    #[arg(long, default_value = "random")]
    pub dataset_name: String,
    /// The dataset file (sharegpt, custom, burstgpt, timed_trace), or custom_audio's JSONL file or folder of .wav clips.
    #[arg(long)]
    pub dataset_path: Option<PathBuf>,
    /// Alias of --random-input-len.
    #[arg(long)]
    pub input_len: Option<u64>,
    /// Alias of the output length of every dataset.
    #[arg(long)]
    pub output_len: Option<u64>,
    /// random: input tokens a request.
    #[arg(long, default_value_t = 1024)]
    pub random_input_len: u64,
    /// random: output tokens a request.
    #[arg(long, default_value_t = 128)]
    pub random_output_len: u64,
    /// random: lengths uniform within this ratio around the mean.
    #[arg(long, default_value_t = 0.0)]
    pub random_range_ratio: f64,
    /// random: a shared prefix of this many tokens before every prompt.
    #[arg(long, default_value_t = 0)]
    pub random_prefix_len: u64,
    /// random with openai-embeddings: inputs per request.
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
    /// benchplan, random-audio: mean clip length in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub random_audio_duration: f64,
    /// benchplan, random-audio: clip lengths uniform within this ratio around the mean.
    #[arg(long, default_value_t = 0.0)]
    pub random_audio_duration_range_ratio: f64,
    /// benchplan, random-audio: samples a second.
    #[arg(long, default_value_t = 16_000)]
    pub random_audio_sample_rate: u32,
    /// custom_audio: skip clips shorter than this many seconds.
    #[arg(long)]
    pub asr_min_audio_len_sec: Option<f64>,
    /// custom_audio: skip clips longer than this many seconds (inf keeps all).
    #[arg(long)]
    pub asr_max_audio_len_sec: Option<f64>,
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
    /// custom: send prompts as they are, without the tokenizer's chat template.
    #[arg(long)]
    pub skip_chat_template: bool,
    /// prefix_repetition: tokens of each shared prefix.
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_prefix_len: u64,
    /// prefix_repetition: tokens after the prefix.
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_suffix_len: u64,
    /// prefix_repetition: how many different prefixes.
    #[arg(long, default_value_t = 10)]
    pub prefix_repetition_num_prefixes: u64,
    /// prefix_repetition: output tokens a request.
    #[arg(long, default_value_t = 128)]
    pub prefix_repetition_output_len: u64,
    /// timed_trace: tokens per hash id (vLLM's default 16; Mooncake's traces use 512).
    #[arg(long, default_value_t = 16)]
    pub timed_trace_chunk_hash_size: u64,
    /// timed_trace: trace times times this are seconds (Mooncake's milliseconds: 0.001).
    #[arg(long, default_value_t = 1.0)]
    pub timed_trace_sec_multiplier: f64,
    /// timed_trace: the key of the send time.
    #[arg(long, default_value = "timestamp")]
    pub timed_trace_label_timestamp: String,
    /// timed_trace: the key of the prompt's tokens.
    #[arg(long, default_value = "input_length")]
    pub timed_trace_label_input_length: String,
    /// timed_trace: the key of the answer's tokens.
    #[arg(long, default_value = "output_length")]
    pub timed_trace_label_output_length: String,
    /// timed_trace: the key of the block ids.
    #[arg(long, default_value = "hash_ids")]
    pub timed_trace_label_hash_ids: String,
    /// Send each request at its trace time (timed_trace's default).
    #[arg(long, overrides_with = "no_self_timed")]
    pub self_timed: bool,
    /// Send a trace's rows at --request-rate in trace order instead of at their times.
    #[arg(long)]
    pub no_self_timed: bool,

    /// Multi-turn chat: --num-prompts counts conversations, each resending its history.
    #[arg(long)]
    pub multi_turn: bool,
    /// Turns per conversation (overrides --multi-turn-min-turns/--multi-turn-max-turns).
    #[arg(long)]
    pub multi_turn_num_turns: Option<u64>,
    /// --multi-turn: fewest turns a conversation.
    #[arg(long, default_value_t = 2)]
    pub multi_turn_min_turns: u64,
    /// --multi-turn: most turns a conversation.
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
    /// benchplan: give up on one request after this many seconds (default 6 h, as vLLM).
    #[arg(long)]
    pub request_timeout: Option<f64>,
    /// benchplan: fail a stream that sends no byte for this many seconds (default 300).
    #[arg(long)]
    pub stream_idle_timeout: Option<f64>,
    /// benchplan: the largest SSE line or event accepted, in bytes (default 16 MiB).
    #[arg(long)]
    pub max_event_bytes: Option<u64>,
    /// benchplan: skip the unmeasured smoke request before the run.
    #[arg(long)]
    pub no_smoke: bool,
    /// benchplan: cut the run into timeslices this many seconds long (in the result
    /// as `benchplan.timeslices`: counts, throughput and latency percentiles per slice).
    #[arg(long, value_name = "SECONDS")]
    pub timeslice: Option<f64>,
    /// benchplan: ignore HTTP_PROXY, HTTPS_PROXY and NO_PROXY and send every request
    /// directly (vLLM's client honours them; so does benchplan by default).
    #[arg(long)]
    pub no_proxy: bool,
    /// benchplan: a PEM file of CA certificates to trust on top of the system's.
    #[arg(long)]
    pub ca_cert: Option<std::path::PathBuf>,
    /// benchplan: the share of asked-for output tokens requests sent with
    /// --ignore-eos must get back (default 90%); below it bench exits 3.
    #[arg(long)]
    pub min_output_ratio: Option<String>,

    /// vllm-bench: run once per --max-concurrency value, such as 1,2,4,8, then print a summary table.
    #[arg(long, value_name = "LIST", conflicts_with = "sweep_request_rate")]
    pub sweep_max_concurrency: Option<String>,
    /// vllm-bench: run once per --request-rate value, such as 1,5,10,inf, then print a summary table.
    #[arg(long, value_name = "LIST")]
    pub sweep_request_rate: Option<String>,
    /// vllm-bench: with --sweep-max-concurrency, --num-prompts is the concurrency times this.
    #[arg(long, value_name = "N")]
    pub sweep_num_prompts_factor: Option<u64>,
    /// vllm-bench: TTFT and TPOT percentiles in the sweep summary besides P50 and P90, such as 95,99.
    #[arg(long, value_name = "LIST")]
    pub sweep_summary_percentiles: Option<String>,
    /// vllm-bench: compare two result files (JSON or JSON lines: the last line) instead of running; exit 4 on a regression beyond 5%.
    #[arg(long, num_args = 2, value_names = ["BASELINE", "CANDIDATE"])]
    pub compare: Vec<PathBuf>,
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

/// Sets `k` when the flag was given.
fn opt(d: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        d.insert(k.into(), v);
    }
}

impl BenchArgs {
    /// The one-case plan these flags describe, as a plan document.
    pub fn plan_value(&self) -> Result<Value, String> {
        let mut d = Map::new();
        self.load_keys(&mut d);
        self.request_keys(&mut d)?;
        self.dataset_keys(&mut d)?;
        let svc = self.service_keys(&mut d)?;
        Ok(
            json!({"name": "bench", "services": {"target": Value::Object(svc)}, "defaults": Value::Object(d)}),
        )
    }

    /// The load: backend, endpoint, prompts, rate, concurrency, ramp-up, warmups, seed.
    fn load_keys(&self, d: &mut Map<String, Value>) {
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
        d.insert(
            "burstiness".into(),
            match self.burstiness.parse::<f64>() {
                Ok(b) if b.is_finite() => json!(b),
                _ => json!(self.burstiness),
            },
        );
        opt(d, "max_concurrency", self.max_concurrency.map(|v| json!(v)));
        opt(
            d,
            "ramp_up_strategy",
            self.ramp_up_strategy.as_ref().map(|v| json!(v)),
        );
        opt(
            d,
            "ramp_up_start_rps",
            self.ramp_up_start_rps.map(|v| json!(v)),
        );
        opt(d, "ramp_up_end_rps", self.ramp_up_end_rps.map(|v| json!(v)));
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
            opt(d, k, v.map(|v| json!(v)));
        }
        opt(d, "top_k", self.top_k.map(|v| json!(v)));
    }

    /// How each request is sent and judged: LoRA, tokenizer mode, ignore_eos,
    /// percentiles, goodput, extra body, request shape, timeouts, metadata.
    fn request_keys(&self, d: &mut Map<String, Value>) -> Result<(), String> {
        if !self.lora_modules.is_empty() {
            d.insert("lora_modules".into(), json!(self.lora_modules));
            d.insert("lora_assignment".into(), json!(self.lora_assignment));
        }
        match self.tokenizer_mode.as_str() {
            "auto" | "hf" => {}
            other => {
                return Err(format!(
                    "--tokenizer-mode {other} is not supported: benchplan loads tokenizer.json with Hugging Face tokenizers (the `hf` mode); pass --tokenizer DIR holding a tokenizer.json, or omit it for the built-in counter"
                ));
            }
        }
        opt(d, "logprobs", self.logprobs.map(|v| json!(v)));
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
            d,
            "request_id_prefix",
            self.request_id_prefix.as_ref().map(|v| json!(v)),
        );
        let mut shape = Map::new();
        opt(
            &mut shape,
            "request_id",
            self.request_id.as_ref().map(|v| json!(v)),
        );
        opt(
            &mut shape,
            "request_id_header",
            self.request_id_header.as_ref().map(|v| json!(v)),
        );
        opt(
            &mut shape,
            "chat_content",
            self.chat_content.as_ref().map(|v| json!(v)),
        );
        opt(
            &mut shape,
            "stream_options",
            self.stream_options.as_ref().map(|v| json!(v == "on")),
        );
        opt(
            &mut shape,
            "max_tokens_key",
            self.max_tokens_key.as_ref().map(|v| json!(v)),
        );
        if !shape.is_empty() {
            d.insert("request_shape".into(), Value::Object(shape));
        }
        opt(
            d,
            "request_timeout",
            self.request_timeout.map(|t| json!(format!("{t}s"))),
        );
        opt(
            d,
            "stream_idle_timeout",
            self.stream_idle_timeout.map(|t| json!(format!("{t}s"))),
        );
        opt(d, "max_event_bytes", self.max_event_bytes.map(|b| json!(b)));
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
        Ok(())
    }

    /// The dataset the flags name.
    fn dataset_keys(&self, d: &mut Map<String, Value>) -> Result<(), String> {
        let output = self.output_len;
        opt(
            d,
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
            "random-audio" => {
                json!({"name": "random-audio", "duration": format!("{}s", self.random_audio_duration),
                "duration_range_ratio": self.random_audio_duration_range_ratio, "sample_rate": self.random_audio_sample_rate,
                "output_len": output.unwrap_or(self.random_output_len), "range_ratio": self.random_range_ratio})
            }
            // vLLM's trace replay, with its defaults: 16-token blocks, times in seconds
            // times the multiplier, each row at its time unless --no-self-timed.
            "timed_trace" => {
                eprintln!(
                    "note: timed_trace's prompts differ from vLLM's on purpose: {}",
                    crate::results::deviations::TRACE_PROMPTS.what
                );
                json!({"name": "trace", "path": self.dataset_path, "format": "mooncake",
                "block_size": self.timed_trace_chunk_hash_size, "time_unit": "s",
                "time_scale": self.timed_trace_sec_multiplier, "timestamps": !self.no_self_timed,
                "fields": {"timestamp": self.timed_trace_label_timestamp,
                    "input_length": self.timed_trace_label_input_length,
                    "output_length": self.timed_trace_label_output_length,
                    "hash_ids": self.timed_trace_label_hash_ids}})
            }
            "prefix_repetition" => {
                json!({"name": "prefix_repetition", "prefix_len": self.prefix_repetition_prefix_len,
                "suffix_len": self.prefix_repetition_suffix_len, "num_prefixes": self.prefix_repetition_num_prefixes,
                "output_len": output.unwrap_or(self.prefix_repetition_output_len)})
            }
            // vLLM's Hugging Face and other datasets benchplan does not build: said in
            // flag words, before any plan key can be.
            "hf" => return Err(format!("--dataset-name hf: {}", super::refused::NO_HF)),
            other if !crate::plan::Dataset::NAMES.contains(&other) => {
                return Err(format!(
                    "--dataset-name {other}: not a dataset benchplan builds; use one of random, random-mm, random-rerank, prefix_repetition, sharegpt, custom, burstgpt, random-audio, custom_audio, timed_trace (or a plan for multi_turn and trace)"
                ));
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
                    "custom_audio" => {
                        m.insert(
                            "output_len".into(),
                            json!(output.map_or(self.custom_output_len, |o| o as i64)),
                        );
                        m.insert("no_oversample".into(), json!(self.no_oversample));
                        m.insert("disable_shuffle".into(), json!(self.disable_shuffle));
                        let secs = |s: f64| json!(format!("{s}s"));
                        opt(&mut m, "min_duration", self.asr_min_audio_len_sec.map(secs));
                        opt(
                            &mut m,
                            "max_duration",
                            self.asr_max_audio_len_sec
                                .filter(|s| s.is_finite())
                                .map(secs),
                        );
                    }
                    "custom" => {
                        m.insert(
                            "output_len".into(),
                            json!(output.map_or(self.custom_output_len, |o| o as i64)),
                        );
                        m.insert("no_oversample".into(), json!(self.no_oversample));
                        m.insert("disable_shuffle".into(), json!(self.disable_shuffle));
                        m.insert("skip_chat_template".into(), json!(self.skip_chat_template));
                    }
                    _ => {}
                }
                Value::Object(m)
            }
        };
        d.insert("dataset".into(), dataset);
        Ok(())
    }

    /// The one service: a simulator preset or a base URL, its model, tokenizer, proxy,
    /// TLS and headers (and the output-ratio floor, a default).
    fn service_keys(&self, d: &mut Map<String, Value>) -> Result<Map<String, Value>, String> {
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
        if self.no_proxy {
            svc.insert("proxy".into(), json!(false));
        }
        if self.insecure {
            svc.insert("insecure".into(), json!(true));
        }
        opt(&mut svc, "ca_cert", self.ca_cert.as_ref().map(|v| json!(v)));
        opt(
            d,
            "min_output_ratio",
            self.min_output_ratio.as_ref().map(|v| json!(v)),
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
        Ok(svc)
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
