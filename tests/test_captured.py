"""Tensors and modules captured from closures and globals are lifted into graph inputs
(Note [Captured tensors] in jointgraph/capture/captured.py); eager PyTorch is the oracle."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import jointgraph

GLOBAL_WEIGHT = torch.randn(4, 3, requires_grad=True)


def _read_global_weight(x):
    return (x @ GLOBAL_WEIGHT).tanh().sum()


def _grads(module: nn.Module) -> list:
    return [p.grad.clone() for p in module.parameters()]


def test_closure_over_module_matches_eager_for_three_optimizer_steps():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    twin = copy.deepcopy(model)
    compiled = jointgraph.aot_function(lambda x: twin(x).pow(2).sum())
    opt_e, opt_c = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(5, 4)
        loss_e, loss_c = model(x).pow(2).sum(), compiled(x)
        loss_e.backward()
        loss_c.backward()
        torch.testing.assert_close(loss_c, loss_e)
        for g_c, g_e in zip(_grads(twin), _grads(model), strict=True):
            torch.testing.assert_close(g_c, g_e)
        opt_e.step(), opt_c.step()
        opt_e.zero_grad(), opt_c.zero_grad()
    assert len(compiled.entries) == 1


def test_loss_closing_over_labels_and_model():
    model = nn.Linear(6, 3)
    twin = copy.deepcopy(model)
    labels = torch.tensor([0, 2, 1, 2])
    x = torch.randn(4, 6, requires_grad=True)
    x_c = x.detach().clone().requires_grad_(True)
    compiled = jointgraph.aot_function(lambda inputs: F.cross_entropy(twin(inputs), labels))
    loss_e, loss_c = F.cross_entropy(model(x), labels), compiled(x_c)
    loss_e.backward()
    loss_c.backward()
    torch.testing.assert_close(loss_c, loss_e)
    torch.testing.assert_close(x_c.grad, x.grad)
    torch.testing.assert_close(twin.weight.grad, model.weight.grad)
    labels[:] = torch.tensor([1, 1, 0, 0])   # updated in place: the next call reads the new labels
    torch.testing.assert_close(compiled(x_c), F.cross_entropy(model(x), labels))


def test_function_reading_a_global_weight():
    x = torch.randn(2, 4)
    expected = _read_global_weight(x)
    (grad_e,) = torch.autograd.grad(expected, GLOBAL_WEIGHT)
    compiled = jointgraph.aot_function(_read_global_weight)
    out = compiled(x)
    out.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(GLOBAL_WEIGHT.grad, grad_e)
    GLOBAL_WEIGHT.grad = None


def test_rebinding_a_global_reads_the_new_tensor_or_recompiles():
    global GLOBAL_WEIGHT
    old = GLOBAL_WEIGHT
    compiled = jointgraph.aot_function(_read_global_weight)
    x = torch.randn(2, 4)
    try:
        torch.testing.assert_close(compiled(x), _read_global_weight(x))
        GLOBAL_WEIGHT = torch.randn(4, 3, requires_grad=True)   # same metadata: read, no recompile
        out = compiled(x)
        torch.testing.assert_close(out, _read_global_weight(x))
        out.backward()
        assert GLOBAL_WEIGHT.grad is not None and old.grad is None
        assert len(compiled.entries) == 1
        GLOBAL_WEIGHT = torch.randn(4, 5, dtype=torch.float64)   # other metadata: compiles again
        x64 = x.double()
        torch.testing.assert_close(compiled(x64), _read_global_weight(x64))
        assert len(compiled.entries) == 2
    finally:
        GLOBAL_WEIGHT = old


def test_rebinding_a_closed_over_modules_parameter():
    model = nn.Linear(3, 3)
    compiled = jointgraph.aot_function(lambda x: model(x))
    x = torch.randn(2, 3)
    compiled(x)
    model.weight = nn.Parameter(torch.eye(3))
    torch.testing.assert_close(compiled(x), model(x))
    assert len(compiled.entries) == 1


def test_closed_over_batchnorm_updates_its_running_stats():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).train()
    twin = copy.deepcopy(model)
    compiled = jointgraph.aot_function(lambda x: twin(x).relu().sum())
    for _ in range(2):
        x = torch.randn(8, 4)
        loss_e, loss_c = model(x).relu().sum(), compiled(x)
        loss_e.backward()
        loss_c.backward()
        torch.testing.assert_close(loss_c, loss_e)
    for name, buffer in model.named_buffers():
        torch.testing.assert_close(dict(twin.named_buffers())[name], buffer, msg=name)
    for g_c, g_e in zip(_grads(twin), _grads(model), strict=True):
        torch.testing.assert_close(g_c, g_e)
    model.eval(), twin.eval()   # the training flag is guarded: eval() compiles again
    x = torch.randn(8, 4)
    torch.testing.assert_close(compiled(x), model(x).relu().sum())
    assert len(compiled.entries) == 2


def test_bound_method_of_a_module():
    model = nn.Linear(4, 2)
    twin = copy.deepcopy(model)
    x = torch.randn(3, 4)
    model(x).sum().backward()
    jointgraph.aot_function(twin.forward)(x).sum().backward()
    torch.testing.assert_close(twin.weight.grad, model.weight.grad)
    torch.testing.assert_close(twin.bias.grad, model.bias.grad)


def test_captured_tensor_also_passed_as_an_argument_is_one_input():
    w = torch.randn(3, requires_grad=True)
    compiled = jointgraph.aot_function(lambda a: (a * w).sum())
    compiled(w).backward()
    torch.testing.assert_close(w.grad, 2 * w.detach())
    assert len(compiled.entries[0].plan.forward.graph.find_nodes(op="placeholder")) == 1


def test_captured_intermediate_keeps_its_history():
    a = torch.randn(3, requires_grad=True)
    h = a.exp()   # not a leaf: the gradient flows on into a
    compiled = jointgraph.aot_function(lambda x: (x * h).sum())
    compiled(torch.ones(3)).backward()
    torch.testing.assert_close(a.grad, a.detach().exp())


def test_direct_aten_call_on_a_captured_tensor():
    w = torch.randn(3, requires_grad=True)
    compiled = jointgraph.aot_function(lambda x: torch.ops.aten.mul.Tensor(x, w).sum())
    compiled(torch.full((3,), 2.0)).backward()
    torch.testing.assert_close(w.grad, torch.full((3,), 2.0))


def test_module_forward_reading_a_global_through_aot_module():
    class Scaled(nn.Linear):
        def forward(self, x):
            return super().forward(x) * GLOBAL_WEIGHT[0, 0]

    model = Scaled(4, 2)
    twin = copy.deepcopy(model)
    x = torch.randn(3, 4)
    model(x).sum().backward()
    grad_e = GLOBAL_WEIGHT.grad.clone()
    GLOBAL_WEIGHT.grad = None
    out = jointgraph.aot_module(twin)(x)
    out.sum().backward()
    torch.testing.assert_close(out, model(x))
    torch.testing.assert_close(twin.weight.grad, model.weight.grad)
    torch.testing.assert_close(GLOBAL_WEIGHT.grad, grad_e)
    GLOBAL_WEIGHT.grad = None


def test_captured_tensors_keep_static_sizes_under_dynamic():
    w = torch.randn(4)
    compiled = jointgraph.aot_function(lambda x: x * w, dynamic=True)
    for rows in (2, 3, 5):
        x = torch.randn(rows, 4)
        torch.testing.assert_close(compiled(x), x * w)
    assert len(compiled.entries) == 1


class _Marked(torch.Tensor):
    pass


def test_captured_tensor_subclass_is_refused_by_name():
    w = torch.Tensor._make_subclass(_Marked, torch.randn(3))
    with pytest.raises(jointgraph.UnsupportedError, match="_Marked"):
        jointgraph.aot_function(lambda x: x + w)(torch.randn(3))


def test_captured_sparse_tensor_is_refused_and_can_run_eagerly():
    w = torch.eye(3).to_sparse()
    with pytest.raises(jointgraph.UnsupportedError, match="sparse"):
        jointgraph.aot_function(lambda x: torch.sparse.mm(w, x))(torch.randn(3, 2))
    x = torch.randn(3, 2)
    with pytest.warns(UserWarning, match="eagerly"):
        out = jointgraph.aot_function(lambda x: torch.sparse.mm(w, x), on_unsupported="eager")(x)
    torch.testing.assert_close(out, x)


def test_plan_of_a_function_with_captured_tensors():
    model = nn.Linear(4, 2)
    plan = jointgraph.plan(lambda x: model(x).sum(), torch.randn(3, 4))
    assert plan.backward is not None


def test_real_tensor_left_in_a_dynamo_graph_is_refused_by_name():
    from jointgraph.dynamo import compile_dynamo_graph
    from jointgraph.options import CompileOptions

    class WithConstant(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.randn(3)

        def forward(self, x):
            return (x * self.scale,)

    gm = torch.fx.symbolic_trace(WithConstant())
    with pytest.raises(jointgraph.UnsupportedError, match="real tensors that are not graph inputs"):
        compile_dynamo_graph(gm, [torch.randn(3, requires_grad=True)], CompileOptions())


def test_real_tensor_read_in_a_custom_backward_is_refused_by_name():
    scale = torch.randn(3)

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * scale

    with pytest.raises(jointgraph.UnsupportedError, match="cannot be lifted"):
        jointgraph.aot_function(lambda x: Scaled.apply(x).sum())(torch.randn(3, requires_grad=True))
