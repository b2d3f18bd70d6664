"""Ops whose meta kernel rejects what the CPU kernel runs, traced through a decomposition.

Note [Meta fallbacks]
---------------------
Tracing runs every op on fake tensors, through the op's meta kernel. A few meta kernels
check more than the CPU kernel needs: ``torch._grouped_mm`` (``F.grouped_mm``, Mixtral's
experts in recent ``transformers``) accepts only bfloat16 in its meta kernel, while eager
runs float32 on CPU. ``MetaFallbacks`` (a TorchFunctionMode around the traced function)
replaces such a call on CPU by ops that compute the same value with static shapes:

* a 2-D ``mat_a`` sliced into groups by ``offs`` times a 3-D ``mat_b``: each row's group is
  ``searchsorted(offs, row)``; the row is multiplied by its group's matrix (a batched
  matmul over gathered matrices). Rows past ``offs[-1]`` are left at zero (eager leaves
  them uninitialized);
* 3-D times 3-D (the group is the batch dimension): ``bmm``.

Gradients follow from the decomposition. Any other form, and any device but CPU, is
left to the op itself: where its meta kernel refuses, ``translate_errors`` names it.
"""

from __future__ import annotations

import torch

from ..errors import UnsupportedError, user_source_line


class MetaFallbacks(torch.overrides.TorchFunctionMode):
    """Note [Meta fallbacks]."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch._grouped_mm:
            result = _grouped_mm_on_cpu(*args, **kwargs)
            if result is not None:
                return result
        return func(*args, **kwargs)


def _grouped_mm_on_cpu(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    if mat_a.device.type != "cpu" or mat_a.dtype == torch.bfloat16:
        return None   # the op's own meta kernel accepts it
    if bias is not None:
        raise UnsupportedError("torch._grouped_mm with a bias in a dtype other than bfloat16 cannot be traced: its "
                               "meta kernel accepts only bfloat16", source=user_source_line(),
                               hint='add the bias after the grouped matmul, or pass on_unsupported="eager"')
    if mat_a.dim() == 3 and mat_b.dim() == 3 and offs is None:
        out = torch.bmm(mat_a, mat_b)
    elif mat_a.dim() == 2 and mat_b.dim() == 3 and offs is not None:
        rows = torch.arange(mat_a.shape[0], dtype=offs.dtype, device=mat_a.device)
        group = torch.searchsorted(offs, rows, right=True)
        inside = group < mat_b.shape[0]
        matrices = mat_b[group.clamp(max=mat_b.shape[0] - 1)]
        out = torch.bmm(mat_a.unsqueeze(1), matrices).squeeze(1)
        out = out * inside.unsqueeze(1).to(out.dtype)
    else:
        raise UnsupportedError(f"torch._grouped_mm of {mat_a.dim()}-D by {mat_b.dim()}-D operands in "
                               f"{mat_a.dtype} cannot be traced: its meta kernel accepts only bfloat16",
                               source=user_source_line(),
                               hint='use bfloat16 operands, or pass on_unsupported="eager"')
    return out if out_dtype is None else out.to(out_dtype)
