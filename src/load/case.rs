//! The library entry point for one case: build its dataset, send it to a resolved
//! service, and summarise what came back. `bench`, `run` and `optimize` all call
//! [`execute`].

use std::sync::Arc;

use super::conversation::{ThinkTime, run_conversations};
use super::options::{RunError, RunOptions};
use super::result::{CaseResult, RouteFacts};
use super::run::{CaseRun, run_case};
use crate::client::backend::{Prompt, RequestInput};
use crate::dataset::conversations;
use crate::service::target::{Resolved, target};

use crate::metrics::summary::{RpsChangeEvent, Summary, summarize};
use crate::metrics::turns::summarize_turns;
use crate::metrics::window::Window;
use crate::plan::dataset::MultiTurnDataset;
use crate::plan::{CaseParams, Dataset, Service};
use crate::tokenizer::TokenModel;

/// The summary of a run: the metrics over its records, and what the run itself knows
/// (connections opened before it, a ramp-up's rate changes).
/// Why a case was not measured: the run's own reason (the endpoint was not ready, the
/// smoke request failed, …), which callers branch on, or another failure in words.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("{0}")]
    Other(String),
}

impl From<String> for CaseError {
    fn from(s: String) -> CaseError {
        CaseError::Other(s)
    }
}

fn run_summary(run: &CaseRun, params: &CaseParams, tokens: Option<&TokenModel>) -> Summary {
    let mut s = summarize(&run.records, run.duration, params, tokens);
    s.connections.prewarmed = run.prewarmed as u64;
    s.rps_change_events = run
        .rps_change_events
        .iter()
        .map(|e| RpsChangeEvent {
            rps: e.rps,
            timestamp: crate::timefmt::iso_micros(e.at),
        })
        .collect();
    s.spec_decode = run.server_metrics.as_ref().and_then(|m| m.spec_decode());
    let wide = s.spec_decode.as_ref().map(|d| d.acceptance_rate);
    if let Some(f) = &mut s.speculative {
        f.compare(wide);
    }
    s
}

/// The run's measured window: its timeslices when asked, and its steady window.
fn run_window(
    run: &CaseRun,
    params: &CaseParams,
    tokens: Option<&TokenModel>,
    opts: &RunOptions,
) -> Window {
    Window::of(
        &run.records,
        run.duration,
        params,
        tokens,
        opts.timeslice,
        opts.steady_min_requests,
    )
}

/// Runs one case against one resolved service.
pub async fn execute(
    resolved: &Resolved,
    service: &Service,
    params: &CaseParams,
    opts: &RunOptions,
) -> Result<CaseResult, CaseError> {
    // Before any traffic: the requests in flight must fit the open-file limit. No more
    // can be in flight than there are requests, whatever cap the plan set.
    let in_flight = params
        .max_concurrency
        .map(|c| c.min(params.num_prompts))
        .or((!params.request_rate.is_finite()).then_some(params.num_prompts));
    if let Some(n) = in_flight {
        let each = if service.is_sim() { 2 } else { 1 };
        super::fdlimit::check(n, each, super::fdlimit::current())?;
    }
    // The service's own metrics, unless the caller chose a source.
    let with_metrics;
    let opts = if (opts.server_metrics.is_none() && resolved.metrics.is_some())
        || (opts.energy.is_none() && resolved.energy.is_some())
    {
        with_metrics = RunOptions {
            server_metrics: opts
                .server_metrics
                .clone()
                .or_else(|| resolved.metrics.clone()),
            energy: opts.energy.clone().or_else(|| resolved.energy.clone()),
            ..opts.clone()
        };
        &with_metrics
    } else {
        opts
    };
    if params.client == Some(crate::plan::params::ClientEngine::Vllm) {
        return super::vllm_engine::execute(resolved, service, params, opts)
            .await
            .map_err(CaseError::Other);
    }
    if let Dataset::MultiTurn(d) = &params.dataset {
        return execute_conversations(resolved, service, params, d, opts).await;
    }
    if let Dataset::Trace(d) = &params.dataset
        && d.format == crate::plan::trace::TraceFormat::Sessions
    {
        return execute_trace_sessions(resolved, service, params, d, opts).await;
    }
    let inputs = Arc::new(crate::dataset::build(
        params,
        &resolved.tokens,
        &opts.data_dir,
    )?);
    let params = Arc::new(params.clone());
    let t = target(resolved, service, &params);
    let run = run_case(t.clone(), params.clone(), inputs.clone(), opts).await?;
    let summary = run_summary(&run, &params, Some(&resolved.tokens));
    let window = run_window(&run, &params, Some(&resolved.tokens), opts);
    // A trace's reuse: what its blocks promise against what the server served.
    let trace = match &params.dataset {
        Dataset::Trace(d) => Some(super::trace::reuse(
            d,
            &opts.data_dir,
            params.num_prompts as usize,
            &run,
            crate::dataset::trace::digest(inputs.iter().filter_map(|i| match &i.prompt {
                Prompt::Text(t) => Some(t.as_str()),
                _ => None,
            })),
        )?),
        _ => None,
    };
    Ok(CaseResult {
        summary,
        window,
        multi_turn: None,
        run,
        inputs,
        engine: None,
        raw: None,
        route: RouteFacts::of(&t),
        cost: service.cost.clone(),
        trace,
    })
}

async fn execute_conversations(
    resolved: &Resolved,
    service: &Service,
    params: &CaseParams,
    d: &MultiTurnDataset,
    opts: &RunOptions,
) -> Result<CaseResult, CaseError> {
    let convs = conversations::build(
        d,
        params.num_prompts as usize,
        params.seed,
        &resolved.tokens,
        &opts.data_dir,
    )?;
    let talk = Talk {
        think: ThinkTime::of(d),
        session_header: &d.session_header,
        trace: None,
    };
    run_talks(resolved, service, params, convs, talk, opts).await
}

/// A session trace's sessions, replayed as conversations (see `dataset::trace::sessions`).
async fn execute_trace_sessions(
    resolved: &Resolved,
    service: &Service,
    params: &CaseParams,
    d: &crate::plan::trace::TraceDataset,
    opts: &RunOptions,
) -> Result<CaseResult, CaseError> {
    let convs = crate::dataset::trace::sessions(
        d,
        params.num_prompts as usize,
        params.seed,
        &resolved.tokens,
        &opts.data_dir,
    )?;
    let talk = Talk {
        // Every turn carries its trace's pause.
        think: ThinkTime {
            mean: std::time::Duration::ZERO,
            distribution: crate::plan::dataset::DelayDistribution::Constant,
        },
        session_header: "",
        trace: Some(d),
    };
    run_talks(resolved, service, params, convs, talk, opts).await
}

/// How conversations talk: their think time, their session header, and the trace they
/// replay (for its reuse).
struct Talk<'a> {
    think: ThinkTime,
    session_header: &'a str,
    trace: Option<&'a crate::plan::trace::TraceDataset>,
}

async fn run_talks(
    resolved: &Resolved,
    service: &Service,
    params: &CaseParams,
    convs: crate::dataset::conversations::Conversations,
    talk: Talk<'_>,
    opts: &RunOptions,
) -> Result<CaseResult, CaseError> {
    // Every turn's prompt, in turn order (a trace's prompt digest).
    let digest = crate::dataset::trace::digest(
        convs
            .list
            .iter()
            .flat_map(|c| c.turns.iter().map(|t| t.user.as_str())),
    );
    let inputs = Arc::new(
        convs
            .list
            .iter()
            .filter_map(|c| c.turns.first())
            .map(|t| RequestInput {
                model: None,
                prompt: Prompt::Text(t.user.clone()),
                prompt_len: t.user_len,
                output_len: t.output_len,
                arrival: None,
            })
            .collect(),
    );
    let params = Arc::new(params.clone());
    let t = target(resolved, service, &params);
    let run = run_conversations(
        t.clone(),
        params.clone(),
        Arc::new(convs),
        talk.think,
        talk.session_header,
        opts,
    )
    .await?;
    let tokens = Some(&resolved.tokens);
    let summary = run_summary(&run, &params, tokens);
    let window = run_window(&run, &params, tokens, opts);
    let multi_turn = Some(summarize_turns(
        &run.records,
        &run.planned_turns,
        run.duration,
        &params,
        tokens,
    ));
    let trace = match talk.trace {
        Some(d) => Some(super::trace::reuse(
            d,
            &opts.data_dir,
            params.num_prompts as usize,
            &run,
            digest,
        )?),
        None => None,
    };
    Ok(CaseResult {
        summary,
        window,
        multi_turn,
        run,
        inputs,
        engine: None,
        raw: None,
        route: RouteFacts::of(&t),
        cost: service.cost.clone(),
        trace,
    })
}
