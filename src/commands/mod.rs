//! The commands that send traffic. Each turns its arguments into plan types and
//! calls the same library entry points as `run` and `optimize` do.

pub mod bench;
pub mod dry_run;
pub mod init;
pub mod merge;
pub mod probe;
pub mod report;
pub mod run;
pub mod trace;
pub mod trend;
