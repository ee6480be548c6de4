//! Medians and spreads of repeated measurements: how every scenario that repeats
//! a point reports it. One definition for the whole lab, so a "median" means the
//! same thing in every figure (the middle value, or the mean of the two middle
//! values for an even count).

use serde::{Deserialize, Deserializer, Serialize};

/// Median, smallest and largest of a set of measurements, and how many.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The middle value (mean of the two middle ones for an even count).
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// How many finite values there were.
    pub n: usize,
}

/// The spread of the finite values in `v`; `None` if there are none.
pub fn spread(mut v: Vec<f64>) -> Option<Spread> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: v[0],
        max: v[n - 1],
        n,
    })
}

/// The median of the finite values in `v`; `None` if there are none.
pub fn median(v: Vec<f64>) -> Option<f64> {
    spread(v).map(|s| s.median)
}

/// Reads a number that JSON may hold as `null`: `serde_json` writes a NaN or an
/// infinity as `null`, and a raw record read back for re-judging must get the NaN
/// back (`#[serde(deserialize_with = "crate::stats::nan_if_null")]`).
pub fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_non_finite() {
        let s = spread(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(median(vec![4.0, 2.0]), Some(3.0));
        assert_eq!(spread(vec![f64::NAN, 1.0, f64::INFINITY]).unwrap().n, 1);
        assert!(spread(vec![f64::NAN]).is_none());
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn null_reads_back_as_nan() {
        #[derive(Serialize, Deserialize)]
        struct R {
            #[serde(deserialize_with = "nan_if_null")]
            x: f64,
        }
        let text = serde_json::to_string(&R { x: f64::NAN }).unwrap();
        assert_eq!(text, r#"{"x":null}"#);
        let back: R = serde_json::from_str(&text).unwrap();
        assert!(back.x.is_nan());
        let back: R = serde_json::from_str(r#"{"x":2.5}"#).unwrap();
        assert_eq!(back.x, 2.5);
    }
}
