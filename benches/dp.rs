//! Criterion timings of the DP on published workloads (skipped when ../shared is absent).
//! The full table with ideals, pairs and peak memory comes from `dnnplace bench`.

use criterion::{criterion_group, criterion_main, Criterion};
use dnnplace::io::read_workload;
use dnnplace::solve::{dp, Limits};

fn bench_dp(c: &mut Criterion) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/workloads/paper/throughput");
    if !dir.is_dir() {
        eprintln!("SKIPPED: {} is absent", dir.display());
        return;
    }
    let mut group = c.benchmark_group("dp");
    group.sample_size(10);
    for name in [
        "layer/bert24_training",
        "layer/gnmt_inference",
        "layer/resnet50_training",
        "operator/bert_l-12_training",
        "layer/inceptionv3_inference",
    ] {
        let w = read_workload(&dir.join(format!("{name}.json"))).expect("readable workload");
        group.bench_function(name, |b| {
            b.iter(|| dp::solve(&w, &Limits::default()).expect("solves"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_dp);
criterion_main!(benches);
