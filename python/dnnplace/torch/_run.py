"""A plan run for real: ``torch.distributed.pipelining`` stages, one process per stage.

The split is the ``torch`` export's: the module paths that begin stages 1, 2, ... (the
``split_spec`` keys, ``SplitPoint.BEGINNING``). ``pipeline()`` traces the model (wrapped so
that its output is the first tensor it returns: the logits of a Hugging Face model) and
cuts it there; rank ``s`` builds stage ``s`` and runs the schedule (``ScheduleGPipe`` or
``Schedule1F1B``) on a batch of ``m`` copies of the example micro-batch, the last stage
computing ``loss_fn``. Processes are started with ``spawn``, talk over gloo on
127.0.0.1, and each sets ``torch.set_num_threads(threads)`` and one inter-op thread, calls
:func:`steady_malloc` (freed memory stays in the process: no page faults at each large
allocation) and, with ``pin`` and at least as many allowed physical cores as stages, pins
itself to a core of its own (``os.sched_setaffinity``; stage ``s`` to the ``s``-th core,
one hardware thread of it: two stages never share a core's SMT siblings).
Python's cyclic garbage collector runs between steps only.

Per step: a barrier, the schedule's ``step``, a barrier; the step time is rank 0's wall
time between the barriers (median over the measured steps, after ``warmup`` untimed
ones). A stage's busy time is the time its ``forward_one_chunk`` and
``backward_one_chunk`` take per step (the stage's compute; the loss, receives and sends
are outside), in wall time and in the thread's CPU time: their ratio
(:attr:`RunResult.contention`) shows whether other work on the machine took the cores.
Each call is kept too (:attr:`RunResult.calls_ms`, with the last stage's loss, which is
outside the busy time). A run's noise is the steps' interquartile range over their median
(:attr:`RunResult.iqr`).
:func:`run_many` runs several splits and schedules in one set of processes, one step of
each in turn, so that their ratios are measured in the same run. Peak memory is the process's peak resident set (``ru_maxrss``): the whole
process, torch's own memory included.
"""

from __future__ import annotations

import copy
import gc
import json
import math
import multiprocessing as mp
import os
import socket
import statistics
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn


@dataclass
class RunResult:
    """What one real pipeline run measured."""

    schedule: str
    micro_batches: int
    split: List[str]
    #: Median step time (one iteration of m micro-batches, forward and backward), ms.
    step_ms: float
    #: Every measured step, ms.
    steps_ms: List[float]
    #: Per stage: busy time per step (median), ms.
    busy_ms: List[float]
    #: Per stage: the process's peak resident memory, bytes.
    peak_memory_bytes: List[int]
    #: Per stage: the CPU time of those calls (the stage's thread), ms.
    busy_cpu_ms: List[float] = field(default_factory=list)
    #: (max - min) / median of the measured steps.
    spread: float = field(default=0.0)
    #: Per stage: each call of the measured steps by kind ("forward", "backward": one
    #: micro-batch's ``forward_one_chunk`` / ``backward_one_chunk``; "loss": the last
    #: stage's loss; "wait": a wait on gloo's sends or receives), as [wall ms, CPU ms] in
    #: the order made.
    calls_ms: List[Dict[str, List[List[float]]]] = field(default_factory=list)

    @property
    def iqr(self) -> float:
        """The measured steps' interquartile range / median (0 with fewer than 2 steps)."""
        return relative_iqr(self.steps_ms)

    @property
    def median_error(self) -> float:
        """The step median's relative standard error (:func:`median_error`)."""
        return median_error(self.steps_ms)

    @property
    def contention(self) -> float:
        """The largest busy wall time / busy CPU time over the stages: 1 on a machine that
        gives each stage its core, more when other work took the cores."""
        return max((w / c for w, c in zip(self.busy_ms, self.busy_cpu_ms) if c > 0), default=1.0)


def steady_malloc() -> bool:
    """Keeps glibc's freed memory in the process: large blocks come from the heap (mmap
    threshold 256 MiB), the heap grows by 256 MiB and is never trimmed back (``mallopt``).
    By default glibc maps a block of 32 MiB or more afresh at each allocation and unmaps it
    when freed, so every use page-faults it back in: the dense gradient of a 32000 × 256
    embedding (32.8 MB) took 9 ms or 27 ms by whether its 8000 pages had to be faulted in.
    Returns whether the settings took (False off glibc)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    return all([mallopt(m_mmap_threshold, 1 << 28) == 1, mallopt(m_trim_threshold, (1 << 31) - 1) == 1,
                mallopt(m_top_pad, 1 << 28) == 1])


def _physical_cores() -> List[int]:
    """One allowed CPU per physical core (the lowest of each core's SMT siblings, by
    ``/sys/devices/system/cpu/cpuN/topology``), so that two stages never share a core's
    two hardware threads; every allowed CPU where the topology cannot be read."""
    allowed = sorted(os.sched_getaffinity(0))
    first: Dict[Tuple[str, str], int] = {}
    for cpu in allowed:
        topo = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{topo}/physical_package_id") as f, open(f"{topo}/core_id") as g:
                key = (f.read().strip(), g.read().strip())
        except OSError:
            return allowed
        first.setdefault(key, cpu)
    return sorted(first.values())


def _co_runner(model: nn.Module, example: Sequence[Any], target: Any, loss_fn: Optional[Callable],
               threads: int, core: Optional[int], ready: Any, stop: Any) -> None:
    """A neighbour for :func:`profile`'s ``co_runners``: trains ``model`` on ``example``
    (forward, loss, backward; one micro-batch at a time, ``threads`` threads, glibc's freed
    memory kept, pinned to ``core`` when given) until ``stop`` is set, as another stage's
    process computes beside the profiled one during a pipeline step."""
    try:
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
        steady_malloc()
        if core is not None:
            os.sched_setaffinity(0, {core})
        model.train(True)
        first = True
        steps = 0
        while not stop.is_set():
            model.zero_grad(set_to_none=True)
            out = model(*example)
            out = out if isinstance(out, torch.Tensor) else next(t for t in _flat(out) if isinstance(t, torch.Tensor))
            loss = loss_fn(out, target) if loss_fn is not None else out.float().sum()
            loss.backward()
            steps += 1
            if first:
                ready.put(True)
                first = False
        ready.put(steps)
    except BaseException:  # noqa: BLE001 - the profile goes on without this neighbour
        ready.put(traceback.format_exc())


def _flat(x: Any) -> List[Any]:
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    if isinstance(x, dict):
        return [y for v in x.values() for y in _flat(v)]
    if hasattr(x, "to_tuple"):
        return _flat(x.to_tuple())
    return [x]


class CoRunners:
    """``n`` neighbour processes (:func:`_co_runner`) training copies of the model while a
    profile measures, so that the profiled units share the machine (a core's SMT sibling,
    the caches, memory bandwidth, the clock) as a stage of an ``n + 1``-stage pipeline of
    processes does. With ``pin`` and ``n + 1`` allowed physical cores, the profiling
    process takes the first (as stage 0 of :func:`run` does) and neighbour ``i`` the
    ``i + 1``-th; the profiling process's affinity is restored on exit. A context
    manager; it returns once every neighbour has taken its first step, and on exit
    :attr:`steps` holds how many training steps each neighbour took."""

    def __init__(self, n: int, model: nn.Module, example: Sequence[Any], target: Any,
                 loss_fn: Optional[Callable], threads: int, pin: bool = True, timeout: float = 600.0):
        self.n, self.model, self.example, self.target, self.loss_fn = n, model, example, target, loss_fn
        self.threads, self.pin, self.timeout = threads, pin, timeout
        self.procs: List[Any] = []
        self.steps: List[int] = []
        self.old_affinity: Optional[set] = None

    def __enter__(self) -> "CoRunners":
        if self.n <= 0:
            return self
        cores = _physical_cores() if self.pin else []
        pinned = len(cores) >= self.n + 1
        if pinned:
            self.old_affinity = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {cores[0]})
        ctx = mp.get_context("spawn")
        self.ready, self.stop = ctx.Queue(), ctx.Event()
        ready = self.ready
        model = copy.deepcopy(self.model).cpu()
        for i in range(self.n):
            core = cores[i + 1] if pinned else None
            p = ctx.Process(target=_co_runner, args=(model, list(self.example), self.target, self.loss_fn,
                                                     self.threads, core, ready, self.stop), daemon=True)
            p.start()
            self.procs.append(p)
        try:
            for _ in range(self.n):
                msg = ready.get(timeout=self.timeout)
                if msg is not True:
                    raise RuntimeError(f"a profiling neighbour failed:\n{msg}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.procs:
            self.stop.set()
            for _ in self.procs:
                try:
                    got = self.ready.get(timeout=60)
                except Exception:  # queue.Empty: a neighbour died
                    break
                if isinstance(got, int) and not isinstance(got, bool):
                    self.steps.append(got)
            for p in self.procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
                    p.join()
            self.procs = []
        if self.old_affinity is not None:
            os.sched_setaffinity(0, self.old_affinity)
            self.old_affinity = None


def relative_iqr(samples: Sequence[float]) -> float:
    """(Q3 − Q1) / median of ``samples`` (quartiles by linear interpolation between the
    order statistics, ``statistics.quantiles(method="inclusive")``); 0 for fewer than 2."""
    if len(samples) < 2:
        return 0.0
    q1, med, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return (q3 - q1) / med if med > 0 else 0.0


def median_error(samples: Sequence[float]) -> float:
    """The relative standard error of ``samples``' median, estimated robustly from their
    interquartile range: σ ≈ IQR / 1.349 and SE(median) ≈ √(π/2) · σ / √n (normal
    samples), i.e. 0.929 · IQR / √n, over the median. 0 for fewer than 2 samples."""
    if len(samples) < 2:
        return 0.0
    return math.sqrt(math.pi / 2) / 1.349 * relative_iqr(samples) / math.sqrt(len(samples))


class _FirstTensor(nn.Module):
    """The model with its output reduced to the first tensor it returns."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, *args: Any) -> torch.Tensor:
        out = self.inner(*args)
        if isinstance(out, torch.Tensor):
            return out
        if hasattr(out, "to_tuple"):
            out = out.to_tuple()
        if isinstance(out, dict):
            out = tuple(out.values())
        return out[0]


def split_of(plan: Any) -> List[str]:
    """The module paths that begin stages 1, 2, ... of a plan (its ``torch-json`` export)."""
    if isinstance(plan, (list, tuple)):
        return list(plan)
    spec = json.loads(plan.export("torch-json"))["split_spec"]
    return list(spec.keys())


def equal_layer_split(workload: Any, stages: int) -> List[str]:
    """The framework default (vLLM's and Megatron-LM's rule): the blocks divided into
    ``stages`` runs of equal length (the first stages one longer when they do not divide),
    everything before the first block on stage 0 and after the last on the last stage."""
    doc = json.loads(workload.to_json())
    blocks: Dict[int, str] = {}
    for node in doc["nodes"]:
        if node.get("isBackwardNode") or "layerId" not in node or "module" not in node:
            continue
        layer = node["layerId"]
        path = node["module"]
        # The block's own path: its module up to and including the layer index.
        parts = path.split(".")
        for j, part in enumerate(parts):
            if part == str(layer):
                path = ".".join(parts[: j + 1])
                break
        blocks.setdefault(layer, path)
    order = sorted(blocks)
    if len(order) < stages:
        raise ValueError(f"{len(order)} blocks cannot fill {stages} stages")
    base, extra = divmod(len(order), stages)
    keys, start = [], 0
    for s in range(stages - 1):
        start += base + (1 if s < extra else 0)
        keys.append(blocks[order[start]])
    return keys


def placement_of_split(workload: Any, split: Sequence[str]) -> str:
    """Placement JSON (MODEL.md shape) of a split: forward nodes in id order, a new stage at
    each node whose module is (inside) the next split key; backward nodes follow their
    colour class."""
    doc = json.loads(workload.to_json())
    stages: List[List[int]] = [[] for _ in range(len(split) + 1)]
    s = 0
    for node in sorted((n for n in doc["nodes"] if not n.get("isBackwardNode")), key=lambda n: n["id"]):
        module = node.get("module") or ""
        if s < len(split) and (module == split[s] or module.startswith(split[s] + ".")):
            s += 1
        stages[s].append(node["id"])
    if s != len(split):
        raise ValueError(f"split key {split[s]!r} names no module of the workload (or is out of order)")
    return json.dumps({"fpgas": [{"nodes": ids} for ids in stages], "cpus": []})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world: int, port: int, model: nn.Module, example: Sequence[Any], target: Any,
            loss_fn: Callable, configs: List[Tuple[List[str], str]], m: int, steps: int, warmup: int,
            threads: int, nice: Optional[int], pin: bool, queue: Any) -> None:
    try:
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
        steady_malloc()
        if nice is not None:
            os.nice(nice)
        if pin:
            cores = _physical_cores()
            if len(cores) >= world:
                os.sched_setaffinity(0, {cores[rank]})
        import resource

        import torch.distributed as dist
        from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, SplitPoint, pipeline

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        wall, cpu = [0.0], [0.0]
        # The calls of the current step: (kind, wall ms, CPU ms).
        calls: List[Tuple[str, float, float]] = []

        def timed(fn: Callable, kind: str, busy: bool = True) -> Callable:
            def wrapper(*a: Any, **k: Any) -> Any:
                t0, c0 = time.perf_counter(), time.thread_time()
                try:
                    return fn(*a, **k)
                finally:
                    dw, dc = time.perf_counter() - t0, time.thread_time() - c0
                    calls.append((kind, 1e3 * dw, 1e3 * dc))
                    if busy:
                        wall[0] += dw
                        cpu[0] += dc
            return wrapper

        # Waits on gloo's sends and receives, kept apart ("wait", outside the busy time).
        import torch.distributed.pipelining.schedules as schedules_module

        if hasattr(schedules_module, "_wait_batch_p2p"):
            schedules_module._wait_batch_p2p = timed(schedules_module._wait_batch_p2p, "wait", busy=False)
        runs = []
        for split, schedule in configs:
            # Every config gets its own copy of the model: stages own their parameters.
            wrapped = _FirstTensor(copy.deepcopy(model))
            spec = {f"inner.{k}": SplitPoint.BEGINNING for k in split}
            pipe = pipeline(wrapped, mb_args=tuple(example), split_spec=spec)
            if pipe.num_stages != world:
                raise RuntimeError(f"pipeline() made {pipe.num_stages} stages, expected {world}")
            stage = pipe.build_stage(rank, torch.device("cpu"))
            stage.forward_one_chunk = timed(stage.forward_one_chunk, "forward")
            stage.backward_one_chunk = timed(stage.backward_one_chunk, "backward")
            cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule]
            sched = cls(stage, n_microbatches=m, loss_fn=loss_fn)
            if hasattr(sched, "_compute_loss"):
                sched._compute_loss = timed(sched._compute_loss, "loss", busy=False)
            runs.append((stage, sched))
        full = [torch.cat([x] * m) for x in example]
        full_target = torch.cat([target] * m)
        step_ms = [[] for _ in configs]
        busy_ms = [[] for _ in configs]
        cpu_ms = [[] for _ in configs]
        call_ms: List[Dict[str, List[List[float]]]] = [{} for _ in configs]
        # Round-robin over the configs, so that a drift of the machine's load touches all;
        # Python's cyclic garbage collector runs between steps only.
        gc.disable()
        for i in range(warmup + steps):
            for c, (stage, sched) in enumerate(runs):
                stage.submod.zero_grad(set_to_none=True)
                gc.collect()
                wall[0] = cpu[0] = 0.0
                calls.clear()
                dist.barrier()
                t0 = time.perf_counter()
                if rank == 0:
                    sched.step(*full)
                elif rank == world - 1:
                    sched.step(target=full_target, losses=[])
                else:
                    sched.step()
                dist.barrier()
                t1 = time.perf_counter()
                if i >= warmup:
                    step_ms[c].append(1e3 * (t1 - t0))
                    busy_ms[c].append(1e3 * wall[0])
                    cpu_ms[c].append(1e3 * cpu[0])
                    for kind, w, cp in calls:
                        call_ms[c].setdefault(kind, []).append([w, cp])
        gc.enable()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        queue.put({"rank": rank, "steps": step_ms, "busy": busy_ms, "cpu": cpu_ms, "calls": call_ms, "peak": peak})
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        queue.put({"rank": rank, "error": traceback.format_exc()})


def run(
    model: nn.Module,
    plan: Any,
    example_inputs: Sequence[Any],
    target: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    schedule: str = "gpipe",
    micro_batches: int = 8,
    steps: int = 5,
    warmup: int = 2,
    threads: int = 1,
    nice: Optional[int] = None,
    timeout: float = 1800.0,
    pin: bool = True,
) -> RunResult:
    """Runs ``plan`` (a :class:`dnnplace.Plan`, or the list of module paths that begin
    stages 1, 2, ...) as a real pipeline and measures it (module documentation).

    ``example_inputs`` is one micro-batch (the model's positional arguments), ``target``
    its target; ``loss_fn(output, target)`` must be picklable (a module-level function).
    ``nice`` changes the stage processes' priority (``os.nice``; negative needs root).
    """
    return run_many(model, [(plan, schedule)], example_inputs, target, loss_fn, micro_batches, steps,
                    warmup, threads, nice, timeout, pin)[0]


def run_many(
    model: nn.Module,
    configs: Sequence[Tuple[Any, str]],
    example_inputs: Sequence[Any],
    target: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    micro_batches: int = 8,
    steps: int = 5,
    warmup: int = 2,
    threads: int = 1,
    nice: Optional[int] = None,
    timeout: float = 1800.0,
    pin: bool = True,
) -> List[RunResult]:
    """Several (plan, schedule) runs in one set of stage processes, their steps taken in
    turn (one step of each, then the next round), so that the figures are measured in the
    same run; all plans must have the same number of stages."""
    for _, schedule in configs:
        if schedule not in ("gpipe", "1f1b"):
            raise ValueError(f"schedule must be 'gpipe' or '1f1b', not {schedule!r}")
    if micro_batches < 1 or steps < 1 or warmup < 0:
        raise ValueError("micro_batches and steps must be at least 1, warmup at least 0")
    splits = [(split_of(p), schedule) for p, schedule in configs]
    world = len(splits[0][0]) + 1
    if any(len(s) + 1 != world for s, _ in splits):
        raise ValueError("run_many: every plan must have the same number of stages")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    model = model.cpu()
    example = [x.cpu() if isinstance(x, torch.Tensor) else x for x in example_inputs]
    procs = [
        ctx.Process(target=_worker, args=(r, world, port, model, example, target, loss_fn, splits,
                                          micro_batches, steps, warmup, threads, nice, pin, queue), daemon=True)
        for r in range(world)
    ]
    for p in procs:
        p.start()
    results: Dict[int, Dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the pipeline run did not finish within {timeout:.0f} s")
            try:
                r = queue.get(timeout=min(left, 5.0))
            except Exception:  # queue.Empty
                dead = [i for i, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"stage process(es) {dead} died (exit codes "
                                       f"{[procs[i].exitcode for i in dead]})") from None
                continue
            if "error" in r:
                raise RuntimeError(f"stage {r['rank']} failed:\n{r['error']}")
            results[r["rank"]] = r
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    out = []
    for c, (split, schedule) in enumerate(splits):
        steps_ms = results[0]["steps"][c]
        med = statistics.median(steps_ms)
        busy = [statistics.median(results[r]["busy"][c]) for r in range(world)]
        cpu = [statistics.median(results[r]["cpu"][c]) for r in range(world)]
        out.append(RunResult(
            schedule=schedule,
            micro_batches=micro_batches,
            split=split,
            step_ms=med,
            steps_ms=steps_ms,
            busy_ms=busy,
            busy_cpu_ms=cpu,
            peak_memory_bytes=[results[r]["peak"] for r in range(world)],
            calls_ms=[results[r]["calls"][c] for r in range(world)],
            spread=(max(steps_ms) - min(steps_ms)) / med if med > 0 else 0.0,
        ))
    return out
