"""Activation checkpointing and RNG replay (Note [Activation checkpointing]), eager as the oracle."""

import functools

import pytest
import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

import jointgraph

aten = torch.ops.aten


def _block(x, w):
    return torch.tanh(x @ w).relu() * 2


def _two_regions(x, w1, w2):
    h = checkpoint(_block, x, w1, use_reentrant=False)
    return checkpoint(_block, h, w2, use_reentrant=False).sum()


def _args():
    return torch.randn(8, 16), torch.randn(16, 16, requires_grad=True), torch.randn(16, 16, requires_grad=True)


def _compile(fn, how, partitioner):
    if how == "aot_function":
        return jointgraph.aot_function(fn, partitioner=partitioner)
    torch._dynamo.reset()
    return torch.compile(fn, backend=jointgraph.backend(partitioner=partitioner))


def _plans(fn, how, partitioner, *args):
    """The Plan of fn on args, through aot_function or through torch.compile's backend."""
    if how == "aot_function":
        return jointgraph.plan(fn, *args, partitioner=partitioner)
    torch._dynamo.reset()
    captured = []
    inner = jointgraph.backend(partitioner=partitioner)

    def backend(gm, example_inputs):
        compiled = inner(gm, example_inputs)
        captured.append(compiled.plan)
        return compiled

    torch.compile(fn, backend=backend)(*args)
    return captured[0]


@pytest.mark.parametrize("how", ["aot_function", "torch.compile"])
@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_checkpointed_regions_are_recomputed_and_keep_their_boundary(how, partitioner):
    x, w1, w2 = _args()
    plan = _plans(_two_regions, how, partitioner, x, w1, w2)
    saved = {s.name: s for s in plan.saved if s.decision is jointgraph.Decision.SAVE}
    # Only the regions' inputs cross: x, the weights, and the boundary tensor between the regions.
    activations = [s for s in saved.values() if s.nbytes > 0]
    assert len(activations) == 1 and activations[0].shape == (8, 16)
    backward_ops = [n.target for n in plan.backward.graph.nodes]
    assert backward_ops.count(aten.tanh.default) == 2            # both regions recomputed
    # gradients equal eager's
    grads_e = torch.autograd.grad(_two_regions(x, w1, w2), (w1, w2))
    out = _compile(_two_regions, how, partitioner)(x, w1, w2)
    grads_c = torch.autograd.grad(out, (w1, w2))
    for e, c in zip(grads_e, grads_c, strict=True):
        torch.testing.assert_close(c, e)


def _dropout_region(x, w):
    return torch.nn.functional.dropout(torch.tanh(x @ w), p=0.5, training=True)


def _with_dropout(x, w):
    return checkpoint(_dropout_region, x, w, use_reentrant=False)


@pytest.mark.parametrize("how", ["aot_function", "torch.compile"])
def test_recomputed_dropout_replays_the_forward_randomness(how):
    x, w, _ = _args()
    compiled = _compile(_with_dropout, how, "mincut")
    for _ in range(3):   # the replay must hold on every call, not just the traced one
        out = compiled(x, w)
        (grad,) = torch.autograd.grad(out.sum(), w)
        dropped = out == 0
        assert 0 < dropped.float().mean() < 1   # dropout really dropped some, not all
        # d out / d (x @ w) is zero exactly where dropout zeroed the output
        expected = x.t() @ ((1 - torch.tanh(x @ w) ** 2) * (~dropped) * 2.0)
        torch.testing.assert_close(grad, expected)
    plan = _plans(_with_dropout, how, "mincut", x, w)
    assert any(n.target is torch._prims.rng_prims.run_with_rng_state for n in plan.backward.graph.nodes)


def test_recomputed_dropout_matches_eager_under_the_same_seed():
    x, w, _ = _args()
    torch.manual_seed(7)
    out_e = _with_dropout(x, w)
    (grad_e,) = torch.autograd.grad(out_e.sum(), w)
    compiled = jointgraph.aot_function(_with_dropout)
    compiled(x, w)   # compile outside the seeded comparison
    torch.manual_seed(7)
    out_c = compiled(x, w)
    (grad_c,) = torch.autograd.grad(out_c.sum(), w)
    torch.testing.assert_close(out_c, out_e)
    torch.testing.assert_close(grad_c, grad_e)


def _policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op is aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE


def _sac(x, w):
    context = functools.partial(create_selective_checkpoint_contexts, _policy)
    return checkpoint(_block, x, w, use_reentrant=False, context_fn=context).sum()


@pytest.mark.parametrize("how", ["aot_function", "torch.compile"])
def test_selective_checkpoint_policy_saves_matmul_and_recomputes_the_rest(how):
    x, w, _ = _args()
    plan = _plans(_sac, how, "mincut", x, w)
    activations = {s.name for s in plan.saved if s.decision is jointgraph.Decision.SAVE and s.nbytes > 0}
    assert len(activations) == 1 and next(iter(activations)).startswith("mm")
    # x does not require grad: the backward's only matmul is the weight gradient; the forward
    # matmul is saved by the policy, not recomputed (a plain checkpoint recomputes it).
    assert [n.target for n in plan.backward.graph.nodes].count(aten.mm.default) == 1
    plain = _plans(lambda x, w: checkpoint(_block, x, w, use_reentrant=False).sum(), how, "mincut", x, w)
    assert [n.target for n in plain.backward.graph.nodes].count(aten.mm.default) == 2
    (grad_e,) = torch.autograd.grad(_sac(x, w), w)
    (grad_c,) = torch.autograd.grad(_compile(_sac, how, "mincut")(x, w), w)
    torch.testing.assert_close(grad_c, grad_e)


def test_tracing_selective_checkpointing_leaves_no_node_meta_behind():
    """PyTorch's selective checkpointing writes region tags into fx's global current_meta while
    traced; left there, every later trace (torch.compile with aot_eager) copies them and fails."""
    import torch.fx.traceback as fx_traceback

    x, w, _ = _args()
    before = dict(fx_traceback.current_meta)
    jointgraph.aot_function(_sac)(x, w)
    assert dict(fx_traceback.current_meta) == before
    torch._dynamo.reset()
    step = torch.compile(lambda x, w: (x @ w).relu().sum(), backend="aot_eager")
    torch.testing.assert_close(step(x, w), (x @ w).relu().sum())


def _reentrant(x, w1, w2):
    h = checkpoint(_block, x, w1, use_reentrant=True)
    return checkpoint(_block, h, w2, use_reentrant=True).sum()


def test_reentrant_checkpoint_is_refused_by_name_and_runs_under_torch_compile_and_on_unsupported_eager():
    """A reentrant checkpoint's backward calls backward() inside the autograd.grad the trace takes, which
    autograd refuses: aot_function raised that RuntimeError at the call ("incompatible with .grad()"), a
    call the user never made. It is an UnsupportedError naming the checkpoint and the fixes; on_unsupported=
    "eager" and torch.compile (Dynamo traces the region as a non-reentrant one) give eager's gradients."""
    def grads(fn):   # autograd.grad is refused by a reentrant checkpoint in eager too: backward()
        x, w1, w2 = _args_seeded()
        fn(x, w1, w2).backward()
        return w1.grad, w2.grad

    expected = grads(_reentrant)
    with pytest.raises(jointgraph.UnsupportedError, match=r"use_reentrant=True(.|\n)*use_reentrant=False"):
        jointgraph.aot_function(_reentrant)(*_args())
    with pytest.warns(UserWarning):
        got = grads(jointgraph.aot_function(_reentrant, on_unsupported="eager"))
    torch.testing.assert_close(got, expected)
    torch._dynamo.reset()
    torch.testing.assert_close(grads(torch.compile(_reentrant, backend="jointgraph")), expected)


def _args_seeded():
    torch.manual_seed(0)
    return _args()


class _Block(torch.nn.Module):
    """A checkpointed block with an in-place op on a result its next op reads (ResNet-style ReLU(inplace=True))."""

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(inplace=True),
                                        torch.nn.Dropout(dropout), torch.nn.Linear(8, 8))

    def forward(self, x):
        return checkpoint(self.body, x, use_reentrant=False).sum()


def _module_grads(model, run, seed: int = 0):
    model.zero_grad()
    x = torch.arange(32.0).view(4, 8).div(7).requires_grad_()
    torch.manual_seed(seed)
    run(x).backward()
    return [x.grad, *(p.grad for p in model.parameters())]


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_checkpoint_inside_a_modules_forward_compiles_through_aot_module(partitioner, dropout):
    """aot_module: the region recomputed in the traced backward reads the module's parameters again, after
    functional_call gave them back: "a real tensor reached the tracer" before. They are the graph's
    parameter inputs there too (RealInputs), and the recomputed dropout replays the forward's mask."""
    torch.manual_seed(0)
    model = _Block(dropout)
    expected = _module_grads(model, model)
    got = _module_grads(model, jointgraph.aot_module(model, partitioner=partitioner))
    torch.testing.assert_close(got, expected)


def test_checkpoint_of_a_module_the_function_closes_over_compiles_through_aot_function():
    """aot_function: the block's parameters are captured tensors (Note [Captured tensors]); the recomputation in
    the traced backward reads them after CaptureMode let them go."""
    torch.manual_seed(0)
    block = _Block(0.5)
    expected = _module_grads(block, lambda x: block(x))
    got = _module_grads(block, jointgraph.aot_function(lambda x: block(x)))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_in_place_op_inside_a_region_compiles_through_torch_compile(partitioner):
    """torch.compile: PyTorch's tag_activation_checkpoint caches every op's result while compiling and refused
    the ReLU's write into the Linear's cached result ("Tensor cached during selective activation checkpoint has
    been mutated"); the region is traced as aot_function traces it (Note [Activation checkpointing])."""
    torch.manual_seed(0)
    model = _Block()
    expected = _module_grads(model, model)
    torch._dynamo.reset()
    got = _module_grads(model, torch.compile(model, backend=jointgraph.backend(partitioner=partitioner)))
    torch.testing.assert_close(got, expected)

    def exp_then_scaled(x):   # exp saves its result, which the region then writes: eager recomputes up to exp
        return checkpoint(lambda u: u.exp().mul_(0.5), x, use_reentrant=False).sum()

    x = torch.randn(5, requires_grad=True)
    (expected,) = torch.autograd.grad(exp_then_scaled(x), x)
    torch._dynamo.reset()
    (got,) = torch.autograd.grad(torch.compile(exp_then_scaled, backend="jointgraph")(x), x)
    torch.testing.assert_close(got, expected)


def _stochastic_layer(u, w):
    return (u @ w).tanh() * (torch.rand(8, 16) > 0.5)


def _two_stochastic_regions(x, w1, w2):
    h = checkpoint(_stochastic_layer, x, w1, use_reentrant=False)
    return checkpoint(_stochastic_layer, h, w2, use_reentrant=False).sum()


def _seeded_grads(fn, *args):
    torch.manual_seed(1)
    return torch.autograd.grad(fn(*args), [a for a in args if a.requires_grad])


def test_random_ops_alike_in_several_regions_replay_their_own_draws():
    """Review of 86c7fd8: ``torch.rand(8, 16)`` in two checkpointed regions. The backward recomputes the second
    region first, and the replay paired each recomputed draw with the first forward draw of its kind: each
    region got the other's mask. Through torch.compile, PyTorch's region path (kept unless it refuses the
    region) gives eager's gradients; under aot_function which draw to replay is not known: refused by name."""
    x, w1, w2 = _args()
    expected = _seeded_grads(_two_stochastic_regions, x, w1, w2)
    torch._dynamo.reset()
    got = _seeded_grads(torch.compile(_two_stochastic_regions, backend="jointgraph"), x, w1, w2)
    torch.testing.assert_close(got, expected)
    with pytest.raises(jointgraph.UnsupportedError, match="forward draws with the same arguments"):
        jointgraph.aot_function(_two_stochastic_regions)(x, w1, w2)


def test_a_captured_tensor_written_after_a_region_read_it_stays_refused():
    """Review of 86c7fd8: a captured tensor the region reads, then written in place by the function. Eager's
    backward raises the version error; the recomputation read the graph input's new value and raised nothing.
    Inputs the function writes are left out of RealInputs: refused at the call, as before."""
    scale = torch.full((16,), 2.0)

    def f(x):
        y = checkpoint(lambda u, sc: (u * sc).sin(), x, scale, use_reentrant=False)
        scale.add_(1)
        return y.sum()

    x = torch.randn(8, 16, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        f(x).backward()
    with pytest.raises(jointgraph.UnsupportedError):
        jointgraph.aot_function(f)(x).backward()
