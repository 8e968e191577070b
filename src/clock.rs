//! Precise waiting on OS threads: the simulator's engine and the request dispatcher
//! wake at their deadlines to within microseconds, where tokio's timer rounds to a
//! millisecond.

use std::time::{Duration, Instant};

/// The last stretch before a deadline is spun rather than slept: OS sleeps overshoot
/// (by tens of microseconds even with the timer slack at its minimum).
pub const SPIN: Duration = Duration::from_micros(40);

/// Asks Linux for the smallest timer slack on this thread, so sleeps end within a few
/// microseconds of their deadline instead of the default 50 µs; elsewhere a no-op.
pub fn precise_timers() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// Sleeps until `deadline` on the current OS thread: a coarse sleep, then a short spin.
pub fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}
