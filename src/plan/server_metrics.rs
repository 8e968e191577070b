//! A service's (or case's) `server_metrics` setting: whether and how its `/metrics`
//! page is scraped.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::Dur;

/// Whether and how the server's own `/metrics` is scraped: before and after each case
/// and every `scrape_interval` during it. On by default; a service without the page
/// is reported once and runs without.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ServerMetricsSpec {
    /// Scrape at all.
    pub enabled: bool,
    /// Time between scrapes while the case runs, such as "1s" or "250ms".
    pub scrape_interval: Dur,
    /// Path of the metrics page on the service's base URL.
    pub path: String,
}

impl Default for ServerMetricsSpec {
    fn default() -> Self {
        ServerMetricsSpec {
            enabled: true,
            scrape_interval: Dur(std::time::Duration::from_secs(1)),
            path: "/metrics".into(),
        }
    }
}
