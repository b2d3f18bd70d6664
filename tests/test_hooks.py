"""Saved-tensor hooks in the graph: built-in codecs, policies, ambient user hooks."""

from __future__ import annotations

import pytest
import torch

import jointgraph
from jointgraph import Decision
from jointgraph.hooks import SavedTensorPolicy, cache_hash, is_inlineable
from jointgraph.ir import Role


def mlp(x, w1, w2):
    return ((x @ w1).relu() @ w2).tanh().sum()


@pytest.fixture
def args():
    torch.manual_seed(0)
    return (torch.randn(64, 128), torch.randn(128, 256, requires_grad=True) * 0.1,
            torch.randn(256, 32, requires_grad=True) * 0.1)


def _leaf(args):
    return [a.detach().requires_grad_(a.requires_grad) for a in args]


def _grads(fn, args):
    x, w1, w2 = _leaf(args)
    return torch.autograd.grad(fn(x, w1, w2), (w1, w2))


def _rel(a, b):
    return float((a - b).norm() / b.norm())


# Documented in SavedTensorPolicy: bf16 ~1e-2 relative, fp8 ~1e-1 relative.
@pytest.mark.parametrize("policy,tol", [
    (SavedTensorPolicy(compress="bf16"), 1e-2),
    (SavedTensorPolicy(compress="fp8"), 1e-1),
    (SavedTensorPolicy(compress="fp8", offload=True), 1e-1),
])
@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_compression_within_tolerance(args, policy, tol, partitioner):
    ref = _grads(mlp, args)
    got = _grads(jointgraph.aot_function(mlp, saved_tensors=policy, partitioner=partitioner), args)
    for a, b in zip(got, ref, strict=True):
        assert 0 < _rel(a, b) < tol


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_offload_exact(args, partitioner):
    ref = _grads(mlp, args)
    got = _grads(jointgraph.aot_function(mlp, saved_tensors=SavedTensorPolicy(offload=True),
                                         partitioner=partitioner), args)
    for a, b in zip(got, ref, strict=True):
        assert torch.equal(a, b)


def test_packed_values_replace_originals_in_forward_outputs(args):
    plan = jointgraph.plan(mlp, *args, partitioner="default", saved_tensors=SavedTensorPolicy(compress="fp8"))
    out = next(n for n in plan.forward.graph.nodes if n.op == "output")
    saved = [v for v, r in zip(out.args[0], out.meta["roles"], strict=True) if r is Role.SAVED_TENSOR]
    targets = {getattr(v.target, "__name__", str(v.target)) for v in saved}
    dtypes = [v.meta["val"].dtype for v in saved]
    assert torch.float8_e4m3fn in dtypes and "relu" not in {v.name for v in saved}
    assert "getitem" in targets   # (q, scale) of pack_fp8, not the fp32 activations
    pack_nodes = [n for n in plan.forward.graph.nodes if n.target is torch.ops.jointgraph.pack_fp8.default]
    assert pack_nodes
    bw_phs = [n for n in plan.backward.graph.nodes if n.op == "placeholder" and n.meta["role"] is Role.SAVED_TENSOR]
    assert len(bw_phs) == len(saved)
    assert any(n.target is torch.ops.jointgraph.unpack_fp8.default for n in plan.backward.graph.nodes)


def test_pack_after_last_forward_use(args):
    plan = jointgraph.plan(mlp, *args, partitioner="default", saved_tensors=SavedTensorPolicy(compress="bf16"))
    nodes = list(plan.forward.graph.nodes)
    packs = [n for n in nodes if n.target is torch.ops.jointgraph.pack_bf16.default]
    assert packs
    for pack in packs:
        value = pack.args[0]
        last_use = max(nodes.index(u) for u in value.users if u.op != "output")
        assert nodes.index(pack) == last_use or nodes.index(pack) == last_use + 1 or all(
            u is pack for u in value.users)


def test_plan_saved_shows_decisions_and_stored_bytes(args):
    base = jointgraph.plan(mlp, *args, partitioner="default")
    bf16 = jointgraph.plan(mlp, *args, partitioner="default", saved_tensors=SavedTensorPolicy(compress="bf16"))
    off = jointgraph.plan(mlp, *args, partitioner="default", saved_tensors=SavedTensorPolicy(offload=True))
    relu = {s.name: s for s in bf16.saved}["relu"]
    assert relu.decision is Decision.COMPRESS and relu.dtype is torch.bfloat16
    assert relu.nbytes == 64 * 256 * 2
    assert {s.name: s for s in off.saved}["relu"].decision is Decision.OFFLOAD
    assert off.saved_bytes == 0 < bf16.saved_bytes < base.saved_bytes
    inputs = [s for s in bf16.saved if s.name.startswith("arg")]
    assert inputs and all(s.decision is Decision.SAVE for s in inputs)   # parameters are never packed
    assert "bf16" in bf16.explain()


def test_simulated_peak_offload_below_none():
    def deep(x, w):
        for _ in range(6):
            x = (x @ w).relu()
        return x.sum()

    x, w = torch.randn(256, 256), torch.randn(256, 256, requires_grad=True)
    base = jointgraph.plan(deep, x, w, partitioner="default")
    off = jointgraph.plan(deep, x, w, partitioner="default", saved_tensors=SavedTensorPolicy(offload=True))
    fp8 = jointgraph.plan(deep, x, w, partitioner="default", saved_tensors=SavedTensorPolicy(compress="fp8"))
    assert off.peak_bytes < fp8.peak_bytes < base.peak_bytes


def test_policy_validation():
    for bad in ({"compress": "int4"}, {"offload": 1}, {"min_bytes": -1}, {"dtypes": (torch.int64,)}, {}):
        with pytest.raises(ValueError, match="SavedTensorPolicy"):
            SavedTensorPolicy(**bad)
    with pytest.raises(ValueError, match="saved_tensors"):
        jointgraph.plan(mlp, torch.randn(2, 2), torch.randn(2, 2, requires_grad=True), torch.randn(2, 2),
                        saved_tensors="bf16")


def test_policy_min_bytes_and_integer_tensors():
    def f(x, idx, w):
        return (x @ w).relu().gather(1, idx).sum()

    x, w = torch.randn(8, 16), torch.randn(16, 1024, requires_grad=True)
    idx = torch.randint(0, 1024, (8, 4))
    plan = jointgraph.plan(f, x, idx, w, partitioner="default",
                           saved_tensors=SavedTensorPolicy(compress="bf16", min_bytes=10_000))
    kinds = {s.name: s.decision for s in plan.saved}
    assert all(s.decision is Decision.SAVE for s in plan.saved if s.dtype is not None and not s.dtype.is_floating_point)
    assert Decision.COMPRESS in kinds.values()


# ### Ambient user hooks


def _pack(t):
    return (t.dtype, (t * 2).to(torch.float64))


def _unpack(packed):
    return (packed[1] * 0.5).to(packed[0])


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_inlined_pure_hooks_equal_eager_exactly(args, partitioner):
    with torch.autograd.graph.saved_tensors_hooks(_pack, _unpack):
        ref = _grads(mlp, args)
        f = jointgraph.aot_function(mlp, partitioner=partitioner)
        got = _grads(f, args)
    for a, b in zip(got, ref, strict=True):
        assert torch.equal(a, b)
    entry = f.entries[0]
    assert entry.layout.hooks_inlined and not entry.cacheable
    ops = {n.target for n in entry.plan.forward.graph.nodes}
    assert torch.ops.aten._to_copy.default in ops   # the pack is in the forward graph
    out = next(n for n in entry.plan.forward.graph.nodes if n.op == "output")
    saved = [v for v, r in zip(out.args[0], out.meta["roles"], strict=True) if r is Role.SAVED_TENSOR]
    assert saved and all(v.meta["val"].dtype is torch.float64 for v in saved)


def test_inlined_hooks_do_not_run_at_runtime(args):
    class Pack(torch.nn.Module):
        def forward(self, t):
            return t.to(torch.float64)

    class Unpack(torch.nn.Module):
        def forward(self, t):
            return t.to(torch.float32)

    pack, unpack = torch.fx.symbolic_trace(Pack()), torch.fx.symbolic_trace(Unpack())
    calls = []
    pack.register_forward_pre_hook(lambda *_: calls.append(1))
    f = jointgraph.aot_function(mlp)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        _grads(f, args)     # traced (on fake tensors) while compiling
        traced = len(calls)
        _grads(f, args)
    assert f.entries[0].layout.hooks_inlined and len(calls) == traced


def test_side_effecting_hook_runs_once_per_saved_tensor_per_call(args):
    calls = {"pack": 0, "unpack": 0}

    def pack(t):
        calls["pack"] += 1
        return t

    def unpack(t):
        calls["unpack"] += 1
        return t

    assert not is_inlineable(pack)
    f = jointgraph.aot_function(mlp, partitioner="default")
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        ref = [g.clone() for g in _grads(mlp, args)]
        calls.update(pack=0, unpack=0)
        for n in (1, 2, 3):
            got = _grads(f, args)
            n_saved = f.entries[0].layout.num_saved_tensors
            assert calls == {"pack": n * n_saved, "unpack": n * n_saved}
    assert not f.entries[0].layout.hooks_inlined
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b)


def test_changing_hooks_recompiles(args):
    f = jointgraph.aot_function(mlp)
    _grads(f, args)
    with torch.autograd.graph.saved_tensors_hooks(_pack, _unpack):
        _grads(f, args)
        _grads(f, args)
    assert len(f.entries) == 2
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t + 0, lambda t: t):
        _grads(f, args)
    assert len(f.entries) == 3
    _grads(f, args)
    assert len(f.entries) == 3


def test_cache_hash_marks_entry_cacheable(args):
    pack = cache_hash(lambda t: t.to(torch.float64), "f64-pack-v1")
    unpack = cache_hash(lambda t: t.to(torch.float32), "f64-unpack-v1")
    f = jointgraph.aot_function(mlp)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        _grads(f, args)
    assert f.entries[0].cacheable and f.entries[0].layout.hooks_inlined
    with pytest.raises(ValueError, match="cache_hash"):
        cache_hash(pack, "")


def test_purity_check():
    seen = []
    assert is_inlineable(_pack) and is_inlineable(lambda t: t.float() if t.dtype == torch.half else t)
    assert not is_inlineable(lambda t: seen.append(t) or t)
    assert not is_inlineable(lambda t: print(t) or t)
    assert not is_inlineable(lambda t: torch.save(t, "x") or t)
