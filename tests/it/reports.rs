//! The pictures of a run: SVG charts (each one well-formed XML with one data point
//! per case per series) and the self-contained report.html, opened in headless
//! Chromium with a proxy that must never be contacted.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{batch_dir, benchplan, read_json, stderr};

/// Two services, a three-point concurrency sweep each, scraped every 20 ms.
const SWEEP: &str = r#"
name = "sweep"
description = "a <three-case> sweep & two services"

[services.a]
sim = { preset = "fast", itl = "4ms" }

[services.b]
sim = { preset = "fast", itl = "6ms" }

[defaults]
backend = "openai"
dataset = { name = "random", input_len = 32, output_len = 24 }
ignore_eos = true
num_prompts = 12
server_metrics = { scrape_interval = "20ms" }

[matrix]
max_concurrency = [1, 2, 4]

[slo]
p99_ttft = "<= 5s"
"#;

/// `run` of the plan `text` in a fresh folder `dir`, which must exit 0: its run folder.
fn run_ok(dir: &Path, text: &str) -> PathBuf {
    std::fs::write(dir.join("plan.toml"), text).unwrap();
    let results = dir.join("r");
    let out = benchplan(&[
        "run",
        dir.join("plan.toml").to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    batch_dir(&results)
}

/// Runs the sweep once for every test of this module that reads it.
fn sweep() -> &'static Path {
    static RUN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    RUN.get_or_init(|| run_ok(&crate::support::tempdir("sweep"), SWEEP))
}

fn case_ids(run: &Path) -> Vec<(String, String)> {
    read_json(&run.join("manifest.json"))["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["service"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn parse_svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    text
}

/// A polyline's points.
fn points(p: &roxmltree::Node) -> Vec<(f64, f64)> {
    p.attribute("points")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|xy| {
            let (x, y) = xy.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

/// Legends stand where no data is, checked from the SVG's geometry: each legend label
/// (with its marker to its left) is a box; no data line passes through a box (a line
/// wholly inside one is its marker) and no box holds more than its own marker point.
pub fn legend_clear(file: &str, doc: &roxmltree::Document, names: &[&str]) {
    let num = |n: &roxmltree::Node, a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok());
    let boxes: Vec<(f64, f64, f64, f64)> = elements(doc, "text")
        .iter()
        .filter(|t| t.text().is_some_and(|x| names.contains(&x.trim())))
        .filter_map(|t| {
            let (x, y) = (num(t, "x")?, num(t, "y")?);
            let w = 7.0 * t.text()?.trim().chars().count() as f64;
            Some((x - 34.0, y - 14.0, x + w, y + 16.0))
        })
        .collect();
    assert_eq!(
        boxes.len(),
        names.len(),
        "{file}: a legend label is missing"
    );
    let inside = |(x, y): (f64, f64)| {
        boxes
            .iter()
            .position(|b| x >= b.0 && x <= b.2 && y >= b.1 && y <= b.3)
    };
    for p in elements(doc, "polyline") {
        let pts = points(&p);
        if pts.iter().all(|q| inside(*q).is_some()) {
            continue;
        }
        for w in pts.windows(2) {
            for k in 0..=40 {
                let f = k as f64 / 40.0;
                let q = (
                    w[0].0 + (w[1].0 - w[0].0) * f,
                    w[0].1 + (w[1].1 - w[0].1) * f,
                );
                assert!(
                    inside(q).is_none(),
                    "{file}: data at {q:?} under a legend label"
                );
            }
        }
    }
    let mut markers = vec![0; boxes.len()];
    for c in elements(doc, "circle") {
        if let Some(i) = num(&c, "cx").zip(num(&c, "cy")).and_then(inside) {
            markers[i] += 1;
        }
    }
    assert!(
        markers.iter().all(|m| *m <= 1),
        "{file}: data points under the legend {markers:?}"
    );
}

fn elements<'a>(doc: &'a roxmltree::Document<'a>, tag: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.tag_name().name() == tag)
        .collect()
}

#[test]
fn every_chart_is_svg_with_one_point_per_case_per_series() {
    let _cpu = crate::support::heavy();
    let run = sweep();
    let cases = case_ids(run);
    assert_eq!(cases.len(), 6);
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let charts = run.join("charts");
    // The throughput–latency curves: per service a P50 series (circles) and a P99
    // series (triangles), each with one marker per case of the service (and one in
    // the legend), labelled by its concurrency.
    for metric in ["ttft", "tpot"] {
        let file = format!("charts/throughput_vs_{metric}.svg");
        assert!(
            report.contains(&format!("]({file})")),
            "report.md links {file}"
        );
        let text = parse_svg(&run.join(&file));
        let doc = roxmltree::Document::parse(&text).unwrap();
        let circles = elements(&doc, "circle");
        let mut by_colour: std::collections::BTreeMap<String, usize> = Default::default();
        for c in &circles {
            *by_colour
                .entry(c.attribute("fill").unwrap().to_string())
                .or_default() += 1;
        }
        assert_eq!(by_colour.len(), 2, "one colour per service: {by_colour:?}");
        assert!(by_colour.values().all(|n| *n == 3 + 1), "{by_colour:?}");
        let mut triangles: std::collections::BTreeMap<String, usize> = Default::default();
        for t in elements(&doc, "polygon") {
            *triangles
                .entry(t.attribute("fill").unwrap_or_default().to_string())
                .or_default() += 1;
        }
        assert_eq!(triangles, by_colour, "P99 markers are triangles");
        let texts: Vec<String> = elements(&doc, "text")
            .iter()
            .filter_map(|t| t.text().map(|t| t.trim().to_string()))
            .collect();
        for label in ["c=1", "c=2", "c=4"] {
            assert_eq!(
                texts.iter().filter(|t| *t == label).count(),
                2,
                "{label} once per service"
            );
        }
        for svc in ["a", "b"] {
            for p in ["P50", "P99"] {
                assert!(
                    texts.contains(&format!("{svc} {p}")),
                    "legend {svc} {p}: {texts:?}"
                );
            }
        }
    }
    // Distributions: per service and metric one CDF line per case (201 quantiles).
    for svc in ["a", "b"] {
        for metric in ["ttft", "itl"] {
            let file = format!("charts/{metric}_cdf_{svc}.svg");
            assert!(report.contains(&file), "{file}");
            let text = parse_svg(&run.join(&file));
            let doc = roxmltree::Document::parse(&text).unwrap();
            let curves = elements(&doc, "polyline")
                .into_iter()
                .filter(|p| p.attribute("points").unwrap().split_whitespace().count() > 100)
                .count();
            assert_eq!(curves, 3, "{file}");
            let texts: Vec<&str> = elements(&doc, "text")
                .iter()
                .filter_map(|t| t.text().map(str::trim))
                .collect();
            // The legend names each case by its matrix value, not its id.
            for label in ["c=1", "c=2", "c=4"] {
                assert!(texts.contains(&label), "{file} legend {label}: {texts:?}");
            }
            for (id, _) in &cases {
                assert!(!texts.contains(&id.as_str()), "{file} legend {id}");
            }
        }
    }
    // The server over each case: running and waiting, then KV-cache use, one point per scrape.
    for (id, _) in &cases {
        let file = format!("charts/server_{id}.svg");
        assert!(report.contains(&file), "{file}");
        let text = parse_svg(&run.join(&file));
        let doc = roxmltree::Document::parse(&text).unwrap();
        let scrapes = read_json(&run.join(format!("{id}.json")))["benchplan"]["server_metrics"]["series"]["t"]
            .as_array()
            .unwrap()
            .len();
        assert!(scrapes >= 2, "{id}: {scrapes} scrapes");
        // Each scrape a point (and one marker per legend entry), held as a step: no
        // sloped segment between two scrapes.
        assert_eq!(
            elements(&doc, "circle").len(),
            3 * scrapes + 3,
            "{file}: running, waiting and KV usage"
        );
        for p in elements(&doc, "polyline") {
            let pts = points(&p);
            for w in pts.windows(2) {
                assert!(
                    (w[0].0 - w[1].0).abs() < 0.01 || (w[0].1 - w[1].1).abs() < 0.01,
                    "{file}: a sloped segment {w:?}"
                );
            }
        }
        legend_clear(&file, &doc, &["running", "waiting", "KV cache"]);
    }
    let listed = std::fs::read_dir(&charts).unwrap().count();
    assert_eq!(
        listed,
        2 + 4 + 6,
        "{:?}",
        std::fs::read_dir(&charts).unwrap().collect::<Vec<_>>()
    );
}

#[test]
fn no_charts_draws_none_and_one_case_draws_no_curve() {
    let dir = crate::support::tempdir("one");
    let plan = SWEEP
        .replace("max_concurrency = [1, 2, 4]", "max_concurrency = [2]")
        .replace(
            "[services.b]\nsim = { preset = \"fast\", itl = \"6ms\" }\n",
            "",
        );
    std::fs::write(dir.join("plan.toml"), &plan).unwrap();
    let run = |results: &str, extra: &[&str]| {
        let r = dir.join(results);
        let mut args = vec![
            "run",
            dir.join("plan.toml").to_str().unwrap().to_string().leak() as &str,
        ];
        args.extend([
            "--results-dir",
            r.to_str().unwrap().to_string().leak(),
            "--quiet",
        ]);
        args.extend(extra);
        let out = benchplan(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        batch_dir(&r)
    };
    let one = run("r1", &[]);
    let mut files: Vec<String> = std::fs::read_dir(one.join("charts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert!(
        !files.iter().any(|f| f.starts_with("throughput_vs")),
        "{files:?}"
    );
    assert!(files.contains(&"ttft_cdf_a.svg".to_string()), "{files:?}");
    let none = run("r2", &["--no-charts"]);
    assert!(!none.join("charts").exists());
    let md = std::fs::read_to_string(none.join("report.md")).unwrap();
    assert!(!md.contains("## Charts") && !md.contains(".svg"), "{md}");
    assert!(none.join("report.html").is_file());
}

/// Chromium, if this machine has it.
pub(crate) fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// A proxy standing in for the whole network: records the host of every request
/// sent through it (a `CONNECT host:443` or a `GET http://host/…`) and answers none.
pub(crate) fn trap() -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hosts = Arc::new(Mutex::new(Vec::new()));
    let h = hosts.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 2048];
            let n = s.read(&mut buf).unwrap_or(0);
            let text = String::from_utf8_lossy(&buf[..n]);
            let target = text.split_whitespace().nth(1).unwrap_or("?");
            let host = target
                .trim_start_matches("http://")
                .trim_start_matches("https://")
                .split(['/', ':'])
                .next()
                .unwrap_or("?")
                .to_string();
            h.lock().unwrap().push(host);
            // Dropped unanswered: the browser sees a failed load.
        }
    });
    (port, hosts)
}

/// The hosts contacted since the last call.
fn take(hosts: &Mutex<Vec<String>>) -> std::collections::BTreeSet<String> {
    std::mem::take(&mut *hosts.lock().unwrap())
        .into_iter()
        .collect()
}

/// The page's DOM after Chromium loaded it, every request sent to `proxy`.
pub(crate) fn dump_dom(chrome: &Path, page: &Path, proxy: u16, profile: &Path) -> String {
    let mut child = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-extensions",
            "--disable-client-side-phishing-detection",
            "--disable-domain-reliability",
            "--no-pings",
            "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,MediaRouter,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
            "--virtual-time-budget=3000",
            &format!("--proxy-server=http://127.0.0.1:{proxy}"),
            // Loopback bypasses proxies by default; the trap must see those too.
            "--proxy-bypass-list=<-loopback>",
            &format!("--user-data-dir={}", profile.display()),
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_to_string(&mut out);
        out
    });
    // Bounded: a browser that hangs fails the test instead of the suite.
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    reader.join().unwrap()
}

#[test]
fn report_html_opens_in_headless_chromium_with_every_table_and_chart_and_no_request() {
    let _cpu = crate::support::heavy();
    let Some(chrome) = chromium() else {
        eprintln!(
            "SKIPPED report_html_opens_in_headless_chromium: no chromium on PATH (Debian: apt-get install chromium chromium-driver; .ci/run installs it)"
        );
        return;
    };
    let run = sweep();
    let dir = crate::support::tempdir("chromium");
    let (port, hosts) = trap();
    // Chromium contacts a few of its own services (sign-in, google.com) whatever the
    // page: an empty page shows which, so they are not blamed on the report.
    let empty = dir.join("empty.html");
    std::fs::write(&empty, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let _ = dump_dom(&chrome, &empty, port, &dir.join("profile-empty"));
    std::thread::sleep(Duration::from_millis(300));
    let own = take(&hosts);
    // The positive control: a page with an external image must reach the trap, or
    // the check below could not see a request if there were one.
    let control = dir.join("control.html");
    std::fs::write(
        &control,
        "<!DOCTYPE html><html><body><img src=\"http://assets.example.com/x.png\"></body></html>",
    )
    .unwrap();
    let dom = dump_dom(&chrome, &control, port, &dir.join("profile-control"));
    assert!(
        dom.contains("<img"),
        "chromium rendered the control page: {dom}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let seen = take(&hosts);
    assert!(
        seen.contains("assets.example.com"),
        "the control's image reached the trap: {seen:?}"
    );

    let html = run.join("report.html");
    let dom = dump_dom(&chrome, &html, port, &dir.join("profile-report"));
    std::thread::sleep(Duration::from_millis(300));
    let seen = take(&hosts);
    // Chromium's own services live on google.com (a page's fonts would come from
    // googleapis.com or gstatic.com, which count).
    let foreign: Vec<&String> = seen
        .difference(&own)
        .filter(|h| *h != "google.com" && !h.ends_with(".google.com"))
        .collect();
    assert!(
        foreign.is_empty(),
        "report.html made requests to {foreign:?} (Chromium's own: {own:?})"
    );
    assert!(
        dom.contains("Benchmark report: sweep"),
        "{}",
        &dom[..dom.len().min(2000)]
    );
    // The plan's text is escaped, not markup.
    assert!(
        dom.contains("a &lt;three-case&gt; sweep &amp; two services"),
        "escaped description"
    );
    assert_eq!(
        dom.matches("<tr class=\"case\">").count(),
        6,
        "a results row per case"
    );
    assert!(dom.contains("id=\"slos\""), "the SLO table");
    let charts = std::fs::read_dir(run.join("charts")).unwrap().count();
    assert_eq!(dom.matches("<figure class=\"chart\"").count(), charts);
    assert_eq!(dom.matches("<svg").count(), charts, "every chart inline");
    // Nothing to fetch: no script, no link, no source outside the file.
    for bad in [
        "<script",
        "<link",
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
    ] {
        assert!(!dom.contains(bad), "report.html has {bad}");
    }
}

#[test]
fn the_readme_shows_a_chart_the_quickstart_drew() {
    // Redrawn by scripts/readme-charts.sh from a quickstart run: its sweep's points.
    let readme = std::fs::read_to_string(crate::support::repo().join("README.md")).unwrap();
    let file = "examples/quickstart/throughput_vs_ttft.svg";
    assert!(
        readme.contains(&format!("]({file})")),
        "README shows {file}"
    );
    let text = parse_svg(&crate::support::repo().join(file));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let plan =
        std::fs::read_to_string(crate::support::repo().join("plans/quickstart.toml")).unwrap();
    assert!(
        plan.contains("max_concurrency = [1, 4, 16]"),
        "the chart's sweep"
    );
    assert_eq!(
        elements(&doc, "circle").len(),
        3 * 2,
        "P50 and P99 of three cases"
    );
    let texts: Vec<&str> = elements(&doc, "text")
        .iter()
        .filter_map(|t| t.text().map(str::trim))
        .collect();
    for label in ["c=1", "c=4", "c=16", "sim P50", "sim P99"] {
        assert!(texts.contains(&label), "{label} in {texts:?}");
    }
}

/// A fleet on one chart: a 70 ms service and a 2.5 s one.
const FLEET: &str = r#"
name = "fleet"
[services.fast]
sim = { preset = "fast", ttft = "70ms", itl = "2ms" }
[services.slow]
sim = { preset = "fast", ttft = "2500ms", itl = "20ms" }
[defaults]
dataset = { name = "random", input_len = 8, output_len = 4 }
num_prompts = 4
[matrix]
max_concurrency = [2, 4]
[slo]
p99_ttft = "<= 3s"
"#;

#[test]
fn a_fleet_of_fast_and_slow_services_reads_on_log_axes_with_slo_lines_and_legends_aside() {
    let _cpu = crate::support::heavy();
    let dir = crate::support::tempdir("fleet");
    let run = run_ok(&dir, FLEET);
    let text = parse_svg(&run.join("charts/throughput_vs_ttft.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let texts: Vec<(f64, String)> = elements(&doc, "text")
        .iter()
        .filter_map(|t| {
            let x = t.attribute("x")?.parse().ok()?;
            Some((x, t.text()?.trim().to_string()))
        })
        .collect();
    let has = |s: &str| texts.iter().any(|(_, t)| t.contains(s));
    // A 35× span: a log axis, whose ticks are decades, not a flat line at zero.
    assert!(has("(log scale)"), "{texts:?}");
    assert!(has("100") && has("1000"), "decade ticks: {texts:?}");
    // The SLO as a line with its value; whole-number ticks (no `2.0`).
    assert!(has("SLO p99_ttft 3000 ms"), "{texts:?}");
    assert!(!texts.iter().any(|(_, t)| t.ends_with(".0")), "{texts:?}");
    // The legend beside the plot, never over it: each entry right of the plot area.
    for name in ["fast P50", "fast P99", "slow P50", "slow P99"] {
        let (x, _) = texts
            .iter()
            .find(|(_, t)| t == name)
            .unwrap_or_else(|| panic!("legend {name}: {texts:?}"));
        assert!(*x > 540.0, "legend {name} at x {x}, inside the plot");
    }
    // The distributions name cases by their matrix values.
    let cdf = parse_svg(&run.join("charts/ttft_cdf_slow.svg"));
    let cdf = roxmltree::Document::parse(&cdf).unwrap();
    let labels: Vec<&str> = elements(&cdf, "text")
        .iter()
        .filter_map(|t| t.text().map(str::trim))
        .collect();
    assert!(
        labels.contains(&"c=2") && labels.contains(&"c=4"),
        "{labels:?}"
    );

    // And in a real browser: report.html renders every chart.
    let Some(chrome) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the Chromium checks: .ci/run installs chromium"
        );
        eprintln!("SKIPPED the Chromium half: no chromium");
        return;
    };
    let (port, _) = trap();
    let dom = dump_dom(
        &chrome,
        &run.join("report.html"),
        port,
        &dir.join("profile"),
    );
    let charts = std::fs::read_dir(run.join("charts")).unwrap().count();
    assert_eq!(dom.matches("<svg").count(), charts, "every chart inline");
    assert!(dom.contains("(log scale)"), "the log chart rendered");
    // A picture to look at (not asserted): target/fleet-report.png.
    let shot = crate::support::repo().join("target/fleet-report.png");
    let _ = Command::new(&chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1000,2600",
            &format!("--user-data-dir={}", dir.join("profile-shot").display()),
            &format!("--screenshot={}", shot.display()),
        ])
        .arg(format!("file://{}", run.join("report.html").display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    std::fs::remove_dir_all(&dir).ok();
}

/// The reports of a committed run (`tests/fixtures/fixed-run`: two simulated services
/// at two concurrencies, six prompts a case), written in process as `benchplan report`
/// writes them and compared whole: report.md, report.html (without charts, which
/// `every_chart_is_svg…` reads point by point), summary.csv and junit.xml. The run's
/// numbers are fixed, so nothing is redacted but the folder and the tool's version.
#[test]
fn the_reports_of_a_fixed_run_match_their_snapshots() {
    use benchplan::report::write::{Templates, write_reports};
    let dir = crate::support::tempdir("fixed-run");
    let fixture = crate::support::repo().join("tests/fixtures/fixed-run");
    for f in std::fs::read_dir(&fixture).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let (view, rows) = benchplan::report::folder::from_folder(&dir).unwrap();
    let templates = Templates {
        no_charts: true,
        ..Templates::default()
    };
    let code = write_reports(&dir, &view, &rows, &templates, Path::new("."));
    assert_eq!(code, benchplan::exit::Exit::Ok);
    let folder = dir.display().to_string();
    let redact = |text: String| {
        text.replace(&folder, "[folder]")
            .replace(env!("CARGO_PKG_VERSION"), "[version]")
    };
    let read = |name: &str| redact(std::fs::read_to_string(dir.join(name)).unwrap());
    insta::assert_snapshot!("fixed_run_report_md", read("report.md"));
    insta::assert_snapshot!("fixed_run_report_html", read("report.html"));
    insta::assert_snapshot!("fixed_run_summary_csv", read("summary.csv"));
    insta::assert_snapshot!(
        "fixed_run_junit_xml",
        redact(benchplan::report::junit::junit_xml(&view))
    );
    std::fs::remove_dir_all(&dir).ok();
}
