"""PyTorch: costs measured on the user's hardware, and plans run for real.

- :func:`profile` runs a model's modules one at a time on the device and writes a
  training workload (MODEL.md format) whose nodes are the modules: measured forward and
  backward time (median of ``repeats``, the spread kept in the file), parameter, gradient
  and optimizer bytes, the activation bytes a stage keeps per micro-batch (measured with
  saved-tensor hooks) and the real tensor bytes on the edges.
- :func:`run` builds the plan's stages with ``torch.distributed.pipelining`` (the split
  the ``torch`` export writes), runs one process per stage (gloo, one thread each on the
  CPU) and measures the step time, each stage's busy time and peak memory.
- :func:`validate` prints the simulator's prediction (from the measured profile) against
  the measured run, per stage and overall.

**Units.** With ``granularity="block"`` the nodes are the model's modules from the root
down to the blocks (a child of a ``ModuleList``/``Sequential`` with an integer name, e.g.
``transformer.h.3``), each block one node with ``layerId`` = its index; everything not
inside a block is expanded to leaves (``transformer.wte``, ``transformer.ln_f``,
``lm_head``). With ``granularity="module"`` each block is replaced by its direct children
(``transformer.h.3.attn``, ``transformer.h.3.mlp``, ...), all with the block's
``layerId``. Work a container does itself between its children (a residual add, the sum
of token and position embeddings) is not timed: it is outside every unit.

**Measurement.** One forward pass records each unit's calls (arguments and keyword
arguments, through forward pre-hooks) in program order. Each call is then replayed on
its own, in ``warmup + repeats`` rounds that run every call once in program order (the
first ``warmup`` rounds untimed), so that a drift of the machine spreads over all units'
samples: timed forward passes and timed backward passes (``torch.autograd.backward`` of its floating outputs with gradients of
ones; floating inputs require gradients, as a stage's received activations do). A
trailing ``loss`` node (``loss_fn(output, target)``) is timed the same way and joins the
last unit's colour class. Edges form the chain of units in program order; an edge's
bytes are the source unit's floating outputs, its cost ``1e3 · bytes /
link_bytes_per_s`` ms.

**Execution.** ``execution="eager"`` replays the model's own modules. ``"pipeline"``
replays them as :func:`run` runs them: ``pipeline()`` traces the model with
``torch.export`` and unflattens it into ``InterpreterModule``s, which run their graphs
node by node in Python; the calls are recorded and replayed on those (the same paths).
On the CI model (one thread) a block's forward took 4.4 ms eager and 5.9 ms as an
``InterpreterModule``, and a stage of the embeddings and 4 blocks 22.1 ms against 28.8 ms
(backward alike, 45–51 ms): timing the eager modules put the first stage 20–45 % under
the real run. ``steady_memory`` (default) calls :func:`steady_malloc` first, as the
stage processes of :func:`run` do, so that large freed blocks are reused, not page-faulted
back in at each call (the embedding's dense gradient: 9 ms, or 27 ms with 8000 faults).

**Neighbours.** ``co_runners=n`` (what :func:`validate` uses: ``stages − 1``) times the
units while ``n`` other processes train copies of the model on the other cores
(:class:`CoRunners`), pinned as :func:`run` pins its stages: in a pipeline of CPU processes
each stage computes while the others do, and they share the machine (caches, memory
bandwidth, a core's SMT sibling on some machines, the clock). On CI's 2-core machine the
stages of the CI model ran 16–33 % slower (in CPU time) than a profile taken alone priced
them, and the check failed at +29–31 %; profiled beside a neighbour, 4 of 5 judged
attempts came within 15 % (−4.9 … +11.2 %) and one at +19 / +24 %: the level of a profile
beside a neighbour still shifted from one profile to the next (docs/costmodel.md).

**Sessions and order.** ``sessions=s`` splits the ``repeats`` timed rounds into ``s``
sessions, each with its own warm-up and its own fresh neighbours (a new process, a new
phase, later in time); a node's median is over all its samples, and the file keeps each
session's level (``profile.sessions[].totalMs``: Σ of the nodes' medians over that
session's samples), so a level that moves as a whole — invisible in the spread within a
session — is measured (:func:`session_noise`, part of :func:`profile_noise`) and averaged
over. ``order="shuffled"`` (the default) runs the units in a new random order each round
(``seed``): a neighbour trains in a loop whose period is close to a round's, and in a
fixed order a unit would meet the same phase of the neighbour's step round after round.
Measured on a 2-core machine (CI model, 15 repeats in 3 sessions, one neighbour): the
sessions' levels agreed within 0.5–4 % in five profiles of six, and one session was 10 %
above the other two.

**Memory.** Forward node: the unit's parameter bytes (``weightBytes``). Backward node:
``activationBytes`` = the bytes autograd saves during the unit's forward (saved-tensor
hooks; parameters and duplicates of one storage excluded) — what a stage keeps per
micro-batch in flight — ``gradientBytes`` = parameter bytes, ``optimizerBytes`` = 2 ×
parameter bytes for Adam (two moments of the parameters' dtype), 0 for SGD. A parameter
reached from two units (a tied embedding and LM head) is counted in both, since
``pipeline()`` copies it into every stage that uses it; ``tiedParameters`` in the file
lists them. (Both units on one stage then count it twice.)
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from .. import Workload
from .._stats import summary
from ._run import (CoRunners, RunResult, equal_layer_split, median_error, relative_iqr, run, run_many, split_of,
                   steady_malloc)
from ._validate import Validation, validate

__all__ = [
    "profile",
    "run",
    "run_many",
    "validate",
    "timing_spread",
    "profile_noise",
    "session_noise",
    "relative_iqr",
    "median_error",
    "steady_malloc",
    "RunResult",
    "CoRunners",
    "Validation",
    "equal_layer_split",
    "split_of",
    "TinyGPT",
]

from .models import TinyGPT  # noqa: E402


def _is_block(parent: nn.Module, name: str) -> bool:
    return isinstance(parent, (nn.ModuleList, nn.Sequential)) and name.isdigit()


def _units(model: nn.Module, granularity: str) -> List[Tuple[str, nn.Module, Optional[int]]]:
    """(path, module, layerId) of the units, in the module tree's order (module docs)."""
    if granularity not in ("block", "module"):
        raise ValueError(f"granularity must be 'block' or 'module', not {granularity!r}")
    out: List[Tuple[str, nn.Module, Optional[int]]] = []

    def visit(path: str, mod: nn.Module, layer: Optional[int]) -> None:
        children = list(mod.named_children())
        if not children:
            out.append((path, mod, layer))
            return
        for name, child in children:
            child_path = f"{path}.{name}" if path else name
            if layer is None and _is_block(mod, name):
                if granularity == "block" or not list(child.named_children()):
                    out.append((child_path, child, int(name)))
                else:
                    for gname, grand in child.named_children():
                        out.append((f"{child_path}.{gname}", grand, int(name)))
            else:
                visit(child_path, child, layer)

    visit("", model, None)
    return out


def _tensors(x: Any) -> List[torch.Tensor]:
    """The tensors inside nested tuples, lists, dicts and model-output objects."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict) or hasattr(x, "to_tuple"):
        x = list(x.values()) if isinstance(x, dict) else list(x.to_tuple())
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _tensors(item)]
    return []


def _float_bytes(x: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(x) if t.is_floating_point())


def _prepare(x: Any, grad: bool) -> Any:
    """A detached copy of a call's argument; floating tensors require grad when training."""
    if isinstance(x, torch.Tensor):
        y = x.detach().clone()
        if grad and y.is_floating_point():
            y.requires_grad_(True)
        return y
    if isinstance(x, tuple):
        return tuple(_prepare(i, grad) for i in x)
    if isinstance(x, list):
        return [_prepare(i, grad) for i in x]
    if isinstance(x, dict):
        return {k: _prepare(v, grad) for k, v in x.items()}
    return x


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()




class _Call:
    def __init__(self, fn: Callable[..., Any], args: Any, kwargs: Dict[str, Any]):
        self.fn, self.args, self.kwargs = fn, args, kwargs


def _time_call(call: _Call, training: bool, repeats: int, warmup: int, device: str,
               param_ptrs: set, clock: Callable[[], float]) -> Tuple[List[float], List[float], int, int]:
    """Forward and backward times (ms) of one call, its saved bytes and output bytes."""
    fwd: List[float] = []
    bwd: List[float] = []
    saved = 0
    out_bytes = 0
    for i in range(warmup + repeats):
        args = _prepare(call.args, training)
        kwargs = _prepare(call.kwargs, training)
        seen: Dict[Tuple[int, int], int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            try:
                ptr = t.untyped_storage().data_ptr()
            except (RuntimeError, NotImplementedError):
                return t
            if ptr not in param_ptrs:
                seen[(ptr, t.numel())] = t.numel() * t.element_size()
            return t

        _sync(device)
        t0 = clock()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.set_grad_enabled(training):
                out = call.fn(*args, **kwargs)
        _sync(device)
        t1 = clock()
        if i == 0:
            saved = sum(seen.values())
            out_bytes = _float_bytes(out)
        outs = [t for t in _tensors(out) if t.is_floating_point() and t.requires_grad]
        tb = 0.0
        if training and outs:
            grads = [torch.ones_like(t) for t in outs]
            _sync(device)
            b0 = clock()
            torch.autograd.backward(outs, grads)
            _sync(device)
            tb = 1e3 * (clock() - b0)
        if i >= warmup:
            fwd.append(1e3 * (t1 - t0))
            bwd.append(tb)
    return fwd, bwd, saved, out_bytes


def profile(
    model: nn.Module,
    example_inputs: Sequence[Any],
    device: str = "cpu",
    training: bool = True,
    granularity: str = "block",
    repeats: int = 10,
    warmup: int = 3,
    threads: Optional[int] = 1,
    accelerators: int = 2,
    memory_bytes: float = 1e12,
    optimizer: str = "adam",
    loss_fn: Optional[Callable[[Any, Any], torch.Tensor]] = None,
    target: Any = None,
    link_bytes_per_s: float = 2e9,
    nice: Optional[int] = None,
    clock: str = "wall",
    execution: str = "eager",
    steady_memory: bool = True,
    co_runners: int = 0,
    sessions: int = 1,
    order: str = "shuffled",
    seed: int = 0,
) -> Workload:
    """Measures ``model`` on ``example_inputs`` (one micro-batch) and returns its workload.

    The workload's device set is ``accelerators`` devices of the profiled kind (each with
    ``memory_bytes``) and no CPU cores; the file keeps, per node, ``profile`` (the module,
    the forward and backward samples, their median and spread) and, at the top level,
    ``profile`` (device, threads, torch version, repeats, time taken) and
    ``tiedParameters``. See the module documentation for what is measured and how.
    ``nice`` raises (negative, needs root) or lowers this process's priority while it
    measures. ``clock="cpu"`` (CPU, one thread) times with the thread's CPU time instead of
    the wall clock: what the modules cost when they have a core to themselves, on a machine
    that other work shares. ``execution="pipeline"`` times each unit as
    ``torch.distributed.pipelining`` runs it (module documentation): what :func:`run` runs.
    ``steady_memory`` calls :func:`steady_malloc` (for the whole process, as :func:`run`'s
    stage processes do). ``co_runners`` neighbour processes (:class:`CoRunners`) train
    copies of the model on the other cores while the units are timed: for a pipeline of
    ``co_runners + 1`` CPU processes on this machine, the times then include what the
    neighbours cost each other (a shared core, caches, memory bandwidth, clock).
    ``sessions`` splits the timed rounds into that many sessions, each with fresh
    neighbours, and records each session's level; ``order`` is ``"shuffled"`` (a new
    random order of the units each round, from ``seed``) or ``"program"`` (module
    documentation, "Sessions and order").
    """
    if execution not in ("eager", "pipeline"):
        raise ValueError(f"execution must be 'eager' or 'pipeline', not {execution!r}")
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu', not {clock!r}")
    if clock == "cpu" and (device != "cpu" or threads != 1):
        raise ValueError("clock='cpu' measures one thread: it needs device='cpu' and threads=1")
    timer = time.perf_counter if clock == "wall" else time.thread_time
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be at least 1 and warmup at least 0")
    if optimizer not in ("adam", "sgd"):
        raise ValueError(f"optimizer must be 'adam' or 'sgd', not {optimizer!r}")
    if co_runners < 0:
        raise ValueError("co_runners must be at least 0")
    if not 1 <= sessions <= repeats:
        raise ValueError(f"sessions must be from 1 to repeats ({repeats}), not {sessions}")
    if order not in ("program", "shuffled"):
        raise ValueError(f"order must be 'program' or 'shuffled', not {order!r}")
    if (loss_fn is None) != (target is None):
        raise ValueError("loss_fn and target go together (the loss node needs both)")
    started = time.perf_counter()
    if steady_memory:
        steady_malloc()
    old_threads = torch.get_num_threads()
    old_priority = os.getpriority(os.PRIO_PROCESS, 0)
    if nice is not None:
        os.setpriority(os.PRIO_PROCESS, 0, old_priority + nice)
    if threads is not None:
        torch.set_num_threads(threads)
    was_training = model.training
    model.to(device)
    model.train(training)
    try:
        units = _units(model, granularity)
        calls: Dict[str, List[_Call]] = {path: [] for path, _, _ in units}
        order_of_units: List[str] = []
        handles = []
        runner, replayed = _executor(model, example_inputs, execution)
        for path, _, _ in units:
            def pre(m: nn.Module, args: Any, kwargs: Any, path: str = path) -> None:
                calls[path].append(_Call(m, _prepare(args, False), _prepare(kwargs, False)))
                if path not in order_of_units:
                    order_of_units.append(path)
            handles.append(replayed(path).register_forward_pre_hook(pre, with_kwargs=True))
        try:
            with torch.no_grad():
                output = runner(*example_inputs)
        finally:
            for h in handles:
                h.remove()
        by_path = {path: (mod, layer) for path, mod, layer in units}
        param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
        if runner is not model:
            param_ptrs |= {p.untyped_storage().data_ptr() for p in runner.parameters()}
        owners: Dict[int, List[str]] = {}
        names: Dict[int, str] = {}
        for n, p in model.named_parameters(remove_duplicate=False):
            names.setdefault(id(p), n)
        for path in order_of_units:
            for p in by_path[path][0].parameters():
                owners.setdefault(id(p), [])
                if path not in owners[id(p)]:
                    owners[id(p)].append(path)
        nodes: List[Dict[str, Any]] = []
        for path in order_of_units:
            mod, layer = by_path[path]
            params = sum(p.numel() * p.element_size() for p in mod.parameters())
            nodes.append({"module": path, "layer": layer, "fwd": [0.0] * repeats, "bwd": [0.0] * repeats,
                          "saved": 0, "out": 0, "params": params, "calls": len(calls[path])})
        loss_call = None
        if loss_fn is not None:
            loss_call = _Call(loss_fn, (output.detach() if isinstance(output, torch.Tensor)
                                        else _first_tensor(output), target), {})
            nodes.append({"module": None, "name": "loss", "layer": None, "fwd": [0.0] * repeats,
                          "bwd": [0.0] * repeats, "saved": 0, "out": 0, "params": 0, "calls": 1})
        rng = random.Random(seed) if order == "shuffled" else None
        shares = _session_shares(repeats, sessions)
        for k, share in enumerate(shares):
            rounds = _Rounds(warmup, share, sum(shares[:k]), k == 0, rng)
            with CoRunners(co_runners, model, example_inputs, target, loss_fn, threads or 1):
                _timing_rounds(nodes, order_of_units, calls, training, rounds, device, param_ptrs, timer)
                if loss_call is not None:
                    f, b, s, o = _time_call(loss_call, training, share, warmup, device, param_ptrs, timer)
                    loss = nodes[-1]
                    loss["fwd"][rounds.offset:rounds.offset + share] = f
                    loss["bwd"][rounds.offset:rounds.offset + share] = b
                    loss["saved"], loss["out"] = s, o
        tied = [
            {"parameter": names.get(pid, "?"), "modules": paths,
             "bytes": next(p.numel() * p.element_size() for p in model.parameters() if id(p) == pid)}
            for pid, paths in owners.items() if len(paths) > 1
        ]
    finally:
        model.train(was_training)
        torch.set_num_threads(old_threads)
        if nice is not None:
            os.setpriority(os.PRIO_PROCESS, 0, old_priority)
    elapsed = time.perf_counter() - started
    doc = _workload_doc(nodes, training, accelerators, memory_bytes, optimizer, link_bytes_per_s, loss_fn is not None)
    doc["tiedParameters"] = tied
    doc["profile"] = {
        "device": device,
        "threads": threads if threads is not None else old_threads,
        "torch": torch.__version__,
        "granularity": granularity,
        "repeats": repeats,
        "warmup": warmup,
        "training": training,
        "optimizer": optimizer,
        "linkBytesPerS": link_bytes_per_s,
        "clock": clock,
        "execution": execution,
        "steadyMemory": steady_memory,
        "coRunners": co_runners,
        "order": order,
        "sessions": _session_totals(nodes, _session_shares(repeats, sessions)),
        "inputShapes": [list(t.shape) for t in _tensors(list(example_inputs))],
        "timeS": elapsed,
    }
    return Workload.from_json(json.dumps(doc))


def _session_shares(repeats: int, sessions: int) -> List[int]:
    """The timed rounds of each session: ``repeats`` split as evenly as it goes."""
    return [repeats // sessions + (1 if k < repeats % sessions else 0) for k in range(sessions)]


def _session_totals(nodes: List[Dict[str, Any]], shares: List[int]) -> List[Dict[str, Any]]:
    """Per session: its timed rounds and Σ over the nodes of the median of the session's
    forward and backward samples (ms): the level each session alone would price the model at."""
    out, offset = [], 0
    for share in shares:
        total = sum(statistics.median(n[key][offset:offset + share]) for n in nodes for key in ("fwd", "bwd"))
        out.append({"repeats": share, "totalMs": total})
        offset += share
    return out


@dataclass
class _Rounds:
    """One session's rounds: ``warmup`` untimed, then ``timed`` whose samples go to the
    nodes' sample slots from ``offset``; ``first`` records the saved and output bytes;
    ``rng`` (when given) shuffles the units' order in each round."""

    warmup: int
    timed: int
    offset: int
    first: bool
    rng: Optional[random.Random]


def _timing_rounds(nodes: List[Dict[str, Any]], order: List[str], calls: Dict[str, List[_Call]], training: bool,
                   rounds: _Rounds, device: str, param_ptrs: set, timer: Callable[[], float]) -> None:
    """Rounds: every call once per round, so that a drift of the machine spreads over all
    units' samples (not all of one unit's), and each call runs between the others, as in a
    pipeline step. In program order, or shuffled afresh each round (``rounds.rng``): a
    neighbour trains in a loop whose period is close to a round's, so in a fixed order a
    unit would meet the same phase of the neighbour's step round after round. Adds each
    call's times to its node's samples."""
    units = list(zip(nodes, order))
    for rnd in range(rounds.warmup + rounds.timed):
        if rounds.rng is not None:
            rounds.rng.shuffle(units)
        for node, path in units:
            for call in calls[path]:
                f, b, s, o = _time_call(call, training, 1, 0, device, param_ptrs, timer)
                if rnd == 0 and rounds.first:
                    node["saved"] += s
                    node["out"] = o
                if rnd >= rounds.warmup:
                    slot = rounds.offset + rnd - rounds.warmup
                    node["fwd"][slot] += f[0]
                    node["bwd"][slot] += b[0]


def _executor(model: nn.Module, example_inputs: Sequence[Any],
              execution: str) -> Tuple[nn.Module, Callable[[str], nn.Module]]:
    """The module whose forward pass records the calls, and the unit (by path) whose calls
    are replayed: the model itself (``"eager"``), or the model as ``pipeline()`` runs it
    (``"pipeline"``: traced with ``torch.export`` and unflattened, one stage)."""
    if execution == "eager":
        return model, model.get_submodule
    from torch.distributed.pipelining import pipeline

    from ._run import _FirstTensor

    pipe = pipeline(_FirstTensor(model), mb_args=tuple(example_inputs), split_spec={})
    inner = pipe.split_gm.get_submodule("submod_pp_0.inner")

    def unit(path: str) -> nn.Module:
        try:
            return inner.get_submodule(path)
        except AttributeError:
            raise ValueError(f"module {path!r} is not a module of the traced model (pipeline() "
                             "inlined it); profile it with execution='eager'") from None

    return pipe, unit


def _first_tensor(x: Any) -> torch.Tensor:
    ts = _tensors(x)
    if not ts:
        raise ValueError("the model's output holds no tensor for loss_fn")
    return ts[0].detach()


def _workload_doc(nodes: List[Dict[str, Any]], training: bool, accelerators: int, memory_bytes: float,
                  optimizer: str, link: float, has_loss: bool) -> Dict[str, Any]:
    n = len(nodes)
    out_nodes: List[Dict[str, Any]] = []
    edges: List[Dict[str, Any]] = []
    cost = lambda b: 1e3 * b / link  # noqa: E731
    for i, u in enumerate(nodes):
        fid = i + 1
        # The loss joins the last unit's colour class (it runs where the output is).
        color = n - 1 if (has_loss and i == n - 1 and n > 1) else fid
        fwd = summary(u["fwd"])
        node = {
            "id": fid,
            "name": u.get("name") or u["module"],
            "fpgaLatency": fwd["median"],
            "cpuLatency": fwd["median"],
            "size": float(u["params"]),
            "weightBytes": float(u["params"]),
            "supportedOnFpga": 1,
            "isBackwardNode": 0,
            "colorClass": color,
            "profile": {"calls": u["calls"], "forwardMs": fwd, "outputBytes": u["out"]},
        }
        if u["module"]:
            node["module"] = u["module"]
        if u["layer"] is not None:
            node["layerId"] = u["layer"]
        out_nodes.append(node)
        if i + 1 < n:
            edges.append({"sourceId": fid, "destId": fid + 1, "cost": cost(u["out"]), "size": float(u["out"])})
    if training:
        for i, u in enumerate(nodes):
            fid, bid = i + 1, n + i + 1
            bwd = summary(u["bwd"])
            opt = 2.0 * u["params"] if optimizer == "adam" else 0.0
            mem = float(u["saved"]) + float(u["params"]) + opt
            node = {
                "id": bid,
                "name": (u.get("name") or u["module"]) + "_grad",
                "fpgaLatency": bwd["median"],
                "cpuLatency": bwd["median"],
                "size": mem,
                "activationBytes": float(u["saved"]),
                "gradientBytes": float(u["params"]),
                "optimizerBytes": opt,
                "supportedOnFpga": 1,
                "isBackwardNode": 1,
                "colorClass": out_nodes[i]["colorClass"],
                "profile": {"backwardMs": bwd, "savedBytes": u["saved"]},
            }
            if u["module"]:
                node["module"] = u["module"]
            if u["layer"] is not None:
                node["layerId"] = u["layer"]
            out_nodes.append(node)
            edges.append({"sourceId": fid, "destId": bid, "cost": cost(u["out"]), "size": float(u["out"])})
            if i + 1 < n:
                # The gradient of u's output flows back from the next unit.
                edges.append({"sourceId": n + i + 2, "destId": bid, "cost": cost(u["out"]), "size": float(u["out"])})
    return {
        "maxSizePerFPGA": float(memory_bytes),
        "maxFPGAs": accelerators,
        "maxCPUs": 0,
        "nodes": out_nodes,
        "edges": edges,
    }


def timing_spread(workload: Workload) -> float:
    """The median relative spread ((max - min) / median) of the nodes' measured times."""
    doc = json.loads(workload.to_json())
    spreads = []
    for node in doc["nodes"]:
        prof = node.get("profile", {})
        for key in ("forwardMs", "backwardMs"):
            if key in prof and prof[key]["median"] > 0:
                spreads.append(prof[key]["spread"])
    return statistics.median(spreads) if spreads else math.nan


def profile_noise(workload: Workload) -> float:
    """The profile's noise as the prediction feels it: within sessions, Σ SE / Σ median over
    the nodes' measured forward and backward times, SE a node's median's standard error
    (:func:`median_error` of its samples, times its median) — the relative error of a
    stage's sum if every node erred the same way; heavy nodes weigh by their time, and a
    module of 0.1 ms with a 60 % spread barely counts, as in a stage's sum. Combined
    (root of the sum of squares) with the level's error between sessions
    (:func:`session_noise`)."""
    doc = json.loads(workload.to_json())
    iqr = med = 0.0
    for node in doc["nodes"]:
        prof = node.get("profile", {})
        for key in ("forwardMs", "backwardMs"):
            if key in prof and prof[key]["median"] > 0:
                med += prof[key]["median"]
                iqr += median_error(prof[key]["samples"]) * prof[key]["median"]
    within = iqr / med if med > 0 else math.nan
    return math.hypot(within, session_noise(workload))


def session_noise(workload: Workload) -> float:
    """The relative standard error of the profile's level between its sessions
    (``sessions`` of :func:`profile`): the standard deviation of the sessions' totals
    (``profile.sessions[].totalMs``) over √(sessions), over their mean. A neighbour's phase,
    the core it got, the clock: what moves one session's level as a whole is invisible in
    the spread of samples within a session. 0 with one session."""
    totals = [s["totalMs"] for s in json.loads(workload.to_json()).get("profile", {}).get("sessions", [])]
    if len(totals) < 2 or statistics.mean(totals) <= 0:
        return 0.0
    return statistics.stdev(totals) / math.sqrt(len(totals)) / statistics.mean(totals)
