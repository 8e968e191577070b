//! A run's interrupt ([`RunControl`]): the signals that stop it, the cases it drains,
//! and the exit code a signal gives. Shared by the executor's cases and `optimize`.

use std::sync::{Arc, Mutex};

use crate::exit::Exit;
use crate::load::stop::Stop;

/// The run's interrupt: Ctrl-C drains every running case and starts no new one; a
/// second Ctrl-C abandons what is still in flight.
#[derive(Debug, Default)]
pub struct RunControl {
    run: Stop,
    cases: Mutex<Vec<Stop>>,
    /// The signal that stopped the run first (it decides the exit code).
    by: Mutex<Option<crate::signals::StopSignal>>,
    /// A result could not be written: no more traffic (see [`RunControl::halt`]).
    halted: std::sync::atomic::AtomicBool,
}

impl RunControl {
    /// A stop signal for a case starting now (already drained after an interrupt).
    pub fn case_stop(&self) -> Stop {
        let s = Stop::new();
        if self.run.draining() {
            s.drain();
        }
        let mut cases = self.cases.lock().expect("stop list");
        cases.retain(|c| !c.aborted());
        cases.push(s.clone());
        s
    }

    pub fn interrupted(&self) -> bool {
        self.run.draining()
    }

    /// No new case starts: interrupted, or halted.
    pub fn stopping(&self) -> bool {
        self.interrupted() || self.halted()
    }

    pub fn halted(&self) -> bool {
        self.halted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A result could not be written (a full disk, a read-only folder): the running
    /// cases stop sending, keep what finishes, and no new case starts. Not a signal:
    /// the exit code is a runtime error's.
    pub fn halt(&self) {
        self.halted.store(true, std::sync::atomic::Ordering::SeqCst);
        for c in self.cases.lock().expect("stop list").iter() {
            c.drain();
        }
    }

    /// The exit code of a run this stopped: 128 + the first signal (130 for Ctrl-C).
    pub fn interrupt_exit(&self) -> Exit {
        self.by
            .lock()
            .expect("signal")
            .map_or(Exit::Interrupted, crate::signals::StopSignal::exit)
    }

    /// Handles this process's stop signals from now on (a signal ignored when the
    /// process started too): each one says `what` happens on stderr and drains (the
    /// first) or aborts (the next). Must run inside a tokio runtime.
    pub fn listen(self: &Arc<Self>, what: &'static str) {
        let ctl = self.clone();
        let mut signals = crate::signals::Signals::listen();
        tokio::spawn(async move {
            loop {
                let s = signals.next().await;
                eprintln!("\n{}: {what}", s.name());
                ctl.signalled(s);
            }
        });
    }

    /// The name of the signal that stopped the run first (`SIGINT` when none did).
    pub fn signal_name(&self) -> &'static str {
        self.by
            .lock()
            .expect("signal")
            .map_or("SIGINT", crate::signals::StopSignal::name)
    }

    /// A stop signal arrived: drain (the first time) or abort (the next).
    pub fn signalled(&self, s: crate::signals::StopSignal) {
        self.by.lock().expect("signal").get_or_insert(s);
        self.interrupt();
    }

    /// Ctrl-C: drain (the first time) or abort (the second).
    pub fn interrupt(&self) {
        let again = self.run.draining();
        self.run.drain();
        for c in self.cases.lock().expect("stop list").iter() {
            if again {
                c.abort();
            } else {
                c.drain();
            }
        }
    }
}
