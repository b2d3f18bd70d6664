"""What the backward keeps, for a user: the rows of ``Plan.explain``, ``jointgraph explain`` and the report.

JAX's ``print_saved_residuals`` is the model: each saved value with the module and source line
that produced it (Note [Module scopes] in capture/scopes.py), sorted by bytes, grouped by layer
with subtotals, the decision's reason in the user's terms, and parameters and inputs (held
anyway) folded into one line unless asked for.

Example::

    plan = jointgraph.plan(model, x)
    print(explain(plan).text())            # what plan.explain() returns
    explain(plan).groups[0].rows[0]        # an ExplainRow
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch

from ..capture.scopes import node_scope
from ..ir import Decision, Role
from ..planner.costs import device_for, node_seconds
from ..planner.rules import COMPUTE_HEAVY_OPS
from ..units import fmt_bytes

_HELD_ANYWAY = {Role.PARAMETER: "parameter", Role.BUFFER: "parameter"}


@dataclasses.dataclass(frozen=True)
class ExplainRow:
    """One value the backward needs: where it comes from, what it costs, what was decided and why."""

    name: str              # the graph's name for it (addmm_3)
    module: str            # module path that computed it ("model.blocks.0.fc"), "" at top level
    source: str | None     # "gpt.py:64": the user's line that called that module
    op: str                # what computed it, in words ("matrix multiply", "gelu")
    shape: tuple
    dtype: str
    nbytes: int
    decision: str          # kept / recomputed / compressed / offloaded
    reason: str
    kind: str              # "activation", "parameter" or "input"

    @property
    def where(self) -> str:
        """Module path and the user's line that called it ("model.blocks.0.fc (gpt.py:64)")."""
        return self.module + (f" ({self.source})" if self.source else "")

    @property
    def holds_memory(self) -> bool:
        """An activation the backward receives with bytes of its own (views of others hold none)."""
        return self.kind == "activation" and self.decision != "recomputed" and self.nbytes > 0


@dataclasses.dataclass(frozen=True)
class ExplainGroup:
    """The rows of one layer (``model.blocks.0``) or module, largest first, and their bytes."""

    module: str
    rows: list[ExplainRow]

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.rows if r.holds_memory)

    def split(self, *, show_all: bool) -> tuple[list[ExplainRow], list[ExplainRow]]:
        """(rows to show, recomputed rows folded into one line); nothing folded with ``show_all``."""
        if show_all:
            return self.rows, []
        return ([r for r in self.rows if r.decision != "recomputed"],
                [r for r in self.rows if r.decision == "recomputed"])


def folded_line(rows: list[ExplainRow]) -> str:
    """``+ 12 recomputed in the backward (view, t, layer norm, ...)``."""
    ops = list(dict.fromkeys(r.op for r in rows))
    shown = ", ".join(ops[:4]) + (", ..." if len(ops) > 4 else "")
    return f"+ {len(rows)} recomputed in the backward, 0 bytes kept ({shown}; --all lists them)"


@dataclasses.dataclass(frozen=True)
class Explanation:
    """``groups`` of activations by bytes; ``held_anyway`` the parameters and inputs the backward reads."""

    groups: list[ExplainGroup]
    held_anyway: list[ExplainRow]
    peak_bytes: int | None
    size_policy: str | None = None   # Plan.size_policy: which figures are estimates

    @property
    def rows(self) -> list[ExplainRow]:
        return [r for g in self.groups for r in g.rows]

    @property
    def held_bytes(self) -> int:
        return sum(g.nbytes for g in self.groups)

    def footer(self) -> str:
        rows = self.rows
        held = [r for r in rows if r.holds_memory]
        recomputed = sum(1 for r in rows if r.decision == "recomputed")
        shared = sum(1 for r in rows if r.decision != "recomputed" and not r.holds_memory)
        text = (f"{len(held)} values hold {fmt_bytes(self.held_bytes)} for the backward; "
                f"{recomputed} recomputed, {shared} share memory with them (0 bytes)")
        if self.peak_bytes is not None:
            text += f"; simulated peak {fmt_bytes(self.peak_bytes)}"
        return text

    def text(self, *, show_all: bool = False) -> str:
        """A plain-text table: one block per group (largest first) with its subtotal, then the footer.
        Recomputed values, parameters and inputs are folded into one line each unless ``show_all``."""
        lines = []
        for group in self.groups:
            lines.append(f"{group.module or '(top level)'}  {fmt_bytes(group.nbytes)} in "
                         f"{sum(r.holds_memory for r in group.rows)} values")
            shown, folded = group.split(show_all=show_all)
            lines += [_text_row(r) for r in shown]
            if folded:
                lines.append("  " + folded_line(folded))
        lines += held_anyway_lines(self.held_anyway, show_all=show_all)
        lines.append(self.footer())
        if self.size_policy:
            lines.append(f"estimate: {self.size_policy}")
        return "\n".join(lines)


def held_anyway_lines(rows: list[ExplainRow], *, show_all: bool) -> list[str]:
    if not rows:
        return []
    if show_all:
        return ["parameters and inputs (held anyway, not counted)"] + [_text_row(r) for r in rows]
    params = sum(r.kind == "parameter" for r in rows)
    return [f"parameters and inputs: {params} parameters and {len(rows) - params} inputs the backward reads; "
            "held anyway, not counted (--all / show_all=True lists them)"]


def _text_row(r: ExplainRow) -> str:
    where = r.where
    return (f"  {fmt_bytes(r.nbytes):>11}  {str(r.shape):<18} {r.dtype:<9} {r.name:<16} {r.reason}"
            + (f"  [{where}]" if where else ""))


### Main API

def explain(plan: Any) -> Explanation:
    """The saved values of ``plan`` as an ``Explanation`` (see the module docstring)."""
    rows = explain_rows(plan)
    held_anyway = [r for r in rows if r.kind != "activation"]
    groups: dict[str, list[ExplainRow]] = {}
    for row in rows:
        if row.kind == "activation":
            groups.setdefault(layer_of(row.module), []).append(row)
    ordered = [ExplainGroup(m, sorted(rs, key=lambda r: (-r.nbytes, r.decision, r.name))) for m, rs in groups.items()]
    ordered.sort(key=lambda g: (-g.nbytes, g.module))
    return Explanation(ordered, held_anyway, plan.peak_bytes, plan.size_policy)


def explain_rows(plan: Any) -> list[ExplainRow]:
    """One ExplainRow per ``plan.saved`` value, in the plan's order."""
    nodes = {n.name: n for g in (plan.backward, plan.forward) if g is not None for n in g.graph.nodes}
    device = device_for(plan.forward.graph)
    rows = []
    for saved in plan.saved:
        node = nodes.get(saved.name)
        module, source = node_scope(node) if node is not None else ("", None)
        role = node.meta.get("role") if node is not None and node.op == "placeholder" else None
        kind = "activation" if role is None else _HELD_ANYWAY.get(role, "input")
        decision = DECISION_WORDS[saved.decision]
        dtype = str(saved.dtype).replace("torch.", "") if saved.dtype is not None else "int (size)"
        rows.append(ExplainRow(saved.name, module, source, _op_words(node), tuple(saved.shape), dtype, saved.nbytes,
                               decision, _reason(saved, node, nodes, device, kind), kind))
    return rows


def layer_of(module: str) -> str:
    """The layer a module belongs to: its path up to the first index (``model.blocks.0.attn`` ->
    ``model.blocks.0``), else the module itself."""
    match = re.match(r"^(.*?\.\d+)(\.|$)", module)
    return match.group(1) if match else module


### Reasons in the user's terms

DECISION_WORDS = {Decision.SAVE: "kept", Decision.RECOMPUTE: "recomputed", Decision.COMPRESS: "compressed",
                   Decision.OFFLOAD: "offloaded"}


def _op_words(node: torch.fx.Node | None) -> str:
    if node is None or node.op != "call_function":
        return "input" if node is not None else "?"
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    if packet in COMPUTE_HEAVY_OPS:
        return COMPUTE_HEAVY_OPS[packet]
    name = getattr(packet, "__name__", getattr(target, "__name__", str(target)))
    return "element of a tuple" if name == "getitem" else name.strip("_").replace("_", " ")


def _reason(saved, node, nodes: dict, device, kind: str) -> str:
    if kind != "activation":
        return "held anyway: " + ("a parameter" if kind == "parameter" else "an input") + " the backward reads"
    if saved.decision is Decision.RECOMPUTE:
        return _recompute_reason(node, nodes, device)
    if saved.decision is not Decision.SAVE:
        return f"{DECISION_WORDS[saved.decision]}: {saved.reason}"
    if saved.nbytes == 0:
        return "kept: shares memory with another kept value or an input (no bytes of its own)"
    words = _op_words(node)
    cost = node_seconds(node, device) * 1e3 if node is not None else 0.0
    packet = getattr(getattr(node, "target", None), "overloadpacket", None)
    if packet in COMPUTE_HEAVY_OPS:
        return f"kept: {words}, too costly to recompute ({cost:.3f} ms)"
    if node is not None and node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(
            node.target, "tags", ()):
        return f"kept: {words} is random; recomputing it would draw other numbers"
    return f"kept: {words} ({cost:.3f} ms), read by the backward"


def _recompute_reason(node, nodes: dict, device) -> str:
    if node is None:
        return "recomputed in the backward"
    sources = []
    for arg in node.all_input_nodes:
        module = node_scope(nodes.get(arg.name, arg))[0]
        label = module or arg.name
        if label not in sources:
            sources.append(label)
    shown = ", ".join(sources[:3]) + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")
    return (f"recomputed in the backward from values of {shown or 'constants'} "
            f"({_op_words(node)}, {node_seconds(node, device) * 1e3:.3f} ms)")


### Layers along the timeline, and what is live at the peak

def timeline_layers(plan: Any) -> list[str]:
    """The layer (``layer_of`` its module) of each ``plan.timeline`` entry. A backward node has no
    module of its own: it takes the layer of the inputs it reads (saved values keep their forward
    meta), so the backward of ``model.blocks.1`` is labelled ``model.blocks.1``; a node of no module
    continues the layer before it."""
    layers: dict[tuple[str, str], str] = {}
    for phase, gm in (("forward", plan.forward), ("backward", plan.backward)):
        if gm is None:
            continue
        previous = ""
        for node in gm.graph.nodes:
            layer = layer_of(node_scope(node)[0])
            if not layer and phase == "backward":
                inherited = [layers.get((phase, a.name), "") for a in node.all_input_nodes]
                layer = next((x for x in reversed(inherited) if x), "")
            layer = layer or previous   # a node of no module (a view, an input) continues the current layer
            layers[(phase, node.name)] = previous = layer
    return [layers.get((phase, name), "") for phase, name, _ in plan.timeline]


def live_at_peak(plan: Any, limit: int = 5) -> list[ExplainRow]:
    """The largest kept values still live at the simulated peak (those a plan could drop there by
    recomputing, compressing or offloading them), largest first; [] when nothing kept is live there."""
    if not plan.timeline or plan.backward is None:
        return []
    peak = max(range(len(plan.timeline)), key=lambda i: plan.timeline[i][2])
    phase, node_name, _ = plan.timeline[peak]
    order = {("backward", n.name): i for i, n in enumerate(plan.backward.graph.nodes)}
    forward_end = sum(1 for p, _, _ in plan.timeline if p == "forward")
    position = order.get((phase, node_name), -1) if phase == "backward" else -1
    last_use: dict[str, int] = {}
    for i, node in enumerate(plan.backward.graph.nodes):
        for arg in node.all_input_nodes:
            last_use[arg.name] = i
    rows = [r for r in explain(plan).rows if r.holds_memory]
    if phase == "forward":   # a kept value is live from where the forward computes it
        computed = {n.name: i for i, n in enumerate(plan.forward.graph.nodes)}
        here = computed.get(node_name, forward_end)
        live = [r for r in rows if computed.get(r.name, here + 1) <= here]
    else:
        live = [r for r in rows if last_use.get(r.name, -1) >= position]
    return sorted(live, key=lambda r: -r.nbytes)[:limit]
