"""The IR's dataclasses: JointGraph (what capture produces) and Plan (what the planner returns)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.fx

from ..units import fmt_bytes
from .roles import Decision, Role
from .sizes import UNBACKED_FALLBACK


@dataclasses.dataclass(frozen=True)
class InputInfo:
    """One flat graph input, as analysed at trace time. See Note [Input mutations]."""

    role: Role
    requires_grad: bool
    mutates_data: bool = False
    mutation_hidden_from_autograd: bool = False   # under no_grad, through .detach() or .data
    # (size, stride, storage_offset, view replay or None) after a metadata mutation
    new_metadata: tuple | None = None
    metadata_recorded: bool = False     # autograd recorded the metadata mutation (the input requires grad)
    requires_grad_set: bool = False     # requires_grad_() was called on it: the runtime sets it first
    mutated_via_data: bool = False      # written only through x.data: its version counter stays as is
    mutated_in_backward: bool = False   # Note [Backward mutations]
    version_bumped: bool = False        # written in place only where no value changed (t_() of a view)
    written_with_grad: bool = False     # an in-place op autograd records ran on it or a view of it
    written_through_views: bool = False  # ... on views of it only (Note [Writes through a view of an input])
    storage_bytes: int | None = None    # final storage size after a resize (Note [Storage resize])
    # Note [Inputs given another storage]: ("input", j, view replay from input j) or ("value",) for the
    # new value the graph returns; and how far the input's version moved
    new_storage: tuple | None = None
    version_delta: int = 0
    # Note [When eager saved an input] in capture/inplace.py: in-place ops (on any storage) before eager first
    # saved a tensor sharing its version counter, and before the last one that moved that counter; or None
    saved_at: int | None = None
    written_at: int | None = None
    first_written_at: int | None = None   # ... before the first one that moved it
    grad_read_at: int | None = None       # ... before autograd last read it (an op linking a node to its grad_fn)
    grad_first_read_at: int | None = None   # ... before autograd first read it
    view_reads: tuple[tuple[int, int], ...] = ()   # (clocks) its views autograd read: when made, when read
    stale_view_read: bool = False   # autograd read a view of it made before a write into its storage since
    multi_output_viewed: bool = False   # autograd read a chunk() / split() / unbind() view of it taken with grad
    # saved_at counting only the saves on a path from each output (a backward from that output alone)
    saved_at_by_output: tuple[int | None, ...] = ()
    # ... and from each input's new history (a backward from the tangent of that input's new value alone)
    saved_at_by_new_value: tuple[int | None, ...] = ()
    # eager saved a tensor ``.data =`` left on its version counter (Note [Assigning .data] in capture/inplace.py)
    saved_with_kept_counter: bool = False
    # an op eager's backward runs saved this input itself as an argument (not a view of it, not as its own result):
    # Note [Inputs given new data after the call] in runtime/function.py
    saved_itself: bool = False
    # ... and another tensor on its storage (a view, a detach), or itself as its op's own result
    saved_otherwise: bool = False
    # an op saved its result written through an unfold of it, on the clone the trace writes (capture/inplace.py)
    saved_on_clone: bool = False

    @property
    def mutation_recorded(self) -> bool:
        """Autograd recorded the data mutation: the new value is differentiable."""
        return self.mutates_data and not self.mutation_hidden_from_autograd

    @property
    def final_shape(self) -> tuple | None:
        return self.new_metadata[0] if self.new_metadata is not None else None


@dataclasses.dataclass(frozen=True)
class OutputInfo:
    """One flat user output. ``kind`` is "tensor", "constant", "input" (an input returned as is),
    "input_view" (a view of an input, regenerated on the caller's tensor) or "output_view" (a view
    of the earlier tensor output ``input_index``, regenerated on it). A "tensor" with ``view_meta``
    is a view of an intermediate: the graph returns its base and the runtime regenerates the view,
    so it can be modified in place afterwards, as in eager (``requires_grad`` is the base's)."""

    kind: str
    requires_grad: bool = False
    input_index: int | None = None
    constant: Any = None
    # For views: (size, stride, storage_offset, dtype, requires_grad, multi_output); multi_output:
    # one of several views one op returned (unbind, split), which eager forbids modifying in place.
    view_meta: tuple | None = None
    view_replay: tuple | None = None  # view ops from the input to this output (Note [Input mutations])
    made_before_write: bool = False   # an input view made before a write to the input: made before the epilogue
    rebased: bool = False             # ... that an in-place op autograd recorded ran on: its node read after it
    # an input view made after the function's writes to the input's storage and before set_() (or
    # .data =) moved the input: made after the epilogue's writes, before it moves the input
    made_before_set: bool = False
    # Other inputs written (or version-bumped) after this input view was made: when one of them shares
    # the view's input storage at run time, the view is made before the epilogue too.
    written_after: tuple[int, ...] = ()
    # For a view of an intermediate or of an earlier output: its base's fake at trace time, whose sizes
    # say what a data-dependent size of the view is (Note [Unbacked sizes] in capture/unbacked.py).
    view_base: Any = None
    # Note [Detached aliases written with grad] in runtime/function.py: (input index, size, stride,
    # storage_offset) of the caller's storage this differentiable "tensor" (or the base of this view)
    # aliases without being a view of the input.
    on_input: tuple | None = None
    # Note [Views with data-dependent geometry] in capture/symbolic.py: this "tensor" is no user
    # output but the geometry (sizes, strides, storage offset, as int64) of the view output ``carries``.
    carries: int | None = None
    # The earlier user output (flat index) that is the same tensor object (``return y, y``): the only case
    # where the runtime may return one object twice (Note [Distinct outputs] in runtime/function.py)
    same_object: int | None = None
    # An input view taken through ``x.data``: its version counter is its own (regenerated from ``x.data``)
    via_data: bool = False
    # An "input_view" whose autograd base is this earlier user output (flat index), an alias of the input that
    # is no view (``t0 = x.detach(); return t0, t0[0]``): regenerated from it with the rest of its view ops, so
    # its ``_base`` is that output, as eager's (a ``requires_grad_()`` on it reaches the view: fuzz seed 14910744)
    replay_base: int | None = None
    # A "tensor" that ``.data =`` left on this input's version counter (``t = x.detach(); t.data = y``):
    # returned as a detach of the caller's tensor given the value's data (Note [Assigning .data])
    counter_of: int | None = None
    # The flat outputs whose backward reaches a node eager saved a tensor sharing this "tensor"'s version counter
    # with (None: unknown, always): a write to it after the call makes that backward raise
    saved_by: tuple[int, ...] | None = ()
    # A view the runtime regenerates (of an input, or of an intermediate's base) that an op saved as itself: the
    # flat outputs whose backward reaches that op (None: unknown, any). Eager's backward reads its data, given
    # after the call by ``.data =`` too (Note [Inputs given new data after the call] in runtime/function.py)
    saved_itself_by: tuple[int, ...] | None = ()
    # Note [Inputs given another storage] in capture/metadata.py: this "tensor" is no user output but the
    # new value (on a new storage) of input ``new_value_of``, which the runtime sets the input onto.
    new_value_of: int | None = None
    # Note [Version counters of outputs] in runtime/function.py: ("input", i) or ("output", j), the first input
    # (or earlier output) whose version counter eager's output shares, where the runtime's construction may not
    # (a detached alias written with grad, a tensor set_() onto another's storage); None where none or where the
    # construction shares it (an input, a view regenerated on it)
    shares_counter: tuple[str, int] | None = None


@dataclasses.dataclass(frozen=True)
class Resharding:
    """Graph inputs the caller frees after the forward and gathers again before the backward (FSDP2's
    unsharded parameters), and the bytes of the all-gather output it fills them from (Note [Inputs the
    caller reshards] in capture/fsdp.py)."""

    inputs: frozenset[int] = frozenset()
    gather_bytes: int = 0

    def key(self) -> tuple:
        """A stable value for the cache key."""
        return (sorted(self.inputs), self.gather_bytes)


NO_RESHARDING = Resharding()


@dataclasses.dataclass
class JointGraph:
    """A functional ATen graph of forward (+ backward) with typed roles.

    Placeholders: inputs (roles PRIMAL / PARAMETER / BUFFER / SIZE / CAPTURED), NEW_LEAF
    slots (Note [New leaves]), then TANGENTs.
    Outputs: USER_OUTPUT tensors, MUTATED_INPUT values, then GRADIENTs (None where
    an input needs none).
    """

    gm: torch.fx.GraphModule
    inputs: list[InputInfo]
    outputs: list[OutputInfo]
    out_spec: Any                   # pytree spec of the user's result
    has_backward: bool
    fake_mode: Any = None
    # Note [Errors in the backward]: the error eager's backward raises, and the user outputs
    # (indices into ``outputs``) whose backward raises it; the graph then has no backward.
    backward_error: BaseException | None = None
    error_outputs: tuple[int, ...] = ()
    # Of those, the multi-output views (unbind / split / chunk) that require grad in eager, each with
    # whether its base was written after it was made: in-place ops on them (and, written after, reading
    # their grad_fn) raise eager's error, also when the entry is compiled without a backward
    error_multi_output: tuple[tuple[int, bool], ...] = ()
    error_inputs: tuple[int, ...] = ()   # inputs whose recorded mutation leads to the error
    hooks: Any = None   # the HookTable of hooks registered inside (Note [Hooks inside the function])
    # Note [New leaves] in capture/leaves.py: one NewLeaf per slot, the last inputs (role NEW_LEAF)
    new_leaves: tuple = ()

    @property
    def graph(self) -> torch.fx.Graph:
        return self.gm.graph


@dataclasses.dataclass(frozen=True)
class SavedValue:
    """A forward value the backward needs, and how it gets there."""

    name: str
    shape: tuple
    dtype: torch.dtype | None
    nbytes: int
    decision: Decision
    reason: str


@dataclasses.dataclass
class Plan:
    """A partitioned training step: graphs, what is saved and why, and simulated memory."""

    forward: torch.fx.GraphModule
    backward: torch.fx.GraphModule | None
    saved: list[SavedValue]
    peak_bytes: int | None = None
    timeline: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    # timeline_by_kind[i]: timeline[i]'s bytes split into inputs / gradients / saved / temporaries
    timeline_by_kind: list[dict[str, int]] = dataclasses.field(default_factory=list)
    # What the simulator counted live before the step (inputs the caller holds), the inputs the caller
    # gathers for the forward and again for the backward, and its all-gather buffer (Note [Inputs the
    # caller reshards] in capture/fsdp.py).
    entry_bytes: int | None = None
    resharded_bytes: int = 0
    gather_bytes: int = 0
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    options: Any = None
    # Values whose size depends on data (unbacked symbols): their bytes, and so peak_bytes, timeline
    # and the planners' figures, are estimates by the hint policy of Note [Unbacked sizes].
    estimated_sizes: tuple[str, ...] = ()

    @property
    def size_policy(self) -> str | None:
        """A line saying which figures are estimates, or None when every size is known."""
        if not self.estimated_sizes:
            return None
        return (f"{len(self.estimated_sizes)} values have data-dependent sizes "
                f"({', '.join(self.estimated_sizes[:4])}{', ...' if len(self.estimated_sizes) > 4 else ''}): "
                "bytes and peak are estimates, each such size at its upper bound when known, else "
                f"{UNBACKED_FALLBACK} (Note [Unbacked sizes])")

    @property
    def saved_bytes(self) -> int:
        """Bytes the backward receives from the forward (``nbytes`` summed over ``saved``)."""
        return sum(s.nbytes for s in self.saved)

    def __repr__(self) -> str:
        counts = {}
        for s in self.saved:
            counts[s.decision.value] = counts.get(s.decision.value, 0) + 1
        decisions = ", ".join(f"{n} {d}" for d, n in counts.items()) or "nothing saved"
        partitioner = getattr(self.options, "partitioner", None)
        return (f"<Plan{f' {partitioner}' if partitioner else ''}: {len(self.saved)} saved values ({decisions}), "
                f"saved {fmt_bytes(self.saved_bytes)}, simulated peak {fmt_bytes(self.peak_bytes)}, "
                f"backward: {'yes' if self.backward is not None else 'none'}"
                + (f", {len(self.estimated_sizes)} sizes estimated" if self.estimated_sizes else "") + ">")

    def explain(self, *, show_all: bool = False) -> str:
        """What the backward keeps, as text (JAX's ``print_saved_residuals``): each saved value with
        the module and source line that produced it, grouped by layer with subtotals, largest
        first, the decision's reason; recomputed values, parameters and inputs folded unless
        ``show_all``. See ``jointgraph.report.explain`` for the rows as data."""
        from ..report.explain import explain

        return explain(self).text(show_all=show_all)

    def to_html(self, path: str) -> str:
        """Write the self-contained HTML report of this plan to ``path``; return ``path``."""
        from ..report.html import write_plan_html

        return write_plan_html(self, path)


def lazy_graph_module(root: torch.nn.Module, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    """A GraphModule whose Python code is generated on first use, not on every ``recompile()``.

    Passes rewrite graphs many times; only the final graphs that run need code.
    """
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:  # pragma: no cover - older torch
        return torch.fx.GraphModule(root, graph)
    return _LazyGraphModule(root, graph)


def materialize(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Generate a lazy GraphModule's code now, so ``gm.forward`` is the real function."""
    real = getattr(gm, "real_recompile", None)
    if real is not None:
        real()
    return gm


def placeholders(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "placeholder"]


def output_node(graph: torch.fx.Graph) -> torch.fx.Node:
    return next(n for n in reversed(graph.nodes) if n.op == "output")


def output_values(graph: torch.fx.Graph) -> list:
    return list(output_node(graph).args[0])


def output_roles(graph: torch.fx.Graph) -> list[Role]:
    return list(output_node(graph).meta["roles"])


def tangent_sources(graph: torch.fx.Graph) -> dict[torch.fx.Node, frozenset[int]]:
    """For each node of a backward graph, the tangents (by position among its TANGENT
    placeholders) its value is computed from."""
    tangents = [n for n in placeholders(graph) if n.meta.get("role") is Role.TANGENT]
    sources: dict[torch.fx.Node, frozenset[int]] = {t: frozenset((k,)) for k, t in enumerate(tangents)}
    for node in graph.nodes:   # graph order is topological
        if node.op == "call_function":
            sources[node] = frozenset().union(*(sources.get(a, frozenset()) for a in node.all_input_nodes))
    return sources


def gradient_tangents(graph: torch.fx.Graph) -> tuple[frozenset[int] | None, ...]:
    """Per GRADIENT output of a backward graph, the tangents it is computed from (None for a
    gradient that is not a node: a constant, or no gradient)."""
    sources = tangent_sources(graph)
    return tuple(sources.get(v, frozenset()) if isinstance(v, torch.fx.Node) else None
                 for v, r in zip(output_values(graph), output_roles(graph), strict=True) if r is Role.GRADIENT)


# Namespaces of PyTorch's collective ops (functional collectives and c10d's own).
_COLLECTIVE_NAMESPACES = frozenset({"_c10d_functional", "_c10d_functional_autograd", "c10d_functional", "c10d"})


def is_collective(node: torch.fx.Node) -> bool:
    """A collective (all-gather, reduce-scatter, all-reduce, ...) or the wait on one.

    Note [Collectives]: every rank must issue the same collectives in the same order, and
    each is communication, not computation. Our passes treat them as effects: CSE never
    merges two (the program asked for two), dead-code elimination never drops one, the
    partitioners never choose to recompute one (its result is saved; a collective inside a
    ``torch.utils.checkpoint`` region is recomputed in the backward, as eager recomputes it).
    Passes keep their relative order: none moves a forward node across another, and
    reorder_recompute leaves collectives where they are.
    """
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target.namespace in _COLLECTIVE_NAMESPACES
