"""Benchmarks behind ``jointgraph bench``: a model zoo and a side-by-side runner."""

from .runner import (
    SAVED_TENSORS,
    BenchOptions,
    BenchResult,
    ContenderResult,
    budget_bytes,
    run_bench,
    saved_tensor_policy,
)
from .zoo import ZOO, ModelSpecError, Workload, ZooShape, build_workload

__all__ = ["SAVED_TENSORS", "ZOO", "BenchOptions", "BenchResult", "ContenderResult", "ModelSpecError", "Workload",
           "ZooShape", "budget_bytes", "build_workload", "run_bench", "saved_tensor_policy"]
