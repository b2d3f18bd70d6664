"""OpInfo samples: jointgraph.aot_function against eager PyTorch (the oracle).

A CI-sized slice of ``benchmarks/opinfo.py``: a fixed list of ops across
categories, two samples each, comparing outputs, gradients and input mutations
with eager; and a wider, deterministic stride over all of ``op_db`` checking that
nothing returns a wrong value (raising is allowed there, being wrong is not).
The full sweep, side by side with PyTorch's aot_function:
``python benchmarks/opinfo.py``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

import jointgraph

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.opinfo import (  # noqa: E402
    PairRecord,
    Result,
    autograd_ops,
    bar_met,
    first_samples,
    load_records,
    main,
    op_label,
    run_pair,
    summarize,
)

SAMPLES_PER_OP = 2

CI_OPS = [
    # pointwise
    "sin", "exp", "log", "sigmoid", "add", "mul", "div.no_rounding_mode", "pow", "where", "clamp", "addcmul", "atan2",
    # reductions, scans, sorting
    "sum", "mean", "amax", "prod", "var", "logsumexp", "cumsum", "max.reduction_with_dim", "sort", "topk",
    # views (outputs alias inputs), including dtype-changing views
    "reshape", "transpose", "permute", "expand", "squeeze", "unsqueeze", "unbind", "chunk", "diagonal", "as_strided",
    "view_as_complex", "real",
    # linalg (some have effectful error checks: _linalg_check_errors)
    "mm", "matmul", "addmm", "linalg.solve", "linalg.inv", "linalg.cholesky", "linalg.qr", "linalg.vector_norm",
    # nn.functional
    "nn.functional.conv2d", "nn.functional.linear", "nn.functional.layer_norm", "nn.functional.batch_norm",
    "softmax", "nn.functional.cross_entropy", "nn.functional.gelu", "nn.functional.dropout",
    "nn.functional.embedding", "nn.functional.max_pool2d", "nn.functional.interpolate.bilinear",
    "nn.functional.scaled_dot_product_attention",
    # indexing, concatenation, random
    "cat", "index_select", "gather", "scatter", "masked_fill", "normal",
    # data-dependent sizes, traced with unbacked symbols (Note [Unbacked sizes])
    "masked_select", "index_put", "repeat_interleave", "masked_scatter",
    # the full sweep's findings: an output view after in-place view ops (stft), an input whose derivative
    # is undefined (norm p=0), value branches traced branch-free (Note [Value branches traced branch-free])
    "stft", "norm", "linalg.norm.subgradients_at_zero", "cov", "corrcoef", "nn.functional.gaussian_nll_loss",
    # data-dependent, some samples refused (see KNOWN_DATA_DEPENDENT)
    "tensor_split", "narrow",
]

# Ops some of whose samples need tensor values at trace time: UnsupportedError is the right answer.
KNOWN_DATA_DEPENDENT = {
    "tensor_split": "split indices passed as a tensor are read while tracing",
    "narrow": "start passed as a 0-d tensor: the returned view of the input has a data-dependent offset",
}

WIDE_STRIDE = 10   # every 10th autograd OpInfo, one sample each, for the no-wrong-value test
WIDE_SHARDS = 4    # split across test workers


@functools.cache
def _ops_by_label() -> dict:
    return {op_label(op): op for op in autograd_ops()}


def _results(label: str, samples: int) -> list:
    op = _ops_by_label()[label]
    return [run_pair(op, sample, i, compilers=("jointgraph",)).results["jointgraph"]
            for i, sample in enumerate(first_samples(op, samples))]


@pytest.mark.parametrize("label", CI_OPS)
def test_op_matches_eager(label):
    allowed = {"pass", "skip"} | ({"unsupported"} if label in KNOWN_DATA_DEPENDENT else set())
    results = _results(label, SAMPLES_PER_OP)
    assert results, f"{label} has no samples"
    for i, result in enumerate(results):
        assert result.status in allowed, f"{label}[{i}] {result.status}: {result.cause}"
    assert any(r.status == "pass" for r in results) or label in KNOWN_DATA_DEPENDENT


@pytest.mark.parametrize("shard", range(WIDE_SHARDS))
def test_no_wrong_values_across_op_db(shard):
    labels = list(_ops_by_label())[::WIDE_STRIDE][shard::WIDE_SHARDS]
    wrong = []
    for label in labels:
        for i, result in enumerate(_results(label, 1)):
            if result.status in ("wrong", "error"):   # pass, skip or a clean UnsupportedError only
                wrong.append(f"{label}[{i}] {result.status}: {result.cause}")
    assert not wrong, "jointgraph returned wrong values or crashed:\n" + "\n".join(wrong)


### Regressions the sweep found, as small programs (eager is the oracle)


def _compare_with_eager(fn, *args):
    import torch

    copies = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    expected, actual = fn(*args), jointgraph.aot_function(fn)(*copies)
    assert actual.dtype == expected.dtype and actual.requires_grad == expected.requires_grad
    torch.testing.assert_close(actual.detach(), expected.detach())
    if expected.requires_grad:
        weight = torch.randn(expected.shape, dtype=expected.dtype)
        (expected * weight).real.sum().backward()
        (actual * weight).real.sum().backward()
        for a, c in zip(args, copies, strict=True):
            torch.testing.assert_close(c.grad, a.grad)
    return actual, copies


def test_dtype_changing_views_of_inputs_are_views_with_gradients():
    import torch

    for fn in (torch.view_as_complex, lambda x: torch.view_as_complex(x).imag, lambda x: x.view(torch.int32)):
        x = torch.randn(3, 2, requires_grad=True)
        actual, copies = _compare_with_eager(fn, x)
        assert actual.untyped_storage().data_ptr() == copies[0].untyped_storage().data_ptr()


def test_detached_alias_and_no_grad_outputs_do_not_require_grad():
    import torch

    def under_no_grad(x):
        with torch.no_grad():
            return x * 2

    for fn in (torch.Tensor.detach, under_no_grad):
        _compare_with_eager(fn, torch.randn(4, requires_grad=True))


def test_effect_tokens_of_linalg_error_checks_are_removed():
    import torch

    _compare_with_eager(torch.linalg.inv, torch.randn(4, 4) + 4 * torch.eye(4))


def test_linalg_error_check_runs_in_the_compiled_forward():
    import torch

    compiled = jointgraph.aot_function(torch.linalg.inv)
    compiled(torch.eye(3, requires_grad=True))
    with pytest.raises(RuntimeError, match="could not be completed"):
        compiled(torch.zeros(3, 3, requires_grad=True))


def test_reseeding_inside_the_compiled_function_takes_effect_on_every_call():
    import torch

    def reseeded(x):
        torch.manual_seed(42)
        return x * torch.rand_like(x)

    compiled = jointgraph.aot_function(reseeded)
    x = torch.randn(3, requires_grad=True)
    for caller_seed in (1, 2):   # PyTorch's aot_function draws from the caller's state after the first call
        torch.manual_seed(caller_seed)
        want = reseeded(x)
        torch.manual_seed(caller_seed)
        assert torch.equal(compiled(x), want)


def test_sparse_argument_raises_unsupported():
    import torch

    dense = torch.eye(3)
    with pytest.raises(jointgraph.UnsupportedError, match="layout"):
        jointgraph.aot_function(lambda a, b: torch.sparse.mm(a, b))(dense.to_sparse_csr(), dense)


def test_view_of_an_intermediate_changed_by_in_place_view_ops_is_regenerated_from_its_autograd_base():
    import torch

    def transposed_in_place(x):
        y = x * 2
        y.t_()            # y stays a base for autograd, a view for functionalization
        y.unsqueeze_(0)
        return y[0, 1:]

    def stft_as_real(x):   # transpose_ and squeeze_ on the FFT result, then view_as_real
        return torch.stft(x, n_fft=10, window=torch.ones(10), return_complex=False)

    _compare_with_eager(transposed_in_place, torch.randn(3, 4, requires_grad=True))
    _compare_with_eager(stft_as_real, torch.randn(100, requires_grad=True))


def test_output_requires_grad_when_every_input_has_an_undefined_derivative():
    import torch

    for fn in (lambda x: torch.norm(x, 0), lambda x: torch.linalg.vector_norm(x * 2, 0, dim=0)):
        x, copy = torch.randn(4, 3, requires_grad=True), None
        expected = fn(x)
        copy = x.detach().clone().requires_grad_()
        actual = jointgraph.aot_function(fn)(copy)
        assert actual.requires_grad == expected.requires_grad is True
        torch.testing.assert_close(actual.detach(), expected.detach())
        expected.sum().backward()   # eager's node has an edge to x and gives it no gradient
        actual.sum().backward()
        assert x.grad is None and copy.grad is None


def test_sweep_summary_lists_the_pairs_each_compiler_alone_passes_and_checks_the_bar(tmp_path, capsys):
    def record(op, sample, ours, theirs):
        return PairRecord(op, sample, {"jointgraph": Result(*ours), "pytorch": Result(*theirs)}, 0.1)

    records = [record("sin", 0, ("pass",), ("pass",)),
               record("masked_select", 0, ("pass",), ("error", "DynamicOutputShapeException")),
               record("stft", 1, ("error", "IndexError"), ("pass",)),
               record("normal", 0, ("skip", "eager raises"), ("skip", "eager raises"))]
    summary = summarize(records)
    assert summary["pairs"] == 3 and summary["jointgraph"]["counts"] == {"pass": 2, "error": 1}
    assert summary["pytorch_only"] == [("stft", 1, "error", "IndexError")]
    assert summary["jointgraph_only"] == [("masked_select", 0, "error", "DynamicOutputShapeException")]
    assert not bar_met(summary) and bar_met(summarize(records[:2]))

    import dataclasses
    import json

    for k, part in enumerate((records[:2], records[2:])):   # a sweep run in two chunks, merged
        (tmp_path / f"{k}.json").write_text(json.dumps({"records": [dataclasses.asdict(r) for r in part],
                                                        "seconds": 1.0}))
    paths = [str(tmp_path / "0.json"), str(tmp_path / "1.json")]
    assert load_records(paths) == (records, 2.0)
    assert main(["--merge", *paths]) == 1
    assert "stft[1]" in capsys.readouterr().out
