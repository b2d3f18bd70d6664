"""Tensor subclasses with ``__tensor_flatten__`` (Note [Tensor subclasses] in capture/subclasses.py):
PyTorch's TwoTensor and DTensor (a one-rank gloo group) as inputs, parameters, outputs and
intermediates, through aot_function, aot_module and torch.compile, with eager as the oracle:
outputs and gradients (subclasses, with their metadata) equal eager's over two calls."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import jointgraph
from jointgraph.capture.subclasses import flatten, is_subclass

pytestmark = pytest.mark.filterwarnings("ignore::jointgraph.planner.budget.BudgetBelowFloor")

PLANS = [{"partitioner": "default"}, {"partitioner": "mincut"},
         {"partitioner": "budget", "memory_budget": 0.9}]


def two(*shape, requires_grad=True):
    t = TwoTensor(torch.randn(*shape), torch.randn(*shape))
    return t.requires_grad_() if requires_grad else t


def assert_same(expected, actual):
    """Same pytree, same tensor types; subclasses with the same metadata (strides aside) and inner values."""
    e_leaves, e_spec = torch.utils._pytree.tree_flatten(expected)
    a_leaves, a_spec = torch.utils._pytree.tree_flatten(actual)
    assert e_spec == a_spec
    for e, a in zip(e_leaves, a_leaves, strict=True):
        if e is None:
            assert a is None
            continue
        assert type(a) is type(e)
        if not isinstance(e, torch.Tensor):
            assert a == e
        elif is_subclass(e):
            e_inner, e_meta = flatten(e.detach())
            a_inner, a_meta = flatten(a.detach())
            assert a_meta.layout_free() == e_meta.layout_free()
            for x, y in zip(e_inner, a_inner, strict=True):
                torch.testing.assert_close(y, x, atol=1e-5, rtol=1e-5)
        else:
            torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)


def run(fn, make_inputs, calls=2):
    """Call ``fn`` ``calls`` times, each on fresh inputs from ``make_inputs`` (``check`` seeds each run,
    so eager and the compiled entry see the same values); backward through the sum of every
    differentiable output; return (outputs, gradients of the inputs) per call."""
    results = []
    for _ in range(calls):
        inputs = make_inputs()
        out = fn(*inputs)
        diff = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]
        if diff:
            sum(o.sum() for o in diff).backward()
        results.append((out, [getattr(x, "grad", None) for x in inputs]))
    return results


def check(fn, make_inputs, compiled):
    torch.manual_seed(0)
    expected = run(fn, make_inputs)
    torch.manual_seed(0)
    actual = run(compiled, make_inputs)
    assert_same(expected, actual)


def _check_module(eager, module, compiled, x):
    """``compiled`` (``module`` compiled; ``eager`` its twin) over two calls on ``x``: the outputs, and
    after each backward through their sum, the parameters' gradients."""
    for _ in range(2):
        expected, actual = eager(x), compiled(x)
        assert_same(expected, actual)
        expected.sum().backward()
        actual.sum().backward()
        assert_same([p.grad for p in eager.parameters()], [p.grad for p in module.parameters()])


# ### TwoTensor


def _two_inputs():
    return two(3, 4), two(4, 5), torch.randn(5)


def elementwise_and_matmul(x, w, b):
    h = (x @ w).relu()
    return h + b.detach(), (x.sin() * 2).sum(), h.a.sum() + 0   # a subclass intermediate read through .a


def inner_read(x, w, b):
    y = x.cos()          # a subclass intermediate
    return (y.a * y.b).sum(1) + b.sum(), (y @ w).sum()


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p["partitioner"])
@pytest.mark.parametrize("fn", [elementwise_and_matmul, inner_read])
def test_twotensor_inputs_aot_function(fn, plan):
    check(fn, _two_inputs, jointgraph.aot_function(fn, **plan))


def test_twotensor_input_without_grad():
    def f(x, w):
        return (x * w).tanh(), x + 1

    check(f, lambda: (two(4, requires_grad=False), two(4)), jointgraph.aot_function(f))


def test_twotensor_made_inside_and_returned():
    def f(a, b):
        t = TwoTensor(a.detach() * 2, b.detach() + 1)   # a subclass created inside (no autograd link, as eager)
        return t.exp(), (t * a).a.sum() * 0 + a.sum()

    check(f, lambda: (torch.randn(3, requires_grad=True), torch.randn(3)), jointgraph.aot_function(f))


def test_twotensor_returned_as_is_and_as_view():
    def f(x):
        return x, x.t(), x * 2

    check(f, lambda: (two(2, 3),), jointgraph.aot_function(f))


class TwoLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(two(5, 4, requires_grad=False))
        self.b = torch.nn.Parameter(two(5, requires_grad=False))
        self.register_buffer("scale", torch.full((5,), 0.5))

    def forward(self, x):
        return torch.nn.functional.linear(x, self.w, self.b).tanh() * 2


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p["partitioner"])
def test_twotensor_parameters_aot_module(plan):
    torch.manual_seed(0)
    eager = TwoLinear()
    module = TwoLinear()
    module.load_state_dict(eager.state_dict())
    _check_module(eager, module, jointgraph.aot_module(module, **plan), two(3, 4, requires_grad=False))
    assert type(module.w.grad) is TwoTensor


@pytest.mark.parametrize("fn", [elementwise_and_matmul, inner_read])
def test_twotensor_torch_compile(fn):
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="jointgraph")
    check(fn, _two_inputs, compiled)
    assert len(jointgraph.plans(compiled)) == 1   # Dynamo handed over the TwoTensors; we flattened them


def test_graph_is_plain_aten_over_inner_tensors():
    """The plan of a call, and jointgraph.plan's."""
    compiled = jointgraph.aot_function(elementwise_and_matmul)
    compiled(*_two_inputs())
    for plan in (jointgraph.plans(compiled)[-1], jointgraph.plan(elementwise_and_matmul, *_two_inputs())):
        assert plan.backward is not None
        for gm in (plan.forward, plan.backward):
            for node in gm.graph.nodes:
                value = node.meta.get("val")
                assert not is_subclass(value), node
        # two inner tensors per TwoTensor argument, one plain tensor
        assert sum(n.op == "placeholder" for n in plan.forward.graph.nodes) == 5


def test_structure_is_guarded():
    """A call with another subclass (or a plain tensor) at the same position compiles again."""
    def f(x):
        return x * 2

    compiled = jointgraph.aot_function(f)
    check(f, lambda: (two(3),), compiled)
    check(f, lambda: (torch.randn(3, requires_grad=True),), compiled)
    check(f, lambda: (two(3, requires_grad=False),), compiled)


# ### Refusals and writes


def test_subclass_input_data_write_without_grad_is_eager():
    def f(x):
        x.mul_(2)
        return x + 1

    torch.manual_seed(0)
    x1 = two(3, requires_grad=False)
    x2 = TwoTensor(x1.a.clone(), x1.b.clone())
    expected = f(x1)
    actual = jointgraph.aot_function(f)(x2)
    assert_same(expected, actual)
    assert_same(x1, x2)   # the caller's inner tensors were written


def test_subclass_input_data_write_with_grad_is_refused():
    def f(x):
        y = x * 1
        y.mul_(2)
        return y

    check(f, lambda: (two(3),), jointgraph.aot_function(f))   # writes to an intermediate are fine

    def g(x):
        x.mul_(2)
        return x

    x = two(3).clone()   # a non-leaf: eager allows the write
    with pytest.raises(jointgraph.UnsupportedError, match="writes in place to a TwoTensor argument"):
        jointgraph.aot_function(g)(x)


def test_subclass_input_metadata_write_is_refused():
    def f(x):
        x.t_()
        return x * 2

    with pytest.raises(jointgraph.UnsupportedError, match="changes the metadata of a TwoTensor argument"):
        jointgraph.aot_function(f)(two(2, 3, requires_grad=False))


def test_plain_input_with_subclass_gradient_is_refused():
    def f(x, w):
        return (x * w).sum()

    with pytest.raises(jointgraph.UnsupportedError, match="the gradient of the plain tensor input .* is a TwoTensor"):
        jointgraph.aot_function(f)(two(3), torch.randn(3, requires_grad=True))
    # on_unsupported="eager" runs it as eager does
    x, w = two(3), torch.randn(3, requires_grad=True)
    out = jointgraph.aot_function(f, on_unsupported="eager")(x, w)
    out.backward()
    assert type(w.grad) is TwoTensor


def test_gradient_of_another_subclass_is_refused():
    def f(x):
        return x * 2

    out = jointgraph.aot_function(f)(two(3))
    with pytest.raises(jointgraph.UnsupportedError, match="gradient of a TwoTensor output"):
        out.backward(torch.ones(3))


def test_captured_subclass_is_refused():
    w = two(3)

    def f(x):
        return x * w

    with pytest.raises(jointgraph.UnsupportedError, match="TwoTensor"):
        jointgraph.aot_function(f)(torch.randn(3))


# ### DTensor on a one-rank gloo group


@pytest.fixture(scope="module")
def mesh(gloo_world):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (1,))


def _dtensors(mesh):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    def make():
        x = distribute_tensor(torch.randn(4, 3), mesh, [Shard(0)]).requires_grad_()
        w = distribute_tensor(torch.randn(3, 5), mesh, [Replicate()]).requires_grad_()
        return x, w

    return make


def dtensor_mlp(x, w):
    h = (x @ w).relu()
    return h * 2, (x * x).sum()


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p["partitioner"])
def test_dtensor_inputs_aot_function(mesh, plan):
    check(dtensor_mlp, _dtensors(mesh), jointgraph.aot_function(dtensor_mlp, **plan))


def test_dtensor_gradient_placements_as_eager(mesh):
    """w is Replicate; its gradient (x^T @ g with x sharded) is Partial in eager, and here."""
    from torch.distributed.tensor import Partial

    make = _dtensors(mesh)
    x, w = make()
    dtensor_mlp(x, w)[0].sum().backward()
    x2, w2 = make()
    jointgraph.aot_function(dtensor_mlp)(x2, w2)[0].sum().backward()
    assert isinstance(w.grad.placements[0], Partial)
    assert (w2.grad.placements, x2.grad.placements) == (w.grad.placements, x.grad.placements)


def test_dtensor_gradient_coerced_to_the_traced_placements(mesh):
    """The output is sharded; a replicated gradient is redistributed (__coerce_same_metadata_as_tangent__)."""
    from torch.distributed.tensor import Replicate, distribute_tensor

    torch.manual_seed(0)
    x, w = _dtensors(mesh)()
    out = jointgraph.aot_function(dtensor_mlp)(x, w)[0]
    torch.manual_seed(0)
    x2, w2 = _dtensors(mesh)()
    expected = dtensor_mlp(x2, w2)[0]
    grad = distribute_tensor(torch.ones(4, 5), mesh, [Replicate()])
    out.backward(grad)
    expected.backward(grad)
    assert_same([x2.grad, w2.grad], [x.grad, w.grad])


def test_dtensor_torch_compile(mesh):
    torch._dynamo.reset()
    check(dtensor_mlp, _dtensors(mesh), torch.compile(dtensor_mlp, backend="jointgraph"))


def test_dtensor_parameters_aot_module(mesh):
    from torch.distributed.tensor import Replicate, distribute_module, distribute_tensor

    def make():
        torch.manual_seed(0)
        return distribute_module(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)),
                                 mesh)

    eager, module = make(), make()
    x = distribute_tensor(torch.randn(5, 3), mesh, [Replicate()])
    _check_module(eager, module, jointgraph.aot_module(module), x)


# ### Structures


def test_nested_subclass():
    def f(x):
        return (x * 2).sin()

    check(f, lambda: (TwoTensor(two(3, requires_grad=False), two(3, requires_grad=False)).requires_grad_(),),
          jointgraph.aot_function(f))


def test_same_subclass_twice_and_shared_inner_tensors():
    def f(x, y):
        return x * y + x

    check(f, lambda: (lambda t: (t, t))(two(3)), jointgraph.aot_function(f))
    shared = torch.randn(3)
    check(f, lambda: (TwoTensor(shared, shared).requires_grad_(), two(3)), jointgraph.aot_function(f))


def test_no_grad_mode_and_dynamic_option():
    def f(x):
        return x.exp() * 2

    compiled = jointgraph.aot_function(f, dynamic=True)   # subclass entries compile with static sizes
    check(f, lambda: (two(3),), compiled)
    check(f, lambda: (two(5),), compiled)
    x = two(3)
    with torch.no_grad():
        out = compiled(x)
        assert not out.requires_grad
        assert_same(f(x), out)
