//! The checks of the plan as a whole: its services, its `[optimize]` block, its
//! execution and report settings.

use crate::diag::Diagnostic;
use crate::plan::optimize::SearchVar;
use crate::plan::source::join_key;
use crate::plan::{Plan, PlanSource};
use crate::slo::Slo;
use crate::slo::floors::parse_slos;

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
    check_services(plan, out);
    check_optimize(plan, source, slos, out);
    check_settings(plan, source, out);
}

/// Each service: `base_url` or `sim`, a base URL that is one, its tokenizer, its
/// metrics page, key variable and own defaults and SLOs.
fn check_services(plan: &Plan, out: &mut Vec<Diagnostic>) {
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
        crate::planner::tokenizer::check_tokenizer(&path, svc, out);
        if let Some(e) = &svc.energy {
            let sources = [
                e.dcgm.is_some(),
                e.prometheus.is_some(),
                e.command.is_some(),
                e.nvml == Some(true),
            ];
            if sources.iter().filter(|s| **s).count() != 1 {
                out.push(
                    Diagnostic::error(
                        join_key(&path, "energy"),
                        "set one of `dcgm` (a DCGM exporter's page), `prometheus` (a Prometheus server that scrapes one), `command` (a command that prints watts) and `nvml = true` (this machine's GPUs)",
                    )
                    .with_help("energy = { dcgm = \"http://node:9400/metrics\" }"),
                );
            }
        }
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
            for (key, v) in [
                ("idle_watts", sim.params.idle_watts),
                ("watts_per_sequence", sim.params.watts_per_sequence),
            ] {
                if v.is_some_and(|w| !(w.is_finite() && w >= 0.0)) {
                    out.push(Diagnostic::error(
                        join_key(&sp, key),
                        format!("`{key}` must be a number of watts, 0 or more"),
                    ));
                }
            }
            if sim.params.gpus == Some(0) {
                out.push(Diagnostic::error(
                    join_key(&sp, "gpus"),
                    "`gpus` must be at least 1",
                ));
            }
            if sim.params.time_factor_under_load.is_some_and(|f| f < 1.0) {
                out.push(Diagnostic::error(
                    join_key(&sp, "time_factor_under_load"),
                    "must be at least 1.0 (1 means no slowdown)",
                ));
            }
            if sim
                .params
                .warmup_factor
                .is_some_and(|f| !(f.is_finite() && f >= 1.0))
            {
                out.push(Diagnostic::error(
                    join_key(&sp, "warmup_factor"),
                    "must be a number of at least 1.0 (3 means three times slower while warming up)",
                ));
            }
        }
    }
}

/// The `[optimize]` block: its strategies, search variables and SLOs.
fn check_optimize(
    plan: &Plan,
    source: &PlanSource,
    slos: &[(Slo, String)],
    out: &mut Vec<Diagnostic>,
) {
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
}

/// The plan-wide settings: default metrics scraping, `[execution]` and `[report]`.
fn check_settings(plan: &Plan, source: &PlanSource, out: &mut Vec<Diagnostic>) {
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
