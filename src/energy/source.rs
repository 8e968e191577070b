//! Reading a DCGM exporter around and during one case: a page just before the measured
//! requests, one every `interval` while they run, and one after the last answer, each
//! stamped with the midpoint of its fetch (seconds from the case's first send), per
//! physical GPU.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

use super::dcgm::Selector;
pub use super::readings::Readings;

/// Where and how often to read one service's GPUs.
#[derive(Debug, Clone)]
pub struct Source {
    /// The exporter's page, or (with `prometheus_wait`) the Prometheus server's URL.
    pub page: crate::servermetrics::Source,
    pub selector: Selector,
    /// A Prometheus server asked after the case, waiting up to this for a sample past
    /// its end (see [`super::prometheus`]); None: a page read during the case.
    pub prometheus_wait: Option<std::time::Duration>,
    /// A command that prints watts, one line per GPU, run instead of reading the page.
    pub command: Option<String>,
    /// NVML on this machine, as loaded (or why it could not be).
    pub nvml: Option<Result<Arc<super::nvml::Nvml>, String>>,
    /// Measure idle power for this long before each case.
    pub idle: Option<std::time::Duration>,
}

/// The watts `cmd` prints (run with `sh -c`, 10 s at most): the first number of each
/// line that has one (`412.50`, `412.50 W`, `power.draw 412.50`), one line per GPU.
async fn watts_of(cmd: &str) -> Result<Vec<f64>, String> {
    let run = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), run)
        .await
        .map_err(|_| format!("`{cmd}` took more than 10 s"))?
        .map_err(|e| format!("`{cmd}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{cmd}` exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(parse_watts(&String::from_utf8_lossy(&out.stdout)))
}

/// The first finite, non-negative number of each line that has one.
pub fn parse_watts(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| {
            l.split(|c: char| c.is_whitespace() || c == ',')
                .find_map(|w| w.trim_end_matches('W').parse::<f64>().ok())
                .filter(|w| w.is_finite() && *w >= 0.0)
        })
        .collect()
}

/// A case being read.
pub struct Running {
    source: Arc<Source>,
    started: Instant,
    readings: Readings,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Readings>,
}

impl Source {
    /// One page (or the command's output), read at its fetch's midpoint (seconds from
    /// `started`).
    async fn read(&self, started: Instant, into: &mut Readings) {
        let sent = started.elapsed().as_secs_f64();
        if let Some(nvml) = &self.nvml {
            match nvml {
                Ok(n) => {
                    let gpus = n.read();
                    let t = (sent + started.elapsed().as_secs_f64()) / 2.0;
                    into.add_gpus(t, gpus, &self.selector);
                }
                Err(e) => {
                    into.failed += 1;
                    into.first_error.get_or_insert(e.clone());
                }
            }
            return;
        }
        if let Some(cmd) = &self.command {
            match watts_of(cmd).await {
                Ok(ws) => {
                    let t = (sent + started.elapsed().as_secs_f64()) / 2.0;
                    into.add_watts(t, &ws);
                }
                Err(e) => {
                    into.failed += 1;
                    into.first_error.get_or_insert(e);
                }
            }
            return;
        }
        match self.page.fetch().await {
            Ok(page) => {
                let t = (sent + started.elapsed().as_secs_f64()) / 2.0;
                into.add(t, &page, &self.selector);
            }
            Err(e) => {
                into.failed += 1;
                into.first_error.get_or_insert(e);
            }
        }
    }

    /// The chosen GPUs' summed watts over `idle` before a case (read at its start and
    /// end, the energy counters' difference, else the power readings integrated); None
    /// without `idle`, for a Prometheus source, or when the readings fall short.
    pub async fn idle_watts(&self) -> Option<f64> {
        let d = self.idle.filter(|d| !d.is_zero())?;
        if self.prometheus_wait.is_some() {
            return None;
        }
        let t0 = Instant::now();
        let mut r = Readings::default();
        self.read(t0, &mut r).await;
        tokio::time::sleep(d).await;
        self.read(t0, &mut r).await;
        let (a, b) = (r.gpus.first()?.1.first()?.t, r.gpus.first()?.1.last()?.t);
        let mut watts = 0.0;
        for (_, rs) in &r.gpus {
            watts += super::window::over(rs, a, b).ok()?.mean_watts;
        }
        Some(watts)
    }

    /// Reads once before the case starts at `started` (call just before it), then
    /// every interval until [`Running::finish`].
    pub async fn start(self: &Arc<Self>, started: Instant) -> Running {
        let mut before = Readings {
            kind: match (&self.command, self.prometheus_wait, &self.nvml) {
                (_, _, Some(_)) => "nvml",
                (Some(_), _, _) => "command",
                (None, Some(_), _) => "prometheus",
                (None, None, None) => "dcgm",
            },
            url: match (&self.command, &self.nvml) {
                (_, Some(_)) => super::nvml::LIBRARY.to_string(),
                (Some(c), _) => format!("`{c}`"),
                _ => crate::redact::url(&self.page.url),
            },
            ..Readings::default()
        };
        if self.prometheus_wait.is_some() {
            // Prometheus keeps the samples: nothing to read until the case is over.
            let (stop, _) = watch::channel(false);
            return Running {
                source: self.clone(),
                started,
                readings: before,
                stop,
                task: tokio::spawn(async { Readings::default() }),
            };
        }
        self.read(started, &mut before).await;
        let (stop, mut stop_rx) = watch::channel(false);
        let src = self.clone();
        let task = tokio::spawn(async move {
            let mut during = Readings::default();
            let mut every = tokio::time::interval(src.page.interval);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    _ = stop_rx.changed() => break,
                }
                src.read(started, &mut during).await;
            }
            during
        });
        Running {
            source: self.clone(),
            started,
            readings: before,
            stop,
            task,
        }
    }
}

impl Running {
    /// Stops the readings after one more, and returns them all in time order.
    pub async fn finish(self) -> Readings {
        if let Some(wait) = self.source.prometheus_wait {
            let p = &self.source.page;
            let start = super::prometheus::unix_of(self.started);
            let end = super::prometheus::unix_of(Instant::now());
            return super::prometheus::read(
                &p.client,
                &p.headers,
                &p.url,
                &self.source.selector,
                (start, end),
                wait,
            )
            .await;
        }
        let _ = self.stop.send(true);
        let during = self.task.await.unwrap_or_default();
        let mut all = self.readings;
        for (g, rs) in during.gpus {
            match all.gpus.iter_mut().find(|(id, _)| id.id == g.id) {
                Some((_, mine)) => mine.extend(rs),
                None => all.gpus.push((g, rs)),
            }
        }
        all.failed += during.failed;
        if all.first_error.is_none() {
            all.first_error = during.first_error;
        }
        self.source.read(self.started, &mut all).await;
        for (_, rs) in &mut all.gpus {
            rs.sort_by(|a, b| a.t.total_cmp(&b.t));
        }
        all
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn watts_are_the_first_number_of_each_line() {
        let text = "412.50\n 301.25 W\npower.draw, 99\nN/A\n-3\n";
        assert_eq!(super::parse_watts(text), vec![412.5, 301.25, 99.0]);
    }
}
