//! Energy per case, measured over the window that was measured: GPU energy counters
//! (or power samples) read around and during a case ([`dcgm`]: a DCGM exporter's
//! page), cut to the measured window exactly ([`window`]: a counter interpolated at the
//! window's edges, power integrated by the trapezoid rule where there is no counter),
//! read around and during a case ([`source`]) and turned into a case's figures
//! ([`figures`]).

pub mod cost;
pub mod dcgm;
pub mod figures;
pub mod nvml;
pub mod prometheus;
pub mod readings;
pub mod source;
pub mod window;
