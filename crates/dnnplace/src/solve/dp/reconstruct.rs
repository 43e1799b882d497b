//! Reading an optimal split off the back links of the [`super::relax`] table.
//!
//! From the state `(ℓ, k)` at the whole set `V`, follow the links: "one device fewer"
//! moves to `(ℓ, k−1)` or `(ℓ−1, k)` at the same ideal; a stage link `I ← J` emits the
//! stage `I \ J` on an accelerator or a CPU and moves to `J`. The walk ends at `∅`; it
//! emits at most k + ℓ stages. Accelerator and CPU indices are given in walk order (the
//! last pipeline stage first); [`crate::model::Placement::canonical`] renumbers them.
//!
//! Complexity: O(k + ℓ) links.

use super::relax::{Link, Table};
use crate::model::Device;

/// One stage of the split: the ideals `I ⊋ J` and the device of `I \ J`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage {
    pub ideal: usize,
    pub from: usize,
    pub device: Device,
}

/// The stages of the optimal split ending at ideal `full` (the last pipeline stage first).
/// `None` when the state `(ℓ, k)` at `full` was never reached.
pub fn stages(table: &Table, full: usize) -> Option<Vec<Stage>> {
    stages_from(table, full, table.l, table.k)
}

/// The stages of the split reaching state `(l, k)` at ideal `full` (the last pipeline stage
/// first); `None` when that state was never reached.
pub fn stages_from(table: &Table, full: usize, l: usize, k: usize) -> Option<Vec<Stage>> {
    let (k1, s) = (table.k + 1, table.states());
    if !table.at(full, l, k).is_finite() {
        return None;
    }
    let mut out = Vec::new();
    let (mut i, mut cl, mut ck) = (full, l, k);
    let (mut next_acc, mut next_cpu) = (0, 0);
    while i != 0 {
        match table.link[i * s + cl * k1 + ck] {
            Link::FewerAccelerators => ck -= 1,
            Link::FewerCpus => cl -= 1,
            Link::Accelerator(j) => {
                out.push(Stage {
                    ideal: i,
                    from: j as usize,
                    device: Device::Accelerator(next_acc),
                });
                next_acc += 1;
                ck -= 1;
                i = j as usize;
            }
            Link::Cpu(j) => {
                out.push(Stage {
                    ideal: i,
                    from: j as usize,
                    device: Device::Cpu(next_cpu),
                });
                next_cpu += 1;
                cl -= 1;
                i = j as usize;
            }
            Link::None => unreachable!("every finite state on the walk has a back link"),
        }
    }
    Some(out)
}
