"""Non-tensor outputs that depend on symbolic sizes, evaluated per call from the inputs.

With symbolic sizes (``dynamic=True``, or a Dynamo graph with dynamic shapes) a function
returning ``x.shape[0] * 3`` returns a ``SymInt`` at trace time. The caller must get the
integer of *its* call, so such an output is an expression over the graph inputs' sizes,
strides, storage offsets and symbolic-int inputs, evaluated at run time (only for outputs
that need it: nothing is added to the call path of other entries).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..errors import UnsupportedError

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_CAST = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def is_symbolic(value: Any) -> bool:
    """A SymInt / SymFloat / SymBool whose value is not a trace-time constant."""
    return isinstance(value, _SYMBOLIC) and not value.node.expr.is_number


def output_entry(value: Any, fake_inputs: list) -> tuple[str, Any]:
    """The runtime output-plan entry of a non-tensor output: ("symbolic", read) or ("constant", value)."""
    if is_symbolic(value):
        return "symbolic", symbolic_reader(value, fake_inputs)
    if isinstance(value, _SYMBOLIC):   # a symbolic type holding a constant
        return "constant", _CAST[type(value)](value)
    return "constant", value


def symbolic_reader(value: Any, fake_inputs: list) -> Callable[[list], Any]:
    """``read(inputs)``: the value of the symbolic ``value`` for the graph inputs of one call."""
    expr = value.node.expr
    where = _symbol_sources(fake_inputs)
    missing = [s for s in expr.free_symbols if s not in where]
    if missing:
        raise UnsupportedError(f"an output is the symbolic value {value}, which the inputs' sizes do not determine",
                               hint='return it as a tensor, pass dynamic=False, or on_unsupported="eager"')
    used = [(symbol, *where[symbol]) for symbol in expr.free_symbols]
    cast = _CAST[type(value)]

    def read(inputs: list) -> Any:
        values = {}
        for symbol, k, kind, dim in used:
            x = inputs[k]
            values[symbol] = (x if kind == "scalar" else x.size(dim) if kind == "size"
                              else x.stride(dim) if kind == "stride" else x.storage_offset())
        return cast(expr.xreplace(values))

    return read


def _symbol_sources(fake_inputs: list) -> dict:
    """symbol -> (input index, "size" | "stride" | "offset" | "scalar", dim) for every plain symbol."""
    where: dict = {}

    def note(value, *source):
        if isinstance(value, torch.SymInt) and value.node.expr.is_Symbol:
            where.setdefault(value.node.expr, source)

    for k, fake in enumerate(fake_inputs):
        if isinstance(fake, torch.Tensor):
            for d, size in enumerate(fake.shape):
                note(size, k, "size", d)
            for d, stride in enumerate(fake.stride()):
                note(stride, k, "stride", d)
            note(fake.storage_offset(), k, "offset", None)
        else:
            note(fake, k, "scalar", None)
    return where
