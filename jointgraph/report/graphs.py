"""Drawings of a Plan's forward and backward graphs, coloured by decision (graphviz through pydot).

Each value the backward needs is coloured by what the plan decided for it: kept (blue),
recomputed in the backward (orange), compressed (purple), offloaded (green); inputs are grey.
A graph of more than ``MAX_NODE_DRAWING`` nodes is summarized per layer (``model.blocks.0``):
one box per layer with its op count and its kept / recomputed values (a backward's saved inputs
join the layer that made them), the graph's inputs in one grey box and its outputs in another,
arrows where values flow between layers, instead of hundreds of boxes.
"""

from __future__ import annotations

import dataclasses
import shutil
from typing import Any

import torch.fx

from ..capture.scopes import node_scope
from .explain import layer_of

MAX_NODE_DRAWING = 150   # past this a drawing of every node is unreadable: one box per layer
DECISION_COLORS = {"kept": "#9ecae1", "recomputed": "#fdae6b", "compressed": "#bcbddc", "offloaded": "#a1d99b"}
INPUT_COLOR = "#e0e0e0"


@dataclasses.dataclass(frozen=True)
class GraphDrawing:
    """An SVG of the graph, or ``None`` with the reason in ``note``; ``code`` is always the printed graph."""

    name: str
    svg: bytes | None
    note: str
    code: str


def draw_graph(gm: torch.fx.GraphModule, name: str, decisions: dict[str, str] | None = None,
               layers: dict[str, str] | None = None) -> GraphDrawing:
    """Draw ``gm``: ``decisions`` maps node names to kept / recomputed / compressed / offloaded,
    ``layers`` node names to their layer (for the per-layer summary of a big graph)."""
    code = gm.print_readable(print_output=False) if hasattr(gm, "print_readable") else gm.code
    nodes = len(gm.graph.nodes)
    try:
        import pydot
    except ImportError:
        return GraphDrawing(name, None, "pydot is not installed (pip install 'jointgraph[report]'); "
                            "the printed graph follows instead.", code)
    if shutil.which("dot") is None:
        return GraphDrawing(name, None, "graphviz's `dot` program is not on PATH (e.g. apt-get install graphviz); "
                            "the printed graph follows instead.", code)
    decisions = decisions or {}
    summary = nodes > MAX_NODE_DRAWING
    dot = _layer_graph(pydot, gm, name, decisions, layers or {}) if summary else _node_graph(pydot, gm, name, decisions)
    try:
        svg = dot.create_svg()
    except Exception as exc:  # graphviz failures should not lose the rest of the report
        return GraphDrawing(name, None, f"graphviz failed ({type(exc).__name__}: {exc}); the printed graph follows.",
                            code)
    what = f"{nodes} nodes, summarized per layer" if summary else f"{nodes} nodes"
    return GraphDrawing(name, svg, what + "; colours: " + ", ".join(DECISION_COLORS), code)


def _node_graph(pydot: Any, gm: torch.fx.GraphModule, name: str, decisions: dict[str, str]) -> Any:
    dot = pydot.Dot(name, graph_type="digraph", rankdir="TB", fontsize="10")
    for node in gm.graph.nodes:
        label = _quote(node.name if node.op != "call_function" else f"{node.name}\\n{_op(node)}")
        color = DECISION_COLORS.get(decisions.get(node.name, ""), INPUT_COLOR if node.op == "placeholder" else "white")
        dot.add_node(pydot.Node(_quote(node.name), label=label, shape="box", style="filled,rounded",
                                fillcolor=color, fontsize="9"))
        for arg in node.all_input_nodes:
            dot.add_edge(pydot.Edge(_quote(arg.name), _quote(node.name)))
    return dot


def _layer_graph(pydot: Any, gm: torch.fx.GraphModule, name: str, decisions: dict[str, str],
                 layers: dict[str, str]) -> Any:
    groups: dict[str, dict[str, int]] = {}
    edges: dict[tuple[str, str], int] = {}
    node_layer: dict[torch.fx.Node, str] = {}
    for node in gm.graph.nodes:
        layer = ("outputs" if node.op == "output" else layers.get(node.name) or layer_of(node_scope(node)[0])
                 or ("inputs" if node.op == "placeholder" else "(top level)"))
        node_layer[node] = layer
        counts = groups.setdefault(layer, {"ops": 0})
        counts["ops"] += node.op == "call_function"
        decision = decisions.get(node.name)
        if decision:
            counts[decision] = counts.get(decision, 0) + 1
        for arg in node.all_input_nodes:
            source = node_layer.get(arg)
            if source is not None and source != layer:
                edges[(source, layer)] = edges.get((source, layer), 0) + 1
    dot = pydot.Dot(name, graph_type="digraph", rankdir="TB", fontsize="10")
    for layer, counts in groups.items():
        parts = [f"{counts['ops']} ops"] + [f"{counts[d]} {d}" for d in DECISION_COLORS if counts.get(d)]
        main = max(DECISION_COLORS, key=lambda d: counts.get(d, 0))
        color = INPUT_COLOR if layer == "inputs" else DECISION_COLORS[main] if counts.get(main) else "white"
        dot.add_node(pydot.Node(_quote(layer), label=_quote(f"{layer}\\n" + ", ".join(parts)), shape="box",
                                style="filled,rounded", fillcolor=color, fontsize="10"))
    for (source, target), count in edges.items():
        dot.add_edge(pydot.Edge(_quote(source), _quote(target), label=str(count), fontsize="8"))
    return dot


def _op(node: torch.fx.Node) -> str:
    packet = getattr(node.target, "overloadpacket", None)
    return getattr(packet, "__name__", getattr(node.target, "__name__", str(node.target)))


def _quote(text: str) -> str:
    """A dot string literal (graphviz reads ``\\n`` inside it as a line break)."""
    return '"' + text.replace('"', "'") + '"'
