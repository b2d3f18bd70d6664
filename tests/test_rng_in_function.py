"""Seeding inside the compiled function (Note [Seeding inside the function] in ir/rng.py).

Eager is the oracle: outputs, gradients and the caller's generator state after each of
three calls, every call starting from a different global state, so a seed that ran only
at trace time (or a state captured as a constant) shows.
"""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import jointgraph


def _seeded_dropout(x, w):
    torch.manual_seed(1234)
    return F.dropout(x @ w, 0.5).sum()


def _seed_between_draws(x, w):
    a = F.dropout(x @ w, 0.3)            # draws from the caller's state
    torch.manual_seed(7)
    b = F.dropout(torch.tanh(x @ w), 0.6)
    return (a * b + torch.rand_like(a)).sum()


def _fork_rng(x, w):
    with torch.random.fork_rng():
        torch.manual_seed(11)
        noise = torch.rand_like(x)
    return (F.dropout(x + noise, 0.5) @ w).sum()   # draws from the caller's state, restored


def _get_set_state(x, w):
    state = torch.get_rng_state()
    a = F.dropout(x @ w, 0.5)
    torch.set_rng_state(state)             # b draws the same mask as a
    b = F.dropout(x @ w, 0.5)
    return (a * b).sum() + torch.bernoulli(torch.full_like(x, 0.5)).sum()


def _checkpointed_dropout(x, w):
    torch.manual_seed(5)

    def block(h):
        return F.dropout(torch.tanh(h @ w), 0.5) @ w

    return checkpoint(block, x, use_reentrant=False).relu().sum()


def _rrelu_seeded(x, w):
    torch.manual_seed(3)
    return F.rrelu(x @ w, training=True).sum()


def _default_generator_directly(x, w):
    torch.default_generator.manual_seed(21)   # the generator object itself, not torch.manual_seed
    a = F.dropout(x @ w, 0.5)
    state = torch._C.default_generator.get_state()
    b = torch.rand(a.shape, generator=torch.default_generator)
    torch._C.default_generator.set_state(state)
    return (a * b * torch.rand_like(a)).sum()   # the last draw repeats b's


FUNCTIONS = [_seeded_dropout, _seed_between_draws, _fork_rng, _get_set_state, _checkpointed_dropout, _rrelu_seeded,
             _default_generator_directly]


def _args(i):
    g = torch.Generator().manual_seed(100 + i)
    return torch.randn(6, 8, generator=g), torch.randn(8, 8, generator=g).requires_grad_()


def _run(fn, x, w, caller_seed):
    torch.manual_seed(caller_seed)
    torch.rand(caller_seed % 5 + 1)          # a different state each call
    out = fn(x, w)
    out.backward()
    grad, w.grad = w.grad, None
    return out.detach(), grad, torch.get_rng_state()


def _compile(fn, how, partitioner):
    if how == "aot_function":
        return jointgraph.aot_function(fn, partitioner=partitioner)
    torch._dynamo.reset()
    return torch.compile(fn, backend=jointgraph.backend(partitioner=partitioner))


def _assert_like_eager(fn, compiled):
    for call in range(3):
        x, w = _args(call)
        want = _run(fn, x, w, caller_seed=10 * call + 1)
        got = _run(compiled, x, w, caller_seed=10 * call + 1)
        torch.testing.assert_close(got[0], want[0], rtol=0, atol=0, msg=f"call {call}: output")
        torch.testing.assert_close(got[1], want[1], rtol=0, atol=0, msg=f"call {call}: gradient")
        assert torch.equal(got[2], want[2]), f"call {call}: the caller's generator state differs from eager's"


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_aot_function_matches_eager_over_three_calls(fn, partitioner):
    _assert_like_eager(fn, _compile(fn, "aot_function", partitioner))


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_torch_compile_matches_eager_over_three_calls(fn):
    _assert_like_eager(fn, _compile(fn, "torch.compile", "mincut"))


def test_recorded_as_graph_effects():
    """The seed and the state read / restore are ops of the forward graph, not trace-time calls."""
    plan = jointgraph.plan(_get_set_state, *_args(0))
    targets = [n.target for n in plan.forward.graph.nodes if n.op == "call_function"]
    assert torch.ops.jointgraph.rng_get_state.default in targets
    assert torch.ops.jointgraph.rng_set_state.default in targets
    plan = jointgraph.plan(_seeded_dropout, *_args(0))
    assert torch.ops.jointgraph.rng_manual_seed.default in [n.target for n in plan.forward.graph.nodes]


def test_recomputed_dropout_runs_with_the_saved_rng_state_in_the_backward():
    """A checkpointed dropout recomputed in the backward runs under run_with_rng_state (the state it
    was drawn with after the seed), so it can reproduce the forward's mask."""
    plan = jointgraph.plan(_checkpointed_dropout, *_args(0), partitioner="mincut")
    backward_targets = {str(n.target) for n in plan.backward.graph.nodes if n.op == "call_function"}
    assert any("run_with_rng_state" in t for t in backward_targets), backward_targets
    # its values equal eager's: test_aot_function_matches_eager_over_three_calls[_checkpointed_dropout-mincut]


def test_non_deterministic_seed_is_refused():
    def fn(x, w):
        torch.seed()
        return F.dropout(x @ w, 0.5).sum()

    with pytest.raises(jointgraph.UnsupportedError, match=r"torch\.seed\(\)"):
        jointgraph.aot_function(fn)(*_args(0))


def test_inductor_refuses_an_in_function_seed():
    compiled = jointgraph.aot_function(_seeded_dropout, fw_compiler="inductor", bw_compiler="inductor")
    with pytest.raises(jointgraph.UnsupportedError, match="Inductor draws its random seeds"):
        compiled(*_args(0))


def test_reading_the_state_is_not_a_trace_time_constant():
    def fn(x, w):
        return (x @ w).sum() + torch.get_rng_state()[:64].double().sum()

    _assert_like_eager(fn, jointgraph.aot_function(fn))


def test_opinfo_wrapper_set_seed_under_no_dispatch():
    """torch.testing's ``wrapper_set_seed`` reads and restores the state under ``no_dispatch()``."""
    from torch.testing._utils import wrapper_set_seed

    def fn(x, w):
        return wrapper_set_seed(F.rrelu, x @ w, training=True).sum() + torch.rand(())

    _assert_like_eager(fn, jointgraph.aot_function(fn))


def test_generator_created_inside_is_refused_by_name():
    """It would be made once, at trace time, and keep its state from call to call."""
    def fn(x, w):
        g = torch.Generator().manual_seed(3)
        return (x @ w * torch.rand(6, 8, generator=g)).sum()

    with pytest.raises(jointgraph.UnsupportedError, match=r"(?s)torch\.Generator\(\) created inside.*test_rng_in"):
        jointgraph.aot_function(fn)(*_args(0))


def test_generator_from_outside_draws_at_run_time():
    generator = torch.Generator()

    def fn(x, w):
        return (x @ w * torch.rand(6, 8, generator=generator)).sum()

    compiled = jointgraph.aot_function(fn)
    for call in range(3):
        x, w = _args(call)
        generator.manual_seed(call)
        want = fn(x, w)
        generator.manual_seed(call)
        torch.testing.assert_close(compiled(x, w), want, rtol=0, atol=0)


def test_another_thread_uses_the_real_generators_while_tracing():
    """The stand-ins act as the real generator and class for every thread but the tracing one."""
    import threading

    seen = {}

    def other_thread():
        seen["generator"] = torch.Generator().manual_seed(5).initial_seed()
        torch.default_generator.manual_seed(9)
        seen["draw"] = torch.rand(3)
        seen["is_generator"] = isinstance(torch.default_generator, torch.Generator)

    def fn(x, w):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        return (x @ w).sum()

    jointgraph.aot_function(fn)(*_args(0))
    assert seen["generator"] == 5 and seen["is_generator"]
    torch.manual_seed(9)
    torch.testing.assert_close(seen["draw"], torch.rand(3), rtol=0, atol=0)


class _Seeded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.generator = torch.Generator()

    def forward(self, x):
        self.generator.manual_seed(11)
        return self.linear(x) * torch.rand(8, generator=self.generator)


def _seeded_in_closure():
    generator = torch.Generator()

    def fn(x, w):
        generator.manual_seed(5)
        return (x @ w * torch.rand(6, 8, generator=generator)).sum()

    return fn, generator


@pytest.mark.parametrize("where", ["closure", "argument", "module"])
def test_outside_generator_seeded_inside_is_refused_by_name(where):
    """Its seed would act once, at trace time (silently wrong on later calls): refused, naming it, and
    the generator is left in the state it had."""
    if where == "closure":
        fn, generator = _seeded_in_closure()
        compiled, args, name = jointgraph.aot_function(fn), _args(0), "'generator'"
    elif where == "argument":
        generator = torch.Generator()

        def fn(x, w, g):
            g.manual_seed(3)
            return (x @ w * torch.rand(6, 8, generator=g)).sum()

        compiled, args, name = jointgraph.aot_function(fn), (*_args(0), generator), "argument"
    else:
        module = _Seeded()
        generator = module.generator
        compiled, args, name = jointgraph.aot_module(module), (torch.randn(4, 8),), "generator"
    generator.manual_seed(123)
    before = generator.get_state()
    with pytest.raises(jointgraph.UnsupportedError, match=f"seeds or sets the state of the generator .*{name}"):
        compiled(*args)
    assert torch.equal(generator.get_state(), before)


def test_outside_generator_seeded_inside_equals_eager_when_run_eagerly_or_by_dynamo():
    """Three calls against eager: on_unsupported="eager" runs it eagerly; torch.compile graph-breaks at
    the seed (Dynamo runs it) and draws from the generator in our graph."""
    fn, generator = _seeded_in_closure()
    torch._dynamo.reset()
    for compiled in (jointgraph.aot_function(fn, on_unsupported="eager"), torch.compile(fn, backend="jointgraph")):
        for call in range(3):
            x, w = _args(call)
            generator.manual_seed(100 + call)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = compiled(x, w)
            after = generator.get_state()
            generator.manual_seed(100 + call)
            torch.testing.assert_close(got, fn(x, w), rtol=0, atol=0)
            assert torch.equal(after, generator.get_state())
