"""Note [Meta fallbacks]: ops whose meta kernel rejects what eager runs on CPU (grouped_mm in float32)."""

from __future__ import annotations

import pytest
import torch

import jointgraph


def _grads(fn, *args):
    args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    out = fn(*args)
    out.backward()
    return out.detach(), [a.grad for a in args if a.requires_grad]


def _check(fn, *args):
    expected, expected_grads = _grads(fn, *args)
    got, got_grads = _grads(jointgraph.aot_function(fn), *args)
    torch.testing.assert_close(got, expected)
    for g, e in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e)


def test_grouped_mm_of_jagged_rows_in_float32_matches_eager():
    def experts(x, w, offs):   # Mixtral-style: rows of x sliced into groups by offs
        return (torch.nn.functional.grouped_mm(x, w, offs=offs).sin() * 2).sum()

    torch.manual_seed(0)
    x, w = torch.randn(8, 4, requires_grad=True), torch.randn(3, 4, 8, requires_grad=True)
    _check(experts, x, w, torch.tensor([2, 5, 8], dtype=torch.int32))


def test_grouped_mm_of_batched_operands_in_float32_matches_eager():
    def batched(a, b):
        return torch._grouped_mm(a, b).square().sum()

    torch.manual_seed(1)
    _check(batched, torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 4, 8, requires_grad=True))


def test_grouped_mm_form_without_a_fallback_is_refused_by_name():
    def weight_gradient(a, b, offs):   # 2-D by 2-D: the inner dimension is jagged
        return torch._grouped_mm(a, b, offs=offs).sum()

    with pytest.raises(jointgraph.UnsupportedError, match="_grouped_mm"):
        jointgraph.aot_function(weight_gradient)(torch.randn(4, 8), torch.randn(8, 4),
                                                 torch.tensor([4, 8], dtype=torch.int32))
