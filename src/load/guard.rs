//! A panic inside one request must not lose its record or take the run down: the
//! request's future runs under [`CatchPanic`], and a panic becomes a failed sample of
//! kind `client_panic` with the panic's message (a bug to report: such a run exits 1).

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls `F`, turning a panic into `Err(message)`.
pub struct CatchPanic<F>(Pin<Box<F>>);

impl<F: Future> CatchPanic<F> {
    pub fn new(f: F) -> CatchPanic<F> {
        CatchPanic(Box::pin(f))
    }
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        // AssertUnwindSafe: after a panic the future is never polled again.
        match catch_unwind(AssertUnwindSafe(move || inner.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// The text of a panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_message() {
        let ok = CatchPanic::new(async { 7 }).await;
        assert_eq!(ok, Ok(7));
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {})); // keep the test's output clean
        let bad = CatchPanic::new(async {
            tokio::task::yield_now().await;
            let v: Vec<u8> = Vec::new();
            v[3]
        })
        .await;
        std::panic::set_hook(prev);
        assert!(bad.unwrap_err().contains("index out of bounds"));
    }
}
