//! Which of a plan's cases a run takes: its shard's share (`run --shard I/N`), then the
//! cases `--only` picks. Selection is planning: the command line only parses the flags
//! and prints what this says.

use super::shard::{Shard, share};
use super::{Case, Planned, only};

/// The cases a run takes, and what to tell the user about the cut.
#[derive(Debug, Clone)]
pub struct Selection {
    pub planned: Planned,
    /// `shard 1/3 (by service): 4 of 12 cases`, `--only: 2 of 4 cases`.
    pub notes: Vec<String>,
}

impl Planned {
    /// The cases of `shard` (all without one), then those `only` picks. A resumed
    /// folder (`resuming`) keeps the whole plan, whose hash must match, and runs the
    /// picked cases again there. An error is a cut that takes no case, or a shard that
    /// cannot be cut, in the user's words.
    pub fn select(
        &self,
        shard: Option<Shard>,
        only_patterns: &[String],
        resuming: bool,
    ) -> Result<Selection, String> {
        let mut planned = self.clone();
        let mut notes = Vec::new();
        if let Some(s) = shard {
            let owned = share(&self.cases, self.plan.execution.repeats, s)?;
            planned.cases = owned
                .into_iter()
                .map(|(k, reps)| Case {
                    repeats: reps,
                    ..self.cases[k].clone()
                })
                .collect();
            notes.push(format!(
                "shard {}/{} (by {}): {} of {} cases",
                s.index,
                s.count,
                s.by.as_str(),
                planned.cases.len(),
                self.cases.len()
            ));
        }
        if only_patterns.is_empty() {
            return Ok(Selection { planned, notes });
        }
        if !planned.cases.iter().any(|c| only::picks(only_patterns, c)) {
            return Err(only::none_picked(only_patterns, &planned.cases));
        }
        if !resuming {
            let before = planned.cases.len();
            planned.cases.retain(|c| only::picks(only_patterns, c));
            notes.push(format!("--only: {} of {before} cases", planned.cases.len()));
        }
        Ok(Selection { planned, notes })
    }
}
