//! The fractional knapsack: how much accelerator compute CPUs can absorb within a CPU-time
//! budget. The DP prunes with it ([`super::dp`]) and the max-load bound's volume test uses
//! it ([`super::bounds::load`]).
//!
//! Items `i` with weight `w_i ≥ 0` (a group's cpu time) and value `v_i ≥ 0` (its fpga
//! time), budget `B ≥ 0`:
//!
//! ```text
//! K(B) = max Σ_i x_i v_i   s.t.   Σ_i x_i w_i ≤ B,   0 ≤ x_i ≤ 1
//! ```
//!
//! Items of weight 0 are taken whole for free (`F = Σ_{w_i = 0} v_i`); items of value 0
//! change nothing. Order the others by decreasing ratio `v_i / w_i`, with prefix sums
//! `W_j, V_j` of the first j of them (`W_0 = V_0 = 0`), and let j be the largest index with
//! `W_j ≤ B`. Then (Dantzig's greedy)
//!
//! ```text
//! K(B) = F + V_j + v_{j+1} (B − W_j) / w_{j+1}      (no last term when every item fits)
//! ```
//!
//! *Proof.* The greedy solution is feasible. For any feasible x, move weight from an item
//! of lower ratio to a not yet full item of higher ratio: the value does not decrease, and
//! the greedy solution is where no such move remains. ∎
//!
//! Since every 0/1 choice is feasible for the relaxation, `K(B) ≥ Σ_{i∈S} v_i` for every
//! set S with `Σ_{i∈S} w_i ≤ B`: the most fpga time any set of groups with cpu time at most
//! B can take off the accelerators. `K` is concave, nondecreasing and piecewise linear in
//! B.
//!
//! Complexity: O(m log m) to build for m items, O(log m) per [`FractionalKnapsack::value`].

use crate::model::numerics::{Sum, UNIT_ROUNDOFF};

/// The greedy solution of the fractional knapsack, as prefix sums (module docs).
#[derive(Clone, Debug)]
pub struct FractionalKnapsack {
    /// `(W_j, V_j)` for j = 0..=m, items of positive weight and value by decreasing ratio.
    prefix: Vec<(Sum, Sum)>,
    /// `(w_j, v_j)` of those items.
    items: Vec<(f64, f64)>,
    /// `W_j` rounded, for the binary search.
    weights: Vec<f64>,
    /// F: the value of the items of weight 0.
    free: Sum,
}

impl FractionalKnapsack {
    /// The knapsack over `(weight, value)` items, both ≥ 0.
    pub fn new(items: impl IntoIterator<Item = (f64, f64)>) -> Self {
        let mut free = Sum::ZERO;
        let mut paid: Vec<(f64, f64)> = Vec::new();
        for (weight, value) in items {
            if weight == 0.0 {
                free = free.plus(value);
            } else if value > 0.0 {
                paid.push((weight, value));
            }
        }
        paid.sort_by(|a, b| (b.1 / b.0).total_cmp(&(a.1 / a.0)));
        let mut prefix = Vec::with_capacity(paid.len() + 1);
        prefix.push((Sum::ZERO, Sum::ZERO));
        for &(weight, value) in &paid {
            let &(w, v) = prefix.last().expect("starts with (0, 0)");
            prefix.push((w.plus(weight), v.plus(value)));
        }
        FractionalKnapsack {
            weights: prefix.iter().map(|(w, _)| w.value()).collect(),
            prefix,
            items: paid,
            free,
        }
    }

    /// `K(budget)`, rounded up: the most value within the weight `budget` (∞ gives every
    /// item; a budget ≤ 0 only the free ones).
    ///
    /// Numerics: the prefix sums are compensated ([`crate::model::numerics`]) and the last
    /// item's fraction is taken of the rest `B − W_j` rounded up, without capping it at 1
    /// (that extends a segment of the concave K, so it stays above K): with ratios of 1e18,
    /// a rounding of the rest would otherwise move the value by far more than an ulp.
    pub fn value(&self, budget: f64) -> f64 {
        if budget.is_nan() || budget <= 0.0 {
            return self.free.upper_bound();
        }
        let j = self.weights.partition_point(|&w| w <= budget) - 1;
        let (w0, v0) = self.prefix[j];
        let part = match self.items.get(j) {
            None => 0.0,
            Some(&(w1, v1)) => {
                let rest = w0.upper_bound_subtracted_from(budget).max(0.0);
                let part = v1 * rest / w1 * (1.0 + 4.0 * UNIT_ROUNDOFF);
                if !part.is_finite() {
                    // Past f64's range (an ∞ inside a Sum would make NaN): no limit.
                    return f64::INFINITY;
                }
                part
            }
        };
        let value = v0.upper_bound_plus(self.free, part);
        if value.is_nan() {
            f64::INFINITY
        } else {
            value
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The optimum by brute force: an optimal solution has at most one fractional item, so
    /// it is some set S taken whole (within the budget) plus the best fraction of one other
    /// item that fills the rest.
    fn brute_force(items: &[(f64, f64)], budget: f64) -> f64 {
        let m = items.len();
        let mut best: f64 = 0.0;
        for set in 0u32..1 << m {
            let inside = |i: usize| set & (1 << i) != 0;
            let weight: f64 = (0..m).filter(|&i| inside(i)).map(|i| items[i].0).sum();
            if weight > budget {
                continue;
            }
            let value: f64 = (0..m).filter(|&i| inside(i)).map(|i| items[i].1).sum();
            let rest = budget - weight;
            let fraction = (0..m)
                .filter(|&i| !inside(i))
                .map(|i| {
                    if items[i].0 <= rest {
                        items[i].1
                    } else {
                        items[i].1 * rest / items[i].0
                    }
                })
                .fold(0.0, f64::max);
            best = best.max(value + fraction);
        }
        best
    }

    #[test]
    fn by_hand() {
        // Ratios 3, 2, 1: budget 3 takes the first two whole (weights 1 + 1, values 3 + 2)
        // and half of the third (weight 2, value 2): 6. The free item adds 5.
        let k = FractionalKnapsack::new([(2.0, 2.0), (1.0, 3.0), (0.0, 5.0), (1.0, 2.0)]);
        // Rounded up by a few ulps (numerics), never down.
        let near = |got: f64, want: f64| got >= want && got - want <= 1e-14 * want;
        assert!(near(k.value(0.0), 5.0));
        assert!(near(k.value(3.0), 11.0));
        assert!(near(k.value(f64::INFINITY), 12.0));
        assert_eq!(FractionalKnapsack::new([]).value(4.0), 0.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn equals_brute_force(
            items in proptest::collection::vec((0u8..6, 0u8..9), 0..8),
            budget in 0u8..30,
        ) {
            // Small integers (and some zeros) so that ties and exact fits occur.
            let items: Vec<(f64, f64)> = items.iter().map(|&(w, v)| (f64::from(w), f64::from(v))).collect();
            let budget = f64::from(budget) / 2.0;
            let greedy = FractionalKnapsack::new(items.iter().copied()).value(budget);
            let oracle = brute_force(&items, budget);
            prop_assert!((greedy - oracle).abs() <= 1e-9 * oracle.max(1.0), "greedy {greedy}, brute force {oracle}");
        }

        #[test]
        fn never_below_brute_force_with_huge_ratios(
            items in proptest::collection::vec((-6.0f64..15.0, -6.0f64..15.0), 1..7),
            budget in -6.0f64..15.0,
        ) {
            // Weights and values spread over 1e-6 … 1e15: ratios up to 1e21.
            let items: Vec<(f64, f64)> = items.iter().map(|&(w, v)| (10f64.powf(w), 10f64.powf(v))).collect();
            let budget = 10f64.powf(budget);
            let greedy = FractionalKnapsack::new(items.iter().copied()).value(budget);
            let oracle = brute_force(&items, budget);
            prop_assert!(greedy >= oracle * (1.0 - 1e-15), "greedy {greedy} below brute force {oracle}");
        }
    }
}
