"""``jointgraph bench``: eager, PyTorch's torch.compile and jointgraph side by side on one training step.

Note [Measuring peak memory]
Every contender's peak is measured the same way, so the column compares:
  * CPU: the CPU allocator events of ``torch.profiler.profile(profile_memory=True)``. Their running
    sum over one step is the memory the step allocates on top of what was live before it; its maximum
    is the step's extra peak. (MemTracker is a TorchDispatchMode, and under a dispatch mode
    torch.compile silently runs eager code, so it cannot measure the torch.compile contender.)
  * CUDA: ``torch.cuda.max_memory_allocated()`` minus ``torch.cuda.memory_allocated()`` before the step.
To that extra peak we add the bytes live when the step starts (parameters, buffers, inputs: distinct
storages), the same things jointgraph's simulator counts, so measured and simulated peaks compare.
Gradients are set to ``None`` before every step, so they are allocated inside it.
"Saved (measured)" is the memory the forward leaves allocated for the backward: the running sum when
the backward starts (activations kept for backward, plus the scalar loss).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..report.columns import PEAK_METHOD
from .curve import BACKWARD_RANGE, FORWARD_RANGE, MemoryCurve, curve_from_events
from .zoo import Workload

RATIO_FIGURES = ("measured_peak_bytes", "saved_bytes_measured", "step_seconds", "compile_seconds")


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    """What to run: the model, its size, jointgraph's options and how often to repeat."""

    model: str = "gpt"
    layers: int = 2
    width: int = 128
    batch: int = 4
    seq: int = 128
    dtype: str = "float32"
    device: str = "cpu"
    partitioner: str = "mincut"
    compiler: str = "eager"                     # jointgraph's graph compiler, both graphs: "eager" | "inductor"
    budget: float | int | None = None
    saved_tensors: str | None = None
    repeat: int = 5
    warmup: int = 1
    seed: int = 0

    def jointgraph_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"partitioner": self.partitioner}
        if self.compiler != "eager":
            options["fw_compiler"] = options["bw_compiler"] = self.compiler
        if self.budget is not None:
            options["memory_budget"] = self.budget
        if self.saved_tensors is not None:
            options["saved_tensors"] = saved_tensor_policy(self.saved_tensors)
        return options


SAVED_TENSORS = ("bf16", "fp8", "offload", "bf16+offload", "fp8+offload")


def saved_tensor_policy(spec: str) -> Any:
    """``"bf16"``, ``"fp8"``, ``"offload"`` or ``"bf16+offload"`` as a ``jointgraph.hooks.SavedTensorPolicy``."""
    from ..hooks import SavedTensorPolicy

    if spec not in SAVED_TENSORS:
        raise ValueError(f"saved tensors {spec!r} is invalid; allowed: {', '.join(SAVED_TENSORS)}")
    parts = spec.split("+")
    compress = next((p for p in parts if p != "offload"), None)
    return SavedTensorPolicy(compress=compress, offload="offload" in parts)


def budget_bytes(work: Workload, budget: float | int | None, compiler: str = "eager") -> int | None:
    """The peak budget in bytes: an int as is; a fraction of the ``"default"`` plan's simulated peak,
    as the budget partitioner resolves it (the ``memory_budget`` option), for graphs traced for
    ``compiler`` (Inductor's decompositions change the graphs)."""
    if budget is None or isinstance(budget, int):
        return budget
    import jointgraph

    compilers = {} if compiler == "eager" else {"fw_compiler": compiler, "bw_compiler": compiler}
    return int(budget * jointgraph.plan(work.step, *work.inputs, partitioner="default", **compilers).peak_bytes)


@dataclasses.dataclass
class ContenderResult:
    """Every figure of one contender; ``None`` where it does not apply or could not be measured."""

    name: str
    kind: str                                   # "eager" | "torch.compile" | "jointgraph"
    measured_peak_bytes: int | None = None
    simulated_peak_bytes: int | None = None
    saved_bytes_measured: int | None = None
    saved_bytes_planned: int | None = None
    step_seconds: float | None = None
    step_seconds_all: list[float] = dataclasses.field(default_factory=list)
    first_call_seconds: float | None = None
    compile_seconds: float | None = None
    max_grad_diff: float | None = None
    loss: float | None = None
    error: str | None = None
    memory_curve: MemoryCurve | None = None     # live bytes over the measured step (CPU; Note [Eager's memory curve])


@dataclasses.dataclass
class Contender:
    """How to turn the eager step module into this contender's callable."""

    name: str
    kind: str
    make: Callable[[torch.nn.Module], Callable]


@dataclasses.dataclass
class BenchResult:
    options: BenchOptions
    workload: str
    description: str
    parameters: int
    results: list[ContenderResult]
    plan: Any = None                            # jointgraph's Plan, for --report
    budget_bytes: int | None = None             # --budget in bytes (a fraction resolved against the default plan)

    def references(self) -> list[ContenderResult]:
        """The PyTorch contenders the ratios are taken against."""
        return [r for r in self.results if r.kind == "torch.compile" and r.error is None]

    def ratios(self) -> dict[str, dict[str, float | None]]:
        """``"<jointgraph> vs <torch.compile>"`` -> ours / theirs per figure (below 1 is better for all)."""
        out: dict[str, dict[str, float | None]] = {}
        for ref in self.references():
            for r in self.results:
                if r.kind == "jointgraph" and r.error is None:
                    out[f"{r.name} vs {ref.name}"] = {f: _ratio(getattr(r, f), getattr(ref, f)) for f in RATIO_FIGURES}
        return out

    def budget_met(self) -> dict[str, dict[str, bool | None]]:
        """With a budget: per jointgraph contender, whether its simulated and its measured peak are within it
        (None: not measured)."""
        if self.budget_bytes is None:
            return {}
        return {r.name: {figure: None if value is None else value <= self.budget_bytes
                         for figure, value in (("simulated", r.simulated_peak_bytes),
                                               ("measured", r.measured_peak_bytes))}
                for r in self.results if r.kind == "jointgraph"}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "jointgraph.bench/1",
            "options": dataclasses.asdict(self.options),
            "workload": {"name": self.workload, "description": self.description, "parameters": self.parameters},
            "budget_bytes": self.budget_bytes,
            "budget_met": self.budget_met(),
            "machine": machine_info(self.options.device),
            "versions": versions(),
            "peak_method": PEAK_METHOD["cuda" if self.options.device.startswith("cuda") else "cpu"],
            "contenders": [dataclasses.asdict(r) for r in self.results],
            "references": [r.name for r in self.references()],
            "ratios": self.ratios(),
        }


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


### Contenders

def contenders(options: BenchOptions) -> list[Contender]:
    """eager, PyTorch's AOTAutograd (default partitioner; min-cut at the budget when one is given),
    with ``compiler="inductor"`` PyTorch's default pipeline (Inductor, its own min-cut partitioner),
    and jointgraph with the chosen options. (The Inductor contender's C++ compile costs tens of
    seconds on a CPU: it runs when jointgraph's graphs are compiled by Inductor too.)"""
    import jointgraph

    result = [Contender("eager", "eager", lambda step: step),
              Contender("torch.compile aot_eager", "torch.compile",
                        lambda step: torch.compile(step, backend="aot_eager"))]
    if options.compiler == "inductor":
        result.append(Contender("torch.compile (inductor)", "torch.compile", lambda step: torch.compile(step)))
    if isinstance(options.budget, float):
        result.append(Contender(f"torch.compile min-cut budget={options.budget}", "torch.compile",
                                lambda step: _torch_budget(step, options.budget)))
    label = options.partitioner if options.budget is None else f"{options.partitioner} {options.budget}"
    if options.compiler != "eager":
        label += f" +{options.compiler}"
    if options.saved_tensors:
        label += f" saved={options.saved_tensors}"
    result.append(Contender(f"jointgraph {label}", "jointgraph",
                            lambda step: jointgraph.aot_module(step, **options.jointgraph_options())))
    return result


def _torch_budget(step: torch.nn.Module, budget: float) -> Callable:
    """PyTorch's min-cut partitioner with ``activation_memory_budget`` (a fraction of saved bytes)."""
    import torch._functorch.config as functorch_config

    compiled = torch.compile(step, backend="aot_eager_decomp_partition")

    def call(*inputs: Any) -> Any:
        with functorch_config.patch(activation_memory_budget=budget):
            return compiled(*inputs)

    return call


### Measuring

def run_bench(work: Workload, options: BenchOptions, progress: Callable[[str, float], None] | None = None
              ) -> BenchResult:
    """Run every contender on ``work``; ``progress(message, fraction_done)`` is told what runs.

    Contenders compile one after another, then their timed steps are interleaved (one step of each per
    round), so that other load on the machine slows every contender alike.
    """
    tell = progress or (lambda message, done: None)
    plan = _plan(work, options)
    if options.budget is not None:
        tell("resolving the budget against the default plan", 0.0)
    budget = None if isinstance(plan, Exception) else budget_bytes(work, options.budget, options.compiler)
    torch._dynamo.reset()
    runs = [_Run(c, ContenderResult(c.name, c.kind)) for c in contenders(options)]
    total = 2 * len(runs) + options.repeat
    for i, run in enumerate(runs):
        tell(f"compiling {run.contender.name}", i / total)
        run.attempt(lambda run=run: _compile(run, work, options))
    for r in range(options.repeat):
        tell(f"timing step {r + 1}/{options.repeat} of every contender", (len(runs) + r) / total)
        for run in runs:
            run.attempt(lambda run=run: run.result.step_seconds_all.append(
                _timed_step(run.fn, work, options.device, options.seed)[0]))
    for i, run in enumerate(runs):
        tell(f"measuring memory of {run.contender.name}", (len(runs) + options.repeat + i) / total)
        run.attempt(lambda run=run: _memory_and_grads(run, work, options))
    tell("done", 1.0)
    eager_grads = runs[0].grads
    for run in runs:
        _finish(run, eager_grads, plan)
    return BenchResult(options, work.name, work.description, work.parameters, [run.result for run in runs],
                       None if isinstance(plan, Exception) else plan, budget)


@dataclasses.dataclass
class _Run:
    """One contender's state during a bench: its callable, result so far, gradients."""

    contender: Contender
    result: ContenderResult
    fn: Callable | None = None
    grads: list | None = None

    def attempt(self, action: Callable[[], Any]) -> None:
        """Run ``action`` unless this contender already failed; a failure is a row, not a crash."""
        if self.result.error is not None:
            return
        try:
            action()
        except Exception as exc:
            message = str(exc).splitlines()[0] if str(exc) else ""
            self.result.error = f"{type(exc).__name__}: {message}"


def _plan(work: Workload, options: BenchOptions) -> Any:
    import jointgraph

    try:
        return jointgraph.plan(work.step, *work.inputs, **options.jointgraph_options())
    except Exception as exc:
        return exc


def _compile(run: _Run, work: Workload, options: BenchOptions) -> None:
    run.fn = run.contender.make(work.step)
    run.result.first_call_seconds, loss = _timed_step(run.fn, work, options.device, options.seed)
    run.result.loss = float(loss)
    for _ in range(options.warmup):
        _timed_step(run.fn, work, options.device, options.seed)


def _memory_and_grads(run: _Run, work: Workload, options: BenchOptions) -> None:
    result = run.result
    result.measured_peak_bytes, result.saved_bytes_measured, result.memory_curve = _measure_memory_curve(
        run.fn, work, options.device, options.seed)
    _timed_step(run.fn, work, options.device, options.seed)
    run.grads = [p.grad.detach().clone() if p.grad is not None else None for p in work.step.parameters()]
    _zero_grads(work.step)


def _finish(run: _Run, eager_grads: list | None, plan: Any) -> None:
    """Derived figures: median step, compile time, gradient difference, the plan's figures."""
    result = run.result
    if result.step_seconds_all and result.error is None:
        result.step_seconds = statistics.median(result.step_seconds_all)
        if run.contender.kind != "eager":
            result.compile_seconds = max(0.0, result.first_call_seconds - result.step_seconds)
    if run.grads is not None and eager_grads is not None:
        result.max_grad_diff = _max_diff(eager_grads, run.grads)
    if run.contender.kind == "jointgraph":
        if isinstance(plan, Exception):
            result.error = result.error or f"plan failed: {type(plan).__name__}: {plan}"
        elif plan is not None:
            result.simulated_peak_bytes = plan.peak_bytes
            result.saved_bytes_planned = plan.saved_bytes


def _zero_grads(step: torch.nn.Module) -> None:
    for p in step.parameters():
        p.grad = None


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed_step(fn: Callable, work: Workload, device: str, seed: int) -> tuple[float, torch.Tensor]:
    _zero_grads(work.step)
    torch.manual_seed(seed)
    _sync(device)
    start = time.perf_counter()
    loss = fn(*work.inputs)
    loss.backward()
    _sync(device)
    return time.perf_counter() - start, loss.detach()


def live_bytes_at_start(work: Workload) -> int:
    """Bytes of the distinct storages of parameters, buffers and tensor inputs."""
    storages: dict[tuple, int] = {}
    tensors = [*work.step.parameters(), *work.step.buffers(),
               *(x for x in work.inputs if isinstance(x, torch.Tensor))]
    for t in tensors:
        storage = t.untyped_storage()
        storages[(t.device, storage.data_ptr())] = storage.nbytes()
    return sum(storages.values())


def _measure_memory(fn: Callable, work: Workload, device: str, seed: int) -> tuple[int, int]:
    """``_measure_memory_curve`` less the curve (tests/test_inductor.py's figures)."""
    peak, saved, _ = _measure_memory_curve(fn, work, device, seed)
    return peak, saved


def _measure_memory_curve(fn: Callable, work: Workload, device: str, seed: int
                          ) -> tuple[int, int, MemoryCurve | None]:
    """(peak bytes of one step, bytes the forward leaves for the backward, the live-memory curve of
    the step (CPU; None on CUDA)); Notes [Measuring peak memory], [Eager's memory curve]."""
    _zero_grads(work.step)
    torch.manual_seed(seed)
    base = live_bytes_at_start(work)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        loss = fn(*work.inputs)
        saved = torch.cuda.memory_allocated() - before
        loss.backward()
        torch.cuda.synchronize()
        return base + torch.cuda.max_memory_allocated() - before, saved, None
    from torch.profiler import ProfilerActivity, profile, record_function

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function(FORWARD_RANGE):
            loss = fn(*work.inputs)
        with record_function(BACKWARD_RANGE):
            loss.backward()
    curve = curve_from_events(prof.profiler.kineto_results.events(), base)
    if curve is None:
        raise RuntimeError("the profiler recorded no forward or no backward range")
    # The curve starts at ``base`` and keeps each phase's highest and last value: its peak is the
    # step's, and its last forward value what the forward left for the backward.
    return curve.peak_bytes, curve.forward[-1][1] - base, curve


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence the profiler's C++ start/stop lines on file descriptor 2."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)


def _max_diff(expected: list, actual: list) -> float | None:
    diffs = [(a.float() - e.float()).abs().max().item() for e, a in zip(expected, actual, strict=True)
             if e is not None and a is not None and e.numel()]
    missing = sum((e is None) != (a is None) for e, a in zip(expected, actual, strict=True))
    if missing:
        return float("inf")
    return max(diffs, default=0.0)


### Machine

def machine_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "machine": platform.machine(),
                            "processor": platform.processor(), "python": platform.python_version(),
                            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    if hasattr(os, "sched_getaffinity"):
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def versions() -> dict[str, str | None]:
    import jointgraph

    out: dict[str, str | None] = {"jointgraph": jointgraph.__version__, "torch": torch.__version__}
    try:
        import transformers

        out["transformers"] = transformers.__version__
    except ImportError:
        out["transformers"] = None
    return out
