"""Type stubs of the native module (python/src/lib.rs)."""

from os import PathLike
from typing import Any, Dict, List, Optional, Tuple, Union

_Path = Union[str, PathLike]

class InputError(ValueError):
    """Bad input: the command line's exit status 2, with its message."""

class InternalError(RuntimeError):
    """An internal check failed (a bug): the command line's exit status 3."""

class Workload:
    """A workload: operators with per-node times and memory, and the device set."""

    @staticmethod
    def load(path: _Path) -> "Workload":
        """Reads a workload JSON file (MODEL.md format)."""
    @staticmethod
    def from_json(text: str) -> "Workload":
        """Parses workload JSON text."""
    @staticmethod
    def from_onnx(
        path: _Path,
        device: str = "a100-80gb",
        cpu_device: str = "cpu-core",
        training: bool = False,
        dtype: str = "fp32",
        batch: Optional[int] = None,
        seq: Optional[int] = None,
        accelerators: int = 4,
        cpus: int = 1,
        tensor_parallel: Optional[List[int]] = None,
    ) -> "Workload":
        """Imports an ONNX model priced with a device profile's analytic cost model; with
        ``tensor_parallel`` (TP degrees), with layer ids and Megatron-style
        ``tensorParallel`` options (``import --tensor-parallel``)."""
    @staticmethod
    def from_hf_config(
        config: Union[_Path, Dict[str, Any], str],
        seq: int = 512,
        batch: int = 1,
        training: bool = False,
        dtype: Optional[str] = None,
        device: str = "a100-80gb",
        cpu_device: str = "cpu-core",
        accelerators: int = 4,
        cpus: int = 1,
    ) -> "Workload":
        """A Hugging Face model from its config.json (path, dict or JSON text): gpt2, bert,
        llama, mistral, qwen2; what cannot be priced raises InputError naming the field."""
    def to_json(self) -> str:
        """The workload as JSON text."""
    def save(self, path: _Path) -> None:
        """Writes the workload JSON, atomically."""
    def with_devices(
        self, accelerators: Optional[int] = None, cpus: Optional[int] = None, memory: Optional[str] = None
    ) -> "Workload":
        """A copy with another device set (memory: bytes with a unit, e.g. "16GiB")."""
    @property
    def num_nodes(self) -> int: ...
    @property
    def devices(self) -> Tuple[int, int, float]:
        """(accelerators, cpus, memory per accelerator in bytes)."""
    def __len__(self) -> int: ...

class Cluster:
    """A cluster of accelerator types."""

    @staticmethod
    def parse(spec: str) -> "Cluster":
        """`MxNxTYPE` terms joined by `+` ("2x8xh100"), or a cluster TOML file."""
    @property
    def accelerators(self) -> int: ...

class Plan:
    """A placement with its score, bound and status (the CLI's `plan --json`)."""

    @property
    def tps_ms(self) -> float:
        """Time-Per-Sample (max device load), ms."""
    @property
    def value(self) -> float:
        """The objective's value, ms."""
    @property
    def objective(self) -> str: ...
    @property
    def bound_ms(self) -> float:
        """A proven lower bound on the optimum, ms."""
    @property
    def gap(self) -> float:
        """(value - bound) / value."""
    @property
    def status(self) -> str:
        """Readable status, e.g. "proven optimal"."""
    @property
    def outcome(self) -> str:
        """optimal, feasible or heuristic."""
    @property
    def stop_reason(self) -> Optional[str]:
        """time-limit, interrupted, ... or None."""
    @property
    def method(self) -> str: ...
    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C stopped the solver (the plan is the best found so far)."""
    @property
    def devices(self) -> List[Dict[str, Any]]:
        """Per device: device, nodes, load, compute, communication, memoryBytes, bottleneck, modules."""
    def placement_json(self) -> str:
        """The placement JSON, as `plan --out` writes it."""
    def save(self, path: _Path) -> None: ...
    def to_json(self) -> str:
        """The whole plan, as `plan --json` prints it."""
    def export(self, format: str) -> str:
        """torch, torch-json, deepspeed, megatron, vllm or accelerate."""
    def report(self, path: _Path, schedule: str = "1f1b", micro_batches: int = 8) -> None:
        """Writes the HTML report."""

class ParallelPlan:
    """A 3D layout (stages x tensor parallel x data parallel, ZeRO, micro-batch) with its
    figures: the CLI's `plan MODEL --parallel 3d --json` document."""

    @property
    def value(self) -> float:
        """The objective's value, ms."""
    @property
    def objective(self) -> str:
        """iteration or time-per-sample."""
    @property
    def bound_ms(self) -> Optional[float]:
        """A proven lower bound on every layout of the space, ms."""
    @property
    def gap(self) -> Optional[float]:
        """(value - bound) / value, 0 when optimal."""
    @property
    def status(self) -> str:
        """The status line, e.g. "optimal (proven: every other configuration's bound is no better)"."""
    @property
    def outcome(self) -> str:
        """optimal, feasible, ..."""
    @property
    def optimal(self) -> bool: ...
    @property
    def stop_reason(self) -> Optional[str]:
        """time-limit, interrupted, ... or None."""
    @property
    def iteration_ms(self) -> Optional[float]:
        """Time per iteration of the global batch, ms (None for free layouts whose stages differ in d)."""
    @property
    def time_per_sample_ms(self) -> Optional[float]: ...
    @property
    def samples_per_s(self) -> Optional[float]: ...
    @property
    def tflops_per_device(self) -> Optional[float]: ...
    @property
    def mfu(self) -> Optional[float]:
        """Model FLOPs utilisation, 0 to 1."""
    @property
    def devices_used(self) -> Optional[int]: ...
    @property
    def micro_batch(self) -> Optional[int]: ...
    @property
    def global_batch(self) -> Optional[int]: ...
    @property
    def zero(self) -> Optional[int]:
        """The ZeRO stage 0-3."""
    @property
    def schedule(self) -> Optional[str]:
        """gpipe or 1f1b."""
    @property
    def recompute(self) -> Optional[bool]: ...
    @property
    def sequence_parallel(self) -> Optional[bool]: ...
    @property
    def overlap_grad_reduce(self) -> Optional[bool]: ...
    @property
    def uniform(self) -> bool:
        """Whether every stage has the same t and d (False with free=True)."""
    @property
    def target(self) -> Optional[Dict[str, Any]]:
        """What target_tps= found: targetMs, devices (the fewest accelerators whose best
        layout meets it), proven, searched; None without a target."""
    @property
    def stages(self) -> List[Dict[str, Any]]:
        """Per stage: layers, accelerator, tensorParallel, dataParallel, devices, machines,
        computeMs, tensorParallelMs, transferMs, gatherMs, microBatchTimeMs, dpSyncMs,
        microBatches, inFlight, weightBytes, gradientBytes, optimizerBytes,
        activationBytes, memoryBytes."""
    @property
    def notes(self) -> List[str]:
        """What the CLI prints as `note:` lines (a cluster's, an export target's)."""
    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C stopped the search (the layout is the best found so far)."""
    def to_json(self) -> str:
        """The whole plan, as `dnnplace plan MODEL --parallel 3d --json` prints it."""
    def table(self) -> str:
        """The table `dnnplace plan MODEL --parallel 3d` prints."""
    def export(self, format: str) -> str:
        """megatron, deepspeed, torchtitan or vllm (plan with export= to keep the search
        within what the framework runs)."""

def generate_transformer(
    style: str = "gpt2",
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    seq: int = 512,
    batch: int = 1,
    ffn: Optional[int] = None,
    vocab: Optional[int] = None,
    head: Optional[str] = None,
    training: bool = False,
    dtype: str = "fp32",
    device: str = "a100-80gb",
    cpu_device: str = "cpu-core",
    accelerators: int = 4,
    cpus: int = 1,
) -> Workload:
    """A transformer workload priced with a device profile (`dnnplace generate transformer`)."""

def plan(
    workload: Workload,
    cluster: Optional[Cluster] = None,
    method: str = "auto",
    objective: str = "throughput",
    schedule: Optional[str] = None,
    micro_batches: Optional[int] = None,
    recompute: Optional[str] = None,
    time_limit: Optional[float] = None,
    gap: Optional[float] = None,
    threads: Optional[int] = None,
    non_contiguous: bool = False,
    pieces: int = 1,
    granularity: Optional[str] = None,
    accelerators: Optional[int] = None,
    cpus: Optional[int] = None,
    memory: Optional[str] = None,
) -> Plan:
    """Plans a workload as `dnnplace plan` does; Ctrl-C returns the best plan so far."""

_Choice = Union[str, int]

def plan_parallel(
    model: Union[_Path, Workload],
    cluster: Union[str, Cluster],
    global_batch: int,
    micro_batch: Optional[_Choice] = None,
    tensor_parallel: Optional[Union[_Choice, List[int], Tuple[int, ...]]] = None,
    data_parallel: Optional[_Choice] = None,
    pipeline_parallel: Optional[_Choice] = None,
    zero: Optional[_Choice] = None,
    schedule: str = "1f1b",
    free: bool = False,
    sequence_parallel: bool = False,
    overlap_grad_reduce: bool = False,
    objective: str = "throughput",
    time_limit: Optional[float] = None,
    recompute: Optional[str] = None,
    seq: Optional[int] = None,
    dtype: Optional[str] = None,
    export: Optional[str] = None,
    budget: Optional[float] = None,
    target_tps: Optional[float] = None,
) -> ParallelPlan:
    """The whole parallel layout of a transformer (a Hugging Face config.json path) or a
    training workload (a workload JSON path or a Workload, its nodes' tensorParallel
    options the TP degrees) on `cluster`, as `dnnplace plan MODEL --parallel 3d` finds it:
    each argument is the flag of the same name (`--global-batch`, `--tensor-parallel`, ...),
    None its default (`auto`; a workload's micro-batch: 1). Choices are "auto", a number,
    or (tensor_parallel) a list of degrees. The search runs without the GIL within
    `time_limit` (default 60 s); bad input raises InputError with the CLI's message.
    `budget`: a price per hour the accelerators may cost (`--budget`); `target_tps`: the
    fewest accelerators whose best uniform layout takes at most this many ms per sample
    (`--target-tps`; `.target` says how many and whether that is proven; InputError when
    no layout of the cluster meets it)."""

class ParallelSweep:
    """The best uniform layout per device count: `plan MODEL --parallel 3d --sweep`."""

    @property
    def rows(self) -> List[Dict[str, Any]]:
        """One dict per device count: `devices` and the fields of ParallelPlan.to_json()."""
    @property
    def notes(self) -> List[str]: ...
    @property
    def interrupted(self) -> bool: ...
    def to_json(self) -> str:
        """The sweep as `--sweep --json` prints it."""
    def table(self) -> str:
        """The table `--sweep` prints."""
    def svg(self) -> str:
        """Samples per second against devices, as SVG (`--sweep --plot`)."""
    def __len__(self) -> int: ...

def sweep_parallel(
    model: Union[_Path, Workload],
    cluster: Union[str, Cluster],
    global_batch: int,
    micro_batch: Optional[_Choice] = None,
    tensor_parallel: Optional[Union[_Choice, List[int], Tuple[int, ...]]] = None,
    data_parallel: Optional[_Choice] = None,
    pipeline_parallel: Optional[_Choice] = None,
    zero: Optional[_Choice] = None,
    schedule: str = "1f1b",
    free: bool = False,
    sequence_parallel: bool = False,
    overlap_grad_reduce: bool = False,
    objective: str = "throughput",
    time_limit: Optional[float] = None,
    recompute: Optional[str] = None,
    seq: Optional[int] = None,
    dtype: Optional[str] = None,
) -> ParallelSweep:
    """The best layout for each device count (1, 2, 4, ... and the whole cluster; on several
    types whole machines), uniform or with free=True free, as `dnnplace plan MODEL
    --parallel 3d [--free] --sweep` finds them; the arguments are plan_parallel's. Raises InputError when no count has a layout."""

def score(workload: Workload, plan: Union[Plan, str], objective: str = "throughput") -> Dict[str, Any]:
    """Scores a Plan or placement JSON text (`dnnplace score --json`)."""

def simulate(
    workload: Workload, plan: Union[Plan, str], schedule: str = "1f1b", micro_batches: int = 8
) -> Dict[str, Any]:
    """Runs a plan through a pipeline schedule (`dnnplace simulate --format json`)."""

def calibrate(
    measured: Workload,
    device: str = "a100-80gb",
    dtype: str = "fp32",
    style: str = "gpt2",
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    seq: int = 512,
    batch: int = 1,
    ffn: Optional[int] = None,
    vocab: Optional[int] = None,
    head: Optional[str] = None,
    onnx: Optional[_Path] = None,
    name: Optional[str] = None,
    out: Optional[_Path] = None,
) -> Dict[str, Any]:
    """Fits `device`'s compute_efficiency, memory_efficiency and launch_overhead_ms to a
    measured profile (`dnnplace calibrate`): the model is the generated transformer of
    `style`..`head` (or the ONNX file `onnx`) at `seq` and `batch`, priced in `dtype`.
    Returns base and fitted profiles, per-unit measured/base/fitted times and error
    summaries; `out` writes the fitted profile as a device file (TOML)."""

def device_profiles() -> List[str]:
    """The built-in device profiles' names."""
