"""explain: saved values with module path and source line, grouped by layer, sorted by bytes, folded
parameters/inputs, reasons in the user's terms; on the zoo's GPT and on a Hugging Face GPT-2."""

from __future__ import annotations

import pytest
import torch

import jointgraph
from jointgraph.bench import ZooShape, build_workload
from jointgraph.report.explain import explain, layer_of

SHAPE = ZooShape(layers=2, width=32, batch=2, seq=16)


@pytest.fixture(scope="module")
def gpt_plan():
    work = build_workload("gpt", SHAPE)
    return jointgraph.plan(work.step, *work.inputs)


def _check_explanation(plan, layer_prefix: str, source_file: str):
    explanation = explain(plan)
    rows = explanation.rows
    # every saved value is accounted for, once
    names = sorted(r.name for r in rows) + sorted(r.name for r in explanation.held_anyway)
    assert sorted(names) == sorted(s.name for s in plan.saved)
    # groups are layers, largest subtotal first; rows within a group largest first
    assert [g.nbytes for g in explanation.groups] == sorted((g.nbytes for g in explanation.groups), reverse=True)
    for group in explanation.groups:
        assert [r.nbytes for r in group.rows] == sorted((r.nbytes for r in group.rows), reverse=True)
        assert all(layer_of(r.module) == group.module for r in group.rows)
    layers = [g.module for g in explanation.groups if g.module.startswith(layer_prefix)]
    assert {f"{layer_prefix}0", f"{layer_prefix}1"} <= set(layers), layers
    # the matrix multiplies of a layer name their module and the user's line
    kept = [r for r in rows if r.decision == "kept" and r.nbytes > 0]
    assert kept and any(r.module.startswith(layer_prefix) for r in kept), [r.module for r in kept]
    assert any(r.source and r.source.startswith(source_file + ":") for r in kept), [r.source for r in kept]
    # the footer counts only what holds memory: activations with bytes of their own
    held = sum(s.nbytes for s in plan.saved if s.decision is not jointgraph.Decision.RECOMPUTE
               and s.name in {r.name for r in rows})
    assert explanation.held_bytes == held
    # parameters and inputs are folded by default, listed with show_all
    params = [r for r in explanation.held_anyway if r.kind == "parameter"]
    grouped = {r.name for g in explanation.groups for r in g.rows}
    assert params and not any(r.name in grouped for r in params)   # held anyway: not among the layers' rows
    text, full = plan.explain(), plan.explain(show_all=True)
    assert "parameters and inputs:" in text and all(r.name not in text for r in params)
    assert all(r.name in full for r in params)
    return explanation


def test_explain_on_gpt_groups_by_block_with_source_lines(gpt_plan):
    explanation = _check_explanation(gpt_plan, "model.blocks.", "gpt.py")
    reasons = [r.reason for r in explanation.rows]
    assert any(r.startswith("kept: matrix multiply, too costly to recompute (") for r in reasons)
    assert any(r.startswith("recomputed in the backward from values of model.blocks.") for r in reasons)
    assert not any("region" in r for r in reasons)   # no planner jargon
    text = gpt_plan.explain()
    assert "recomputed in the backward, 0 bytes kept" in text   # folded by default
    assert text.splitlines()[-1].startswith(f"{sum(r.holds_memory for r in explanation.rows)} values hold ")


def test_explain_on_hf_gpt2():
    pytest.importorskip("transformers")
    work = build_workload("gpt2", SHAPE)
    plan = jointgraph.plan(work.step, *work.inputs)
    _check_explanation(plan, "model.transformer.h.", "modeling_gpt2.py")


def test_explain_cli_groups_and_folds(capsys):
    from jointgraph.cli import main

    args = ["--layers", "2", "--width", "32", "--batch", "2", "--seq", "16"]
    assert main(["explain", "gpt", *args]) == 0
    out = capsys.readouterr().out
    assert "model.blocks.0" in out and "gpt.py:" in out and "parameters and inputs:" in out
    assert "model_blocks_0_fc_weight" not in out
    assert main(["explain", "gpt", *args, "--all"]) == 0
    assert "model_blocks_0_fc_weight" in capsys.readouterr().out


def test_module_scopes_do_not_change_results():
    """Tracing with module scopes recorded gives the same values as eager."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    compiled = jointgraph.aot_module(model)
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(x), model(x))
    (plan,) = jointgraph.plans(compiled)
    modules = {r.module for r in explain(plan).rows}
    assert "0" in modules or "2" in modules, modules
