"""dnnplace: optimal device placement of DNN operator graphs, from Python.

The planner is the Rust library (the native module ``dnnplace._dnnplace``, built with
PyO3): the same methods, defaults and JSON as the ``dnnplace`` command line. The solver
runs without the GIL; Ctrl-C stops it and returns the best plan so far (``Plan.stop_reason
== "interrupted"``). Bad input raises :class:`InputError` (a ``ValueError``) with the
command line's message.

``dnnplace.torch`` (needs PyTorch) profiles a model on the user's hardware into a
workload, runs a plan as a real ``torch.distributed.pipelining`` pipeline and compares the
prediction with the measurement.

    >>> import dnnplace
    >>> w = dnnplace.generate_transformer("gpt2", layers=8, hidden=512, heads=8, seq=128)
    >>> plan = dnnplace.plan(w, accelerators=2)
    >>> plan.status
    'proven optimal'

The whole parallel layout of a transformer (``dnnplace plan CONFIG.json --parallel 3d``):
pipeline stages, tensor and data parallelism, ZeRO and the micro-batch:

    >>> p = dnnplace.plan_parallel("examples/hf/llama-3-8b.json", "2x8xh100", global_batch=64)
    >>> [(s["tensorParallel"], s["dataParallel"]) for s in p.stages]  # doctest: +SKIP

``sweep_parallel`` gives the best layout per device count (``--sweep``), and
``plan_parallel(..., target_tps=MS)`` the fewest devices meeting a time per sample
(``--target-tps``), ``budget=`` a price cap (``--budget``).
"""

from ._dnnplace import (
    Cluster,
    InputError,
    InternalError,
    ParallelPlan,
    ParallelSweep,
    Plan,
    Workload,
    calibrate,
    device_profiles,
    generate_transformer,
    plan,
    plan_parallel,
    score,
    sweep_parallel,
    simulate,
)

__all__ = [
    "Cluster",
    "InputError",
    "InternalError",
    "ParallelPlan",
    "ParallelSweep",
    "Plan",
    "Workload",
    "calibrate",
    "device_profiles",
    "generate_transformer",
    "plan",
    "plan_parallel",
    "score",
    "sweep_parallel",
    "simulate",
]
