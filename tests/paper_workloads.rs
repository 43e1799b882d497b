//! The published workloads: every throughput workload gets a valid contiguous optimal
//! plan, equal to the reference DP's published optimum where one exists (or lower, which
//! would need an explanation), and every human-expert split scores and is no better than
//! the DP.

mod common;

use dnnplace::io::{read_placement, read_workload};
use dnnplace::solve::{dp::Dp, plan, Objective, Problem, Status};

/// Optimal TPS reported by the reference implementation (issue 2), file's own device set.
const REFERENCE: &[(&str, f64)] = &[
    ("layer/bert24_inference", 17.78990625),
    ("layer/bert24_training", 41.7458125),
    ("layer/gnmt_inference", 32.910658203125),
    ("layer/gnmt_training", 107.0044140625),
    ("layer/resnet50_inference", 33.774666015625),
    ("layer/resnet50_training", 78.6318125),
    ("operator/bert_l-3_inference", 27.9185676799125),
    ("operator/bert_l-3_training", 65.303149122086),
    ("operator/bert_l-6_inference", 29.579505806452),
    ("operator/bert_l-6_training", 72.864966322411),
    ("operator/bert_l-12_inference", 147.477984449348),
    ("operator/bert_l-12_training", 437.997637857845),
    ("operator/resnet50_inference", 124.348849774045),
    ("operator/resnet50_training", 255.194416452174),
];

fn dp_tps(path: &std::path::Path) -> f64 {
    let w = read_workload(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let p =
        plan(&Dp, &Problem::throughput(&w)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(p.outcome.status, Status::Optimal, "{}", path.display());
    let e = p.evaluation.as_ref().expect("a plan");
    assert!(
        e.is_valid() && e.is_contiguous(),
        "{}: {:?} {:?}",
        path.display(),
        e.violations,
        e.non_contiguous
    );
    assert!(
        (p.outcome.objective - e.max_load).abs() <= 1e-9 * e.max_load,
        "the plan's objective agrees with the scorer"
    );
    p.objective(Objective::Throughput)
}

#[test]
fn dp_matches_the_reference_optima() {
    let Some(dir) = common::shared_dir("paper/throughput") else {
        return;
    };
    for &(name, reference) in REFERENCE {
        let tps = dp_tps(&dir.join(format!("{name}.json")));
        let rel = (tps - reference) / reference;
        println!("{name:32} ours {tps:.12}  reference {reference:.12}  rel {rel:+.2e}");
        assert!(
            rel <= 1e-9,
            "{name}: ours {tps} is worse than the reference optimum {reference}"
        );
        assert!(
            rel >= -1e-9,
            "{name}: ours {tps} beats the reference {reference}: explain before accepting"
        );
    }
}

#[test]
fn inception_layer_graphs_are_solved() {
    let Some(dir) = common::shared_dir("paper/throughput/layer") else {
        return;
    };
    for name in ["inceptionv3_inference", "inceptionv3_training"] {
        let tps = dp_tps(&dir.join(format!("{name}.json")));
        println!("{name}: optimal TPS {tps}");
        assert!(tps > 0.0 && tps.is_finite());
    }
}

#[test]
fn expert_splits_score_and_are_no_better_than_the_dp() {
    let Some(dir) = common::shared_dir("paper") else {
        return;
    };
    for model in ["bert24", "gnmt", "inceptionv3", "resnet50"] {
        for kind in ["inference", "training"] {
            let workload = dir.join(format!("throughput/layer/{model}_{kind}.json"));
            let own = dir.join(format!("experts/{model}_{kind}_expert.json"));
            let split = if own.exists() {
                own
            } else {
                dir.join(format!("experts/{model}_inference_expert.json"))
            };
            let w = read_workload(&workload).unwrap();
            let p =
                read_placement(&split, &w).unwrap_or_else(|e| panic!("{}: {e}", split.display()));
            let e = dnnplace::score::evaluate(&w, &p, false);
            assert!(e.is_valid(), "{model}_{kind}: {:?}", e.violations);
            let dp = dp_tps(&workload);
            println!("{model}_{kind}: expert {:.6}  dp {dp:.6}", e.max_load);
            assert!(
                dp <= e.max_load * (1.0 + 1e-12),
                "{model}_{kind}: the expert beats the contiguous optimum"
            );
        }
    }
}
