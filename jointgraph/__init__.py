"""jointgraph: compile a PyTorch training step ahead of time and plan its activation memory.

Public API: ``aot_function``, ``aot_module``, ``backend`` (compile); ``plan``, ``plans``,
``pareto``, ``Plan``, ``SavedValue``, ``Decision`` (inspect); ``UnsupportedError``; ``hooks``
(saved-tensor policies); ``set_logs`` (logging, also ``JOINTGRAPH_LOGS``). The user guide is
``docs/guide.md``; ``make docs`` builds the API reference.
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
from .logs import configure_from_env, set_logs
from .module import CompiledModule
from .options import make_options
from .pareto import ParetoPoint, pareto

__version__ = "0.1.0"


OPTIONS_DOC = """
    Options (keyword-only, the same for every entry point):

    - ``partitioner``: ``"default"`` (save what eager saves), ``"mincut"`` (recompute cheap
      ops; the default), ``"budget"`` (the fastest plan whose simulated peak fits ``memory_budget``).
    - ``memory_budget``: a float in (0, 1] (a fraction of the ``"default"`` plan's simulated
      peak) or an int (bytes). Given alone it implies ``partitioner="budget"``.
    - ``saved_tensors``: ``None`` or a ``jointgraph.hooks.SavedTensorPolicy`` (compress to
      bf16 / fp8, offload to host).
    - ``fw_compiler``, ``bw_compiler``: ``"eager"`` (default), ``"inductor"`` or a callable
      ``(GraphModule, example_inputs) -> callable``.
    - ``dynamic``: ``None`` (default: static sizes; after ``recompile_limit`` compilations,
      symbolic sizes), ``True`` (symbolic from the first call), ``False`` (always static).
    - ``recompile_limit``: compilations before ``dynamic=None`` switches to symbolic sizes
      (default 8). Every recompile's reason is logged on ``jointgraph.recompiles``.
    - ``cache``: ``True``, ``False`` or a directory.
    - ``on_unsupported``: ``"raise"`` (default) or ``"eager"`` (run the original eagerly, one warning).

    Invalid options raise ``ValueError`` naming the option and the allowed values.
"""


def aot_function(fn: Callable, **options: Any) -> Callable:
    """Compile ``fn`` ahead of time: forward and backward traced together, memory planned.

    Returns a callable with ``fn``'s signature. The first call traces and compiles; a call
    whose guards miss (shapes, dtypes, devices, ``requires_grad``, non-tensor arguments,
    autocast, closure values) compiles again. ``jointgraph.plans(f)`` returns what ran.

    Example::

        f = jointgraph.aot_function(lambda x, w: (x @ w).relu().sum())
        loss = f(x, w); loss.backward()
    """
    configure_from_env()
    return CompiledFunction(fn, make_options(**options))


def aot_module(module: torch.nn.Module, **options: Any) -> torch.nn.Module:
    """Compile ``module``; its parameters and buffers are graph inputs (optimizers keep working).

    ``state_dict()``, ``load_state_dict()``, ``train()`` / ``eval()`` and attribute access
    go to ``module``; buffer mutations (BatchNorm statistics) land on its buffers.

    Example::

        model = jointgraph.aot_module(model, memory_budget=0.6)
        model(x).sum().backward()
    """
    configure_from_env()
    return CompiledModule(module, make_options(**options))


def plans(compiled: Any) -> list[Plan]:
    """The ``Plan`` of every compiled entry of ``compiled``, oldest first: what actually ran.

    ``compiled`` is what ``aot_function`` or ``aot_module`` returned, or a model or function
    compiled with ``torch.compile(..., backend="jointgraph")`` (one plan per graph Dynamo
    handed over, one per subclass structure for a graph over tensor subclasses). Entries run
    eagerly (``on_unsupported="eager"``) have no plan.

    Example::

        step = jointgraph.aot_function(step)
        step(x, y).backward()
        print(jointgraph.plans(step)[-1].explain())
    """
    from .dynamo import dynamo_plans

    if isinstance(compiled, (CompiledFunction, CompiledModule)):
        return compiled.plans
    found = dynamo_plans(compiled)
    if found is None:
        raise TypeError(f"jointgraph.plans expects what aot_function / aot_module returned or a "
                        f"torch.compile'd model or function; got {type(compiled).__name__}")
    return found


for _entry in (aot_function, aot_module, backend):
    _entry.__doc__ = (_entry.__doc__ or "").rstrip() + "\n" + OPTIONS_DOC


__all__ = ["Decision", "ParetoPoint", "Plan", "SavedValue", "UnsupportedError", "__version__", "aot_function",
           "aot_module", "backend", "hooks", "pareto", "plan", "plans", "set_logs"]
