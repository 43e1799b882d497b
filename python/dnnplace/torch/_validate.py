"""Predicted against measured: the simulator (from the measured profile) against a real run.

For each schedule, the plan's split (and, with ``compare_equal``, the equal-layer split)
is simulated over ``m`` micro-batches (``dnnplace.simulate``: iteration time, and each
stage's compute per iteration) and run for real (:func:`dnnplace.torch.run`). The error
is ``measured / predicted − 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from .. import Workload, plan as make_plan, simulate
from ._run import RunResult, equal_layer_split, placement_of_split, run_many, split_of


@dataclass
class Row:
    """One split under one schedule: predicted and measured."""

    schedule: str
    label: str
    split: List[str]
    predicted_ms: float
    measured: RunResult
    #: Per stage: the simulator's compute per iteration, ms.
    predicted_busy_ms: List[float]

    @property
    def error(self) -> float:
        return self.measured.step_ms / self.predicted_ms - 1.0


@dataclass
class Validation:
    """Every row of a validation, and the workload and plan it used."""

    workload: Workload
    plan: Any
    rows: List[Row] = field(default_factory=list)

    def row(self, schedule: str, label: str) -> Row:
        return next(r for r in self.rows if r.schedule == schedule and r.label == label)

    def table(self) -> str:
        lines = [
            f"{'schedule':<8} {'split':<8} {'stage starts':<24} {'predicted ms':>12} {'measured ms':>12} "
            f"{'error':>8} {'IQR':>7} {'SE':>6} {'contention':>10}"
        ]
        for r in self.rows:
            lines.append(
                f"{r.schedule:<8} {r.label:<8} {', '.join(r.split):<24} {r.predicted_ms:>12.1f} "
                f"{r.measured.step_ms:>12.1f} {100 * r.error:>+7.1f}% {100 * r.measured.iqr:>6.1f}% "
                f"{100 * r.measured.median_error:>5.1f}% "
                f"{r.measured.contention:>10.2f}"
            )
            for s, (p, m) in enumerate(zip(r.predicted_busy_ms, r.measured.busy_ms)):
                c = r.measured.busy_cpu_ms[s] if r.measured.busy_cpu_ms else float("nan")
                lines.append(
                    f"{'':<8} {'stage ' + str(s):<8} {'busy per step':<24} {p:>12.1f} {m:>12.1f} "
                    f"{100 * (m / p - 1) if p > 0 else 0.0:>+7.1f}%   CPU {c:.1f} ms "
                    f"({100 * (c / p - 1) if p > 0 else 0.0:+.1f}%), peak RSS "
                    f"{r.measured.peak_memory_bytes[s] / 2**20:.0f} MiB"
                )
        return "\n".join(lines)


def predict(workload: Workload, split: Sequence[str], schedule: str, micro_batches: int) -> Dict[str, Any]:
    """The simulation of a split (a list of stage-starting module paths)."""
    return simulate(workload, placement_of_split(workload, split), schedule=schedule, micro_batches=micro_batches)


def validate(
    model: torch.nn.Module,
    example_inputs: Sequence[Any],
    target: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    workload: Optional[Workload] = None,
    stages: int = 2,
    schedules: Sequence[str] = ("gpipe", "1f1b"),
    micro_batches: int = 8,
    compare_equal: bool = True,
    steps: int = 5,
    warmup: int = 2,
    threads: int = 1,
    nice: Optional[int] = None,
    timeout: float = 1800.0,
    pin: bool = True,
    print_table: bool = True,
    **profile_options: Any,
) -> Validation:
    """Profiles (unless ``workload`` is given; ``execution="pipeline"``,
    ``co_runners=stages - 1``, ``repeats=15`` and ``sessions=3`` unless ``profile_options``
    say otherwise), plans for ``stages`` stages at layer
    granularity, runs and prints predicted against measured (module documentation)."""
    if workload is None:
        from . import profile

        profile_options.setdefault("execution", "pipeline")
        profile_options.setdefault("co_runners", stages - 1)
        profile_options.setdefault("repeats", 15)
        profile_options.setdefault("sessions", 3)
        workload = profile(model, example_inputs, loss_fn=loss_fn, target=target, threads=threads,
                           accelerators=stages, nice=nice, **profile_options)
    chosen = make_plan(workload, accelerators=stages, granularity="layer")
    splits = [("planned", split_of(chosen))]
    if compare_equal:
        equal = equal_layer_split(workload, stages)
        if equal != splits[0][1]:
            splits.append(("equal", equal))
    result = Validation(workload=workload, plan=chosen)
    configs = [(schedule, label, split) for schedule in schedules for label, split in splits]
    measured = run_many(model, [(split, schedule) for schedule, _, split in configs], example_inputs, target,
                        loss_fn, micro_batches=micro_batches, steps=steps, warmup=warmup, threads=threads,
                        nice=nice, timeout=timeout, pin=pin)
    for (schedule, label, split), got in zip(configs, measured):
        sim = predict(workload, split, schedule, micro_batches)
        busy = [d["computeMs"] for d in sim["devices"]]
        result.rows.append(Row(schedule, label, split, sim["iterationMs"], got, busy))
    if print_table:
        print(result.table())
    return result
