"""The forward of a joint graph cut into regions, each with its ladder of options
(Note [Budget formulation] and Note [Repeated layers] in ``budget.py``).

``Regions(graph, policy)`` finds the separators, groups the regions into classes of equal
structure, ranks each region's options (``Option``: a recompute mode and a storage) by the
bytes they keep against the seconds they add, and turns a per-region choice into the
``SavedChoice`` list the split takes.
"""

from __future__ import annotations

import dataclasses
import operator
import statistics
from collections.abc import Callable

import torch
import torch.fx

from ..hooks.codecs import codec_decision
from ..hooks.precision import Exactness, saved_value_needs
from ..ir import Role
from ..ir.graph import output_node
from ..ir.graph_utils import (
    SavedChoice,
    aliases_input,
    backward_nodes,
    is_multi_output,
    is_symbolic_scalar,
    storage_root,
    tensor_bytes,
)
from .costs import CODEC_RATIO, codec_seconds, device_for, node_seconds
from .rules import COMPUTE_HEAVY_OPS, recompute_rule

# A value crossing a separator must be at least this many times smaller than it.
SMALL_CROSSING = 8


@dataclasses.dataclass(frozen=True)
class Option:
    """How one region is planned: a recompute mode and a storage for what the backward receives."""

    mode: str                  # "save" | "cheap" | "full" | "span"
    storage: str | None = None  # None | "compress" | "offload" | "compress+offload"

    def __str__(self) -> str:
        return self.mode + (f"+{self.storage}" if self.storage else "")


SAVE = Option("save")


class Regions:
    """The forward cut into regions at its separators, each with its ladder of options."""

    def __init__(self, graph: torch.fx.Graph, policy=None, compiler: str = "eager"):
        self.graph = graph
        self.compiler = compiler   # the backward's: it runs the recomputation (Note [Cost model])
        self.policy = policy
        self.needs = saved_value_needs(graph) if policy is not None else {}   # Note [Compared saved values]
        self.device = device_for(graph)
        backward = backward_nodes(graph)
        out = output_node(graph)
        grad_roots = {v for v, r in zip(out.args[0], out.meta["roles"], strict=True)
                      if r in (Role.GRADIENT, Role.BACKWARD_MUTATION) and isinstance(v, torch.fx.Node)}
        self.forward = [n for n in graph.nodes if n.op == "call_function" and n not in backward]
        # Forward values the backward reads directly (a gradient that is a forward value included).
        self.needed = [n for n in graph.nodes if n.op != "output" and n not in backward
                       and (n in grad_roots or any(u in backward and u.op != "output" for u in n.users))]
        self.side = self._side_values()
        self.region_of, self.separators = self._cut()
        self.order = list(range(len(self.separators) + 1))
        self.members: list[list[torch.fx.Node]] = [[] for _ in self.order]
        for node in self.forward:
            self.members[self.region_of[node]].append(node)
        self.scores: dict[tuple[int, Option], tuple[float, float]] = {}   # (seconds, bytes) per ladder option
        self.class_of = self._classes()
        first: dict[int, int] = {}
        self.ladders = []
        for r in self.order:   # Note [Repeated layers]: one ladder per class
            leader = first.setdefault(self.class_of[r], r)
            if leader == r:
                self.ladders.append(self._ladder(r))
            else:
                self.ladders.append(self.ladders[leader])
                self.scores.update({(r, o): self.scores[(leader, o)] for o in self.ladders[leader]})
        self.levels = max(len(ladder) for ladder in self.ladders)

    ### Regions

    def _cut(self) -> tuple[dict, list]:
        """Separators (Note [Budget formulation]) and the region index of every forward call node."""
        pos = {n: i for i, n in enumerate(self.forward)}
        end = len(self.forward)
        last = {n: end if any(u.op == "output" for u in n.users)
                else max([pos[n], *(pos[u] for u in n.users if u in pos)]) for n in self.forward}
        for n in reversed(self.forward):   # a view keeps its base's storage live
            base = storage_root(n)
            if base is not n and base in last:
                last[base] = max(last[base], last[n])
        sizes = {n: self._own_bytes(n) for n in self.forward}
        typical = statistics.median([b for b in sizes.values() if b] or [0])
        side = self.side
        region_of: dict = {}
        separators: list = []
        active: dict = {}
        for i, node in enumerate(self.forward):
            region_of[node] = len(separators)
            for u in [u for u, stop in active.items() if stop <= i]:
                del active[u]
            nbytes = sizes[node]
            crossing = [u for u in active if u is not node and u not in side]
            if (nbytes and nbytes * 2 >= typical and last[node] > i and node not in side
                    and all(sizes[u] * SMALL_CROSSING <= nbytes for u in crossing)):
                separators.append(node)
            if nbytes and last[node] > i:
                active[node] = last[node]
        return region_of, separators

    def _classes(self) -> list[int]:
        """Class index of every region: equal for regions of equal structure followed by regions
        of equal structure (Note [Repeated layers])."""
        local = {n: (self.region_of[n], i) for r in self.order for i, n in enumerate(self.members[r])}
        needed = set(self.needed)
        separators = set(self.separators)
        side = self.side

        def arg(a, region: int):
            if isinstance(a, torch.fx.Node):
                if a in side and local.get(a, (None,))[0] != region:   # the same mask for every layer
                    return ("side", *local.get(a, (a.name,)))
                if a in local:
                    other, i = local[a]
                    if other == region:
                        return ("node", 0, i)
                    # Read from another region: its cost and storage depend on what it is too.
                    return ("node", other - region, i, str(a.target), _shape_key(a.meta.get("val")))
                return ("value", a.op, a.meta.get("role"), _shape_key(a.meta.get("val")))
            if isinstance(a, (list, tuple)):
                return tuple(arg(x, region) for x in a)
            return (type(a).__name__, repr(a))

        keys = []
        for r in self.order:
            keys.append(tuple((str(n.target), _shape_key(n.meta.get("val")), arg(n.args, r),
                               arg(tuple(sorted(n.kwargs.items())), r), n in needed, n in separators,
                               n.meta.get("recompute"))
                              for n in self.members[r]))
        ids: dict[tuple, int] = {}
        return [ids.setdefault((keys[r], keys[r + 1] if r + 1 < len(keys) else None), len(ids)) for r in self.order]

    def _side_values(self) -> set[torch.fx.Node]:
        """Forward values no differentiable input reaches (attention masks, rotary tables, position
        ids): computed once, read by every layer, never differentiated, so they may cross a
        separator whatever their size (Note [Budget formulation])."""
        out = output_node(self.graph)
        gradients = [v for v, r in zip(out.args[0], out.meta["roles"], strict=True) if r is Role.GRADIENT]
        inputs = [n for n in self.graph.nodes if n.op == "placeholder" and n.meta.get("role") is not Role.TANGENT]
        reached = {ph for ph, grad in zip(inputs, gradients, strict=False) if isinstance(grad, torch.fx.Node)}
        for node in self.forward:
            if not reached.isdisjoint(node.all_input_nodes):
                reached.add(node)
        return {n for n in self.forward if n not in reached}

    def _own_bytes(self, v: torch.fx.Node) -> int:
        """Bytes of the storage ``v`` allocates (0 for inputs, views and tuples)."""
        if v.op != "call_function" or aliases_input(v) or is_multi_output(v):
            return 0
        if storage_root(v) is not v:
            return 0
        return tensor_bytes(v.meta.get("val"))

    ### Options

    def _storages(self) -> list[str | None]:
        policy = self.policy
        if policy is None:
            return [None]
        host = self.device.name != "cpu" and policy.offload   # Note [Budget formulation]: no host on a CPU
        found = [None]
        if policy.compress:
            found.append("compress")
        if host:
            found.append("offload")
        if host and policy.compress:
            found.append("compress+offload")
        return found

    def _ladder(self, region: int) -> list[Option]:
        """The region's options by increasing estimated time and decreasing estimated bytes."""
        scored = []
        for mode in ("save", "cheap", "full", "span"):
            for storage in self._storages():
                option = Option(mode, storage)
                # "span": the next region's recomputation reaches into this one (so it is "full" here).
                scope = {region, region + 1} if mode == "span" else {region}
                saved, recomputed = self._walk(
                    lambda r, o=option, scope=scope: o if r == region else Option("full") if r in scope else SAVE,
                    [n for n in self.needed if self.region_of.get(n) in scope])
                nbytes = 0.0
                seconds = sum(node_seconds(v, self.device, self.compiler) for v in recomputed
                              if self.region_of[v] == region)
                for v, codec in saved.items():
                    if self.region_of.get(v) != region:
                        continue
                    own = self._own_bytes(storage_root(v))
                    nbytes += own * _ratio(codec)
                    seconds += sum(codec_seconds(s, own, self.device) for s in (codec or "").split("+") if s)
                scored.append((seconds, nbytes, option))
        ladder, best_bytes = [], float("inf")
        for seconds, nbytes, option in sorted(scored, key=lambda t: (t[0], t[1])):
            if nbytes < best_bytes:
                ladder.append(option)
                self.scores[(region, option)] = (seconds, nbytes)
                best_bytes = nbytes
        return ladder

    def model_seconds(self, option_of: Callable[[int], Option]) -> float:
        """The estimated seconds the regions' options add, from their scores."""
        return sum(self.scores[(r, option_of(r))][0] for r in self.order)

    def staircase(self, level: int, k: int) -> Callable[[int], Option]:
        """Every region at ladder step ``level``, the first ``k`` regions one step further."""
        def option(region: int) -> Option:
            ladder = self.ladders[region]
            return ladder[min(level + (region < k), len(ladder) - 1)]
        return option

    ### Selections

    def _walk(self, option_of: Callable[[int], Option], roots: list) -> tuple[dict, set]:
        """(saved node -> codec, recomputed nodes) for the values ``roots`` the backward reads."""
        options = self._effective(option_of)
        saved: dict = {}
        recomputed: set = set()
        stack = [(v, None) for v in roots]
        while stack:
            v, via = stack.pop()
            if v in saved or v in recomputed:
                continue
            region = self.region_of.get(v)
            if region is None or is_symbolic_scalar(v) or aliases_input(v):
                saved[v] = None
                continue
            option = options[region]
            crossing = via is not None and via != region and not (
                via == region + 1 and option.mode == "span" and options[via].mode in ("full", "span"))
            if is_multi_output(v) or (not crossing and self._recompute(v, option, region)):
                recomputed.add(v)
                stack.extend((u, region) for u in v.all_input_nodes)
            else:
                saved[v] = self._codec(v, option)
        return saved, recomputed

    def _effective(self, option_of: Callable[[int], Option]) -> list[Option]:
        """Per-region options; a "span" region right after another one is "full" instead, so that
        a recomputation covers at most two regions."""
        options: list[Option] = []
        for region in self.order:
            option = option_of(region)
            if option.mode == "span" and options and options[-1].mode == "span":
                option = dataclasses.replace(option, mode="full")
            options.append(option)
        return options

    def _recompute(self, v: torch.fx.Node, option: Option, region: int) -> bool:
        source = v.args[0] if v.target is operator.getitem else v
        boundary = region < len(self.separators) and v is self.separators[region]
        if option.mode == "save" or (boundary and option.mode != "span"):
            return False
        if option.mode == "cheap":
            return recompute_rule(source).recomputable   # which refuses random ops
        return _may_recompute(source)

    def _codec(self, v: torch.fx.Node, option: Option) -> str | None:
        val = v.meta.get("val")
        if option.storage is None or not isinstance(val, torch.Tensor):
            return None
        need = self.needs.get(v)
        allowed = self.policy.codec_for(val, need.exactness if need else Exactness.ANY)
        if allowed is None:
            return None
        wanted = option.storage.split("+")
        stages = [s for s in allowed.split("+") if ("offload" if s == "offload" else "compress") in wanted]
        return "+".join(stages) or None

    def choices(self, option_of: Callable[[int], Option]) -> list[SavedChoice]:
        """SavedChoices for the plan where region ``r`` uses ``option_of(r)``."""
        saved, _ = self._walk(option_of, self.needed)
        result = []
        for v in self.graph.nodes:
            if v not in saved:
                continue
            codec = saved[v]
            decision = codec_decision(codec)
            result.append(SavedChoice(v, decision, self._save_reason(v, option_of), codec))
        return result

    def _save_reason(self, v: torch.fx.Node, option_of: Callable[[int], Option]) -> str:
        if v.op == "placeholder" or aliases_input(v):
            return "graph input, already live"
        if is_symbolic_scalar(v):
            return "sizes are computed in the forward"
        region = self.region_of[v]
        option = option_of(region)
        mib = self._own_bytes(storage_root(v)) / 2**20
        if region < len(self.separators) and v is self.separators[region]:
            return f"kept: boundary of region {region} ({mib:.2f} MiB); the backward recomputes from it"
        if option.mode != "save" and not _may_recompute(v):
            return f"saved: {recompute_rule(v).reason}"
        return f"kept: region {region} is planned '{option}' within the budget ({mib:.2f} MiB)"

    def recompute_reasons(self, choices: list[SavedChoice]) -> dict[str, str]:
        saved = {c.node for c in choices}
        reasons = {}
        for v in self.forward:
            if v in saved:
                continue
            mib = self._own_bytes(v) / 2**20
            reasons[v.name] = (f"recomputed: frees {mib:.2f} MiB of region {self.region_of[v]} at "
                               f"{node_seconds(v, self.device, self.compiler) * 1e3:.3f} ms")
        return reasons


def _shape_key(val) -> tuple | str:
    if isinstance(val, torch.Tensor):
        return (tuple(str(s) for s in val.shape), tuple(str(s) for s in val.stride()), str(val.dtype),
                val.requires_grad)
    if isinstance(val, (list, tuple)):
        return tuple(_shape_key(v) for v in val)
    return type(val).__name__


def _ratio(codec: str | None) -> float:
    ratio = 1.0
    for stage in (codec or "").split("+"):
        if stage:
            ratio *= CODEC_RATIO[stage]
    return ratio


def _may_recompute(v: torch.fx.Node) -> bool:
    """Recomputable under a budget: rules.recompute_rule, plus compute-heavy ops and shrinking
    reductions, whose cost the estimate weighs; never what the rule never allows (``RecomputeRule.never``:
    random ops, sizes, ...); a getitem only if its tuple is."""
    rule = recompute_rule(v)
    if rule.never:
        return False
    if v.target is operator.getitem:
        return _may_recompute(v.args[0])
    target = v.target
    return rule.recomputable or isinstance(target, torch._ops.OpOverload) and (
        target.overloadpacket in COMPUTE_HEAVY_OPS or torch.Tag.reduction in target.tags)
