//! Paired ratios and the noise they are judged against.

/// The median (the mean of the middle two for an even count); NaN for none.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

pub fn min_max(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// How much two untraced phases differ: the ratios of consecutive baselines, and their
/// median distance from 1 (the noise a difference between tracers must exceed to count).
#[derive(Debug, Clone)]
pub struct Noise {
    pub pair_ratios: Vec<f64>,
    pub median_abs: f64,
    /// From undisturbed pairs only.
    pub clean: bool,
}

impl Noise {
    /// From the untraced phases in order, each with whether it was undisturbed (no other
    /// tracer on the host): only undisturbed pairs count, if there are any.
    pub fn of(baselines: &[(f64, bool)]) -> Self {
        let pairs = |clean_only: bool| -> Vec<f64> {
            baselines
                .windows(2)
                .filter(|w| !clean_only || (w[0].1 && w[1].1))
                .map(|w| w[1].0 / w[0].0)
                .collect()
        };
        let mut pair_ratios = pairs(true);
        let clean = !pair_ratios.is_empty();
        if !clean {
            pair_ratios = pairs(false);
        }
        let distances: Vec<f64> = pair_ratios.iter().map(|r| (r - 1.0).abs()).collect();
        Self {
            median_abs: median(&distances),
            pair_ratios,
            clean,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        let (lo, hi) = min_max(&self.pair_ratios);
        serde_json::json!({
            "median_abs_deviation_of_pair_ratio": self.median_abs,
            "pair_ratio_min": lo,
            "pair_ratio_max": hi,
            "pair_ratios": self.pair_ratios,
            "from_undisturbed_pairs_only": self.clean,
        })
    }
}
