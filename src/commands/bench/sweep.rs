//! vllm-bench's one-dimensional sweeps on `benchplan bench`: `--sweep-max-concurrency
//! 1,2,4` or `--sweep-request-rate 1,5,inf` runs the case once per value, prints one
//! summary table across the points (vllm-bench's columns, with
//! `--sweep-summary-percentiles` added), and with `--save-result` writes one vLLM
//! result per point plus `sweep_summary.json` and `sweep_summary.csv` beside them.
//! The verdict is the worst point's.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::args::BenchArgs;
use super::one::run_one;
use crate::exit::Exit;

/// The parameter a sweep varies and its values, as given.
struct Axis {
    /// The result key and its name in the table ("max_concurrency", "request_rate").
    key: &'static str,
    title: &'static str,
    values: Vec<String>,
}

fn axis(args: &BenchArgs) -> Result<Axis, String> {
    let list = |text: &str, flag: &str, rate: bool| -> Result<Vec<String>, String> {
        let values: Vec<String> = text.split(',').map(|v| v.trim().to_string()).collect();
        for v in &values {
            let ok = if rate {
                v == "inf" || v.parse::<f64>().is_ok_and(|r| r > 0.0 && r.is_finite())
            } else {
                v.parse::<u64>().is_ok_and(|c| c > 0)
            };
            if !ok {
                return Err(format!(
                    "{flag} `{text}`: `{v}` is not {}",
                    if rate {
                        "a positive rate or inf"
                    } else {
                        "a positive whole number"
                    }
                ));
            }
        }
        Ok(values)
    };
    match (&args.sweep_max_concurrency, &args.sweep_request_rate) {
        (Some(c), None) => Ok(Axis {
            key: "max_concurrency",
            title: "Max Concurrency",
            values: list(c, "--sweep-max-concurrency", false)?,
        }),
        (None, Some(r)) => Ok(Axis {
            key: "request_rate",
            title: "Request Rate",
            values: list(r, "--sweep-request-rate", true)?,
        }),
        _ => Err("give one of --sweep-max-concurrency and --sweep-request-rate".into()),
    }
}

fn percentiles(text: Option<&str>) -> Result<Vec<f64>, String> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|q| *q > 0.0 && *q <= 100.0)
                .ok_or_else(|| {
                    format!("--sweep-summary-percentiles `{text}`: `{p}` is not in (0, 100]")
                })
        })
        .collect()
}

/// The summary's columns: (header, result key).
fn columns(extra: &[f64]) -> Vec<(String, String)> {
    let mut c: Vec<(String, String)> = [
        ("Req/s", "request_throughput"),
        ("Tok/s", "output_throughput"),
        ("Total tok/s", "total_token_throughput"),
        ("P50 TTFT(ms)", "median_ttft_ms"),
        ("P50 TPOT(ms)", "median_tpot_ms"),
        ("P90 TTFT(ms)", "p90_ttft_ms"),
        ("P90 TPOT(ms)", "p90_tpot_ms"),
    ]
    .iter()
    .map(|(h, k)| (h.to_string(), k.to_string()))
    .collect();
    for &p in extra {
        if p == 50.0 || p == 90.0 {
            continue;
        }
        let n = crate::slo::percentile_label(p);
        c.push((format!("P{n} TTFT(ms)"), format!("p{n}_ttft_ms")));
        c.push((format!("P{n} TPOT(ms)"), format!("p{n}_tpot_ms")));
    }
    c.push(("Failed".into(), "failed".into()));
    c
}

pub fn run(args: &BenchArgs) -> Exit {
    let setup = axis(args).and_then(|a| {
        let extra = percentiles(args.sweep_summary_percentiles.as_deref())?;
        if args.result_filename.is_some() {
            return Err(
                "--result-filename names one file, and a sweep writes one per point; give --result-dir only".into(),
            );
        }
        if args.append_result {
            return Err("--append-result with a sweep would put every point in one file; use --save-result (one file per point and a sweep summary)".into());
        }
        Ok((a, extra))
    });
    let (axis, extra) = match setup {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    // Every point reports the percentiles the table shows.
    let mut pcts: Vec<f64> = args
        .metric_percentiles
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    for p in std::iter::once(90.0).chain(extra.iter().copied()) {
        if !pcts.contains(&p) {
            pcts.push(p);
        }
    }
    let dir = args.result_dir.clone().unwrap_or_else(|| {
        PathBuf::from("bench_results")
            .join("sweep")
            .join(crate::timefmt::stamp_underscore(
                std::time::SystemTime::now(),
            ))
    });
    println!("{:=^70}", format!(" {} Sweep ", axis.title));
    println!("Sweeping {} over {:?}", axis.key, axis.values);
    let mut exit = Exit::Ok;
    let mut points: Vec<Point> = Vec::new();
    for (i, v) in axis.values.iter().enumerate() {
        println!(
            "{:-^70}",
            format!(" Run {}/{}: {}={v} ", i + 1, axis.values.len(), axis.key)
        );
        let mut a = args.clone();
        a.sweep_max_concurrency = None;
        a.sweep_request_rate = None;
        a.result_dir = Some(dir.clone());
        a.metric_percentiles = pcts
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",");
        if axis.key == "max_concurrency" {
            let c: u64 = v.parse().expect("checked above");
            a.max_concurrency = Some(c);
            if let Some(f) = args.sweep_num_prompts_factor {
                a.num_prompts = c * f;
            }
        } else {
            a.request_rate = v.clone();
        }
        let one = run_one(&a);
        exit = exit.worst(one.exit);
        points.push((v.clone(), one.result, one.written));
    }
    let cols = columns(&extra);
    print!("{}", table(axis.title, &cols, &points));
    if args.save_result {
        let summary = summary_json(&axis, &extra, &cols, &points);
        let csv = summary_csv(axis.key, &cols, &points);
        let json_path = dir.join("sweep_summary.json");
        let wrote = crate::files::write_atomic(
            &json_path,
            &serde_json::to_vec_pretty(&summary).expect("summary serialises"),
        )
        .and_then(|()| crate::files::write_atomic(&dir.join("sweep_summary.csv"), csv.as_bytes()));
        match wrote {
            Ok(()) => eprintln!("sweep summary written to {}", json_path.display()),
            Err(e) => {
                eprintln!(
                    "error: cannot write the sweep summary in {}: {e}",
                    dir.display()
                );
                exit = exit.worst(Exit::Runtime);
            }
        }
    }
    exit
}

type Point = (String, Option<Map<String, Value>>, Option<PathBuf>);

fn cell(r: Option<&Map<String, Value>>, key: &str) -> Option<f64> {
    crate::results::read::CaseFile::new(r?).metric(key)
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |f| format!("{f:.2}"))
}

/// The point with the highest request throughput.
fn best(points: &[Point]) -> Option<(&str, f64)> {
    points
        .iter()
        .filter_map(|(v, r, _)| Some((v.as_str(), cell(r.as_ref(), "request_throughput")?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

fn table(title: &str, cols: &[(String, String)], points: &[Point]) -> String {
    let first = title.len().max(20);
    let widths: Vec<usize> = cols.iter().map(|(h, _)| h.len().max(10)).collect();
    let total = first + widths.iter().map(|w| w + 1).sum::<usize>();
    let mut out = format!("{:=^total$}\n{title:<first$}", " Sweep Summary ");
    for ((h, _), w) in cols.iter().zip(&widths) {
        out += &format!(" {h:>w$}");
    }
    out += &format!("\n{}\n", "-".repeat(total));
    for (v, r, _) in points {
        out += &format!("{v:<first$}");
        for ((_, k), w) in cols.iter().zip(&widths) {
            let text = match r {
                None => "error".to_string(),
                Some(_) if k == "failed" => fmt(cell(r.as_ref(), k)).replace(".00", ""),
                Some(_) => fmt(cell(r.as_ref(), k)),
            };
            out += &format!(" {text:>w$}");
        }
        out.push('\n');
    }
    out += &format!("{}\n", "=".repeat(total));
    if let Some((v, tp)) = best(points) {
        out += &format!("Best throughput: {tp:.2} req/s at {v}\n");
    }
    out
}

fn summary_json(axis: &Axis, extra: &[f64], cols: &[(String, String)], points: &[Point]) -> Value {
    let rows: Vec<Value> = points
        .iter()
        .map(|(v, r, file)| {
            let mut row = Map::new();
            row.insert(
                axis.key.into(),
                // A number as vLLM writes it; `inf` stays a string, as in vLLM's results.
                match (v.parse::<u64>(), v.parse::<f64>()) {
                    (Ok(n), _) => json!(n),
                    (_, Ok(f)) if f.is_finite() => json!(f),
                    _ => json!(v),
                },
            );
            row.insert("ran".into(), json!(r.is_some()));
            row.insert(
                "result_file".into(),
                json!(
                    file.as_deref()
                        .and_then(Path::file_name)
                        .map(|n| n.to_string_lossy())
                ),
            );
            for (_, k) in cols {
                row.insert(k.clone(), json!(cell(r.as_ref(), k)));
            }
            Value::Object(row)
        })
        .collect();
    json!({
        "parameter": axis.key,
        "values": axis.values,
        "summary_percentiles": extra,
        "points": rows,
        "best": best(points).map(|(v, tp)| json!({axis.key: v, "request_throughput": tp})),
    })
}

fn summary_csv(key: &str, cols: &[(String, String)], points: &[Point]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let header: Vec<&str> = std::iter::once(key)
        .chain(cols.iter().map(|(_, k)| k.as_str()))
        .collect();
    let _ = w.write_record(&header);
    for (v, r, _) in points {
        let row: Vec<String> = std::iter::once(v.clone())
            .chain(
                cols.iter()
                    .map(|(_, k)| cell(r.as_ref(), k).map_or(String::new(), |f| f.to_string())),
            )
            .collect();
        let _ = w.write_record(&row);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_add_the_asked_percentiles_once() {
        let heads: Vec<String> = columns(&[90.0, 99.0, 99.9])
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(
            heads,
            [
                "Req/s",
                "Tok/s",
                "Total tok/s",
                "P50 TTFT(ms)",
                "P50 TPOT(ms)",
                "P90 TTFT(ms)",
                "P90 TPOT(ms)",
                "P99 TTFT(ms)",
                "P99 TPOT(ms)",
                "P99.9 TTFT(ms)",
                "P99.9 TPOT(ms)",
                "Failed"
            ]
        );
    }

    #[test]
    fn the_table_marks_missing_values_and_names_the_best_point() {
        let r = |tp: f64| {
            let mut m = Map::new();
            m.insert("request_throughput".into(), json!(tp));
            m.insert("failed".into(), json!(0));
            Some(m)
        };
        let points = vec![
            ("1".to_string(), r(3.5), None),
            ("2".to_string(), r(6.25), None),
            ("4".to_string(), None, None),
        ];
        let t = table("Max Concurrency", &columns(&[]), &points);
        assert!(t.contains("Best throughput: 6.25 req/s at 2"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("4 ") && l.contains("error")),
            "{t}"
        );
        assert!(
            t.lines()
                .any(|l| l.starts_with("1 ") && l.contains("3.50") && l.contains(" -")),
            "{t}"
        );
    }

    #[test]
    fn bad_lists_are_refused() {
        assert!(percentiles(Some("90,abc")).is_err());
        assert!(percentiles(Some("0")).is_err());
        assert_eq!(percentiles(Some("90, 99.5")).unwrap(), vec![90.0, 99.5]);
    }
}
