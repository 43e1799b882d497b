//! The cheapest accelerator set around one unit: `h_g(μ) = min_{S ∋ g} cut(S) + μ·fpga(S)`,
//! by maximum flow (Dinic's algorithm), for [`super::load`].
//!
//! `S` ranges over sets of units that may go on an accelerator (the others are forced to
//! the sink side); `cut(S)` is the communication an accelerator holding `S` pays
//! ([`crate::solve::milp::units`]: `c_e` for every hyperedge `T_e` that `S` meets without containing).
//!
//! **Network** (Lawler's hyperedge gadget). One vertex per unit, two per hyperedge
//! (`in_e`, `out_e`) and a sink `t`:
//!
//! ```text
//! a → in_e   ∞      for every a ∈ T_e
//! in_e → out_e  c_e
//! out_e → a  ∞      for every a ∈ T_e
//! a → t      μ·fpga_a   (∞ if a may not go on an accelerator)
//! ```
//!
//! with source `g`. For a cut with source side `X ∋ g`, let `S = X ∩ units`. If `S` meets
//! `T_e` at `a`, then `in_e ∈ X` (else `a → in_e` is cut, ∞); if `T_e ⊄ S`, some `b ∉ S`
//! forces `out_e ∉ X`; so a finite cut pays `c_e` for every hyperedge `S` cuts, and
//! `μ·fpga_a` for every `a ∈ S`. Conversely, for any `S ∋ g` put `in_e` on the source side
//! iff `S` meets `T_e` and `out_e` iff `T_e ⊆ S`: the cut is exactly `cut(S) + μ·fpga(S)`.
//! So the minimum cut is `h_g(μ)`.
//!
//! **Soundness in floating point.** We return the value of the flow we built, never the
//! cut: every augmentation pushes at most the residual capacity, so the flow is feasible
//! and its value is at most every cut (weak duality), hence at most `h_g(μ)` — a valid
//! *lower* bound on it even if rounding stops the search early.

use crate::model::grouping::Hyperedge;

/// Residual capacities below this (relative to the largest finite capacity) count as zero.
const RELATIVE_EPS: f64 = 1e-13;

/// A flow network: arcs in adjacency lists; capacities live in a separate residual
/// vector (arc `a ^ 1` is the reverse of arc `a`), so one network serves many flows.
#[derive(Clone, Debug)]
pub(crate) struct Network {
    head: Vec<usize>,
    next: Vec<usize>,
    to: Vec<usize>,
}

const NIL: usize = usize::MAX;

impl Network {
    pub(crate) fn new(vertices: usize) -> Network {
        Network {
            head: vec![NIL; vertices],
            next: Vec::new(),
            to: Vec::new(),
        }
    }

    /// Adds the arc `from → to` with `capacity` (and its reverse, of capacity 0) to the
    /// network and to `residual`; returns the arc's index.
    pub(crate) fn arc(
        &mut self,
        residual: &mut Vec<f64>,
        from: usize,
        to: usize,
        capacity: f64,
    ) -> usize {
        let a = self.to.len();
        for (x, y, c) in [(from, to, capacity), (to, from, 0.0)] {
            self.to.push(y);
            residual.push(c);
            self.next.push(self.head[x]);
            self.head[x] = self.to.len() - 1;
        }
        a
    }

    /// Dinic's algorithm from `s` to `t` on the capacities `residual` (updated to the
    /// residual capacities); returns the value of the flow found (∞ if an
    /// infinite-capacity path exists).
    pub(crate) fn max_flow(&self, residual: &mut [f64], s: usize, t: usize, eps: f64) -> f64 {
        let n = self.head.len();
        let mut total = 0.0;
        let mut level = vec![usize::MAX; n];
        let mut current = vec![NIL; n];
        let mut queue = Vec::with_capacity(n);
        loop {
            level.iter_mut().for_each(|x| *x = usize::MAX);
            level[s] = 0;
            queue.clear();
            queue.push(s);
            let mut i = 0;
            while i < queue.len() {
                let v = queue[i];
                i += 1;
                // Vertices at t's level or beyond lie on no shortest augmenting path.
                if level[t] != usize::MAX && level[v] >= level[t] {
                    break;
                }
                let mut a = self.head[v];
                while a != NIL {
                    let w = self.to[a];
                    if residual[a] > eps && level[w] == usize::MAX {
                        level[w] = level[v] + 1;
                        queue.push(w);
                    }
                    a = self.next[a];
                }
            }
            if level[t] == usize::MAX {
                return total;
            }
            current.copy_from_slice(&self.head);
            let mut phase = Phase {
                net: self,
                residual: &mut *residual,
                level: &level,
                current: &mut current,
                sink: t,
                eps,
            };
            loop {
                let pushed = phase.augment(s, f64::INFINITY);
                if pushed <= 0.0 {
                    break;
                }
                if pushed.is_infinite() {
                    return f64::INFINITY;
                }
                total += pushed;
            }
        }
    }
}

/// One phase of Dinic's algorithm: the level graph `level` of the residual capacities
/// `residual`, with the current-arc pointers `current`, towards `sink`.
struct Phase<'n, 'r> {
    net: &'n Network,
    residual: &'r mut [f64],
    level: &'r [usize],
    current: &'r mut [usize],
    sink: usize,
    eps: f64,
}

impl Phase<'_, '_> {
    /// One augmenting path from `v` carrying at most `limit` in the level graph
    /// (depth-first, with current-arc pointers); returns what it carries.
    fn augment(&mut self, v: usize, limit: f64) -> f64 {
        if v == self.sink {
            return limit;
        }
        while self.current[v] != NIL {
            let a = self.current[v];
            let w = self.net.to[a];
            if self.residual[a] > self.eps && self.level[w] == self.level[v] + 1 {
                let pushed = self.augment(w, limit.min(self.residual[a]));
                if pushed > 0.0 {
                    if self.residual[a].is_finite() {
                        self.residual[a] -= pushed;
                    }
                    if self.residual[a ^ 1].is_finite() {
                        self.residual[a ^ 1] += pushed;
                    }
                    return pushed;
                }
            }
            self.current[v] = self.net.next[a];
        }
        0.0
    }
}

/// The Lawler network of the units and hyperedges, ready to answer `h_Q(μ)` for any Q, μ.
#[derive(Clone, Debug)]
pub struct CheapestSet {
    network: Network,
    /// Capacities with μ = 0 and no unit joined to the source.
    capacity: Vec<f64>,
    /// Arc `a → t` of each unit that may go on an accelerator (its capacity is μ·fpga_a).
    sink_arc: Vec<Option<usize>>,
    /// Arc `source → a` of each unit (capacity ∞ when a ∈ Q, else 0).
    source_arc: Vec<usize>,
    fpga: Vec<f64>,
    sink: usize,
    source: usize,
    eps: f64,
}

impl CheapestSet {
    /// `allowed[a]`: unit a may go on an accelerator.
    pub fn new(fpga: &[f64], allowed: &[bool], hyperedges: &[Hyperedge]) -> CheapestSet {
        let units = fpga.len();
        let sink = units + 2 * hyperedges.len();
        let source = sink + 1;
        let mut network = Network::new(source + 1);
        let mut capacity = Vec::new();
        let mut largest: f64 = 0.0;
        for (i, e) in hyperedges.iter().enumerate() {
            let (inn, out) = (units + 2 * i, units + 2 * i + 1);
            network.arc(&mut capacity, inn, out, e.cost);
            largest = largest.max(e.cost);
            for &a in &e.groups {
                network.arc(&mut capacity, a, inn, f64::INFINITY);
                network.arc(&mut capacity, out, a, f64::INFINITY);
            }
        }
        let mut sink_arc = vec![None; units];
        for a in 0..units {
            if !allowed[a] {
                network.arc(&mut capacity, a, sink, f64::INFINITY);
            } else if fpga[a] > 0.0 {
                sink_arc[a] = Some(network.arc(&mut capacity, a, sink, 0.0));
                largest = largest.max(fpga[a]);
            }
        }
        let source_arc = (0..units)
            .map(|a| network.arc(&mut capacity, source, a, 0.0))
            .collect();
        CheapestSet {
            network,
            capacity,
            sink_arc,
            source_arc,
            fpga: fpga.to_vec(),
            sink,
            source,
            eps: RELATIVE_EPS * largest,
        }
    }

    /// A lower bound on `h_g(μ)` (the value of a feasible flow, see the module docs),
    /// for `μ ≥ 0` and a unit `g` that may go on an accelerator.
    pub fn value(&self, g: usize, mu: f64) -> f64 {
        self.value_of_set(&[g], mu)
    }

    /// A lower bound on `h_Q(μ) = min_{S ⊇ Q} cut(S) + μ·fpga(S)` for a nonempty set Q
    /// of units (∞ if Q holds a unit that may not go on an accelerator): the same
    /// network with the source joined to every unit of Q by an ∞ arc.
    pub fn value_of_set(&self, set: &[usize], mu: f64) -> f64 {
        let mut residual = self.capacity.clone();
        for (a, arc) in self.sink_arc.iter().enumerate() {
            if let Some(arc) = *arc {
                residual[arc] = mu * self.fpga[a];
            }
        }
        for &g in set {
            residual[self.source_arc[g]] = f64::INFINITY;
        }
        self.network.max_flow(
            &mut residual,
            self.source,
            self.sink,
            self.eps * mu.max(1.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(units: &[usize], cost: f64) -> Hyperedge {
        Hyperedge {
            groups: units.to_vec(),
            cost,
            backward: false,
        }
    }

    /// Brute force over all sets S ⊇ Q of allowed units.
    fn brute(
        fpga: &[f64],
        allowed: &[bool],
        hyperedges: &[Hyperedge],
        set: &[usize],
        mu: f64,
    ) -> f64 {
        let n = fpga.len();
        let mut best = f64::INFINITY;
        for mask in 0u32..(1 << n) {
            let inside = |a: usize| mask >> a & 1 == 1;
            if set.iter().any(|&g| !inside(g)) || (0..n).any(|a| inside(a) && !allowed[a]) {
                continue;
            }
            let mut value: f64 = (0..n).filter(|&a| inside(a)).map(|a| mu * fpga[a]).sum();
            for e in hyperedges {
                let meets = e.groups.iter().any(|&a| inside(a));
                let contained = e.groups.iter().all(|&a| inside(a));
                if meets && !contained {
                    value += e.cost;
                }
            }
            best = best.min(value);
        }
        best
    }

    #[test]
    fn matches_brute_force_on_a_small_hypergraph() {
        // A chain 0 → 1 → 2 → 3 with a fan-out from 1 to {2, 3}, and a CPU-only unit 4.
        let fpga = [1.0, 4.0, 2.0, 0.5, 3.0];
        let allowed = [true, true, true, true, false];
        let hyperedges = [
            edge(&[0, 1], 0.75),
            edge(&[1, 2, 3], 1.5),
            edge(&[2, 3], 0.25),
            edge(&[3, 4], 2.0),
        ];
        let cheapest = CheapestSet::new(&fpga, &allowed, &hyperedges);
        let sets: Vec<Vec<usize>> = (0..4)
            .map(|g| vec![g])
            .chain([vec![0, 2], vec![1, 3], vec![0, 3], vec![0, 1, 3]])
            .collect();
        for set in &sets {
            for mu in [0.0, 0.1, 0.5, 1.0, 3.0] {
                let (got, want) = (
                    cheapest.value_of_set(set, mu),
                    brute(&fpga, &allowed, &hyperedges, set, mu),
                );
                assert!(
                    (got - want).abs() <= 1e-12,
                    "Q {set:?} mu {mu}: flow {got}, brute force {want}"
                );
            }
        }
        assert_eq!(cheapest.value_of_set(&[0, 4], 1.0), f64::INFINITY);
        // By hand: h_1(1) — {1} alone pays 4 + 0.75 + 1.5 = 6.25; {0,1} pays 5 + 1.5 = 6.5;
        // {1,2,3} pays 6.5 + 0.75 + 2.0 = 9.25; so 6.25.
        assert_eq!(cheapest.value(1, 1.0), 6.25);
    }
}
