//! What is done to a service before its cases, and what is said when it cannot be:
//!
//! - **the wording check**: one small request worded exactly as the case's requests
//!   (vLLM's, unless the plan sets a `request_shape`). When the server refuses it in a
//!   way another wording may fix (a 4xx other than auth, rate or not-found; an empty
//!   200 stream), the wordings the plan left open are tried, fewest changes first, and
//!   the first that works is kept, said on the console and recorded in each result
//!   (`benchplan.request_shape`, the `request_shape` deviation). A field the plan sets
//!   is never changed. When no wording works, the error names the likely cause and the
//!   option to try.
//! - **the prefix-cache reset** before each case (`POST /reset_prefix_cache`, as vLLM's
//!   sweep does); a refusal is recorded and warned about, with the fix.

use std::time::Duration;

use serde_json::{Value, json};

use super::target::{Found, Resolved};
use crate::client::backend::{RequestInput, build_body};
use crate::client::outcome::Limits;
use crate::client::request::{Target, send};
use crate::metrics::sample::{RequestError, Sample};
use crate::plan::shape::{ChatContent, MaxTokensKey, RequestIdForm, RequestShape};
use crate::plan::{CaseParams, Service};

/// The wording check's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Fit {
    /// The case's own wording works.
    Ok,
    /// It was refused and another works.
    Found(Found),
    /// Refused in every wording tried; the message names the cause and the options.
    Refused(String),
    /// Another failure (not reachable, a 5xx, a timeout): worth retrying as the server
    /// comes up, not another wording.
    Failed(String),
}

/// The smoke request's wording of a request id (as a measured request's, `{prefix}{n}`).
pub const SMOKE_ID: &str = "benchplan-smoke-0";

/// Whether another wording may fix a failure of this kind.
pub fn wording_may_fix(e: &RequestError) -> bool {
    match e
        .kind
        .strip_prefix("http_")
        .and_then(|s| s.parse::<u16>().ok())
    {
        Some(s) => (400..500).contains(&s) && !matches!(s, 401 | 403 | 404 | 405 | 408 | 429),
        None => matches!(
            e.kind.as_str(),
            "no_tokens" | "invalid_response" | "over_length"
        ),
    }
}

fn describe(e: &RequestError) -> String {
    crate::escape::console(&format!("{}: {}", e.kind, e.message))
}

/// One request of `input` worded by `params` (and the target's request ids).
async fn try_once(target: &Target, params: &CaseParams, input: &RequestInput) -> Sample {
    let t = target.clone().worded(&params.request_shape);
    send(
        &t,
        build_body(t.backend, &t.model, input, params),
        Some(&format!(
            "{}0",
            params
                .request_id_prefix
                .as_deref()
                .unwrap_or("benchplan-smoke-")
        )),
    )
    .await
    .sample
}

/// The wordings to try after the case's own was refused: every combination of the
/// alternatives of the fields `params` leaves unset, fewest changes first.
pub fn alternatives(params: &CaseParams) -> Vec<RequestShape> {
    let set = &params.request_shape;
    let backend = params.backend();
    let chat = backend.spec().chat_messages;
    let streamed = backend.spec().stream_options;
    let ids: Vec<Option<RequestIdForm>> = if set.request_id.is_some() {
        vec![None]
    } else {
        vec![None, Some(RequestIdForm::Uuid), Some(RequestIdForm::None)]
    };
    let contents: Vec<Option<ChatContent>> = if chat && set.chat_content.is_none() {
        vec![None, Some(ChatContent::String)]
    } else {
        vec![None]
    };
    let streams: Vec<Option<bool>> = if streamed && set.stream_options.is_none() {
        vec![None, Some(false)]
    } else {
        vec![None]
    };
    let keys: Vec<Option<MaxTokensKey>> = if chat && set.max_tokens_key.is_none() {
        vec![None, Some(MaxTokensKey::MaxTokens)]
    } else {
        vec![None]
    };
    let mut out = Vec::new();
    // The request id varies fastest: among wordings with as many changes, the id's come
    // first, then the content's, stream_options', the output key's.
    for k in &keys {
        for s in &streams {
            for c in &contents {
                for id in &ids {
                    let shape = RequestShape {
                        request_id: *id,
                        chat_content: *c,
                        stream_options: *s,
                        max_tokens_key: *k,
                        request_id_header: None,
                    };
                    if !shape.is_unset() {
                        out.push(shape);
                    }
                }
            }
        }
    }
    // Fewest changes first (a stable sort keeps the order above among equals).
    out.sort_by_key(|s| s.describe().len());
    out
}

/// Whether an answer shows its wording was taken: a success, with no more token events
/// than `asked` (0: not checked; a chat server that ignores `max_completion_tokens` answers at length;
/// one event of slack for a server that streams a last empty-text token).
fn taken(s: &Sample, asked: u64) -> Result<(), RequestError> {
    let events = s.itl.len() as u64 + 1;
    if !s.success {
        Err(s.error.clone().unwrap_or_else(|| RequestError {
            kind: "no_answer".into(),
            message: "no answer".into(),
        }))
    } else if asked > 0 && events > asked + 1 {
        Err(RequestError {
            kind: "over_length".into(),
            message: format!(
                "{events} token events for the {asked} tokens asked: the server ignored the output-length key"
            ),
        })
    } else {
        Ok(())
    }
}

/// Times an empty stream is tried again in the same wording before another is tried:
/// a sampling model may end an answer at once by chance (its first token an EOS), and
/// a wording must not be blamed for that.
const EMPTY_RETRIES: usize = 2;

/// Sends `input` worded as `params` says; when refused in a way another wording may
/// fix, tries the [`alternatives`] (see the module docs).
pub async fn fit(target: &Target, params: &CaseParams, input: &RequestInput) -> Fit {
    // The output length is checked where another key may fix it: chat, key unset.
    let chat = params.backend().spec().chat_messages;
    let asked = match chat && params.request_shape.max_tokens_key.is_none() {
        true => input.output_len,
        false => 0,
    };
    let mut first = match taken(&try_once(target, params, input).await, asked) {
        Ok(()) => return Fit::Ok,
        Err(e) => e,
    };
    for _ in 0..EMPTY_RETRIES {
        if first.kind != "no_tokens" {
            break;
        }
        match taken(&try_once(target, params, input).await, asked) {
            Ok(()) => return Fit::Ok,
            Err(e) => first = e,
        }
    }
    let refused = describe(&first);
    if !wording_may_fix(&first) {
        return Fit::Failed(refused);
    }
    let tried = alternatives(params);
    for shape in &tried {
        let mut p = params.clone();
        p.request_shape = params.request_shape.or(shape);
        if taken(&try_once(target, &p, input).await, asked).is_ok() {
            return Fit::Found(Found {
                shape: shape.clone(),
                refused,
            });
        }
    }
    Fit::Refused(unfixable(params, &first, tried.len()))
}

/// What to say when no wording works: the likely cause and the option to try.
fn unfixable(params: &CaseParams, first: &RequestError, tried: usize) -> String {
    let refused = describe(first);
    let kind = first.kind.as_str();
    let empty_message = first.message.trim_end().ends_with(':');
    let chat = params.backend().spec().chat_messages;
    let cause = if kind == "over_length" {
        "the server answers at length whatever the output length asked: it ignores both max_completion_tokens and max_tokens, so output lengths are the server's, not the case's; set max_tokens_key to the one it reads, or send its own key with extra_body"
    } else if kind == "no_tokens" {
        if chat {
            "the server answered 200 but streamed no token: its chat template likely failed on this request (a model without a chat template, or one that takes only some roles); try backend = \"openai\" (completions), or a model with a chat template"
        } else {
            "the server answered 200 but streamed no token: it may not stream this API, or it ended the answer at once; check its log, or try backend = \"openai-chat\""
        }
    } else if empty_message {
        "the server refused the request without saying why (an empty error body): a header or a field it does not take; check its log, drop a field with extra_body = { field = null }, or set request_shape (request_id, request_id_header, chat_content, stream_options, max_tokens_key)"
    } else {
        "the server refused the request: read its message; drop a field with extra_body = { field = null }, or set request_shape (request_id, request_id_header, chat_content, stream_options, max_tokens_key)"
    };
    let what = if tried > 0 {
        format!("it refused vLLM's request ({refused}) and {tried} other wordings")
    } else {
        format!("it refused the request ({refused}) and the plan sets every wording")
    };
    format!("{what}: {cause}")
}

/// The case's parameters with the wording found for its service filling what the plan
/// left unset.
pub fn shaped(params: &CaseParams, found: Option<&Found>) -> CaseParams {
    let mut p = params.clone();
    if let Some(f) = found {
        p.request_shape = params.request_shape.or(&f.shape);
    }
    p
}

/// The wording check of a resolved service with a case's parameters: a small "Say
/// hello." request, a minute at most.
pub async fn fit_service(r: &Resolved, svc: &Service, params: &CaseParams) -> Fit {
    let mut target = (*super::target::target(r, svc, params)).clone();
    target.limits = Limits {
        total: Duration::from_secs(60),
        idle: Duration::from_secs(60),
        ..Limits::default()
    };
    let input = RequestInput::hello(target.backend, 4);
    fit(&target, params, &input).await
}

/// For an external service whose plan names the model: the server must list it.
pub async fn check_model(r: &Resolved, svc: &Service) -> Result<(), String> {
    let (Some(model), None) = (&svc.model, &svc.sim) else {
        return Ok(());
    };
    let url = r.base_url.join("/v1/models");
    let resp = r
        .client
        .get(&url)
        .headers(r.headers.clone())
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {}", crate::client::http::describe(&e)))?;
    if !resp.status().is_success() {
        // Some servers have no /v1/models; the smoke request of each case still checks the model.
        return Ok(());
    }
    let v: Value =
        serde_json::from_slice(&resp.bytes().await.map_err(|e| e.to_string())?).unwrap_or_default();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str())
        .collect();
    if ids.is_empty() || ids.contains(&model.as_str()) {
        Ok(())
    } else {
        Err(format!(
            "the plan says model `{model}`, but {url} serves {}; fix `model` in the plan or point base_url at the right server",
            crate::escape::console(&ids.join(", "))
        ))
    }
}

/// The prefix-cache reset before a case.
#[derive(Debug, Clone, PartialEq)]
pub enum Reset {
    Done,
    /// Not done: the status or error, and the fix.
    Refused(String),
}

/// `POST /reset_prefix_cache`, as vLLM's sweep does before each run.
async fn reset_prefix_cache(r: &Resolved) -> Reset {
    let url = r.base_url.join("/reset_prefix_cache");
    let fix = "the case may measure prompts an earlier case left in the cache; for vLLM start the server with VLLM_SERVER_DEV_MODE=1 (it serves the endpoint only then), or give each case its own seed";
    match r
        .client
        .post(&url)
        .headers(r.headers.clone())
        .timeout(Duration::from_secs(10))
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => Reset::Done,
        Ok(r) => Reset::Refused(format!(
            "the prefix cache was not reset: POST /reset_prefix_cache answered HTTP {}; {fix}",
            r.status().as_u16()
        )),
        Err(e) => Reset::Refused(format!(
            "the prefix cache was not reset: POST /reset_prefix_cache failed ({}); {fix}",
            crate::client::http::describe(&e)
        )),
    }
}

/// What was prepared for one case: the result's `benchplan.preparation` and
/// `benchplan.request_shape`, its warnings, and the deviations' facts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prepared {
    /// None where no reset is tried (`bench`, the simulator).
    pub reset: Option<Reset>,
    pub found: Option<Found>,
}

impl Prepared {
    /// What `run` (and each optimize run) does before a case of `r`: the prefix-cache
    /// reset, and the wording the service was found to take.
    pub async fn before_case(r: &Resolved) -> Prepared {
        Prepared {
            reset: Some(reset_prefix_cache(r).await),
            found: r.found.clone(),
        }
    }

    pub fn prefix_cache_reset(&self) -> bool {
        self.reset == Some(Reset::Done)
    }

    /// The warnings the case's result carries.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(Reset::Refused(m)) = &self.reset {
            w.push(m.clone());
        }
        if let Some(f) = &self.found {
            w.push(format!(
                "the server refused vLLM's request ({}); requests were sent with request_shape {{ {} }}",
                f.refused,
                f.shape.describe().join(", ")
            ));
        }
        w
    }

    /// The result's keys (inserted into its `benchplan` block).
    pub fn insert_into(&self, m: &mut serde_json::Map<String, Value>) {
        if let Some(reset) = &self.reset {
            m.insert(
                "preparation".into(),
                match reset {
                    Reset::Done => json!({"prefix_cache_reset": "done"}),
                    Reset::Refused(why) => json!({"prefix_cache_reset": "refused", "message": why}),
                },
            );
        }
        if let Some(f) = &self.found {
            m.insert(
                "request_shape".into(),
                json!({"found": f.shape, "refused": f.refused}),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Backend;

    #[test]
    fn alternatives_keep_what_the_plan_sets_and_come_fewest_changes_first() {
        let chat = CaseParams {
            backend: Some(Backend::OpenaiChat),
            ..CaseParams::default()
        };
        let all = alternatives(&chat);
        // 3 ids x 2 contents x 2 stream_options x 2 keys, less vLLM's own wording.
        assert_eq!(all.len(), 23);
        assert_eq!(
            all[0],
            RequestShape {
                request_id: Some(RequestIdForm::Uuid),
                ..RequestShape::default()
            }
        );
        let sizes: Vec<usize> = all.iter().map(|s| s.describe().len()).collect();
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
        // Completions: only the id and stream_options vary.
        let comp = CaseParams::default();
        assert_eq!(alternatives(&comp).len(), 5);
        // A field the plan sets is never varied.
        let mut fixed = chat.clone();
        fixed.request_shape.request_id = Some(RequestIdForm::Prefixed);
        fixed.request_shape.chat_content = Some(ChatContent::Parts);
        assert!(
            alternatives(&fixed)
                .iter()
                .all(|s| s.request_id.is_none() && s.chat_content.is_none())
        );
        assert_eq!(alternatives(&fixed).len(), 3);
        // Pooling backends have nothing to vary but the id.
        let emb = CaseParams {
            backend: Some(Backend::OpenaiEmbeddings),
            ..CaseParams::default()
        };
        assert_eq!(alternatives(&emb).len(), 2);
    }

    #[test]
    fn only_refusals_a_wording_may_fix_start_the_search() {
        let e = |k: &str| RequestError {
            kind: k.into(),
            message: String::new(),
        };
        for k in [
            "http_400",
            "http_422",
            "no_tokens",
            "invalid_response",
            "over_length",
        ] {
            assert!(wording_may_fix(&e(k)), "{k}");
        }
        for k in [
            "http_401",
            "http_404",
            "http_429",
            "http_500",
            "connection",
            "timeout",
        ] {
            assert!(!wording_may_fix(&e(k)), "{k}");
        }
    }
}
