"""Remove value-preserving clones that eager PyTorch would not have made."""

from __future__ import annotations

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..ir.graph import output_node
from ..ir.graph_utils import storage_root, users_through_views
from ..ir.roles import Role
from ..ir.sizes import extent

# Note [Scatters keep their base's storage]
# -----------------------------------------
# ``select_scatter(x, v, ...)`` (and ``slice_``, ``diagonal_``, ``as_strided_scatter``, and ``copy``,
# functionalization's ``copy_``) copies ``x`` with its storage as it is: offset, strides and the whole
# storage's size. Run on ``x.clone()``, its
# result is compact; run on ``x`` itself, an input that is a slice of a larger buffer (or a view),
# it is a copy of that whole buffer with ``x``'s offset: more memory than eager's, and a returned
# ``t = a.clone(); t[0] = 1; return t`` came back with ``a``'s storage offset (fuzz --semantics12
# seed 9001862). Such a clone is kept where the scatter's result is (the storage of) a user output
# and ``x`` is an input or a view of one (whose layout an entry does not guard: a later call may pass
# a slice), or a value the trace shows inside a larger storage; an input's new value only is copied
# into the input, whatever its layout, and a compact intermediate gives a compact copy.
_SCATTERS_KEEPING_STORAGE = frozenset((torch.ops.aten.select_scatter.default, torch.ops.aten.slice_scatter.default,
                                       torch.ops.aten.diagonal_scatter.default,
                                       torch.ops.aten.as_strided_scatter.default,
                                       torch.ops.aten.copy.default))   # --semantics12 seed 9903570


def _scattered_into(node: torch.fx.Node) -> set:
    """The scatters that copy ``node``'s storage as it is (through views of it too), and those that copy their
    results, and so on."""
    found, todo = set(), [node]
    while todo:
        base = todo.pop()
        for user in users_through_views(base):
            if user.target in _SCATTERS_KEEPING_STORAGE and storage_root(user.args[0]) is base and user not in found:
                found.add(user)
                todo.append(user)
    return found


def _layout_of_an_input(node: torch.fx.Node) -> bool:
    """``node``'s storage is an input's, or a scatter's copy of one (and so on): its layout is the input's, which
    an entry does not guard (fuzz seed 12103838: ``a[1:2].mul_(0.5)`` under no_grad, then ``t = a.clone()``
    written and returned, where ``a`` is a slice of a larger buffer)."""
    root = storage_root(node)
    while root.op == "call_function" and root.target in _SCATTERS_KEEPING_STORAGE:
        root = storage_root(root.args[0])
    return root.op == "placeholder"


def _inside_a_larger_storage(t: torch.Tensor) -> bool:
    """``t`` (a traced value) does not start at its storage's beginning, or its storage holds more than its own
    elements (a slice of a buffer); True where that is not known statically."""
    elements = extent(t.shape, t.stride(), 0) if t.numel() else 0
    return not (statically_known_true(t.storage_offset() == 0)
                and statically_known_true(t.untyped_storage().nbytes() == elements * t.element_size()))


def remove_clones(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Replace ``clone(x)`` by ``x`` where only values matter.

    Some decompositions clone where eager returns its input (``dropout`` with ``p=0`` or
    in eval mode decomposes to ``input.clone()``); the copy would be saved for the
    backward next to the original and cost memory eager does not spend.

    Expects: a functional joint graph (nothing is mutated in place). Guarantees: same
    values; a clone is kept when it is a graph output or the storage of one (a view of it is
    returned: outputs must not alias each other or inputs where eager's do not), or when it
    changes strides (a memory-format copy). A clone of an input leaves the names of the
    nodes that read only the copy in the input's ``meta["read_through_clone"]``: eager saved
    the copy for them, not the input, and its version check is the copy's (fuzz seed 3802020).
    """
    graph = gm.graph
    out = output_node(graph)
    outputs = {storage_root(v) for v in out.args[0] if isinstance(v, torch.fx.Node)}   # a returned clone: its own
    user_roots = {storage_root(v) for v, role in zip(out.args[0], out.meta.get("roles", ()), strict=False)
                  if isinstance(v, torch.fx.Node) and role is Role.USER_OUTPUT}
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.aten.clone.default or node in outputs:
            continue
        source = node.args[0]
        before, after = source.meta.get("val"), node.meta.get("val")
        if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
            continue
        if before.stride() != after.stride() or before.dtype != after.dtype:
            continue
        if (_layout_of_an_input(source) or _inside_a_larger_storage(before)) \
                and _scattered_into(node) & user_roots:
            continue   # Note [Scatters keep their base's storage]
        if source.op == "placeholder":
            source.meta["read_through_clone"] = source.meta.get("read_through_clone", frozenset()) \
                | {u.name for u in node.users if source not in u.all_input_nodes}   # not ``a * a.clone()``
        node.replace_all_uses_with(source)
        graph.erase_node(node)
    gm.recompile()
    return gm
