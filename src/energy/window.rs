//! One GPU's energy over a window `[a, b]` (seconds from the case's first send) from
//! readings taken around and during the case. A counter is preferred: read at `a` and
//! `b` by linear interpolation between the readings on either side, its difference is
//! the energy. A counter that goes down inside the window (the driver reloaded, the
//! exporter restarted) is reported and never read as negative energy: the power
//! samples are used instead. Power alone is integrated by the trapezoid rule over the
//! window, interpolated at its edges. Either needs readings on both sides of the
//! window: an edge outside them is an error that says what the readings covered.

/// One reading: when (seconds from the case's first send) and what it said.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub t: f64,
    pub energy_mj: Option<f64>,
    pub power_w: Option<f64>,
}

/// How a GPU's energy was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The energy counter's difference.
    Counter,
    /// Power samples integrated.
    Power,
}

/// A GPU's energy over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuEnergy {
    pub joules: f64,
    pub mean_watts: f64,
    pub method: Method,
    /// Readings inside the window (power: the samples integrated).
    pub samples: usize,
    /// The counter went down inside the window.
    pub counter_reset: bool,
}

/// The energy over `[a, b]` from `readings` (in time order).
pub fn over(readings: &[Reading], a: f64, b: f64) -> Result<GpuEnergy, String> {
    if !(b > a) {
        return Err(format!("an empty window ({a:.3} s to {b:.3} s)"));
    }
    let counter: Vec<(f64, f64)> = readings
        .iter()
        .filter_map(|r| Some((r.t, r.energy_mj?)))
        .collect();
    let power: Vec<(f64, f64)> = readings
        .iter()
        .filter_map(|r| Some((r.t, r.power_w?)))
        .collect();
    let inside = |pts: &[(f64, f64)]| pts.iter().filter(|p| p.0 >= a && p.0 <= b).count();
    let mut reset = false;
    if covers(&counter, a, b) {
        reset = counter
            .windows(2)
            .any(|w| w[1].1 < w[0].1 && w[1].0 >= a && w[0].0 <= b);
        if !reset {
            let mj = at(&counter, b) - at(&counter, a);
            return Ok(GpuEnergy {
                joules: mj / 1e3,
                mean_watts: mj / 1e3 / (b - a),
                method: Method::Counter,
                samples: inside(&counter),
                counter_reset: false,
            });
        }
    }
    if covers(&power, a, b) {
        let joules = trapezoid(&power, a, b);
        return Ok(GpuEnergy {
            joules,
            mean_watts: joules / (b - a),
            method: Method::Power,
            samples: inside(&power),
            counter_reset: reset,
        });
    }
    let span = |pts: &[(f64, f64)]| match (pts.first(), pts.last()) {
        (Some(f), Some(l)) => format!("{:.3} s to {:.3} s", f.0, l.0),
        _ => "nothing".into(),
    };
    Err(if reset {
        format!(
            "the energy counter went down inside the window ({a:.3} s to {b:.3} s) and the power readings cover {}",
            span(&power)
        )
    } else {
        format!(
            "the readings do not cover the window ({a:.3} s to {b:.3} s): the energy counter covers {}, the power {}",
            span(&counter),
            span(&power)
        )
    })
}

/// Whether readings exist at or before `a` and at or after `b`.
fn covers(pts: &[(f64, f64)], a: f64, b: f64) -> bool {
    pts.first().is_some_and(|p| p.0 <= a) && pts.last().is_some_and(|p| p.0 >= b)
}

/// The value at `t` by linear interpolation between the readings around it.
fn at(pts: &[(f64, f64)], t: f64) -> f64 {
    let i = pts.partition_point(|p| p.0 <= t);
    match (i.checked_sub(1).map(|j| pts[j]), pts.get(i)) {
        (Some(l), Some(r)) if r.0 > l.0 => l.1 + (r.1 - l.1) * (t - l.0) / (r.0 - l.0),
        (Some(l), _) => l.1,
        (None, Some(r)) => r.1,
        (None, None) => 0.0,
    }
}

/// ∫ power dt over `[a, b]`: the trapezoid rule over the samples inside, with the
/// interpolated values at the edges.
fn trapezoid(pts: &[(f64, f64)], a: f64, b: f64) -> f64 {
    let mut knots = vec![(a, at(pts, a))];
    knots.extend(pts.iter().copied().filter(|p| p.0 > a && p.0 < b));
    knots.push((b, at(pts, b)));
    knots
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(t: f64, mj: Option<f64>, w: Option<f64>) -> Reading {
        Reading {
            t,
            energy_mj: mj,
            power_w: w,
        }
    }

    /// By hand: a counter at 0, 1000, 3000 mJ at 0, 1, 2 s (1 W then 2 W). The
    /// window 0.5–1.5 s holds 0.5 s at 1 W and 0.5 s at 2 W: 1.5 J.
    #[test]
    fn a_counter_is_read_at_the_window_edges() {
        let rs = [
            r(0.0, Some(0.0), None),
            r(1.0, Some(1000.0), None),
            r(2.0, Some(3000.0), None),
        ];
        let e = over(&rs, 0.5, 1.5).unwrap();
        assert!((e.joules - 1.5).abs() < 1e-12, "{e:?}");
        assert!((e.mean_watts - 1.5).abs() < 1e-12);
        assert_eq!((e.method, e.samples), (Method::Counter, 1));
    }

    /// Power 100 W at 0 s rising to 300 W at 2 s (linear): over 0.5–1.5 s the
    /// trapezoid gives 150 and 250 W at the edges and 200 W at 1 s: 200 J.
    #[test]
    fn power_alone_is_integrated_by_the_trapezoid_rule() {
        let rs = [
            r(0.0, None, Some(100.0)),
            r(1.0, None, Some(200.0)),
            r(2.0, None, Some(300.0)),
        ];
        let e = over(&rs, 0.5, 1.5).unwrap();
        assert!((e.joules - 200.0).abs() < 1e-9, "{e:?}");
        assert_eq!(e.method, Method::Power);
    }

    #[test]
    fn a_reset_counter_falls_back_to_power_and_says_so_and_gaps_are_errors() {
        let rs = [
            r(0.0, Some(5000.0), Some(10.0)),
            r(1.0, Some(100.0), Some(10.0)),
            r(2.0, Some(1100.0), Some(10.0)),
        ];
        let e = over(&rs, 0.0, 2.0).unwrap();
        assert_eq!((e.method, e.counter_reset), (Method::Power, true));
        assert!((e.joules - 20.0).abs() < 1e-9);
        let no_power: Vec<Reading> = rs.iter().map(|x| r(x.t, x.energy_mj, None)).collect();
        let err = over(&no_power, 0.0, 2.0).unwrap_err();
        assert!(err.contains("went down"), "{err}");
        let err = over(&rs[1..], 0.0, 2.0).unwrap_err();
        assert!(err.contains("do not cover"), "{err}");
        assert!(over(&rs, 1.0, 1.0).is_err());
    }
}
