//! Load generation: the arrival schedule, the concurrency cap, warmups and the run
//! of one case against one target.

pub mod case;
pub mod conversation;
pub mod fdlimit;
pub mod guard;
pub mod machine;
pub mod options;
pub mod prepare;
pub mod result;
pub mod run;
pub mod schedule;
pub mod stop;
pub mod trace;
pub mod vllm_engine;

/// The runtime a command runs its traffic on. One thread when only the client runs:
/// no cross-thread wake-ups per chunk, measured to cost less CPU per chunk and less
/// memory; two workers when an in-process simulator shares the process.
pub fn runtime(in_process_sim: bool) -> tokio::runtime::Runtime {
    let mut b = if in_process_sim {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    b.enable_all().build().expect("a tokio runtime")
}
