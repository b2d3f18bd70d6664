"""Data-dependent sizes traced with unbacked symbols (Note [Unbacked sizes] in capture/unbacked.py).

Each op runs forward and backward through ``aot_function`` (and ``aot_module``) against eager,
over several calls whose data, and so whose data-dependent sizes, change; one compiled entry
serves them all. The same ops through ``torch.compile(backend="jointgraph")`` with Dynamo's
``capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` are at the end.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import jointgraph


def _masked_index(x, w):
    mask = x > 0
    return x[mask] * w[mask] + x[mask].sum()


def _masked_select(x, w):
    return torch.masked_select(x * w, x > 0) * 3


def _nonzero(x, w):
    idx = torch.nonzero(x > 0)
    return x[idx[:, 0]] * w.sum(), idx


def _masked_assign(x, w):
    y = x * w
    y[x > 0] = torch.tensor(0.5) * w.sum()
    return y * x


def _unique(x, w):
    values = torch.unique(x.detach().round())
    return (values * w.sum()).sum() + values.numel() * x, values


def _repeat_interleave(x, w):
    repeats = (x.detach() > 0).long() + (x.detach() > 1).long()
    return torch.repeat_interleave(x * w, repeats) * 2


def _item_factory(x, w):
    n = (x.detach() > 0).sum().item()
    return torch.ones(n, 3) * w.sum() + x[:1]


def _item_as_size(x, w):
    n = (x.detach() > 0).sum()
    return x.new_zeros(n.item()) + w.sum() * x.sum()


OPS = {f.__name__.strip("_"): f for f in (_masked_index, _masked_select, _nonzero, _masked_assign, _unique,
                                           _repeat_interleave, _item_factory, _item_as_size)}


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(12, generator=g) * 2).requires_grad_()
    w = torch.randn(12, generator=g).requires_grad_()
    return x, w


def _same_as_eager(fn, compiled, inputs: tuple, weighted: bool = False) -> tuple:
    """``compiled`` on twins of ``inputs`` against eager's ``fn`` on ``inputs``: the outputs (shape, dtype,
    requires_grad, values, which inputs each shares storage with), then, after a backward through the
    outputs that require grad (each times a random tensor when ``weighted``, else summed), the
    inputs' gradients. Returns eager's outputs."""
    twins = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    expected, actual = fn(*inputs), compiled(*twins)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual, strict=True):
        assert (a.shape, a.dtype, a.requires_grad) == (e.shape, e.dtype, e.requires_grad)
        torch.testing.assert_close(a.detach(), e.detach())
        assert _storage_shared_with(a, twins) == _storage_shared_with(e, inputs)
    weights = [torch.randn(e.shape) if weighted else 1.0 for e in expected]
    sum((e * w).sum() for e, w in zip(expected, weights, strict=True) if e.requires_grad).backward()
    sum((a * w).sum() for a, w in zip(actual, weights, strict=True) if a.requires_grad).backward()
    for t, twin in zip(inputs, twins, strict=True):
        torch.testing.assert_close(twin.grad, t.grad)
    return expected


def _storage_shared_with(t: torch.Tensor, inputs) -> list[bool]:
    return [t.untyped_storage().data_ptr() == i.untyped_storage().data_ptr() for i in inputs]


def _check_against_eager(fn, compiled, seeds=(0, 1, 2, 3)) -> set:
    """``_same_as_eager`` on each seed's inputs; returns the data-dependent sizes seen."""
    return {tuple(tuple(e.shape) for e in _same_as_eager(fn, compiled, _inputs(seed), weighted=True))
            for seed in seeds}


@pytest.mark.parametrize("name", OPS)
def test_data_dependent_op_forward_and_backward_match_eager(name):
    fn = OPS[name]
    compiled = jointgraph.aot_function(fn)
    sizes = _check_against_eager(fn, compiled)
    # the data-dependent sizes change between calls (masked_assign's output keeps x's shape)
    assert len(sizes) > 1 or name == "masked_assign"
    assert len(compiled.entries) == 1   # one graph serves every size


@pytest.mark.parametrize("name", ["masked_index", "nonzero", "repeat_interleave", "item_factory"])
def test_data_dependent_op_through_aot_module(name):
    fn = OPS[name]

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(12))

        def forward(self, x):
            return fn(x, self.w)

    model = Model()
    twin = Model()
    twin.load_state_dict(model.state_dict())
    compiled = jointgraph.aot_module(twin)
    for seed in range(3):
        _same_as_eager(model, compiled, (_inputs(seed)[0].detach(),))
        torch.testing.assert_close(twin.w.grad, model.w.grad)


def _views_of_data_dependent_values(x, w):
    kept = (x * w)[x > 0]
    return kept[1:], torch.nonzero(x > 0)[:, 0]


def test_views_of_data_dependent_values_are_regenerated_per_call():
    fn = _views_of_data_dependent_values
    compiled = jointgraph.aot_function(fn)
    assert len(_check_against_eager(fn, compiled)) > 1
    assert len(compiled.entries) == 1


def _bindings(gm: torch.fx.GraphModule) -> list:
    """The ops of ``gm`` that create data-dependent symbols (placeholders receive them)."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.meta.get("unbacked_bindings")]


@pytest.mark.parametrize("partitioner, options", [("default", {}), ("mincut", {}),
                                                  ("budget", {"memory_budget": 0.3})])
def test_sizes_cross_to_the_backward_as_saved_symbols_never_by_rerunning_the_op(partitioner, options):
    from jointgraph.ir import Role

    compiled = jointgraph.aot_function(OPS["masked_index"], partitioner=partitioner, **options)
    x, w = _inputs(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a budget below the minimum achievable peak warns
        sum(compiled(x, w)).sum().backward()
    plan = jointgraph.plans(compiled)[0]
    bound = _bindings(plan.forward)
    assert bound, "the forward records where each data-dependent symbol is bound"
    for node in bound:
        for symbol in node.meta["unbacked_bindings"]:
            assert str(symbol) in str(node.meta["val"].shape) or node.meta["val"].dim() == 0
    assert not _bindings(plan.backward), "the backward never re-runs a data-dependent op"
    sizes = [n for n in plan.backward.graph.nodes if n.op == "placeholder" and n.meta["role"] is Role.SAVED_SIZE]
    assert any(isinstance(n.meta["val"], torch.SymInt) for n in sizes)


def test_plan_sizes_data_dependent_values_by_the_documented_hint_policy():
    compiled = jointgraph.aot_function(OPS["masked_index"])
    x, w = _inputs(0)
    sum(compiled(x, w)).sum().backward()
    plan = jointgraph.plans(compiled)[0]
    assert plan.estimated_sizes and "estimated" in repr(plan)
    assert "estimate" in plan.explain() and plan.size_policy in plan.explain()
    # nonzero-like sizes are at most the mask's numel: the plan uses that upper bound
    masked = [v for v in plan.saved if v.dtype == torch.float32 and v.name in plan.estimated_sizes]
    assert masked and all(v.shape == (x.numel(),) for v in masked)
    assert int((x > 0).sum()) < x.numel()   # the estimate is not the traced size
    assert plan.peak_bytes is not None and plan.peak_bytes > 0


def test_item_without_a_bound_uses_the_fallback_and_says_so():
    from jointgraph.ir.sizes import UNBACKED_FALLBACK

    compiled = jointgraph.aot_function(OPS["item_factory"])
    x, w = _inputs(1)
    compiled(x, w).sum().backward()
    plan = jointgraph.plans(compiled)[0]
    shapes = [v.shape for v in plan.saved if v.name in plan.estimated_sizes]
    assert any(UNBACKED_FALLBACK in shape for shape in shapes)
    assert str(UNBACKED_FALLBACK) in plan.size_policy


def test_python_branch_on_a_value_and_int_of_item_still_raise_with_the_users_line():
    def branch(x):
        if x.sum() > 0:
            return x * 2
        return x

    def int_size(x):
        return torch.zeros(int((x > 0).sum().item())) + 1

    for fn in (branch, int_size):
        with pytest.raises(jointgraph.UnsupportedError) as info:
            jointgraph.aot_function(fn)(torch.randn(4, requires_grad=True))
        assert "test_unbacked.py" in str(info.value) and "on_unsupported" in str(info.value)
        assert "Python int" in str(info.value) and 'torch.compile(fn, backend="jointgraph")' in str(info.value)


def test_narrow_with_a_tensor_start_computes_and_its_returned_view_is_regenerated():
    """The start is a data-dependent symbol: a narrowed slice used in computation compiles (one graph,
    forward and backward equal eager's for every start); returned as a view of the input, its geometry
    comes from the graph (Note [Views with data-dependent geometry])."""
    def used(x, start):
        return x.narrow(0, start, 2).sin().sum(0) * 2

    compiled = jointgraph.aot_function(used)
    for start in (0, 3, 1):
        x = torch.randn(5, 3, requires_grad=True)
        out = compiled(x, torch.tensor(start))
        out.sum().backward()
        got = x.grad
        x.grad = None
        want = used(x, torch.tensor(start))
        want.sum().backward()
        torch.testing.assert_close(out, want)
        torch.testing.assert_close(got, x.grad)
    assert len(jointgraph.plans(compiled)) == 1
    x = torch.randn(5, 3)
    view = jointgraph.aot_function(lambda x, s: x.narrow(0, s, 2))(x, torch.tensor(1))
    assert view._base is x and torch.equal(view, x[1:3])


def test_returning_item_is_refused_naming_the_data_dependent_value():
    with pytest.raises(jointgraph.UnsupportedError, match="data-dependent value"):
        jointgraph.aot_function(lambda x: (x > 0).sum().item())(torch.randn(4))


### torch.compile(backend="jointgraph")


@pytest.fixture
def dynamo_captures_data_dependent_ops():
    import torch._dynamo

    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        yield
    torch._dynamo.reset()


@pytest.mark.parametrize("name", OPS)
def test_data_dependent_op_through_torch_compile(name, dynamo_captures_data_dependent_ops):
    fn = OPS[name]
    compiled = torch.compile(fn, backend="jointgraph", fullgraph=True)
    sizes = _check_against_eager(fn, compiled)
    assert len(sizes) > 1 or name == "masked_assign"
    assert len(jointgraph.plans(compiled)) == 1   # one graph serves every size


def test_int_of_item_refused_by_aot_function_compiles_through_torch_compile(dynamo_captures_data_dependent_ops):
    """The way out the refusal names: Dynamo turns ``int(n.item())`` into a symbol."""
    def prefix(x, n):
        return x[:int(n.item())] * torch.arange(float(x.shape[0]))[:int(n.item())]

    with pytest.raises(jointgraph.UnsupportedError, match="capture_scalar_outputs"):
        jointgraph.aot_function(prefix)(torch.randn(6, requires_grad=True), torch.tensor(2))
    compiled = torch.compile(prefix, backend="jointgraph")
    for n in (2, 5, 3):
        x = torch.randn(6, requires_grad=True)
        _same_as_eager(prefix, compiled, (x, torch.tensor(n)))


def _expand_and_transpose(x):
    return x.expand(x.shape), x.t()


@pytest.mark.parametrize("entry", ["aot_function", "torch.compile"])
def test_dynamic_output_aliasing_an_input(entry):
    import torch._dynamo

    torch._dynamo.reset()
    fn = _expand_and_transpose
    compiled = (jointgraph.aot_function(fn, dynamic=True) if entry == "aot_function"
                else torch.compile(fn, backend="jointgraph", dynamic=True))
    for n in (3, 4, 6):
        # eager's outputs are views of x: the compiled ones must share the twin's storage
        _same_as_eager(fn, compiled, (torch.randn(n, 2, requires_grad=True),), weighted=True)
    torch._dynamo.reset()


@pytest.mark.parametrize("name", ["masked_index", "masked_select", "nonzero", "item_factory", "unique"])
def test_empty_and_single_element_selections(name):
    """Sizes 0 and 1 are where a trace that assumed a size-like symbol is >= 2 would go wrong."""
    fn = OPS[name]
    compiled = jointgraph.aot_function(fn)
    for values in ([-1.0] * 12, [-1.0] * 11 + [2.5], [3.0] * 12):
        x = torch.tensor(values, requires_grad=True)
        w = torch.linspace(-1, 1, 12, requires_grad=True)
        _same_as_eager(fn, compiled, (x, w))


def test_a_call_that_breaks_a_traced_size_assumption_raises():
    """Two masks' selections added: the trace assumed equal sizes (eager raises when they differ, or
    broadcasts when one is 1); a call with other sizes raises, never computes with a wrong shape."""
    def add_selections(x, y):
        return x[x > 0] + y[y > 0]

    compiled = jointgraph.aot_function(add_selections)
    x = torch.tensor([1.0, -1.0, 2.0, 3.0])
    torch.testing.assert_close(compiled(x, torch.tensor([1.0, 1.0, -2.0, 3.0])),
                               add_selections(x, torch.tensor([1.0, 1.0, -2.0, 3.0])))
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        compiled(x, torch.tensor([1.0, -1.0, -2.0, 3.0]))


@pytest.mark.slow
def test_wav2vec2_with_spec_augment_through_torch_compile(dynamo_captures_data_dependent_ops):
    """SpecAugment writes a learned vector into the masked time steps (``h[mask] = v``); the mask is
    drawn per call (NumPy), so its size changes. The reference is ``aot_eager`` under the same
    Dynamo graphs (compiled and eager calls consume the generators differently)."""
    import copy

    transformers = pytest.importorskip("transformers")
    config = transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
        conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
        mask_time_prob=0.3, mask_time_length=2, vocab_size=12, layerdrop=0.0, hidden_dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0)
    model = transformers.Wav2Vec2ForCTC(config).train()
    _drop_dropout(model)   # dropout(p=0) hits an unrelated gap (see the issue 13 note)
    twin = copy.deepcopy(model)
    reference, compiled = torch.compile(model, backend="aot_eager"), torch.compile(twin, backend="jointgraph")
    for step in range(2):
        x = torch.randn(2, 4000 + 160 * step)
        _seed_both(step)
        expected = reference(x).logits
        _seed_both(step)
        actual = compiled(x).logits
        torch.testing.assert_close(actual, expected)
        expected.square().sum().backward()
        actual.square().sum().backward()
        for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
            if p.grad is not None:
                torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)


def _drop_dropout(module: torch.nn.Module) -> None:
    for name, child in module.named_children():
        if isinstance(child, torch.nn.Dropout):
            setattr(module, name, torch.nn.Identity())
        else:
            _drop_dropout(child)


def _seed_both(seed: int) -> None:
    import numpy as np

    np.random.seed(seed)
    torch.manual_seed(seed)


def test_masked_select_with_a_mask_that_broadcasts_the_input():
    """PyTorch's fake kernel bounds the result by the input's numel; the mask broadcasts it larger."""
    def select(x, mask):
        return torch.masked_select(x * 2, mask)

    compiled = jointgraph.aot_function(select)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(1, 4, generator=g, requires_grad=True)
        mask = torch.rand(5, 4, generator=g) > 0.3
        (expected,) = _same_as_eager(select, compiled, (x, mask))
        assert expected.numel() > x.numel()   # more than the bound the fake kernel assumed


@pytest.mark.parametrize("name", ["masked_index", "nonzero", "item_factory"])
def test_data_dependent_sizes_with_symbolic_input_sizes(name):
    """dynamic=True: input lengths (backed symbols) and selections (unbacked) change together."""
    fn = OPS[name]
    compiled = jointgraph.aot_function(fn, dynamic=True)
    for n in (6, 9, 13):
        g = torch.Generator().manual_seed(n)
        x, w = (torch.randn(n, generator=g).requires_grad_() for _ in range(2))
        _same_as_eager(fn, compiled, (x, w))
    assert len(compiled.entries) == 1


def test_data_dependent_op_recomputed_by_checkpoint_is_refused_by_name():
    from torch.utils.checkpoint import checkpoint

    def fn(x, w):
        return checkpoint(lambda a, b: (a[a > 0] * b[a > 0]).sin(), x, w, use_reentrant=False).sum()

    with pytest.raises(jointgraph.UnsupportedError, match="checkpoint"):
        jointgraph.aot_function(fn)(*_inputs(0))


def test_views_with_data_dependent_geometry():
    """Note [Views with data-dependent geometry]: narrow by a tensor start, tensor_split by an index tensor."""
    import jointgraph

    def f(x, s, idx):
        return (torch.narrow(x, 1, s, 2), *torch.tensor_split(x, idx, 1))

    cf = jointgraph.aot_function(f, cache=False)
    for s, idx in ((torch.tensor(1), torch.tensor([1, 3])), (torch.tensor(-3), torch.tensor([-2, 7]))):
        xe = torch.randn(4, 5, requires_grad=True)
        xc = xe.detach().clone().requires_grad_()
        e, c = f(xe, s, idx), cf(xc, s, idx)
        assert [a.shape for a in e] == [b.shape for b in c]
        assert all(torch.equal(a, b) and b._base is xc for a, b in zip(e, c, strict=True))
        sum((a * (k + 1)).sum() for k, a in enumerate(e)).backward()
        sum((b * (k + 1)).sum() for k, b in enumerate(c)).backward()
        assert torch.equal(xe.grad, xc.grad)
    with pytest.raises(jointgraph.UnsupportedError, match="tensor_split"):
        cf(torch.randn(4, 5), torch.tensor(1), torch.tensor(2))
