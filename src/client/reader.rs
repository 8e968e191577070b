//! The stream reader thread: reads the native client's streamed answers with one
//! epoll loop for all of them, outside the async runtime.
//!
//! Why: on a paced stream every token is its own TCP segment, so a client wakes once per
//! token. Through tokio, a wake costs its reactor's turn, the task's schedule and poll
//! and the readiness bookkeeping: 0.8–1.4 µs of CPU per chunk above a bare epoll loop on
//! the benchmark machine (the `paced-N-tokio` and `paced-N-floor` rows of
//! `benches/client_overhead.rs`), more than all of the client's own parsing. Here a
//! wake is an `epoll_wait` return and a `recvmsg`, as in the floor row.
//!
//! What stays the same: the request's task sends, reads the head and decides; only the
//! body of a streamed answer comes here, with its [`Reading`] (the same SSE and chunk
//! reading as the async path), its deadline and a channel for the finished sample.
//! Chunk times are the kernel's receive stamps (`rx_time`), so they do not depend on
//! when this thread runs. Each stream has one timer for its idle limit and deadline,
//! moved only when it fires, as on the async path. A request whose task is dropped (an
//! aborted run) is cancelled here: its socket closes at once, so the server stops
//! generating for it. A reusable connection goes back to its pool when the body ends.
//!
//! Every stream is read into the thread's one buffer and decoded straight out of it:
//! a read buffer per stream was most of the client's memory at 1,000 streams.
//!
//! One thread serves the process (started on first use, never stopped): a streamed
//! body's work is small, and the request tasks keep the rest on the runtime.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::h1::{self, Wire};
use super::outcome::fail;
use super::rx_time::Clocks;
use super::stream::{Alarm, End, Reading};
use crate::metrics::sample::Sample;

/// Reads `resp`'s body on the reader thread into `reading` (the request's deadline is
/// `deadline`) and returns the measured sample. The connection goes back to its pool
/// when it can serve another request.
pub async fn read(resp: h1::Response<'_>, reading: Reading, deadline: Instant) -> Sample {
    let Some((stream, wire, pool)) = resp.detach() else {
        return reading.finish(End::Broken("the connection is gone".into()));
    };
    let (done, finished) = oneshot::channel();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let alarm = reading.alarm_at(deadline);
    let job = Job {
        id,
        stream,
        wire,
        reading,
        deadline,
        alarm,
        hung_up: false,
        done,
    };
    let reader = reader();
    if let Err(e) = reader.send(Msg::Add(Box::new(job))) {
        let Msg::Add(job) = e.0 else { unreachable!() };
        return job
            .reading
            .finish(End::Broken("the stream reader is not running".into()));
    }
    // Dropped with this future (an aborted request): the reader closes the stream.
    let cancel = CancelOnDrop { id, reader };
    let result = finished.await;
    std::mem::forget(cancel);
    match result {
        Ok(Finished { sample, conn }) => {
            if let Some(c) = conn {
                pool.put_back(c);
            }
            sample
        }
        Err(_) => {
            // The reader dropped the stream without an answer: it failed on it.
            let mut s = Sample {
                input_sequences: 1,
                ..Sample::default()
            };
            fail(
                &mut s,
                "stream_broken",
                "the stream reader failed on this stream",
            );
            s
        }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The reader's read size: a fast stream's socket is emptied in few reads (4 KiB in
/// unit tests, so a test body needs many).
const SCRATCH: usize = if cfg!(test) { 4096 } else { 64 * 1024 };

/// Reads of one stream in one turn (4 MiB at most) before the others get theirs; two
/// in unit tests, so a test body crosses turns.
const READS_PER_TURN: u32 = if cfg!(test) { 2 } else { 64 };

/// The data of the wake-up eventfd in the epoll set (a stream's is its [`Key`]).
const WAKE: u64 = u64::MAX;

/// Where a stream is in the reader's table (its slot) and which stream it is (the low
/// half of its id): an event or timer of a stream that ended is not taken for the one
/// that took its slot since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key(u64);

impl Key {
    fn new(slot: usize, id: u64) -> Key {
        Key((id << 32) | slot as u64)
    }

    fn slot(self) -> usize {
        (self.0 & 0xFFFF_FFFF) as usize
    }

    fn is(self, id: u64) -> bool {
        self.0 >> 32 == id & 0xFFFF_FFFF
    }
}

/// A streamed body handed to the reader.
struct Job {
    id: u64,
    stream: std::net::TcpStream,
    wire: Wire,
    reading: Reading,
    deadline: Instant,
    /// When this stream's timer fires next.
    alarm: Instant,
    /// The server hung up (an event said so): the socket is read to its end, since
    /// no later edge will come to say there is more.
    hung_up: bool,
    done: oneshot::Sender<Finished>,
}

/// What the reader sends back when a stream ends.
struct Finished {
    sample: Sample,
    /// The connection, when it can serve another request.
    conn: Option<std::net::TcpStream>,
}

enum Msg {
    Add(Box<Job>),
    Cancel(u64),
}

/// The way to the reader thread: its queue and the eventfd that wakes it.
struct Handle {
    queue: mpsc::Sender<Msg>,
    wake: std::os::fd::OwnedFd,
}

impl Handle {
    /// Queues `msg` and wakes the thread; the message back if the thread is gone.
    fn send(&self, msg: Msg) -> Result<(), mpsc::SendError<Msg>> {
        self.queue.send(msg)?;
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte write to an eventfd this handle owns.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
        Ok(())
    }
}

struct CancelOnDrop {
    id: u64,
    reader: &'static Handle,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let _ = self.reader.send(Msg::Cancel(self.id));
    }
}

/// The reader thread, started on first use.
fn reader() -> &'static Handle {
    static READER: OnceLock<Handle> = OnceLock::new();
    READER.get_or_init(|| {
        let (queue, inbox) = mpsc::channel();
        // SAFETY: plain system calls; the descriptors are checked and owned below.
        let (ep, wake) = unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let wake = libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC);
            assert!(
                ep >= 0 && wake >= 0,
                "epoll or eventfd: {}",
                io::Error::last_os_error()
            );
            use std::os::fd::FromRawFd;
            (
                std::os::fd::OwnedFd::from_raw_fd(ep),
                std::os::fd::OwnedFd::from_raw_fd(wake),
            )
        };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: WAKE,
        };
        // SAFETY: adding a descriptor we own to our epoll set.
        unsafe {
            libc::epoll_ctl(
                ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                wake.as_raw_fd(),
                &mut ev,
            )
        };
        let wake_fd = wake.as_raw_fd();
        std::thread::Builder::new()
            .name("benchplan-streams".into())
            .spawn(move || Loop::new(ep, wake_fd, inbox).run())
            .expect("spawning the stream reader thread");
        Handle { queue, wake }
    })
}

/// The reader's state: its epoll set, the streams and their timers.
struct Loop {
    ep: std::os::fd::OwnedFd,
    wake: std::os::fd::RawFd,
    inbox: mpsc::Receiver<Msg>,
    /// The streams by slot (a table, not a map: an event's data is the slot, so a
    /// chunk costs no hashing), and the free slots.
    jobs: Vec<Option<Box<Job>>>,
    free: Vec<usize>,
    /// (when, stream): each stream's current timer, plus stale entries skipped on pop.
    alarms: BinaryHeap<Reverse<(Instant, Key)>>,
    /// The one read buffer: every stream's bytes are decoded straight out of it.
    scratch: Vec<u8>,
    /// Streams to read on in the next turn (see [`Loop::service`]).
    backlog: Vec<Key>,
}

impl Loop {
    fn new(ep: std::os::fd::OwnedFd, wake: std::os::fd::RawFd, inbox: mpsc::Receiver<Msg>) -> Loop {
        Loop {
            ep,
            wake,
            inbox,
            jobs: Vec::new(),
            free: Vec::new(),
            alarms: BinaryHeap::new(),
            scratch: Vec::with_capacity(SCRATCH),
            backlog: Vec::new(),
        }
    }

    fn run(mut self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        loop {
            // Streams left unread in the last turn: look for events without waiting.
            let backlog = std::mem::take(&mut self.backlog);
            let timeout = if !backlog.is_empty() {
                0
            } else {
                self.alarms.peek().map_or(-1, |Reverse((at, _))| {
                    // epoll counts milliseconds: round up, so a timer never fires early.
                    let ns = at.saturating_duration_since(Instant::now()).as_nanos();
                    ns.div_ceil(1_000_000).min(i32::MAX as u128) as i32
                })
            };
            // SAFETY: waiting on our epoll set into our event buffer.
            let n = unsafe {
                libc::epoll_wait(
                    self.ep.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    timeout,
                )
            };
            // One reading of the clocks for every kernel stamp of this wake-up's reads.
            let clocks = Clocks::now();
            for ev in &events[..n.max(0) as usize] {
                if ev.u64 == WAKE {
                    if !self.inbox_messages(&clocks) {
                        return; // every handle is gone: the process is ending
                    }
                } else {
                    let hung_up = ev.events
                        & (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32
                        != 0;
                    self.service(Key(ev.u64), hung_up, &clocks);
                }
            }
            for key in backlog {
                self.service(key, false, &clocks);
            }
            self.fire_alarms(clocks.mono);
        }
    }

    /// Takes the queued messages; false when the queue is closed.
    fn inbox_messages(&mut self, clocks: &Clocks) -> bool {
        let mut count = [0u8; 8];
        // SAFETY: an 8-byte read from our eventfd, which resets its count.
        unsafe { libc::read(self.wake, count.as_mut_ptr().cast(), 8) };
        loop {
            match self.inbox.try_recv() {
                Ok(Msg::Add(job)) => self.add(job, clocks),
                Ok(Msg::Cancel(id)) => {
                    // Rare (an aborted request): a search of the table will do.
                    let found = self
                        .jobs
                        .iter()
                        .position(|j| j.as_ref().is_some_and(|j| j.id == id));
                    if let Some(job) = found.and_then(|slot| self.take(Key::new(slot, id))) {
                        self.forget(&job);
                        // Dropping the job closes its socket; its task is gone.
                    }
                }
                Err(mpsc::TryRecvError::Empty) => return true,
                Err(mpsc::TryRecvError::Disconnected) => return false,
            }
        }
    }

    fn add(&mut self, job: Box<Job>, clocks: &Clocks) {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.jobs.push(None);
            self.jobs.len() - 1
        });
        let key = Key::new(slot, job.id);
        // Edge-triggered: what is already in the socket is reported once now, then each
        // new arrival once. The bytes read with the head are decoded first (service).
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET | libc::EPOLLRDHUP) as u32,
            u64: key.0,
        };
        // SAFETY: adding the job's socket to our epoll set.
        let r = unsafe {
            libc::epoll_ctl(
                self.ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                job.stream.as_raw_fd(),
                &mut ev,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            let sample = job
                .reading
                .finish(End::Broken(format!("cannot watch the socket: {e}")));
            let _ = job.done.send(Finished { sample, conn: None });
            self.free.push(slot);
            return;
        }
        self.alarms.push(Reverse((job.alarm, key)));
        self.jobs[slot] = Some(job);
        self.service(key, false, clocks);
    }

    /// Takes the stream `key` names out of its slot, freeing the slot.
    fn take(&mut self, key: Key) -> Option<Box<Job>> {
        job_at(&mut self.jobs, key)?;
        let job = self.jobs[key.slot()].take();
        self.free.push(key.slot());
        job
    }

    /// Reads what stream `key` has, and ends it if that was its end; `hung_up`: this
    /// wake's event says the server hung up. A stream with more to read than one turn
    /// allows waits in the backlog for the next turn, so one fast stream does not hold
    /// up the others.
    fn service(&mut self, key: Key, hung_up: bool, clocks: &Clocks) {
        let Some(job) = job_at(&mut self.jobs, key) else {
            return; // ended or cancelled since the event was queued
        };
        job.hung_up |= hung_up;
        // A panic in one stream's reading fails that request, not the reader.
        let scratch = &mut self.scratch;
        let turn =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pump(job, scratch, clocks)))
                .unwrap_or_else(|_| {
                    Turn::End(End::Broken("the stream reader failed on it".into()))
                });
        match turn {
            Turn::End(end) => self.end(key, end),
            Turn::More => self.backlog.push(key),
            Turn::Wait => {}
        }
    }

    /// Ends stream `key` as `end` and sends its sample (and connection) to its task.
    fn end(&mut self, key: Key, end: End) {
        let Some(job) = self.take(key) else {
            return;
        };
        self.forget(&job);
        let Job {
            stream,
            wire,
            reading,
            done,
            ..
        } = *job;
        let conn = (matches!(end, End::Ended) && wire.reusable()).then_some(stream);
        let sample = reading.finish(end);
        let _ = done.send(Finished { sample, conn });
    }

    /// Takes a stream's socket out of the epoll set (it may go back to a pool).
    fn forget(&self, job: &Job) {
        // SAFETY: removing a socket we added; a null event is allowed since Linux 2.6.9.
        unsafe {
            libc::epoll_ctl(
                self.ep.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                job.stream.as_raw_fd(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Ends the streams whose deadline or idle limit passed; re-arms the others.
    fn fire_alarms(&mut self, now: Instant) {
        while let Some(&Reverse((at, key))) = self.alarms.peek() {
            if at > now {
                break;
            }
            self.alarms.pop();
            let Some(job) = job_at(&mut self.jobs, key) else {
                continue; // ended already
            };
            if job.alarm != at {
                continue; // a stale entry: the stream's timer moved
            }
            match job.reading.alarm(now, job.deadline) {
                Alarm::Rearm(next) => {
                    job.alarm = next;
                    self.alarms.push(Reverse((next, key)));
                }
                Alarm::End(end) => self.end(key, end),
            }
        }
    }
}

/// The stream `key` names in `jobs`, if it is still there (see [`Key`]).
fn job_at(jobs: &mut [Option<Box<Job>>], key: Key) -> Option<&mut Box<Job>> {
    jobs.get_mut(key.slot())?.as_mut().filter(|j| key.is(j.id))
}

/// How a stream's turn in [`pump`] ended.
enum Turn {
    /// The stream is over.
    End(End),
    /// The socket is empty: the next segment brings a new edge.
    Wait,
    /// The turn's reads ran out before the socket was empty: read on next turn.
    More,
}

/// Decodes and reads a stream until its socket is empty, its turn's reads run out, or
/// the stream is over. Reads go into `scratch`, the thread's one read buffer, not one
/// per stream.
fn pump(job: &mut Job, scratch: &mut Vec<u8>, clocks: &Clocks) -> Turn {
    scratch.clear();
    let mut reads = 0;
    // The latest read came back short: the socket is empty until its next edge (unless
    // the server hung up, when no edge will come).
    let mut drained = false;
    loop {
        // The first round decodes what came with the response head.
        let done = match job.wire.decode_read(scratch) {
            Ok(done) => done,
            Err(e) => return Turn::End(End::Broken(e.to_string())),
        };
        scratch.clear();
        if !job.wire.out.is_empty() {
            job.reading.bytes(&job.wire.out, job.wire.arrived());
            job.wire.out.clear();
            if job.reading.failed() {
                return Turn::End(End::Failed);
            }
        }
        if done {
            return Turn::End(End::Ended);
        }
        if drained {
            return Turn::Wait;
        }
        if reads == READS_PER_TURN {
            return Turn::More;
        }
        reads += 1;
        let read = super::rx_time::read_now(&job.stream, scratch, clocks);
        match &read {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Turn::Wait,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // A read that did not fill the buffer emptied the socket.
            Ok((n, _)) => drained = !job.hung_up && *n > 0 && *n < scratch.capacity(),
            Err(_) => {}
        }
        if let Err(e) = job.wire.after_read(read) {
            return Turn::End(End::Broken(e.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_names_its_slot_and_only_the_stream_it_was_made_for() {
        let k = super::Key::new(7, 41);
        assert_eq!(k.slot(), 7);
        assert!(k.is(41));
        // The stream that takes slot 7 after stream 41 ended is not stream 41's events.
        assert!(!k.is(42));
        // Ids past 32 bits compare on their low half, as the key keeps it.
        assert!(super::Key::new(7, (1 << 32) + 41).is(41));
        assert_ne!(super::Key::new(7, 41).0, super::WAKE);
    }
}
