//! Design points of a class: for each point, a value for every varied link parameter
//! ([`Dim`]). Grid: every combination of the levels (ranges take `levels` evenly spaced
//! values on their scale, ends included). List: the points as written. WSP: a space-filling
//! design in the unit cube ([`crate::wsp`]), each axis mapped onto its parameter's range
//! (linear or log) or list of values.

use std::collections::BTreeMap;

use crate::experiment::{Class, Design, Dim};
use crate::param::ParamValue;
use crate::quantity::Quantity;
use crate::wsp::wsp;

/// One design point: dimension name → value.
pub type Point = BTreeMap<String, Quantity>;

/// The positions in [0, 1] of a dimension's grid levels.
fn levels(d: &Dim) -> Vec<f64> {
    let n = match &d.value {
        ParamValue::Range(r) => r.levels.unwrap_or(1) as usize,
        ParamValue::Values(v) => return (0..v.len()).map(|i| (i as f64 + 0.5) / v.len() as f64).collect(),
        ParamValue::Fixed(_) => 1,
    };
    if n <= 1 {
        return vec![0.0];
    }
    (0..n).map(|i| i as f64 / (n - 1) as f64).collect()
}

fn point(dims: &[Dim], u: &[f64]) -> Point {
    dims.iter().zip(u).map(|(d, &x)| (d.name.clone(), d.value.at(x))).collect()
}

/// The class's design points, in a fixed order (the same file gives the same points).
pub fn points(class: &Class) -> Vec<Point> {
    let dims = &class.dims;
    match &class.design {
        Design::List(list) => list.clone(),
        Design::Wsp { points: n, seed, candidates } => {
            wsp(*n, dims.len(), *candidates, *seed).points.iter().map(|u| point(dims, u)).collect()
        }
        Design::Grid => {
            // Odometer over the levels, the last dimension fastest.
            let axes: Vec<Vec<f64>> = dims.iter().map(levels).collect();
            let mut out = Vec::new();
            let mut idx = vec![0usize; axes.len()];
            loop {
                let u: Vec<f64> = idx.iter().zip(&axes).map(|(&i, a)| a[i]).collect();
                out.push(point(dims, &u));
                let mut k = axes.len();
                loop {
                    if k == 0 {
                        return out;
                    }
                    k -= 1;
                    idx[k] += 1;
                    if idx[k] < axes[k].len() {
                        break;
                    }
                    idx[k] = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Experiment;
    use std::path::Path;

    fn class(yaml: &str) -> Class {
        Experiment::from_text(Path::new("t.yaml"), yaml.to_owned()).unwrap().classes.remove(0)
    }

    #[test]
    fn grid_crosses_levels() {
        let c = class(
            "name: g\nworkload: {download: 1MB}\ntopology:\n  paths:\n    - {rate: {min: 10mbit, max: 30mbit, levels: 3}, rtt: [10ms, 20ms]}\n",
        );
        let p = points(&c);
        assert_eq!(p.len(), 6);
        let rates: Vec<f64> = p.iter().map(|p| p["path0.rate"].value / 1e6).collect();
        assert_eq!(rates, [10.0, 10.0, 20.0, 20.0, 30.0, 30.0]);
        let rtts: Vec<f64> = p.iter().map(|p| p["path0.rtt"].value * 1e3).collect();
        assert_eq!(rtts, [10.0, 20.0, 10.0, 20.0, 10.0, 20.0]);
    }

    #[test]
    fn a_grid_without_dimensions_is_one_point() {
        let c = class("name: g\nworkload: {download: 1MB}\ntopology: {paths: [{rate: 10mbit, rtt: 10ms}]}\n");
        assert_eq!(points(&c), vec![Point::new()]);
    }

    #[test]
    fn wsp_scales_axes_to_the_ranges() {
        let c = class(
            "name: w\nworkload: {download: 1MB}\ndesign: {type: wsp, points: 50, seed: 3}\ntopology:\n  paths:\n    - {rate: {min: 0.1mbit, max: 100mbit, scale: log}, rtt: {min: 0ms, max: 50ms}}\n",
        );
        let p = points(&c);
        assert_eq!(p.len(), 50);
        for q in &p {
            assert!((1e5..=1e8).contains(&q["path0.rate"].value));
            assert!((0.0..=0.05).contains(&q["path0.rtt"].value));
        }
        // Log scale: about as many points below 3.16 Mbit/s (the geometric middle) as above.
        let below = p.iter().filter(|q| q["path0.rate"].value < 3.162e6).count();
        assert!((15..=35).contains(&below), "{below}");
        assert_eq!(points(&c), p, "deterministic");
    }
}
