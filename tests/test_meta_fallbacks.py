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


### Note [Value branches traced branch-free]: cov / corrcoef


def _check_calls(fn, calls: list) -> None:
    """One compiled entry over several calls (weights change values, not sizes), each equal to eager."""
    compiled = jointgraph.aot_function(fn)
    for args in calls:
        expected, expected_grads = _grads(fn, *args)
        got, got_grads = _grads(compiled, *args)
        torch.testing.assert_close(got, expected, equal_nan=True)
        for g, e in zip(got_grads, expected_grads, strict=True):
            torch.testing.assert_close(g, e, equal_nan=True)


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_cov_with_frequency_and_analytic_weights_matches_eager(correction):
    def weighted(x, fw, aw):
        return (torch.cov(x, correction=correction, fweights=fw, aweights=aw) * torch.arange(9.0).view(3, 3)).sum()

    torch.manual_seed(2)
    calls = [(torch.randn(3, 5, requires_grad=True), torch.tensor([1, 2, 0, 3, 1]),
              torch.rand(5, requires_grad=True)),
             (torch.randn(3, 5, requires_grad=True), torch.tensor([0, 1, 0, 0, 0]),   # factor <= 0 for correction > 0
              torch.rand(5, requires_grad=True))]
    _check_calls(weighted, calls)


def test_cov_and_corrcoef_without_weights_match_eager():
    torch.manual_seed(3)
    for fn in (lambda x: torch.cov(x).square().sum(), lambda x: x.cov(correction=0).sum(),
               lambda x: torch.corrcoef(x).sin().sum(), lambda x: x.corrcoef().sum(),
               lambda x: torch.cov(x[0], fweights=torch.tensor([1, 2, 1, 1])).exp()):
        _check_calls(fn, [(torch.randn(3, 4, requires_grad=True),), (torch.randn(3, 4, requires_grad=True),)])


def test_cov_weight_checks_raise_at_run_time_on_every_call():
    compiled = jointgraph.aot_function(lambda x, fw: torch.cov(x, fweights=fw))
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x, torch.tensor([1, 1, 2])), torch.cov(x, fweights=torch.tensor([1, 1, 2])))
    for bad in (torch.tensor([1, -1, 2]), torch.tensor([0, 0, 0])):   # eager raises on both
        with pytest.raises(RuntimeError):
            torch.cov(x, fweights=bad)
        with pytest.raises(RuntimeError, match="cov"):
            compiled(x, bad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gaussian_nll_loss_with_a_variance_tensor_matches_eager(reduction):
    def loss(x, target, var, var_row, var_column):
        terms = [torch.nn.functional.gaussian_nll_loss(x, target, v, full=full, reduction=reduction)
                 for v, full in ((var, False), (var_row, True), (var_column, False))]
        return sum((t * torch.linspace(0.5, 1.5, t.numel()).view(t.shape)).sum() for t in terms)

    torch.manual_seed(4)
    calls = [(torch.randn(4, 3, requires_grad=True), torch.randn(4, 3),
              torch.rand(4, 3, requires_grad=True),      # one variance per element
              torch.rand(4, requires_grad=True),         # one per row: unsqueezed
              torch.rand(4, 1, requires_grad=True) * 1e-8)   # broadcast; below eps: clamped
             for _ in range(2)]
    _check_calls(loss, calls)


def test_gaussian_nll_loss_negative_variance_raises_at_run_time():
    compiled = jointgraph.aot_function(torch.nn.functional.gaussian_nll_loss)
    x, target = torch.randn(3, 2), torch.randn(3, 2)
    torch.testing.assert_close(compiled(x, target, torch.ones(3, 2)),
                               torch.nn.functional.gaussian_nll_loss(x, target, torch.ones(3, 2)))
    bad = torch.tensor([[1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="negative"):   # eager
        torch.nn.functional.gaussian_nll_loss(x, target, bad)
    with pytest.raises(RuntimeError, match="negative"):
        compiled(x, target, bad)
