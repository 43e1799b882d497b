//! The numeric guard in front of every HiGHS model.
//!
//! HiGHS refuses a model (`Highs_passMip`/`Highs_passLp` return an error, and the `highs`
//! crate's panicking API panics) when a matrix entry is NaN or above `large_matrix_value`
//! (10¹⁵ by default) in magnitude, or a cost or bound is NaN; and it reads a cost or bound
//! at or above `infinite_cost`/`infinite_bound` (10²⁰) as infinite, which changes the model.
//! Finite inputs reach those values easily (a node time of 10¹⁵, a size of 10³⁰⁸, a
//! profile speed of 10⁻³⁰⁰).
//!
//! Every number on its way into a HiGHS model passes a [`Guard`]: it keeps the first one
//! HiGHS would refuse or misread, with where it is. The model's owner then does not hand
//! the model to HiGHS: the IPs stop with [`SolveError::Unsupported`] (exit 2, naming the
//! number and what to do), a bound's LP falls back to a weaker valid bound. Only the
//! crate's non-panicking calls (`try_new`, `try_optimise`, `try_set_option`,
//! `try_solve`) are used, so a status HiGHS returns anyway is an error, never a panic.

use crate::solve::{MethodId, SolveError};

/// HiGHS's default `large_matrix_value`: larger matrix entries make the model invalid.
pub const LARGE_MATRIX_VALUE: f64 = 1e15;

/// HiGHS's default `infinite_bound` and `infinite_cost`: values at or above are infinite.
pub const INFINITE: f64 = 1e20;

/// The first number of a model that HiGHS would refuse or misread (module documentation).
#[derive(Clone, Debug, Default)]
pub struct Guard {
    first: Option<String>,
}

impl Guard {
    /// A matrix entry: finite and at most [`LARGE_MATRIX_VALUE`] in magnitude.
    #[inline]
    pub fn coefficient(&mut self, x: f64, at: impl FnOnce() -> String) {
        let fits = x.abs() <= LARGE_MATRIX_VALUE; // false for NaN
        if self.first.is_none() && !fits {
            self.first = Some(format!(
                "{} has the coefficient {x:e} (HiGHS takes at most {LARGE_MATRIX_VALUE:e})",
                at()
            ));
        }
    }

    /// A bound or right-hand side: infinite on purpose, or finite below [`INFINITE`].
    #[inline]
    pub fn bound(&mut self, x: f64, at: impl FnOnce() -> String) {
        if self.first.is_none() && (x.is_nan() || (x.is_finite() && x.abs() >= INFINITE)) {
            self.first = Some(format!(
                "{} has the bound {x:e} (HiGHS reads {INFINITE:e} and more as infinite)",
                at()
            ));
        }
    }

    /// An objective coefficient: finite and below [`INFINITE`] in magnitude.
    #[inline]
    pub fn cost(&mut self, x: f64, at: impl FnOnce() -> String) {
        let finite = x.abs() < INFINITE; // false for NaN
        if self.first.is_none() && !finite {
            self.first = Some(format!(
                "{} has the cost {x:e} (HiGHS reads {INFINITE:e} and more as infinite)",
                at()
            ));
        }
    }

    /// What HiGHS would refuse, if anything.
    pub fn trouble(&self) -> Option<&str> {
        self.first.as_deref()
    }

    /// `Ok` when HiGHS takes every number seen, else the IP's error for `method`.
    pub fn check(&self, method: MethodId) -> Result<(), SolveError> {
        match &self.first {
            None => Ok(()),
            Some(what) => Err(SolveError::Unsupported {
                method,
                what: format!(
                    "numbers beyond what HiGHS accepts: {what}; the workload's times, sizes or costs span too wide a range for an integer program (rescale them, or use --method dp)"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_number_highs_would_refuse() {
        let mut g = Guard::default();
        g.coefficient(1e15, || "row 0".into());
        g.bound(f64::INFINITY, || "row 0".into());
        g.bound(-1e19, || "row 0".into());
        g.cost(-1e19, || "column 0".into());
        assert!(g.check(MethodId::Ip).is_ok());
        g.coefficient(-1e308, || "row 3".into());
        g.bound(f64::NAN, || "row 4".into());
        let e = g.check(MethodId::Ip).unwrap_err().to_string();
        assert!(e.contains("row 3") && e.contains("-1e308"), "{e}");
        let mut g = Guard::default();
        g.coefficient(f64::NAN, || "row 1".into());
        assert!(g.trouble().unwrap().contains("row 1"));
        let mut g = Guard::default();
        g.bound(1e20, || "column 2".into());
        assert!(g.trouble().unwrap().contains("column 2"));
        let mut g = Guard::default();
        g.cost(f64::INFINITY, || "column 5".into());
        assert!(g.trouble().unwrap().contains("column 5"));
    }
}
