//! The `vllm bench serve` flags `benchplan bench` does not carry out, each with what
//! to use instead. They are parsed (so a vLLM command line never fails on an
//! "unexpected argument" with no advice) and then refused before anything is sent:
//! a benchmark that silently drops a flag measures something else than its command
//! line says. `tests/it/flag_parity.rs` holds this table and [`super::BenchArgs`]
//! together against vLLM 0.33's flag list.

use clap::{Arg, ArgAction, ArgMatches, Command};

pub const NO_HF: &str = "benchplan reads no Hugging Face datasets; download the rows and use --dataset-name custom --dataset-path FILE.jsonl (one {\"prompt\", \"output_tokens\"} per line)";

/// Flag (without `--`) and the message that refuses it.
pub const REFUSED: &[(&str, &str)] = &[
    (
        "use-beam-search",
        "vLLM 0.33 defines it but sends nothing with it; benchplan refuses it rather than run a sampled benchmark under a beam-search command line. To ask a server for beam search, send it in the body: --extra-body '{\"use_beam_search\": true, \"n\": 4}'",
    ),
    (
        "probe-request-rate",
        "benchplan sends no side probe requests; to see how load stalls a lone request, run the same case at --max-concurrency 1 and compare (a plan's matrix does both in one run)",
    ),
    (
        "profile",
        "benchplan does not drive the server's profiler; POST /start_profile and /stop_profile around the run yourself (the server needs --profiler-config)",
    ),
    (
        "chat-template-kwargs",
        "benchplan renders no chat template client-side for these datasets; have the server apply them: --extra-body '{\"chat_template_kwargs\": {...}}'",
    ),
    (
        "skip-tokenizer-init",
        "benchplan always counts tokens: with no --tokenizer it uses its built-in counter and still reports TTFT, TPOT and ITL; drop the flag (or pass --tokenizer DIR for exact counts)",
    ),
    (
        "plot-timeline",
        "benchplan draws charts into report.html (TTFT/ITL CDFs, throughput vs latency); run the case as a plan (`benchplan run`) or render a folder of results with `benchplan report DIR`",
    ),
    (
        "timeline-itl-thresholds",
        "there is no timeline plot (see --plot-timeline); report.html's ITL CDF shows every threshold",
    ),
    (
        "plot-dataset-stats",
        "benchplan prints the dataset's input and output lengths with --dry-run and draws no PNG",
    ),
    ("no-stream", NO_HF),
    (
        "enable-multimodal-chat",
        "random-mm already sends multimodal chat parts; for images from a file use a plan's custom dataset with multimodal = true",
    ),
    (
        "custom-ensure-client-side-data",
        "the custom_image dataset is not built in; use a plan's custom dataset with multimodal = true (images read locally and sent as data URLs)",
    ),
    (
        "spec-bench-output-len",
        "the spec_bench dataset is not built in; export its prompts to JSONL and use --dataset-name custom --dataset-path FILE --custom-output-len N",
    ),
    (
        "spec-bench-category",
        "the spec_bench dataset is not built in; filter its rows into a JSONL file and use --dataset-name custom",
    ),
    (
        "speed-bench-dataset-subset",
        "the speed_bench dataset is not built in; export the subset to JSONL and use --dataset-name custom",
    ),
    (
        "speed-bench-output-len",
        "the speed_bench dataset is not built in; use --dataset-name custom with --custom-output-len N",
    ),
    (
        "speed-bench-category",
        "the speed_bench dataset is not built in; filter its rows into a JSONL file and use --dataset-name custom",
    ),
    (
        "sonnet-input-len",
        "the sonnet dataset (deprecated in vLLM) is not built in; use --dataset-name random --random-input-len N, or prefix_repetition for a shared prefix",
    ),
    (
        "sonnet-output-len",
        "the sonnet dataset (deprecated in vLLM) is not built in; use --dataset-name random --random-output-len N",
    ),
    (
        "sonnet-prefix-len",
        "the sonnet dataset (deprecated in vLLM) is not built in; use --random-prefix-len N or --dataset-name prefix_repetition",
    ),
    ("blazedit-min-distance", NO_HF),
    ("blazedit-max-distance", NO_HF),
    (
        "bfcl-categories",
        "the BFCL dataset is not built in; put its chat messages and tools in a JSONL file and use --dataset-name custom with --extra-body '{\"tools\": [...]}'",
    ),
    ("hf-subset", NO_HF),
    ("hf-split", NO_HF),
    ("hf-name", NO_HF),
    (
        "hf-output-len",
        "benchplan reads no Hugging Face datasets; use --dataset-name custom --dataset-path FILE --custom-output-len N",
    ),
    (
        "no-reranker",
        "benchplan's random-rerank sends query and documents as text and counts no separator tokens, which is what a model with native reranking needs; for a model without it, benchmark it as openai-embeddings",
    ),
];

/// `bench` with every refused flag added as a hidden argument, so clap accepts them
/// (with any values) and [`check`] can refuse them with their message. Their ids
/// are the flag names, which never meet the derive's snake_case ids.
pub fn with_refused_flags(bench: Command) -> Command {
    REFUSED.iter().fold(bench, |cmd, (flag, _)| {
        cmd.arg(
            Arg::new(*flag)
                .long(*flag)
                .hide(true)
                .num_args(0..)
                .action(ArgAction::Append),
        )
    })
}

/// The refusal for the first refused flag on the command line, if any.
pub fn check(bench: &ArgMatches) -> Result<(), String> {
    for (flag, why) in REFUSED {
        if bench.value_source(flag) == Some(clap::parser::ValueSource::CommandLine) {
            return Err(format!("--{flag} is not supported: {why}"));
        }
    }
    Ok(())
}
