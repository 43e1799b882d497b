//! Numerically robust sums: double-double accumulators with a running error bound, the
//! certified difference of two of them, and exact power-of-two rescaling of a workload.
//!
//! # The sum type
//! A [`Sum`] holds an unevaluated pair `hi + lo` (`|lo| ≤ u·|hi|`, `u = 2⁻⁵³`) and `err`, a
//! bound on `|hi + lo − S|` for the exact real sum `S` of everything added. Adding `x`
//! uses Knuth's TwoSum, which is error-free: `(s, e) = TwoSum(hi, x)` gives `s + e = hi + x`
//! exactly; the only rounding is in `e + lo`, whose exact error `r` is found by a second
//! TwoSum and added to `err` as `|r|`; a third TwoSum renormalises `(s, e + lo)` exactly. After m additions,
//!
//! `|hi + lo − S| ≤ err ≤ m · u² · max_k |S_k|`  (S_k the partial sums),
//!
//! and `err = 0` whenever no `e + lo` rounded (e.g. all values have few significant bits).
//!
//! # Certified differences
//! Prefix sums of huge values cancel: `F(I) − F(J)` in plain f64 loses every bit below
//! `u·F(I)` (with `F(I) = 1e15 + 14.97`, `F(I) − F(J)` came out 10 instead of 9.97).
//! [`Sum::difference`] subtracts two sums in double-double and returns the rounded f64
//! value `d` only when its total error bound is at most `u·|d|`, so that
//!
//! `|d − (S_a − S_b)| ≤ 2u · |S_a − S_b|`  (relative error at most 2⁻⁵², 2 ulps).
//!
//! Otherwise it returns `None` and the caller sums the set difference directly (with a
//! [`Sum`], relative error ≤ m·u² + u). Every stage load of the DP, its chain bound and its
//! memory checks therefore carries relative error at most 2⁻⁵² plus one rounding per term
//! kind (compute + communication), i.e. below 4·2⁻⁵³ ≈ 4.5e-16 overall, whatever the
//! magnitudes, as long as nothing overflows or underflows.
//!
//! # Overflow
//! Sums of finite values can still overflow (two sizes of 1e308 make `inf`, and then
//! `inf − inf = NaN`). [`Rescale`] multiplies every time by `2^−t` and every byte count by
//! `2^−b`, chosen so that the largest possible sum (`(3n + m)` times the largest value) stays
//! below `2^1000`. Multiplying by a power of two is exact (barring underflow of values more
//! than 2⁹⁷⁰ below the largest), so loads, memory checks and the optimum scale exactly and
//! the optimal placement is unchanged; the objective is scaled back by `2^t`.
//!
//! Complexity: O(1) per operation; [`Rescale::apply`] is O(n + m) for n nodes and m edges.

use crate::model::{DeviceSet, Node, Workload};

/// `u`: the unit roundoff of f64.
pub const UNIT_ROUNDOFF: f64 = f64::EPSILON / 2.0;

/// Knuth's TwoSum: `s + e = a + b` exactly, `s = fl(a + b)`.
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// A compensated (double-double) sum with a running bound on its error; see the module doc.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sum {
    hi: f64,
    lo: f64,
    err: f64,
}

impl Sum {
    pub const ZERO: Sum = Sum {
        hi: 0.0,
        lo: 0.0,
        err: 0.0,
    };

    /// The sum of `values`.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Sum {
        values.into_iter().fold(Sum::ZERO, Sum::plus)
    }

    /// `self + x`.
    #[inline]
    pub fn plus(self, x: f64) -> Sum {
        let (s, e) = two_sum(self.hi, x);
        let (t, r) = two_sum(e, self.lo);
        let (hi, lo) = two_sum(s, t);
        Sum {
            hi,
            lo,
            err: self.err + r.abs(),
        }
    }

    /// `self − x`.
    #[inline]
    pub fn minus(self, x: f64) -> Sum {
        self.plus(-x)
    }

    /// `self + other`, both compensated.
    #[inline]
    pub fn plus_sum(self, other: Sum) -> Sum {
        let s = self.plus(other.hi).plus(other.lo);
        Sum {
            err: s.err + other.err,
            ..s
        }
    }

    /// `self − other`, both compensated.
    #[inline]
    pub fn minus_sum(self, other: Sum) -> Sum {
        let s = self.minus(other.hi).minus(other.lo);
        Sum {
            err: s.err + other.err,
            ..s
        }
    }

    /// A value certainly ≤ the exact sum (for lower bounds).
    pub fn lower_bound(self) -> f64 {
        self.hi - (self.err + 3.0 * UNIT_ROUNDOFF * self.hi.abs())
    }

    /// A value certainly ≥ the exact sum (for upper bounds).
    pub fn upper_bound(self) -> f64 {
        self.hi + (self.err + 3.0 * UNIT_ROUNDOFF * self.hi.abs())
    }

    /// A value certainly ≥ `x − S` (S the exact sum), in a few flops: `x − hi` is split
    /// exactly by TwoSum, and the two roundings after it, `err` and the margin's own
    /// rounding are added on top.
    #[inline]
    pub fn upper_bound_subtracted_from(self, x: f64) -> f64 {
        let (s, e) = two_sum(x, -self.hi);
        let t = e - self.lo;
        let r = s + t;
        r + (self.err + 4.0 * UNIT_ROUNDOFF * (r.abs() + t.abs()))
    }

    /// A value certainly ≥ `S_self + S_other + x` for sums of non-negative terms and
    /// `x ≥ 0`, in a few flops: five plain additions of terms at most `T = hi + hi' + x`
    /// in magnitude round by at most `4u·T` together.
    #[inline]
    pub fn upper_bound_plus(self, other: Sum, x: f64) -> f64 {
        let big = self.hi + other.hi + x;
        let total = big + (self.lo + other.lo);
        total + (self.err + other.err + 6.0 * UNIT_ROUNDOFF * big.abs())
    }

    /// A value `v` with `v ≤ x` for every f64 `x ≥ S_self − S_other` (exact sums), in a
    /// few flops, for tests `v ≤ limit` that must hold whenever the exact difference is
    /// within `limit`. Whatever the cancellation, the margin is `4u` of the difference plus
    /// `4u` of the low parts (themselves at most `u` of the sums), so within `u²` of the
    /// sums where plain prefix sums lose `u` of them: `d = fl(hi − hi')`, `l = fl(lo − lo')` and
    /// `t = fl(d + l)` round by at most `u·|d|`, `u·|l|` and `u·|t| ≤ u(1 + u)(|d| + |l|)`,
    /// so `|t − (S − S')| ≤ err + err' + (2 + 2u)·u·(|d| + |l|)`; the margin takes `2·(err +
    /// err') + 4u·(|d| + |l|)`, which its own three roundings cannot bring below that, and
    /// `t − margin` rounds monotonically (to at most any f64 above the exact value).
    #[inline]
    pub fn difference_lower_bound(self, other: Sum) -> f64 {
        let d = self.hi - other.hi;
        let l = self.lo - other.lo;
        let t = d + l;
        t - (2.0 * (self.err + other.err) + 4.0 * UNIT_ROUNDOFF * (d.abs() + l.abs()))
    }

    /// The sum rounded to f64 (`hi`; within `u·|S| + err` of the exact sum `S`).
    #[inline]
    pub fn value(self) -> f64 {
        self.hi
    }

    /// A bound on `|hi + lo − S|`.
    pub fn error_bound(self) -> f64 {
        self.err
    }

    /// `self − other` rounded to f64 when that value `d` is certified to be within
    /// `2u·|exact difference|`; `None` when cancellation leaves too few correct bits.
    #[inline]
    pub fn difference(self, other: Sum) -> Option<f64> {
        let (s, e) = two_sum(self.hi, -other.hi);
        let (t, r) = two_sum(self.lo, -other.lo);
        // e + t + r rounds twice: each error at most u times its result.
        let q = e + t;
        let tail = q + r;
        let d = s + tail;
        let err = self.err + other.err + UNIT_ROUNDOFF * (q.abs() + tail.abs());
        if err <= UNIT_ROUNDOFF * d.abs() && d.is_finite() {
            Some(d)
        } else {
            None
        }
    }
}

/// A compensated accumulator for hot loops (Sum2 of Ogita, Rump and Oishi): the running
/// total `hi` takes one addition per term, the TwoSum errors `e_k` are added into a plain
/// `lo`, and `Σ|lo_k|` over its partial results bounds what that plain sum rounded away.
/// So `hi + Σ e_k` is the exact sum, `|lo − Σ e_k| ≤ u · Σ|lo_k|`, and [`Self::sum`]
/// hands over an ordinary [`Sum`] with that bound. The critical path per term is one
/// addition (a [`Sum::plus`] chains three TwoSums), at an error bound of the same order
/// (`m · u² · max|S_k|` after m terms).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Accumulator {
    hi: f64,
    lo: f64,
    lo_abs: f64,
    /// The error bound of the [`Sum`] it started from.
    start_err: f64,
}

impl Accumulator {
    pub const ZERO: Accumulator = Accumulator {
        hi: 0.0,
        lo: 0.0,
        lo_abs: 0.0,
        start_err: 0.0,
    };

    /// An accumulator holding `start` (its pair exactly, its bound carried).
    #[inline(always)]
    pub fn starting_at(start: Sum) -> Accumulator {
        Accumulator {
            hi: start.hi,
            lo: start.lo,
            lo_abs: 0.0,
            start_err: start.err,
        }
    }

    /// `self + x`.
    #[inline(always)]
    pub fn plus(self, x: f64) -> Accumulator {
        let (hi, e) = two_sum(self.hi, x);
        let lo = self.lo + e;
        Accumulator {
            hi,
            lo,
            lo_abs: self.lo_abs + lo.abs(),
            ..self
        }
    }

    /// The accumulated sum with its error bound. `lo_abs` is itself a rounded sum of
    /// non-negative terms, below the exact one by at most a factor `1 − (m − 1)u`; the
    /// factor `1 + 2⁻²⁰` covers that for any m below 2³⁰ terms.
    #[inline]
    pub fn sum(self) -> Sum {
        let (hi, lo) = two_sum(self.hi, self.lo);
        Sum {
            hi,
            lo,
            err: self.start_err + UNIT_ROUNDOFF * self.lo_abs * (1.0 + 1.0 / 1048576.0),
        }
    }
}

/// Exact fixed-point images of a set of non-negative f64 values: every value is an integer
/// multiple of one power of two `2^e` (its lowest set bit at least that), so `x = n·2^e`
/// with an integer `n` held exactly in an i128. Sums and differences of images are exact
/// integer arithmetic as long as they stay below 2¹²⁷ in magnitude, which
/// [`FixedPoint::for_values`] guarantees for every signed sum of the values it was built
/// from (each used at most once): below 2¹¹⁶. [`FixedPoint::value`] rounds back once to
/// nearest, within `u·|exact|`; [`FixedPoint::nonnegative_value`] within `2u·exact`. Built
/// only when the values span at most 116 bits (with their count) and `2^e` is a normal
/// f64; otherwise `None` and callers use [`Sum`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedPoint {
    /// One unit is `2^exponent`.
    exponent: i32,
}

impl FixedPoint {
    /// Bits an image and every signed sum of the set may use.
    const BITS: i32 = 116;

    /// `x = m·2^e` with `m` odd, for finite `x > 0`.
    fn odd_mantissa(x: f64) -> (u64, i32) {
        let bits = x.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let fraction = bits & ((1 << 52) - 1);
        let (m, e) = if biased == 0 {
            (fraction, -1074)
        } else {
            (fraction | 1 << 52, biased - 1075)
        };
        let tz = m.trailing_zeros();
        (m >> tz, e + tz as i32)
    }

    /// The scale for `values` (each finite and ≥ 0), or `None` when they do not fit.
    pub fn for_values(values: &[f64]) -> Option<FixedPoint> {
        let (mut low, mut high) = (i32::MAX, i32::MIN);
        for &x in values {
            if !x.is_finite() || x < 0.0 {
                return None;
            }
            if x > 0.0 {
                let (m, e) = Self::odd_mantissa(x);
                low = low.min(e);
                high = high.max(e + 64 - m.leading_zeros() as i32);
            }
        }
        if low == i32::MAX {
            return Some(FixedPoint { exponent: 0 });
        }
        let count_bits = 64 - (values.len() as u64).leading_zeros() as i32;
        (high - low + count_bits <= Self::BITS && (-1022..=1023 - Self::BITS).contains(&low))
            .then_some(FixedPoint { exponent: low })
    }

    /// The exact image `x / 2^e` of a value of the set.
    pub fn image(&self, x: f64) -> i128 {
        if x == 0.0 {
            return 0;
        }
        let (m, e) = Self::odd_mantissa(x);
        i128::from(m) << (e - self.exponent)
    }

    /// `n·2^e` rounded to nearest (the conversion rounds once; the scaling is exact).
    #[inline]
    pub fn value(&self, n: i128) -> f64 {
        n as f64 * pow2(self.exponent)
    }

    /// `n·2^e` for `n ≥ 0`, within `2u·n·2^e` (not always the nearest value): `n` splits
    /// into `h·2⁶⁴ + l` with `h < 2⁵²` exact, and `h·2⁶⁴ + fl(l)` rounds twice, each time by
    /// at most u of a value no larger than `n`. Three times cheaper than the one rounding
    /// of [`Self::value`] (a library call for an i128).
    #[inline]
    pub fn nonnegative_value(&self, n: i128) -> f64 {
        debug_assert!(n >= 0);
        let (high, low) = ((n >> 64) as u64, n as u64);
        (high as f64 * 18446744073709551616.0 + low as f64) * pow2(self.exponent)
    }
}

/// Power-of-two scale factors that keep every sum over a workload finite.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rescale {
    /// Times (compute, communication) are multiplied by this.
    pub time: f64,
    /// Byte counts (sizes, memory) are multiplied by this.
    pub bytes: f64,
}

/// `2^e` for `e` in the normal exponent range (−1022 … 1023).
pub fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// `⌈log₂ x⌉` for finite `x > 0`.
pub fn ceil_log2(x: f64) -> i32 {
    x.log2().ceil() as i32
}

impl Rescale {
    pub const NONE: Rescale = Rescale {
        time: 1.0,
        bytes: 1.0,
    };

    /// The factors for `w` that make `(3n + m + 4) · max value < 2^1000` for times and for
    /// bytes separately: 1 (no change) unless the values come within that of `f64::MAX`.
    pub fn for_sums(w: &Workload) -> Rescale {
        let terms = (3 * w.len() + w.edges().len() + 4) as f64;
        let max_time = w
            .nodes()
            .iter()
            .flat_map(|v| [v.fpga_latency, v.cpu_latency])
            .chain(w.edges().iter().map(|e| e.cost))
            .fold(0.0, f64::max);
        let max_bytes = w
            .nodes()
            .iter()
            .map(|v| v.size_bytes)
            .fold(w.devices().memory_per_accelerator_bytes, f64::max);
        Rescale {
            time: Self::down_to(max_time, terms, 1000),
            bytes: Self::down_to(max_bytes, terms, 1000),
        }
    }

    /// The largest power of two ≤ 1 with `terms · max · factor < 2^limit`.
    pub fn down_to(max: f64, terms: f64, limit: i32) -> f64 {
        if !max.is_finite() || max <= 0.0 {
            return 1.0;
        }
        let e = ceil_log2(max) + ceil_log2(terms) + 1 - limit;
        if e <= 0 {
            1.0
        } else {
            pow2(-e.min(1000))
        }
    }

    pub fn is_identity(&self) -> bool {
        *self == Rescale::NONE
    }

    /// `w` with every time multiplied by `self.time` and every byte count by `self.bytes`.
    pub fn apply(&self, w: &Workload) -> Workload {
        self.apply_with(w, |v| v)
    }

    /// [`Rescale::apply`], each node first passed through `edit`.
    pub fn apply_with(&self, w: &Workload, mut edit: impl FnMut(Node) -> Node) -> Workload {
        let (t, b) = (self.time, self.bytes);
        let nodes: Vec<Node> = w
            .nodes()
            .iter()
            .map(|v| {
                let mut v = edit(v.clone());
                v.fpga_latency *= t;
                v.cpu_latency *= t;
                v.size_bytes *= b;
                if let Some(m) = &mut v.memory {
                    m.weight_bytes *= b;
                    m.gradient_bytes *= b;
                    m.optimizer_bytes *= b;
                    m.activation_bytes *= b;
                }
                v
            })
            .collect();
        let edges = w
            .edges()
            .iter()
            .map(|e| {
                (
                    w.node(e.from).id,
                    w.node(e.to).id,
                    e.cost * t,
                    e.size_bytes * b,
                )
            })
            .collect();
        let d = w.devices();
        let devices = DeviceSet {
            memory_per_accelerator_bytes: d.memory_per_accelerator_bytes * b,
            ..d.clone()
        };
        Workload::new(nodes, edges, devices)
            .expect("exact power-of-two scaling keeps a valid workload valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_difference_survives_cancellation() {
        let a = Sum::of([1e15, 5.0, 5.0, 4.97]);
        let b = Sum::of([1e15, 5.0]);
        let d = a.difference(b).expect("certified");
        assert!((d - 9.97).abs() <= 2.0 * UNIT_ROUNDOFF * 9.97, "{d}");
        // Plain f64 prefix sums lose it.
        assert_eq!((1e15 + 5.0 + 5.0 + 4.97) - (1e15 + 5.0), 10.0);
    }

    #[test]
    fn uncertified_difference_is_refused() {
        // 1e-40 below 1e30: the pair cannot hold it, so no value is claimed.
        let a = Sum::of([1e30, 1.0, 1e-40]);
        let b = Sum::of([1e30, 1.0]);
        if let Some(d) = a.difference(b) {
            assert!((d - 1e-40).abs() <= 2.0 * UNIT_ROUNDOFF * 1e-40, "{d}");
        }
        assert_eq!(Sum::of([3.0, 0.25]).difference(Sum::of([3.0])), Some(0.25));
        assert_eq!(Sum::of([3.0]).difference(Sum::of([3.0])), Some(0.0));
    }

    #[test]
    fn error_bound_covers_the_exact_sum() {
        // 0.1 has no finite binary expansion: the bound must cover the true rounding.
        let s = Sum::of(std::iter::repeat_n(0.1, 1000));
        let exact = 100.0; // 1000 · fl(0.1) differs from 100 by ~5.5e-15
        assert!((s.value() - exact).abs() <= 1e-13);
        assert!(s.error_bound() <= 1000.0 * UNIT_ROUNDOFF * UNIT_ROUNDOFF * 100.0);
    }

    /// Values on the grid `2⁻³⁰·ℤ` below 2⁸³ (exact as i128 after scaling by
    /// [`GRID`]), drawn by a xorshift generator: every partial result of a compensated sum
    /// of them lies on the grid too, so bounds can be checked in exact integer arithmetic.
    struct Dyadic(u64);

    const GRID: f64 = (1u64 << 30) as f64;

    impl Dyadic {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A mantissa below 2⁵³ times 2⁻⁶⁰ … 2³⁰, truncated to the grid.
        fn value(&mut self) -> f64 {
            let mantissa = (self.next() >> 11) as f64;
            let exponent = (self.next() % 91) as i32 - 60;
            (mantissa * 2f64.powi(exponent) * GRID).trunc() / GRID
        }
    }

    /// `x` on the grid, scaled to an integer.
    fn exact(x: f64) -> i128 {
        (x * GRID) as i128
    }

    /// Signed sums of fixed-point images round back to the correctly rounded exact sum,
    /// checked against the grid's own integers (values are multiples of 2⁻³⁰ below 2⁸³,
    /// so their exact sums are i128s after scaling by 2³⁰, independently of the images'
    /// bit decomposition); and sets spanning too many bits get no fixed point.
    #[test]
    fn fixed_point_sums_are_exact() {
        let mut r = Dyadic(0x1234_5678_9ABC_DEF1);
        for _ in 0..2000 {
            // Below 2⁷⁶ on the 2⁻³⁰ grid, with at most 200 values: 114 bits.
            let values: Vec<f64> = (0..1 + r.next() % 200)
                .map(|_| {
                    let x = r.value();
                    if x >= 2f64.powi(76) {
                        x / 2f64.powi(20)
                    } else {
                        x
                    }
                })
                .collect();
            let point = FixedPoint::for_values(&values).expect("114 bits fit");
            let (mut fixed, mut truth) = (0i128, 0i128);
            for &x in &values {
                assert_eq!(point.value(point.image(x)), x);
                match r.next() % 3 {
                    0 => {}
                    1 => {
                        fixed += point.image(x);
                        truth += exact(x);
                    }
                    _ => {
                        fixed -= point.image(x);
                        truth -= exact(x);
                    }
                }
            }
            assert_eq!(point.value(fixed), truth as f64 / GRID);
            if truth >= 0 {
                let near = point.nonnegative_value(fixed);
                let off = (exact(near) - truth).abs() as f64;
                assert!(
                    off <= 2.0 * UNIT_ROUNDOFF * truth as f64,
                    "{near} vs {truth}"
                );
            }
        }
        assert_eq!(FixedPoint::for_values(&[1e-300, 1e300]), None);
        assert_eq!(FixedPoint::for_values(&[1.0, -1.0]), None);
        assert_eq!(FixedPoint::for_values(&[1.0, f64::NAN]), None);
        assert_eq!(FixedPoint::for_values(&[f64::MIN_POSITIVE / 2.0]), None);
        let tiny = FixedPoint::for_values(&[0.0, 0.1, 3.0]).expect("fits");
        assert_eq!(
            tiny.value(tiny.image(0.1) * 3 + tiny.image(3.0)),
            0.1 * 3.0 + 3.0
        );
    }

    /// The accumulator's bound holds on random sums of values from 2⁻³⁰ to 2⁸³ (with a
    /// zero bound this fails: the low part rounds), checked in exact integer arithmetic:
    /// every value is a multiple of 2⁻³⁰ below 2⁸³, so every partial result and the exact
    /// sum are integers after scaling by 2³⁰ and fit an i128.
    #[test]
    fn accumulator_bound_covers_the_exact_sum() {
        let mut r = Dyadic(0x9E37_79B9_7F4A_7C15);
        for _ in 0..2000 {
            let terms = 1 + r.next() % 300;
            let first = (r.next() % 1000) as f64 * 0.5;
            let (mut acc, mut sum) = (Accumulator::starting_at(Sum::of([first])), exact(first));
            for _ in 0..terms {
                let sign = if r.next().is_multiple_of(4) {
                    -1.0
                } else {
                    1.0
                };
                let x = sign * r.value();
                acc = acc.plus(x);
                sum += exact(x);
            }
            let got = acc.sum();
            let off = (exact(got.hi) + exact(got.lo) - sum).abs() as f64;
            let bound = got.error_bound() * GRID;
            assert!(off <= bound * (1.0 + 1e-12), "{off} > {bound}");
        }
    }

    /// The two cheap one-sided bounds the knapsack uses are on the safe side of the exact
    /// value and within a few ulps of it, checked in exact integer arithmetic (values are
    /// multiples of 2⁻³⁰ below 2⁸³, as above).
    #[test]
    fn cheap_one_sided_bounds_hold_exactly() {
        let mut r = Dyadic(0x2545_F491_4F6C_DD1D);
        let scale = GRID;
        for _ in 0..2000 {
            let (mut a, mut b) = (Sum::ZERO, Sum::ZERO);
            let (mut ea, mut eb) = (0i128, 0i128);
            for _ in 0..1 + r.next() % 40 {
                let x = r.value();
                a = a.plus(x);
                ea += exact(x);
                let y = r.value();
                b = b.plus(y);
                eb += exact(y);
            }
            let x = r.value();
            let over = |bound: f64, truth: i128| bound * scale - truth as f64;
            let tol = |truth: i128| {
                1e-15 * (truth as f64).abs()
                    + a.error_bound() * scale
                    + b.error_bound() * scale
                    + 1.0
            };
            let sub = a.upper_bound_subtracted_from(x);
            let truth = exact(x) - ea;
            // For an integer t, x ≥ t exactly when ⌊x⌋ ≥ t.
            assert!(
                (sub * scale).floor() as i128 >= truth,
                "{sub} below {truth}"
            );
            assert!(
                over(sub, truth)
                    <= 8.0 * UNIT_ROUNDOFF * ((ea as f64).abs() + (exact(x) as f64).abs())
                        + tol(truth)
            );
            let plus = a.upper_bound_plus(b, x);
            let truth = ea + eb + exact(x);
            assert!(
                (plus * scale).floor() as i128 >= truth,
                "{plus} below {truth}"
            );
            assert!(over(plus, truth) <= 8.0 * UNIT_ROUNDOFF * truth as f64 + tol(truth));
        }
    }

    /// The difference of two prefix sums of non-negative values (the chain bound's
    /// intervals) is bounded below exactly and within a few ulps of the difference itself,
    /// whatever the prefix's magnitude, checked in exact integer arithmetic (values are
    /// multiples of 2⁻³⁰ below 2⁸³, as above).
    #[test]
    fn difference_lower_bound_holds_exactly() {
        let mut r = Dyadic(0x0DDB_1A5E_5BAD_5EED);
        for _ in 0..2000 {
            let mut prefixes = vec![(Sum::ZERO, 0i128)];
            for _ in 0..1 + r.next() % 60 {
                let (s, e) = *prefixes.last().expect("non-empty");
                let x = r.value();
                prefixes.push((s.plus(x), e + exact(x)));
            }
            let n = prefixes.len() as u64;
            let (h, e) = (r.next() % n, r.next() % n);
            let ((sh, eh), (se, ee)) = (prefixes[h.min(e) as usize], prefixes[h.max(e) as usize]);
            let low = se.difference_lower_bound(sh);
            let truth = ee - eh;
            // For an integer t, x ≤ t exactly when ⌈x⌉ ≤ t.
            assert!((low * GRID).ceil() as i128 <= truth, "{low} above {truth}");
            let lows = (se.lo.abs() + sh.lo.abs()) * GRID;
            let margin = 8.0 * UNIT_ROUNDOFF * (truth as f64 + lows)
                + 3.0 * (se.error_bound() + sh.error_bound()) * GRID
                + 1.0;
            assert!(
                truth as f64 - low * GRID <= margin,
                "{low} far below {truth}"
            );
        }
        // The instance a plain prefix difference lost (0.0625 for 1.5e-7 bytes after
        // 4.8e14): the bound is the small group's size within u² of the sums (6e-18).
        let sizes = [66684978446275.72, 417604996332608.2, 1.5060297713562063e-7];
        let (two, three) = (Sum::of(sizes[..2].iter().copied()), Sum::of(sizes));
        let low = three.difference_lower_bound(two);
        assert!(low <= sizes[2] && low >= sizes[2] - 1e-16, "{low}");
    }

    #[test]
    fn one_sided_bounds_bracket_the_exact_sum() {
        let s = Sum::of([1e15, 14.97]).minus_sum(Sum::of([1e15, 5.0]));
        assert!(s.lower_bound() <= 9.97 && 9.97 <= s.upper_bound());
        assert!(s.upper_bound() - s.lower_bound() < 1e-13);
    }

    #[test]
    fn rescale_is_a_power_of_two_and_identity_for_ordinary_values() {
        assert_eq!(Rescale::down_to(1e15, 100.0, 1000), 1.0);
        let f = Rescale::down_to(1e308, 8.0, 1000);
        assert!(f < 1.0 && f > 0.0);
        assert_eq!(f.to_bits() & ((1u64 << 52) - 1), 0, "a power of two");
        assert!((1e308 * f * 8.0).is_finite());
        assert!(1e308 * f * 8.0 < pow2(1000));
    }
}
