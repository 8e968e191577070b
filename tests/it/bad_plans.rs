//! Bad plans: each is rejected before any traffic, with the file, line, key path
//! and the message a user needs to fix it.

use benchplan::plan::Format;

use crate::support::{plan_text, repo};

/// (what it shows, format, plan text, substrings the diagnostics must contain).
const BAD: &[(&str, Format, &str, &[&str])] = &[
    (
        "a dataset given as a bare name",
        Format::Toml,
        "[defaults]\ndataset = \"random\"\n",
        &[
            "bad.toml:2:1: `defaults.dataset`: a dataset is a table",
            "dataset = { name = \"random\", input_len = 1024",
        ],
    ),
    (
        "a dataset setting beside the dataset",
        Format::Toml,
        "[defaults]\ninput_len = 100\n",
        &[
            "bad.toml:2:1: `defaults.input_len`: unknown key",
            "`input_len` belongs to the dataset",
            "\"dataset.input_len\"",
        ],
    ),
    (
        "a latency condition without a unit",
        Format::Toml,
        "[slo]\np99_ttft = \"< 500\"\n",
        &[
            "bad.toml:2:1: `slo.p99_ttft`: `500` has no unit",
            "write 500ms or 500s",
        ],
    ),
    (
        "typo in a key",
        Format::Toml,
        "[defaults]\nnum_prompts = 10\nmax_concurency = 4\n",
        &[
            "bad.toml:3:1: `defaults.max_concurency`: unknown key",
            "did you mean `max_concurrency`?",
        ],
    ),
    (
        "chat backend with the completions endpoint",
        Format::Toml,
        "[defaults]\nbackend = \"openai-chat\"\nendpoint = \"/v1/completions\"\n",
        &[
            "bad.toml:3:1: `defaults.endpoint`",
            "does not fit backend `openai-chat`",
            "endpoint = \"/v1/chat/completions\"",
        ],
    ),
    (
        "sharegpt without a path",
        Format::Toml,
        "[defaults]\ndataset = { name = \"sharegpt\" }\n",
        &[
            "bad.toml:2:1: `defaults.dataset`",
            "reads a file, but no `path`",
        ],
    ),
    (
        "goodput on itl",
        Format::Toml,
        "[defaults]\ngoodput = { itl = \"50ms\" }\n",
        &[
            "bad.toml:2:13: `defaults.goodput.itl`: unknown key `itl`",
            "ttft, tpot, e2el",
        ],
    ),
    (
        "zero concurrency",
        Format::Toml,
        "[defaults]\nmax_concurrency = 0\n",
        &["bad.toml:2:1: `defaults.max_concurrency`: max_concurrency must be at least 1"],
    ),
    (
        "misspelt SLO metric",
        Format::Toml,
        "[slo]\n\"p99.9_tft\" = \"<= 1s\"\n",
        &[
            "bad.toml:2:1: `slo.\"p99.9_tft\"`",
            "unknown latency metric `tft`",
            "did you mean `ttft`?",
        ],
    ),
    (
        "TOML syntax error",
        Format::Toml,
        "name = \"x\"\n[defaults\nnum_prompts = 3\n",
        &["bad.toml:2:", "TOML syntax error"],
    ),
    (
        "YAML indentation error",
        Format::Yaml,
        "name: x\ndefaults:\n  num_prompts: 10\n   max_concurrency: 4\n",
        &["bad.yaml:4:", "YAML syntax error"],
    ),
    (
        "unknown backend",
        Format::Toml,
        "[defaults]\nbackend = \"openai-chatt\"\n",
        &[
            "bad.toml:2:1: `defaults.backend`",
            "unknown variant `openai-chatt`",
        ],
    ),
    (
        "images on the completions backend",
        Format::Toml,
        "[defaults]\nbackend = \"openai\"\ndataset = { name = \"random-mm\" }\n",
        &[
            "bad.toml:3:1: `defaults.dataset`",
            "sends images",
            "backend = \"openai-chat\"",
        ],
    ),
    (
        "rerank dataset on the chat backend",
        Format::Toml,
        "[defaults]\nbackend = \"openai-chat\"\ndataset = { name = \"random-rerank\" }\n",
        &[
            "`defaults.dataset`",
            "builds rerank queries",
            "backend = \"vllm-rerank\"",
        ],
    ),
    (
        "sampling parameters on a pooling backend",
        Format::Toml,
        "[defaults]\nbackend = \"openai-embeddings\"\ntemperature = 0.7\n",
        &[
            "bad.toml:3:1: `defaults.temperature`",
            "pooling backend `openai-embeddings` takes none",
        ],
    ),
    (
        "TTFT SLO on a pooling backend",
        Format::Toml,
        "[defaults]\nbackend = \"openai-embeddings\"\n[slo]\np99_ttft = \"<= 1s\"\n",
        &["bad.toml:4:1: `slo.p99_ttft`", "does not stream"],
    ),
    (
        "dataset file that does not exist",
        Format::Toml,
        "[defaults]\ndataset = { name = \"sharegpt\", path = \"data/nope.json\" }\n",
        &["`defaults.dataset.path`", "nope.json does not exist"],
    ),
    (
        "ramp-up with a finite rate",
        Format::Toml,
        "[defaults]\nrequest_rate = 5\nramp_up_strategy = \"linear\"\nramp_up_start_rps = 1\nramp_up_end_rps = 10\n",
        &[
            "bad.toml:3:1: `defaults.ramp_up_strategy`",
            "excludes a finite request_rate",
        ],
    ),
    (
        "exponential ramp from zero",
        Format::Toml,
        "[defaults]\nramp_up_strategy = \"exponential\"\nramp_up_start_rps = 0\nramp_up_end_rps = 10\n",
        &[
            "bad.toml:3:1: `defaults.ramp_up_start_rps`",
            "cannot start at 0",
        ],
    ),
    (
        "ramp going down",
        Format::Toml,
        "[defaults]\nramp_up_strategy = \"linear\"\nramp_up_start_rps = 10\nramp_up_end_rps = 2\n",
        &[
            "bad.toml:4:1: `defaults.ramp_up_end_rps`",
            "the ramp must go up",
        ],
    ),
    (
        "zero request rate",
        Format::Toml,
        "[defaults]\nrequest_rate = 0\n",
        &[
            "bad.toml:2:1: `defaults.request_rate`",
            "must be above 0, or \"inf\"",
        ],
    ),
    (
        "zero burstiness",
        Format::Toml,
        "[defaults]\nburstiness = 0.0\n",
        &[
            "bad.toml:2:1: `defaults.burstiness`",
            "burstiness must be above 0",
        ],
    ),
    (
        "goodput ratio without goodput",
        Format::Toml,
        "[slo]\ngoodput_ratio = \">= 0.9\"\n",
        &[
            "bad.toml:2:1: `slo.goodput_ratio`",
            "needs a goodput definition",
        ],
    ),
    (
        "axis that is not a parameter",
        Format::Toml,
        "[matrix]\nmax_concurrenc = [1, 2]\n",
        &[
            "bad.toml:2:1: `matrix.max_concurrenc`",
            "is not a case parameter",
            "did you mean `max_concurrency`?",
        ],
    ),
    (
        "axis value of the wrong type",
        Format::Toml,
        "[matrix]\nmax_concurrency = [1, \"many\"]\n",
        &[
            "bad.toml:2:23: `matrix.max_concurrency[1]`",
            "bad value \"many\"",
        ],
    ),
    (
        "exclude naming an undeclared axis",
        Format::Toml,
        "[matrix]\nmax_concurrency = [1, 2]\n[[matrix.exclude]]\nrequest_rate = 4\n",
        &[
            "bad.toml:4:1: `matrix.exclude[0].request_rate`",
            "is not a declared matrix axis",
        ],
    ),
    (
        "zip of unequal axes",
        Format::Toml,
        "[matrix]\n\"dataset.input_len\" = [1, 2, 3]\n\"dataset.output_len\" = [4, 5]\nzip = [[\"dataset.input_len\", \"dataset.output_len\"]]\n",
        &[
            "`matrix.zip[0][1]`",
            "has 2 values, but the group's first axis has 3",
        ],
    ),
    (
        "matrix service that does not exist",
        Format::Toml,
        "[services.a]\nsim = {}\n[matrix]\nservice = [\"a\", \"b\"]\n",
        &[
            "bad.toml:4:17: `matrix.service[1]`",
            "\"b\" is not defined in `services`",
        ],
    ),
    (
        "optimize without SLOs",
        Format::Toml,
        "[optimize]\nsearch = \"max_concurrency\"\n",
        &["bad.toml:1:2: `optimize`", "needs at least one SLO"],
    ),
    (
        "optimize fixing what it searches",
        Format::Toml,
        "[slo]\np99_ttft = \"<= 1s\"\n[optimize]\nsearch = \"max_concurrency\"\nmax_concurrency = 8\n",
        &[
            "bad.toml:5:1: `optimize.max_concurrency`",
            "cannot also fix it",
        ],
    ),
    (
        "optimize searching a matrix axis",
        Format::Toml,
        "[slo]\np99_ttft = \"<= 1s\"\n[matrix]\nrequest_rate = [1, 2]\n[optimize]\nsearch = \"request_rate\"\n",
        &[
            "bad.toml:4:1: `matrix.request_rate`",
            "both a matrix axis and the optimize search variable",
        ],
    ),
    (
        "an optimize SLO on a metric the case cannot produce",
        Format::Toml,
        "[defaults]\nbackend = \"openai-embeddings\"\n[optimize]\nsearch = \"max_concurrency\"\nslo = { p99_ttft = \"<= 1s\" }\n",
        &["`optimize.slo.p99_ttft`", "does not stream"],
    ),
    (
        "duplicate cases",
        Format::Toml,
        "[matrix]\nmax_concurrency = [1, 2, 1]\n",
        &["`matrix.max_concurrency[2]`", "duplicate case"],
    ),
    (
        "unknown dataset kind",
        Format::Toml,
        "[defaults]\ndataset = { name = \"randm\" }\n",
        &[
            "bad.toml:2:13: `defaults.dataset.name`",
            "unknown name `randm`",
            "did you mean `random`?",
        ],
    ),
    (
        "service that is neither endpoint nor simulator",
        Format::Toml,
        "[services.prod]\nmodel = \"m\"\n",
        &[
            "bad.toml:1:",
            "`services.prod`",
            "neither `base_url` nor `sim`",
        ],
    ),
    (
        "duration without a unit",
        Format::Toml,
        "[defaults]\ngoodput = { ttft = 500 }\n",
        &["`defaults.goodput.ttft`", "has no unit"],
    ),
    (
        "negative duration",
        Format::Toml,
        "[defaults]\ngoodput = { e2el = \"-5ms\" }\n",
        &["`defaults.goodput.e2el`", "non-negative"],
    ),
    (
        "unknown simulator parameter",
        Format::Toml,
        "[services.s]\nsim = { preset = \"tiny\", itll = \"5ms\" }\n",
        &[
            "bad.toml:2:26: `services.s.sim.itll`",
            "did you mean `itl`?",
        ],
    ),
    (
        "field of another dataset kind",
        Format::Toml,
        "[defaults]\ndataset = { name = \"sharegpt\", path = \"data/sharegpt_sample.json\", input_len = 5 }\n",
        &["`defaults.dataset.input_len`: unknown key `input_len`"],
    ),
    (
        "an API key where its variable name belongs",
        Format::Toml,
        "[services.p]\nbase_url = \"http://127.0.0.1:1\"\napi_key_env = \"sk-abc123\"\n",
        &[
            "bad.toml:3:1: `services.p.api_key_env`",
            "is not an environment variable name",
        ],
    ),
    (
        "typo in a YAML plan, with its line",
        Format::Yaml,
        "name: y\ndefaults:\n  num_prompts: 10\nmatrix:\n  max_concurrency: [1, 2]\n  exclude:\n    - max_concurency: 1\n",
        &[
            "bad.yaml:7:7: `matrix.exclude[0].max_concurency`",
            "did you mean `max_concurrency`?",
        ],
    ),
    (
        "base URL without a scheme",
        Format::Yaml,
        "services:\n  p:\n    base_url: 127.0.0.1:8000\n",
        &[
            "bad.yaml:3:5: `services.p.base_url`",
            "not an http:// or https:// URL",
        ],
    ),
    (
        "seed-style SLO with a bad key",
        Format::Toml,
        "slo = [\"p99_ttft:500\", \"p75_latency:3\"]\n",
        &[
            "bad.toml:1:24: `slo[1]`",
            "unknown latency metric `latency`",
        ],
    ),
    (
        "multi-turn on the completions API",
        Format::Toml,
        "[defaults]\nbackend = \"openai\"\ndataset = { name = \"multi_turn\" }\n",
        &[
            "bad.toml:3:1: `defaults.dataset`",
            "sends a conversation history, but the backend is `openai`",
            "set backend = \"openai-chat\"",
        ],
    ),
    (
        "multi-turn prefix ratios that leave no unique part",
        Format::Toml,
        "[defaults]\nbackend = \"openai-chat\"\ndataset = { name = \"multi_turn\", prefix_global_ratio = 0.6, prefix_conversation_ratio = 0.5 }\n",
        &["`defaults.dataset.prefix_global_ratio`", "must be below 1"],
    ),
    (
        "multi-turn turn bounds upside down",
        Format::Toml,
        "[defaults]\nbackend = \"openai-chat\"\ndataset = { name = \"multi_turn\", min_turns = 6, max_turns = 3 }\n",
        &[
            "`defaults.dataset.min_turns`",
            "min_turns (6) is above max_turns (3)",
            "set num_turns",
        ],
    ),
    (
        "multi-turn recorded history without a file",
        Format::Toml,
        "[defaults]\nbackend = \"openai-chat\"\ndataset = { name = \"multi_turn\", history = \"recorded\" }\n",
        &["`defaults.dataset.history`", "needs a file"],
    ),
    (
        "a base_url ending in /v1, as the OpenAI SDK writes it",
        Format::Toml,
        "[services.vllm]\nbase_url = \"http://127.0.0.1:8000/v1\"\ntokenizer = \"server\"\n",
        &[
            "bad.toml:2:1: `services.vllm.base_url`: `http://127.0.0.1:8000/v1` ends in /v1",
            "base_url = \"http://127.0.0.1:8000\"",
        ],
    ),
    (
        "a whole endpoint pasted as base_url",
        Format::Toml,
        "[services.vllm]\nbase_url = \"http://127.0.0.1:8000/v1/chat/completions\"\ntokenizer = \"server\"\n",
        &[
            "ends in /v1/chat/completions",
            "base_url = \"http://127.0.0.1:8000\"",
        ],
    ),
];

#[test]
fn each_bad_plan_gives_its_message() {
    assert!(BAD.len() >= 25);
    let dir = repo().join("plans");
    let mut failures = Vec::new();
    for (what, format, text, expected) in BAD {
        match plan_text(text, *format, &dir) {
            Ok(_) => failures.push(format!("{what}: accepted, but should be rejected")),
            Err(diags) => {
                let shown = diags.to_string();
                for e in *expected {
                    if !shown.contains(e) {
                        failures.push(format!("{what}: missing `{e}` in:\n{shown}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let text = "[defaults]\nmax_concurency = 4\nnum_prompts = \"many\"\nburstiness = 0.0\n[slo]\np99_tft = \"<= 1s\"\n";
    let diags = plan_text(text, Format::Toml, &repo()).unwrap_err();
    let shown = diags.to_string();
    for e in [
        "defaults.max_concurency",
        "defaults.num_prompts",
        "defaults.burstiness",
        "slo.p99_tft",
    ] {
        assert!(shown.contains(e), "missing {e} in:\n{shown}");
    }
    assert_eq!(
        diags.0.iter().filter(|d| d.is_error()).count(),
        4,
        "{shown}"
    );
}

#[test]
fn few_prompts_with_a_p99_slo_is_a_warning_only() {
    let p =
        crate::support::plan_toml("[defaults]\nnum_prompts = 20\n[slo]\np99_ttft = \"<= 1s\"\n");
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(
        p.warnings[0]
            .to_string()
            .contains("20 prompts are few for a p99 SLO")
    );
}

#[test]
fn one_seed_across_cases_on_a_caching_server_is_a_warning() {
    let p = crate::support::plan_toml(
        "[services.prod]\nbase_url = \"http://127.0.0.1:8000\"\ntokenizer = \"server\"\n[matrix]\nmax_concurrency = [1, 2]\n",
    );
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(
        p.warnings[0]
            .to_string()
            .contains("use seed 0 against service `prod`"),
        "{}",
        p.warnings[0]
    );
    let p = crate::support::plan_toml(
        "[services.prod]\nbase_url = \"http://127.0.0.1:8000\"\n[matrix]\nmax_concurrency = [1, 2]\nseed = [1, 2]\nzip = [[\"max_concurrency\", \"seed\"]]\n",
    );
    // (Its only warning is about the tokenizer, which the plan leaves to /v1/models.)
    assert!(
        p.warnings.iter().all(|w| !w.message.contains("seed")),
        "{:?}",
        p.warnings
    );
}

/// A latency in another spelling gets the unit it meant, not the list of SLO keys; a
/// latency in an accepted but different form is echoed as it was read.
#[test]
fn an_slo_unit_misspelled_gets_the_unit_it_meant_and_an_accepted_one_is_echoed() {
    let dir = crate::support::tempdir("slo-units");
    let plan = dir.join("p.toml");
    std::fs::write(&plan, "[slo]\np99_ttft = \"<= 800 msec\"\n").unwrap();
    let out = crate::support::benchplan(&["validate", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = crate::support::stderr(&out);
    assert!(
        err.contains("unknown duration unit `msec` in `800 msec`; did you mean `800ms`?"),
        "{err}"
    );
    assert!(!err.contains("SLO keys are"), "{err}");
    std::fs::write(&plan, "[slo]\np99_ttft = \"<= 800 ms\"\nmean_tpot = 50\n").unwrap();
    let out = crate::support::benchplan(&["validate", plan.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::stderr(&out)
    );
    let said = crate::support::stdout(&out);
    assert!(
        said.contains("slo.p99_ttft: \"<= 800 ms\" read as <= 800ms")
            && said.contains("slo.mean_tpot: \"50\" read as <= 50ms"),
        "{said}"
    );
    // A key it does not know still gets the list.
    std::fs::write(&plan, "[slo]\np99_tfft = \"<= 800ms\"\n").unwrap();
    let out = crate::support::benchplan(&["validate", plan.to_str().unwrap()]);
    assert!(crate::support::stderr(&out).contains("SLO keys are"));
    std::fs::remove_dir_all(&dir).ok();
}

/// `stop_on` reads as the issue and the docs spell it: one finding as a string, or a
/// list; a finding it does not know is named with the ones it does.
#[test]
fn stop_on_takes_one_finding_or_a_list() {
    use benchplan::plan::settings::StopOn;
    for text in [
        "[execution]\nstop_on = \"oversaturation\"\n",
        "[execution]\nstop_on = [\"oversaturation\"]\n",
    ] {
        let p = crate::support::plan_toml(text);
        assert_eq!(
            p.plan.execution.stop_on,
            vec![StopOn::Oversaturation],
            "{text}"
        );
    }
    let d = crate::support::plan_text(
        "[execution]\nstop_on = \"saturation\"\n",
        benchplan::plan::Format::Toml,
        &crate::support::repo(),
    )
    .expect_err("an unknown finding");
    let said = d.to_string();
    assert!(
        said.contains("execution.stop_on") && said.contains("oversaturation"),
        "{said}"
    );
}
