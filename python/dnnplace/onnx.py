"""ONNX models: per-node kernel times measured with onnxruntime, on the importer's workload.

:func:`profile` imports an ONNX file with dnnplace's importer (``Workload.from_onnx``: the
nodes, edges, sizes and module paths of ``dnnplace import``), runs the model with
onnxruntime's profiler on the CPU, and replaces every node's ``fpgaLatency`` and
``cpuLatency`` by its measured kernel time (median of ``repeats`` runs after ``warmup``;
samples, median and spread kept in the node's ``profile``).

**Mapping.** The importer names a node by its ONNX name, else its first output (else
``OpType_index``); unnamed ONNX nodes get that name in a copy of the model before
onnxruntime sees it, so that each ``<name>_kernel_time`` event of the profiler maps to one
workload node. Graph optimisations are off (``ORT_DISABLE_ALL``): every ONNX node runs as
its own kernel, none is fused away. Kernels of nodes the importer folds into constants
(``Constant``, ``ConstantOfShape`` feeding weights, shape arithmetic) are left out and
listed in the file's ``profile.leftOut`` with their time.

**Checks kept in the file** (``profile``): the whole run's wall time (``session.run``,
median and spread), the sum of all kernels' medians, and the sum of the mapped ones: the
kernels account for the run when the first two agree.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from typing import Any, Dict, List, Optional

from . import Workload
from ._stats import summary

__all__ = ["profile"]




def _named_model(path: str):
    """A copy of the model whose unnamed nodes carry the importer's names."""
    import onnx

    model = onnx.load(path)
    for i, node in enumerate(model.graph.node):
        if not node.name:
            node.name = node.output[0] if node.output else f"{node.op_type}_{i}"
    return model


def _random_inputs(session, batch: Optional[int], seq: Optional[int], seed: int) -> Dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in session.get_inputs():
        shape = []
        for axis, d in enumerate(inp.shape):
            if isinstance(d, int) and d > 0:
                shape.append(d)
            else:
                shape.append((batch or 1) if axis == 0 else (seq or 1))
        if "float" in inp.type:
            dtype = np.float16 if "float16" in inp.type else np.float32
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
        elif "int" in inp.type:
            feeds[inp.name] = np.zeros(shape, dtype=np.int64 if "int64" in inp.type else np.int32)
        elif "bool" in inp.type:
            feeds[inp.name] = np.zeros(shape, dtype=bool)
        else:
            raise ValueError(f"input '{inp.name}' has type {inp.type}: give its value in inputs=")
    return feeds


def _kernel_samples(trace: List[Dict[str, Any]], repeats: int) -> Dict[str, List[float]]:
    """Per node, the kernel times (ms) of the last ``repeats`` runs, in run order."""
    per: Dict[str, List[tuple]] = {}
    for ev in trace:
        name = ev.get("name", "")
        if ev.get("cat") == "Node" and name.endswith("_kernel_time"):
            per.setdefault(name[: -len("_kernel_time")], []).append((ev["ts"], ev["dur"] / 1e3))
    return {n: [d for _, d in sorted(v)][-repeats:] for n, v in per.items()}


def profile(
    path: str,
    inputs: Optional[Dict[str, Any]] = None,
    batch: Optional[int] = None,
    seq: Optional[int] = None,
    repeats: int = 10,
    warmup: int = 3,
    threads: int = 1,
    accelerators: int = 2,
    seed: int = 0,
) -> Workload:
    """Measures the ONNX model at ``path`` with onnxruntime on the CPU and returns the
    importer's workload with measured node times (module documentation).

    ``inputs`` maps input names to arrays; without it, random floats (and zeros for
    integer inputs) of the model's input shapes, symbolic dimensions set to ``batch`` (the
    first) and ``seq`` (the others). The workload is priced for inference (onnxruntime runs
    no backward pass) with ``accelerators`` devices of the measured kind.
    """
    import onnxruntime as ort

    if repeats < 1 or warmup < 0 or threads < 1:
        raise ValueError("repeats and threads must be at least 1, warmup at least 0")
    started = time.perf_counter()
    workload = Workload.from_onnx(path, device="cpu-core", batch=batch, seq=seq, accelerators=accelerators,
                                  cpus=1)
    model = _named_model(os.fspath(path))
    with tempfile.TemporaryDirectory() as tmp:
        opts = ort.SessionOptions()
        opts.enable_profiling = True
        opts.profile_file_prefix = os.path.join(tmp, "ort")
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        feeds = inputs if inputs is not None else _random_inputs(session, batch, seq, seed)
        runs = []
        for i in range(warmup + repeats):
            t0 = time.perf_counter()
            session.run(None, feeds)
            if i >= warmup:
                runs.append(1e3 * (time.perf_counter() - t0))
        with open(session.end_profiling()) as fh:
            trace = json.load(fh)
    samples = _kernel_samples(trace, repeats)
    doc = json.loads(workload.to_json())
    mapped = set()
    for node in doc["nodes"]:
        got = samples.get(node.get("name", ""))
        if got is None:
            continue
        st = summary(got)
        node["fpgaLatency"] = node["cpuLatency"] = st["median"]
        node["profile"] = {"forwardMs": st}
        mapped.add(node["name"])
    unmeasured = [n["name"] for n in doc["nodes"] if n.get("name") not in mapped]
    left_out = {n: statistics.median(v) for n, v in samples.items() if n not in mapped}
    doc["profile"] = {
        "device": "cpu",
        "runtime": f"onnxruntime {ort.__version__}",
        "threads": threads,
        "repeats": repeats,
        "warmup": warmup,
        "optimizations": "ORT_DISABLE_ALL",
        "wholeRunMs": summary(runs),
        "kernelSumMs": sum(statistics.median(v) for v in samples.values()),
        "mappedSumMs": sum(statistics.median(samples[n]) for n in mapped),
        "mappedNodes": len(mapped),
        "unmeasured": unmeasured,
        "leftOut": left_out,
        "timeS": time.perf_counter() - started,
    }
    return Workload.from_json(json.dumps(doc))
