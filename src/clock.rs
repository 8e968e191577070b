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

/// `t` on the system-wide monotonic clock, in nanoseconds. Two processes on one host
/// read the same clock, so the simulator's send times and a client's receive times can
/// be compared directly (`Instant` is that clock on Linux, but opaque).
pub fn monotonic_ns(t: Instant) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let now_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let back = Instant::now().saturating_duration_since(t).as_nanos() as u64;
    let ahead = t.saturating_duration_since(Instant::now()).as_nanos() as u64;
    now_ns - back + ahead
}
