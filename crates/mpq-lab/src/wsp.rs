//! The WSP space-filling design (J. Santiago, M. Claeys-Bruno, M. Sergent, "Construction of
//! space-filling designs using WSP algorithm for high dimensional spaces", Chemometrics and
//! Intelligent Laboratory Systems 113, 2012), the design "Multipath QUIC: Design and
//! Evaluation" (CoNEXT 2017, §4) used for its scenarios.
//!
//! Candidates are drawn uniformly in [0, 1]^d from a seeded ChaCha RNG. For a minimum
//! distance `d_min`: start at the candidate closest to the centre of the cube, remove every
//! candidate closer than `d_min` to the current point, move to the nearest surviving
//! candidate, and repeat until none survives. The selected points are pairwise at least
//! `d_min` apart. A bisection on `d_min` finds the design with the requested number of
//! points; when no `d_min` gives exactly that many, the design with the fewest points above
//! the count is cut to its first `n` points (still pairwise `d_min` apart).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A WSP design in the unit cube.
#[derive(Debug, Clone, PartialEq)]
pub struct WspDesign {
    /// The points, in the order the algorithm visited them.
    pub points: Vec<Vec<f64>>,
    /// The minimum distance the points respect.
    pub d_min: f64,
}

/// Euclidean distance, squared.
fn dist2(a: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0;
    for k in 0..a.len().min(b.len()) {
        let d = a[k] - b[k];
        s += d * d;
    }
    s
}

/// `n` points drawn uniformly in [0, 1]^`dims` from `seed`.
pub fn uniform(n: usize, dims: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| (0..dims).map(|_| rng.random::<f64>()).collect()).collect()
}

/// One WSP pass over `cands` with minimum distance `d_min`: the indices of the selected
/// candidates, in visiting order.
pub fn select(cands: &[Vec<f64>], d_min: f64) -> Vec<usize> {
    let Some(dims) = cands.first().map(Vec::len) else { return Vec::new() };
    // Flat, for speed: candidate i is flat[i*dims..(i+1)*dims].
    let flat: Vec<f64> = cands.iter().flatten().copied().collect();
    let at = |i: usize| &flat[i * dims..(i + 1) * dims];
    let centre = vec![0.5; dims];
    let start = (0..cands.len()).min_by(|&a, &b| dist2(at(a), &centre).total_cmp(&dist2(at(b), &centre)));
    let Some(mut current) = start else { return Vec::new() };
    let d2 = d_min * d_min;
    // Candidates neither selected nor removed.
    let mut alive: Vec<usize> = (0..cands.len()).filter(|&i| i != current).collect();
    let mut selected = vec![current];
    loop {
        // One pass: drop the candidates within d_min, find the nearest survivor.
        let here = at(current).to_vec();
        let mut nearest: Option<(f64, usize)> = None;
        alive.retain(|&i| {
            let d = dist2(at(i), &here);
            if d < d2 {
                return false;
            }
            if nearest.is_none_or(|(n, _)| d < n) {
                nearest = Some((d, i));
            }
            true
        });
        let Some((_, next)) = nearest else { return selected };
        alive.retain(|&i| i != next);
        selected.push(next);
        current = next;
    }
}

/// The smallest pairwise distance among `points` (infinite for fewer than two).
pub fn min_distance(points: &[Vec<f64>]) -> f64 {
    let mut best = f64::INFINITY;
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            best = best.min(dist2(a, b));
        }
    }
    best.sqrt()
}

/// A WSP design of `n` points in [0, 1]^`dims` from `candidates` candidates drawn with
/// `seed`. Same arguments, same design. Fewer than `n` points only if there are fewer
/// candidates.
pub fn wsp(n: usize, dims: usize, candidates: usize, seed: u64) -> WspDesign {
    let cands = uniform(candidates.max(n), dims, seed);
    if n == 0 || dims == 0 {
        return WspDesign { points: Vec::new(), d_min: 0.0 };
    }
    // Count falls (not always strictly) as d_min grows: all candidates at 0, one beyond the
    // cube's diagonal.
    let (mut lo, mut hi) = (0.0f64, (dims as f64).sqrt() + 1e-9);
    // The largest d_min seen that still selects at least n points, and its selection.
    let mut best: (f64, Vec<usize>) = (0.0, Vec::new());
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        let sel = select(&cands, mid);
        if sel.len() >= n {
            if mid >= best.0 {
                best = (mid, sel.clone());
            }
            if sel.len() == n {
                break;
            }
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let (d_min, mut sel) = best;
    if sel.is_empty() {
        sel = select(&cands, 0.0);
    }
    sel.truncate(n);
    WspDesign { points: sel.into_iter().map(|i| cands[i].clone()).collect(), d_min }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_the_count_and_respects_d_min() {
        for (n, dims) in [(253, 6), (253, 8), (20, 2), (5, 3), (1, 4)] {
            let d = wsp(n, dims, 20 * n.max(50), 42);
            assert_eq!(d.points.len(), n, "n={n} dims={dims}");
            assert!(d.points.iter().all(|p| p.len() == dims && p.iter().all(|x| (0.0..=1.0).contains(x))));
            if n > 1 {
                assert!(d.d_min > 0.0);
                assert!(min_distance(&d.points) >= d.d_min, "{} < {}", min_distance(&d.points), d.d_min);
            }
        }
    }

    #[test]
    fn same_seed_same_design_other_seed_other_design() {
        assert_eq!(wsp(30, 4, 1000, 7), wsp(30, 4, 1000, 7));
        assert_ne!(wsp(30, 4, 1000, 7).points, wsp(30, 4, 1000, 8).points);
    }

    #[test]
    fn fills_space_better_than_uniform_sampling() {
        // Maximin distance of WSP against plain uniform samples of the same size: WSP keeps
        // its points well apart; random samples always have close pairs.
        for seed in 0..5 {
            let d = wsp(100, 6, 4000, seed);
            let random = uniform(100, 6, 1000 + seed);
            let (w, r) = (min_distance(&d.points), min_distance(&random));
            assert!(w > 1.5 * r, "seed {seed}: wsp {w}, uniform {r}");
        }
    }

    #[test]
    fn covers_the_cube() {
        // Every corner region of [0,1]^2 gets points (a space-filling design, not a cluster).
        let d = wsp(40, 2, 2000, 3);
        for (x0, y0) in [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.5, 0.5)] {
            let inside = d.points.iter().filter(|p| p[0] >= x0 && p[0] < x0 + 0.5 && p[1] >= y0 && p[1] < y0 + 0.5);
            assert!(inside.count() >= 5, "quadrant ({x0}, {y0})");
        }
    }

    #[test]
    fn select_removes_close_candidates() {
        let c = vec![vec![0.5, 0.5], vec![0.52, 0.5], vec![0.85, 0.5], vec![0.1, 0.5]];
        // From the centre: 0.52 is closer than 0.1 and removed; then 0.85 (nearer than 0.1).
        assert_eq!(select(&c, 0.1), vec![0, 2, 3]);
        assert_eq!(select(&c, 0.0), vec![0, 1, 2, 3]);
        assert_eq!(select(&c, 0.6), vec![0]);
    }
}
