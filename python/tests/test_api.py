"""The Python API against the command line: the same plans, the same errors, Ctrl-C.

The CLI is the release binary at ``target/release/dnnplace`` of this checkout (built by
``cargo build --release``); the published workloads are ``../shared/workloads/paper``
beside the checkout. Either missing skips, saying so, unless ``DNNPLACE_REQUIRE_SHARED=1``
(CI), which makes it a failure.
"""

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import dnnplace

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "workloads" / "paper"
CLI = ROOT / "target" / "release" / "dnnplace"
REQUIRE = os.environ.get("DNNPLACE_REQUIRE_SHARED") == "1"


def need(path: Path, what: str) -> None:
    if not path.exists():
        msg = f"{what} not found at {path}"
        if REQUIRE:
            pytest.fail(msg + " (DNNPLACE_REQUIRE_SHARED=1)")
        print("SKIP:", msg)
        pytest.skip(msg)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=600)


# Small published workloads the DP proves optimal in well under a second.
PUBLISHED = [
    "throughput/layer/bert24_training.json",
    "throughput/layer/gnmt_inference.json",
    "throughput/layer/resnet50_training.json",
    "throughput/operator/bert_l-3_training.json",
]


@pytest.mark.parametrize("name", PUBLISHED)
def test_plans_equal_the_clis(name):
    need(SHARED, "the published workloads (../shared)")
    need(CLI, "the CLI (cargo build --release)")
    path = SHARED / name
    out = cli("plan", str(path), "--json", "--time-limit", "60s")
    assert out.returncode == 0, out.stderr
    expected = json.loads(out.stdout)
    got = json.loads(dnnplace.plan(dnnplace.Workload.load(path), time_limit=60).to_json())
    assert got["outcome"] == expected["outcome"] == "optimal"
    assert got["maxLoad"] == expected["maxLoad"]
    assert got["bound"] == expected["bound"]
    assert got["placement"] == expected["placement"]
    assert got["devices"] == expected["devices"]


def test_layer_granularity_and_schedule_equal_the_clis(tmp_path):
    need(CLI, "the CLI (cargo build --release)")
    w = dnnplace.generate_transformer("gpt2", layers=6, hidden=512, heads=8, seq=256, training=True,
                                      accelerators=3)
    path = tmp_path / "w.json"
    w.save(path)
    out = cli("plan", str(path), "--json", "--granularity", "layer", "--schedule", "1f1b",
              "--micro-batches", "4", "--time-limit", "60s")
    assert out.returncode == 0, out.stderr
    expected = json.loads(out.stdout)
    p = dnnplace.plan(w, granularity="layer", schedule="1f1b", micro_batches=4, time_limit=60)
    got = json.loads(p.to_json())
    assert got["placement"] == expected["placement"]
    assert got["maxLoad"] == expected["maxLoad"]
    # The Plan's fields are the JSON's.
    assert p.tps_ms == expected["maxLoad"] and p.bound_ms == expected["bound"]
    assert p.status == expected["status"] and p.gap == expected["gap"]
    held = [d for d in p.devices if d["nodes"]]
    assert len(held) == 3 and all(d["modules"] for d in held)
    # The export is the CLI's.
    plan_file = tmp_path / "plan.json"
    p.save(plan_file)
    out = cli("export", str(plan_file), "--workload", str(path), "--format", "torch-json")
    assert out.returncode == 0, out.stderr
    assert p.export("torch-json") == out.stdout


def test_score_and_simulate_equal_the_clis(tmp_path):
    need(CLI, "the CLI (cargo build --release)")
    w = dnnplace.generate_transformer("gpt2", layers=4, hidden=256, heads=4, seq=128, training=True,
                                      accelerators=2)
    path, plan_file = tmp_path / "w.json", tmp_path / "p.json"
    w.save(path)
    p = dnnplace.plan(w)
    p.save(plan_file)
    out = cli("score", str(path), str(plan_file), "--json")
    assert out.returncode == 0, out.stderr
    assert dnnplace.score(w, p) == json.loads(out.stdout)
    assert dnnplace.score(w, p.placement_json()) == json.loads(out.stdout)
    out = cli("simulate", str(path), str(plan_file), "--schedule", "gpipe", "--micro-batches", "4",
              "--format", "json")
    assert out.returncode == 0, out.stderr
    assert dnnplace.simulate(w, p, schedule="gpipe", micro_batches=4) == json.loads(out.stdout)


def test_workload_round_trip_keeps_unknown_fields():
    text = json.dumps({"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 0, "note": "kept",
                       "nodes": [{"id": 1, "fpgaLatency": 1, "cpuLatency": 1, "extra": {"a": 1}},
                                 {"id": 2, "fpgaLatency": 2, "cpuLatency": 2}],
                       "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}]})
    w = dnnplace.Workload.from_json(text)
    back = json.loads(w.with_devices(accelerators=1).to_json())
    assert back["note"] == "kept" and back["nodes"][0]["extra"] == {"a": 1}
    assert back["maxFPGAs"] == 1
    p = dnnplace.plan(w)
    # {1} | {2}: loads 1 + 0.5 and 2 + 0.5 (MODEL.md: the edge costs on both sides).
    assert p.tps_ms == 2.5 and p.status == "proven optimal" and p.gap == 0.0


def test_cluster_plan():
    w = dnnplace.generate_transformer("gpt2", layers=4, hidden=256, heads=4, seq=128, training=True)
    c = dnnplace.Cluster.parse("1x2xh100")
    assert c.accelerators == 2
    p = dnnplace.plan(w, cluster=c)
    assert p.outcome == "optimal" and p.tps_ms > 0 and p.bound_ms == p.tps_ms
    # The search placers take the cluster road too (the same method choice as the CLI):
    # a valid plan never below the DP's optimum, bounded by it.
    g = dnnplace.plan(w, cluster=c, method="genetic", time_limit=2.0)
    assert g.tps_ms >= p.tps_ms * (1 - 1e-12) and g.bound_ms <= p.tps_ms * (1 + 1e-12)
    with pytest.raises(dnnplace.InputError, match="on a cluster, --method is auto"):
        dnnplace.plan(w, cluster=c, method="greedy")


def test_cluster_plan_json_is_the_clis(tmp_path):
    # One output contract: the binding's plan on a cluster is the CLI's record, field for
    # field (the CLI adds its process's peak memory).
    need(CLI, "the CLI (cargo build --release)")
    w = dnnplace.generate_transformer("gpt2", layers=4, hidden=256, heads=4, seq=128, training=True)
    path = tmp_path / "w.json"
    w.save(path)
    out = cli("plan", str(path), "--cluster", "1x2xh100", "--json")
    assert out.returncode == 0, out.stderr
    expected = json.loads(out.stdout)
    got = json.loads(dnnplace.plan(w, cluster=dnnplace.Cluster.parse("1x2xh100")).to_json())
    assert set(got) == set(expected) - {"peakMemoryBytes"}
    for key in ("method", "value", "status", "outcome", "bound", "gap", "placement", "devices",
                "usage", "holdings"):
        assert got[key] == expected[key], key


def test_errors_carry_the_clis_messages(tmp_path):
    need(CLI, "the CLI (cargo build --release)")
    bad = tmp_path / "bad.json"
    bad.write_text('{"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1, "nodes": [{"id": 1, "cpuLatency": 1}], "edges": []}')
    out = cli("plan", str(bad))
    assert out.returncode == 2
    with pytest.raises(dnnplace.InputError) as e:
        dnnplace.Workload.load(bad)
    assert out.stderr.strip() == f"error: {e.value}"
    missing = tmp_path / "missing.json"
    out = cli("plan", str(missing))
    with pytest.raises(dnnplace.InputError) as e:
        dnnplace.Workload.load(missing)
    assert out.stderr.strip() == f"error: {e.value}"


def test_bad_arguments_raise_input_error():
    w = dnnplace.generate_transformer("gpt2", layers=2, hidden=64, heads=2, seq=16)
    with pytest.raises(dnnplace.InputError, match="unknown method 'nope'; known: "):
        dnnplace.plan(w, method="nope")
    with pytest.raises(dnnplace.InputError, match="time_limit"):
        dnnplace.plan(w, time_limit=0)
    with pytest.raises(dnnplace.InputError, match="micro_batches"):
        dnnplace.plan(w, micro_batches=4)
    with pytest.raises(dnnplace.InputError, match="unknown export format 'onnx'"):
        dnnplace.plan(w).export("onnx")
    with pytest.raises(dnnplace.InputError):
        dnnplace.Cluster.parse("2x8xnot-a-gpu")
    with pytest.raises(dnnplace.InputError, match="unknown style"):
        dnnplace.generate_transformer("resnet")
    with pytest.raises(dnnplace.InputError):
        dnnplace.score(w, '{"fpgas": [{"nodes": [999]}], "cpus": []}')
    assert issubclass(dnnplace.InputError, ValueError)


def test_ctrl_c_returns_the_best_plan_so_far():
    # The non-contiguous IP on a 4-accelerator training graph runs far past 3 s; SIGINT
    # (what Ctrl-C sends) after 3 s must stop it with its incumbent.
    w = dnnplace.generate_transformer("bert", layers=12, hidden=768, heads=12, seq=512, training=True,
                                      accelerators=4)
    timer = threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    # Python's own Ctrl-C handler, whatever the launcher left: a process started in the
    # background by a non-interactive shell inherits SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler (a CI run launched with `&` lost the signal).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    timer.start()
    try:
        p = dnnplace.plan(w, method="ip", non_contiguous=True, time_limit=300, threads=1)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    took = time.monotonic() - started
    assert p.interrupted and p.stop_reason == "interrupted", p.status
    assert p.tps_ms < float("inf") and 0 <= p.bound_ms <= p.tps_ms
    assert took < 120, took
    # The flag is cleared: the next solve runs to the end.
    assert dnnplace.plan(w.with_devices(accelerators=2), time_limit=60).stop_reason is None


def test_onnx_import_equals_the_clis(tmp_path):
    onnx = SHARED.parent / "onnx" / "light_resnet50.onnx"
    need(onnx, "the published ONNX models (../shared)")
    need(CLI, "the CLI (cargo build --release)")
    out_file = tmp_path / "r.json"
    out = cli("import", str(onnx), "--device", "h100", "--batch", "8", "--training", "--out", str(out_file))
    assert out.returncode == 0, out.stderr
    w = dnnplace.Workload.from_onnx(onnx, device="h100", batch=8, training=True)
    assert json.loads(w.to_json()) == json.loads(out_file.read_text())


def test_report_writes_one_html_page(tmp_path):
    w = dnnplace.generate_transformer("gpt2", layers=4, hidden=256, heads=4, seq=128, training=True,
                                      accelerators=2)
    page = tmp_path / "plan.html"
    dnnplace.plan(w).report(page, schedule="gpipe", micro_batches=4)
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text


def test_calibrate_equals_the_cli_and_writes_a_device_file(tmp_path):
    measured = ROOT / "docs" / "measured" / "h100" / "gpt2-fp32-block.json"
    need(CLI, "the CLI (cargo build --release)")
    shape = dict(style="gpt2", layers=12, hidden=768, heads=12, vocab=50257, seq=1024, batch=8)
    out = tmp_path / "h100-cal.toml"
    cal = dnnplace.calibrate(dnnplace.Workload.load(measured), device="h100", dtype="fp32", out=out, **shape)
    res = cli("calibrate", str(measured), "--device", "h100", "--json", *[
        x for k, v in shape.items() for x in (f"--{k}", str(v))])
    assert res.returncode == 0, res.stderr
    assert cal == json.loads(res.stdout)
    assert cal["fittedError"]["rmsRelative"] < cal["baseError"]["rmsRelative"]
    text = out.read_text()
    assert 'name = "h100-calibrated"' in text
    assert f"compute_efficiency = {cal['fitted']['compute_efficiency']!r}" in text
    # The device file prices a generated model with the fitted numbers.
    res = cli("devices", "--device-file", str(out))
    assert res.returncode == 0 and "h100-calibrated" in res.stdout, res.stderr
    with pytest.raises(dnnplace.InputError, match="do not match"):
        dnnplace.calibrate(dnnplace.Workload.load(measured), device="h100", style="llama", layers=2, hidden=256, heads=4)


def test_from_hf_config_equals_the_cli(tmp_path):
    need(CLI, "the CLI (cargo build --release)")
    cfg = {"model_type": "gpt2", "n_layer": 2, "n_embd": 128, "n_head": 4, "n_inner": None, "vocab_size": 1000,
           "n_positions": 256, "activation_function": "gelu_new", "torch_dtype": "bfloat16"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out = cli("generate", "transformer", "--hf-config", str(path), "--seq", "128", "--training", "--device", "h100")
    assert out.returncode == 0, out.stderr
    for given in (path, str(path), cfg, json.dumps(cfg)):
        w = dnnplace.Workload.from_hf_config(given, seq=128, training=True, device="h100")
        assert json.loads(w.to_json()) == json.loads(out.stdout)
    with pytest.raises(dnnplace.InputError, match="n_positions"):
        dnnplace.Workload.from_hf_config(cfg, seq=512)
    with pytest.raises(dnnplace.InputError, match="num_local_experts"):
        dnnplace.Workload.from_hf_config({**cfg, "num_local_experts": 8})
