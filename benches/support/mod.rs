//! Shared by the benchmarks: a simulator in its own process, and its CPU time.
// Each benchmark uses only part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// `benchplan sim` running in a separate process; killed on drop.
pub struct SimProcess {
    pub child: Child,
    pub base_url: String,
}

impl SimProcess {
    /// Starts `benchplan sim --port 0` with extra arguments and waits for its address.
    pub fn start(args: &[&str]) -> SimProcess {
        SimProcess::start_on(args, None)
    }

    /// Starts it with every thread bound to one CPU (when given).
    pub fn start_on(args: &[&str], cpu: Option<usize>) -> SimProcess {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_benchplan"));
        cmd.args(["sim", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped());
        if let Some(cpu) = cpu {
            use std::os::unix::process::CommandExt;
            // SAFETY: only an async-signal-safe system call between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    pin_to_cpu(cpu);
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("start benchplan sim");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base_url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("the sim prints its URL")
            .to_string();
        SimProcess { child, base_url }
    }

    /// User + system CPU seconds the process has used so far.
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds_of(self.child.id())
    }

    pub fn host_port(&self) -> String {
        self.base_url.trim_start_matches("http://").to_string()
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// User + system CPU seconds of a process, from /proc/PID/stat.
pub fn cpu_seconds_of(pid: u32) -> f64 {
    let (user, system) = cpu_split_of(pid);
    user + system
}

/// User and system CPU seconds of a process, from /proc/PID/stat.
pub fn cpu_split_of(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Linux reports clock ticks of 1/100 s on every mainstream configuration.
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

/// Peak resident memory (MiB) of this process, from /proc/self/status.
pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Linear-interpolated percentile of sorted values (numpy's default).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// Binds the calling thread (and the threads it creates afterwards) to one CPU.
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one bit set, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The machine's CPU time so far, from /proc/stat: (stolen by the hypervisor, total), in
/// clock ticks. On a virtual machine whose host is busy, steal is time this machine's
/// CPUs wanted to run and could not; a benchmark that ran under much of it measured the
/// host as much as the code.
pub fn steal_and_total_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice; guest time is
    // already inside user.
    let total = fields.iter().take(8).sum();
    (fields.get(7).copied().unwrap_or(0), total)
}

/// Percent of the machine's CPU time stolen between two `steal_and_total_ticks` reads.
pub fn steal_percent(before: (u64, u64), after: (u64, u64)) -> f64 {
    let total = after.1.saturating_sub(before.1);
    if total == 0 {
        return 0.0;
    }
    after.0.saturating_sub(before.0) as f64 * 100.0 / total as f64
}

/// User and system CPU seconds of this process (every thread, ended ones too), to the
/// microsecond: /proc's clock ticks (10 ms) are too coarse for a short, light run.
pub fn own_cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(u.ru_utime), secs(u.ru_stime))
}
