//! JUnit XML for CI: one test case per case × SLO (failure: observed vs target), one
//! per case that could not run, and one per metric compared with the baseline
//! (failure: a regression past its threshold).

use super::view::ReportView;

/// Every string as XML 1.0 allows it (a server's error may hold control bytes, which
/// XML forbids even as references: a CI system would reject the whole file).
fn esc(s: &str) -> String {
    crate::escape::xml(s)
}

pub fn junit_xml(r: &ReportView) -> String {
    let mut cases = String::new();
    let (mut tests, mut failures) = (0, 0);
    for c in &r.cases {
        if c.status != "ok" {
            tests += 1;
            failures += 1;
            cases.push_str(&format!(
                "  <testcase classname=\"{}\" name=\"run\"><failure message=\"{}\"/></testcase>\n",
                esc(&c.id),
                esc(c.error.as_deref().unwrap_or("failed"))
            ));
            continue;
        }
        for v in &c.verdicts {
            tests += 1;
            if let Some(why) = &v.unsteady {
                // Neither a pass nor a failure: JUnit's skip, with the reason.
                cases.push_str(&format!(
                    "  <testcase classname=\"{}\" name=\"{}\"><skipped message=\"not steady: {}\"/></testcase>\n",
                    esc(&c.id),
                    esc(&v.key),
                    esc(why)
                ));
            } else if v.pass {
                cases.push_str(&format!(
                    "  <testcase classname=\"{}\" name=\"{}\"/>\n",
                    esc(&c.id),
                    esc(&v.key)
                ));
            } else {
                failures += 1;
                let observed = v
                    .actual
                    .map_or("missing".to_string(), |a| format!("{a:.2}{}", v.unit));
                cases.push_str(&format!(
                    "  <testcase classname=\"{}\" name=\"{}\"><failure message=\"observed {} vs target {}\"/></testcase>\n",
                    esc(&c.id),
                    esc(&v.key),
                    esc(&observed),
                    esc(&v.target)
                ));
            }
        }
    }
    // Each series the history's trend judged a regression (the run exits 4 on them).
    for line in r.trend.iter().flat_map(|t| &t.lines) {
        tests += 1;
        failures += 1;
        let (series, what) = line.split_once(": ").unwrap_or((line, ""));
        cases.push_str(&format!(
            "  <testcase classname=\"trend\" name=\"{}\"><failure message=\"regression in the history's trend: {}\"/></testcase>\n",
            esc(series),
            esc(what)
        ));
    }
    if let Some(cmp) = &r.comparison {
        for u in cmp.unmatched.iter().filter(|_| cmp.unmatched_fail) {
            tests += 1;
            failures += 1;
            cases.push_str(&format!(
                "  <testcase classname=\"{}\" name=\"baseline\"><failure message=\"no counterpart in the baseline {}\"/></testcase>\n",
                esc(u),
                esc(&cmp.baseline)
            ));
        }
        for d in &cmp.rows {
            tests += 1;
            let name = format!("baseline {}", d.metric);
            if d.regression {
                failures += 1;
                cases.push_str(&format!(
                    "  <testcase classname=\"{}\" name=\"{}\"><failure message=\"regression: {:.2} vs baseline {:.2} ({:+.1}%, threshold {:.1}%, p {})\"/></testcase>\n",
                    esc(&d.case),
                    esc(&name),
                    d.cand,
                    d.base,
                    d.delta_pct,
                    d.threshold_pct,
                    super::compare::p_text(d.p_value)
                ));
            } else {
                cases.push_str(&format!(
                    "  <testcase classname=\"{}\" name=\"{}\"/>\n",
                    esc(&d.case),
                    esc(&name)
                ));
            }
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"benchplan {}\" tests=\"{tests}\" failures=\"{failures}\">\n{cases}</testsuite>\n",
        esc(&r.plan)
    )
}
