"""Measured peak memory of one training step with MemTracker (valid for aot_function / aot_module
and eager; not around torch.compile, which runs eager code under a dispatch mode)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch


def memtracker_peak(module: torch.nn.Module, step: Callable[..., torch.Tensor], *inputs) -> int:
    """Peak bytes MemTracker sees during ``step(*inputs).backward()``, gradients starting as None."""
    from torch.distributed._tools.mem_tracker import MemTracker

    module.zero_grad(set_to_none=True)
    tracker = MemTracker()
    tracker.track_external(module, *inputs)
    with warnings.catch_warnings():   # "Module is None. Skipping PRE_BW hook." from ModTracker
        warnings.filterwarnings("ignore", message="Module is None", category=UserWarning)
        with tracker:
            step(*inputs).backward()
    module.zero_grad(set_to_none=True)
    device = next(module.parameters()).device
    return tracker.get_tracker_snapshot("peak")[device]["Total"]
