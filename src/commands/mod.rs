//! The commands behind the CLI. Those that send traffic turn their arguments into plan
//! types and call the same library entry points as `run` and `optimize` do.

pub mod bench;
pub mod dry_run;
pub mod init;
pub mod merge;
pub mod probe;
pub mod report;
pub mod run;
pub mod trace;
pub mod trend;
pub mod validate;
