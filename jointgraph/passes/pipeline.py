"""The ordered list of graph passes. Each entry is (name, pass)."""

from __future__ import annotations

import torch.fx

from ..split import SplitGraphs
from .cse import cse
from .remove_detach import remove_detach

JOINT_PASSES = [
    ("remove_detach", remove_detach),
    ("cse", cse),
]


def run_joint_passes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Run the joint-graph passes in order."""
    for _name, fn in JOINT_PASSES:
        gm = fn(gm)
    return gm


def run_split_passes(graphs: SplitGraphs) -> SplitGraphs:
    """Run the passes over the split forward/backward graphs in order."""
    return graphs
