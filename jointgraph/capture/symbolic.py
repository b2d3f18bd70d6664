"""Non-tensor outputs that depend on symbolic sizes, evaluated per call from the inputs.

With symbolic sizes (``dynamic=True``, or a Dynamo graph with dynamic shapes) a function
returning ``x.shape[0] * 3`` returns a ``SymInt`` at trace time. The caller must get the
integer of *its* call, so such an output is an expression over the graph inputs' sizes,
strides, storage offsets and symbolic-int inputs, evaluated at run time (only for outputs
that need it: nothing is added to the call path of other entries).

Note [Views with data-dependent geometry]
-----------------------------------------
A view output whose geometry holds an unbacked symbol that no input's or base's size gives
(``torch.narrow(x, 1, start_tensor, 2)``: the storage offset is ``start.item()``;
``x.tensor_split(index_tensor)``) cannot be regenerated from sizes. The metadata pass appends,
for each such output ``k``, an OutputInfo ``carries=k`` (``geometry_carriers``): the joint graph
returns one more int64 tensor, the view's sizes, strides and storage offset as computed in the
graph (``geometry_tensor``), a non-differentiable output no user sees. The runtime reads it
(``tolist()``, one host read per call) and regenerates the view with ``as_strided`` on the
caller's tensor (or on its base), so the output aliases the input and is differentiable as
eager's view is: the plan entry is ``("data_view", (kind, index, carrier, dtype,
requires_grad, multi_output))``. Carriers come after every user output, so the flat
positions of the user outputs are unchanged; they have no plan entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

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


def view_entry(kind: str, value: tuple, fake_inputs: list, base: Any = None) -> tuple[str, Any]:
    """The output-plan entry of a view output (``input_view`` / ``output_view`` / ``tensor_view``).

    A view whose geometry holds symbols (``x.expand(x.shape)`` under ``dynamic=True``, a slice of
    ``x[mask]``) is regenerated with ``as_strided`` on the geometry of each call, read from the
    inputs' sizes and from the sizes of its ``base`` (the base's fake at trace time, for a view of an
    intermediate or of an output): ``("symbolic_view", (kind, index, read, dtype, requires_grad,
    multi_output))`` where ``read(inputs, base)`` gives (size, stride, offset).
    """
    index, (size, stride, offset, dtype, requires_grad, multi_output), _replay = value
    try:
        entry = geometry_entry(size, stride, offset, [*fake_inputs, base])
    except UnsupportedError:
        raise UnsupportedError("an output is a view whose size depends on tensor data and cannot be "
                               "regenerated from the sizes of the inputs and of its base (Note [Unbacked sizes])",
                               hint='return a copy (.clone()) of the view, or pass on_unsupported="eager"') from None
    if len(entry) == 3:   # a SymInt holding a constant is made an int (fuzz seed 13700011)
        return kind, (index, (*entry, dtype, requires_grad, multi_output), _replay)
    read_now = entry[0]

    def read(inputs: list, base_now) -> tuple:
        return read_now([*inputs, base_now])

    return "symbolic_view", (kind, index, read, dtype, requires_grad, multi_output)


def geometry_entry(size: tuple, stride: tuple, offset: Any, fake_inputs: list) -> tuple:
    """(size, stride, offset), or where one holds symbols (``dynamic=True``), ``(read,)`` with ``read(inputs)``
    giving them for the graph inputs of one call (``fake_inputs``' counterparts: a view's entry, a detached alias
    moved onto an input in runtime/function.py)."""
    geometry = [*size, *stride, offset]
    if not any(is_symbolic(v) for v in geometry):
        return _concrete(size), _concrete(stride), _concrete((offset,))[0]
    where = _symbol_sources(fake_inputs)
    readers = [symbolic_reader(v, fake_inputs, where) if is_symbolic(v) else None for v in geometry]
    rank, constants = len(size), _concrete(geometry)

    def read(inputs: list) -> tuple:
        values = [r(inputs) if r is not None else c for r, c in zip(readers, constants, strict=True)]
        return tuple(values[:rank]), tuple(values[rank:2 * rank]), values[-1]

    return (read,)


def _concrete(values) -> tuple:
    """``values`` with each SymInt that holds a constant made the int it is."""
    return tuple(int(v) if isinstance(v, torch.SymInt) and not is_symbolic(v) else v for v in values)


def needs_carrier(kind: str, index: int, info, fake_inputs: list) -> bool:
    """Note [Views with data-dependent geometry]: the view ``info`` cannot be regenerated from sizes."""
    if info.view_meta is None:
        return False
    size, stride, offset = info.view_meta[:3]
    if not any(isinstance(v, torch.SymInt) and free_unbacked_symbols(v) for v in (*size, *stride, offset)):
        return False
    try:
        view_entry(kind, (index, info.view_meta, None), fake_inputs, info.view_base)
    except UnsupportedError:
        return True
    return False


def geometry_carriers(outputs: list, fake_inputs: list) -> list:
    """The OutputInfos to append for the views that need a carrier (Note [Views with data-dependent geometry])."""
    from ..ir.graph import OutputInfo

    carriers = []
    for k, info in enumerate(outputs):
        kind = {"input_view": "input_view", "output_view": "output_view", "tensor": "tensor_view"}.get(info.kind)
        if kind is not None and needs_carrier(kind, info.input_index or 0, info, fake_inputs):
            carriers.append(OutputInfo(kind="tensor", carries=k))
    return carriers


def geometry_tensor(view: torch.Tensor) -> torch.Tensor:
    """The int64 tensor of ``view``'s sizes, strides and storage offset, computed in the graph."""
    values = [*view.shape, *view.stride(), view.storage_offset()]
    return torch.stack([torch.scalar_tensor(v, dtype=torch.int64) for v in values])


def data_view_entry(kind: str, index: int, carrier: int, view_meta: tuple) -> tuple[str, Any]:
    """The plan entry of a view regenerated from its carrier (Note [Views with data-dependent geometry])."""
    dtype, requires_grad, multi_output = view_meta[3:6]
    return "data_view", (kind, index, carrier, dtype, requires_grad, multi_output)


def symbolic_reader(value: Any, fake_inputs: list, where: dict | None = None) -> Callable[[list], Any]:
    """``read(inputs)``: the value of the symbolic ``value`` for the graph inputs of one call
    (``where``: ``_symbol_sources(fake_inputs)``, when the caller reads several values)."""
    expr = value.node.expr
    where = _symbol_sources(fake_inputs) if where is None else where
    missing = [s for s in expr.free_symbols if s not in where]
    if missing and free_unbacked_symbols(value):   # data-dependent: Note [Unbacked sizes]
        raise UnsupportedError(f"an output is the data-dependent value {value} (from .item(), or a size that depends "
                               "on tensor values), which the inputs' sizes do not determine",
                               hint='return it as a tensor (not .item()), or pass on_unsupported="eager"')
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
