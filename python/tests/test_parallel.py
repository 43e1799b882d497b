"""``dnnplace.plan_parallel`` against ``dnnplace plan MODEL --parallel 3d``: one road, one
output contract.

For a Hugging Face config.json (``examples/hf/llama-3-8b.json``, uniform and free layouts,
fixed and ``auto`` settings) and a training workload JSON whose nodes carry
``tensorParallel`` options (a path and a ``Workload``), ``plan_parallel(...).to_json()``
equals the CLI's ``--json`` document field for field, except the two that measure the run
itself: ``timeS`` (the search's wall time) and ``peakMemoryBytes`` (the process's peak
resident memory). ``table()`` equals the CLI's text but for the wall time at the end of its
last line. Bad settings raise ``InputError`` with the message the CLI prints after
``error:`` (exit status 2).

The CLI is the release binary at ``target/release/dnnplace`` of this checkout (``cargo
build --release``); without it these tests skip, saying so, unless
``DNNPLACE_REQUIRE_SHARED=1`` (CI), which makes it a failure.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import dnnplace

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "target" / "release" / "dnnplace"
LLAMA_8B = ROOT / "examples" / "hf" / "llama-3-8b.json"
REQUIRE = os.environ.get("DNNPLACE_REQUIRE_SHARED") == "1"
# Fields that measure the run, not the plan.
WALL = ("timeS", "peakMemoryBytes")

# Two layers, forward and backward, each node with a TP option of degree 2 (the hand
# instance of tests/parallel_workload.rs).
HAND = {
    "maxSizePerFPGA": 1e12,
    "maxFPGAs": 2,
    "maxCPUs": 0,
    "reference": {"profile": "h100", "speed": 1.0, "hostBytesPerS": 1e9},
    "nodes": [
        {"id": 1, "fpgaLatency": 2.0, "cpuLatency": 1, "size": 100, "weightBytes": 60,
         "layerId": 0, "colorClass": 1, "latencies": {"h100": 2.0},
         "tensorParallel": [{"degree": 2, "fpgaLatency": 1.2, "size": 55, "weightBytes": 30,
                             "allReduceBytes": [1e6, 3e6]}]},
        {"id": 2, "fpgaLatency": 4.0, "cpuLatency": 1, "size": 10, "layerId": 1,
         "colorClass": 2, "latencies": {"h100": 4.0},
         "tensorParallel": [{"degree": 2, "fpgaLatency": 2.5, "gradientBytes": 4,
                             "activationBytes": 2}]},
        {"id": 3, "fpgaLatency": 3.0, "cpuLatency": 1, "isBackwardNode": True, "layerId": 1,
         "colorClass": 2, "latencies": {"h100": 3.0},
         "tensorParallel": [{"degree": 2, "fpgaLatency": 1.0, "allReduceBytes": [8e6]}]},
        {"id": 4, "fpgaLatency": 1.0, "cpuLatency": 1, "isBackwardNode": True, "layerId": 0,
         "colorClass": 1, "latencies": {"h100": 1.0},
         "tensorParallel": [{"degree": 2, "fpgaLatency": 0.7, "size": 8, "gradientBytes": 8}]},
    ],
    "edges": [
        {"sourceId": 1, "destId": 2, "cost": 0.5},
        {"sourceId": 2, "destId": 3, "cost": 0.25},
        {"sourceId": 3, "destId": 4, "cost": 0.125},
    ],
}


def need_cli() -> None:
    if not CLI.is_file():
        msg = f"the CLI (cargo build --release) not found at {CLI}"
        if REQUIRE:
            pytest.fail(msg + " (DNNPLACE_REQUIRE_SHARED=1)")
        pytest.skip(msg)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=600)


def flags(settings: dict) -> list:
    """The CLI flags of plan_parallel's keyword arguments."""
    out = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def without_wall(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in WALL}


def cli_plan(model: Path, cluster: str, global_batch: int, settings: dict, json_out=True):
    args = ["plan", str(model), "--parallel", "3d", "--cluster", cluster,
            "--global-batch", str(global_batch), *flags(settings)]
    out = cli(*args, *(["--json"] if json_out else []))
    assert out.returncode == 0, out.stderr
    return out.stdout


def without_time(table: str) -> str:
    return re.sub(r" in [0-9.]+ s\n", "\n", table)


CONFIG_CASES = [
    # uniform, every choice auto (the defaults)
    ("2x8xh100", 64, {}),
    # uniform, fixed choices
    ("2x8xh100", 32, {"tensor_parallel": [2, 4], "zero": 1, "micro_batch": 2,
                      "schedule": "gpipe", "sequence_parallel": True}),
    # free layouts, time per sample
    ("1x8xh100", 16, {"free": True, "objective": "throughput"}),
    # a price cap (--budget) and the fewest devices for a time per sample (--target-tps)
    ("2x8xh100", 64, {"budget": 40}),
    ("2x8xh100", 64, {"target_tps": 30.0}),
    # uniform and free layouts on two accelerator types
    ("1x4xh100+1x4xa100-80gb", 8, {"seq": 1024}),
    ("1x4xh100+1x4xa100-80gb", 8, {"seq": 1024, "free": True}),
    # the simulated iteration on two accelerator types, uniform and free
    ("1x4xh100+1x4xa100-80gb", 8, {"seq": 1024, "objective": "iteration"}),
    ("1x4xh100+1x4xa100-80gb", 8, {"seq": 1024, "free": True, "objective": "iteration"}),
    # free layouts, the simulated iteration
    ("1x8xh100", 16, {"free": True, "objective": "iteration"}),
    # the interleaved schedule (Megatron's virtual pipeline), both objectives
    ("2x8xh100", 64, {"schedule": "interleaved:2"}),
    ("2x8xh100", 64, {"schedule": "interleaved:2", "objective": "iteration"}),
    # the DP sync overlapped with backward (--overlap-grad-reduce), uniform and free
    ("2x8xh100", 64, {"objective": "iteration", "overlap_grad_reduce": True}),
    ("1x8xh100", 16, {"free": True, "objective": "iteration", "overlap_grad_reduce": True}),
]


@pytest.mark.parametrize("cluster,global_batch,settings", CONFIG_CASES)
def test_config_plans_equal_the_clis(cluster, global_batch, settings):
    need_cli()
    plan = dnnplace.plan_parallel(str(LLAMA_8B), cluster, global_batch, **settings)
    ours = json.loads(plan.to_json())
    theirs = json.loads(cli_plan(LLAMA_8B, cluster, global_batch, settings))
    assert set(ours) == set(theirs)
    assert without_wall(ours) == without_wall(theirs)
    text = cli_plan(LLAMA_8B, cluster, global_batch, settings, json_out=False)
    assert without_time(plan.table()) == without_time(text)
    # The typed properties read the same document.
    assert plan.value == theirs["value"]
    assert plan.bound_ms == theirs["bound"]
    assert plan.gap == theirs["gap"]
    assert plan.outcome == theirs["outcome"]
    assert plan.status == theirs["status"]
    assert plan.iteration_ms == theirs["iterationMs"]
    assert plan.time_per_sample_ms == theirs["timePerSampleMs"]
    assert plan.uniform == theirs["uniform"]
    assert plan.global_batch == global_batch
    stages = plan.stages
    assert stages == theirs["stages"]
    assert sum(len(s["devices"]) for s in stages) == plan.devices_used
    for s in stages:
        assert len(s["devices"]) == s["tensorParallel"] * s["dataParallel"]


@pytest.mark.parametrize("as_object", [False, True])
@pytest.mark.parametrize("settings", [{}, {"free": True, "objective": "throughput"},
                                      {"tensor_parallel": [2], "micro_batch": 2}])
def test_workload_plans_equal_the_clis(tmp_path, as_object, settings):
    need_cli()
    path = tmp_path / "w.json"
    path.write_text(json.dumps(HAND))
    model = dnnplace.Workload.load(path) if as_object else str(path)
    plan = dnnplace.plan_parallel(model, "1x4xh100", 4, **settings)
    ours = json.loads(plan.to_json())
    theirs = json.loads(cli_plan(path, "1x4xh100", 4, settings))
    assert without_wall(ours) == without_wall(theirs)
    if settings.get("tensor_parallel"):
        assert all(s["tensorParallel"] == 2 for s in plan.stages)


# (arguments of plan_parallel, the same as CLI flags) → the CLI's message.
CONFIG_ERRORS = [
    ("2x8xh100", 0, {}),
    ("2x8xh100", 64, {"tensor_parallel": [3]}),
    ("2x8xh100", 64, {"tensor_parallel": "x"}),
    ("2x8xh100", 64, {"tensor_parallel": [0, 2]}),
    ("2x8xh100", 64, {"data_parallel": 0}),
    ("2x8xh100", 64, {"pipeline_parallel": 99}),
    ("2x8xh100", 64, {"zero": 4}),
    ("2x8xh100", 64, {"micro_batch": 5}),
    ("2x8xh100", 64, {"schedule": "interleaved:2", "free": True}),
    ("2x8xh100", 64, {"schedule": "interleaved:2", "pipeline_parallel": 1}),
    ("2x8xnosuchgpu", 64, {}),
    ("2y8", 64, {}),
    ("1x8xh100", 64, {"free": True, "objective": "throughput", "export": "megatron"}),
    ("1x8xh100", 64, {"export": "onnx"}),
    ("1x8xh100", 64, {"export": "deepspeed", "sequence_parallel": True}),
    ("2x8xh100", 64, {"target_tps": 30.0, "budget": 40}),
    ("2x8xh100", 64, {"target_tps": 30.0, "objective": "iteration"}),
    ("2x8xh100", 64, {"target_tps": 0.001}),
    ("2x8xh100", 64, {"budget": 0.5}),
]


def cli_error(model: Path, cluster: str, global_batch: int, settings: dict) -> str:
    out = cli("plan", str(model), "--parallel", "3d", "--cluster", cluster,
              "--global-batch", str(global_batch), *flags(settings))
    assert out.returncode == 2, out.stderr
    lines = [l for l in out.stderr.splitlines() if l.startswith("error: ")]
    assert len(lines) == 1, out.stderr
    return lines[0][len("error: "):]


@pytest.mark.parametrize("cluster,global_batch,settings", CONFIG_ERRORS)
def test_bad_settings_raise_the_clis_message(cluster, global_batch, settings):
    need_cli()
    with pytest.raises(dnnplace.InputError) as e:
        dnnplace.plan_parallel(str(LLAMA_8B), cluster, global_batch, **settings)
    assert str(e.value) == cli_error(LLAMA_8B, cluster, global_batch, settings)


@pytest.mark.parametrize("settings", [{"tensor_parallel": [4]}, {"micro_batch": "auto"},
                                      {"sequence_parallel": True}, {"seq": 128}])
def test_bad_workload_settings_raise_the_clis_message(tmp_path, settings):
    need_cli()
    path = tmp_path / "w.json"
    path.write_text(json.dumps(HAND))
    with pytest.raises(dnnplace.InputError) as e:
        dnnplace.plan_parallel(str(path), "1x4xh100", 4, **settings)
    assert str(e.value) == cli_error(path, "1x4xh100", 4, settings)


def test_notes_and_export():
    plan = dnnplace.plan_parallel(str(LLAMA_8B), "2x8xh100", 32, export="torchtitan")
    assert plan.sequence_parallel is True
    assert any("torchtitan" in n for n in plan.notes), plan.notes
    text = plan.export("torchtitan")
    assert "pipeline_parallel_degree" in text
    with pytest.raises(dnnplace.InputError, match="--export onnx"):
        plan.export("onnx")


def test_export_on_several_types_is_the_clis():
    """A uniform layout on two types exports with its node-rank table (which machine runs
    which node rank), the same text as the CLI's."""
    need_cli()
    plan = dnnplace.plan_parallel(str(LLAMA_8B), "1x8xh100+1x8xa100-80gb", 64, export="megatron")
    text = plan.export("megatron")
    assert "# node-rank 0: machine" in text, text
    out = cli("plan", str(LLAMA_8B), "--parallel", "3d", "--cluster", "1x8xh100+1x8xa100-80gb",
              "--global-batch", "64", "--export", "megatron")
    assert out.returncode == 0, out.stderr
    assert text in out.stdout


def test_bad_python_types_raise_input_error():
    with pytest.raises(dnnplace.InputError, match="model"):
        dnnplace.plan_parallel(3, "1x8xh100", 8)
    with pytest.raises(dnnplace.InputError, match="cluster"):
        dnnplace.plan_parallel(str(LLAMA_8B), 8, 8)
    with pytest.raises(dnnplace.InputError, match="--objective latency"):
        dnnplace.plan_parallel(str(LLAMA_8B), "1x8xh100", 8, objective="latency")
    with pytest.raises(dnnplace.InputError, match="--time-limit 0 s is out of range"):
        dnnplace.plan_parallel(str(LLAMA_8B), "1x8xh100", 8, time_limit=0.0)


def test_a_cluster_object_and_an_int_degree_are_the_flags():
    by_text = dnnplace.plan_parallel(str(LLAMA_8B), "1x8xh100", 8, tensor_parallel="2")
    by_object = dnnplace.plan_parallel(
        str(LLAMA_8B), dnnplace.Cluster.parse("1x8xh100"), 8, tensor_parallel=2
    )
    assert without_wall(json.loads(by_text.to_json())) == without_wall(
        json.loads(by_object.to_json())
    )
    assert {s["tensorParallel"] for s in by_object.stages} == {2}


def test_target_tps_finds_the_fewest_devices_the_sweep_confirms():
    """The fewest devices for a target, checked against the sweep's rows independently: every
    count the sweep lists below the answer misses the target (no layout, or its value is
    above it), and
    the answer's own plan meets it."""
    target = 30.0
    plan = dnnplace.plan_parallel(str(LLAMA_8B), "2x8xh100", 64, target_tps=target)
    found = plan.target
    assert found["targetMs"] == target and found["proven"] is True
    assert plan.value <= target and plan.devices_used <= found["devices"]
    sweep = dnnplace.sweep_parallel(str(LLAMA_8B), "2x8xh100", 64)
    for row in sweep.rows:
        if row["devices"] < found["devices"]:
            # No layout fits (value None), or its best misses the target.
            assert row["value"] is None or row["value"] > target, row["devices"]
        if row["devices"] == found["devices"]:
            assert row["value"] == plan.value


@pytest.mark.parametrize("settings", [{}, {"objective": "iteration", "zero": 1}, {"free": True}])
def test_sweep_equals_the_clis(tmp_path, settings):
    need_cli()
    sweep = dnnplace.sweep_parallel(str(LLAMA_8B), "2x8xh100", 64, **settings)
    plot = tmp_path / "sweep.svg"
    args = ["plan", str(LLAMA_8B), "--parallel", "3d", "--cluster", "2x8xh100",
            "--global-batch", "64", "--sweep", *flags(settings)]
    out = cli(*args, "--json", "--plot", str(plot))
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout)
    ours = json.loads(sweep.to_json())
    assert [without_wall(r) for r in ours["rows"]] == [without_wall(r) for r in theirs["rows"]]
    assert {k: v for k, v in ours.items() if k != "rows"} == {
        k: v for k, v in theirs.items() if k != "rows"}
    assert sweep.svg() == plot.read_text()
    text = cli(*args)
    assert text.returncode == 0, text.stderr
    assert re.sub(r"in [0-9.]+ s", "", sweep.table()) == re.sub(r"in [0-9.]+ s", "", text.stdout)
    assert len(sweep) == len(theirs["rows"]) and [r["devices"] for r in sweep.rows] == [
        1, 2, 4, 8, 16]


def test_overlap_grad_reduce_hides_sync_behind_the_last_backward():
    """overlap_grad_reduce=True: the plan says so, its iteration is the rows' Σ T + (m − 1)·max
    T + max_s max(0, sync_s − b_s), no worse than without it; with export="deepspeed" the
    CLI's refusal is raised."""
    off = dnnplace.plan_parallel(str(LLAMA_8B), "2x8xh100", 64, objective="iteration")
    on = dnnplace.plan_parallel(str(LLAMA_8B), "2x8xh100", 64, objective="iteration",
                                overlap_grad_reduce=True)
    assert off.overlap_grad_reduce is False and on.overlap_grad_reduce is True
    doc = json.loads(on.to_json())
    t = [s["microBatchTimeMs"] for s in doc["stages"]]
    m = doc["stages"][0]["microBatches"]
    exposed = max(max(0.0, s["dpSyncMs"] - s["backwardMs"]) for s in doc["stages"])
    assert abs(sum(t) + (m - 1) * max(t) + exposed - on.value) <= 1e-9 * on.value
    assert on.value <= off.value
    need_cli()
    with pytest.raises(dnnplace.InputError) as e:
        dnnplace.plan_parallel(str(LLAMA_8B), "2x8xh100", 64, export="deepspeed",
                               overlap_grad_reduce=True)
    out = cli("plan", str(LLAMA_8B), "--parallel", "3d", "--cluster", "2x8xh100",
              "--global-batch", "64", "--export", "deepspeed", "--overlap-grad-reduce")
    assert out.returncode == 2 and f"error: {e.value}" in out.stderr


def test_sweep_refuses_what_the_cli_refuses():
    need_cli()
    with pytest.raises(dnnplace.InputError) as e:
        dnnplace.sweep_parallel(str(LLAMA_8B), "2x8xh100", 64, tensor_parallel=[3])
    out = cli("plan", str(LLAMA_8B), "--parallel", "3d", "--cluster", "2x8xh100",
              "--global-batch", "64", "--sweep", "--tensor-parallel", "3")
    assert out.returncode == 2 and f"error: {e.value}" in out.stderr
