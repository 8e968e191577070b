//! Server text is hostile: a server whose model id and error texts carry raw HTML, a
//! remote markdown image, line breaks with a heading and table cells, a forged
//! `**PASS**`, ANSI and OSC-8 escapes, NUL and a spreadsheet formula. Every output is
//! read back the way its reader reads it: junit.xml by an XML parser, summary.csv by a
//! CSV reader (no cell a spreadsheet would evaluate), report.md and the step summary by
//! a CommonMark renderer (no raw HTML element, no remote image, no forged heading), the
//! console byte by byte (no ESC, no NUL), and file names (printable and bounded).

use std::io::Write;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{batch_dir, read_request, repo, scripted, tempdir};

/// Every class of hostile text in one string.
fn payload() -> String {
    [
        "<img src=x onerror=alert(1)>",
        "![t](http://127.0.0.1:9/track.png)",
        "\r\n# forged heading\n| forged | cell |\n**PASS**",
        "\u{1b}[2J\u{1b}]8;;http://127.0.0.1:9/\u{7}link\u{1b}]8;;\u{7}\u{9b}31m",
        "\0nul",
    ]
    .concat()
}

/// A model id of 300 characters that starts like a spreadsheet formula.
fn model_id() -> String {
    let mut id = format!("=HYPERLINK(\"http://127.0.0.1:9\",\"x\"){}", payload());
    while id.chars().count() < 300 {
        id.push('m');
    }
    id
}

/// A server whose `/v1/models` names the hostile model; completions stream fine
/// (`good`), or (`!good`) fail with the hostile text as an HTTP 500 body after the first
/// (which lets `run` find the service up, so its case fails, not the service).
fn hostile_server(good: bool) -> String {
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    scripted(move |_, s, _| {
        while let Some((head, _)) = read_request(s) {
            let line = head.lines().next().unwrap_or("").to_string();
            let send = |s: &mut std::net::TcpStream, status: &str, kind: &str, body: &str| {
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
            };
            if line.starts_with("GET /v1/models") {
                let body = json!({"object": "list", "data": [{"id": model_id(), "root": model_id(), "object": "model"}]});
                send(s, "200 OK", "application/json", &body.to_string());
            } else if line.starts_with("POST /v1/completions")
                && (good || answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0)
            {
                let t = "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}\n\n";
                let u = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n";
                send(s, "200 OK", "text/event-stream", &format!("{t}{t}{t}{u}data: [DONE]\n\n"));
            } else if line.starts_with("POST /v1/completions") {
                let err = json!({"error": {"message": payload()}});
                send(s, "500 Internal Server Error", "application/json", &err.to_string());
            } else {
                send(s, "404 Not Found", "text/plain", &payload());
            }
        }
    })
    .0
}

fn no_control(what: &str, bytes: &[u8]) {
    assert!(
        !bytes.contains(&0x1b)
            && !bytes.contains(&0)
            && !String::from_utf8_lossy(bytes).contains('\u{9b}'),
        "{what} holds a raw control character:\n{}",
        String::from_utf8_lossy(bytes).escape_debug()
    );
}

/// The HTML a CommonMark renderer (with GitHub's tables and strikethrough) makes of `md`.
fn rendered(md: &str) -> String {
    let mut opts = pulldown_cmark::Options::empty();
    opts.insert(pulldown_cmark::Options::ENABLE_TABLES);
    opts.insert(pulldown_cmark::Options::ENABLE_STRIKETHROUGH);
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, pulldown_cmark::Parser::new_ext(md, opts));
    html
}

/// Markdown that renders with no element from the server: no raw HTML, no image but
/// the report's own local charts, one heading of level 1, no forged PASS.
fn safe_markdown(what: &str, md: &str) {
    let mut opts = pulldown_cmark::Options::empty();
    opts.insert(pulldown_cmark::Options::ENABLE_TABLES);
    for ev in pulldown_cmark::Parser::new_ext(md, opts) {
        use pulldown_cmark::{Event, Tag};
        match ev {
            Event::Html(h) | Event::InlineHtml(h) => panic!("{what}: raw HTML {h:?}"),
            Event::Start(Tag::Image { dest_url, .. }) => {
                assert!(
                    !dest_url.contains(':') && dest_url.starts_with("charts/"),
                    "{what}: an image from {dest_url}"
                );
            }
            _ => {}
        }
    }
    let html = rendered(md);
    assert_eq!(
        html.matches("<h1>").count(),
        1,
        "{what}: a forged heading:\n{html}"
    );
    assert!(!html.contains("forged heading</h"), "{what}:\n{html}");
    assert!(
        !html.contains("<strong>PASS</strong>"),
        "{what}: a forged PASS:\n{html}"
    );
    assert!(!html.contains("<img src=\"x\""), "{what}:\n{html}");
    no_control(what, md.as_bytes());
}

#[test]
fn hostile_text_from_a_server_is_escaped_in_every_output() {
    let (good, bad) = (hostile_server(true), hostile_server(false));
    let dir = tempdir("hostile");
    let tok = repo().join("tests/fixtures/tokenizer");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"hostile\"\n[services.good]\nbase_url = \"{good}\"\ntokenizer = \"{}\"\n[services.bad]\nbase_url = \"{bad}\"\ntokenizer = \"{}\"\n[defaults]\nnum_prompts = 2\ndataset = {{ name = \"random\", input_len = 4, output_len = 3 }}\n[execution]\nresults_dir = \"{}\"\n",
            tok.display(),
            tok.display(),
            dir.join("results").display()
        ),
    )
    .unwrap();
    let summary = dir.join("step-summary.md");
    let junit = dir.join("junit.xml");
    let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .arg("run")
        .arg(&plan)
        .arg("--junit")
        .arg(&junit)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the bad service's case fails: {err}"
    );
    no_control("run's stdout", &out.stdout);
    no_control("run's stderr", &out.stderr);

    let batch = batch_dir(&dir.join("results"));
    // The result keeps the model id whole (JSON escapes it).
    let result = std::fs::read_dir(&batch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("good"))
        .map(|p| crate::support::read_json(&p))
        .unwrap();
    assert_eq!(result["model_id"], Value::String(model_id()));

    let md = std::fs::read_to_string(batch.join("report.md")).unwrap();
    assert!(
        md.contains("onerror"),
        "the model id is shown (escaped): {md}"
    );
    safe_markdown("report.md", &md);
    safe_markdown(
        "the step summary",
        &std::fs::read_to_string(&summary).unwrap(),
    );

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("junit.xml: {e}\n{xml}"));
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .and_then(|n| n.attribute("message"))
        .unwrap_or_default();
    assert!(
        failure.contains("onerror"),
        "the error is in the failure message: {failure}"
    );

    let csv_text = std::fs::read_to_string(batch.join("summary.csv")).unwrap();
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(csv_text.as_bytes());
    let mut model_cells = 0;
    for rec in rdr.records() {
        for cell in rec.unwrap().iter() {
            let first = cell.chars().next();
            let formula = matches!(first, Some('=' | '+' | '-' | '@' | '\t' | '\r'))
                && cell.parse::<f64>().is_err();
            assert!(
                !formula,
                "summary.csv has a cell a spreadsheet evaluates: {cell:?}"
            );
            assert!(!cell.contains('\0'), "{cell:?}");
            model_cells += usize::from(cell.contains("HYPERLINK"));
        }
    }
    assert!(model_cells > 0, "the model id is in summary.csv, as text");

    for entry in std::fs::read_dir(&batch).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            name.len() <= 200 && name.chars().all(|c| c.is_ascii_graphic()),
            "{name:?}"
        );
    }

    // bench: the 300-character model id names the result file, printable and bounded.
    for naming in [vec![], vec!["--result-dir", "vllm-names"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
            .args(["bench", "--base-url", &good, "--tokenizer"])
            .arg(&tok)
            .args([
                "--num-prompts",
                "2",
                "--random-input-len",
                "4",
                "--random-output-len",
                "3",
                "--save-result",
            ])
            .args(&naming)
            .current_dir(&dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{err}");
        no_control("bench's stdout", &out.stdout);
        no_control("bench's stderr", &out.stderr);
        let written = err
            .lines()
            .find_map(|l| l.strip_prefix("result written to "))
            .expect("the result is written");
        let name = std::path::Path::new(written)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            name.len() <= 255 && name.chars().all(|c| c.is_ascii_graphic()),
            "{name:?}"
        );
        let r = crate::support::read_json(&dir.join(written));
        assert_eq!(
            r["model_id"],
            Value::String(model_id()),
            "the whole id stays inside"
        );
    }

    // probe prints the model list and the version.
    let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(["probe", &bad])
        .output()
        .unwrap();
    no_control("probe's stdout", &out.stdout);
    no_control("probe's stderr", &out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}
