//! The packing test of the load bound ([`super`], "Packing"): a depth-first search that
//! assigns the largest forced units to the `k` accelerators, each bin needing room ≥ 0
//! ([`super::communication::bin_room`]) and memory ≤ M, and the rooms together holding
//! what the CPUs cannot take, `Σ_d φ_d ≥ need(T) − fpga(F(T))`. It answers
//! [`Packing::Fits`] (no proof), [`Packing::Impossible`] (T is impossible) or
//! [`Packing::GaveUp`] after [`super::NODE_LIMIT`] nodes or when the budget runs out.

use super::communication::{bin_room, max_into, Cuts};
use super::NODE_LIMIT;
use crate::model::grouping::Grouping;
use crate::solve::budget::Budget;

/// Outcome of the packing search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Packing {
    Fits,
    Impossible,
    GaveUp,
}

#[derive(Clone, Debug)]
pub(super) struct Bin {
    /// The forced units in it, sorted.
    pub(super) units: Vec<usize>,
    pub(super) compute: f64,
    pub(super) size: f64,
    /// A lower bound on h over the bin's units, per μ (empty without the communication
    /// test).
    pub(super) h: Vec<f64>,
    pub(super) room: f64,
}

/// The packing search (module docs, Packing).
pub(super) struct Search<'a, 'b> {
    units: &'a Grouping,
    items: &'a [usize],
    cuts: Option<&'a mut Cuts<'b>>,
    k: usize,
    t: f64,
    memory: f64,
    fluid: f64,
    bins: Vec<Bin>,
    suffix_compute: Vec<f64>,
    suffix_size: Vec<f64>,
    nodes: usize,
    budget: Budget,
}

/// The packing question of a [`Search`]: `k` accelerators, each with time at most `t` and
/// memory at most `memory`, and `fluid` (module docs, Packing).
#[derive(Clone, Copy, Debug)]
pub(super) struct Bins {
    pub(super) k: usize,
    pub(super) t: f64,
    pub(super) memory: f64,
    pub(super) fluid: f64,
}

impl<'a, 'b> Search<'a, 'b> {
    pub(super) fn new(
        units: &'a Grouping,
        items: &'a [usize],
        cuts: Option<&'a mut Cuts<'b>>,
        Bins {
            k,
            t,
            memory,
            fluid,
        }: Bins,
        budget: Budget,
    ) -> Self {
        let n = items.len();
        let (mut suffix_compute, mut suffix_size) = (vec![0.0; n + 1], vec![0.0; n + 1]);
        for i in (0..n).rev() {
            suffix_compute[i] = suffix_compute[i + 1] + units[items[i]].fpga_latency;
            suffix_size[i] = suffix_size[i + 1] + units[items[i]].size_bytes;
        }
        Search {
            units,
            items,
            cuts,
            k,
            t,
            memory,
            fluid,
            bins: Vec::with_capacity(k),
            suffix_compute,
            suffix_size,
            nodes: 0,
            budget,
        }
    }

    pub(super) fn run(&mut self) -> Packing {
        self.place(0)
    }

    /// The bin `bin` (None: a new one) with unit g added, or None if it cannot hold it.
    fn extend(&mut self, bin: Option<&Bin>, g: usize) -> Option<Bin> {
        let u = self.units;
        let (mut units, compute, size) = match bin {
            Some(b) => (
                b.units.clone(),
                b.compute + u[g].fpga_latency,
                b.size + u[g].size_bytes,
            ),
            None => (Vec::new(), u[g].fpga_latency, u[g].size_bytes),
        };
        if size > self.memory {
            return None;
        }
        let at = units.partition_point(|&x| x < g);
        units.insert(at, g);
        let h = match self.cuts.as_deref_mut() {
            None => Vec::new(),
            Some(cuts) => {
                let mut h = cuts.single(g);
                if let Some(b) = bin {
                    max_into(&mut h, &b.h);
                    // The whole set when the budget allows, else the pairs already known.
                    if let Some(whole) = cuts.set(&units) {
                        max_into(&mut h, &whole);
                    } else {
                        for &a in &b.units {
                            if let Some(pair) = cuts.sets.get(&[a.min(g), a.max(g)][..]) {
                                max_into(&mut h, pair);
                            }
                        }
                    }
                }
                h
            }
        };
        let room = bin_room(
            self.cuts.as_ref().map_or(&[][..], |c| &c.mu[..]),
            &h,
            compute,
            self.t,
        )?;
        Some(Bin {
            units,
            compute,
            size,
            h,
            room,
        })
    }

    fn place(&mut self, i: usize) -> Packing {
        self.nodes += 1;
        if self.nodes > NODE_LIMIT
            || (self.nodes.is_multiple_of(1024) && self.budget.is_exhausted())
        {
            return Packing::GaveUp;
        }
        let empty = (self.k - self.bins.len()) as f64;
        let room: f64 = self.bins.iter().map(|b| b.room).sum::<f64>() + empty * self.t;
        if room < self.suffix_compute[i] + self.fluid {
            return Packing::Impossible;
        }
        let memory: f64 =
            self.bins.iter().map(|b| self.memory - b.size).sum::<f64>() + empty * self.memory;
        if memory < self.suffix_size[i] {
            return Packing::Impossible;
        }
        if i == self.items.len() {
            return Packing::Fits;
        }
        // Only bins with room for the smallest forced unit can take forced units.
        let smallest = self.units[self.items[self.items.len() - 1]].fpga_latency;
        let usable: f64 = self
            .bins
            .iter()
            .map(|b| b.room)
            .filter(|&r| r >= smallest)
            .sum::<f64>()
            + empty * self.t;
        if usable < self.suffix_compute[i] {
            return Packing::Impossible;
        }
        let g = self.items[i];
        for b in 0..=self.bins.len() {
            let opening = b == self.bins.len();
            if opening && self.bins.len() == self.k {
                break;
            }
            if !opening {
                if self.bins[b].room < self.units[g].fpga_latency {
                    continue;
                }
                // Bins with equal contents behave alike only without communication (with
                // it, a bin's future h depends on which units it holds).
                let same = |x: &Bin, y: &Bin| x.compute == y.compute && x.size == y.size;
                if self.cuts.is_none() && (0..b).any(|a| same(&self.bins[a], &self.bins[b])) {
                    continue;
                }
            }
            let current = (!opening).then(|| self.bins[b].clone());
            let Some(new) = self.extend(current.as_ref(), g) else {
                continue;
            };
            if opening {
                self.bins.push(new);
            } else {
                self.bins[b] = new;
            }
            let outcome = self.place(i + 1);
            match current {
                None => {
                    self.bins.pop();
                }
                Some(old) => self.bins[b] = old,
            }
            match outcome {
                Packing::Fits => return Packing::Fits,
                Packing::GaveUp => return Packing::GaveUp,
                Packing::Impossible => {}
            }
        }
        Packing::Impossible
    }
}
