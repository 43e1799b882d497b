//! How many ideals a group DAG has, counted (or bounded) without listing them.
//!
//! **Frontier count.** Decide the groups in their topological order `0, 1, …, n−1`; group
//! `g` may join the ideal only if all its predecessors did. After deciding `0..t`, what
//! matters for the rest is the membership of the *frontier* `F_t`: decided groups with an
//! undecided successor. The state is that membership (a bit per frontier group) and each
//! state carries how many downsets of `{0, …, t−1}` restrict to it:
//!
//! ```text
//! N_0(∅) = 1
//! N_{t+1}(σ ∪ {g ↦ 0}) += N_t(σ)
//! N_{t+1}(σ ∪ {g ↦ 1}) += N_t(σ)        if σ(p) = 1 for every p ∈ pred(g)
//! ```
//!
//! then the predecessors whose last successor is `g` leave the frontier (states that now
//! agree are merged, counts added). The number of ideals is `Σ_σ N_n(σ)`. Cost:
//! O(n · S · (W + deg)) with S the largest number of states and W = ⌈|F|/64⌉ words.
//!
//! **Bounds when the width is too large.** Two downsets of `{0, …, t−1}` with different
//! restrictions to `F_t` are different ideals of the whole DAG (a downset of a prefix of a
//! topological order is an ideal), so every `|states_t|` is a *lower* bound on the count.
//! When the states exceed `max_states`, the frontier group that stays longest (largest
//! last successor) is *forgotten*: its bit is dropped from every state (merging counts)
//! and later groups no longer check it. That counts the ideals of a weaker order — the
//! arcs out of the forgotten group removed — whose ideals include every ideal of the DAG,
//! so the final sum is then an *upper* bound, and `exact` is false.
//!
//! A count the budget cuts short (the caller's, [`estimate_within`]; always the run's,
//! [`crate::solve::budget::set_run_limits`]: its deadline, Ctrl-C, its memory) returns its
//! lower bound and no upper bound. It looks at the budget after every group (a group
//! costs one sort of at most `2·max_states` states).

use crate::model::contraction::Contraction;
use crate::solve::budget::Budget;

/// The number of ideals of a group DAG, or bounds on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdealEstimate {
    /// At least this many ideals.
    pub lower_bound: u128,
    /// At most this many ideals (saturates at `u128::MAX`).
    pub upper_bound: u128,
    /// `lower_bound == upper_bound` is the exact count.
    pub exact: bool,
}

/// The state limit that keeps a count to about 2·10⁸ steps.
fn default_states(c: &Contraction) -> usize {
    (200_000_000 / (c.len() + 1)).clamp(256, 1 << 16)
}

/// [`estimate_with`] with a state limit that keeps the count to about 2·10⁸ steps.
pub fn estimate(c: &Contraction) -> IdealEstimate {
    estimate_with(c, default_states(c))
}

/// [`estimate`] within `budget` (module documentation): what every solver calls, so
/// that a library caller's time limit and Ctrl-C bind the count too (the 2·10⁸ steps
/// take about a second, and a solver may count several DAGs).
pub fn estimate_in(c: &Contraction, budget: &Budget) -> IdealEstimate {
    estimate_within(c, default_states(c), budget)
}

/// Counts the ideals of `c` with at most `max_states` frontier states (module
/// documentation); exact unless the frontier needed more.
pub fn estimate_with(c: &Contraction, max_states: usize) -> IdealEstimate {
    estimate_within(c, max_states, &Budget::unlimited())
}

/// [`estimate_with`] within `budget`: cut short, the lower bound so far and no upper bound.
pub fn estimate_within(c: &Contraction, max_states: usize, budget: &Budget) -> IdealEstimate {
    let n = c.len();
    let last_succ: Vec<Option<usize>> = c.succ.iter().map(|s| s.last().copied()).collect();
    let mut slot_of: Vec<Option<usize>> = vec![None; n];
    let mut free: Vec<usize> = Vec::new();
    let mut slots = 0usize;
    let mut live: Vec<usize> = Vec::new();
    let mut states = States {
        words: 1,
        keys: vec![0],
        counts: vec![1],
    };
    let mut lower: u128 = 1;
    let mut exact = true;
    // A count cut short keeps the lower bound it has (every `|states_t|`, and the n + 1
    // prefixes of the order).
    for g in 0..n {
        if budget.is_exhausted() {
            return IdealEstimate {
                lower_bound: lower.max(n as u128 + 1),
                upper_bound: u128::MAX,
                exact: false,
            };
        }
        let need: Vec<usize> = c.pred[g].iter().filter_map(|&p| slot_of[p]).collect();
        let slot = (!c.succ[g].is_empty()).then(|| {
            free.pop().unwrap_or_else(|| {
                slots += 1;
                slots - 1
            })
        });
        if let Some(s) = slot {
            slot_of[g] = Some(s);
            live.push(g);
            states.widen(s / 64 + 1);
        }
        states.branch(&need, slot);
        for &p in &c.pred[g] {
            if last_succ[p] == Some(g) {
                if let Some(s) = slot_of[p].take() {
                    states.clear(s);
                    free.push(s);
                    live.retain(|&x| x != p);
                }
            }
        }
        states.merge();
        if exact {
            lower = lower.max(states.len() as u128);
        }
        while states.len() > max_states {
            exact = false;
            let Some(at) = (0..live.len()).max_by_key(|&i| (last_succ[live[i]], live[i])) else {
                break;
            };
            let p = live.swap_remove(at);
            let s = slot_of[p].take().expect("live");
            states.clear(s);
            free.push(s);
            states.merge();
        }
    }
    let total = states
        .counts
        .iter()
        .fold(0u128, |a, &b| a.saturating_add(b));
    if exact {
        IdealEstimate {
            lower_bound: total,
            upper_bound: total,
            exact,
        }
    } else {
        IdealEstimate {
            lower_bound: lower.max(n as u128 + 1),
            upper_bound: total,
            exact,
        }
    }
}

/// Frontier states: `words` u64 words of membership bits each, with their counts.
struct States {
    words: usize,
    keys: Vec<u64>,
    counts: Vec<u128>,
}

impl States {
    fn len(&self) -> usize {
        self.counts.len()
    }

    fn key(&self, i: usize) -> &[u64] {
        &self.keys[i * self.words..(i + 1) * self.words]
    }

    /// Makes room for `words` words per key.
    fn widen(&mut self, words: usize) {
        if words <= self.words {
            return;
        }
        let mut keys = vec![0u64; self.len() * words];
        for i in 0..self.len() {
            keys[i * words..i * words + self.words].copy_from_slice(self.key(i));
        }
        self.keys = keys;
        self.words = words;
    }

    /// Each state `σ` becomes `σ ∪ {g ↦ 0}` and, if every slot of `need` is set,
    /// `σ ∪ {g ↦ 1}`; `slot` is `g`'s bit (none if `g` leaves no successor behind).
    fn branch(&mut self, need: &[usize], slot: Option<usize>) {
        let w = self.words;
        let mut keys = Vec::with_capacity(self.keys.len() * 2);
        let mut counts = Vec::with_capacity(self.counts.len() * 2);
        for i in 0..self.len() {
            let key = &self.keys[i * w..(i + 1) * w];
            keys.extend_from_slice(key);
            counts.push(self.counts[i]);
            if need.iter().all(|&s| key[s / 64] >> (s % 64) & 1 == 1) {
                let at = keys.len();
                keys.extend_from_slice(key);
                if let Some(s) = slot {
                    keys[at + s / 64] |= 1 << (s % 64);
                }
                counts.push(self.counts[i]);
            }
        }
        self.keys = keys;
        self.counts = counts;
    }

    /// Clears bit `s` in every state.
    fn clear(&mut self, s: usize) {
        let w = self.words;
        for i in 0..self.len() {
            self.keys[i * w + s / 64] &= !(1 << (s % 64));
        }
    }

    /// Merges equal states, adding their counts.
    fn merge(&mut self) {
        let w = self.words;
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_unstable_by(|&a, &b| self.key(a).cmp(self.key(b)));
        let mut keys = Vec::with_capacity(self.keys.len());
        let mut counts: Vec<u128> = Vec::with_capacity(self.len());
        for &i in &order {
            let key = self.key(i);
            if !counts.is_empty() && &keys[keys.len() - w..] == key {
                let last = counts.last_mut().expect("non-empty");
                *last = last.saturating_add(self.counts[i]);
            } else {
                keys.extend_from_slice(key);
                counts.push(self.counts[i]);
            }
        }
        self.keys = keys;
        self.counts = counts;
    }
}
