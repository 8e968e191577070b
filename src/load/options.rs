//! How a case runs beyond its parameters ([`RunOptions`]) and why one could not be
//! measured at all ([`RunError`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::stop::Stop;

/// How a case runs, beyond its parameters.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Send one unmeasured request first and fail the case if it cannot succeed.
    pub smoke: bool,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Without a terminal: one plain line on stderr this often (a CI log shows the case
    /// moving), with `label` first.
    pub progress_lines: Option<Duration>,
    pub label: String,
    /// The case's stop signal (Ctrl-C drains it).
    pub stop: Stop,
    /// How long requests in flight may finish after a drain before they are abandoned.
    pub grace: Duration,
    /// The case ends by then (`execution.timeout`): past it, what is in flight is
    /// abandoned and what finished is kept.
    pub deadline: Option<Instant>,
    /// Prefix of `x-request-id`.
    pub request_id_prefix: String,
    /// Open the connections the run will use before it starts, so TCP set-up is not
    /// measured as server latency (a production client keeps its connections warm).
    pub prewarm_connections: bool,
    /// Dataset file paths are relative to this folder (the plan's).
    pub data_dir: std::path::PathBuf,
    /// The service's `/metrics`, scraped around and during the measured requests.
    pub server_metrics: Option<Arc<crate::servermetrics::Source>>,
    /// Where the service's GPU energy is read around and during the measured requests.
    pub energy: Option<Arc<crate::energy::source::Source>>,
    /// Say on stderr what the smoke request waits for when it takes more than a few
    /// seconds (`bench`, which prints nothing else before its run).
    pub announce_waits: bool,
    /// Cut the case into timeslices this long (seconds; `report.timeslice`,
    /// `bench --timeslice`); None: none.
    pub timeslice: Option<f64>,
    /// The fewest requests a steady window is judged on (`report.steady_min_requests`).
    pub steady_min_requests: usize,
    /// When an open-loop case's queue counts as growing without bound
    /// (`execution.oversaturation`).
    pub oversaturation: crate::metrics::oversaturation::Settings,
    /// End an over-saturated case where it is found (`execution.stop_on`).
    pub stop_on_oversaturation: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            smoke: true,
            progress: false,
            progress_lines: None,
            label: String::new(),
            stop: Stop::new(),
            grace: Duration::from_secs(5),
            deadline: None,
            request_id_prefix: format!("benchplan-{:08x}-", std::process::id()),
            prewarm_connections: true,
            data_dir: std::path::PathBuf::from("."),
            server_metrics: None,
            energy: None,
            announce_waits: false,
            oversaturation: Default::default(),
            stop_on_oversaturation: false,
            timeslice: None,
            steady_min_requests: crate::metrics::window::MIN_STEADY_REQUESTS,
        }
    }
}

/// Why a case could not be measured at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the endpoint was not ready within {0:.0} s: {1}")]
    NotReady(f64, String),
    #[error("the smoke request failed {attempts} times; last error: {error}")]
    Smoke {
        attempts: u32,
        /// The last error, `kind: message`.
        error: String,
        /// The last error's kind (`http_400`, `no_tokens`, …): what a caller branches on.
        kind: String,
    },
    #[error("the case has no requests")]
    Empty,
    #[error("the case timed out during {0}, before any measured request")]
    TimedOut(&'static str),
    #[error("interrupted during {0}, before any measured request")]
    Interrupted(&'static str),
}
