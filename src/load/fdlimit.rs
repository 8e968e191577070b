//! Open-file limits. Each request in flight holds a socket (two when the simulator runs
//! in the same process), and the default soft limit (often 1,024) is far below what a
//! high-concurrency case needs: past it every connect fails with EMFILE. benchplan
//! raises the soft limit to the hard one at start and refuses, before any traffic, a
//! case that would still need more.

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; the limit now in force.
#[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
pub fn raise() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a plain struct the call fills.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
            return None;
        }
        if l.rlim_cur < l.rlim_max {
            let want = libc::rlimit {
                rlim_cur: l.rlim_max,
                rlim_max: l.rlim_max,
            };
            // SAFETY: as above; a refusal leaves the old limit.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
                l.rlim_cur = l.rlim_max;
            }
        }
        Some(l.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    None
}

/// The open-file limit in force.
#[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
pub fn current() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a plain struct the call fills.
        (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0).then_some(l.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    None
}

/// Descriptors kept free for everything that is not a request's socket.
const RESERVE: u64 = 64;

/// Whether `in_flight` requests fit the limit (`sockets_each`: 2 with an in-process
/// simulator); the error says what to do when not.
pub fn check(in_flight: u64, sockets_each: u64, limit: Option<u64>) -> Result<(), String> {
    let Some(limit) = limit else { return Ok(()) };
    let need = in_flight
        .saturating_mul(sockets_each)
        .saturating_add(RESERVE);
    if need <= limit {
        return Ok(());
    }
    Err(format!(
        "{in_flight} requests in flight need about {need} open files, but this process may open {limit} (the hard limit; see `ulimit -Hn`); raise the limit or lower max_concurrency"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_raised_and_checked() {
        let now = raise().unwrap();
        assert_eq!(current(), Some(now));
        assert!(check(10, 2, Some(1024)).is_ok());
        let e = check(1000, 2, Some(1024)).unwrap_err();
        assert!(e.contains("2064") && e.contains("1024"), "{e}");
        assert!(check(u64::MAX, 2, Some(10)).is_err());
    }
}
