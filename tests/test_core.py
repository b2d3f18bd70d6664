"""End-to-end behaviour of aot_function / aot_module with eager PyTorch as the oracle."""

import copy
import warnings

import pytest
import torch
import torch.nn as nn

import jointgraph
from jointgraph import UnsupportedError


def _leaf(*shape, grad=True):
    return torch.randn(*shape).requires_grad_(grad)


def _run_both(fn, make_args, **options):
    """Run fn eagerly and compiled on equal copies of the args; return outputs and grads."""
    args_e = make_args()
    args_c = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
              for a in args_e]
    out_e = fn(*args_e)
    out_c = jointgraph.aot_function(fn, **options)(*args_c)
    return args_e, args_c, out_e, out_c


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_mlp_matches_eager(partitioner):
    def mlp(x, w1, b1, w2):
        return (torch.nn.functional.gelu(x @ w1 + b1) @ w2).log_softmax(-1)

    make = lambda: [torch.randn(16, 32), _leaf(32, 64), _leaf(64), _leaf(64, 10)]  # noqa: E731
    args_e, args_c, out_e, out_c = _run_both(mlp, make, partitioner=partitioner)
    torch.testing.assert_close(out_c, out_e)
    grad = torch.randn_like(out_e)
    out_e.backward(grad)
    out_c.backward(grad)
    for a, b in zip(args_e[1:], args_c[1:], strict=True):
        torch.testing.assert_close(b.grad, a.grad)


def test_pytree_arguments_and_outputs():
    def fn(inputs, scale, *, mode):
        x, y = inputs["x"], inputs["pair"][1]
        out = {"sum": (x * y).sum() * scale, "list": [x.relu(), mode, None]}
        return out

    x, y = _leaf(5), _leaf(5)
    eager = fn({"x": x, "pair": (None, y)}, 2.0, mode="a")
    eager["sum"].backward()
    gx, gy = x.grad.clone(), y.grad.clone()
    x.grad = y.grad = None
    compiled = jointgraph.aot_function(fn)({"x": x, "pair": (None, y)}, 2.0, mode="a")
    assert compiled["list"][1] == "a" and compiled["list"][2] is None
    torch.testing.assert_close(compiled["list"][0], eager["list"][0])
    compiled["sum"].backward()
    torch.testing.assert_close(x.grad, gx)
    torch.testing.assert_close(y.grad, gy)


def test_guard_on_scalar_and_requires_grad_recompiles():
    fn = jointgraph.aot_function(lambda x, k: (x * k).sum())
    x = _leaf(3)
    assert fn(x, 2.0).item() == pytest.approx((x * 2.0).sum().item())
    assert fn(x, 3.0).item() == pytest.approx((x * 3.0).sum().item())   # PyTorch's aot_function reuses k=2
    fn(x, 3.0).backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0))
    y = torch.randn(3)  # no grad: a forward-only entry
    out = fn(y, 3.0)
    assert not out.requires_grad
    assert len(fn.entries) == 3


def test_guard_on_shape_dtype_and_strides():
    fn = jointgraph.aot_function(lambda x: x.t().contiguous().view(-1) * 2)
    a = torch.randn(2, 3)
    torch.testing.assert_close(fn(a), a.t().contiguous().view(-1) * 2)
    b = torch.randn(3, 2).t()   # same shape, other strides
    torch.testing.assert_close(fn(b), b.t().contiguous().view(-1) * 2)
    c = torch.randn(2, 3, dtype=torch.float64)
    assert fn(c).dtype == torch.float64
    assert len(fn.entries) == 3


def test_duplicate_inputs_accumulate_gradients():
    def fn(a, b):
        return (a * b + a).sum()

    x = _leaf(4)
    fn(x, x).backward()
    expected = x.grad.clone()
    x.grad = None
    jointgraph.aot_function(fn)(x, x).backward()
    torch.testing.assert_close(x.grad, expected)


def test_no_grad_call_compiles_forward_only():
    fn = jointgraph.aot_function(lambda x, w: (x @ w).relu())
    x, w = torch.randn(3, 4), _leaf(4, 5)
    with torch.no_grad():
        out = fn(x, w)
    assert not out.requires_grad
    torch.testing.assert_close(out, (x @ w).relu())
    assert fn.entries[0].backward is None


def test_retain_graph_and_second_backward_error():
    fn = jointgraph.aot_function(lambda x: (x.sin() * x).sum())
    x = _leaf(6)
    out = fn(x)
    out.backward(retain_graph=True)
    first = x.grad.clone()
    out.backward()
    torch.testing.assert_close(x.grad, 2 * first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_double_backward_raises_never_wrong():
    fn = jointgraph.aot_function(lambda x: (x ** 3).sum())
    x = _leaf(3)
    (g,) = torch.autograd.grad(fn(x), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_non_differentiable_outputs_and_none_gradients():
    def fn(x, w):
        y = x @ w
        return y, y.argmax(-1), y.detach() * 2

    x, w = torch.randn(3, 4), _leaf(4, 5)
    y, idx, det = jointgraph.aot_function(fn)(x, w)
    assert idx.dtype == torch.int64 and not idx.requires_grad and not det.requires_grad
    torch.testing.assert_close(idx, (x @ w).argmax(-1))
    y.sum().backward()
    torch.testing.assert_close(w.grad, x.t() @ torch.ones(3, 5))


def test_unused_output_gets_zero_gradient():
    fn = jointgraph.aot_function(lambda x: (x * 2, x * 3))
    x = _leaf(4)
    a, _ = fn(x)
    a.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((4,), 2.0))


def test_input_returned_as_is_is_the_callers_tensor():
    fn = jointgraph.aot_function(lambda x, y: (x, x + y))
    x, y = torch.randn(3), _leaf(3)
    same, _ = fn(x, y)
    assert same is x


def test_buffer_mutation_lands_on_the_callers_tensor():
    def fn(x, running):
        running.mul_(0.9).add_(x.detach().mean(0), alpha=0.1)
        return x * 2

    x, running = _leaf(4, 3), torch.zeros(3)
    expected = torch.zeros(3).mul_(0.9).add_(x.detach().mean(0), alpha=0.1)
    version = running._version
    jointgraph.aot_function(fn)(x, running).sum().backward()
    torch.testing.assert_close(running, expected)
    assert running._version > version


def test_conv_batchnorm_module_with_optimizer_matches_eager():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))
    twin = copy.deepcopy(model)
    compiled = jointgraph.aot_module(twin)
    opt_e = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt_c = torch.optim.SGD(compiled.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        x = torch.randn(4, 3, 8, 8)
        loss_e = model(x).square().mean()
        loss_c = compiled(x).square().mean()
        torch.testing.assert_close(loss_c, loss_e)
        loss_e.backward()
        loss_c.backward()
        for p_e, p_c in zip(model.parameters(), twin.parameters(), strict=True):
            torch.testing.assert_close(p_c.grad, p_e.grad, atol=1e-5, rtol=1e-4)
        opt_e.step(), opt_c.step(), opt_e.zero_grad(), opt_c.zero_grad()
    torch.testing.assert_close(twin[1].running_mean, model[1].running_mean)
    torch.testing.assert_close(twin[1].running_var, model[1].running_var)
    assert twin[1].num_batches_tracked.item() == model[1].num_batches_tracked.item() == 3
    model.eval(), compiled.eval()
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-4)
    assert set(compiled.state_dict()) == set(model.state_dict())
    compiled.load_state_dict(model.state_dict())


def test_data_dependent_control_flow_raises_unsupported_with_source_line():
    def fn(x):
        if x.sum() > 0:
            return x * 2
        return x

    with pytest.raises(UnsupportedError) as info:
        jointgraph.aot_function(fn)(_leaf(3))
    message = str(info.value)
    assert "test_core.py" in message and "on_unsupported" in message


def test_on_unsupported_eager_runs_eagerly_with_one_warning():
    def fn(x):
        if x.sum() > 0:   # a Python branch on a tensor's value
            return x * 2
        return x - 1

    compiled = jointgraph.aot_function(fn, on_unsupported="eager")
    x = _leaf(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(x)
        compiled(x)
    assert len([w for w in caught if "eagerly" in str(w.message)]) == 1
    torch.testing.assert_close(out, fn(x))


@pytest.mark.parametrize("bad", [{"partitioner": "fast"}, {"memory_budget": 1.5}, {"dynamic": "yes"},
                                 {"on_unsupported": "ignore"}, {"fw_compiler": "tvm"}, {"no_such": 1}])
def test_invalid_options_raise_value_error_naming_the_option(bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        jointgraph.aot_function(lambda x: x, **bad)


def test_plan_lists_saved_values_with_reasons():
    def fn(x, w):
        return torch.tanh(x @ w).sum()

    plan = jointgraph.plan(fn, torch.randn(4, 8), _leaf(8, 3), partitioner="default")
    assert plan.saved and all(s.reason for s in plan.saved)
    assert plan.saved_bytes == sum(s.nbytes for s in plan.saved)
    assert {"trace", "partition"} <= set(plan.timings)
    tanh = next(s for s in plan.saved if s.name.startswith("tanh"))
    assert tanh.shape == (4, 3) and tanh.nbytes == 4 * 3 * 4 and tanh.decision is jointgraph.Decision.SAVE


def test_backward_gets_sizes_not_tensor_when_only_sizes_needed():
    def fn(x, w):
        return (x.sum() * w).sum()   # sum's backward needs only x's size

    plan = jointgraph.plan(fn, _leaf(4, 5), _leaf(3), partitioner="default")
    assert all(s.name != "arg0" for s in plan.saved)


def test_dynamic_shapes_after_recompile_limit():
    fn = jointgraph.aot_function(lambda x, w: (x @ w).relu().sum(), recompile_limit=2)
    w = _leaf(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (2, 3, 5, 7, 9):
            x = torch.randn(n, 4)
            out = fn(x, w)
            torch.testing.assert_close(out, (x @ w).relu().sum())
            w.grad = None
            out.backward()
            torch.testing.assert_close(w.grad, x.t() @ ((x @ w) > 0).float())
    assert sum("symbolic" in str(w.message) for w in caught) == 1
    assert len(fn.entries) == 3   # two static, one symbolic


def test_ambient_saved_tensor_hooks_run_per_saved_tensor():
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t * 1

    fn = jointgraph.aot_function(lambda x, w: torch.tanh(x @ w).sum())
    x, w = torch.randn(4, 8), _leaf(8, 3)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(x, w)
    assert packed, "pack hook must run for the compiled step's saved tensors"
    out.backward()
    torch.testing.assert_close(w.grad, x.t() @ (1 - torch.tanh(x @ w) ** 2))
