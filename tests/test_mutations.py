"""Input mutation semantics (Note [Input mutations]) with eager PyTorch as the oracle."""

import pytest
import torch

import jointgraph


def _pair(*shape):
    base = torch.randn(*shape)
    return base.clone().requires_grad_(True), base.clone().requires_grad_(True)


def test_mutation_of_non_leaf_input_requiring_grad_flows_gradients_like_eager():
    def fn(y, w):
        y.mul_(w)
        return (y.sin() * w).sum()

    compiled = jointgraph.aot_function(fn)
    (a_e, a_c), (w_e, w_c) = _pair(5), _pair(5)
    y_e, y_c = a_e * 2, a_c * 2
    out_e, out_c = fn(y_e, w_e), compiled(y_c, w_c)
    torch.testing.assert_close(out_c, out_e)
    torch.testing.assert_close(y_c, y_e)            # the caller's tensor holds the new value
    (y_e.sum() + out_e).backward()                    # gradient through the mutated input too
    (y_c.sum() + out_c).backward()
    torch.testing.assert_close(a_c.grad, a_e.grad)
    torch.testing.assert_close(w_c.grad, w_e.grad)


def test_mutation_of_leaf_requiring_grad_raises_eagers_error():
    def fn(x):
        x.add_(1)
        return x.sum()

    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fn(torch.randn(3, requires_grad=True))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        jointgraph.aot_function(fn)(torch.randn(3, requires_grad=True))


def test_entry_compiled_for_non_leaf_raises_for_leaf():
    compiled = jointgraph.aot_function(lambda x: x.mul_(2).sum())
    base = torch.randn(3, requires_grad=True)
    compiled(base * 1).backward()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        compiled(torch.randn(3, requires_grad=True))


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_mutated_input_that_backward_needs_keeps_its_old_value(partitioner):
    def fn(x, buf):
        y = buf.sin()              # min-cut may save buf and recompute sin in the backward
        buf.add_(10)
        return (x * y).sum()

    x = torch.randn(4, requires_grad=True)
    buf = torch.randn(4)
    expected_grad = buf.sin()
    jointgraph.aot_function(fn, partitioner=partitioner)(x, buf).backward()
    torch.testing.assert_close(x.grad, expected_grad)
    torch.testing.assert_close(buf, expected_grad.asin() + 10)


def test_saved_input_mutated_before_backward_raises_like_eager():
    def fn(x, buf):
        out = (x * buf).sum()      # autograd saves buf, then it is modified: eager raises
        buf.add_(10)
        return out

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        fn(torch.randn(4, requires_grad=True), torch.randn(4)).backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        jointgraph.aot_function(fn)(torch.randn(4, requires_grad=True), torch.randn(4)).backward()


def test_mutation_through_a_view_and_under_no_grad():
    def fn(x, stats):
        stats.view(-1)[:3].fill_(1.0)
        with torch.no_grad():
            stats[1].add_(x.detach().sum(0))
        return (x * 2).sum()

    x = torch.randn(2, 4, requires_grad=True)
    s_e, s_c = torch.zeros(3, 4), torch.zeros(3, 4)
    fn(x, s_e)
    jointgraph.aot_function(fn)(x, s_c).backward()
    torch.testing.assert_close(s_c, s_e)
    torch.testing.assert_close(x.grad, torch.full((2, 4), 2.0))


def test_inputs_that_alias_one_base_are_mutated_through_it_like_eager():
    def fn(a, b, x):
        a.add_(1)               # b overlaps a: eager's b sees the update
        return (x * b).sum()

    def run(f):
        base = torch.arange(6.0)
        x = torch.ones(4, requires_grad=True)
        out = f(base[:4], base[2:], x)
        out.backward()
        return base, out, x.grad

    compiled = jointgraph.aot_function(fn)
    compiled(torch.zeros(4), torch.zeros(4), torch.ones(4, requires_grad=True))   # first entry: no aliasing
    for got, expected in zip(run(compiled), run(fn), strict=True):
        torch.testing.assert_close(got, expected)


def _same_storage_twice():
    storage = torch.zeros(4)
    a = torch.empty(0).set_(storage.untyped_storage(), 0, (4,), (1,))
    b = torch.empty(0).set_(storage.untyped_storage(), 1, (3,), (1,))   # same storage, no common _base
    return a, b


def test_aliased_inputs_without_a_common_base_run_through_a_synthetic_base():
    def fn(a, b):
        a.add_(1)
        return a + b[:2].sum()

    a_e, b_e = _same_storage_twice()
    a_c, b_c = _same_storage_twice()
    expected = fn(a_e, b_e)
    got = jointgraph.aot_function(fn)(a_c, b_c)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(a_c, a_e)
    torch.testing.assert_close(b_c, b_e)


def test_aliased_inputs_without_a_common_autograd_root_that_require_grad_are_refused():
    def fn(a, b):
        a.add_(1)
        return a + b

    root = torch.randn(4, requires_grad=True)
    a = root * 1
    b = a.detach().requires_grad_()   # shares a's storage, but autograd knows no common root
    with pytest.raises(jointgraph.UnsupportedError, match="share storage"):
        jointgraph.aot_function(fn)(a, b)


def test_graph_break_subgraph_mutating_an_activation_through_torch_compile():
    torch._dynamo.reset()

    def fn(x, w):
        h = x @ w + 1
        print("graph break")  # noqa: T201
        h.mul_(2)             # the second graph mutates its input, a non-leaf activation
        return h.sin().sum()

    x = torch.randn(3, 4)
    w_e, w_c = _pair(4, 5)
    fn(x, w_e).backward()
    torch.compile(fn, backend="jointgraph")(x, w_c).backward()
    torch.testing.assert_close(w_c.grad, w_e.grad)


@pytest.mark.parametrize("mutate", [lambda t: t.t_(), lambda t: t.unsqueeze_(0),
                                    lambda t: t.transpose_(0, 1).mul_(2), lambda t: t.as_strided_((3,), (2,))])
def test_metadata_mutations_are_replayed_on_the_callers_tensor(mutate):
    def fn(x, t):
        mutate(t)
        return (x * t.sum()).sum()

    x = torch.randn(3, requires_grad=True)
    t_e, t_c = torch.randn(2, 3), None
    t_c = t_e.clone()
    out_e = fn(x, t_e)
    out_c = jointgraph.aot_function(fn)(x, t_c)
    torch.testing.assert_close(out_c, out_e)
    assert t_c.shape == t_e.shape and t_c.stride() == t_e.stride()
    assert t_c.storage_offset() == t_e.storage_offset()
    torch.testing.assert_close(t_c, t_e)


def test_resize_of_an_input_is_refused():
    def fn(x, t):
        t.resize_(10)
        return x * 2

    with pytest.raises(jointgraph.UnsupportedError, match="resize_"):
        jointgraph.aot_function(fn)(torch.randn(3, requires_grad=True), torch.randn(3))


def test_hook_on_an_intermediate_runs_at_every_backward_not_at_trace_time():
    calls = []

    def fn(x):
        y = x * 2
        y.register_hook(lambda g: calls.append(1))
        return y.sum()

    compiled = jointgraph.aot_function(fn)   # Note [Hooks inside the function] (tests/test_hooks_inside.py)
    x = torch.randn(3, requires_grad=True)
    outs = [compiled(x) for _ in range(2)]
    assert calls == []   # traced, not run
    for n, out in enumerate(outs, start=1):
        out.backward()
        assert calls == [1] * n


class _CountingScale(torch.autograd.Function):
    """Multiplies by 3; its backward adds the gradient's sum into a buffer (FSDP-style bookkeeping)."""

    @staticmethod
    def forward(ctx, x, buf):
        ctx.buf = buf
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        ctx.buf.add_(grad.sum())
        return grad * 3, None


def test_backward_mutation_of_a_forward_input_is_applied():
    def fn(x, buf):
        return _CountingScale.apply(x, buf).sin().sum()

    x = torch.randn(5, requires_grad=True)
    buf_e, buf_c = torch.zeros(()), torch.zeros(())
    fn(x, buf_e).backward()
    grad_e = x.grad.clone()
    x.grad = None
    out = jointgraph.aot_function(fn)(x, buf_c)
    assert buf_c.item() == 0.0          # nothing happens until the backward runs
    out.backward()
    torch.testing.assert_close(buf_c, buf_e)
    torch.testing.assert_close(x.grad, grad_e)


def test_outputs_that_view_another_output_share_it_and_take_in_place_ops_like_eager():
    def fn(x):
        y = x * 2
        return y, y.view(-1), y[0]

    def step(f, x):
        y, flat, row = f(x)
        assert flat._base is y and row._base is y
        assert flat.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
        flat.mul_(3)                         # visible through y and row, as in eager
        return (y.sin().sum() + row.sum()), y

    x_e, x_c = (torch.randn(2, 3).requires_grad_(True) for _ in range(2))
    with torch.no_grad():
        x_c.copy_(x_e)
    loss_e, y_e = step(fn, x_e)
    loss_c, y_c = step(jointgraph.aot_function(fn), x_c)
    torch.testing.assert_close(y_c, y_e)
    loss_e.backward()
    loss_c.backward()
    torch.testing.assert_close(x_c.grad, x_e.grad)


def test_input_returned_as_a_view_is_a_view_of_the_callers_tensor():
    def fn(x, w):
        return x.view(-1)[1:], (x * w).sum()

    x, w = torch.randn(2, 3), torch.randn(2, 3, requires_grad=True)
    view, _ = jointgraph.aot_function(fn)(x, w)
    assert view._base is x and view.storage_offset() == 1
    view.fill_(0)
    assert (x.view(-1)[1:] == 0).all()


def test_hook_on_an_intermediate_through_torch_compile_runs_on_every_backward():
    torch._dynamo.reset()
    calls = []

    def fn(x, w):
        y = x @ w
        y.register_hook(lambda g: calls.append(1) or g * 2)   # transforms the gradient, with a side effect
        return y.sin().sum()

    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    fn(x, w).backward()
    expected = w.grad.clone()
    compiled = torch.compile(fn, backend="jointgraph")
    for call in range(2):
        w.grad = None
        compiled(x, w).backward()
        torch.testing.assert_close(w.grad, expected)
        assert len(calls) == call + 2


class _TransposeInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, buf):
        ctx.buf = buf
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        ctx.buf.t_()
        return grad * 2, None


def test_metadata_mutation_in_the_backward_is_refused_at_compile_time():
    def fn(x, buf):
        return _TransposeInBackward.apply(x, buf).sum()

    with pytest.raises(jointgraph.UnsupportedError, match="metadata"):
        jointgraph.aot_function(fn)(torch.randn(3, requires_grad=True), torch.randn(2, 3))


def test_mutation_hidden_from_autograd_lands_on_the_callers_tensor():
    def fn(x, stats):
        stats.data.add_(x.detach().sum())    # hidden from autograd (.data)
        return (x * 3).sum()

    x = torch.randn(4, requires_grad=True)
    s_e, s_c = torch.zeros(2), torch.zeros(2)
    fn(x, s_e)
    jointgraph.aot_function(fn)(x, s_c).backward()
    torch.testing.assert_close(s_c, s_e)
    torch.testing.assert_close(x.grad, torch.full((4,), 3.0))


_COMPILE_SCENARIOS = {
    "buffer_update": (lambda x, buf: (buf.mul_(0.5).add_(x.detach().mean()), (x.sin() * 2).sum())[1],
                      lambda: (torch.randn(4, requires_grad=True), torch.randn(4))),
    "view_mutation": (lambda x, buf: (buf.view(-1)[:2].fill_(3.0), (x * buf.sum()).sum())[1],
                      lambda: (torch.randn(4, requires_grad=True), torch.randn(2, 2))),
    "metadata": (lambda x, buf: (buf.unsqueeze_(0), (x * 2).sum())[1],
                 lambda: (torch.randn(4, requires_grad=True), torch.randn(3))),
}


@pytest.mark.parametrize("scenario", sorted(_COMPILE_SCENARIOS))
@pytest.mark.parametrize("how", ["aot_function", "torch.compile"])
def test_mutation_scenarios_through_both_entry_points(scenario, how):
    fn, make = _COMPILE_SCENARIOS[scenario]
    torch._dynamo.reset()
    compiled = jointgraph.aot_function(fn) if how == "aot_function" else torch.compile(fn, backend="jointgraph")
    x_e, b_e = make()
    x_c, b_c = x_e.detach().clone().requires_grad_(True), b_e.clone()
    out_e, out_c = fn(x_e, b_e), compiled(x_c, b_c)
    torch.testing.assert_close(out_c, out_e)
    out_e.backward()
    out_c.backward()
    torch.testing.assert_close(x_c.grad, x_e.grad)
    assert b_c.shape == b_e.shape and b_c.stride() == b_e.stride()
    torch.testing.assert_close(b_c, b_e)


def _clones(compiled) -> int:
    return sum(n.target is torch.ops.aten.clone.default
               for plan in jointgraph.plans(compiled) for n in plan.forward.graph.nodes)


def test_a_returned_clone_of_an_input_slice_written_through_a_slice_is_compact_and_a_written_input_gets_no_clone():
    """Note [Scatters keep their base's storage]: select_scatter copies its base's whole storage. A returned
    clone written through slices stays a compact tensor of its own, as eager's; an input written through a
    slice is written without a clone of it (its new value is copied into the input, whatever its layout)."""
    def returned(a):
        t = a.clone()
        t[0] = 1.0
        t[:, 1:].mul_(2.0)
        return t

    def written(a):
        a[0] = 1.0
        return a * 2

    buffer = torch.randn(4, 3)
    compiled = jointgraph.aot_function(returned)
    out, expected = compiled(buffer[1:]), returned(buffer[1:])
    torch.testing.assert_close(out, expected)
    assert out.storage_offset() == 0 and out.untyped_storage().nbytes() == expected.untyped_storage().nbytes()
    compact = jointgraph.aot_function(returned)   # review: a compact input first, then a slice (one entry)
    torch.testing.assert_close(compact(buffer[1:].clone()), returned(buffer[1:].clone()))
    out = compact(buffer[1:])
    assert out.storage_offset() == 0 and out.untyped_storage().nbytes() == expected.untyped_storage().nbytes()
    compiled = jointgraph.aot_function(written)
    leaf = torch.randn(4, 3, requires_grad=True)
    x, y = (leaf * 1)[1:], (leaf * 1)[1:]   # traced on a copy (a non-leaf that requires grad)
    torch.testing.assert_close(compiled(x), written(y))
    torch.testing.assert_close(x, y)
    assert _clones(compiled) == 0
