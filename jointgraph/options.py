"""CompileOptions: every knob of jointgraph, validated once, passed down explicitly."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

PARTITIONERS = ("default", "mincut", "budget")
GRAPH_COMPILERS = ("eager", "inductor")
ON_UNSUPPORTED = ("raise", "eager")


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """Options shared by every entry point (listed in ``jointgraph.aot_function``'s docstring)."""

    partitioner: str = "mincut"
    memory_budget: float | int | None = None
    saved_tensors: Any = None
    fw_compiler: str | Callable = "eager"
    bw_compiler: str | Callable = "eager"
    dynamic: bool | None = None
    cache: bool | str = True
    on_unsupported: str = "raise"
    recompile_limit: int = 8

    def __post_init__(self) -> None:
        _one_of("partitioner", self.partitioner, PARTITIONERS)
        _one_of("on_unsupported", self.on_unsupported, ON_UNSUPPORTED)
        for name in ("fw_compiler", "bw_compiler"):
            value = getattr(self, name)
            if not callable(value):
                _one_of(name, value, GRAPH_COMPILERS + ("a callable (GraphModule, example_inputs) -> callable",))
        if self.dynamic not in (None, True, False):
            raise ValueError(f"option dynamic={self.dynamic!r} is invalid; allowed: None, True, False")
        if not (isinstance(self.cache, bool) or isinstance(self.cache, (str, os.PathLike))):
            raise ValueError(f"option cache={self.cache!r} is invalid; allowed: True, False, or a directory path")
        limit = self.recompile_limit
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"option recompile_limit={self.recompile_limit!r} is invalid; allowed: an int >= 1")
        self._check_budget()

    @property
    def decompositions(self) -> str | None:
        """The decomposition table the joint graph is traced with: ``"inductor"`` when Inductor
        compiles either graph (Note [Inductor as the graph compiler]), else None (ATen as is).
        Derived from the compilers, so every key over the options covers it."""
        return "inductor" if "inductor" in (self.fw_compiler, self.bw_compiler) else None

    def _check_budget(self) -> None:
        budget = self.memory_budget
        if budget is None:
            if self.partitioner == "budget":
                raise ValueError('option memory_budget is required with partitioner="budget"; '
                                 "allowed: a float in (0, 1] or an int number of bytes")
            return
        if self.partitioner != "budget":
            raise ValueError(f'option memory_budget={budget!r} needs partitioner="budget" '
                             f"(got partitioner={self.partitioner!r})")
        if isinstance(budget, bool) or not isinstance(budget, (int, float)):
            raise ValueError(f"option memory_budget={budget!r} is invalid; allowed: a float in (0, 1] or an int > 0")
        if isinstance(budget, float) and not (0.0 < budget <= 1.0):
            raise ValueError(f"option memory_budget={budget!r} is invalid; a float must lie in (0, 1]")
        if isinstance(budget, int) and budget <= 0:
            raise ValueError(f"option memory_budget={budget!r} is invalid; an int budget is bytes and must be > 0")


def _one_of(name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        shown = ", ".join(repr(a) if isinstance(a, str) and not a.startswith("a ") else str(a) for a in allowed)
        raise ValueError(f"option {name}={value!r} is invalid; allowed: {shown}")


def make_options(**kwargs: Any) -> CompileOptions:
    """Build CompileOptions from keyword arguments, naming any unknown option.

    ``memory_budget=`` without ``partitioner=`` means ``partitioner="budget"``.
    """
    known = {f.name for f in dataclasses.fields(CompileOptions)}
    for key in kwargs:
        if key not in known:
            raise ValueError(f"unknown option {key!r}; allowed options: {', '.join(sorted(known))}")
    if kwargs.get("memory_budget") is not None and "partitioner" not in kwargs:
        kwargs["partitioner"] = "budget"   # a budget alone asks for the budget planner, as on the CLI
    options = CompileOptions(**kwargs)
    if options.cache is True:   # the entry points' one read of $JOINTGRAPH_CACHE_DIR (jointgraph/cache)
        from .cache.store import cache_option_from_env

        options = dataclasses.replace(options, cache=cache_option_from_env(True))
    return options
