"""The IR contract holds between stages: verify() on the graphs every partitioner produces."""

import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import jointgraph
from jointgraph.hooks import SavedTensorPolicy
from jointgraph.ir import Role, verify


def _mlp(x, w1, w2):
    return torch.nn.functional.dropout(torch.relu(x @ w1), 0.1) @ w2


def _checkpointed(x, w1, w2):
    return checkpoint(_mlp, x, w1, w2, use_reentrant=False).sum()


@pytest.mark.parametrize("options", [{"partitioner": "default"}, {"partitioner": "mincut"},
                                     {"partitioner": "budget", "memory_budget": 0.7},
                                     {"saved_tensors": SavedTensorPolicy(compress="bf16")}],
                         ids=["default", "mincut", "budget", "bf16"])
@pytest.mark.parametrize("fn", [_mlp, _checkpointed], ids=["mlp", "checkpointed"])
def test_split_graphs_satisfy_the_ir_contract(fn, options):
    args = (torch.randn(16, 32), torch.randn(32, 64, requires_grad=True), torch.randn(64, 8, requires_grad=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a tiny graph may sit below the budget's reach
        plan = jointgraph.plan(fn, *args, **options)
    for gm in (plan.forward, plan.backward):
        verify(gm.graph)
    forward_roles = [n.meta["role"] for n in plan.forward.graph.nodes if n.op == "placeholder"]
    assert set(forward_roles) <= {Role.PRIMAL, Role.PARAMETER, Role.BUFFER, Role.SIZE}
    backward_roles = {n.meta["role"] for n in plan.backward.graph.nodes if n.op == "placeholder"}
    assert Role.TANGENT in backward_roles

