"""The peak-memory simulator: hand-built graphs with peaks computed from shapes, and measured peaks."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx

import jointgraph
from jointgraph.bench.gpt import GPT, GPTConfig
from jointgraph.bench.measure import memtracker_peak
from jointgraph.bench.zoo import TrainStep, lm_loss
from jointgraph.ir import Role
from jointgraph.planner.simulate import simulate

aten = torch.ops.aten


# ---------------------------------------------------------------- hand-built graphs

def _input(graph: torch.fx.Graph, name: str, shape, role: Role, dtype=torch.float32) -> torch.fx.Node:
    node = graph.placeholder(name)
    node.meta.update(val=torch.empty(shape, dtype=dtype, device="meta"), role=role)
    return node


def _call(graph: torch.fx.Graph, op, *args) -> torch.fx.Node:
    node = graph.call_function(op, args)
    vals = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
    node.meta["val"] = op(*vals)
    return node


def _module(graph: torch.fx.Graph, outputs: list, roles: list[Role]) -> torch.fx.GraphModule:
    out = graph.output(tuple(outputs))
    out.meta["roles"] = roles
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _nbytes(node: torch.fx.Node) -> int:
    val = node.meta["val"]
    return val.numel() * val.element_size()


def test_views_share_their_base_storage():
    graph = torch.fx.Graph()
    x = _input(graph, "x", (256, 64), Role.PRIMAL)
    a = _call(graph, aten.sin.default, x)
    b = _call(graph, aten.view.default, a, [64, 256])
    c = _call(graph, aten.t.default, b)
    d = _call(graph, aten.cos.default, c)
    loss = _call(graph, aten.sum.default, d)
    forward = _module(graph, [loss], [Role.USER_OUTPUT])

    result = simulate(forward, None)
    # x, a (shared by its views b and c) and d are live together when cos runs.
    assert result.peak_bytes == _nbytes(x) + _nbytes(a) + _nbytes(d)
    assert [name for _, name, _ in result.timeline] == [n.name for n in (a, b, c, d, loss)]
    # a died after cos; when the sum runs, x, d and the loss are live.
    assert result.timeline[-1][2] == _nbytes(x) + _nbytes(d) + _nbytes(loss)


def test_multi_output_views_keep_their_base_alive():
    graph = torch.fx.Graph()
    x = _input(graph, "x", (128, 64), Role.PRIMAL)
    a = _call(graph, aten.sin.default, x)
    parts = _call(graph, aten.split.Tensor, a, 32)
    second = _call(graph, operator.getitem, parts, 1)
    b = _call(graph, aten.cos.default, second)
    loss = _call(graph, aten.sum.default, b)
    forward = _module(graph, [loss], [Role.USER_OUTPUT])

    result = simulate(forward, None)
    # split and getitem allocate nothing; a lives until cos reads its second half.
    assert result.peak_bytes == _nbytes(x) + _nbytes(a) + _nbytes(b)
    assert dict((name, live) for _, name, live in result.timeline)[loss.name] == (
        _nbytes(x) + _nbytes(b) + _nbytes(loss))


def test_training_step_frees_saved_tensors_and_keeps_gradients():
    n = 4096
    fw = torch.fx.Graph()
    x = _input(fw, "x", (n,), Role.PRIMAL)
    w = _input(fw, "w", (n,), Role.PARAMETER)
    a = _call(fw, aten.mul.Tensor, x, w)
    s = _call(fw, aten.sin.default, a)
    loss = _call(fw, aten.sum.default, s)
    forward = _module(fw, [loss, a, w], [Role.USER_OUTPUT, Role.SAVED_TENSOR, Role.SAVED_TENSOR])

    bw = torch.fx.Graph()
    a_in = _input(bw, "a", (n,), Role.SAVED_TENSOR)
    w_in = _input(bw, "w", (n,), Role.SAVED_TENSOR)
    tangent = _input(bw, "tangent", (), Role.TANGENT)
    e = _call(bw, aten.expand.default, tangent, [n])
    c = _call(bw, aten.cos.default, a_in)
    g = _call(bw, aten.mul.Tensor, e, c)
    grad_w = _call(bw, aten.mul.Tensor, g, w_in)
    backward = _module(bw, [grad_w, None], [Role.GRADIENT, Role.GRADIENT])

    result = simulate(forward, backward)
    vec, scalar = _nbytes(x), _nbytes(loss)
    inputs = 2 * vec
    expected = {
        ("forward", a.name): inputs + vec,                   # a
        ("forward", s.name): inputs + 2 * vec,               # a, s
        ("forward", loss.name): inputs + 2 * vec + scalar,   # s dies after the sum
        ("backward", e.name): inputs + vec + scalar,         # loss dropped, tangent in; expand is a view
        ("backward", c.name): inputs + 2 * vec + scalar,     # a (saved) dies after cos
        ("backward", g.name): inputs + 2 * vec + scalar,     # c and tangent die after mul
        ("backward", grad_w.name): inputs + 2 * vec,         # the gradient stays
    }
    assert {(phase, name): live for phase, name, live in result.timeline} == expected
    assert result.peak_bytes == max(expected.values())


def test_saved_view_of_an_input_costs_nothing():
    n = 1024
    fw = torch.fx.Graph()
    w = _input(fw, "w", (n, 4), Role.PARAMETER)
    wt = _call(fw, aten.t.default, w)
    loss = _call(fw, aten.sum.default, wt)
    forward = _module(fw, [loss, wt], [Role.USER_OUTPUT, Role.SAVED_TENSOR])
    bw = torch.fx.Graph()
    wt_in = _input(bw, "wt", (4, n), Role.SAVED_TENSOR)
    tangent = _input(bw, "tangent", (), Role.TANGENT)
    grad = _call(bw, aten.mul.Tensor, wt_in, tangent)
    backward = _module(bw, [grad], [Role.GRADIENT])

    result = simulate(forward, backward)
    assert result.peak_bytes == 2 * _nbytes(w) + _nbytes(loss)


# ---------------------------------------------------------------- measured peaks

def _measured_peak(step: torch.nn.Module, compiled, *args) -> int:
    return memtracker_peak(step, compiled, *args)


def _mlp_step():
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 2048),
                                torch.nn.ReLU(), torch.nn.Linear(2048, 64))
    return TrainStep(model, lm_loss), torch.randn(512, 512), torch.randint(0, 64, (512,))


def _gpt_step():
    config = GPTConfig(layers=2, d_model=128, heads=4, vocab=512, seq=128)
    return TrainStep(GPT(config), lm_loss), torch.randint(0, 512, (4, 128)), torch.randint(0, 512, (4, 128))


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
@pytest.mark.parametrize("make_step", [_mlp_step, _gpt_step], ids=["mlp", "gpt"])
def test_simulated_peak_matches_measured_peak(make_step, partitioner):
    step, x, target = make_step()
    compiled = jointgraph.aot_module(step, partitioner=partitioner)
    compiled(x, target).backward()  # compile outside the tracker
    plan = jointgraph.plan(step, x, target, partitioner=partitioner)
    measured = _measured_peak(step, compiled, x, target)
    assert plan.peak_bytes > 1_000_000
    # MemTracker has counted 8 bytes more than the simulator on every model tried: allow 1 KiB, not a fraction
    assert abs(measured - plan.peak_bytes) <= 1024, (measured, plan.peak_bytes)


def test_symbolic_sizes_use_hints():
    step = TrainStep(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 8)),
                     lm_loss)
    x, target = torch.randn(32, 64), torch.randint(0, 8, (32,))
    static = jointgraph.plan(step, x, target, partitioner="default")
    dynamic = jointgraph.plan(step, x, target, partitioner="default", dynamic=True)
    assert dynamic.peak_bytes == static.peak_bytes
