//! The library entry point for one case: build its dataset, send it to a resolved
//! service, and summarise what came back. `bench`, `run` and `optimize` all call
//! [`execute`].

use std::sync::Arc;

use super::conversation::{ThinkTime, run_conversations};
use super::run::{CaseRun, RunOptions, run_case};
use super::target::{Resolved, target};
use crate::client::backend::{Prompt, RequestInput};
use crate::dataset::conversations;
use crate::metrics::summary::{Summary, summarize};
use crate::metrics::turns::{MultiTurnSummary, summarize_turns};
use crate::plan::dataset::MultiTurnDataset;
use crate::plan::{CaseParams, Dataset, Service};

/// A measured case.
#[derive(Debug)]
pub struct CaseResult {
    pub summary: Summary,
    /// Conversation outcomes and per-turn metrics, for multi-turn cases.
    pub multi_turn: Option<MultiTurnSummary>,
    pub run: CaseRun,
    /// The requests as built (lengths are reported); a multi-turn case's first turns.
    pub inputs: Arc<Vec<RequestInput>>,
}

/// Runs one case against one resolved service.
pub async fn execute(
    resolved: &Resolved,
    service: &Service,
    params: &CaseParams,
    opts: &RunOptions,
) -> Result<CaseResult, String> {
    if let Dataset::MultiTurn(d) = &params.dataset {
        return execute_conversations(resolved, service, params, d, opts).await;
    }
    let inputs = Arc::new(crate::dataset::build(
        params,
        &resolved.tokens,
        &opts.data_dir,
    )?);
    let params = Arc::new(params.clone());
    let t = target(resolved, service, &params);
    let run = run_case(t, params.clone(), inputs.clone(), opts)
        .await
        .map_err(|e| e.to_string())?;
    let summary = summarize(&run.records, run.duration, &params, Some(&resolved.tokens));
    Ok(CaseResult {
        summary,
        multi_turn: None,
        run,
        inputs,
    })
}

async fn execute_conversations(
    resolved: &Resolved,
    service: &Service,
    params: &CaseParams,
    d: &MultiTurnDataset,
    opts: &RunOptions,
) -> Result<CaseResult, String> {
    let convs = conversations::build(
        d,
        params.num_prompts as usize,
        params.seed,
        &resolved.tokens,
        &opts.data_dir,
    )?;
    let inputs = Arc::new(
        convs
            .list
            .iter()
            .filter_map(|c| c.turns.first())
            .map(|t| RequestInput {
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
        t,
        params.clone(),
        Arc::new(convs),
        ThinkTime::of(d),
        &d.session_header,
        opts,
    )
    .await
    .map_err(|e| e.to_string())?;
    let tokens = Some(&resolved.tokens);
    let summary = summarize(&run.records, run.duration, &params, tokens);
    let multi_turn = Some(summarize_turns(
        &run.records,
        &run.planned_turns,
        run.duration,
        &params,
        tokens,
    ));
    Ok(CaseResult {
        summary,
        multi_turn,
        run,
        inputs,
    })
}
