//! `benchplan init`: a commented starter plan that validates as written. Against the
//! embedded simulator by default; with `--base-url` it names the first model the
//! server lists at /v1/models (or the `--model` given, without asking), and the
//! tokenizer a run can use (the model itself when it is one here, else the server's own
//! tokenize endpoint when it has one). The service's own keys (backend, tokenizer) sit
//! on the service, not in `[defaults]`.

use std::io::Write;
use std::path::PathBuf;

use reqwest::header::HeaderMap;

use crate::exit::Exit;

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Where to write the plan (- for stdout).
    #[arg(default_value = "benchplan.toml")]
    pub output: PathBuf,
    /// An OpenAI-compatible server to benchmark instead of the simulator; its /v1/models names the model.
    #[arg(long)]
    pub base_url: Option<String>,
    /// The model to send (skips asking /v1/models).
    #[arg(long)]
    pub model: Option<String>,
    /// Replace the file if it exists.
    #[arg(long)]
    pub force: bool,
}

/// The plan's text, for the file `file`: one service, a concurrency sweep, SLOs, every
/// line explained.
pub fn starter_plan(service: &Service, file: &str) -> String {
    let target = match service {
        Service::Sim => "\
# The embedded simulator: no GPU, no network. Swap it for a real server with
#   base_url = \"http://127.0.0.1:8000\"   (and model = \"...\" if it serves several)
[services.sim]
sim = { preset = \"tiny\" }
backend = \"openai-chat\"            # or openai (completions), openai-embeddings, vllm-rerank
"
        .to_string(),
        Service::Server {
            base_url,
            model,
            tokenizer,
        } => {
            let tokenizer = match tokenizer {
                Some(t) => format!(
                    "tokenizer = {}                # counts the prompt tokens: a tokenizer.json, a model folder, a Hugging Face id, or \"server\"\n",
                    toml_str(t)
                ),
                None => "# tokenizer = \"...\"             # the model is its own tokenizer here\n"
                    .into(),
            };
            format!(
                "\
# The server under test. An API key comes from the environment, never the plan:
#   api_key_env = \"OPENAI_API_KEY\"
[services.server]
base_url = {}
model = {}
backend = \"openai-chat\"            # or openai (completions), openai-embeddings, vllm-rerank
{tokenizer}",
                toml_str(base_url),
                toml_str(model)
            )
        }
    };
    format!(
        "\
# A benchplan plan, written by `benchplan init`. Check it with
#   benchplan validate {file}      (every problem, with line and fix)
#   benchplan cases {file}         (the cases it expands to)
# and run it with `benchplan run {file}`. `benchplan schema` prints every key.
name = \"starter\"
description = \"A concurrency sweep with SLOs\"

{target}
# What every case sends unless the matrix says otherwise (vllm bench serve's names).
[defaults]
dataset = {{ name = \"random\", input_len = 256, output_len = 64 }}
num_prompts = 100                   # measured requests per case
num_warmups = 2                     # unmeasured requests first
metric_percentiles = [50, 90, 99]

# One case per combination of these lists; `zip` pairs lists instead. Each case its own
# seed, so no case sends prompts a server may still cache from the one before.
[matrix]
max_concurrency = [1, 4, 16]
seed = [1, 2, 3]
zip = [[\"max_concurrency\", \"seed\"]]

# Every case must meet these, or `run` exits 3 (CI can act on it).
[slo]
p99_ttft = \"<= 500ms\"
mean_tpot = \"<= 50ms\"
success_rate = \">= 99%\"
"
    )
}

/// What the plan benchmarks.
pub enum Service {
    Sim,
    Server {
        base_url: String,
        model: String,
        /// None: the model names a tokenizer this machine has.
        tokenizer: Option<String>,
    },
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

pub fn run(args: &InitArgs) -> Exit {
    let service = match &args.base_url {
        None => Service::Sim,
        Some(url) => {
            let base_url = match crate::base_url::BaseUrl::parse(url) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("error: `--base-url`: {e}");
                    return Exit::BadPlan;
                }
            };
            let model = match &args.model {
                Some(m) => m.clone(),
                None => match ask_model(&base_url) {
                    Ok(m) => m,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return Exit::Runtime;
                    }
                },
            };
            let tokenizer = match tokenizer_for(&base_url, &model) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Exit::Runtime;
                }
            };
            Service::Server {
                base_url: base_url.as_str().to_string(),
                model,
                tokenizer,
            }
        }
    };
    let file = if args.output.as_os_str() == "-" {
        "PLAN.toml".to_string()
    } else {
        // A comment line ends at a line break: a path with one is not quoted whole.
        args.output.display().to_string().replace(['\n', '\r'], " ")
    };
    let text = starter_plan(&service, &file);
    if args.output.as_os_str() == "-" {
        print!("{text}");
        return Exit::Ok;
    }
    if args.output.exists() && !args.force {
        eprintln!(
            "error: {} exists; pass --force to replace it, or name another file",
            args.output.display()
        );
        return Exit::BadPlan;
    }
    let written =
        std::fs::File::create(&args.output).and_then(|mut f| f.write_all(text.as_bytes()));
    match written {
        Ok(()) => {
            eprintln!(
                "wrote {0}; check it with `benchplan validate {0}`, run it with `benchplan run {0}`",
                args.output.display()
            );
            Exit::Ok
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", args.output.display());
            Exit::Runtime
        }
    }
}

/// The tokenizer a run of `model` on `base_url` can use: none needed when the model is
/// a tokenizer here or a Hugging Face id, "server" when the server tokenizes; else an error that says what to
/// pass (a plan that would not validate is not written).
fn tokenizer_for(
    base_url: &crate::base_url::BaseUrl,
    model: &str,
) -> Result<Option<String>, String> {
    if crate::tokenizer::find_local(model).is_some() {
        return Ok(None);
    }
    if crate::planner::tokenizer::is_hub_id(model) {
        // A hub id: a run downloads its tokenizer once (exact, and local after that).
        return Ok(None);
    }
    let server = base_url
        .plain_http_addr()
        .and_then(|addr| crate::service::target::server_tokenizer(addr, None));
    if server.is_some() {
        return Ok(Some("server".into()));
    }
    Err(format!(
        "model `{model}` is no tokenizer this machine has and {base_url} has no tokenize endpoint benchplan knows; pass the tokenizer the plan should name: the model's Hugging Face id or a tokenizer.json (`benchplan init --base-url {base_url} --model ID`, then set `tokenizer` on the service)"
    ))
}

/// The first model `base_url` lists.
fn ask_model(base_url: &crate::base_url::BaseUrl) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let client = crate::client::http::build_client(false, None).map_err(|e| e.to_string())?;
        let mut headers = HeaderMap::new();
        if let Ok(key) = std::env::var("OPENAI_API_KEY") {
            let mut v = format!("Bearer {key}")
                .parse::<reqwest::header::HeaderValue>()
                .map_err(|_| "OPENAI_API_KEY is not a valid header value".to_string())?;
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
        crate::service::target::discover_model(&client, base_url, &headers)
            .await
            .map(|(id, _root)| id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_values_are_quoted_as_toml() {
        let text = starter_plan(
            &Service::Server {
                base_url: "http://h:1".into(),
                model: "org/m \"q\"".into(),
                tokenizer: Some("server".into()),
            },
            "my plan.toml",
        );
        assert!(!text.contains("{this file}") && text.contains("benchplan validate my plan.toml"));
        let v: toml::Value = toml::from_str(&text).expect("valid TOML");
        assert_eq!(
            v["services"]["server"]["model"].as_str(),
            Some("org/m \"q\"")
        );
    }
}
