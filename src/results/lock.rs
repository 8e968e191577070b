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
    let pid: u32 = text.lines().next()?.trim().parse().ok()?;
    (pid != std::process::id() && alive(pid)).then_some(pid)
}

/// Whether a benchplan process with this pid is running (a reused pid of another
/// program does not count, where /proc says what runs).
fn alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(p) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let exists = unsafe { libc::kill(p, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !exists {
            return false;
        }
        match std::fs::read(format!("/proc/{pid}/cmdline")) {
            Ok(cmd) => String::from_utf8_lossy(&cmd).contains("benchplan"),
            Err(_) => true,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
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
                let _ = writeln!(
                    f,
                    "{}\n{}",
                    std::process::id(),
                    crate::redact::this_command()
                );
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
                note = Some(format!(
                    "took over the lock of {} left by pid {old_pid}, which is no longer running",
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
}
