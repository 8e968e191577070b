//! The signals that end a run early, handled alike: SIGINT (Ctrl-C), SIGTERM (what
//! Kubernetes sends a pod it deletes or preempts, and `docker stop`) and SIGHUP (a
//! closed terminal or SSH session). The first one stops sending; requests in flight
//! get the grace period (5 s) and what finished is kept; results, report, JUnit and
//! step summary are written; the exit code is 128 + the first signal's number (130,
//! 143, 129). A second signal abandons what is still in flight. That fits inside
//! Kubernetes' default 30 s termination grace period.

use crate::exit::Exit;

/// A signal that stops a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
    HangUp,
}

impl StopSignal {
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::HangUp => "SIGHUP",
        }
    }

    /// The exit code a run it stopped ends with.
    pub fn exit(self) -> Exit {
        match self {
            StopSignal::Interrupt => Exit::Interrupted,
            StopSignal::Terminate => Exit::Terminated,
            StopSignal::HangUp => Exit::HungUp,
        }
    }
}

/// The stop signals of this process, received from the moment this is made (until
/// then a signal has its default effect).
pub struct Signals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

#[cfg(unix)]
async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

impl Signals {
    /// Starts listening; must run inside a tokio runtime.
    pub fn listen() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next stop signal.
    pub async fn next(&mut self) -> StopSignal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = recv(&mut self.int) => StopSignal::Interrupt,
                _ = recv(&mut self.term) => StopSignal::Terminate,
                _ = recv(&mut self.hup) => StopSignal::HangUp,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            StopSignal::Interrupt
        }
    }
}
