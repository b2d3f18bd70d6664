"""Collectives in the joint graph (Note [Collectives] in ir/graph.py): never merged, dropped,
recomputed or reordered by our passes. A one-rank gloo group in this process: the graphs are
the same as on N ranks (the multi-rank runs are in test_distributed.py)."""

import pytest
import torch

import jointgraph

PLANS = [{"partitioner": "default"}, {"partitioner": "mincut"},
         {"partitioner": "budget", "memory_budget": 0.3}]


def _gathers(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and n.target is torch.ops._c10d_functional.all_gather_into_tensor.default]


def _program(group):
    import torch.distributed._functional_collectives as funcol

    def fn(x, w1, w2):
        a = funcol.all_gather_single(w1, 0, group)
        b = funcol.all_gather_single(w1, 0, group)   # the same collective twice: two collectives
        funcol.all_gather_single(x, 0, group)        # unused: still issued, as eager issues it
        c = funcol.all_gather_single(w2, 0, group)
        return (x @ a.t()).tanh().sum() + (x @ b.t()).sin().sum() + (x @ c.t()).cos().sum()

    return fn


@pytest.mark.parametrize("options", PLANS, ids=lambda o: o["partitioner"])
def test_collectives_are_neither_merged_dropped_recomputed_nor_reordered(gloo_world, options):
    fn = _program(gloo_world)
    x, w1, w2 = (torch.randn(4, 8, requires_grad=True), torch.randn(6, 8, requires_grad=True),
                 torch.randn(5, 8, requires_grad=True))
    plan = jointgraph.plan(fn, x, w1, w2, **options)
    gathered = [n.args[0].name for n in _gathers(plan.forward)]
    assert gathered == ["arg1", "arg1", "arg0", "arg2"]   # the program's order, none merged or dropped
    assert _gathers(plan.backward) == []   # saved, never recomputed, whatever the budget

    expected = fn(x, w1, w2)
    expected.backward()
    grads = [t.grad for t in (x, w1, w2)]
    for t in (x, w1, w2):
        t.grad = None
    out = jointgraph.aot_function(fn, **options)(x, w1, w2)
    out.backward()
    torch.testing.assert_close(out, expected)
    for t, g in zip((x, w1, w2), grads, strict=True):
        torch.testing.assert_close(t.grad, g)


def test_collectives_in_checkpointed_blocks_keep_eager_order(gloo_world):
    import torch.distributed._functional_collectives as funcol
    from torch.utils.checkpoint import checkpoint

    def block(h, w):
        return (h @ funcol.all_gather_single_autograd(w, 0, gloo_world).t()).tanh()

    def fn(x, w1, w2):
        return checkpoint(block, checkpoint(block, x, w1, use_reentrant=False), w2, use_reentrant=False).sum()

    x, w1, w2 = torch.randn(4, 8, requires_grad=True), torch.randn(6, 8, requires_grad=True), \
        torch.randn(5, 6, requires_grad=True)
    plan = jointgraph.plan(fn, x, w1, w2)
    collectives = [(n.target.__name__.split(".")[0], n.args[0].name) for n in plan.backward.graph.nodes
                   if n.op == "call_function" and n.target.namespace == "_c10d_functional"
                   and "wait" not in n.target.__name__]
    # As eager's backward: block 2's all-gather recomputed, its reduce-scatter, then block 1's.
    kinds = [k for k, _ in collectives]
    assert kinds == ["all_gather_into_tensor", "reduce_scatter_tensor", "all_gather_into_tensor",
                     "reduce_scatter_tensor"], collectives
    assert collectives[0][1] == "arg2" and collectives[2][1] == "arg1"
    expected = fn(x, w1, w2)
    expected.backward()
    grads = [t.grad for t in (x, w1, w2)]
    for t in (x, w1, w2):
        t.grad = None
    out = jointgraph.aot_function(fn)(x, w1, w2)
    out.backward()
    torch.testing.assert_close(out, expected)
    for t, g in zip((x, w1, w2), grads, strict=True):
        torch.testing.assert_close(t.grad, g)
