"""The pack / unpack ops of the built-in codecs, as ``torch.library`` custom ops.

They are opaque single nodes in FX graphs (``torch.ops.jointgraph.pack_fp8`` reads
better in a printed graph than six ATen ops), with fake implementations so the
graphs carry ``meta["val"]`` and the simulator sees the stored bytes.
"""

from __future__ import annotations

import torch
from torch import Tensor

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max   # 448.0
FP8_TINY = 2.0 ** -9              # its smallest subnormal


def _like(x: Tensor, dtype: torch.dtype, device: torch.device | str | None = None) -> Tensor:
    return torch.empty_strided(x.shape, x.stride(), dtype=dtype, device=device or x.device)


@torch.library.custom_op("jointgraph::pack_bf16", mutates_args=())
def pack_bf16(x: Tensor) -> Tensor:
    """``x`` rounded to bfloat16 (a new tensor)."""
    return x.to(torch.bfloat16, copy=True)


@pack_bf16.register_fake
def _(x: Tensor) -> Tensor:
    return _like(x, torch.bfloat16)


@torch.library.custom_op("jointgraph::unpack_bf16", mutates_args=())
def unpack_bf16(packed: Tensor, dtype: torch.dtype) -> Tensor:
    """The bfloat16 ``packed`` widened back to ``dtype``."""
    return packed.to(dtype, copy=True)


@unpack_bf16.register_fake
def _(packed: Tensor, dtype: torch.dtype) -> Tensor:
    return _like(packed, dtype)


@torch.library.custom_op("jointgraph::pack_fp8", mutates_args=())
def pack_fp8(x: Tensor) -> tuple[Tensor, Tensor]:
    """``x`` as float8_e4m3fn with one fp32 scale per tensor: ``x ~= q.float() * scale``,
    ``scale = amax(|x|) / 448`` (the largest e4m3fn value), so the largest element maps to 448.

    A nonzero value never becomes zero: one too small for e4m3fn is stored as its smallest
    value with the same sign, so a backward testing signs (relu's mask) sees every sign and
    zero exactly (Note [Compared saved values] in hooks/precision.py).
    """
    amax = x.detach().abs().amax().float() if x.numel() else x.new_zeros((), dtype=torch.float32)
    scale = torch.clamp(amax / FP8_MAX, min=torch.finfo(torch.float32).tiny)
    scaled = (x.float() / scale).clamp(-FP8_MAX, FP8_MAX)
    scaled = torch.where(scaled == 0, scaled, scaled.abs().clamp(min=FP8_TINY).copysign(scaled))
    return scaled.to(FP8), scale


@pack_fp8.register_fake
def _(x: Tensor) -> tuple[Tensor, Tensor]:
    return _like(x, FP8), x.new_empty((), dtype=torch.float32)


@torch.library.custom_op("jointgraph::unpack_fp8", mutates_args=())
def unpack_fp8(q: Tensor, scale: Tensor, dtype: torch.dtype) -> Tensor:
    """Dequantize ``q * scale`` to ``dtype``."""
    return (q.float() * scale).to(dtype)


@unpack_fp8.register_fake
def _(q: Tensor, scale: Tensor, dtype: torch.dtype) -> Tensor:
    return _like(q, dtype)


@torch.library.custom_op("jointgraph::offload", mutates_args=())
def offload(x: Tensor) -> Tensor:
    """A host copy of ``x``: pinned and non-blocking from CUDA; a plain copy on the CPU."""
    if x.device.type == "cpu":
        return x.clone(memory_format=torch.preserve_format)
    host = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="cpu", pin_memory=True)
    host.copy_(x, non_blocking=True)   # stream-ordered: the reload copy on the same stream waits for it
    return host


@offload.register_fake
def _(x: Tensor) -> Tensor:
    return _like(x, x.dtype, "cpu")


@torch.library.custom_op("jointgraph::reload", mutates_args=())
def reload(host: Tensor, device: torch.device) -> Tensor:
    """The offloaded ``host`` copied back to ``device`` (non-blocking from pinned memory)."""
    if torch.device(device).type == "cpu":
        return host.clone(memory_format=torch.preserve_format)
    return host.to(device, non_blocking=True)


@reload.register_fake
def _(host: Tensor, device: torch.device) -> Tensor:
    return _like(host, host.dtype, device)
