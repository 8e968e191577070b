//! One writer per run folder: `run` (new or `--resume`) holds `.benchplan.lock` in its
//! folder while it runs, so a second `run --resume` of the folder is refused instead of
//! measuring every unfinished case under the other's load (and the last writer
//! winning), and `merge` refuses a shard folder a run is still writing. The lock file
//! names its holder's pid; a lock whose holder is gone (killed, the machine restarted)
//! is taken over, and the console says so.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The lock file's name in a run folder.
pub const LOCK_FILE: &str = ".benchplan.lock";

/// A held lock; released (its file removed) when dropped.
#[derive(Debug)]
pub struct FolderLock {
    path: PathBuf,
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Who holds a folder's lock: its pid, while that process runs.
pub fn holder(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join(LOCK_FILE)).ok()?;
    let (pid, started) = parse(&text)?;
    (pid != std::process::id() && alive(pid, started) == Alive::Holder).then_some(pid)
}

/// The pid a lock file names, and the start time it recorded for it (absent from
/// locks written before benchplan recorded it).
fn parse(text: &str) -> Option<(u32, Option<u64>)> {
    let mut lines = text.lines();
    let pid = lines.next()?.trim().parse().ok()?;
    let started = text
        .lines()
        .find_map(|l| l.strip_prefix("started "))
        .and_then(|t| t.trim().parse().ok());
    Some((pid, started))
}

/// What runs under a lock's pid now.
#[derive(Debug, PartialEq, Eq)]
enum Alive {
    /// The process that took the lock.
    Holder,
    /// Nothing.
    Gone,
    /// Another process that got the pid after the holder ended (another program,
    /// or another benchplan that started later).
    Reused,
}

/// When process `pid` started (clock ticks since boot, `/proc/PID/stat`'s field 22):
/// with the pid, it names one process, even after the pid is reused.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the holder of a lock (`pid`, started at `started` when the lock says) runs.
/// Where /proc says when a process started, a pid now held by a later process is no
/// holder; without a recorded start, a process whose command line does not name
/// benchplan is none either.
fn alive(pid: u32, started: Option<u64>) -> Alive {
    #[cfg(unix)]
    {
        let Ok(p) = libc::pid_t::try_from(pid) else {
            return Alive::Gone;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let exists = unsafe { libc::kill(p, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !exists {
            return Alive::Gone;
        }
        if let (Some(then), Some(now)) = (started, start_time(pid)) {
            return if then == now {
                Alive::Holder
            } else {
                Alive::Reused
            };
        }
        match std::fs::read(format!("/proc/{pid}/cmdline")) {
            Ok(cmd) if !String::from_utf8_lossy(&cmd).contains("benchplan") => Alive::Reused,
            _ => Alive::Holder,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (pid, started);
        Alive::Holder
    }
}

/// Takes `dir`'s lock. Refused while another live process holds it (the message names
/// its pid); a stale lock is taken over, with a note (the second value) to print.
pub fn acquire(dir: &Path) -> Result<(FolderLock, Option<String>), String> {
    let path = dir.join(LOCK_FILE);
    let mut note = None;
    for _ in 0..3 {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                let me = std::process::id();
                let _ = writeln!(f, "{me}\n{}", crate::redact::this_command());
                if let Some(t) = start_time(me) {
                    let _ = writeln!(f, "started {t}");
                }
                return Ok((FolderLock { path }, note));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if let Some(pid) = holder(dir) {
                    return Err(format!(
                        "{} is in use by benchplan (pid {pid}, lock file {}): wait for that run to end, or stop it, before resuming or merging this folder",
                        dir.display(),
                        path.display()
                    ));
                }
                let old = std::fs::read_to_string(&path).unwrap_or_default();
                let old_pid = old.lines().next().unwrap_or("?").trim().to_string();
                let why = match parse(&old) {
                    Some((pid, started)) if alive(pid, started) == Alive::Reused => {
                        "which has ended (the pid now belongs to another process)"
                    }
                    _ => "which is no longer running",
                };
                note = Some(format!(
                    "took over the lock of {} left by pid {old_pid}, {why}",
                    dir.display()
                ));
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => return Err(format!("cannot lock {}: {e}", dir.display())),
        }
    }
    Err(format!(
        "cannot lock {}: another process keeps taking it",
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_holder_refuses_and_a_dead_one_is_taken_over() {
        let dir = std::env::temp_dir().join(format!("benchplan-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (lock, note) = acquire(&dir).unwrap();
        assert!(note.is_none());
        // Our own pid is not "another" holder; a dead pid's lock is stale.
        std::fs::write(dir.join(LOCK_FILE), "999999999\nbenchplan run\n").unwrap();
        let (again, note) = acquire(&dir).unwrap();
        assert!(note.unwrap().contains("pid 999999999"));
        drop(again);
        assert!(!dir.join(LOCK_FILE).exists(), "released on drop");
        drop(lock);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_reused_pid_is_no_holder() {
        let dir = std::env::temp_dir().join(format!("benchplan-lock-reuse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let real = start_time(pid).expect("/proc tells when it started");
        // A live process that is not benchplan, with no start recorded: taken over.
        std::fs::write(dir.join(LOCK_FILE), format!("{pid}\nbenchplan run\n")).unwrap();
        let (l, note) = acquire(&dir).unwrap();
        assert!(note.unwrap().contains("now belongs to another process"));
        drop(l);
        // The pid, started at another time than the lock says: another process (even
        // another benchplan) that got the pid later. Taken over.
        std::fs::write(
            dir.join(LOCK_FILE),
            format!("{pid}\nbenchplan run\nstarted {}\n", real + 1),
        )
        .unwrap();
        assert_eq!(holder(&dir), None);
        let (l, note) = acquire(&dir).unwrap();
        assert!(note.unwrap().contains("now belongs to another process"));
        drop(l);
        // The very process the lock names: it holds the folder.
        std::fs::write(
            dir.join(LOCK_FILE),
            format!("{pid}\nbenchplan run\nstarted {real}\n"),
        )
        .unwrap();
        assert_eq!(holder(&dir), Some(pid));
        assert!(acquire(&dir).unwrap_err().contains(&format!("pid {pid}")));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(holder(&dir), None);
        std::fs::remove_dir_all(&dir).ok();
    }
}
