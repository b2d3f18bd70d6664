"""Autograd hooks registered inside the compiled function (Note [Hooks inside the function] in
ir/hook_ops.py). Eager is the oracle: each case runs eager and compiled over three calls on
fresh inputs, and compares outputs, gradients and what the hooks recorded (the gradients
they saw, in the order they saw them).
"""

from __future__ import annotations

import logging
import shutil

import pytest
import torch

import jointgraph
import jointgraph.cache as jg_cache
from jointgraph.ir import verify
from jointgraph.ir.hook_ops import is_hook_call

PARTITIONERS = [{"partitioner": "default"}, {"partitioner": "mincut"},
                {"partitioner": "budget", "memory_budget": 0.5}]


def _args(call: int):
    g = torch.Generator().manual_seed(call)
    return [torch.randn(4, 5, generator=g, requires_grad=True), torch.randn(5, 3, generator=g, requires_grad=True)]


def _run(fn, args, log):
    """Forward and backward once; (output, gradients, what the hooks logged)."""
    del log[:]
    out = fn(*args)
    out.backward()
    return out.detach(), [a.grad for a in args], list(log)


def _assert_like_eager(make, compile_fn, calls: int = 3, *, hooks_as=None):
    """``make(log)`` builds the user's function writing to ``log``; eager and compiled agree on
    every call (fresh inputs each call). ``hooks_as``: what the hooks saw is compared with this
    other compiled run instead of eager."""
    eager_log, compiled_log, other_log = [], [], []
    eager, compiled = make(eager_log), compile_fn(make(compiled_log))
    other = hooks_as(make(other_log)) if hooks_as is not None else None
    for call in range(calls):
        want = _run(eager, _args(call), eager_log)
        got = _run(compiled, _args(call), compiled_log)
        if other is not None:
            want = (*want[:2], _run(other, _args(call), other_log)[2])
        torch.testing.assert_close(got[0], want[0], msg=f"call {call}: output")
        for a, b in zip(got[1], want[1], strict=True):
            torch.testing.assert_close(a, b, msg=f"call {call}: gradient")
        assert len(got[2]) == len(want[2]) > 0, f"call {call}: hooks ran {len(got[2])} times, eager {len(want[2])}"
        for (tag_a, a), (tag_b, b) in zip(got[2], want[2], strict=True):
            assert tag_a == tag_b, f"call {call}: hook order {[t for t, _ in got[2]]} != {[t for t, _ in want[2]]}"
            torch.testing.assert_close(a, b, msg=f"call {call}: gradient seen by hook {tag_a}")


def _scaling_hook(log):
    def hook(g):
        log.append(("y", g.clone()))
        return g * 3   # a returned tensor replaces the gradient

    def fn(x, w):
        y = torch.tanh(x @ w)
        y.register_hook(hook)
        return (y * y).sum() + y.mean()
    return fn


def _two_hooks_one_tensor(log):
    def fn(x, w):
        y = x @ w
        y.register_hook(lambda g: log.append(("first", g.clone())) or g + 1)
        y.register_hook(lambda g: log.append(("second", g.clone())))   # sees the first's result
        return y.sigmoid().sum()
    return fn


def _hooks_on_a_chain(log):
    def fn(x, w):
        a = torch.relu(x @ w)
        b = a.exp()
        a.register_hook(lambda g: log.append(("a", g.clone())))
        b.register_hook(lambda g: log.append(("b", g.clone())) or g * 0.5)
        return (b.sum(1) * a.sum(1)).sum()
    return fn


def _hook_on_inputs(log):
    def fn(x, w):
        x.register_hook(lambda g: log.append(("x", g.clone())) or g * 2)   # x.grad gets the replacement
        w.register_post_accumulate_grad_hook(lambda p: log.append(("w.grad", p.grad.clone())))
        return (x @ w).cos().sum()
    return fn


def _removed_hook(log):
    def fn(x, w):
        y = x @ w
        y.register_hook(lambda g: log.append(("kept", g.clone())))
        y.register_hook(lambda g: log.append(("removed", g.clone()))).remove()
        handle = x.register_hook(lambda g: log.append(("removed x", g.clone())))
        handle.remove()
        return y.pow(2).sum()
    return fn


CASES = [_scaling_hook, _two_hooks_one_tensor, _hooks_on_a_chain, _hook_on_inputs, _removed_hook]


@pytest.mark.parametrize("options", PARTITIONERS, ids=lambda o: o["partitioner"])
@pytest.mark.parametrize("make", CASES, ids=["scaling", "two_hooks", "chain", "inputs", "removed"])
def test_aot_function_runs_hooks_at_every_backward(make, options):
    _assert_like_eager(make, lambda fn: jointgraph.aot_function(fn, **options))


@pytest.mark.parametrize("make", CASES, ids=["scaling", "two_hooks", "chain", "inputs", "removed"])
def test_torch_compile_matches_eager(make):
    """Outputs and gradients are eager's. Dynamo graph-breaks at a hook on an intermediate (keeping
    one in its graph needs compiled autograd) and registers it outside its graphs; two hooked
    outputs of one graph then run in output order, each on its gradient from later graphs only
    (the ``chain`` case): what the hooks see is what they see with PyTorch's own backend."""
    torch._dynamo.reset()
    _assert_like_eager(make, lambda fn: torch.compile(fn, backend="jointgraph"),
                       hooks_as=lambda fn: torch.compile(fn, backend="aot_eager"))


@pytest.mark.parametrize("options", PARTITIONERS, ids=lambda o: o["partitioner"])
def test_hook_call_is_a_backward_node_kept_by_every_partitioner(options):
    fn = _hooks_on_a_chain([])
    plan = jointgraph.plan(fn, *_args(0), **options)
    assert not [n for n in plan.forward.graph.nodes if is_hook_call(n)]
    calls = [n for n in plan.backward.graph.nodes if is_hook_call(n)]
    assert sorted(n.args[1] for n in calls) == [0, 1]
    assert all(n.users for n in calls), "the (possibly replaced) gradient feeds the rest of the backward"
    verify(plan.forward.graph)
    verify(plan.backward.graph)


def test_module_hook_on_an_activation():
    class Net(torch.nn.Module):
        def __init__(self, log):
            super().__init__()
            self.fc1, self.fc2, self.log = torch.nn.Linear(5, 8), torch.nn.Linear(8, 2), log

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            h.register_hook(lambda g: self.log.append(g.clone()))
            return self.fc2(h).square().mean()

    eager_log, compiled_log = [], []
    torch.manual_seed(0)
    eager = Net(eager_log)
    model = Net(compiled_log)
    model.load_state_dict(eager.state_dict())
    compiled = jointgraph.aot_module(model)
    for call in range(3):
        x = torch.randn(4, 5, generator=torch.Generator().manual_seed(call))
        eager(x).backward()
        compiled(x).backward()
        assert len(compiled_log) == len(eager_log) == call + 1
        torch.testing.assert_close(compiled_log[-1], eager_log[-1])
        for p, q in zip(model.parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)


def test_hook_on_an_output_the_backward_does_not_reach_does_not_run():
    """Note [Hooks eager does not reach]: only the second output is differentiated."""
    def make(log):
        def fn(x, w):
            y = x @ w
            y.register_hook(lambda g: log.append(g.clone()))
            return y, (x * 2).sum()
        return fn

    for compile_fn in (lambda f: f, jointgraph.aot_function):   # eager, then compiled
        log = []
        fn = compile_fn(make(log))
        x, w = _args(0)
        for _ in range(2):
            fn(x, w)[1].backward()
        assert log == []
        fn(x, w)[0].sum().backward()
        assert len(log) == 1


def test_hook_on_a_branch_autograd_grad_does_not_need():
    """``torch.autograd.grad(loss, [x])`` does not reach a hook on w's branch, in eager."""
    def make(log):
        def fn(x, w):
            a = x.sin()
            b = w.cos()
            a.register_hook(lambda g: log.append(("a", g.clone())))
            b.register_hook(lambda g: log.append(("b", g.clone())))
            return (a @ b).sum()
        return fn

    eager_log, compiled_log = [], []
    eager, compiled = make(eager_log), jointgraph.aot_function(make(compiled_log))
    x, w = _args(0)
    want = torch.autograd.grad(eager(x, w), [x])
    got = torch.autograd.grad(compiled(x, w), [x])
    torch.testing.assert_close(got, want)
    assert [t for t, _ in compiled_log] == [t for t, _ in eager_log] == ["a"]


def test_input_hooks_stay_registered_as_in_eager():
    """A hook registered on a leaf at every call stays on it: the n-th backward runs n of them."""
    def make(log):
        def fn(x, w):
            w.register_hook(lambda g: log.append(("w", g.clone())))
            return (x @ w).sum()
        return fn

    eager_log, compiled_log = [], []
    eager, compiled = make(eager_log), jointgraph.aot_function(make(compiled_log))
    x, w = _args(0)
    w2 = w.detach().clone().requires_grad_()
    for _ in range(3):
        eager(x, w).backward()
        compiled(x, w2).backward()
    assert len(compiled_log) == len(eager_log) == 1 + 2 + 3
    torch.testing.assert_close(w2.grad, w.grad)


def test_retain_grad_on_an_input():
    def fn(x, w):
        x.retain_grad()
        return (x @ w).sum()

    x, w = _args(0)
    base = x.detach().clone().requires_grad_()
    for run in (fn, jointgraph.aot_function(fn)):
        inner = base * 1   # a non-leaf: retain_grad makes its .grad appear
        run(inner, w).backward()
        torch.testing.assert_close(inner.grad, w.detach().sum(1).expand(4, 5))


@pytest.mark.parametrize("what", ["retain_grad", "post_accumulate"])
def test_intermediate_retain_grad_and_post_accumulate_are_refused_or_eager_errors(what):
    def fn(x, w):
        y = x @ w
        if what == "retain_grad":
            y.retain_grad()
        else:
            y.register_post_accumulate_grad_hook(lambda p: None)
        return y.sum()

    if what == "retain_grad":
        with pytest.raises(jointgraph.UnsupportedError, match=r"(?s)retain_grad on a tensor computed.*test_hooks"):
            jointgraph.aot_function(fn)(*_args(0))
    else:   # eager's own error
        with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf"):
            fn(*_args(0))
        with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf"):
            jointgraph.aot_function(fn)(*_args(0))


def test_hook_reading_a_traced_tensor_is_refused():
    def fn(x, w):
        y = x @ w
        mask = y > 0
        y.register_hook(lambda g: g * mask)   # mask would be the trace's fake tensor at run time
        return y.sum()

    with pytest.raises(jointgraph.UnsupportedError, match=r"reads the tensor 'mask'"):
        jointgraph.aot_function(fn)(*_args(0))


def test_hook_on_an_input_modified_in_place_is_refused():
    def fn(x, w):
        x.mul_(2)
        x.register_hook(lambda g: g)
        return (x @ w).sum()

    x, w = _args(0)
    with pytest.raises(jointgraph.UnsupportedError, match="after the function modified it in place"):
        jointgraph.aot_function(fn)(x * 1, w)


def test_hook_changing_the_size_raises_like_eager():
    def fn(x, w):
        y = x @ w
        y.register_hook(lambda g: g[:1])
        return y.sum()

    with pytest.raises(RuntimeError, match="has changed the size of value"):
        fn(*_args(0)).backward()
    with pytest.raises(RuntimeError, match="has changed the size of value"):
        jointgraph.aot_function(fn)(*_args(0)).backward()


def test_hook_on_a_tensor_without_grad_raises_like_eager():
    def fn(x, w):
        y = (x @ w).detach()
        y.register_hook(lambda g: g)
        return y.sum()

    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        jointgraph.aot_function(fn)(*_args(0))


def test_entry_with_hooks_bypasses_the_disk_cache(tmp_path, caplog, fresh_cache_reports):
    caplog.set_level(logging.INFO, logger="jointgraph.cache")
    make = _scaling_hook
    for _ in range(2):   # a fresh compiled function each time: only the disk could help
        log = []
        out = jointgraph.aot_function(make(log), cache=str(tmp_path))(*_args(0))
        out.backward()
        assert len(log) == 1
    bypassed = [r.getMessage() for r in caplog.records if "hooks inside" in r.getMessage()]
    assert len(bypassed) == 1, bypassed   # logged once
    assert "store" not in [e[2] for e in jg_cache.DiskStore(tmp_path).events()]


class _IgnoresItsGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        return y * 2

    @staticmethod
    def backward(ctx, grad):
        return torch.ones_like(grad)


def test_hook_whose_result_nothing_reads_still_runs():
    def make(log):
        def fn(x, w):
            z = _IgnoresItsGradient.apply(x @ w)
            z.register_hook(lambda g: log.append(("z", g.clone())))
            return z.sum()
        return fn

    _assert_like_eager(make, jointgraph.aot_function, calls=2)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="Inductor's CPU backend needs a C++ compiler")
def test_inductor_backward_runs_the_hook_op():
    _assert_like_eager(_scaling_hook, lambda fn: jointgraph.aot_function(fn, bw_compiler="inductor"), calls=2)


def test_multi_grad_hook_any_mode_runs_once_per_backward():
    def make(log):
        def fn(x, w):
            a = x @ w
            b = a.sin()
            torch.autograd.graph.register_multi_grad_hook((a, b), lambda g: log.append(("first", g.clone())),
                                                          mode="any")
            return (a * b).sum()
        return fn

    _assert_like_eager(make, jointgraph.aot_function)


def test_multi_grad_hook_all_mode_is_refused_by_name():
    """Its hooks count the trace's autograd nodes, which no run-time backward executes."""
    def fn(x, w):
        a = x @ w
        torch.autograd.graph.register_multi_grad_hook((a, a.sin()), lambda grads: None)
        return a.sum()

    with pytest.raises(jointgraph.UnsupportedError, match="register_multi_grad_hook"):
        jointgraph.aot_function(fn)(*_args(0))


def test_module_backward_hooks_are_refused_by_name():
    """They are set up on grad_fn objects while the module runs: traced, they would run once."""
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh())
    model[1].register_full_backward_hook(lambda module, grad_in, grad_out: None)
    with pytest.raises(jointgraph.UnsupportedError, match="backward hooks on module Tanh"):
        jointgraph.aot_module(model, cache=False)(torch.randn(3, 5))
    with pytest.raises(jointgraph.UnsupportedError, match="backward hooks on module Tanh"):
        jointgraph.aot_function(lambda x: model(x).sum(), cache=False)(torch.randn(3, 5))
