//! The checks of one resolved case: its request, backend and dataset, files, load
//! shape, LoRA adapters, the SLOs it is judged on, and its lengths.

use super::MAX_PROMPTS;
use crate::diag::Diagnostic;
use crate::plan::PlanSource;
use crate::plan::backend::Backend;
use crate::plan::dataset::Dataset;
use crate::plan::params::RampUp;
use crate::plan::source::{join_index, join_key};
use crate::planner::case::Case;
use crate::slo::{Slo, SloMetric, Stat};

/// Where a case's backend or endpoint was set: the matrix, defaults, or the service.
fn backend_origin(case: &Case, source: &PlanSource, key: &str) -> String {
    let origin = case.origin_of(key);
    if origin.starts_with("matrix") || source.has(&origin) {
        origin
    } else {
        join_key(&join_key("services", &case.service), key)
    }
}

/// Checks one resolved case (before the SLO-implied and backend-implied fields are filled in).
pub fn check_case(
    case: &Case,
    source: &PlanSource,
    slos: &[(Slo, String)],
    out: &mut Vec<Diagnostic>,
) {
    check_request(case, source, out);
    check_backend(case, source, slos, out);
    check_files(case, source, out);
    check_load(case, out);
    check_lora(case, out);
    check_slo_needs(case, slos, out);
}

/// The request itself: its endpoint fits the backend, its request-id wording is valid.
fn check_request(case: &Case, source: &PlanSource, out: &mut Vec<Diagnostic>) {
    let p = &case.params;
    let backend = p.backend();
    if let Some(endpoint) = &p.endpoint {
        if !backend.accepts_endpoint(endpoint) {
            out.push(
                Diagnostic::error(
                    backend_origin(case, source, "endpoint"),
                    format!(
                        "endpoint `{endpoint}` does not fit backend `{}`, which calls `…{}`",
                        backend.name(),
                        backend.spec().endpoint_suffixes[0]
                    ),
                )
                .with_help(format!(
                    "use endpoint = \"{}\", or remove `endpoint` to infer it from the backend",
                    backend.default_endpoint()
                )),
            );
        }
    }

    if let Err(e) = crate::client::request_id::RequestIds::of(&p.request_shape) {
        out.push(
            Diagnostic::error(
                backend_origin(case, source, "request_shape.request_id_header"),
                e,
            )
            .with_help("a header name is letters, digits and dashes, such as \"x-correlation-id\""),
        );
    }
}

/// Dataset and backend compatibility (the rules of `plan::backend`'s table), the
/// client engine, and the sampling parameters a pooling backend takes none of.
fn check_backend(
    case: &Case,
    source: &PlanSource,
    slos: &[(Slo, String)],
    out: &mut Vec<Diagnostic>,
) {
    let p = &case.params;
    let backend = p.backend();
    let at = |key: &str| case.origin_of(key);
    // Dataset and backend compatibility.
    let ds = &p.dataset;
    let need = |b: Backend, why: &str| {
        Diagnostic::error(
            at("dataset"),
            format!(
                "dataset `{}` {why}, but the backend is `{}`",
                ds.name(),
                backend.name()
            ),
        )
        .with_help(format!("set backend = \"{}\" for these cases", b.name()))
    };
    // The table's rules (`plan::backend`): a dataset whose inputs the backend does not
    // take names the backend it needs; a backend that takes no text says what it needs.
    let inputs = ds.inputs();
    let spec = backend.spec();
    if !spec.takes.contains(&inputs)
        && let Some((b, why)) = inputs.needs()
    {
        out.push(need(b, why));
    }
    if let Some((why, help)) = spec.needs_dataset
        && !spec.takes.contains(&inputs)
    {
        out.push(
            Diagnostic::error(
                backend_origin(case, source, "backend"),
                format!("backend `{}` {}", spec.name, why.replace("{}", ds.name())),
            )
            .with_help(help),
        );
    }
    if p.client == Some(crate::plan::params::ClientEngine::Vllm)
        && let Some(why) = p.dataset.vllm_unsupported()
    {
        out.push(
            Diagnostic::error(at("client"), format!("client = \"vllm\": {why}")).with_help(
                "use client = \"native\" for these cases, or a dataset vllm bench serve has",
            ),
        );
    }
    if !backend.spec().takes_min_p && p.min_p.is_some() {
        out.push(
            Diagnostic::error(
                at("min_p"),
                "the Responses API has no min_p (vLLM's openai-responses benchmark refuses it too)",
            )
            .with_help("remove min_p, or send it anyway with extra_body = { min_p = 0.1 }"),
        );
    }
    if backend.is_pooling() {
        for name in p.sampling_set() {
            out.push(
                Diagnostic::error(
                    at(name),
                    format!(
                        "`{name}` is a sampling parameter, and pooling backend `{}` takes none",
                        backend.name()
                    ),
                )
                .with_help(format!("remove `{name}` for these cases")),
            );
        }
        if let Some(m) = p
            .percentile_metrics
            .iter()
            .flatten()
            .find(|m| m.needs_streaming())
        {
            out.push(
                Diagnostic::error(
                    at("percentile_metrics"),
                    format!(
                        "pooling backend `{}` does not stream, so it has no `{}`",
                        backend.name(),
                        m.name()
                    ),
                )
                .with_help("use e2el for pooling backends"),
            );
        }
        if let Some(g) = &p.goodput {
            if g.ttft.is_some() || g.tpot.is_some() {
                out.push(
                    Diagnostic::error(
                        at("goodput"),
                        "pooling backends have no TTFT or TPOT; goodput can only use e2el",
                    )
                    .with_help("keep only goodput.e2el"),
                );
            }
        }
        for (slo, path) in slos {
            if let SloMetric::Latency { metric, .. } = slo.metric {
                if metric.needs_streaming() {
                    out.push(
                        Diagnostic::error(
                            path,
                            format!(
                                "pooling backend `{}` does not stream, so `{}` cannot be judged",
                                backend.name(),
                                slo.key
                            ),
                        )
                        .with_help("judge e2el instead, such as p99_e2el = \"<= 1s\""),
                    );
                }
            }
        }
    }
}

/// The files a dataset reads exist and are readable.
fn check_files(case: &Case, source: &PlanSource, out: &mut Vec<Diagnostic>) {
    let at = |key: &str| case.origin_of(key);
    let ds = &case.params.dataset;
    // Files a dataset reads.
    if let Some(path) = ds.path() {
        let full = source.dir.join(path);
        // custom_audio also takes a folder of clips.
        let folder_ok = matches!(ds, Dataset::CustomAudio(_)) && full.is_dir();
        if !full.is_file() && !folder_ok {
            out.push(
                Diagnostic::error(
                    join_key(&at("dataset"), "path"),
                    format!("dataset file {} does not exist", full.display()),
                )
                .with_help("paths are relative to the plan's folder"),
            );
        } else if let Dataset::Trace(d) = ds {
            check_trace(d, source, &at("dataset"), out);
        }
    } else if ds.requires_path() {
        out.push(
            Diagnostic::error(
                at("dataset"),
                format!(
                    "dataset `{}` reads a file, but no `path` is given",
                    ds.name()
                ),
            )
            .with_help("add path = \"data/file\" (relative to the plan's folder) inside dataset"),
        );
    }
    check_lengths(ds, &|| at("dataset"), out);
}

/// A trace is read at validation: a row whose ids do not cover its length is refused
/// with its line, before any traffic; what the format filled is said once.
fn check_trace(
    d: &crate::plan::trace::TraceDataset,
    source: &PlanSource,
    at: &str,
    out: &mut Vec<Diagnostic>,
) {
    let push_once = |out: &mut Vec<Diagnostic>, d: Diagnostic| {
        if !out
            .iter()
            .any(|x| x.message == d.message && x.severity == d.severity)
        {
            out.push(d);
        }
    };
    if let Err(e) = crate::dataset::trace::read(d, &source.dir) {
        push_once(out, Diagnostic::error(join_key(at, "path"), e));
        return;
    }
    let filled = d.filled();
    if !filled.is_empty() {
        push_once(
            out,
            Diagnostic::warning(
                join_key(at, "format"),
                format!(
                    "trace format `{}` filled {}",
                    d.format.as_str(),
                    filled.join(" and ")
                ),
            )
            .with_help("set block_size and time_unit in the dataset to say them yourself"),
        );
    }
    if d.time_scale <= 0.0 || !d.time_scale.is_finite() {
        out.push(Diagnostic::error(
            join_key(at, "time_scale"),
            format!("`time_scale` must be above 0, not {}", d.time_scale),
        ));
    }
}

/// The load shape: concurrency, rate, burstiness, prompts, percentiles, ramp-up.
fn check_load(case: &Case, out: &mut Vec<Diagnostic>) {
    let p = &case.params;
    let at = |key: &str| case.origin_of(key);
    // Load shape.
    if p.max_concurrency == Some(0) {
        out.push(
            Diagnostic::error(at("max_concurrency"), "max_concurrency must be at least 1")
                .with_help("remove it for no client-side limit"),
        );
    }
    if !(p.request_rate.0 > 0.0) {
        out.push(
            Diagnostic::error(
                at("request_rate"),
                "request_rate must be above 0, or \"inf\"",
            )
            .with_help("\"inf\" sends every request at once"),
        );
    }
    if !(p.burstiness.0 > 0.0) {
        out.push(
            Diagnostic::error(at("burstiness"), "burstiness must be above 0")
                .with_help("1 is a Poisson process; larger is more regular"),
        );
    }
    if p.num_prompts == 0 {
        out.push(Diagnostic::error(
            at("num_prompts"),
            "num_prompts must be at least 1",
        ));
    } else if p.num_prompts > MAX_PROMPTS {
        out.push(
            Diagnostic::error(
                at("num_prompts"),
                format!(
                    "num_prompts {} is more than one case can hold ({MAX_PROMPTS})",
                    p.num_prompts
                ),
            )
            .with_help("split the load over cases or repeats"),
        );
    }
    for (i, q) in p.metric_percentiles.iter().enumerate() {
        if !(*q > 0.0 && *q <= 100.0) {
            out.push(Diagnostic::error(
                join_index(&at("metric_percentiles"), i),
                format!("percentile {q} is outside (0, 100]"),
            ));
        }
    }
    match p.ramp_up_strategy {
        Some(strategy) => {
            if p.request_rate.is_finite() {
                out.push(
                    Diagnostic::error(
                        at("ramp_up_strategy"),
                        "a ramp-up sets the rate, so it excludes a finite request_rate",
                    )
                    .with_help("remove request_rate (or set it to \"inf\") when ramping up"),
                );
            }
            match (p.ramp_up_start_rps, p.ramp_up_end_rps) {
                (Some(s), Some(e)) => {
                    if s < 0.0 || e < s {
                        out.push(
                            Diagnostic::error(
                                at("ramp_up_end_rps"),
                                format!("the ramp must go up: start {s} ≤ end {e}, both ≥ 0"),
                            )
                            .with_help("swap or fix ramp_up_start_rps and ramp_up_end_rps"),
                        );
                    }
                    if strategy == RampUp::Exponential && s <= 0.0 {
                        out.push(
                            Diagnostic::error(
                                at("ramp_up_start_rps"),
                                "an exponential ramp cannot start at 0 requests per second",
                            )
                            .with_help("start at a small rate such as 1"),
                        );
                    }
                }
                _ => out.push(
                    Diagnostic::error(
                        at("ramp_up_strategy"),
                        "a ramp-up needs both ramp_up_start_rps and ramp_up_end_rps",
                    )
                    .with_help("add ramp_up_start_rps = 1 and ramp_up_end_rps = 20"),
                ),
            }
        }
        None => {
            if p.ramp_up_start_rps.is_some() || p.ramp_up_end_rps.is_some() {
                out.push(
                    Diagnostic::error(
                        at("ramp_up_start_rps"),
                        "ramp-up rates are set without ramp_up_strategy",
                    )
                    .with_help("add ramp_up_strategy = \"linear\" or \"exponential\""),
                );
            }
        }
    }
}

/// LoRA adapters and how requests pick them.
fn check_lora(case: &Case, out: &mut Vec<Diagnostic>) {
    let p = &case.params;
    let at = |key: &str| case.origin_of(key);
    if !p.lora_modules.is_empty() {
        if matches!(p.dataset, crate::plan::Dataset::MultiTurn(_)) {
            out.push(
                Diagnostic::error(
                    at("lora_modules"),
                    "lora_modules picks an adapter per request, which a multi-turn conversation cannot change between turns",
                )
                .with_help("run the conversations against one adapter: set the service's served_model_name to it"),
            );
        }
        if p.lora_modules.iter().any(|m| m.trim().is_empty()) {
            out.push(Diagnostic::error(
                at("lora_modules"),
                "a LoRA adapter name is empty",
            ));
        }
    } else if p.lora_assignment.is_some() {
        out.push(
            Diagnostic::error(
                at("lora_assignment"),
                "lora_assignment is set without lora_modules",
            )
            .with_help("add lora_modules = [\"adapter-a\", \"adapter-b\"]"),
        );
    }
}

/// SLOs that need something of the case (a goodput SLO needs its metric, …).
fn check_slo_needs(case: &Case, slos: &[(Slo, String)], out: &mut Vec<Diagnostic>) {
    let p = &case.params;
    let at = |key: &str| case.origin_of(key);
    // SLOs that need something of the case.
    for (slo, path) in slos {
        // The client queues only behind a concurrency cap, and E2EL from the scheduled
        // arrival has one only at a finite rate: vLLM reports them only then.
        if let SloMetric::Latency { metric, .. } = slo.metric {
            use crate::plan::params::Metric;
            let queued = matches!(
                metric,
                Metric::ClientQueueTime | Metric::E2elIncludingClientQueue
            );
            if queued && p.max_concurrency.is_none() {
                out.push(
                    Diagnostic::error(
                        path,
                        format!(
                            "`{}` is measured only behind a concurrency cap: this case has no max_concurrency",
                            slo.key
                        ),
                    )
                    .with_help("set max_concurrency, or judge e2el"),
                );
            } else if metric == Metric::E2elIncludingClientQueue && !p.request_rate.is_finite() {
                out.push(
                    Diagnostic::error(
                        path,
                        format!(
                            "`{}` is measured only at a finite request_rate (requests sent all at once have no schedule to count from)",
                            slo.key
                        ),
                    )
                    .with_help("set request_rate, or judge client_queue_time"),
                );
            }
        }
        if slo.metric.is("goodput_ratio")
            && p.goodput
                .as_ref()
                .is_none_or(|g| g.ttft.is_none() && g.tpot.is_none() && g.e2el.is_none())
        {
            out.push(
                Diagnostic::error(path, "`goodput_ratio` needs a goodput definition")
                    .with_help("add goodput = { ttft = \"500ms\", tpot = \"50ms\" } to defaults"),
            );
        }
        if let SloMetric::Latency {
            stat: Stat::Percentile(q),
            ..
        } = slo.metric
        {
            if q >= 99.0 && p.num_prompts < 100 {
                out.push(
                    Diagnostic::warning(at("num_prompts"), format!("{} prompts are few for a p{} SLO: the tail rests on one or two requests", p.num_prompts, crate::slo::percentile_label(q)))
                        .with_help("use at least 100 prompts, better 1000"),
                );
            }
        }
    }
}

fn check_lengths(ds: &Dataset, at: &dyn Fn() -> String, out: &mut Vec<Diagnostic>) {
    let mut need_pos = |key: &str, v: u64| {
        if v == 0 {
            out.push(Diagnostic::error(
                join_key(&at(), key),
                format!("`{key}` must be at least 1"),
            ));
        }
    };
    let mut ratios: Vec<(&str, f64)> = Vec::new();
    match ds {
        Dataset::Random(d) => {
            need_pos("input_len", d.input_len);
            need_pos("output_len", d.output_len);
            need_pos("batch_size", d.batch_size);
            ratios.push(("range_ratio", d.range_ratio));
            if let Some(r) = d.output_range_ratio {
                ratios.push(("output_range_ratio", r));
            }
        }
        Dataset::RandomMm(d) => {
            need_pos("input_len", d.input_len);
            need_pos("output_len", d.output_len);
            ratios.push(("range_ratio", d.range_ratio));
            for (i, b) in d.buckets.iter().enumerate() {
                if b.width == 0 || b.height == 0 || b.frames == 0 {
                    out.push(Diagnostic::error(
                        join_index(&join_key(&at(), "buckets"), i),
                        "image sizes and frame counts must be at least 1",
                    ));
                }
            }
        }
        Dataset::RandomRerank(d) => {
            need_pos("input_len", d.input_len);
            need_pos("batch_size", d.batch_size);
            ratios.push(("range_ratio", d.range_ratio));
        }
        Dataset::PrefixRepetition(d) => {
            need_pos("num_prefixes", d.num_prefixes);
            need_pos("output_len", d.output_len);
        }
        Dataset::MultiTurn(d) => check_multi_turn(d, at, out),
        Dataset::RandomAudio(d) => {
            need_pos("output_len", d.output_len);
            need_pos("sample_rate", u64::from(d.sample_rate));
            if d.duration.0.is_zero() {
                out.push(Diagnostic::error(
                    join_key(&at(), "duration"),
                    "`duration` must be longer than 0 s",
                ));
            }
            ratios.push(("range_ratio", d.range_ratio));
            ratios.push(("duration_range_ratio", d.duration_range_ratio));
        }
        Dataset::CustomAudio(d) => {
            if let (Some(lo), Some(hi)) = (d.min_duration, d.max_duration)
                && lo.0 > hi.0
            {
                out.push(Diagnostic::error(
                    join_key(&at(), "min_duration"),
                    format!(
                        "`min_duration` ({:.3} s) is longer than `max_duration` ({:.3} s): no clip fits",
                        lo.as_secs_f64(),
                        hi.as_secs_f64()
                    ),
                ));
            }
        }
        _ => {}
    }
    for (key, r) in ratios {
        if !(0.0..1.0).contains(&r) {
            out.push(Diagnostic::error(
                join_key(&at(), key),
                format!("`{key}` must be in [0, 1), not {r}"),
            ));
        }
    }
}

fn check_multi_turn(
    d: &crate::plan::dataset::MultiTurnDataset,
    at: &dyn Fn() -> String,
    out: &mut Vec<Diagnostic>,
) {
    let mut err = |key: &str, msg: String, help: &str| {
        let d = Diagnostic::error(join_key(&at(), key), msg);
        out.push(if help.is_empty() {
            d
        } else {
            d.with_help(help)
        });
    };
    if d.input_len == 0 {
        err("input_len", "`input_len` must be at least 1".into(), "");
    }
    if d.output_len == Some(0) {
        err("output_len", "`output_len` must be at least 1".into(), "");
    }
    match d.num_turns {
        Some(0) => err("num_turns", "`num_turns` must be at least 1".into(), ""),
        None if d.min_turns == 0 => err("min_turns", "`min_turns` must be at least 1".into(), ""),
        None if d.min_turns > d.max_turns => err(
            "min_turns",
            format!(
                "min_turns ({}) is above max_turns ({})",
                d.min_turns, d.max_turns
            ),
            "lower min_turns, raise max_turns, or set num_turns for a fixed count",
        ),
        _ => {}
    }
    for (key, r) in [
        ("prefix_global_ratio", d.prefix_global_ratio),
        ("prefix_conversation_ratio", d.prefix_conversation_ratio),
    ] {
        if !(0.0..1.0).contains(&r) {
            err(key, format!("`{key}` must be in [0, 1), not {r}"), "");
        }
    }
    if d.prefix_global_ratio + d.prefix_conversation_ratio >= 1.0 {
        err(
            "prefix_global_ratio",
            "prefix_global_ratio + prefix_conversation_ratio must be below 1".into(),
            "leave room for each turn's unique part",
        );
    }
    if d.path.is_some() && d.prefix_sharing() {
        err(
            "prefix_global_ratio",
            "prefix ratios build synthetic turns, but this dataset reads a file".into(),
            "remove `path`, or set both prefix ratios to 0",
        );
    }
    if d.path.is_none() && d.history == crate::plan::dataset::ConversationHistory::Recorded {
        err(
            "history",
            "`history = \"recorded\"` needs a file with recorded assistant turns".into(),
            "set `path` to a ShareGPT file, or use history = \"live\"",
        );
    }
}
