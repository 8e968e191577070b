//! Cross-field checks, before any traffic: the plan as a whole, then each resolved case.

use super::case::Case;
use crate::diag::Diagnostic;
use crate::plan::dataset::Dataset;
use crate::plan::optimize::SearchVar;
use crate::plan::params::{Backend, CaseParams, RampUp};
use crate::plan::source::{join_index, join_key};
use crate::plan::{Plan, PlanSource, Service};
use crate::slo::floors::parse_slos;
use crate::slo::{Slo, SloMetric, Stat};

/// The most requests one case may send: every one is built and kept in memory.
pub const MAX_PROMPTS: u64 = 10_000_000;

/// A `base_url` that already holds the API's path: `…/v1` (the OpenAI SDK's habit) or a
/// whole endpoint pasted in. The root to write instead, and the path found.
fn api_path_in_base_url(url: &str) -> Option<(String, String)> {
    let trimmed = url.trim_end_matches('/');
    let known = [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/responses",
        "/v1/audio/transcriptions",
        "/v1/audio/translations",
        "/v1/rerank",
        "/v1",
    ];
    known.iter().find_map(|p| {
        trimmed
            .strip_suffix(p)
            .map(|root| (root.to_string(), p.to_string()))
    })
}

/// Checks that do not depend on a case: services, optimize, execution, report.
pub fn check_plan(
    plan: &Plan,
    source: &PlanSource,
    slos: &[(Slo, String)],
    out: &mut Vec<Diagnostic>,
) {
    for (name, svc) in &plan.services {
        let path = join_key("services", name);
        // Service names appear in case ids and file names.
        let plain = !name.is_empty()
            && name.len() <= 64
            && name != "."
            && name != ".."
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
        if !plain {
            out.push(
                Diagnostic::error(&path, format!("service name `{}` is not a plain name", name.escape_debug()))
                    .with_help("name services with letters, digits, `_`, `-` and `.` (at most 64), such as `local` or `prod-a`"),
            );
        }
        match (&svc.base_url, &svc.sim) {
            (Some(_), Some(_)) => out.push(
                Diagnostic::error(&path, "a service is either `base_url` or `sim`, not both")
                    .with_help(
                        "remove `sim` to call the server, or `base_url` to use the simulator",
                    ),
            ),
            (None, None) => out.push(
                Diagnostic::error(&path, "the service has neither `base_url` nor `sim`").with_help(
                    "add base_url = \"http://127.0.0.1:8000\", or sim = { preset = \"tiny\" }",
                ),
            ),
            (Some(url), None) if let Err(e) = crate::base_url::BaseUrl::parse(url) => out.push(
                Diagnostic::error(join_key(&path, "base_url"), e.to_string())
                    .with_help("write the scheme, host and port, such as http://127.0.0.1:8000"),
            ),
            (Some(url), None) => {
                if let Some((root, what)) = api_path_in_base_url(url) {
                    out.push(
                        Diagnostic::error(
                            join_key(&path, "base_url"),
                            format!(
                                "`{url}` ends in {what}: benchplan appends the endpoint (such as /v1/completions) itself, so requests would go to …{what}/v1/…"
                            ),
                        )
                        .with_help(format!(
                            "write base_url = \"{root}\" (the OpenAI SDK's base_url ends in /v1; benchplan's, like vLLM's --base-url, does not)"
                        )),
                    );
                }
            }
            _ => {}
        }
        super::tokenizer::check_tokenizer(&path, svc, out);
        if let Some(sm) = &svc.server_metrics {
            check_server_metrics(&join_key(&path, "server_metrics"), sm, out);
        }
        if let Some(env) = &svc.api_key_env {
            if env.is_empty() || !env.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.push(
                    Diagnostic::error(join_key(&path, "api_key_env"), format!("`{env}` is not an environment variable name"))
                        .with_help("name the variable that holds the key (such as OPENAI_API_KEY), never the key itself"),
                );
            }
        }
        if let Some(sim) = &svc.sim {
            let sp = join_key(&path, "sim");
            for (key, v) in [
                ("failure_rate", sim.params.failure_rate),
                ("disconnect_rate", sim.params.disconnect_rate),
                ("eos_probability", sim.params.eos_probability),
            ] {
                if v.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
                    out.push(
                        Diagnostic::error(
                            join_key(&sp, key),
                            format!("`{key}` must be between 0 and 1"),
                        )
                        .with_help("0.05 means 5% of requests"),
                    );
                }
            }
            for (key, v) in [
                ("max_num_seqs", sim.params.max_num_seqs),
                ("tokens_per_chunk", sim.params.tokens_per_chunk),
                ("block_size", sim.params.block_size),
                ("max_model_len", sim.params.max_model_len),
            ] {
                if v == Some(0) {
                    out.push(Diagnostic::error(
                        join_key(&sp, key),
                        format!("`{key}` must be at least 1"),
                    ));
                }
            }
            if let Some(acc) = &sim.params.spec_decode_acceptance {
                let max = crate::sim::metrics::SPEC_POSITIONS;
                if acc.len() > max || acc.iter().any(|p| !(0.0..=1.0).contains(p)) {
                    out.push(
                        Diagnostic::error(
                            join_key(&sp, "spec_decode_acceptance"),
                            format!("needs at most {max} probabilities, each between 0 and 1"),
                        )
                        .with_help("one per speculative token, such as [0.8, 0.6, 0.4]"),
                    );
                }
            }
            if sim.params.time_factor_under_load.is_some_and(|f| f < 1.0) {
                out.push(Diagnostic::error(
                    join_key(&sp, "time_factor_under_load"),
                    "must be at least 1.0 (1 means no slowdown)",
                ));
            }
        }
    }

    if let Some(opt) = &plan.optimize {
        let op = "optimize";
        let own = parse_slos(opt.slo.as_ref(), "optimize.slo", out);
        if own.is_empty() && slos.is_empty() {
            out.push(
                Diagnostic::error(op, "optimize needs at least one SLO to search against")
                    .with_help("add [slo] p99_ttft = \"<= 500ms\" (or optimize.slo)"),
            );
        }
        let fixed_conflict = |var: &str| {
            Diagnostic::error(
                join_key(op, var),
                format!("optimize searches `{var}`, so it cannot also fix it"),
            )
            .with_help(format!(
                "remove optimize.{var}, or search the other variable"
            ))
        };
        match opt.search {
            SearchVar::MaxConcurrency if opt.max_concurrency.is_some() => {
                out.push(fixed_conflict("max_concurrency"))
            }
            SearchVar::RequestRate if opt.request_rate.is_some() => {
                out.push(fixed_conflict("request_rate"))
            }
            SearchVar::Both if opt.max_concurrency.is_some() || opt.request_rate.is_some() => out
                .push(
                    Diagnostic::error(
                        op,
                        "search = \"both\" searches both variables, so neither can be fixed",
                    )
                    .with_help("remove optimize.max_concurrency and optimize.request_rate"),
                ),
            _ => {}
        }
        let searched: &[&str] = match opt.search {
            SearchVar::MaxConcurrency => &["max_concurrency"],
            SearchVar::RequestRate => &["request_rate"],
            SearchVar::Both => &["max_concurrency", "request_rate"],
        };
        for var in searched {
            if plan.matrix.axes.contains_key(*var) {
                out.push(
                    Diagnostic::error(
                        join_key("matrix", var),
                        format!("`{var}` is both a matrix axis and the optimize search variable"),
                    )
                    .with_help("the search picks its values: remove the axis"),
                );
            }
            if source.has(&join_key("defaults", var)) {
                out.push(
                    Diagnostic::error(
                        join_key("defaults", var),
                        format!("`{var}` is fixed in defaults but searched by optimize"),
                    )
                    .with_help("remove it from defaults; the search sets it"),
                );
            }
        }
        if opt.request_rate.is_some_and(|r| !(r.0 > 0.0)) {
            out.push(Diagnostic::error(
                "optimize.request_rate",
                "the fixed request rate must be above 0",
            ));
        }
        if opt.max_concurrency == Some(0) {
            out.push(Diagnostic::error(
                "optimize.max_concurrency",
                "the fixed max_concurrency must be at least 1",
            ));
        }
        if !(opt.min > 0.0) || !opt.min.is_finite() {
            out.push(Diagnostic::error(
                "optimize.min",
                "the lower bound must be above 0",
            ));
        }
        if !(opt.max >= opt.min) || !opt.max.is_finite() {
            out.push(
                Diagnostic::error(
                    "optimize.max",
                    format!(
                        "the upper bound {} is below the lower bound {}",
                        opt.max, opt.min
                    ),
                )
                .with_help("set max ≥ min"),
            );
        }
        if !(opt.tolerance.0 > 0.0 && opt.tolerance.0 < 1.0) {
            out.push(
                Diagnostic::error(
                    "optimize.tolerance",
                    "the tolerance must be between 0% and 100%",
                )
                .with_help("5% is the usual choice"),
            );
        }
        for (k, b) in [
            ("probe", opt.probe),
            ("bisect", opt.bisect),
            ("validation", opt.validation),
        ] {
            if !(b.multiplier > 0.0) {
                out.push(Diagnostic::error(
                    format!("optimize.{k}.multiplier"),
                    "the multiplier must be above 0",
                ));
            }
        }
        if opt.max_iterations == 0 {
            out.push(Diagnostic::error(
                "optimize.max_iterations",
                "needs at least one iteration",
            ));
        }
        if opt.repeats == 0 {
            out.push(Diagnostic::error(
                "optimize.repeats",
                "needs at least one run per point",
            ));
        }
    }

    if let Some(sm) = &plan.defaults.server_metrics {
        check_server_metrics("defaults.server_metrics", sm, out);
    }

    let ex = &plan.execution;
    if ex.parallel == 0 {
        out.push(
            Diagnostic::error("execution.parallel", "must be at least 1")
                .with_help("1 runs the cases one at a time"),
        );
    }
    if ex.repeats == 0 {
        out.push(Diagnostic::error("execution.repeats", "must be at least 1"));
    }
    if let Some(t) = &plan.report.template {
        let p = source.dir.join(t);
        if !p.is_file() {
            out.push(
                Diagnostic::error(
                    "report.template",
                    format!("template {} does not exist", p.display()),
                )
                .with_help("give a path relative to the plan's folder"),
            );
        }
    }
    if plan.report.regression_threshold.0 < 0.0 {
        out.push(Diagnostic::error(
            "report.regression_threshold",
            "must not be negative",
        ));
    }
}

/// A scrape interval the timer can keep and a path the server can be asked for.
fn check_server_metrics(
    key: &str,
    sm: &crate::plan::server_metrics::ServerMetricsSpec,
    out: &mut Vec<Diagnostic>,
) {
    if sm.scrape_interval.0 < std::time::Duration::from_millis(10) {
        out.push(
            Diagnostic::error(
                join_key(key, "scrape_interval"),
                "the scrape interval must be at least 10ms",
            )
            .with_help("\"1s\" is the default; set enabled = false to not scrape at all"),
        );
    }
    if sm.path.is_empty() || sm.path.contains(char::is_whitespace) || sm.path.contains("://") {
        out.push(
            Diagnostic::error(
                join_key(key, "path"),
                format!("`{}` is not a path on the service", sm.path),
            )
            .with_help("give the path of the metrics page, such as \"/metrics\""),
        );
    }
}

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
    let p = &case.params;
    let backend = p.backend();
    // Origins are looked up only when a problem is found: this runs once per case.
    let at = |key: &str| case.origin_of(key);

    if let Some(endpoint) = &p.endpoint {
        if !backend.accepts_endpoint(endpoint) {
            out.push(
                Diagnostic::error(
                    backend_origin(case, source, "endpoint"),
                    format!(
                        "endpoint `{endpoint}` does not fit backend `{}`, which calls `…{}`",
                        backend.name(),
                        backend.endpoint_suffix()
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
    if ds.is_multimodal() && backend != Backend::OpenaiChat {
        out.push(need(
            Backend::OpenaiChat,
            "sends images, which need the chat API",
        ));
    }
    if ds.is_audio() && backend != Backend::OpenaiAudio {
        out.push(need(
            Backend::OpenaiAudio,
            "uploads audio clips, which need the audio API",
        ));
    }
    if backend == Backend::OpenaiAudio && !ds.is_audio() {
        out.push(
            Diagnostic::error(
                backend_origin(case, source, "backend"),
                format!(
                    "backend `openai-audio` uploads audio clips, and dataset `{}` has none",
                    ds.name()
                ),
            )
            .with_help(
                "set dataset = { name = \"random-audio\", duration = \"10s\" } or { name = \"custom_audio\", path = \"clips/\" }",
            ),
        );
    }
    if matches!(ds, Dataset::RandomRerank(_)) && backend != Backend::VllmRerank {
        out.push(need(Backend::VllmRerank, "builds rerank queries"));
    }
    if backend == Backend::VllmRerank && !matches!(ds, Dataset::RandomRerank(_)) {
        out.push(
            Diagnostic::error(
                backend_origin(case, source, "backend"),
                format!(
                    "backend `vllm-rerank` needs the `random-rerank` dataset, not `{}`",
                    ds.name()
                ),
            )
            .with_help("set dataset = { name = \"random-rerank\", … }"),
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
    if backend == Backend::OpenaiResponses && p.min_p.is_some() {
        out.push(
            Diagnostic::error(
                at("min_p"),
                "the Responses API has no min_p (vLLM's openai-responses benchmark refuses it too)",
            )
            .with_help("remove min_p, or send it anyway with extra_body = { min_p = 0.1 }"),
        );
    }
    if matches!(ds, Dataset::MultiTurn(_)) && backend != Backend::OpenaiChat {
        out.push(need(Backend::OpenaiChat, "sends a conversation history"));
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

    // SLOs that need something of the case.
    for (slo, path) in slos {
        if slo.metric == SloMetric::GoodputRatio
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

/// Fills in the backend, endpoint, client and request shape. Precedence, one rule for them all: a
/// matrix value of the case, then the service's own key, then `[defaults]`, then
/// vLLM's default (a service that says `backend = "openai-chat"` is never overridden by
/// the plan-wide default `init` writes). `from_matrix(key)`: whether the case's matrix
/// values set `key`.
pub fn resolve_target(
    params: &mut CaseParams,
    service: &Service,
    from_matrix: impl Fn(&str) -> bool,
) {
    let backend = if from_matrix("backend") {
        params.backend
    } else {
        service.backend.or(params.backend)
    }
    .unwrap_or(Backend::Openai);
    params.backend = Some(backend);
    params.client = if from_matrix("client") {
        params.client.or(service.client)
    } else {
        service.client.or(params.client)
    };
    if !from_matrix("endpoint") && service.endpoint.is_some() {
        params.endpoint = service.endpoint.clone();
    }
    if params.endpoint.is_none() {
        params.endpoint = Some(backend.default_endpoint().to_string());
    }
    // The request shape, field by field: what the matrix sets, else the service's, else
    // the defaults'.
    let matrix =
        |f: &str| from_matrix("request_shape") || from_matrix(&format!("request_shape.{f}"));
    let (s, p) = (&service.request_shape, &mut params.request_shape);
    if !matrix("chat_content") {
        p.chat_content = s.chat_content.or(p.chat_content);
    }
    if !matrix("request_id") {
        p.request_id = s.request_id.or(p.request_id);
    }
    if !matrix("request_id_header") {
        p.request_id_header = s.request_id_header.clone().or(p.request_id_header.take());
    }
    if !matrix("stream_options") {
        p.stream_options = s.stream_options.or(p.stream_options);
    }
    if !matrix("max_tokens_key") {
        p.max_tokens_key = s.max_tokens_key.or(p.max_tokens_key);
    }
}

/// Fills in what a checked case implies: vLLM's ignore_eos default, and the percentiles
/// and metrics its SLOs read (a p99.9 SLO makes the case compute p99.9).
pub fn resolve_implied(params: &mut CaseParams, slos: &[(Slo, String)]) {
    if params.ignore_eos.is_none()
        && !params.backend().is_pooling()
        && params.dataset.ignores_eos_by_default()
    {
        params.ignore_eos = Some(true);
    }
    let mut metrics = params.percentile_metrics();
    for (slo, _) in slos {
        if let SloMetric::Latency { stat, metric } = slo.metric {
            if !metrics.contains(&metric) {
                metrics.push(metric);
            }
            if let Stat::Percentile(q) = stat {
                if !params.metric_percentiles.contains(&q) {
                    params.metric_percentiles.push(q);
                }
            }
        }
    }
    params.percentile_metrics = Some(metrics);
}
