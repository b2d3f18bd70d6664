"""Drawings of a Plan's forward and backward graphs (graphviz through pydot), or a note why not."""

from __future__ import annotations

import dataclasses
import shutil

import torch.fx

MAX_DRAWN_NODES = 800  # dot takes minutes, and the picture is unreadable, past this


@dataclasses.dataclass(frozen=True)
class GraphDrawing:
    """An SVG of the graph, or ``None`` with the reason in ``note``; ``code`` is always the printed graph."""

    name: str
    svg: bytes | None
    note: str
    code: str


def draw_graph(gm: torch.fx.GraphModule, name: str) -> GraphDrawing:
    code = gm.print_readable(print_output=False) if hasattr(gm, "print_readable") else gm.code
    nodes = len(gm.graph.nodes)
    try:
        import pydot  # noqa: F401
    except ImportError:
        return GraphDrawing(name, None, "pydot is not installed (pip install 'jointgraph[report]'); "
                            "the printed graph follows instead.", code)
    if shutil.which("dot") is None:
        return GraphDrawing(name, None, "graphviz's `dot` program is not on PATH (e.g. apt-get install graphviz); "
                            "the printed graph follows instead.", code)
    if nodes > MAX_DRAWN_NODES:
        return GraphDrawing(name, None, f"{nodes} nodes is too many to draw (limit {MAX_DRAWN_NODES}); "
                            "the printed graph follows instead.", code)
    from torch.fx.passes.graph_drawer import FxGraphDrawer

    try:
        svg = FxGraphDrawer(gm, name).get_dot_graph().create_svg()
    except Exception as exc:  # graphviz failures should not lose the rest of the report
        return GraphDrawing(name, None, f"graphviz failed ({type(exc).__name__}: {exc}); the printed graph follows.",
                            code)
    return GraphDrawing(name, svg, f"{nodes} nodes", code)
