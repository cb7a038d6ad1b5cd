//! Small statistics for the report: empirical CDF points, quartiles with Tukey whiskers, and
//! shares and medians of EBen values.

/// Steps of the empirical CDF of `values` (NaN dropped): for the `k`-th smallest of `n`
/// values `v`, the points `(v, (k-1)/n)` and `(v, k/n)`, so that a line through them draws
/// the staircase.
pub fn ecdf_steps(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut out = Vec::with_capacity(2 * v.len());
    for (k, &x) in v.iter().enumerate() {
        out.push((x, k as f64 / n));
        out.push((x, (k + 1) as f64 / n));
    }
    out
}

/// Median of `values` (NaN dropped): the mean of the two middle values for an even count.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 })
}

/// A box of a box plot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxStats {
    /// Smallest value within 1.5 × IQR below the first quartile (lower whisker).
    pub low: f64,
    /// First quartile.
    pub q1: f64,
    /// Median.
    pub median: f64,
    /// Third quartile.
    pub q3: f64,
    /// Largest value within 1.5 × IQR above the third quartile (upper whisker).
    pub high: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of values.
    pub n: usize,
}

/// Value at quantile `q` (0-1) of sorted `v`, by linear interpolation between ranks.
fn quantile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Quartiles and Tukey whiskers (the most extreme values within 1.5 × IQR of the box) of
/// `values` (NaN dropped); `None` for no values.
pub fn box_stats(values: &[f64]) -> Option<BoxStats> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let (q1, median, q3) = (quantile(&v, 0.25), quantile(&v, 0.5), quantile(&v, 0.75));
    let iqr = q3 - q1;
    let low = v.iter().copied().find(|&x| x >= q1 - 1.5 * iqr).unwrap_or(v[0]);
    let high = v.iter().rev().copied().find(|&x| x <= q3 + 1.5 * iqr).unwrap_or(v[v.len() - 1]);
    Some(BoxStats { low, q1, median, q3, high, min: v[0], max: v[v.len() - 1], n: v.len() })
}

/// Share (0-1) of `values` that are at least `threshold`; `None` for no values.
pub fn share_at_least(values: &[f64], threshold: f64) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().filter(|&&x| x >= threshold).count() as f64 / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecdf_is_a_staircase_to_one() {
        let s = ecdf_steps(&[3.0, 1.0, f64::NAN, 2.0]);
        assert_eq!(s.len(), 6);
        assert_eq!(s[0], (1.0, 0.0));
        assert_eq!(s[1], (1.0, 1.0 / 3.0));
        assert_eq!(s[5], (3.0, 1.0));
        assert!(s.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1), "monotone");
        assert!(ecdf_steps(&[]).is_empty());
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn box_with_an_outlier() {
        // 1..=9 and 100: quartiles 3.25, 5.5, 7.75; IQR 4.5; upper fence 14.5.
        let mut v: Vec<f64> = (1..=9).map(f64::from).collect();
        v.push(100.0);
        let b = box_stats(&v).unwrap();
        assert_eq!((b.q1, b.median, b.q3), (3.25, 5.5, 7.75));
        assert_eq!(b.low, 1.0);
        assert_eq!(b.high, 9.0, "the whisker stops at the last value inside the fence");
        assert_eq!((b.min, b.max, b.n), (1.0, 100.0, 10));
        let one = box_stats(&[2.0]).unwrap();
        assert_eq!((one.low, one.q1, one.median, one.q3, one.high), (2.0, 2.0, 2.0, 2.0, 2.0));
        assert_eq!(box_stats(&[]), None);
    }

    #[test]
    fn shares() {
        assert_eq!(share_at_least(&[-0.5, 0.0, 0.3, 1.0], 0.0), Some(0.75));
        assert_eq!(share_at_least(&[], 0.0), None);
    }
}
