//! Stopping a case, in two steps: *drain* (send nothing more; requests in flight may
//! finish) and *abort* (abandon those in flight too). Ctrl-C drains, then aborts when
//! the grace period ends; a case timeout aborts at once. The dispatcher thread polls
//! the level; request tasks wait on it, so a stopped case sends nothing more and lets
//! go of its sockets before the next case starts.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

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
    /// The tasks in [`Stop::unless_aborted`], woken by an abort: a slab of wakers and
    /// its free slots. Each request registers once, not on every wake-up (a watch
    /// receiver polled on every chunk took a lock per chunk on the hot path).
    waiting: Mutex<(Vec<Option<Waker>>, Vec<usize>)>,
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
                waiting: Mutex::new((Vec::new(), Vec::new())),
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
        let wakers: Vec<Waker> = {
            let mut w = self.inner.waiting.lock().expect("stop lock");
            w.0.iter_mut().filter_map(Option::take).collect()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Runs `fut` to its end, or until the case aborts (then None). Each poll costs
    /// two atomic loads once the task's waker is registered; the lock is taken when it
    /// registers (once a request, unless its waker changes) and when it ends.
    pub async fn unless_aborted<F: Future>(&self, fut: F) -> Option<F::Output> {
        /// Frees the slab slot however the future ends (finished, aborted, dropped).
        struct Slot<'a> {
            inner: &'a Inner,
            key: Option<usize>,
            waker: Option<Waker>,
        }
        impl Drop for Slot<'_> {
            fn drop(&mut self) {
                if let Some(k) = self.key {
                    let mut w = self.inner.waiting.lock().expect("stop lock");
                    w.0[k] = None;
                    w.1.push(k);
                }
            }
        }
        let mut fut = std::pin::pin!(fut);
        let mut slot = Slot {
            inner: &self.inner,
            key: None,
            waker: None,
        };
        std::future::poll_fn(|cx| {
            if self.aborted() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                let waker = cx.waker().clone();
                let mut w = self.inner.waiting.lock().expect("stop lock");
                let key = match slot.key {
                    Some(k) => k,
                    None => match w.1.pop() {
                        Some(k) => k,
                        None => {
                            w.0.push(None);
                            w.0.len() - 1
                        }
                    },
                };
                w.0[key] = Some(waker.clone());
                slot.key = Some(key);
                slot.waker = Some(waker);
            }
            // An abort between the check above and the registration woke nobody here:
            // look again now that the waker is where abort() looks.
            if self.aborted() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await
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
            tokio::spawn(async move { s.unless_aborted(std::future::pending::<()>()).await })
        };
        s.drain();
        assert!(s.draining() && !s.aborted());
        s.until_draining().await; // already there: returns at once
        s.abort();
        s.drain(); // no way back down
        assert!(s.aborted());
        waiter.await.unwrap();
    }

    #[tokio::test]
    async fn an_abort_ends_waiting_futures_and_frees_their_slots() {
        let s = Stop::new();
        // Finished before any abort: its value, and its slot freed for the next.
        assert_eq!(s.unless_aborted(async { 7 }).await, Some(7));
        let pending = |s: &Stop| {
            let s = s.clone();
            tokio::spawn(async move { s.unless_aborted(std::future::pending::<()>()).await })
        };
        let (a, b) = (pending(&s), pending(&s));
        tokio::task::yield_now().await;
        assert_eq!(
            s.inner.waiting.lock().unwrap().0.iter().flatten().count(),
            2
        );
        s.drain();
        tokio::task::yield_now().await;
        assert!(!a.is_finished(), "a drain lets requests in flight finish");
        s.abort();
        assert_eq!(a.await.unwrap(), None);
        assert_eq!(b.await.unwrap(), None);
        {
            let w = s.inner.waiting.lock().unwrap();
            assert!(w.0.iter().all(Option::is_none) && w.1.len() == w.0.len());
        }
        // After the abort nothing starts.
        assert_eq!(s.unless_aborted(async { 1 }).await, None);
    }
}
