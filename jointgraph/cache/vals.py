"""Node ``val`` metadata of a cached graph: written as plain specs, rebuilt as fake tensors.

Note [Cached node values]
-------------------------
Each ``meta["val"]`` of a stored graph is written as a ``ValSpec`` (shape, stride, storage
offset, dtype, device, requires_grad) or, for a size value, its integer or expression. A
symbolic size is written as a sympy expression over the *stable* symbol names of Note
[Cached symbolic sizes] (``x0_size1``), never the ShapeEnv's own names; a hit substitutes the
symbols of its own inputs back.

A deep graph has thousands of values and a fake tensor costs about 70 us to make, most of a
warm start's time. When both graph compilers are ``"eager"`` nothing on the call path reads
them, so each node's ``meta`` is a ``LazyMeta``: ``val`` is made on first read (``get``,
``[]``, ``items()``, iteration, copies), and the fake mode (whose first use imports Dynamo)
only when the first one is made. Other compilers (Inductor) get every value made at load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
import torch

from ..capture.context import static
from ..capture.symbolic import _CAST
from .fingerprint import Unhashable
from .symbolic import StableNames

_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)


class ValSpec(tuple):
    """(shape, stride, storage offset, dtype, device, requires_grad) of a tensor value; sizes are
    ints or sympy expressions over stable names. A plain tuple, so thousands unpickle fast."""

    __slots__ = ()


class SymSpec(tuple):
    """(int, float or bool; sympy expression over stable names) of a symbolic scalar value."""

    __slots__ = ()


def val_spec(val: Any, rename: Callable[[Any], Any] | None) -> Any:
    """The spec of one ``meta["val"]``; ``rename`` writes a symbolic size over stable names (None:
    a static graph, where a symbolic size is refused)."""
    if isinstance(val, torch.Tensor):
        sizes = (tuple(_size(s, rename) for s in val.shape), tuple(_size(s, rename) for s in val.stride()),
                 _size(val.storage_offset(), rename))
        return ValSpec((*sizes, val.dtype, str(val.device), val.requires_grad))
    if isinstance(val, _SYM):
        return SymSpec((_CAST[type(val)], _size(val, rename)))
    if isinstance(val, (tuple, list)):
        return type(val)(val_spec(v, rename) for v in val)
    return val if isinstance(val, (type(None), bool, int, float, str, torch.dtype, torch.device)) else None


def _size(value: Any, rename) -> Any:
    if not isinstance(value, _SYM):
        return value
    if rename is None:
        raise Unhashable("the graph has symbolic sizes but its inputs have none")
    return rename(value.node.expr)


class ValMaker:
    """Makes fake tensors (and symbolic sizes) from specs, in one fake mode made on first use.

    ``names``: the inputs' stable names over this process's ShapeEnv symbols (Note [Cached symbolic
    sizes]), with ``fake_mode`` the mode that holds them; both None for a static graph.
    """

    def __init__(self, fake_mode=None, names: StableNames | None = None):
        self._fake_mode = fake_mode
        self.names = names
        self._devices: dict[str, torch.device] = {}

    @property
    def fake_mode(self):
        if self._fake_mode is None:
            from torch._subclasses.fake_tensor import FakeTensorMode

            self._fake_mode = FakeTensorMode()
        return self._fake_mode

    def make(self, spec: Any) -> Any:
        if isinstance(spec, ValSpec):
            return self._tensor(*spec)
        if isinstance(spec, SymSpec):
            return self._sym(*spec)
        if isinstance(spec, (tuple, list)):
            return type(spec)(self.make(s) for s in spec)
        return spec

    def _tensor(self, shape, stride, offset, dtype, device, requires_grad) -> torch.Tensor:
        from torch._subclasses.fake_tensor import FakeTensor

        dev = self._devices.get(device)
        if dev is None:
            dev = self._devices[device] = torch.device(device)
        if static(shape, stride, offset):   # from a meta tensor directly: no dispatch through the mode
            meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
            if offset:
                meta = meta.as_strided(shape, stride, offset)
            t = FakeTensor(self.fake_mode, meta, dev)
        else:
            shape, stride, offset = ([self._sym(int, s) for s in part] for part in (shape, stride, (offset,)))
            with self.fake_mode:
                t = torch.empty_strided(shape, stride, dtype=dtype, device=dev)
                if offset[0] != 0:
                    t = t.as_strided(shape, stride, offset[0])
        return t.requires_grad_(True) if requires_grad and (t.is_floating_point() or t.is_complex()) else t

    def _sym(self, kind: type, expr: Any) -> Any:
        if not isinstance(expr, sympy.Basic):
            return expr
        expr = self.names.local(expr)
        shape_env = self.fake_mode.shape_env
        if expr.is_number or expr in (sympy.true, sympy.false):
            return kind(expr)
        if kind is bool:
            return shape_env.create_symboolnode(expr)
        hint = expr.xreplace(shape_env.backed_var_to_val)
        hint = kind(hint) if hint.is_number else None
        if kind is float:
            return shape_env.create_symfloatnode(expr, hint=hint)
        return shape_env.create_symintnode(expr, hint=hint)


class LazyMeta(dict):
    """A node's ``meta`` whose ``val`` is made on first read (Note [Cached node values])."""

    __slots__ = ("_maker",)

    def __init__(self, meta: dict, maker: ValMaker):
        super().__init__(meta)
        self._maker = maker

    def _made(self) -> None:
        if self._maker is not None and "val" in self:
            maker, self._maker = self._maker, None
            super().__setitem__("val", maker.make(super().__getitem__("val")))

    def __getitem__(self, key):
        if key == "val":
            self._made()
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key == "val":
            self._made()
        return super().get(key, default)

    def __setitem__(self, key, value):
        if key == "val":
            self._maker = None
        super().__setitem__(key, value)

    def pop(self, key, *default):
        if key == "val":
            self._made()
        return super().pop(key, *default)

    def __iter__(self):   # not dict's own: dict(meta) and {**meta} then read through __getitem__
        self._made()
        return super().__iter__()

    def items(self):
        self._made()
        return super().items()

    def values(self):
        self._made()
        return super().values()

    def copy(self) -> dict:
        self._made()
        return dict(super().items())

    def __reduce_ex__(self, protocol):   # copy.copy / deepcopy / pickle: a plain dict of made values
        self._made()
        return dict, (dict(super().items()),)
