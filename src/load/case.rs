//! The library entry point for one case: build its dataset, send it to a resolved
//! service, and summarise what came back. `bench`, `run` and `optimize` all call
//! [`execute`].

use std::sync::Arc;

use super::run::{CaseRun, RunOptions, run_case};
use super::target::{Resolved, target};
use crate::client::backend::RequestInput;
use crate::metrics::summary::{Summary, summarize};
use crate::plan::{CaseParams, Service};

/// A measured case.
#[derive(Debug)]
pub struct CaseResult {
    pub summary: Summary,
    pub run: CaseRun,
    /// The requests as built (lengths are reported).
    pub inputs: Arc<Vec<RequestInput>>,
}

/// Runs one case against one resolved service.
pub async fn execute(
    resolved: &Resolved,
    service: &Service,
    params: &CaseParams,
    opts: &RunOptions,
) -> Result<CaseResult, String> {
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
        run,
        inputs,
    })
}
