//! Reads that also say when their bytes arrived: the kernel's receive timestamp of the
//! last segment read (`SO_TIMESTAMPNS`), so a chunk's time does not depend on how soon
//! the client got to read it. On a busy machine the client's thread may run a few
//! milliseconds after a segment arrived; the kernel stamped it on arrival. Where the
//! kernel gives no stamp (other systems, or none attached), the time of the read is used.

use std::io;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::Interest;
use tokio::net::TcpStream;

/// A socket this module can read and set options on: a tokio or a std TCP stream.
#[cfg(unix)]
pub trait Socket: std::os::fd::AsRawFd {}
#[cfg(unix)]
impl<T: std::os::fd::AsRawFd> Socket for T {}
/// A socket this module can read and set options on (options are Linux's only).
#[cfg(not(unix))]
pub trait Socket {}
#[cfg(not(unix))]
impl<T> Socket for T {}

/// Asks the kernel to timestamp what this socket receives.
pub fn enable(stream: &TcpStream) {
    #[cfg(target_os = "linux")]
    set_int_option(stream, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}

/// Sets an integer socket option; best effort (a refused option changes no result).
#[cfg(target_os = "linux")]
pub(super) fn set_int_option<S: Socket>(
    stream: &S,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) {
    // SAFETY: a valid socket, an int option and its size.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Reads once into the spare capacity of `buf` (which must have some). Returns the
/// bytes read (0 at the end of the stream) and when they arrived.
pub async fn read(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<(usize, Instant)> {
    loop {
        stream.readable().await?;
        let mut short_read = None;
        let attempt = stream.try_io(Interest::READABLE, || {
            let room = buf.capacity() - buf.len();
            let (n, stamp) = recv_once(stream, buf)?;
            if n > 0 && n < room {
                // A read that did not fill the buffer drained the socket: report it as
                // "would block" so tokio clears the readiness (as its own reads do) and
                // the next read waits for new data instead of trying a read that fails.
                short_read = Some((n, stamp));
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok((n, stamp))
        });
        let (n, stamp) = match attempt {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => match short_read {
                Some(r) => r,
                None => continue,
            },
            Err(e) => return Err(e),
        };
        return Ok((n, stamped(stamp)));
    }
}

/// The two clocks read together once, so that many kernel stamps (wall-clock times)
/// can become `Instant`s without reading both clocks for each: the stream reader takes
/// one pair per wake-up, not two clock reads per chunk.
#[derive(Debug, Clone, Copy)]
pub struct Clocks {
    pub wall: SystemTime,
    pub mono: Instant,
}

impl Clocks {
    pub fn now() -> Clocks {
        Clocks {
            wall: SystemTime::now(),
            mono: Instant::now(),
        }
    }

    /// A read's arrival: its kernel stamp placed by these clocks, or now without one.
    fn place(&self, stamp: Option<SystemTime>) -> Instant {
        stamp.map_or_else(Instant::now, |s| arrival(s, self.wall, self.mono))
    }
}

/// Reads once, now, into the spare capacity of `buf` (which must have some), from a
/// non-blocking socket outside any runtime (the stream reader thread): the bytes read
/// (0 at the end of the stream) and when they arrived, the kernel's stamp placed on the
/// monotonic clock by `clocks` (read at this wake-up); `WouldBlock` when there are none.
#[cfg(target_os = "linux")]
pub fn read_now<S: Socket>(
    stream: &S,
    buf: &mut Vec<u8>,
    clocks: &Clocks,
) -> io::Result<(usize, Instant)> {
    let (n, stamp) = recv_once(stream, buf)?;
    Ok((n, clocks.place(stamp)))
}

/// A read's arrival, with the clocks read for it alone (the async path reads once a
/// wake): the kernel's stamp where there is one, else now.
fn stamped(stamp: Option<SystemTime>) -> Instant {
    match stamp {
        Some(_) => Clocks::now().place(stamp),
        None => Instant::now(),
    }
}

/// The `Instant` of a wall-clock kernel stamp, given the wall clock and the `Instant`
/// read together (`wall`, `mono`). The stamp may be a little after them (bytes that
/// arrived after the clocks were read). A stamp more than a minute from them (a clock
/// step) counts as `mono`.
fn arrival(stamp: SystemTime, wall: SystemTime, mono: Instant) -> Instant {
    const STEP: Duration = Duration::from_secs(60);
    match wall.duration_since(stamp) {
        Ok(age) if age < STEP => mono.checked_sub(age).unwrap_or(mono),
        Ok(_) => mono,
        Err(ahead) if ahead.duration() < STEP => mono + ahead.duration(),
        Err(_) => mono,
    }
}

#[cfg(target_os = "linux")]
fn recv_once<S: Socket>(stream: &S, buf: &mut Vec<u8>) -> io::Result<(usize, Option<SystemTime>)> {
    let spare = buf.spare_capacity_mut();
    let mut iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: spare.len(),
    };
    // Room for one timespec control message, 8-byte aligned as cmsghdr needs.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // The system call itself rather than libc's `recvmsg`: that one is a thread
    // cancellation point, which wraps every call in two more calls into libc (about 1%
    // of the stream reader's time on paced streams).
    // SAFETY: the iovec points at `buf`'s spare capacity and the control buffer is ours.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvmsg,
            stream.as_raw_fd(),
            &mut msg as *mut libc::msghdr,
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: recvmsg initialised the first n bytes of the spare capacity.
    unsafe { buf.set_len(buf.len() + n) };
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote, with libc's macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n, stamp))
}

#[cfg(not(target_os = "linux"))]
fn recv_once(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<(usize, Option<SystemTime>)> {
    let spare = buf.spare_capacity_mut();
    // SAFETY: try_read writes only initialised bytes into the slice it is given.
    let slice = unsafe { &mut *(spare as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) };
    let n = stream.try_read(slice)?;
    unsafe { buf.set_len(buf.len() + n) };
    Ok((n, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_stamps_become_instants_in_the_past() {
        let now = Instant::now();
        let wall = SystemTime::now();
        let at = arrival(wall - Duration::from_millis(3), wall, now);
        assert_eq!(now - at, Duration::from_millis(3));
        // A stamp after the clocks were read (bytes that came in since) is after them.
        assert_eq!(
            arrival(wall + Duration::from_millis(3), wall, now) - now,
            Duration::from_millis(3)
        );
        // A stamp from across a clock step is "now".
        assert_eq!(arrival(wall - Duration::from_secs(120), wall, now), now);
        assert_eq!(arrival(wall + Duration::from_secs(120), wall, now), now);
    }

    #[tokio::test]
    async fn a_read_returns_the_bytes_and_the_kernels_arrival_time() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        enable(&client);
        let (mut server, _) = listener.accept().await.unwrap();
        // Linux turns receive stamping on system-wide a moment after the first socket asks.
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.write_all(b"hello").await.unwrap();
        let written = Instant::now();
        // Read well after the bytes arrived: the time is their arrival, not the read.
        std::thread::sleep(Duration::from_millis(30));
        let mut buf = Vec::with_capacity(64);
        let (n, at) = read(&client, &mut buf).await.unwrap();
        assert_eq!((n, &buf[..]), (5, &b"hello"[..]));
        let late = Instant::now();
        #[cfg(target_os = "linux")]
        assert!(
            at <= written + Duration::from_millis(5) && late - at >= Duration::from_millis(25),
            "arrival {:?} after the write, read {:?} after the arrival",
            at.saturating_duration_since(written),
            late - at
        );
        // The end of the stream is a zero-byte read.
        drop(server);
        buf.clear();
        assert_eq!(read(&client, &mut buf).await.unwrap().0, 0);
    }
}
