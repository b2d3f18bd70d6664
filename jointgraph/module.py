"""aot_module: a module whose parameters and buffers are graph inputs."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from .compiled import CompiledFunction
from .ir import Role
from .options import CompileOptions


def _module_fn(module: torch.nn.Module):
    def call(params: dict, buffers: dict, training: bool, args: tuple, kwargs: dict):
        return torch.func.functional_call(module, (params, buffers), args, kwargs)

    call.__name__ = call.__qualname__ = f"{type(module).__name__}.forward"   # in logs and warnings
    return call


def module_call_leaves(module: torch.nn.Module, args: tuple, kwargs: dict):
    """Flatten (params, buffers, args, kwargs) and give each leaf its role."""
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    leaves, spec = pytree.tree_flatten((((params, buffers, module.training, args, kwargs)), {}))
    roles = [Role.PARAMETER] * len(params) + [Role.BUFFER] * len(buffers)
    roles += [Role.PRIMAL] * (len(leaves) - len(roles))
    return _module_fn(module), leaves, spec, roles


class CompiledModule(torch.nn.Module):
    """Runs ``module`` through jointgraph. ``state_dict`` / ``load_state_dict`` and attribute
    access go to the original module, so checkpoints keep their keys."""

    def __init__(self, module: torch.nn.Module, options: CompileOptions):
        super().__init__()
        self._orig_mod = module
        self._compiled = CompiledFunction(_module_fn(module), options)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        _, leaves, spec, roles = module_call_leaves(self._orig_mod, args, kwargs)
        return self._compiled.call_flat(leaves, spec, roles)

    @property
    def plans(self) -> list:
        """The ``Plan`` of every compiled entry, oldest first (``jointgraph.plans(self)``)."""
        return self._compiled.plans

    def __repr__(self) -> str:
        n = len(self._compiled.entries)
        return (f"<jointgraph compiled {type(self._orig_mod).__name__}: {n} entr{'y' if n == 1 else 'ies'}, "
                f"partitioner={self._compiled.options.partitioner!r}>")

    def state_dict(self, *args: Any, **kwargs: Any):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args: Any, **kwargs: Any):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)
