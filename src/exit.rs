//! How a command ended. Every command returns an [`Exit`]; only `main` turns it into
//! the process exit code, so the codes live here, below the command line, where the
//! commands that decide them can reach them without importing `cli`.
//!
//! The codes are stable and documented in the README's "Exit codes" table.

/// A command's verdict, with its process exit code as the discriminant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything ran and every verdict passed.
    Ok = 0,
    /// A tool or service error: something could not be measured.
    Runtime = 1,
    /// A bad plan, file or command line: nothing was sent.
    BadPlan = 2,
    /// Measured, and an SLO (or the minimum success rate) was not met.
    SloViolated = 3,
    /// Measured, and a result regressed against the baseline.
    Regression = 4,
    /// Measured, nothing regressed, but a verdict was inconclusive because the
    /// measuring machine was busy; only with `report.exit_on_inconclusive` (else 0).
    Inconclusive = 5,
    /// Stopped by Ctrl-C (SIGINT); what finished was saved (128 + SIGINT, as shells report it).
    Interrupted = 130,
    /// Stopped by SIGTERM (Kubernetes, `docker stop`), handled as SIGINT (128 + 15).
    Terminated = 143,
    /// Stopped by SIGHUP (a closed terminal), handled as SIGINT (128 + 1).
    HungUp = 129,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// How much a verdict outranks another when one run has several: a bad plan, an
    /// interruption, a runtime error (the numbers are incomplete), then an SLO failure,
    /// then a regression. The README states this order; the final line of `run` prints the
    /// counts of both SLO failures and regressions, so neither hides the other.
    fn rank(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Inconclusive => 1,
            Exit::Regression => 2,
            Exit::SloViolated => 3,
            Exit::Runtime => 4,
            // Whichever signal stopped the run first decides (see `worst`).
            Exit::Interrupted | Exit::Terminated | Exit::HungUp => 5,
            Exit::BadPlan => 6,
        }
    }

    /// The verdict that outranks the other (see [`Exit::rank`]).
    pub fn worst(self, other: Exit) -> Exit {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    pub fn is_ok(self) -> bool {
        self == Exit::Ok
    }

    /// A measured run's verdict from what it found, by the one precedence rule: a
    /// case not measured (or an output not written), then an SLO failure, then a
    /// regression (baseline or trend). Signals are the caller's to add.
    pub fn of_findings(not_measured: bool, slo_failures: usize, regressions: usize) -> Exit {
        let mut code = Exit::Ok;
        if regressions > 0 {
            code = code.worst(Exit::Regression);
        }
        if slo_failures > 0 {
            code = code.worst(Exit::SloViolated);
        }
        if not_measured {
            code = code.worst(Exit::Runtime);
        }
        code
    }

    /// Every verdict, in the order of the README's table.
    pub const ALL: [Exit; 9] = [
        Exit::Ok,
        Exit::Runtime,
        Exit::BadPlan,
        Exit::SloViolated,
        Exit::Regression,
        Exit::Inconclusive,
        Exit::Interrupted,
        Exit::Terminated,
        Exit::HungUp,
    ];

    /// The verdict a recorded exit code stands for (a manifest's `verdict.exit`).
    pub fn from_code(code: i64) -> Option<Exit> {
        Exit::ALL.into_iter().find(|e| i64::from(e.code()) == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_precedence_is_documented() {
        assert_eq!(Exit::ALL.map(Exit::code), [0, 1, 2, 3, 4, 5, 130, 143, 129]);
        assert!(
            Exit::ALL
                .iter()
                .all(|e| Exit::from_code(e.code().into()) == Some(*e))
        );
        assert_eq!(Exit::Terminated.worst(Exit::Runtime), Exit::Terminated);
        assert_eq!(Exit::Terminated.worst(Exit::Interrupted), Exit::Terminated);
        assert_eq!(Exit::Regression.worst(Exit::SloViolated), Exit::SloViolated);
        assert_eq!(Exit::SloViolated.worst(Exit::Regression), Exit::SloViolated);
        assert_eq!(Exit::Runtime.worst(Exit::SloViolated), Exit::Runtime);
        assert_eq!(Exit::Ok.worst(Exit::Regression), Exit::Regression);
        assert_eq!(Exit::BadPlan.worst(Exit::Runtime), Exit::BadPlan);
    }
}
