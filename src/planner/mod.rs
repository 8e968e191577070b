//! The planner: a loaded plan → validated, fully resolved cases with stable ids.
//!
//! Every problem is collected (unknown keys, type errors, matrix mistakes,
//! cross-field rules, per-case rules), located in the file, and returned together.
//! A problem that repeats across many cases is reported once with a count.

pub mod case;
pub mod check;
pub mod expand;
pub mod only;
pub mod select;
pub mod shard;
pub mod tokenizer;

use std::collections::HashMap;

use indexmap::IndexMap;
use serde::Deserialize;

pub use case::Case;

use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::sim::{Preset, SimSpec};
use crate::plan::{CaseParams, Plan, PlanSource, Service, load};
use crate::slo::{Slo, floors};

/// A validated plan and its cases.
#[derive(Debug, Clone)]
pub struct Planned {
    pub plan: Plan,
    pub source: PlanSource,
    pub cases: Vec<Case>,
    /// The plan's SLOs, each with the key path it was written at, and last the
    /// success-rate floor every case is judged on (`min_success_rate`).
    pub slos: Vec<(Slo, String)>,
    /// How many of `slos` the plan wrote itself (not counting the floor's default).
    pub user_slos: usize,
    /// The SLOs an optimize search judges: its own block's, else the plan's.
    pub optimize_slos: Vec<(Slo, String)>,
    /// Each service's own SLOs (`services.NAME.slo`), by service name.
    pub service_slos: IndexMap<String, Vec<(Slo, String)>>,
    /// Which numbers the SLOs judge (`[slo] measure`): the whole run by default.
    pub slo_measure: crate::plan::Measure,
    /// Warnings (errors make planning fail).
    pub warnings: Vec<Diagnostic>,
}

impl Planned {
    /// The SLOs a case of `service` is judged on: the plan's, with the service's own
    /// added and replacing a plan SLO of the same key (one rule: service over plan).
    pub fn slos_for(&self, service: &str) -> Vec<(Slo, String)> {
        match self.service_slos.get(service) {
            None => self.slos.clone(),
            Some(own) => merge_slos(&self.slos, own),
        }
    }

    /// Number of services the cases use.
    pub fn service_count(&self) -> usize {
        let mut seen: Vec<&str> = self.cases.iter().map(|c| c.service.as_str()).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    }
}

/// The service used when a plan names none: the embedded simulator.
pub fn default_service() -> (String, Service) {
    let sim = SimSpec {
        preset: Some(Preset::Tiny),
        ..SimSpec::default()
    };
    (
        "sim".to_string(),
        Service {
            sim: Some(sim),
            ..Service::default()
        },
    )
}

/// Two cases with the same seed send the same random prompts; against one service with a
/// prefix cache, the later case measures the cache instead of prefill (vLLM #52884).
fn seed_warnings(plan: &Plan, cases: &[Case], diags: &mut Vec<Diagnostic>) {
    use crate::plan::Dataset;
    let mut seen: HashMap<(String, u64), &str> = HashMap::new();
    for c in cases {
        if !matches!(
            c.params.dataset,
            Dataset::Random(_)
                | Dataset::RandomMm(_)
                | Dataset::RandomRerank(_)
                | Dataset::PrefixRepetition(_)
        ) {
            continue;
        }
        // `run` resets the embedded simulator's prefix cache before each case; an
        // external server may not offer that.
        if plan.services[&c.service].is_sim() {
            continue;
        }
        if let Some(first) = seen.get(&(c.service.clone(), c.params.seed)) {
            diags.push(
                Diagnostic::warning(
                    c.origin_of("seed"),
                    format!(
                        "cases `{first}` and `{}` use seed {} against service `{}`, which may cache prefixes: repeated prompts measure the cache, not prefill",
                        c.id, c.params.seed, c.service
                    ),
                )
                .with_help("give each case its own seed (a `seed` matrix axis), or reset the cache between cases"),
            );
            return; // one warning says it
        }
        seen.insert((c.service.clone(), c.params.seed), &c.id);
    }
}

/// `plan` with each SLO of `own` replacing the plan's of the same key (kept in the
/// plan's order), the rest of `own` after them.
fn merge_slos(plan: &[(Slo, String)], own: &[(Slo, String)]) -> Vec<(Slo, String)> {
    let mut out: Vec<(Slo, String)> = plan
        .iter()
        .map(|p| {
            own.iter()
                .find(|(o, _)| o.key == p.0.key)
                .cloned()
                .unwrap_or_else(|| p.clone())
        })
        .collect();
    out.extend(
        own.iter()
            .filter(|(o, _)| !plan.iter().any(|(p, _)| p.key == o.key))
            .cloned(),
    );
    out
}

/// Loads, expands and validates. On failure, every diagnostic (errors and warnings).
pub fn plan(source: PlanSource) -> Result<Planned, Diagnostics> {
    // Every secret the plan holds is kept out of every file (see `redact`), whatever
    // writes it.
    crate::redact::register(crate::redact::secret_values(&source.value));
    let (mut plan, mut diags) = load::load(&source);
    if let Ok(v) = serde_json::to_value(&plan) {
        crate::redact::register(crate::redact::secret_values(&v));
    }
    if plan.services.is_empty() && !source.has("services") {
        let (name, svc) = default_service();
        plan.services.insert(name, svc);
    }
    // A plan-wide `client` is every service's unless it names its own (the service
    // then resolves as that client needs: vLLM loads its own tokenizer).
    if let Some(c) = plan.defaults.client {
        for svc in plan.services.values_mut() {
            svc.client.get_or_insert(c);
        }
    }
    if plan.services.is_empty() {
        diags.push(
            Diagnostic::error("services", "no services are defined")
                .with_help("add [services.local] sim = { preset = \"tiny\" }"),
        );
    }
    let mut slos = floors::parse_slos(plan.slo.as_ref(), "slo", &mut diags);
    let slo_measure = floors::slo_measure(plan.slo.as_ref(), &mut diags);
    let user_slos = slos
        .iter()
        .filter(|(s, _)| !floors::is_floor(&s.key))
        .count();
    // The plan's own SLOs decide what optimize may search; the floor is added after.
    check::check_plan(&plan, &source, &slos, &mut diags);
    slos.extend(floors::min_success_floor(&slos, &plan.defaults));
    slos.extend(floors::min_output_floor(&slos, &plan.defaults));
    // An optimize block's own SLOs are judged on the same cases (their errors were reported above).
    let optimize_slos = plan
        .optimize
        .as_ref()
        .map(|o| floors::parse_slos(o.slo.as_ref(), "optimize.slo", &mut Vec::new()))
        .unwrap_or_default();
    let judged: Vec<(Slo, String)> = slos.iter().chain(&optimize_slos).cloned().collect();
    let service_slos = service_slos(&plan, &mut diags);

    let had_errors = diags.iter().any(Diagnostic::is_error);
    let combos = expand::combos(&plan, &mut diags);
    let defaults_json = serde_json::to_value(&plan.defaults).expect("params serialise");
    let service_json = service_defaults(&plan, &defaults_json, &mut diags);

    let cases = expand_cases(
        &plan,
        &source,
        combos,
        Starts {
            defaults: &defaults_json,
            services: &service_json,
        },
        Judged {
            plan: &judged,
            services: &service_slos,
        },
        &mut diags,
    );
    seed_warnings(&plan, &cases, &mut diags);
    if cases.is_empty() && !had_errors && !diags.iter().any(Diagnostic::is_error) {
        diags.push(
            Diagnostic::error(
                "matrix",
                "the plan has no cases: every combination is excluded",
            )
            .with_help("loosen matrix.exclude"),
        );
    }
    for d in &mut diags {
        if d.location.is_none() {
            d.location = source.locate(&d.path);
        }
    }
    // Each problem once per command, however many rules or services found it.
    let mut seen = Vec::with_capacity(diags.len());
    diags.retain(|d| {
        let first = !seen.contains(d);
        if first {
            seen.push(d.clone());
        }
        first
    });
    if diags.iter().any(Diagnostic::is_error) {
        diags.sort_by_key(|d| d.severity);
        return Err(Diagnostics(diags));
    }
    let optimize_slos = if optimize_slos.is_empty() {
        slos.clone()
    } else {
        let mut o = optimize_slos;
        for floor in [floors::MIN_SUCCESS_RATE, floors::MIN_OUTPUT_RATIO] {
            if !o.iter().any(|(s, _)| s.key == floor) {
                o.extend(slos.iter().find(|(s, _)| s.key == floor).cloned());
            }
        }
        o
    };
    Ok(Planned {
        plan,
        source,
        cases,
        slos,
        user_slos,
        optimize_slos,
        service_slos,
        slo_measure,
        warnings: diags,
    })
}

/// Where a case's parameters start: the plan's defaults, or a service's own over them.
struct Starts<'a> {
    defaults: &'a serde_json::Value,
    services: &'a HashMap<&'a str, serde_json::Value>,
}

/// The SLOs a case is judged on: the plan's (with its floors and optimize's), and a
/// service's own over them.
struct Judged<'a> {
    plan: &'a [(Slo, String)],
    services: &'a IndexMap<String, Vec<(Slo, String)>>,
}

/// Every combination made a case: its parameters resolved against its service, checked,
/// named by its hash; a duplicate or a combination that does not deserialize is
/// reported once for all the cases it hits (with a count and the first case).
fn expand_cases(
    plan: &Plan,
    src: &PlanSource,
    combos: Vec<expand::Combo>,
    starts: Starts<'_>,
    slos: Judged<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Case> {
    // Per-case problems, deduplicated: (path, message) → (diagnostic, count, first case).
    let mut per_case: IndexMap<(String, String), (Diagnostic, usize, String)> = IndexMap::new();
    let defaults_json = starts.defaults;
    let service_json = starts.services;
    let judged = slos.plan;
    let service_slos = slos.services;
    let mut record = |d: Diagnostic, case: &str| {
        per_case
            .entry((d.path.clone(), d.message.clone()))
            .and_modify(|e| e.1 += 1)
            .or_insert((d, 1, case.to_string()));
    };
    let mut cases = Vec::with_capacity(combos.len());
    // Case hash → index of the first case with it (64-bit FNV: a false duplicate among
    // 100,000 cases has odds near 1 in 10^9).
    let mut seen: HashMap<u64, usize> = HashMap::with_capacity(combos.len());
    // Product cases all assign the same keys, so one working tree is overwritten in place.
    let mut working = defaults_json.clone();
    let source = src;
    for combo in combos {
        let service = &plan.services[&combo.service];
        let mut fresh;
        let json = match service_json.get(combo.service.as_str()) {
            // A service with its own defaults starts from them.
            Some(base) => {
                fresh = base.clone();
                &mut fresh
            }
            None if combo.included => {
                fresh = defaults_json.clone();
                &mut fresh
            }
            None => &mut working,
        };
        for a in &combo.values {
            if &*a.key != "service" {
                expand::set_path(json, &a.key, a.value.clone());
            }
        }
        let origin = combo
            .values
            .last()
            .map_or_else(|| "defaults".to_string(), |a| a.origin.to_string());
        let mut params = match CaseParams::deserialize(&*json) {
            Ok(p) => p,
            Err(e) => {
                record(
                    Diagnostic::error(origin, format!("these matrix values do not combine: {e}"))
                        .with_help("check that each axis fits the others (for example dataset fields of the dataset kind)"),
                    &combo.service,
                );
                continue;
            }
        };
        check::resolve_target(&mut params, service, |k| {
            combo.values.iter().any(|a| &*a.key == k)
        });
        let mut case = expand::make_case(combo, params);
        let mut found = Vec::new();
        // The service's own SLOs are judged on its cases (they imply percentiles too).
        let own;
        let judged_here = match service_slos.get(&case.service) {
            Some(o) => {
                own = merge_slos(judged, o);
                &own
            }
            None => judged,
        };
        check::check_case(&case, source, judged_here, &mut found);
        check::resolve_implied(&mut case.params, judged_here);
        let hash = expand::case_hash(&case.service, &case.params);
        case.id = expand::case_id(&case, hash);
        for d in found {
            record(d, &case.id);
        }
        if let Some(&first) = seen.get(&hash) {
            let first_id = cases
                .get(first)
                .map_or("", |c: &Case| c.id.as_str())
                .to_string();
            record(
                Diagnostic::error(
                    origin,
                    format!("duplicate case: same service and parameters as case `{first_id}`"),
                )
                .with_help("remove the repeated axis value or include entry"),
                &case.id,
            );
            continue;
        }
        seen.insert(hash, cases.len());
        cases.push(case);
    }
    for (_, (mut d, count, first)) in per_case {
        d.message = if count > 1 {
            format!("{} ({count} cases, first: {first})", d.message)
        } else {
            format!("{} (case {first})", d.message)
        };
        diags.push(d);
    }
    cases
}

/// Each service's own SLOs, checked as the plan's are.
fn service_slos(plan: &Plan, diags: &mut Vec<Diagnostic>) -> IndexMap<String, Vec<(Slo, String)>> {
    let mut out = IndexMap::new();
    for (name, svc) in &plan.services {
        if let Some(spec) = &svc.slo {
            let at = crate::plan::source::join_key(
                &crate::plan::source::join_key("services", name),
                "slo",
            );
            out.insert(name.clone(), floors::parse_slos(Some(spec), &at, diags));
        }
    }
    out
}

/// Each service's starting point: the plan's defaults with its own `defaults` over them
/// (a key path replaces what is there, as a matrix value does); an error for defaults
/// that make no case parameters.
fn service_defaults<'p>(
    plan: &'p Plan,
    defaults_json: &serde_json::Value,
    diags: &mut Vec<Diagnostic>,
) -> HashMap<&'p str, serde_json::Value> {
    let service_json: HashMap<&str, serde_json::Value> = plan
        .services
        .iter()
        .filter(|(_, s)| !s.defaults.is_empty())
        .map(|(name, s)| {
            let mut j = defaults_json.clone();
            for (k, v) in &s.defaults {
                expand::set_path(&mut j, k, v.clone());
            }
            (name.as_str(), j)
        })
        .collect();
    for (name, j) in &service_json {
        if let Err(e) = CaseParams::deserialize(j) {
            diags.push(
                Diagnostic::error(
                    crate::plan::source::join_key(
                        &crate::plan::source::join_key("services", name),
                        "defaults",
                    ),
                    format!("these defaults do not make case parameters: {e}"),
                )
                .with_help(
                    "write them as [defaults] takes them (`benchplan schema` lists the keys)",
                ),
            );
        }
    }
    service_json
}
