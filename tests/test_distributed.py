"""DDP and FSDP2 on 2 gloo ranks (spawned processes on the loopback interface), eager as the oracle.

One spawn runs every scenario (each spawn costs seconds): jointgraph.bench.distributed's
training scenarios (Note [Distributed runs]) and FSDP2's storage patterns on the parameters of a
real ``fully_shard`` module (issue 18), each rank checked against eager on the same rank.
"""

import pytest
import torch
import torch.distributed as dist

from jointgraph.bench.distributed import run_scenarios, spawn

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo")

TRAINING = ["fsdp_per_block_mincut", "fsdp_per_block_budget", "fsdp_per_block_ac_mincut", "fsdp_per_block_ac_budget",
            "fsdp_whole", "ddp_outer", "ddp_inner", "ddp_outer_llama", "ddp_inner_llama"]


def _unsharded_and_shard(linear):
    """The unsharded parameter FSDP2 allocates for ``linear.weight`` (freed again by ``reshard``) and the
    rank's shard of it."""
    linear.unshard()
    unsharded = linear.weight
    linear.reshard()
    assert type(unsharded) is torch.nn.Parameter and unsharded.untyped_storage().nbytes() == 0
    return unsharded, linear.weight.to_local()


def _storage_patterns(rank, world):
    """FSDP2's unshard / reshard on a real fully_shard module's parameter, compiled and eager."""
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.fsdp import fully_shard

    import jointgraph

    resize = torch.ops.inductor.resize_storage_bytes_
    group = dist.group.WORLD

    def unshard_use_reshard(x, shard, unsharded):
        full = funcol.all_gather_single(shard, 0, group)   # the all-gather, in the graph
        resize(unsharded, unsharded.numel() * unsharded.element_size())
        with torch.no_grad():
            torch.ops.fsdp.copy_(unsharded, full)
        out = (x @ unsharded.t()).tanh().sum()
        resize(unsharded, 0)
        return out

    def gather_with_reduce_scatter_backward(x, shard):
        full = funcol.all_gather_single_autograd(shard, 0, group)   # backward: reduce-scatter
        return (x @ full.t()).tanh().sum()

    results = {}
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank))
    for how in ("aot_function", "torch.compile"):
        for requires_grad in (True, False):
            modules = []
            for _ in range(2):
                torch.manual_seed(0)
                modules.append(fully_shard(torch.nn.Linear(8, 6, bias=False)))
            (p, shard), (ep, eshard) = (_unsharded_and_shard(m) for m in modules)
            p.requires_grad_(requires_grad)
            ep.requires_grad_(requires_grad)
            torch._dynamo.reset()
            compiled = jointgraph.aot_function(unshard_use_reshard) if how == "aot_function" else \
                torch.compile(unshard_use_reshard, backend="jointgraph", fullgraph=True)
            out = compiled(x, shard.detach(), p)
            expected = unshard_use_reshard(x, eshard.detach(), ep)
            torch.testing.assert_close(out, expected)
            assert p.untyped_storage().nbytes() == 0
            if requires_grad:
                out.backward()
                expected.backward()
                torch.testing.assert_close(p.grad, ep.grad)
            results[f"unshard_use_reshard/{how}/requires_grad={requires_grad}"] = float(out.detach())

            leaf, eleaf = shard.detach().clone().requires_grad_(), shard.detach().clone().requires_grad_()
            compiled = jointgraph.aot_function(gather_with_reduce_scatter_backward)
            out = compiled(x, leaf)
            expected = gather_with_reduce_scatter_backward(x, eleaf)
            out.backward()
            expected.backward()
            torch.testing.assert_close(out, expected)
            torch.testing.assert_close(leaf.grad, eleaf.grad)
    plan = jointgraph.plan(gather_with_reduce_scatter_backward, x, shard.detach().clone().requires_grad_())
    results["forward"] = _collectives(plan.forward)
    results["backward"] = _collectives(plan.backward)
    return results


def _collectives(gm):
    return [n.target.__name__ for n in gm.graph.nodes
            if n.op == "call_function" and getattr(n.target, "namespace", None) == "_c10d_functional"]


def _all_checks(rank, world):
    return run_scenarios(rank, world, TRAINING), _storage_patterns(rank, world)


def test_ddp_and_fsdp2_on_two_gloo_ranks_match_eager():
    ranks = spawn(_all_checks, nproc=2, timeout=420)
    failures = [f"rank {rank} {r.name}:\n{r.error}" for rank, (scenarios, _) in enumerate(ranks)
                for r in scenarios if not r.ok]
    assert not failures, "\n\n".join(failures)
    for scenarios, _ in ranks:
        assert [r.name for r in scenarios] == TRAINING
        assert all(r.graphs > 0 and len(r.losses) == 3 for r in scenarios)
    # Each rank trained on its own batch: the ranks' losses differ, the patterns ran on both.
    assert ranks[0][0][0].losses != ranks[1][0][0].losses
    for _, patterns in ranks:
        assert len([k for k in patterns if k.startswith("unshard_use_reshard")]) == 4
        # The plan keeps FSDP's collectives where they are: the all-gather in the forward, its
        # reduce-scatter in the backward.
        assert [t for t in patterns["forward"] if not t.startswith("wait")] == ["all_gather_into_tensor.default"]
        assert [t for t in patterns["backward"] if not t.startswith("wait")] == ["reduce_scatter_tensor.default"]
