"""torchtitan's and DeepSpeed's own code read dnnplace's 3D exports (issue #27).

* Every ``plan --parallel 3d --export torchtitan`` file is loaded by torchtitan 0.2.2's
  ``ConfigManager`` (the parser behind ``--job.config_file``), and the degrees, split,
  batch sizes, schedule and recomputation it holds are the plan's (``--json``).
* dnnplace's reading of a job file without ``module_fqns_per_model_part`` gives the split
  torchtitan's own ``generate_llm_fqn_per_model_part`` computes. That function is taken
  from the installed ``torchtitan/distributed/pipeline_parallel.py`` by its source and run
  alone (its module imports the training stack: torchdata, tensorboard, datasets).

* Every ``--export deepspeed`` file is read by DeepSpeed 0.19.8's ``DeepSpeedConfig`` (with
  its batch check ``train_batch_size = micro-batch × accumulation × DP``, DP from the
  topology) and ``PipeModelDataParallelTopology``.

python/ci.sh installs ``torchtitan==0.2.2`` (without its training dependencies),
``tyro``, and ``deepspeed==0.19.8`` without its compiled ops; without them these tests
skip, saying so, unless ``DNNPLACE_REQUIRE_PYTHON_CHECKS=1`` (CI), where a skip is a
failure. vLLM is not installed (its wheel brings a CUDA build of its own).
"""

import ast
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "target" / "release" / "dnnplace"
HF = ROOT / "examples" / "hf"


def need_torchtitan():
    spec = importlib.util.find_spec("torchtitan")
    why = None
    if spec is None:
        why = "torchtitan is not installed (python/ci.sh installs torchtitan==0.2.2 --no-deps)"
    elif importlib.util.find_spec("tyro") is None:
        why = "tyro is not installed (torchtitan's ConfigManager needs it; python/ci.sh installs it)"
    elif not CLI.is_file():
        why = f"{CLI} is missing (cargo build --release)"
    if why is None:
        return Path(spec.submodule_search_locations[0])
    skip_or_fail(why)


def skip_or_fail(why):
    """Skips saying why, or fails where CI requires the check."""
    if os.environ.get("DNNPLACE_REQUIRE_PYTHON_CHECKS"):
        pytest.fail(why + ", but DNNPLACE_REQUIRE_PYTHON_CHECKS is set")
    pytest.skip(why)


def run(*args):
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=300)


def plan_and_export(fmt, case, out):
    """``plan --parallel 3d --json --export fmt`` of a case into ``out``: the plan's JSON."""
    model, cluster, batch, seq, extra = case
    r = run("plan", str(HF / model), "--parallel", "3d", "--cluster", cluster,
            "--global-batch", batch, "--seq", seq, "--json", "--export", fmt,
            "--export-out", str(out), *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def torchtitan_names(stages):
    """The plan's stages in torchtitan's module names (embeddings and head are the
    model's tok_embeddings, and norm with output)."""
    renamed = {"embeddings": ["tok_embeddings"], "head": ["norm", "output"]}
    return [[n for unit in s["layers"] for n in renamed.get(unit, [unit])] for s in stages]


# (model, cluster, global batch, tokens per sample, extra flags): ZeRO-0 with pipeline
# stages, ZeRO-3 without, and a 70 B model on few GPUs (ZeRO-2/3 and recomputation).
CASES = [
    ("llama-3-8b.json", "4x8xh100", "256", "4096", []),
    ("llama-3-8b.json", "2x8xh100", "64", "2048", ["--zero", "3", "--pipeline-parallel", "1"]),
    ("llama-3-70b.json", "4x8xh100", "64", "2048", []),
    ("llama-3-8b.json", "1x8xh100", "32", "2048", ["--schedule", "gpipe", "--pipeline-parallel", "2"]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_torchtitans_config_manager_reads_the_export(case, tmp_path):
    need_torchtitan()
    from torchtitan.config import ConfigManager

    model, cluster = CASES[case][:2]
    out = tmp_path / "job.toml"
    plan = plan_and_export("torchtitan", CASES[case], out)
    job = ConfigManager().parse_args(["--job.config_file", str(out)])
    par, training = job.parallelism, job.training
    stages = plan["stages"]
    t, d, p = stages[0]["tensorParallel"], stages[0]["dataParallel"], len(stages)
    print(f"{model} on {cluster}: TP {t} x PP {p} x DP {d}, ZeRO-{plan['zero']}, "
          f"b {plan['microBatch']}, recompute {plan['recompute']} -> torchtitan read "
          f"replicate {par.data_parallel_replicate_degree}, shard {par.data_parallel_shard_degree}, "
          f"reshard {par.fsdp_reshard_after_forward}, local batch {training.local_batch_size}")
    assert par.tensor_parallel_degree == t
    assert par.pipeline_parallel_degree == p
    assert par.data_parallel_replicate_degree * par.data_parallel_shard_degree == d
    if d > 1:
        sharded = plan["zero"] in (2, 3)
        assert (par.data_parallel_shard_degree > 1) == sharded
        if sharded:
            assert par.fsdp_reshard_after_forward == ("always" if plan["zero"] == 3 else "never")
    assert training.global_batch_size == plan["globalBatch"]
    m = plan["globalBatch"] // (plan["microBatch"] * d)
    if p > 1:
        assert par.pipeline_parallel_microbatch_size == plan["microBatch"]
        assert training.local_batch_size == plan["microBatch"] * m
        assert par.pipeline_parallel_schedule == {"1f1b": "1F1B", "gpipe": "GPipe"}[plan["schedule"]]
        parts = par.module_fqns_per_model_part
        assert len(parts) == p
        assert parts == torchtitan_names(stages)
    else:
        assert training.local_batch_size == plan["microBatch"]
    assert job.activation_checkpoint.mode == ("full" if plan["recompute"] else "none")


def torchtitans_default_split(package: Path):
    """torchtitan's generate_llm_fqn_per_model_part, from its source, run alone."""
    source = (package / "distributed" / "pipeline_parallel.py").read_text()
    tree = ast.parse(source)
    fn = next(n for n in tree.body
              if isinstance(n, ast.FunctionDef) and n.name == "generate_llm_fqn_per_model_part")
    scope = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "pipeline_parallel.py", "exec"), scope)
    return scope["generate_llm_fqn_per_model_part"]


@pytest.mark.parametrize("model,layers,stages,cluster", [
    ("llama-3-8b.json", 32, 4, "1x8xh100"),
    ("llama-3-8b.json", 32, 3, "1x6xh100"),
    ("llama-3-70b.json", 80, 8, "1x8xh100"),
    ("llama-3-70b.json", 80, 5, "1x5xh100"),
])
def test_the_default_split_is_torchtitans(model, layers, stages, cluster, tmp_path):
    package = need_torchtitan()
    generate = torchtitans_default_split(package)
    job = tmp_path / "job.toml"
    job.write_text(f"[parallelism]\npipeline_parallel_degree = {stages}\n"
                   f"[training]\nlocal_batch_size = {stages}\n"
                   "[activation_checkpoint]\nmode = \"none\"\n")
    r = run("score", str(HF / model), "--parallel", "3d", "--cluster", cluster, "--seq", "128",
            "--json", "--from-export", "torchtitan", str(job))
    # Exit 1 is a layout that does not fit: its split is still printed.
    assert r.returncode in (0, 1), r.stderr
    ours = torchtitan_names(json.loads(r.stdout)["stages"])
    theirs = generate(stages, layers, 1, 1)
    print(f"{model}, {stages} stages: layers per stage {[len(s) for s in theirs]}")
    assert ours == theirs


def need_deepspeed():
    why = None
    if importlib.util.find_spec("deepspeed") is None:
        why = "deepspeed is not installed (python/ci.sh installs deepspeed==0.19.8 --no-deps)"
    elif not CLI.is_file():
        why = f"{CLI} is missing (cargo build --release)"
    if why is not None:
        skip_or_fail(why)


# (model, cluster, global batch, tokens per sample, extra flags): ZeRO-0 with DP 4, and a
# 70 B model with ZeRO-1 and recomputation.
DS_CASES = [
    ("llama-3-8b.json", "4x8xh100", "256", "4096", []),
    ("llama-3-70b.json", "4x8xh100", "64", "2048", []),
]


@pytest.mark.parametrize("case", range(len(DS_CASES)))
def test_deepspeeds_own_config_and_topology_read_the_export(case, tmp_path):
    """DeepSpeed's DeepSpeedConfig (its batch check: train_batch_size = micro-batch x
    accumulation x DP) and PipeModelDataParallelTopology read the export; the degrees,
    batch sizes, ZeRO stage and checkpoint interval are the plan's; and the pipeline
    engine's source holds the ZeRO rule the export enforces."""
    need_deepspeed()
    import re

    import deepspeed.runtime.config as ds_config
    from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology

    model = DS_CASES[case][0]
    out = tmp_path / "ds.py"
    plan = plan_and_export("deepspeed", DS_CASES[case], out)
    text = out.read_text()
    config = json.loads(re.search(r"^ds_config = json.loads\(r'''(.*)'''\)$", text, re.M).group(1))
    topology = json.loads(re.search(r"^topology = (.*)$", text, re.M).group(1))
    parts = json.loads(re.search(r"^parts = (.*)$", text, re.M).group(1))
    stages = plan["stages"]
    t, d, p = stages[0]["tensorParallel"], stages[0]["dataParallel"], len(stages)
    topo = PipeModelDataParallelTopology(**topology)
    assert (topo.get_dim("pipe"), topo.get_dim("model"), topo.get_dim("data")) == (p, t, d)
    assert topo.world_size() == t * p * d

    class DataParallelOf:
        def get_data_parallel_world_size(self):
            return topology["num_dp"]

    # Without a process group DeepSpeedConfig takes world size 1; with a rank it asks the
    # mpu for the DP world size, as under deepspeed.initialize.
    ds_config.dist.get_rank = lambda *a, **k: 0
    c = ds_config.DeepSpeedConfig(config, mpu=DataParallelOf())
    print(f"{model}: TP {t} x PP {p} x DP {d} -> DeepSpeed read batch {c.train_batch_size} = "
          f"{c.train_micro_batch_size_per_gpu} x {c.gradient_accumulation_steps} x {d}, "
          f"ZeRO {c.zero_optimization_stage}, interval {c.pipeline['activation_checkpoint_interval']}")
    assert c.train_batch_size == plan["globalBatch"]
    assert c.train_micro_batch_size_per_gpu == plan["microBatch"]
    assert c.gradient_accumulation_steps == plan["globalBatch"] // (plan["microBatch"] * d)
    assert c.zero_optimization_stage == plan["zero"] < 2
    assert c.pipeline["activation_checkpoint_interval"] == (1 if plan["recompute"] else 0)
    units = [u for s in stages for u in s["layers"]]
    bounds = [0]
    for s in stages:
        bounds.append(bounds[-1] + len(s["layers"]))
    assert parts == bounds and bounds[-1] == len(units)
    engine = Path(importlib.util.find_spec("deepspeed").submodule_search_locations[0])
    source = (engine / "runtime" / "pipe" / "engine.py").read_text()
    assert "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" in source
