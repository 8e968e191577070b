//! The embedded simulator: an OpenAI-compatible server that behaves like a
//! continuous-batching engine, with known latencies, so benchplan's quickstart and
//! tests need no GPU and every measured number can be checked against the truth.
//!
//! - [`config`]: presets and parameters, resolved;
//! - [`engine`]: the scheduler thread (slots, FIFO queue, prefill, decode steps);
//! - [`http`]: the API (completions, chat, responses, audio transcriptions and
//!   translations, embeddings, rerank, models, health, tokenize, metrics) and fault
//!   injection; [`multipart`]: the audio endpoints' form uploads;
//! - [`body`]: SSE streaming; [`metrics`]: Prometheus text; the built-in tokenizer is `tokenizer::builtin`.

pub mod body;
pub mod cli;
pub mod config;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod multipart;
pub mod power;
pub mod prefix_cache;
pub mod timings;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use config::SimConfig;
use metrics::Stats;

/// A running simulator. Dropping the handle stops it.
pub struct SimHandle {
    /// `http://127.0.0.1:PORT`
    pub base_url: String,
    pub addr: SocketAddr,
    stats: Arc<Stats>,
    stop: watch::Sender<bool>,
    engine: std::sync::mpsc::Sender<engine::Command>,
}

impl SimHandle {
    /// The live counters (what `/metrics` reports).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Stops accepting connections and ends the engine.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
        let _ = self.engine.send(engine::Command::Shutdown);
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The simulator server.
pub struct Simulator;

impl Simulator {
    /// Starts on 127.0.0.1 with an ephemeral port, on the current tokio runtime.
    pub async fn start(config: SimConfig) -> std::io::Result<SimHandle> {
        Simulator::start_on(config, "127.0.0.1:0".parse().expect("valid address")).await
    }

    /// Starts on the given address.
    pub async fn start_on(config: SimConfig, addr: SocketAddr) -> std::io::Result<SimHandle> {
        let tokens = match &config.tokenizer {
            Some(path) => {
                crate::tokenizer::TokenModel::load(path).map_err(std::io::Error::other)?
            }
            None => crate::tokenizer::TokenModel::Builtin,
        };
        let outputs = Arc::new(tokens.output_table());
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(Stats::default());
        *stats.power.lock().expect("power meter") =
            power::Meter::new(config.idle_watts, config.watts_per_sequence, config.gpus);
        let engine = engine::spawn(config.clone(), stats.clone());
        let timings = config
            .record_timings
            .then(|| Arc::new(timings::Timings::default()));
        let state = Arc::new(http::State {
            timings,
            rng: Mutex::new(crate::rng::Rng::new(config.seed)),
            config,
            stats: stats.clone(),
            engine: engine.clone(),
            started: Instant::now(),
            next_request: AtomicU64::new(0),
            tokens,
            outputs,
        });
        let (stop, mut stopped) = watch::channel(false);
        let stats_accept = stats.clone();
        tokio::spawn(async move {
            let stats = stats_accept;
            let mut warned_accept = false;
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let stream = match accepted {
                            Ok((s, _)) => s,
                            Err(e) => {
                                // Out of file descriptors (EMFILE) or a similar resource
                                // error: accept() fails at once until some close, so
                                // retrying at once would spin a core. Back off instead.
                                if !warned_accept {
                                    eprintln!("benchplan sim: cannot accept connections ({e}); retrying every 50 ms");
                                    warned_accept = true;
                                }
                                stats.accept_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                                continue;
                            }
                        };
                        let _ = stream.set_nodelay(true);
                        let state = state.clone();
                        let mut stopped = stopped.clone();
                        tokio::spawn(async move {
                            let service = service_fn(move |req| http::handle(state.clone(), req));
                            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                            tokio::pin!(conn);
                            tokio::select! {
                                _ = conn.as_mut() => {}
                                _ = stopped.changed() => {}
                            }
                        });
                    }
                    _ = stopped.changed() => break,
                }
            }
        });
        Ok(SimHandle {
            base_url: format!("http://{addr}"),
            addr,
            stats,
            stop,
            engine,
        })
    }
}
