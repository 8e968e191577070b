//! The SLO search as a pure procedure over an evaluator: warmup at the minimum, an
//! exponential probe, a bisection, and a validation with more prompts that steps down
//! on failure. Every answer is a value that was measured and passed; reruns decide
//! verdicts that sit within the noise band; infrastructure failures are retried once
//! and never counted as SLO failures.

use std::future::Future;

use serde::Serialize;

/// The phases, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Warmup,
    Probe,
    Search,
    Validation,
}

/// One run to make.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub phase: Phase,
    /// Index of this run within its phase (1-based), for file names.
    pub index: usize,
    pub value: f64,
    pub prompts: u64,
}

/// What one run said.
#[derive(Debug, Clone, PartialEq)]
pub enum Eval {
    /// The run finished; `margin` is the smallest relative SLO margin (negative: a miss).
    Measured {
        pass: bool,
        margin: f64,
        violations: Vec<String>,
        judged: Vec<f64>,
        file: String,
    },
    /// The service did not answer (down, every request refused): not an SLO verdict.
    Infra(String),
    /// A signal stopped the run (the words say which): the search ends here, with the
    /// bracket found so far.
    Interrupted(String),
}

/// One measured run of the search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub phase: Phase,
    pub value: f64,
    pub num_prompts: u64,
    pub slo_pass: bool,
    pub margin: f64,
    pub violations: Vec<String>,
    pub file: String,
}

/// The search's bounds and budgets.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Concurrency is searched over integers, rates over reals.
    pub integer: bool,
    /// Searching the smallest value that passes (a concurrency that sustains a rate).
    pub smallest: bool,
    pub min: f64,
    pub max: f64,
    pub warmup_prompts: u64,
    pub probe: (f64, u64),
    pub bisect: (f64, u64),
    pub validation: (f64, u64),
    pub tolerance: f64,
    pub max_iterations: u64,
    pub validation_retries: u64,
    pub noise_band: f64,
}

/// How a search ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Found and validated.
    Validated,
    /// Every probed value passed up to the bound: the service is not saturated there.
    NotSaturated,
    /// Validation failed at every retry: the answer passed a search run, not validation.
    NotValidated,
    /// The SLOs fail even at the minimum load.
    FailsAtMinimum,
    /// The service stopped answering; the history holds what was measured.
    Infrastructure(String),
    /// A signal stopped the search; the history holds what was measured, and the
    /// bracket (highest pass, lowest fail) is as far as it got. No answer.
    Interrupted(String),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// A value that was measured and passed, or None.
    pub answer: Option<f64>,
    pub ending: Ending,
    pub highest_pass: Option<f64>,
    pub lowest_fail: Option<f64>,
    pub history: Vec<Step>,
    pub notes: Vec<String>,
}

fn prompts(budget: (f64, u64), value: f64, scale: u64) -> u64 {
    ((value * budget.0) as u64).max(budget.1) * scale
}

/// Runs the search; `eval` makes one run and returns its verdict.
pub async fn search<F, Fut>(cfg: &Config, mut eval: F) -> Outcome
where
    F: FnMut(Request) -> Fut,
    Fut: Future<Output = Eval>,
{
    let mut history: Vec<Step> = Vec::new();
    let mut notes = Vec::new();
    let mut counts = [0usize; 4];
    let mut scale = 1u64;
    let round = |v: f64| {
        if cfg.integer {
            v.round().max(cfg.min)
        } else {
            (v * 100.0).round() / 100.0
        }
    };

    // One verdict at `value`: reruns near a threshold, one retry on infrastructure failure.
    macro_rules! judge {
        ($phase:expr, $value:expr, $budget:expr) => {{
            let value = $value;
            let mut verdicts: Vec<(bool, Vec<f64>)> = Vec::new();
            let mut infra: Option<Ending> = None;
            let mut runs = 1;
            let mut i = 0;
            while i < runs {
                let idx = &mut counts[$phase as usize];
                *idx += 1;
                let req = Request { phase: $phase, index: *idx, value, prompts: $budget };
                let mut e = eval(req).await;
                if let Eval::Infra(_) = e {
                    notes.push(format!("{:?} at {value}: the service failed; retrying once", $phase));
                    *idx += 1;
                    e = eval(Request { index: *idx, ..req }).await;
                }
                match e {
                    Eval::Infra(msg) => {
                        infra = Some(Ending::Infrastructure(msg));
                        break;
                    }
                    Eval::Interrupted(msg) => {
                        infra = Some(Ending::Interrupted(msg));
                        break;
                    }
                    Eval::Measured { pass, margin, violations, judged, file } => {
                        history.push(Step { phase: $phase, value, num_prompts: req.prompts, slo_pass: pass, margin, violations, file });
                        verdicts.push((pass, judged));
                        if i == 0 && margin.abs() < cfg.noise_band {
                            runs = 3; // decide by the majority of three
                        }
                    }
                }
                i += 1;
            }
            if let Some(ending) = infra {
                return Outcome {
                    answer: match ending {
                        Ending::Interrupted(_) => None,
                        _ => best_pass(&history, cfg.smallest),
                    },
                    ending,
                    highest_pass: best_pass(&history, false),
                    lowest_fail: lowest_fail(&history),
                    history,
                    notes,
                };
            }
            if verdicts.len() > 1 {
                // Runs at one point that disagree by more than 20% call for more prompts.
                let spread = verdicts[0].1.iter().enumerate().map(|(k, _)| {
                    let xs: Vec<f64> = verdicts.iter().filter_map(|v| v.1.get(k).copied()).collect();
                    let (lo, hi) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(*x), b.max(*x)));
                    if lo > 0.0 { hi / lo - 1.0 } else { 0.0 }
                }).fold(0.0, f64::max);
                if spread > 0.2 {
                    scale *= 2;
                    notes.push(format!("runs at {value} differ by {:.0}% on a judged metric: prompts doubled from here on", spread * 100.0));
                }
            }
            verdicts.iter().filter(|v| v.0).count() * 2 > verdicts.len()
        }};
    }

    // Warmup at the minimum; a failure there is confirmed once before it is believed.
    let warm = judge!(Phase::Warmup, cfg.min, cfg.warmup_prompts * scale);
    if !warm && !judge!(Phase::Warmup, cfg.min, cfg.warmup_prompts * scale) && !cfg.smallest {
        return Outcome {
            answer: None,
            ending: Ending::FailsAtMinimum,
            highest_pass: None,
            lowest_fail: Some(cfg.min),
            history,
            notes,
        };
    }

    // Exponential probe (×4 a step; the warmup already measured the minimum): up until
    // the first failure (or, searching the smallest, the first pass).
    let (mut lo, mut hi): (Option<f64>, Option<f64>) = (None, None);
    let mut v = cfg.min;
    let mut iterations = 0;
    if warm && !cfg.smallest {
        lo = Some(cfg.min);
        v = round((cfg.min * 4.0).min(cfg.max));
    }
    loop {
        if lo == Some(v) {
            break; // the bound is the minimum itself
        }
        iterations += 1;
        let pass = judge!(Phase::Probe, v, prompts(cfg.probe, v, scale));
        let boundary = if cfg.smallest { pass } else { !pass };
        if boundary {
            hi = Some(v);
            break;
        }
        lo = Some(v);
        if v >= cfg.max || iterations >= cfg.max_iterations {
            break;
        }
        v = round((v * 4.0).min(cfg.max));
    }
    let Some(mut hi_v) = hi else {
        // Never crossed: all passed (largest-search) or all failed (smallest-search).
        let ending = if cfg.smallest {
            Ending::FailsAtMinimum
        } else {
            Ending::NotSaturated
        };
        let answer = if cfg.smallest { None } else { lo };
        return Outcome {
            answer,
            ending,
            highest_pass: best_pass(&history, false),
            lowest_fail: lowest_fail(&history),
            history,
            notes,
        };
    };
    let Some(mut lo_v) = lo else {
        if cfg.smallest {
            // The minimum already passes: it is the smallest.
            return validate(cfg, hi_v, history, notes, &mut counts, scale, &mut eval).await;
        }
        // The probe failed at the minimum although the warmup passed: noise at the edge.
        return Outcome {
            answer: best_pass(&history, false),
            ending: Ending::FailsAtMinimum,
            highest_pass: best_pass(&history, false),
            lowest_fail: Some(cfg.min),
            history,
            notes,
        };
    };

    // Bisection between the last value on the passing side and the first on the other.
    while iterations < cfg.max_iterations {
        let (pass_side, fail_side) = if cfg.smallest {
            (hi_v, lo_v)
        } else {
            (lo_v, hi_v)
        };
        if (fail_side - pass_side).abs() / pass_side.abs().max(f64::MIN_POSITIVE) <= cfg.tolerance {
            break;
        }
        // Geometric midpoint: the gap is relative, so this halves it in fewer runs.
        let mid = round((lo_v * hi_v).sqrt());
        if mid <= lo_v || mid >= hi_v {
            break; // adjacent integers: nothing left between them
        }
        iterations += 1;
        let pass = judge!(Phase::Search, mid, prompts(cfg.bisect, mid, scale));
        match (cfg.smallest, pass) {
            (false, true) | (true, false) => lo_v = mid,
            (false, false) | (true, true) => hi_v = mid,
        }
    }
    let candidate = if cfg.smallest { hi_v } else { lo_v };
    validate(
        cfg,
        candidate,
        history,
        notes,
        &mut counts,
        scale,
        &mut eval,
    )
    .await
}

fn best_pass(history: &[Step], smallest: bool) -> Option<f64> {
    let passes = history.iter().filter(|s| s.slo_pass).map(|s| s.value);
    if smallest {
        passes.reduce(f64::min)
    } else {
        passes.reduce(f64::max)
    }
}

/// The lowest failing value above the highest pass (the bracket's upper end), else the
/// lowest failure: a failure below a pass (a noisy run) does not bound the answer.
fn lowest_fail(history: &[Step]) -> Option<f64> {
    let fails = || history.iter().filter(|s| !s.slo_pass).map(|s| s.value);
    let above =
        best_pass(history, false).and_then(|hp| fails().filter(|v| *v > hp).reduce(f64::min));
    above.or_else(|| fails().reduce(f64::min))
}

/// Validation with more prompts, one step further to the safe side after each failure.
async fn validate<F, Fut>(
    cfg: &Config,
    mut value: f64,
    mut history: Vec<Step>,
    mut notes: Vec<String>,
    counts: &mut [usize; 4],
    scale: u64,
    eval: &mut F,
) -> Outcome
where
    F: FnMut(Request) -> Fut,
    Fut: Future<Output = Eval>,
{
    for _ in 0..cfg.validation_retries.max(1) {
        counts[Phase::Validation as usize] += 1;
        let req = Request {
            phase: Phase::Validation,
            index: counts[Phase::Validation as usize],
            value,
            prompts: prompts(cfg.validation, value, scale),
        };
        match eval(req).await {
            e @ (Eval::Infra(_) | Eval::Interrupted(_)) => {
                return Outcome {
                    answer: None,
                    ending: match e {
                        Eval::Interrupted(msg) => Ending::Interrupted(msg),
                        Eval::Infra(msg) => Ending::Infrastructure(msg),
                        Eval::Measured { .. } => unreachable!("matched above"),
                    },
                    highest_pass: best_pass(&history, false),
                    lowest_fail: lowest_fail(&history),
                    history,
                    notes,
                };
            }
            Eval::Measured {
                pass,
                margin,
                violations,
                file,
                ..
            } => {
                history.push(Step {
                    phase: Phase::Validation,
                    value,
                    num_prompts: req.prompts,
                    slo_pass: pass,
                    margin,
                    violations,
                    file,
                });
                if pass {
                    return Outcome {
                        answer: Some(value),
                        ending: Ending::Validated,
                        highest_pass: best_pass(&history, false),
                        lowest_fail: lowest_fail(&history),
                        history,
                        notes,
                    };
                }
            }
        }
        // One tolerance step to the safe side (at least one unit for integers).
        let step = (value * cfg.tolerance).max(if cfg.integer { 1.0 } else { 0.0 });
        let next = if cfg.smallest {
            value + step
        } else {
            value - step
        };
        let next = if cfg.integer {
            next.round()
        } else {
            (next * 100.0).round() / 100.0
        };
        if next < cfg.min || next > cfg.max {
            break;
        }
        value = next;
    }
    // Never validated: fall back to the safest value that passed any run, said plainly.
    notes.push(
        "validation failed at every retry; the answer passed a search run but not validation"
            .into(),
    );
    let fallback = history
        .iter()
        .filter(|s| {
            s.slo_pass
                && if cfg.smallest {
                    s.value >= value
                } else {
                    s.value <= value
                }
        })
        .map(|s| s.value)
        .reduce(|a, b| if cfg.smallest { a.min(b) } else { a.max(b) });
    Outcome {
        answer: fallback,
        ending: Ending::NotValidated,
        highest_pass: best_pass(&history, false),
        lowest_fail: lowest_fail(&history),
        history,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(integer: bool, smallest: bool) -> Config {
        Config {
            integer,
            smallest,
            min: 1.0,
            max: 1024.0,
            warmup_prompts: 50,
            probe: (3.0, 50),
            bisect: (6.0, 100),
            validation: (10.0, 200),
            tolerance: 0.05,
            max_iterations: 15,
            validation_retries: 3,
            noise_band: 0.0,
        }
    }

    /// An evaluator for a service whose SLO holds up to `capacity`.
    fn model(capacity: f64) -> impl FnMut(Request) -> std::future::Ready<Eval> {
        move |r: Request| {
            let margin = (capacity - r.value) / capacity;
            std::future::ready(Eval::Measured {
                pass: margin >= 0.0,
                margin,
                violations: vec![],
                judged: vec![],
                file: format!("{:?}_{}", r.phase, r.index),
            })
        }
    }

    fn run(c: &Config, f: impl FnMut(Request) -> std::future::Ready<Eval>) -> Outcome {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(search(c, f))
    }

    #[test]
    fn finds_the_largest_passing_value_within_12_runs() {
        for capacity in [1.0, 7.0, 25.0, 100.0, 500.0, 1000.0] {
            let o = run(&cfg(true, false), model(capacity));
            let a = o.answer.unwrap();
            assert!(
                a <= capacity && a >= capacity * 0.95 - 1.0,
                "capacity {capacity}: answer {a}"
            );
            assert!(
                o.history.iter().any(|s| s.value == a && s.slo_pass),
                "the answer was measured and passed"
            );
            let runs = o.history.len();
            assert!(runs <= 12, "capacity {capacity}: {runs} runs");
        }
    }

    #[test]
    fn edges_fail_at_minimum_and_not_saturated() {
        let o = run(&cfg(true, false), model(0.5));
        assert_eq!((o.answer, o.ending.clone()), (None, Ending::FailsAtMinimum));
        let o = run(
            &Config {
                max: 64.0,
                ..cfg(true, false)
            },
            model(1e9),
        );
        assert_eq!((o.answer, o.ending), (Some(64.0), Ending::NotSaturated));
    }

    #[test]
    fn validation_steps_down_and_only_measured_passes_are_answers() {
        // Validation runs (more prompts) see a lower capacity than the search did.
        let mut first = true;
        let f = move |r: Request| {
            let cap = if r.phase == Phase::Validation {
                if first {
                    first = false;
                    20.0
                } else {
                    40.0
                }
            } else {
                42.0
            };
            let margin = (cap - r.value) / cap;
            std::future::ready(Eval::Measured {
                pass: margin >= 0.0,
                margin,
                violations: vec![],
                judged: vec![],
                file: String::new(),
            })
        };
        let o = run(&cfg(true, false), f);
        assert_eq!(o.ending, Ending::Validated);
        let a = o.answer.unwrap();
        assert!(
            a < 42.0
                && o.history
                    .iter()
                    .any(|s| s.phase == Phase::Validation && s.value == a && s.slo_pass),
            "{o:?}"
        );
    }

    #[test]
    fn the_smallest_passing_value() {
        // Passes from 4 up (a concurrency that sustains a rate).
        let f = |r: Request| {
            let pass = r.value >= 4.0;
            std::future::ready(Eval::Measured {
                pass,
                margin: if pass { 0.5 } else { -0.5 },
                violations: vec![],
                judged: vec![],
                file: String::new(),
            })
        };
        let o = run(&cfg(true, true), f);
        assert_eq!(o.answer, Some(4.0), "{o:?}");
    }

    #[test]
    fn infrastructure_failures_stop_the_search_and_keep_the_history() {
        let f = |r: Request| {
            std::future::ready(if r.value >= 8.0 {
                Eval::Infra("connection refused".into())
            } else {
                Eval::Measured {
                    pass: true,
                    margin: 0.5,
                    violations: vec![],
                    judged: vec![],
                    file: String::new(),
                }
            })
        };
        let o = run(&cfg(true, false), f);
        assert!(matches!(o.ending, Ending::Infrastructure(_)), "{o:?}");
        assert_eq!(o.highest_pass, Some(4.0));
        assert!(
            o.history.iter().all(|s| s.slo_pass),
            "an outage is never an SLO failure"
        );
    }

    #[test]
    fn verdicts_near_the_threshold_are_decided_by_majority() {
        let mut calls = 0;
        let f = move |r: Request| {
            calls += 1;
            // At 16 the first run passes narrowly, the two reruns fail.
            let (pass, margin) = if r.value == 16.0 && r.phase == Phase::Probe {
                (calls % 3 == 1, 0.01)
            } else {
                (r.value < 16.0, if r.value < 16.0 { 0.5 } else { -0.5 })
            };
            std::future::ready(Eval::Measured {
                pass,
                margin,
                violations: vec![],
                judged: vec![r.value],
                file: String::new(),
            })
        };
        let o = run(
            &Config {
                noise_band: 0.05,
                ..cfg(true, false)
            },
            f,
        );
        assert_eq!(
            o.history
                .iter()
                .filter(|s| s.value == 16.0 && s.phase == Phase::Probe)
                .count(),
            3
        );
        assert!(o.answer.unwrap() < 16.0, "{o:?}");
    }
}
