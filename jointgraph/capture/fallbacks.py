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

Note [Tensor indices as unbacked symbols]
-----------------------------------------
``torch.tensor_split(x, indices)`` with ``indices`` a 1-D int64 tensor reads the tensor's data
in its C++ kernel, which fake tensors refuse. The fallback reads the indices with ``tolist()``:
each is an unbacked symbol bound by an ``item()`` node of the graph (Note [Unbacked sizes]), and
``tensor_split`` with those symbols slices as eager does (negative and out-of-range indices are
clamped by ``slice`` at run time). Its outputs are views of the input whose offsets hold the
symbols, regenerated at run time from a geometry tensor the graph returns (Note [Views with
data-dependent geometry] in capture/symbolic.py). A 0-d tensor (a number of sections) decides
how many tensors are returned: that is refused, naming the op.

Note [Value branches traced branch-free]
----------------------------------------
``torch.cov`` and ``torch.corrcoef`` are composite ops whose C++ branches on tensor values:
it sets the normalization factor to zero when it is ``<= 0`` (with a warning) and checks that
weights are not negative and do not sum to zero; ``F.gaussian_nll_loss`` checks in Python that
no variance is negative. Fake tensors cannot answer such a branch (``aten.equal`` on a fake,
``bool()`` of an unbacked symbol), so the same MetaFallbacks mode runs our own composition of
the same ATen ops in the same order, with ``torch.where`` for the branch (same values, and the
gradient of a zeroed factor is zero as after eager's ``zero_()``) and ``torch._assert_async``
for the checks: they raise at run time, on every call (a ``RuntimeError`` where
gaussian_nll_loss raises ``ValueError``). cov's warning is given at trace time only, where it is
known then (no weights: the factor depends on sizes). Complex inputs and malformed arguments are
left to the op (its own error, or ``UnsupportedError`` naming the data-dependent branch).
"""

from __future__ import annotations

import math
import warnings

import torch

from ..errors import UnsupportedError, user_source_line


class MetaFallbacks(torch.overrides.TorchFunctionMode):
    """Note [Meta fallbacks]."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fallback = _FALLBACKS.get(func)
        if fallback is not None:
            result = fallback(*args, **kwargs)
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


def _cov(input, *, correction=1, fweights=None, aweights=None):
    """Note [Value branches traced branch-free]; None where the op itself should run."""
    if not _plain_cov_arguments(input, fweights, aweights):
        return None
    x = input.view(1, -1) if input.dim() < 2 else input
    n_obs = x.shape[1]
    w = None
    if fweights is not None:
        torch._assert_async(fweights.min() >= 0, "cov(): fweights cannot be negative")
        w = fweights
    if aweights is not None:
        torch._assert_async(aweights.min() >= 0, "cov(): aweights cannot be negative")
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.sum(1) / n_obs
        norm_factor = n_obs - correction
        if norm_factor <= 0:   # sizes only: known while tracing
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the "
                          "number of observations.", stacklevel=2)
            norm_factor = 0
    else:
        w_sum = w.sum()
        torch._assert_async(w_sum != 0, "cov(): weights sum to zero, can't be normalized")
        avg = (x * w).sum(1) / w_sum
        if correction == 0:
            norm_factor = w_sum
        elif aweights is None:
            norm_factor = w_sum - correction
        else:
            norm_factor = w_sum - correction * (w * aweights).sum() / w_sum
        norm_factor = torch.where(norm_factor <= 0, torch.zeros_like(norm_factor), norm_factor)
    x = x - avg.unsqueeze(1)
    c = torch.mm(x, (x if w is None else x * w).t())
    return (c / norm_factor).squeeze()


def _plain_cov_arguments(input, fweights, aweights) -> bool:
    """Real floating input of at most 2 dims, weights 1-D over its observations, of the right kinds."""
    if not isinstance(input, torch.Tensor) or not input.is_floating_point() or input.dim() > 2:
        return False
    n_obs = input.shape[-1] if input.dim() == 2 else input.numel()
    for weights, integral in ((fweights, True), (aweights, False)):
        if weights is None:
            continue
        if not isinstance(weights, torch.Tensor) or weights.dim() != 1 or weights.shape[0] != n_obs:
            return False
        if integral == weights.is_floating_point() or weights.is_complex():
            return False
    return True


def _corrcoef(input):
    """Note [Value branches traced branch-free]: eager's corrcoef over our cov."""
    c = _cov(input)
    if c is None:
        return None
    if c.dim() == 0:
        return c / c
    stddev = torch.sqrt(c.diagonal())
    c = c / stddev.view(-1, 1)
    c = c / stddev.view(1, -1)
    return c.clamp(-1, 1)


def _gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Note [Value branches traced branch-free]: the check for a negative variance at run time."""
    if not isinstance(var, torch.Tensor) or reduction not in ("none", "mean", "sum"):
        return None   # a Python float is checked without values; a bad reduction raises in the op
    if var.shape != input.shape:
        if var.shape == input.shape[:-1]:   # one variance per row of the last dimension
            var = var.unsqueeze(-1)
        elif var.dim() != input.dim() or sum(v for i, v in zip(input.shape, var.shape, strict=True) if i != v) != 1:
            return None   # the op raises on the size (after its own value check)
    torch._assert_async(torch.logical_not(torch.any(var < 0)), "gaussian_nll_loss: var has negative entry/entries")
    clamped = var.clone()
    with torch.no_grad():   # clamped for stability, differentiated as var itself (as eager)
        clamped.clamp_(min=eps)
    loss = 0.5 * (torch.log(clamped) + (input - target) ** 2 / clamped)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _tensor_split(input, indices_or_sections=None, dim=0, *, tensor_indices_or_sections=None):
    """Note [Tensor indices as unbacked symbols]: indices given as a 1-D int64 CPU tensor."""
    t = tensor_indices_or_sections if indices_or_sections is None else indices_or_sections
    if not isinstance(input, torch.Tensor) or not isinstance(t, torch.Tensor) or t.device.type != "cpu" \
            or t.dtype != torch.long:
        return None   # Python values need no fallback; a wrong tensor gets the op's own error
    if t.dim() == 0:   # the number of outputs is the tensor's value
        raise UnsupportedError("torch.tensor_split with sections given as a 0-d tensor cannot be compiled ahead of "
                               "time: how many tensors it returns depends on the tensor's value",
                               source=user_source_line(),
                               hint='pass the number of sections as a Python int (sections.item() outside the '
                                    'compiled function), or pass on_unsupported="eager"')
    if t.dim() != 1:
        return None
    return torch.tensor_split(input, t.tolist(), dim)


# One table: a torch function traced through our own composition where it returns a value.
_FALLBACKS = {
    torch._grouped_mm: _grouped_mm_on_cpu,
    torch.nn.functional.gaussian_nll_loss: _gaussian_nll_loss,
    torch.cov: _cov, torch.Tensor.cov: _cov,
    torch.corrcoef: _corrcoef, torch.Tensor.corrcoef: _corrcoef,
    torch.tensor_split: _tensor_split, torch.Tensor.tensor_split: _tensor_split,
}
