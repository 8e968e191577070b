//! Helpers shared by the integration tests.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use benchplan::diag::Diagnostics;
use benchplan::plan::{Format, PlanSource};
use benchplan::planner::{self, Planned};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Plans text as if read from `bad.toml` / `bad.yaml` in `dir`.
pub fn plan_text(text: &str, format: Format, dir: &Path) -> Result<Planned, Diagnostics> {
    let name = match format {
        Format::Toml => "bad.toml",
        Format::Yaml => "bad.yaml",
    };
    let source = PlanSource::parse(text, name, dir.to_path_buf(), format)?;
    planner::plan(source)
}

/// `benchplan validate FILE` in process (the file read, the plan checked): the planned
/// cases, or every diagnostic as the command prints them. `tests/it/cli.rs` holds the
/// command's own output and exit codes.
pub fn validate_file(path: &Path) -> Result<Planned, String> {
    let source = PlanSource::load(path, None).map_err(|d| d.to_string())?;
    planner::plan(source).map_err(|d| d.to_string())
}

/// The case most load tests send: `n` random prompts of `input` tokens asking for
/// `output` (ignore_eos), with every latency's P50 and P99.
pub fn random_case(
    backend: benchplan::plan::Backend,
    n: u64,
    input: u64,
    output: u64,
) -> benchplan::plan::CaseParams {
    use benchplan::plan::Metric;
    use benchplan::plan::dataset::{Dataset, RandomDataset};
    benchplan::plan::CaseParams {
        backend: Some(backend),
        num_prompts: n,
        dataset: Dataset::Random(RandomDataset {
            input_len: input,
            output_len: output,
            ..RandomDataset::default()
        }),
        ignore_eos: Some(true),
        percentile_metrics: Some(vec![Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el]),
        metric_percentiles: vec![50.0, 99.0],
        ..benchplan::plan::CaseParams::default()
    }
}

pub fn plan_toml(text: &str) -> Planned {
    match plan_text(text, Format::Toml, &repo().join("plans")) {
        Ok(p) => p,
        Err(d) => panic!("plan should be valid, got:\n{d}"),
    }
}

/// Runs the benchplan binary.
pub fn benchplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("benchplan runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A plan service that is an embedded simulator with this preset and parameters.
pub fn sim_service(
    preset: benchplan::plan::sim::Preset,
    params: benchplan::plan::sim::SimParams,
) -> benchplan::plan::Service {
    benchplan::plan::Service {
        sim: Some(benchplan::plan::sim::SimSpec {
            preset: Some(preset),
            params,
        }),
        ..benchplan::plan::Service::default()
    }
}

/// A ground-truth simulator whose TTFT is `overhead + per_token × prompt tokens`
/// (seconds) and whose ITL is the preset's 10 ms.
pub fn prefill_sim(overhead: f64, per_token: f64) -> benchplan::plan::Service {
    use benchplan::plan::units::Dur;
    sim_service(
        benchplan::plan::sim::Preset::GroundTruth,
        benchplan::plan::sim::SimParams {
            prefill_overhead: Some(Dur::from_secs_f64(overhead)),
            prefill_time_per_token: Some(Dur::from_secs_f64(per_token)),
            ..Default::default()
        },
    )
}

/// Asserts that a command exited with `code` and said `words` on stderr.
#[track_caller]
pub fn exits_saying(o: &Output, code: i32, words: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(err.contains(words), "wanted {words:?} in:\n{err}");
}

/// `benchplan sim --port 0` in its own process, killed on drop.
pub struct SimProcess {
    child: std::process::Child,
    pub url: String,
    /// The line the simulator printed when it started.
    pub line: String,
}

impl SimProcess {
    pub fn start(args: &[&str]) -> SimProcess {
        use std::io::{BufRead, BufReader};
        let mut child = Command::new(env!("CARGO_BIN_EXE_benchplan"))
            .args(["sim", "--port", "0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("benchplan sim starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("the sim prints its URL")
            .to_string();
        SimProcess { child, url, line }
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The suite's CPU: timing checks and tests that spin both cores hold it alone
/// ([`alone`]), tests that load it share it ([`heavy`]). libtest runs two tests at a
/// time on two cores, and a timing check beside a CPU-heavy test measures the
/// scheduler, not the code: in CI the ground-truth checks failed all their attempts
/// while llama-cpp-python's server answered on the other thread. Tests that take
/// neither run beside anything (most take well under a second of CPU).
static CPU: std::sync::RwLock<()> = std::sync::RwLock::new(());

thread_local! {
    /// Whether this test thread holds [`CPU`], so a nested take is named, not a deadlock.
    static HOLDS_CPU: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A hold on [`CPU`], released on drop. A struct, not the lock's guard, so an async
/// test may hold it across its awaits: it only orders tests, it guards no data.
pub struct CpuHold {
    _guard: CpuGuard,
}

#[allow(dead_code)] // the guards are held for their drop
enum CpuGuard {
    Alone(std::sync::RwLockWriteGuard<'static, ()>),
    Shared(std::sync::RwLockReadGuard<'static, ()>),
}

impl Drop for CpuHold {
    fn drop(&mut self) {
        HOLDS_CPU.with(|h| h.set(false));
    }
}

fn hold(alone: bool) -> CpuHold {
    assert!(
        !HOLDS_CPU.with(|h| h.replace(true)),
        "a test takes the suite's CPU once: a heavy test must not run a timing check"
    );
    // A test that panicked while holding it poisons nothing we read.
    let guard = if alone {
        CpuGuard::Alone(CPU.write().unwrap_or_else(|e| e.into_inner()))
    } else {
        CpuGuard::Shared(CPU.read().unwrap_or_else(|e| e.into_inner()))
    };
    CpuHold { _guard: guard }
}

/// Waits until no other test that takes the CPU runs, then holds it alone: for a timing
/// check, and for a test whose server spins both cores (llama-cpp-python's: 20 s of
/// CPU in 21 s), which would stretch any latency measured beside it.
pub fn alone() -> CpuHold {
    hold(true)
}

/// Marks a test that loads the CPU (measured with `/usr/bin/time` on each test alone:
/// over 1.5 s of CPU, or a browser), so no timing check runs beside it. Heavy tests
/// run beside each other and beside the tests that take nothing.
pub fn heavy() -> CpuHold {
    hold(false)
}

/// Runs a wall-clock model check, alone on the CPU ([`alone`]), up to `attempts` times
/// and passes on the first attempt that meets it. A check of absolute latencies (the
/// simulator honours 20 ms, the client measures it) is exact on an idle machine but
/// fails when a busy host delays the simulator's own wake-ups for a whole run (seen
/// with two CPU hogs on the two cores: TTFT 3-5 ms late on most requests). Attempts are
/// spaced (1 s, 2 s, ...) so that a neighbour's burst outside the suite passes too; a
/// wrong model fails every attempt. All the failures are reported when none passes.
pub async fn timing_check<F, Fut>(attempts: usize, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let _alone = alone();
    let mut failures = Vec::new();
    for attempt in 0..attempts {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(attempt as u64)).await;
        }
        match check().await {
            Ok(()) => return,
            Err(e) => failures.push(e),
        }
    }
    panic!(
        "failed in all {attempts} attempts:\n{}",
        failures.join("\n")
    );
}

/// [`timing_check`] for checks that run no async code (subprocesses, threads).
pub fn timing_check_sync(attempts: usize, mut check: impl FnMut() -> Result<(), String>) {
    let _alone = alone();
    let mut failures = Vec::new();
    for attempt in 0..attempts {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_secs(attempt as u64));
        }
        match check() {
            Ok(()) => return,
            Err(e) => failures.push(e),
        }
    }
    panic!(
        "failed in all {attempts} attempts:\n{}",
        failures.join("\n")
    );
}

/// Reads one HTTP request (head and `content-length` body): its head and body, or None
/// at EOF.
pub fn read_request(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_string)
                })
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + 4 + len {
                let n = s.read(&mut byte).ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&byte[..n]);
            }
            return Some((head, buf[end + 4..end + 4 + len].to_vec()));
        }
        let n = s.read(&mut byte).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    }
}

/// A server on 127.0.0.1:0 that runs `script(connection number, stream, log)` per
/// connection, each on its own thread; the log is for what the script wants to keep.
pub fn scripted(
    script: impl Fn(usize, &mut TcpStream, &Mutex<Vec<String>>) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (script, seen) = (Arc::new(script), heads.clone());
    std::thread::spawn(move || {
        for (i, conn) in listener.incoming().enumerate() {
            let Ok(mut s) = conn else { break };
            let (script, seen) = (script.clone(), seen.clone());
            std::thread::spawn(move || script(i, &mut s, &seen));
        }
    });
    (format!("http://{addr}"), heads)
}

/// The newest run folder (`batch_…`) under a results directory.
pub fn batch_dir(results: &Path) -> PathBuf {
    let batch = results.join("batch");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&batch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("batch_")
        })
        .collect();
    dirs.sort();
    dirs.pop().expect("one batch folder")
}

/// Starts `benchplan run <plan> --results-dir <results> --quiet` in the
/// background with stdout and stderr captured, for tests that act on the
/// process while it runs (kill the server, send SIGINT).
pub fn spawn_run(plan: &Path, results: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .arg("run")
        .arg(plan)
        .arg("--results-dir")
        .arg(results)
        .arg("--quiet")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("benchplan starts")
}

/// Reads and parses a JSON file the run wrote.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// A fresh folder under the system temp dir, unique to this process, tag and moment.
pub fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "benchplan-{tag}-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the one-request case `p` on `svc` twice with the smoke request on. The first
/// measured request must find no token cached (the smoke request warmed none of it);
/// the second, the same prompt again, at least `min_cached` (so the first check can
/// fail).
pub async fn smoke_warms_no_measured_prompt(
    svc: &benchplan::plan::Service,
    p: &benchplan::plan::CaseParams,
    min_cached: u64,
) {
    use benchplan::load::case::execute;
    use benchplan::load::options::RunOptions;
    let resolved = benchplan::service::target::resolve(svc, false, None)
        .await
        .unwrap();
    let opts = RunOptions::default();
    assert!(opts.smoke);
    let first = execute(&resolved, svc, p, &opts).await.unwrap();
    assert!(first.run.smoke.as_ref().is_some_and(|s| s.ok));
    assert_eq!(
        first.run.records[0].sample.cached_tokens,
        Some(0),
        "the smoke request warmed the measured prompt"
    );
    let again = execute(&resolved, svc, p, &opts).await.unwrap();
    let cached = again.run.records[0].sample.cached_tokens;
    assert!(cached.unwrap() >= min_cached, "{cached:?}");
}

/// A TLS front for a plain server: terminates TLS with a self-signed certificate for
/// `localhost` and 127.0.0.1 and relays the bytes to `backend`. Returns its address
/// and the certificate (PEM), which is also its own CA.
pub async fn tls_front(backend: std::net::SocketAddr) -> (std::net::SocketAddr, String) {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    benchplan::client::http::install_crypto_provider();
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let pem = cert.cert.pem();
    let der = CertificateDer::from(cert.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    if let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    }
                }
            });
        }
    });
    (addr, pem)
}

/// What one `benchplan bench` run left: its exit code, stderr and result file.
pub struct BenchRun {
    pub code: Option<i32>,
    pub stderr: String,
    pub result: Option<serde_json::Value>,
    pub took: std::time::Duration,
}

/// Runs `bin bench` with `args`, its result written as `r.json` into a fresh folder
/// (added here), `env_remove` cleared and `env` set; reads the result back and fails
/// the test if benchplan panicked.
pub fn bench_run(bin: &Path, args: &[&str], env_remove: &[&str], env: &[(&str, &str)]) -> BenchRun {
    let dir = tempdir("bench-run");
    let mut cmd = Command::new(bin);
    cmd.arg("bench")
        .args(args)
        .args([
            "--save-result",
            "--result-filename",
            "r.json",
            "--result-dir",
        ])
        .arg(&dir)
        .current_dir(repo());
    for v in env_remove {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = std::time::Instant::now();
    let out = cmd.output().expect("benchplan runs");
    let took = t.elapsed();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "benchplan panicked:\n{err}");
    let result = std::fs::read_to_string(dir.join("r.json"))
        .ok()
        .map(|t| serde_json::from_str(&t).expect("the result file is valid JSON"));
    let _ = std::fs::remove_dir_all(&dir);
    BenchRun {
        code: out.status.code(),
        stderr: err,
        result,
        took,
    }
}

/// Sends `signal` to `child` after `after`, then waits for it: its output and how long
/// it took to end after the signal.
pub fn signal_after(
    child: std::process::Child,
    after: std::time::Duration,
    signal: i32,
) -> (Output, std::time::Duration) {
    std::thread::sleep(after);
    // SAFETY: a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let t = std::time::Instant::now();
    let out = child.wait_with_output().expect("the child ends");
    (out, t.elapsed())
}

/// A CPU hog, two spinning threads a core, until dropped: a neighbour that makes the
/// machine busy.
pub struct Hog(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Vec<std::thread::JoinHandle<()>>,
);

pub fn hog() -> Hog {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = (0..2 * cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    Hog(stop, threads)
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// The body of a plain-http GET of `url` on 127.0.0.1 (empty when it fails), with the
/// connection closed after: for polling a helper server until it is ready.
pub fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let path = if path.is_empty() { "/" } else { path };
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    );
    let mut b = Vec::new();
    let _ = s.read_to_end(&mut b);
    let text = String::from_utf8_lossy(&b).to_string();
    text.split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default()
}
