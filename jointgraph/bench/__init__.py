"""Benchmarks behind ``jointgraph bench``: a model zoo and a side-by-side runner."""

from .runner import BenchOptions, BenchResult, ContenderResult, run_bench
from .zoo import ZOO, ModelSpecError, Workload, ZooShape, build_workload

__all__ = ["ZOO", "BenchOptions", "BenchResult", "ContenderResult", "ModelSpecError", "Workload", "ZooShape",
           "build_workload", "run_bench"]
