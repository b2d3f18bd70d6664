"""jointgraph: compile a PyTorch training step ahead of time and plan its activation memory.

Public API (docs/API.md): ``aot_function``, ``aot_module``, ``backend``, ``plan``,
``Plan``, ``SavedValue``, ``Decision``, ``UnsupportedError``, ``hooks``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import hooks
from .api import plan
from .compiled import CompiledFunction
from .dynamo import backend
from .errors import UnsupportedError
from .ir import Decision, Plan, SavedValue
from .module import CompiledModule
from .options import make_options
from .pareto import ParetoPoint, pareto

__version__ = "0.1.0"


def aot_function(fn: Callable, **options: Any) -> Callable:
    """Compile ``fn`` ahead of time: forward and backward traced together, memory planned.

    Example::

        f = jointgraph.aot_function(lambda x, w: (x @ w).relu().sum())
        loss = f(x, w); loss.backward()
    """
    return CompiledFunction(fn, make_options(**options))


def aot_module(module: torch.nn.Module, **options: Any) -> torch.nn.Module:
    """Compile ``module``; its parameters and buffers are graph inputs (optimizers keep working)."""
    return CompiledModule(module, make_options(**options))


__all__ = ["Decision", "ParetoPoint", "Plan", "SavedValue", "UnsupportedError", "aot_function", "aot_module", "backend",
           "hooks", "pareto", "plan", "__version__"]
