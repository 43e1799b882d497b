//! The node-rank table of an export on a cluster of several accelerator types: which
//! machine each `torchrun` node rank must be, so that every stage's ranks land on its
//! planned type.
//!
//! **Ranks.** A framework's file names no accelerator type, but its ranks decide where each
//! stage runs. Megatron-LM (order `tp-cp-ep-dp-pp`, pp outermost), DeepSpeed
//! (`PipeModelDataParallelTopology`, axes `pipe, data, model`) and torchtitan (mesh
//! `pp, dp, tp`) give pipeline stage `s` the global ranks `[s·t·d, (s+1)·t·d)`, rank
//! `s·t·d + r·t + j` being TP rank `j` of replica `r`; vLLM gives engine `e` (of `d`) the
//! ranks `[e·t·p, (e+1)·t·p)`, rank `e·t·p + s·t + j` being TP rank `j` of its stage `s`.
//! The plan's stage `s`, replica `r`, TP rank `j` is device `first_device_s + r·t + j`.
//!
//! **Nodes.** `torchrun --nnodes N --nproc-per-node n` gives node rank `i` the ranks
//! `[i·n, (i+1)·n)`, with `n` the machines' accelerators (every type's machines hold
//! equally many). (vLLM's own launchers must give its node `i` the same ranks.) The layout is launchable when, for every node rank, its `n` ranks are the
//! `n` devices of one machine in order; then the table names that machine. Otherwise (a
//! stage's or a type's run of stages not filling whole machines, so that a node would hold
//! idle GPUs inside the rank range or two machines' devices) the export is refused, naming
//! the node rank.
//!
//! **The table** is written as `#` comment lines, `# node-rank I: machine TYPE:K (TYPE),
//! stages …` (`TYPE:K` the cluster's `K`-th machine of that type, in the cluster's order),
//! and read back ([`place_on_machines`]) to put each stage on its machine's devices.

use crate::model::parallel::{Layout, MixedTopology};
use crate::solve::parallel::ParallelPlan;

/// One node rank of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRank {
    /// The accelerator group (type) of its machine.
    pub group: usize,
    /// Its machine's index among the group's machines.
    pub machine: usize,
    /// The pipeline stages it holds ranks of.
    pub stages: Vec<usize>,
}

/// The stage of global `rank` and the rank's device offset inside the stage's devices, in
/// `format`'s rank order (module documentation).
fn rank_place(format: &str, (t, d, p): (usize, usize, usize), rank: usize) -> (usize, usize) {
    if format == "vllm" {
        let (e, rem) = (rank / (t * p), rank % (t * p));
        (rem / t, e * t + rem % t)
    } else {
        (rank / (t * d), rank % (t * d))
    }
}

/// Each stage's group and its first device inside the group (devices numbered group by
/// group), or the stage lying outside every group.
fn stage_groups(layout: &Layout, topo: &MixedTopology) -> Result<Vec<(usize, usize)>, String> {
    let starts: Vec<usize> = topo
        .groups
        .iter()
        .scan(0, |acc, g| {
            let s = *acc;
            *acc += g.devices();
            Some(s)
        })
        .collect();
    layout
        .stages
        .iter()
        .enumerate()
        .map(|(s, st)| {
            (0..topo.groups.len())
                .find(|&g| {
                    st.first_device >= starts[g]
                        && st.devices().end <= starts[g] + topo.groups[g].devices()
                })
                .map(|g| (g, st.first_device - starts[g]))
                .ok_or_else(|| format!("stage {s} does not lie on the machines of one type"))
        })
        .collect()
}

/// The node-rank table of the uniform `layout` (devices numbered group by group) in
/// `format` on `topo`, or why `torchrun`'s equal ranks per node cannot place it (module
/// documentation).
pub fn node_ranks(
    format: &str,
    layout: &Layout,
    topo: &MixedTopology,
) -> Result<Vec<NodeRank>, String> {
    let st0 = &layout.stages[0];
    let (t, d, p) = (st0.tensor_parallel, st0.data_parallel, layout.stages.len());
    if let Some(s) = layout
        .stages
        .iter()
        .position(|st| (st.tensor_parallel, st.data_parallel) != (t, d))
    {
        return Err(format!(
            "stage {s} has another TP x DP than stage 0: a framework runs one TP and one DP degree"
        ));
    }
    let placed = stage_groups(layout, topo)?;
    let n = topo.groups[0].per_machine;
    let world = t * d * p;
    if !world.is_multiple_of(n) {
        return Err(format!(
            "the layout runs {world} ranks, not a whole number of machines of {n} accelerators: torchrun starts {n} ranks on every node"
        ));
    }
    let mut nodes = Vec::with_capacity(world / n);
    for i in 0..world / n {
        let device = |rank: usize| {
            let (s, off) = rank_place(format, (t, d, p), rank);
            (s, placed[s].0, placed[s].1 + off)
        };
        let (_, group, first) = device(i * n);
        let mut stages = Vec::new();
        for rank in i * n..(i + 1) * n {
            let (s, g, dev) = device(rank);
            if g != group || dev != first + (rank - i * n) || !first.is_multiple_of(n) {
                return Err(format!(
                    "node rank {i} (ranks {}-{}) would not be the {n} accelerators of one machine in order: rank {rank} of stage {s} is device {dev} of the {} machines, so torchrun's {n} ranks per node cannot place this layout (each type's stages must fill whole machines)",
                    i * n,
                    (i + 1) * n - 1,
                    topo.groups[g].type_name
                ));
            }
            if !stages.contains(&s) {
                stages.push(s);
            }
        }
        stages.sort_unstable();
        nodes.push(NodeRank {
            group,
            machine: first / n,
            stages,
        });
    }
    Ok(nodes)
}

/// The table as `#` comment lines.
pub fn table_comments(nodes: &[NodeRank], topo: &MixedTopology) -> String {
    let n = topo.groups[0].per_machine;
    let mut text = format!(
        "# node ranks: {} nodes of {n} ranks, node rank I holding ranks I*{n} to I*{n}+{}; run node rank I on the machine named\n# (torchrun --nnodes {} --nproc-per-node {n} --node-rank I):\n",
        nodes.len(),
        n - 1,
        nodes.len()
    );
    for (i, node) in nodes.iter().enumerate() {
        let ty = &topo.groups[node.group].type_name;
        let stages: Vec<String> = node.stages.iter().map(usize::to_string).collect();
        text.push_str(&format!(
            "# node-rank {i}: machine {ty}:{} ({ty}), stages {}\n",
            node.machine,
            stages.join(",")
        ));
    }
    text
}

/// Renders `plan` (a uniform layout on the several types of `topo`) in `format`: the
/// framework's file of the layout with its stages back to back in rank order, and the
/// node-rank table after the first header line.
pub fn render_mixed(
    format: &str,
    plan: &ParallelPlan,
    topo: &MixedTopology,
) -> Result<String, String> {
    let nodes = node_ranks(format, &plan.layout, topo)?;
    let mut ranked = plan.clone();
    let width = plan.layout.stages[0].width();
    for (s, st) in ranked.layout.stages.iter_mut().enumerate() {
        st.first_device = s * width;
    }
    let text = super::render(format, &ranked)?;
    let table = table_comments(&nodes, topo);
    // At the end of the leading comment block (the header).
    let end = text
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .find(|&i| !text[i..].starts_with('#'))
        .unwrap_or(text.len());
    Ok(format!("{}{table}{}", &text[..end], &text[end..]))
}

/// The node-rank table of `text`: each node rank's `(type, machine)`, in node-rank order;
/// `None` when the text has none.
fn read_table(text: &str) -> Result<Option<Vec<(String, usize)>>, String> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("# node-rank ") else {
            continue;
        };
        let bad = || {
            format!(
                "'{}': expected '# node-rank I: machine TYPE:K ...'",
                line.trim()
            )
        };
        let (i, rest) = rest.split_once(": machine ").ok_or_else(bad)?;
        let i: usize = i.trim().parse().map_err(|_| bad())?;
        let name = rest.split_whitespace().next().ok_or_else(bad)?;
        let (ty, k) = name.rsplit_once(':').ok_or_else(bad)?;
        let k: usize = k.parse().map_err(|_| bad())?;
        if i != rows.len() {
            return Err(format!(
                "node-rank {i} out of order (expected {})",
                rows.len()
            ));
        }
        rows.push((ty.to_string(), k));
    }
    Ok((!rows.is_empty()).then_some(rows))
}

/// `layout` (read from a `format` file, stages back to back in rank order) put on the
/// machines of `topo` that the file's node-rank table names: each stage's first device is
/// the device of its first rank (replica 0, TP rank 0). An error when the table is missing,
/// names a machine the cluster lacks, or does not cover the ranks.
pub fn place_on_machines(
    format: &str,
    text: &str,
    mut layout: Layout,
    topo: &MixedTopology,
) -> Result<Layout, String> {
    let table = read_table(text)?.ok_or(
        "the file has no node-rank table ('# node-rank I: machine TYPE:K'): on a cluster of several types it says which machine runs each node rank",
    )?;
    let n = topo.groups[0].per_machine;
    let mut start = 0;
    let mut starts = Vec::new();
    for g in &topo.groups {
        starts.push(start);
        start += g.devices();
    }
    let st0 = &layout.stages[0];
    let (t, d, p) = (st0.tensor_parallel, st0.data_parallel, layout.stages.len());
    let mut firsts = Vec::with_capacity(p);
    for s in 0..p {
        let rank = if format == "vllm" { s * t } else { s * t * d };
        debug_assert_eq!(rank_place(format, (t, d, p), rank), (s, 0));
        let (ty, k) = table.get(rank / n).ok_or_else(|| {
            format!(
                "the node-rank table has {} rows; stage {s}'s rank {rank} needs node rank {}",
                table.len(),
                rank / n
            )
        })?;
        let g = topo
            .groups
            .iter()
            .position(|g| &g.type_name == ty)
            .ok_or_else(|| format!("node-rank {}: the cluster has no {ty} machines", rank / n))?;
        if *k >= topo.groups[g].machines {
            return Err(format!(
                "node-rank {}: machine {ty}:{k}, but the cluster has {} {ty} machines",
                rank / n,
                topo.groups[g].machines
            ));
        }
        firsts.push(starts[g] + k * n + rank % n);
    }
    for (st, first) in layout.stages.iter_mut().zip(firsts) {
        st.first_device = first;
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parallel::{StageLayout, Topology, Zero};
    use crate::model::schedule::Schedule;
    use crate::model::Link;

    /// One machine of 4 `a` and two of 4 `b` (devices 0–3 `a`, 4–11 `b`).
    fn topo() -> MixedTopology {
        let link = Link {
            bytes_per_s: 1e9,
            latency_ms: 0.0,
        };
        let group = |name: &str, machines| Topology {
            machines,
            per_machine: 4,
            memory_bytes: 1e9,
            type_name: name.into(),
            profile: name.into(),
            peer: None,
            host: link,
            network: link,
        };
        MixedTopology {
            groups: vec![group("a", 1), group("b", 2)],
        }
    }

    /// Stages of `t × d` devices starting at `firsts`, one unit each.
    fn layout(t: usize, d: usize, firsts: &[usize]) -> Layout {
        Layout {
            stages: firsts
                .iter()
                .enumerate()
                .map(|(s, &f)| StageLayout {
                    units: s..s + 1,
                    tensor_parallel: t,
                    data_parallel: d,
                    first_device: f,
                })
                .collect(),
            micro_batch: 1,
            global_batch: 8,
            zero: Zero::Off,
            schedule: Schedule::OneFOneB,
            recompute: false,
            overlap_grad_reduce: false,
        }
    }

    fn row(group: usize, machine: usize, stages: &[usize]) -> NodeRank {
        NodeRank {
            group,
            machine,
            stages: stages.to_vec(),
        }
    }

    /// Stages `b, b, a` (t = 2, d = 1): the first `b` machine holds stages 0 and 1, the
    /// `a` machine stages 2; written and read back to the same devices.
    #[test]
    fn stages_sharing_a_machine_make_one_node() {
        let l = layout(2, 1, &[4, 6, 0, 2]);
        let nodes = node_ranks("megatron", &l, &topo()).unwrap();
        assert_eq!(nodes, vec![row(1, 0, &[0, 1]), row(0, 0, &[2, 3])]);
        let text = table_comments(&nodes, &topo());
        assert!(
            text.contains("# node-rank 0: machine b:0 (b), stages 0,1\n"),
            "{text}"
        );
        let back = place_on_machines("megatron", &text, layout(2, 1, &[0, 2, 4, 6]), &topo());
        assert_eq!(back.unwrap(), l);
    }

    /// vLLM with `d = 2` engines of `t·p = 2·2`: engine `e`'s ranks `4e..4e+4` are stage 0's
    /// replica `e` then stage 1's; with stage 0 on `b:0` and stage 1 on `a:0` a node would
    /// hold two machines' devices: refused. Megatron's order places the same layout.
    #[test]
    fn vllm_engines_order_ranks_by_engine() {
        let l = layout(2, 2, &[4, 0]);
        let e = node_ranks("vllm", &l, &topo()).unwrap_err();
        assert!(e.contains("node rank 0 (ranks 0-3)"), "{e}");
        assert_eq!(
            node_ranks("deepspeed", &l, &topo()).unwrap(),
            vec![row(1, 0, &[0]), row(0, 0, &[1])]
        );
    }

    /// A stage not starting on a machine's first device, or idle devices between stages
    /// inside a node's rank range, is refused naming the node rank.
    #[test]
    fn ranks_off_machine_boundaries_are_refused() {
        // Stage 0 on b devices 6–7, stage 1 on a 0–1: node rank 0 would start mid-machine.
        let e = node_ranks("torchtitan", &layout(2, 1, &[6, 0]), &topo()).unwrap_err();
        assert!(e.contains("node rank 0"), "{e}");
        // Stages 0 and 1 on b 4–5 and 8–9 (machine 1's start): ranks 2–3 are not 6–7.
        let e = node_ranks("megatron", &layout(2, 1, &[4, 8]), &topo()).unwrap_err();
        assert!(e.contains("rank 2 of stage 1"), "{e}");
        // 6 ranks on machines of 4.
        let e = node_ranks("megatron", &layout(3, 1, &[4, 0]), &topo()).unwrap_err();
        assert!(e.contains("6 ranks"), "{e}");
    }

    /// The table read back: a missing table, a machine the cluster lacks and an unknown
    /// type are errors.
    #[test]
    fn tables_read_back_check_the_cluster() {
        let l = layout(4, 1, &[0, 4]);
        let e = place_on_machines("megatron", "--x 1\n", l.clone(), &topo()).unwrap_err();
        assert!(e.contains("no node-rank table"), "{e}");
        let bad =
            "# node-rank 0: machine b:0 (b), stages 0\n# node-rank 1: machine b:2 (b), stages 1\n";
        let e = place_on_machines("megatron", bad, l.clone(), &topo()).unwrap_err();
        assert!(e.contains("the cluster has 2 b machines"), "{e}");
        let bad = "# node-rank 0: machine c:0 (c), stages 0\n";
        let e = place_on_machines("megatron", bad, l, &topo()).unwrap_err();
        assert!(e.contains("no c machines"), "{e}");
    }
}
