//! Whether the measuring machine was busy while a case ran: Linux's CPU pressure (PSI,
//! `/proc/pressure/cpu`: the share of time some runnable task waited for a CPU), the
//! client's own run-queue delay (`/proc/self/task/*/schedstat`: how long its threads
//! waited to run), steal time (`/proc/stat`: a hypervisor's share), and the client's
//! event-loop lag (a timer task's oversleep), each over the case's run.
//!
//! Why: a busy machine slows the client's clock and a simulator sharing its cores, and
//! a verdict that blames the service for it fails a nightly job on a noisy night. What
//! a kernel does not report (old kernels, macOS) is left out and said so (`missing`).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

/// The counters read at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Snapshot {
    at: Option<Instant>,
    /// PSI `some` total, µs.
    psi_some_us: Option<u64>,
    /// The client's threads' summed run-queue wait, ns.
    runqueue_ns: Option<u64>,
    /// `/proc/stat` cpu line: (steal, all) ticks.
    steal: Option<(u64, u64)>,
}

impl Snapshot {
    /// The counters now.
    pub fn take() -> Snapshot {
        Snapshot {
            at: Some(Instant::now()),
            psi_some_us: read("/proc/pressure/cpu").and_then(|t| psi_some_total(&t)),
            runqueue_ns: runqueue_wait_ns(),
            steal: read("/proc/stat").and_then(|t| steal_ticks(&t)),
        }
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `some avg10=… avg60=… avg300=… total=N` → N (µs).
pub fn psi_some_total(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with("some "))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// `cpu  user nice system idle iowait irq softirq steal …` → (steal, sum of all).
pub fn steal_ticks(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // guest and guest_nice are already inside user and nice.
    let all: u64 = v.iter().take(8).sum();
    Some((*v.get(7)?, all))
}

/// `run_ns wait_ns timeslices` → wait_ns.
pub fn schedstat_wait_ns(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

fn runqueue_wait_ns() -> Option<u64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut sum = 0u64;
    let mut any = false;
    for t in tasks.flatten() {
        if let Some(w) =
            read(&format!("{}/schedstat", t.path().display())).and_then(|s| schedstat_wait_ns(&s))
        {
            sum = sum.saturating_add(w);
            any = true;
        }
    }
    any.then_some(sum)
}

/// How busy the machine was over a case (`benchplan.machine`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Machine {
    /// Seconds the figures cover.
    pub seconds: f64,
    /// PSI: the share of the time some runnable task waited for a CPU, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_pressure_pct: Option<f64>,
    /// The client's threads' run-queue wait, milliseconds per second of the case.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_runqueue_ms_per_s: Option<f64>,
    /// The hypervisor's share of the CPU time, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    /// The client's event loop: how late a 10 ms timer woke (P99 and max, ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_loop_lag_p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_loop_lag_max_ms: Option<f64>,
    /// What this kernel does not report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<&'static str>,
}

impl Machine {
    /// The figures between two snapshots, with the event loop's lags (µs).
    pub fn between(a: &Snapshot, b: &Snapshot, lags_us: &Histogram<u64>) -> Machine {
        let secs = match (a.at, b.at) {
            (Some(x), Some(y)) => y.saturating_duration_since(x).as_secs_f64(),
            _ => 0.0,
        };
        let mut m = Machine {
            seconds: secs,
            ..Machine::default()
        };
        match (a.psi_some_us, b.psi_some_us) {
            (Some(x), Some(y)) if secs > 0.0 => {
                m.cpu_pressure_pct = Some(y.saturating_sub(x) as f64 / 1e6 / secs * 100.0);
            }
            _ => m.missing.push("cpu_pressure (no /proc/pressure/cpu)"),
        }
        match (a.runqueue_ns, b.runqueue_ns) {
            (Some(x), Some(y)) if secs > 0.0 => {
                m.client_runqueue_ms_per_s = Some(y.saturating_sub(x) as f64 / 1e6 / secs);
            }
            _ => m.missing.push("client_runqueue (no schedstat)"),
        }
        match (a.steal, b.steal) {
            (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => {
                m.steal_pct = Some(s1.saturating_sub(s0) as f64 / (t1 - t0) as f64 * 100.0);
            }
            _ => m.missing.push("steal (no /proc/stat)"),
        }
        if !lags_us.is_empty() {
            m.event_loop_lag_p99_ms = Some(lags_us.value_at_quantile(0.99) as f64 / 1e3);
            m.event_loop_lag_max_ms = Some(lags_us.max() as f64 / 1e3);
        }
        m
    }
}

/// The timer a lag probe sleeps.
pub const LAG_TICK: Duration = Duration::from_millis(10);

/// Measures the event loop's lag until `stop` is set: how late each 10 ms sleep woke,
/// in µs (a histogram: a run of hours keeps a few KB, not a sample a tick).
pub async fn lag_probe(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Histogram<u64> {
    let mut lags = Histogram::new(3).expect("3 significant digits");
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let t = Instant::now();
        tokio::time::sleep(LAG_TICK).await;
        let late = t.elapsed().saturating_sub(LAG_TICK);
        lags.saturating_record(late.as_micros() as u64);
    }
    lags
}

/// The machine watched over a case's measured requests: the counters at its start and
/// the event-loop lag probe, until [`Watch::finish`].
pub struct Watch {
    before: Snapshot,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    lag: tokio::task::JoinHandle<Histogram<u64>>,
}

impl Watch {
    /// Starts watching (on the runtime of the case's requests, whose lag it measures).
    pub fn start() -> Watch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        Watch {
            before: Snapshot::take(),
            lag: tokio::spawn(lag_probe(stop.clone())),
            stop,
        }
    }

    /// The figures since [`Watch::start`].
    pub async fn finish(self) -> Machine {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let lags = self
            .lag
            .await
            .unwrap_or_else(|_| Histogram::new(3).expect("3 significant digits"));
        Machine::between(&self.before, &Snapshot::take(), &lags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formats as Linux writes them (recorded on a 6.x kernel).
    #[test]
    fn the_kernels_formats_are_read() {
        let psi = "some avg10=3.17 avg60=5.98 avg300=9.54 total=1996931652\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(psi_some_total(psi), Some(1_996_931_652));
        let stat =
            "cpu  1419396 2026 218150 1357014 18771 0 12666 11985 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(
            steal_ticks(stat),
            Some((
                11985,
                1419396 + 2026 + 218150 + 1357014 + 18771 + 12666 + 11985
            ))
        );
        assert_eq!(schedstat_wait_ns("1130750 2107392 3\n"), Some(2_107_392));
        assert_eq!(psi_some_total("garbage"), None);
        // Deltas: 0.5 s of 1 s stalled is 50%.
        let a = Snapshot {
            at: Some(Instant::now()),
            psi_some_us: Some(1_000_000),
            runqueue_ns: Some(0),
            steal: Some((0, 100)),
        };
        let b = Snapshot {
            at: a.at.map(|t| t + Duration::from_secs(1)),
            psi_some_us: Some(1_500_000),
            runqueue_ns: Some(200_000_000),
            steal: Some((10, 200)),
        };
        let mut lags = Histogram::new(3).unwrap();
        for us in [100, 200, 5000] {
            lags.record(us).unwrap();
        }
        let m = Machine::between(&a, &b, &lags);
        assert_eq!(m.cpu_pressure_pct, Some(50.0));
        assert_eq!(m.client_runqueue_ms_per_s, Some(200.0));
        assert_eq!(m.steal_pct, Some(10.0));
        // The histogram keeps 3 significant digits.
        let max = m.event_loop_lag_max_ms.unwrap();
        assert!((max - 5.0).abs() <= 0.005, "{max}");
        assert!(m.missing.is_empty());
        // A kernel without PSI says so.
        let none = Machine::between(
            &Snapshot::default(),
            &Snapshot::default(),
            &Histogram::new(3).unwrap(),
        );
        assert_eq!(none.missing.len(), 3);
    }
}
