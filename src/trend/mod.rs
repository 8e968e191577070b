//! Nightly history and change points: each run's cases appended to a history that
//! lives in a repository ([`history`]), the change points of every case's metric over
//! the runs as Apache Otava finds them ([`edivisive`]), judged by direction
//! ([`analyze`]) and written as markdown, HTML, JUnit and a step summary ([`render`]), each series drawn by [`chart`].

pub mod analyze;
pub mod chart;
pub mod edivisive;
pub mod history;
#[cfg(test)]
mod planted;
pub mod render;
