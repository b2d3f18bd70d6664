"""The ordered list of graph passes. Each entry is (name, pass)."""

from __future__ import annotations

import torch.fx

from ..options import CompileOptions
from ..split import SplitGraphs
from .checkpoint import honour_checkpoints
from .cse import cse
from .pin_factory_dtypes import pin_factory_dtypes
from .pointwise_scatter import pointwise_scatter
from .remove_clones import remove_clones
from .remove_detach import remove_detach
from .remove_noop_views import remove_noop_views
from .remove_storage_resizes import remove_storage_resizes
from .reorder_recompute import reorder_recompute

JOINT_PASSES = [
    ("pin_factory_dtypes", pin_factory_dtypes),
    ("remove_storage_resizes", remove_storage_resizes),
    ("remove_detach", remove_detach),
    ("remove_noop_views", remove_noop_views),
    ("remove_clones", remove_clones),
    ("cse", cse),
    ("honour_checkpoints", honour_checkpoints),
]


# With Inductor compiling the graphs: rewrites that let its kernels fuse what eager would store.
INDUCTOR_JOINT_PASSES = [
    ("pointwise_scatter", pointwise_scatter),
]


def run_joint_passes(gm: torch.fx.GraphModule, options: CompileOptions) -> torch.fx.GraphModule:
    """Run the joint-graph passes in order (Inductor's after the others when it compiles the graphs)."""
    passes = JOINT_PASSES + (INDUCTOR_JOINT_PASSES if options.decompositions == "inductor" else [])
    for _name, fn in passes:
        gm = fn(gm)
    return gm


def run_split_passes(graphs: SplitGraphs) -> SplitGraphs:
    """Run the passes over the split forward/backward graphs in order."""
    if graphs.backward is not None:
        graphs.backward = reorder_recompute(graphs.backward)
    return graphs
