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
- What the trace assumed about a symbol (``u0 >= 0``, two selections of equal length, a tangent's
  size equal to its output's) becomes an ``_assert_scalar`` node (``insert_runtime_asserts``): a
  call whose data breaks it raises; none computes with a shape the graph was not traced for.
- A symbol the backward reads crosses as a saved size (Role.SAVED_SIZE, split.py), never by
  re-running the op; the planners never recompute a node that binds symbols (planner/rules.py).
- An output that is a view with a data-dependent geometry (``x[mask][1:]``) is regenerated per
  call from its base's real sizes (``view_entry`` in capture/symbolic.py).
- Python control flow on a value (``if x.sum() > 0:``, ``int(n.item())``) needs the value at
  trace time and is refused with the user's line (context.translate_errors).
- Hint policy (``size_hint`` in ir/sizes.py): the simulator and the planners need a number for
  ``u0``. They use the symbol's upper bound when the ShapeEnv knows one below 2**40 (``nonzero(x)``
  has at most ``x.numel()`` rows), else ``UNBACKED_FALLBACK`` (8192, as Inductor's
  ``unbacked_symint_fallback``). Such figures are estimates (an upper bound when known), and the
  Plan says so (``Plan.estimated_sizes``, a line in ``explain()``).
"""

from __future__ import annotations

import contextlib

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_unbacked_symbols

from ..errors import UnsupportedError, source_from_traceback
from ..ir.sizes import binds_symbols, is_estimate


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
            if _unbacked(mine, theirs):
                torch._check(mine == theirs)


def _unbacked(*sizes) -> bool:
    return any(isinstance(s, torch.SymInt) and free_unbacked_symbols(s) for s in sizes)


def estimated_sizes(*graphs) -> tuple[str, ...]:
    """Names of the tensor values of ``graphs`` whose sizes have no hint (Plan.estimated_sizes)."""
    names = (node.name for gm in graphs if gm is not None for node in gm.graph.nodes
             if node.op != "output" and isinstance(node.meta.get("val"), torch.Tensor)
             and is_estimate(node.meta["val"]))
    return tuple(dict.fromkeys(names))   # a saved value is a forward output and a backward input


def insert_runtime_asserts(gm: torch.fx.GraphModule, fake_mode) -> None:
    """Turn what the trace assumed about data-dependent symbols (``u0 >= 0``, a tangent's size equal
    to its output's, ``torch._check`` calls) into ``_assert_scalar`` nodes that run at every call,
    so a call whose data breaks an assumption raises instead of computing with it. Only for
    graphs that bind unbacked symbols: other graphs are left as they are."""
    shape_env = getattr(fake_mode, "shape_env", None)
    if shape_env is None or not any(binds_symbols(n) for n in gm.graph.nodes):
        return
    from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

    with _upper_bounds_unchecked(shape_env):
        insert_deferred_runtime_asserts(gm, shape_env, "jointgraph")


@contextlib.contextmanager
def _upper_bounds_unchecked(shape_env):
    """The upper bounds fake kernels give their symbols are not checked at run time: they hold
    whenever the kernel's bound is right (``nonzero(x)`` has at most ``x.numel()`` rows), and one is
    wrong: PyTorch 2.13's ``masked_select`` bounds its output by ``self.numel()``, ignoring a mask
    that broadcasts ``self`` larger, so the check would reject a call eager runs."""
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges

    ranges = shape_env.var_to_range
    saved = {s: r for s, r in ranges.items() if free_unbacked_symbols(s) and r.is_int and r.upper != int_oo}
    for symbol, bounds in saved.items():
        ranges[symbol] = ValueRanges(bounds.lower, int_oo)
    try:
        yield
    finally:
        ranges.update(saved)


def backward_depends_on_values(exc: BaseException) -> UnsupportedError:
    """The error for a backward that needs a tensor value while traced: typically a data-dependent
    op inside a ``torch.utils.checkpoint`` region, whose recomputation in the backward gives a new
    symbol that the trace cannot equate with the forward's."""
    return UnsupportedError(
        "the backward depends on tensor values: a data-dependent size (nonzero, x[mask], unique, .item()) "
        "recomputed in the backward, as inside a torch.utils.checkpoint region, or a custom backward that "
        f"branches on values ({type(exc).__name__})", source=source_from_traceback(exc),
        hint="move the data-dependent op out of the checkpointed function, or pass on_unsupported=\"eager\"")
