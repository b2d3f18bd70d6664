"""Data-dependent sizes: unbacked symbols while tracing.

Note [Unbacked sizes]
---------------------
``nonzero``, ``masked_select``, boolean-mask indexing, ``unique``, ``repeat_interleave``
without ``output_size`` and ``.item()`` produce sizes (or scalars) that depend on tensor
values. Every trace runs under a ``ShapeEnv`` (with static input sizes unless the entry is
symbolic), so such an op returns a fresh *unbacked* symbol ``u0`` instead of failing.
``make_fx`` records on the node that creates it where the symbol is read from
(``node.meta["unbacked_bindings"]``: symbol -> key path into the node's value, PyTorch's
``compute_unbacked_bindings``); the graph recomputes nothing to know ``u0``: it is read from
the value the op returned, at run time, on every call.

- The metadata pass runs the function once before the joint trace; the symbols it allocates
  are discarded (``fresh_symbols_ignored``) and the fake tensors' memos are invalidated
  (``new_epoch``) so the joint trace allocates, and binds, its own.
- A tangent is made before the joint trace, with the metadata pass's symbols in its shape;
  ``tie_tangents`` states that each of its sizes equals its output's (a ``torch._check``),
  so the backward's ops see one size.
- A symbol the backward reads crosses as a saved size (Role.SAVED_SIZE, split.py), never by
  re-running the op; the planners never recompute a node that binds symbols (planner/rules.py).
- Python control flow on a value (``if x.sum() > 0:``, ``int(n.item())``) needs the value at
  trace time and is refused with the user's line (context.translate_errors).
- Hint policy (``size_hint`` in ir/sizes.py): the simulator and the planners need a number for
  ``u0``. They use the symbol's upper bound when the ShapeEnv knows a finite one (``nonzero(x)``
  has at most ``x.numel()`` rows), else ``UNBACKED_FALLBACK`` (8192, as Inductor's
  ``unbacked_symint_fallback``). Such figures are estimates (an upper bound when known), and the
  Plan says so (``Plan.estimated_sizes``, a line in ``explain()``).
"""

from __future__ import annotations

import contextlib

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_unbacked_symbols

from ..ir.sizes import is_estimate


def make_fake_mode(*, dynamic: bool) -> FakeTensorMode:
    """A fake mode whose ShapeEnv allows data-dependent sizes; inputs keep static sizes unless ``dynamic``."""
    return FakeTensorMode(shape_env=ShapeEnv(allow_scalar_outputs=True, allow_dynamic_output_shape_ops=True),
                          static_shapes=not dynamic)


@contextlib.contextmanager
def fresh_symbols_ignored(fake_mode):
    """Unbacked symbols allocated inside are discarded (a trace whose graph is not kept)."""
    shape_env = getattr(fake_mode, "shape_env", None)
    if shape_env is None:
        yield
        return
    with shape_env.ignore_fresh_unbacked_symbols():
        yield


def new_epoch(fake_mode) -> None:
    """Invalidate the symbols memoized on fake tensors (``item()``, ``nonzero()``, ...) by an earlier
    trace, so this one allocates and binds its own."""
    if hasattr(fake_mode, "epoch"):
        fake_mode.epoch += 1


def tie_tangents(outputs: list, tangents: list) -> None:
    """State that each tangent has its output's data-dependent sizes (Note [Unbacked sizes])."""
    for out, tangent in zip(outputs, tangents, strict=True):
        if not (isinstance(out, torch.Tensor) and isinstance(tangent, torch.Tensor)) or out.dim() != tangent.dim():
            continue
        for mine, theirs in zip(tangent.shape, out.shape, strict=True):
            if (isinstance(mine, torch.SymInt) or isinstance(theirs, torch.SymInt)) and _unbacked(mine, theirs):
                torch._check(mine == theirs)


def _unbacked(*sizes) -> bool:
    return any(isinstance(s, torch.SymInt) and free_unbacked_symbols(s) for s in sizes)


def has_unbacked(value) -> bool:
    """``value`` (a fake tensor or a symbolic scalar) has a size or value that depends on data."""
    if isinstance(value, torch.Tensor):
        return bool(free_unbacked_symbols(value))
    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(free_unbacked_symbols(value))


def binds_symbols(node: torch.fx.Node) -> bool:
    """The node creates unbacked symbols (Note [Unbacked sizes]): never re-run it to recompute."""
    return bool(node.meta.get("unbacked_bindings"))


def estimated_sizes(*graphs) -> tuple[str, ...]:
    """Names of the tensor values of ``graphs`` whose sizes have no hint (Plan.estimated_sizes)."""
    return tuple(node.name for gm in graphs if gm is not None for node in gm.graph.nodes
                 if node.op != "output" and isinstance(node.meta.get("val"), torch.Tensor)
                 and is_estimate(node.meta.get("val")))
