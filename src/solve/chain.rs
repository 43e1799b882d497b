//! Optimal split of a sequence into consecutive stages, each on its own device.
//!
//! For positions `0..=n` and a stage cost for every interval `[i, j)`, on an accelerator
//! (`None` if it does not fit) or a CPU:
//!
//! `f[l][k][j] = min( f[l][k−1][j], f[l−1][k][j],
//!                    min_{i<j} max(f[l][k−1][i], acc(i, j)),
//!                    min_{i<j} max(f[l−1][k][i], cpu(i, j)) )`, `f[·][·][0] = 0`.
//!
//! Used on prefixes of a topological order of the group DAG (each prefix is an ideal, so
//! every stage is contiguous): the PipeDream-style planner and the DP's first upper bound.
//!
//! Complexity: O(n² · (k+1)(ℓ+1)) stage evaluations for n positions, k accelerators and ℓ CPUs.

/// Device kind of a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageDevice {
    Accelerator,
    Cpu,
}

/// An optimal split: its max stage cost and the stages `[start, end)` with their device kind.
#[derive(Clone, Debug)]
pub struct ChainSplit {
    pub objective: f64,
    pub stages: Vec<(usize, usize, StageDevice)>,
}

/// Splits positions `0..n` into at most `accelerators` accelerator stages and `cpus` CPU
/// stages, minimising the largest stage cost. `None` when no split fits.
pub fn split_chain(
    n: usize,
    accelerators: usize,
    cpus: usize,
    acc: impl Fn(usize, usize) -> Option<f64>,
    cpu: impl Fn(usize, usize) -> f64,
) -> Option<ChainSplit> {
    let (k1, s) = (accelerators + 1, (accelerators + 1) * (cpus + 1));
    let mut f = vec![f64::INFINITY; (n + 1) * s];
    // back: 0 = fewer acc, 1 = fewer cpu, 2 = acc stage from i, 3 = cpu stage from i.
    let mut back = vec![(0u8, 0usize); (n + 1) * s];
    f[..s].iter_mut().for_each(|x| *x = 0.0);
    for j in 1..=n {
        for i in 0..j {
            let a = if accelerators > 0 { acc(i, j) } else { None };
            let c = if cpus > 0 { Some(cpu(i, j)) } else { None };
            for l in 0..=cpus {
                for k in 0..=accelerators {
                    let st = l * k1 + k;
                    if let (Some(a), true) = (a, k > 0) {
                        let v = f[i * s + st - 1].max(a);
                        if v < f[j * s + st] {
                            f[j * s + st] = v;
                            back[j * s + st] = (2, i);
                        }
                    }
                    if let (Some(c), true) = (c, l > 0) {
                        let v = f[i * s + st - k1].max(c);
                        if v < f[j * s + st] {
                            f[j * s + st] = v;
                            back[j * s + st] = (3, i);
                        }
                    }
                }
            }
        }
        for l in 0..=cpus {
            for k in 0..=accelerators {
                let st = l * k1 + k;
                if k > 0 && f[j * s + st - 1] < f[j * s + st] {
                    f[j * s + st] = f[j * s + st - 1];
                    back[j * s + st] = (0, j);
                }
                if l > 0 && f[j * s + st - k1] < f[j * s + st] {
                    f[j * s + st] = f[j * s + st - k1];
                    back[j * s + st] = (1, j);
                }
            }
        }
    }
    let objective = f[n * s + s - 1];
    if !objective.is_finite() {
        return None;
    }
    let mut stages = Vec::new();
    let (mut j, mut l, mut k) = (n, cpus, accelerators);
    while j > 0 {
        let (kind, i) = back[j * s + l * k1 + k];
        match kind {
            0 => k -= 1,
            1 => l -= 1,
            2 => {
                stages.push((i, j, StageDevice::Accelerator));
                k -= 1;
                j = i;
            }
            _ => {
                stages.push((i, j, StageDevice::Cpu));
                l -= 1;
                j = i;
            }
        }
    }
    stages.reverse();
    Some(ChainSplit { objective, stages })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_chain_of_weights_evenly() {
        let w = [3.0, 1.0, 2.0, 2.0, 4.0];
        let prefix: Vec<f64> = std::iter::once(0.0).chain(w.iter().scan(0.0, |s, x| { *s += x; Some(*s) })).collect();
        let split = split_chain(5, 3, 0, |i, j| Some(prefix[j] - prefix[i]), |_, _| f64::INFINITY).unwrap();
        // [3,1] [2,2] [4] -> 4
        assert_eq!(split.objective, 4.0);
        assert_eq!(split.stages.len(), 3);
    }

    #[test]
    fn no_split_when_nothing_fits() {
        assert!(split_chain(2, 2, 0, |_, _| None, |_, _| 0.0).is_none());
    }
}
