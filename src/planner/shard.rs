//! Case sharding: which cases of a plan one of N independent processes runs.
//!
//! Each shard works its share out from the plan and (I, N) alone, with no contact with
//! its siblings (as k6's execution segments do). By default the unit is the service:
//! two shards running at once against one endpoint would each measure a server loaded
//! by the other, so a service's cases all go to one shard. `by case` splits a service's
//! cases too, for users whose "services" are separate endpoints anyway, and `by repeat`
//! splits even one case's repeats (`execution.repeats`), whose runs the merge pools.

use serde::Serialize;

use super::case::Case;

/// What a shard is cut along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ShardBy {
    /// Every case of a service on one shard (the default: shards never share an endpoint).
    #[default]
    Service,
    /// Cases dealt out one by one, whatever their service.
    Case,
    /// Each repeat of each case dealt out on its own: one case's runs on several shards.
    Repeat,
}

impl ShardBy {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardBy::Service => "service",
            ShardBy::Case => "case",
            ShardBy::Repeat => "repeat",
        }
    }
}

/// Shard `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
    pub by: ShardBy,
}

impl Shard {
    /// Reads `I/N` (0-based I, as Kubernetes' JOB_COMPLETION_INDEX counts).
    pub fn parse(text: &str, by: ShardBy) -> Result<Shard, String> {
        let (i, n) = text
            .split_once('/')
            .ok_or_else(|| format!("--shard `{text}` is not I/N (such as 0/3)"))?;
        let index: usize = i
            .trim()
            .parse()
            .map_err(|_| format!("--shard `{text}`: `{i}` is not a shard index"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("--shard `{text}`: `{n}` is not a shard count"))?;
        Shard::new(index, count, by)
    }

    pub fn new(index: usize, count: usize, by: ShardBy) -> Result<Shard, String> {
        if count == 0 {
            return Err("the shard count must be at least 1".into());
        }
        if index >= count {
            return Err(format!(
                "shard index {index} is not below the shard count {count}: indexes count from 0 (0/{count} … {}/{count})",
                count - 1
            ));
        }
        Ok(Shard { index, count, by })
    }

    /// I and N from the environment of the engine that started this process: Kubernetes
    /// Indexed Jobs (`JOB_COMPLETION_INDEX`, with `count` given, since a pod does not see
    /// the Job's `completions`), GitLab `parallel` (`CI_NODE_INDEX`, 1-based, and
    /// `CI_NODE_TOTAL`), or `BENCHPLAN_SHARD_INDEX`/`BENCHPLAN_SHARD_COUNT`.
    pub fn from_env(
        count: Option<usize>,
        by: ShardBy,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Shard, String> {
        let num = |name: &str| -> Result<Option<usize>, String> {
            match var(name) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("${name} = `{v}` is not a number")),
            }
        };
        if let Some(i) = num("BENCHPLAN_SHARD_INDEX")? {
            let n = num("BENCHPLAN_SHARD_COUNT")?.or(count).ok_or(
                "BENCHPLAN_SHARD_INDEX is set but not BENCHPLAN_SHARD_COUNT (or --shard-count)",
            )?;
            return Shard::new(i, n, by);
        }
        if let Some(i) = num("JOB_COMPLETION_INDEX")? {
            let n = count.ok_or(
                "JOB_COMPLETION_INDEX is set: give the Job's `completions` as --shard-count",
            )?;
            return Shard::new(i, n, by);
        }
        if let Some(i) = num("CI_NODE_INDEX")? {
            let n = num("CI_NODE_TOTAL")?
                .or(count)
                .ok_or("CI_NODE_INDEX is set but not CI_NODE_TOTAL")?;
            if i == 0 {
                return Err("$CI_NODE_INDEX counts from 1 (GitLab), but it is 0".into());
            }
            return Shard::new(i - 1, n, by);
        }
        Err("--shard-from-env found none of JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs), CI_NODE_INDEX/CI_NODE_TOTAL (GitLab) or BENCHPLAN_SHARD_INDEX/BENCHPLAN_SHARD_COUNT".into())
    }
}

/// The shard of every case (same order as `cases`), from the cases and (N, by) alone.
///
/// By service, whole services are dealt largest first to the shard with the fewest
/// cases so far (ties to the lower index), so shards are even in cases, not only in
/// services; by case, case k goes to shard k mod N. More shards than units is an error:
/// a shard with nothing to run is a mistake in the job, not a result.
pub fn assign(cases: &[Case], count: usize, by: ShardBy) -> Result<Vec<usize>, String> {
    let mut units: Vec<(String, Vec<usize>)> = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        let key = match by {
            ShardBy::Service => c.service.clone(),
            ShardBy::Case | ShardBy::Repeat => c.id.clone(),
        };
        match units.iter_mut().find(|(u, _)| *u == key) {
            Some((_, members)) => members.push(k),
            None => units.push((key, vec![k])),
        }
    }
    if count > units.len() {
        let what = match by {
            ShardBy::Service => "services",
            ShardBy::Case | ShardBy::Repeat => "cases",
        };
        let hint = match by {
            ShardBy::Service => {
                " (use --shard-by case to split a service's cases, if its endpoints are separate)"
            }
            ShardBy::Case | ShardBy::Repeat => "",
        };
        return Err(format!(
            "{count} shards but the plan has only {} {what} to share among them; use at most {} shards{hint}",
            units.len(),
            units.len()
        ));
    }
    let mut shard_of = vec![0; cases.len()];
    match by {
        ShardBy::Case | ShardBy::Repeat => {
            for (k, s) in shard_of.iter_mut().enumerate() {
                *s = k % count;
            }
        }
        ShardBy::Service => {
            let mut order: Vec<usize> = (0..units.len()).collect();
            // Largest first; a stable sort keeps plan order among equals.
            order.sort_by_key(|&u| std::cmp::Reverse(units[u].1.len()));
            let mut load = vec![0usize; count];
            for (rank, u) in order.into_iter().enumerate() {
                // The first `count` units take one shard each, so none stays empty.
                let s = if rank < count {
                    rank
                } else {
                    (0..count).min_by_key(|&s| (load[s], s)).unwrap_or(0)
                };
                load[s] += units[u].1.len();
                for &k in &units[u].1 {
                    shard_of[k] = s;
                }
            }
        }
    }
    Ok(shard_of)
}

/// A case a shard runs: its index in the plan's cases and, cut by repeat, the repeats.
pub type Owned = (usize, Option<Vec<u64>>);

/// The cases one shard runs (indexes into `cases`) and, cut by repeat, which of each
/// one's `repeats` it runs (1-based; None: all of them). Repeat k of case i is run
/// number `i·repeats + k − 1`, dealt to shard `run mod N`, so one case's repeats land
/// on different shards.
pub fn share(cases: &[Case], repeats: u64, shard: Shard) -> Result<Vec<Owned>, String> {
    if shard.by != ShardBy::Repeat {
        let of = assign(cases, shard.count, shard.by)?;
        return Ok((0..cases.len())
            .filter(|&k| of[k] == shard.index)
            .map(|k| (k, None))
            .collect());
    }
    let repeats = repeats.max(1) as usize;
    let runs = cases.len() * repeats;
    if shard.count > runs {
        return Err(format!(
            "{} shards but the plan has only {runs} runs ({} cases × {repeats} repeats) to share among them; use at most {runs} shards",
            shard.count,
            cases.len()
        ));
    }
    Ok((0..cases.len())
        .filter_map(|i| {
            let mine: Vec<u64> = (1..=repeats)
                .filter(|k| (i * repeats + k - 1) % shard.count == shard.index)
                .map(|k| k as u64)
                .collect();
            (!mine.is_empty()).then_some((i, Some(mine)))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases(n: usize) -> Vec<Case> {
        (0..n)
            .map(|k| Case {
                id: format!("c{k}"),
                service: "s".into(),
                params: Default::default(),
                assignments: Vec::new(),
                repeats: None,
            })
            .collect()
    }

    #[test]
    fn repeats_of_one_case_spread_over_shards_and_each_runs_once() {
        let cs = cases(2);
        let shares: Vec<_> = (0..3)
            .map(|i| share(&cs, 3, Shard::new(i, 3, ShardBy::Repeat).unwrap()).unwrap())
            .collect();
        // Runs 0..6 = (c0 r1, c0 r2, c0 r3, c1 r1, c1 r2, c1 r3), dealt 0,1,2,0,1,2.
        assert_eq!(shares[0], vec![(0, Some(vec![1])), (1, Some(vec![1]))]);
        assert_eq!(shares[1], vec![(0, Some(vec![2])), (1, Some(vec![2]))]);
        assert_eq!(shares[2], vec![(0, Some(vec![3])), (1, Some(vec![3]))]);
        let e = share(&cs, 3, Shard::new(0, 7, ShardBy::Repeat).unwrap()).unwrap_err();
        assert!(e.contains("7 shards") && e.contains("only 6 runs"), "{e}");
        // By service, one shard has everything and no repeat list.
        let all = share(&cs, 3, Shard::new(0, 1, ShardBy::Service).unwrap()).unwrap();
        assert_eq!(all, vec![(0, None), (1, None)]);
    }
}
