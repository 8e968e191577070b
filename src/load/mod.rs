//! Load generation: the arrival schedule, the concurrency cap, warmups and the run
//! of one case against one target.

pub mod case;
pub mod run;
pub mod schedule;
pub mod target;
