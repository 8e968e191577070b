//! Charts of a run as SVG files (plotters' SVG backend; text stays `<text>`, so no
//! font files are read): the throughput–latency curve of a sweep ([`pareto`]), the
//! TTFT and ITL distributions from the HDR histograms ([`cdf`]), the server's running,
//! waiting and KV-cache use over each case ([`server`]), each case over its timeslices
//! ([`timeslices`]), where each case's time goes ([`timesplit`]), TPOT against
//! speculative-decoding acceptance ([`acceptance`]), and an SLO search's probes
//! ([`search`]). report.md links them; report.html shows them inline.

pub mod acceptance;
pub mod cdf;
mod chart;
pub mod pareto;
pub mod search;
pub mod server;
mod style;
pub mod timeslices;
pub mod timesplit;

use serde_json::{Map, Value};

use super::csv::Row;
use super::view::CaseView;
pub use chart::Chart;

/// Every chart a run's results support: the curve only with two or more measured
/// cases of a service, distributions and server series only for cases that have them.
pub fn draw(cases: &[CaseView], rows: &[Row]) -> Vec<Chart> {
    let result = |id: &str| -> Option<&Map<String, Value>> {
        rows.iter()
            .find(|r| r.id == id)
            .and_then(|r| r.result.as_ref())
    };
    let mut out = Vec::new();
    out.extend(pareto::draw(cases, &result));
    out.extend(cdf::draw(cases, &result));
    out.extend(server::draw(cases, &result));
    out.extend(timeslices::draw(cases, &result));
    out.extend(timesplit::draw(cases));
    out.extend(acceptance::draw(cases, &result));
    out
}
