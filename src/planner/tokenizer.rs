//! Whether an external service's tokenizer can be found, checked before any traffic.
//!
//! Prompts are built from token ids and output is counted in tokens, so a run against
//! a server needs that server's tokenizer. Finding out only when the first case starts
//! wastes a nightly job; this says it at `validate` and `--dry-run` time, with the
//! options. It mirrors `service::target::resolve_tokenizer` without the network: a Hugging
//! Face id missing from the local cache is a warning (the run downloads it once), a
//! name that is neither a path nor a hub id is an error.

use crate::diag::Diagnostic;
use crate::plan::Service;
use crate::plan::source::join_key;
use crate::tokenizer::{find_local, hf_offline};

/// The ways to name a tokenizer, for every help line here.
pub const TOKENIZER_OPTIONS: &str = "set the service's `tokenizer` to a tokenizer.json or a model folder (relative to the working directory), a Hugging Face id such as \"Qwen/Qwen2.5-7B-Instruct\" (read from $HF_HOME/hub, downloaded there once when missing), or \"server\" to use the target's /tokenize (`benchplan probe URL` says whether it has one)";

/// Checks the tokenizer of the external service at `path` (simulators have their own).
pub fn check_tokenizer(path: &str, svc: &Service, out: &mut Vec<Diagnostic>) {
    if svc.is_sim() {
        return;
    }
    match (svc.tokenizer.as_deref(), svc.model.as_deref()) {
        (Some("server"), _) => {
            if svc
                .base_url
                .as_deref()
                .and_then(|u| crate::base_url::BaseUrl::parse(u).ok())
                .is_some_and(|u| u.is_https())
            {
                out.push(
                    Diagnostic::error(
                        join_key(path, "tokenizer"),
                        "tokenizer = \"server\" needs a plain http:// base_url",
                    )
                    .with_help(TOKENIZER_OPTIONS),
                );
            }
        }
        (Some(id), _) => check_name(&join_key(path, "tokenizer"), id, "tokenizer", out),
        (None, Some(model)) => check_name(&join_key(path, "model"), model, "model", out),
        (None, None) => out.push(
            Diagnostic::warning(
                path,
                "neither `tokenizer` nor `model` is set: the tokenizer will be the model root that the server's /v1/models reports, and the run fails unless that is a local folder or a Hugging Face id",
            )
            .with_help(TOKENIZER_OPTIONS),
        ),
    }
}

/// A tokenizer (or model) name: a local file or folder, a cached hub id, a hub id
/// the run will download, or nothing that can be found.
fn check_name(key: &str, name: &str, what: &str, out: &mut Vec<Diagnostic>) {
    if find_local(name).is_some() {
        return;
    }
    let hub_like = is_hub_id(name);
    let lead = if what == "model" {
        format!("no `tokenizer` is set and model `{name}`")
    } else {
        format!("tokenizer `{name}`")
    };
    if hub_like && !hf_offline() {
        out.push(
            Diagnostic::warning(
                key,
                format!("{lead} is not in the local Hugging Face cache: the run downloads it from $HF_ENDPOINT (default huggingface.co) and fails without network"),
            )
            .with_help(format!("download it beforehand (`huggingface-cli download {name} tokenizer.json tokenizer_config.json`) for offline jobs, or {TOKENIZER_OPTIONS}")),
        );
        return;
    }
    let why = if hub_like {
        "is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
    } else {
        "is neither a tokenizer.json, a folder holding one, nor a Hugging Face id"
    };
    out.push(Diagnostic::error(key, format!("{lead} {why}")).with_help(TOKENIZER_OPTIONS));
}

/// Whether a name that is not a local path reads as a Hugging Face id (`org/name`).
pub fn is_hub_id(name: &str) -> bool {
    name.matches('/').count() == 1
        && !name.starts_with(['.', '/'])
        && !name.ends_with(".json")
        && !std::path::Path::new(name).exists()
}
