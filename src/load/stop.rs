//! Stopping a case, in two steps: *drain* (send nothing more; requests in flight may
//! finish) and *abort* (abandon those in flight too). Ctrl-C drains, then aborts when
//! the grace period ends; a case timeout aborts at once. The dispatcher thread polls
//! the level; request tasks wait on it, so a stopped case sends nothing more and lets
//! go of its sockets before the next case starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::watch;

const RUN: u8 = 0;
const DRAIN: u8 = 1;
const ABORT: u8 = 2;

/// A case's stop signal; clones share it.
#[derive(Debug, Clone)]
pub struct Stop {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    level: AtomicU8,
    tx: watch::Sender<u8>,
}

impl Default for Stop {
    fn default() -> Self {
        Stop::new()
    }
}

impl Stop {
    pub fn new() -> Stop {
        Stop {
            inner: Arc::new(Inner {
                level: AtomicU8::new(RUN),
                tx: watch::channel(RUN).0,
            }),
        }
    }

    fn raise(&self, to: u8) {
        self.inner.level.fetch_max(to, Ordering::SeqCst);
        self.inner.tx.send_if_modified(|l| {
            let changed = *l < to;
            *l = (*l).max(to);
            changed
        });
    }

    /// Send no new request; those in flight may finish.
    pub fn drain(&self) {
        self.raise(DRAIN);
    }

    /// Abandon the requests in flight too.
    pub fn abort(&self) {
        self.raise(ABORT);
    }

    /// Whether new requests must not be sent (drained or aborted).
    pub fn draining(&self) -> bool {
        self.inner.level.load(Ordering::SeqCst) >= DRAIN
    }

    pub fn aborted(&self) -> bool {
        self.inner.level.load(Ordering::SeqCst) >= ABORT
    }

    async fn until(&self, level: u8) {
        let mut rx = self.inner.tx.subscribe();
        // The sender lives as long as `self`: wait_for ends only when the level comes.
        let _ = rx.wait_for(|l| *l >= level).await;
    }

    /// Resolves once the case drains (or aborts).
    pub async fn until_draining(&self) {
        self.until(DRAIN).await
    }

    /// Resolves once the case aborts.
    pub async fn until_aborted(&self) {
        self.until(ABORT).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn levels_only_rise_and_waiters_wake() {
        let s = Stop::new();
        assert!(!s.draining() && !s.aborted());
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move { s.until_aborted().await })
        };
        s.drain();
        assert!(s.draining() && !s.aborted());
        s.until_draining().await; // already there: returns at once
        s.abort();
        s.drain(); // no way back down
        assert!(s.aborted());
        waiter.await.unwrap();
    }
}
