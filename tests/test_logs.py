"""Logging (jointgraph.logs): recompile reasons naming the guard, plan and compile lines, JOINTGRAPH_LOGS."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

import jointgraph
from jointgraph import logs

SCALE = 0.5


def _step(x, w, k):
    return ((x @ w) * SCALE * k).relu().sum()


def _recompile_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "jointgraph.recompiles"]


@pytest.fixture
def recompiles(caplog):
    caplog.set_level(logging.INFO, logger="jointgraph.recompiles")
    return caplog


def test_recompile_names_the_shape_guard(recompiles):
    f = jointgraph.aot_function(_step)
    w = torch.randn(128, 16, requires_grad=True)
    x4, x8 = torch.randn(4, 128), torch.randn(8, 128)
    f(x4, w, 2).backward()
    assert _recompile_lines(recompiles) == []          # a first compile is not a recompile
    loss = f(x8, w, 2)
    torch.testing.assert_close(loss, _step(x8, w, 2))
    (line,) = _recompile_lines(recompiles)
    assert "input 0: shape (4, 128) -> (8, 128)" in line and "_step" in line
    f(x8, w, 2)                                         # a hit: no new line
    assert len(_recompile_lines(recompiles)) == 1


def test_recompile_names_scalar_autocast_grad_mode_and_global(recompiles):
    global SCALE
    f = jointgraph.aot_function(_step)
    w = torch.randn(128, 16, requires_grad=True)
    x = torch.randn(8, 128)
    f(x, w, 2)
    f(x, w, 3.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        f(x, w, 3.0)
    with torch.no_grad():
        f(x, w, 3.0)
    SCALE = 1.0
    try:
        out = f(x, w, 3.0)
    finally:
        SCALE = 0.5
    torch.testing.assert_close(out, ((x @ w) * 1.0 * 3.0).relu().sum())
    lines = _recompile_lines(recompiles)
    assert len(lines) == 4, lines
    assert "input 2: value 2 -> 3.0" in lines[0]
    assert "autocast: off -> bfloat16" in lines[1]
    assert "grad mode: on -> off" in lines[2] and "autocast: bfloat16 -> off" in lines[2]
    assert "global 'SCALE' (read by _step): 0.5 -> 1.0" in lines[3]


def test_recompile_limit_warning_says_why():
    f = jointgraph.aot_function(_step, recompile_limit=2)
    w = torch.randn(128, 16, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (1, 2, 3):
            out = f(torch.ones(n, 128), w, 2)
            torch.testing.assert_close(out, _step(torch.ones(n, 128), w, 2))
    (warning,) = [w for w in caught if "recompile_limit" in str(w.message)]
    assert "input 0: shape (2, 128) -> (3, 128)" in str(warning.message)
    assert "symbolic sizes" in str(warning.message)


def test_plan_and_compile_lines(caplog):
    caplog.set_level(logging.INFO, logger="jointgraph")
    f = jointgraph.aot_function(lambda x, w: (x @ w).tanh().sum())
    f(torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)).backward()
    by_logger = {}
    for r in caplog.records:
        by_logger.setdefault(r.name, []).append(r.getMessage())
    (summary,) = by_logger["jointgraph.plan"]
    plan = jointgraph.plans(f)[0]
    assert repr(plan) in summary and "trace" in summary
    assert any(line.startswith("compiled <lambda> (entry 1)") for line in by_logger["jointgraph.compile"])
    assert any("trace" in line and "partition" in line for line in by_logger["jointgraph.compile"])
    assert "jointgraph.graphs" in by_logger   # graphs at INFO when the parent logger is at INFO


def test_topics_are_parsed_once_from_the_environment(monkeypatch):
    assert logs.parse_topics("recompiles,+plan") == {"recompiles": logging.INFO, "plan": logging.DEBUG}
    assert set(logs.parse_topics("all")) == set(logs.TOPICS)
    with pytest.raises(ValueError, match="unknown topic 'recompile'.*recompiles"):
        logs.parse_topics("recompile")
    saved = {name: logging.getLogger(f"jointgraph.{name}").level for name in logs.TOPICS}
    handlers = list(logs.root.handlers)
    monkeypatch.setenv(logs.ENV_VAR, "recompiles,+graphs")
    try:
        jointgraph.aot_function(lambda x: x)   # an entry point reads the variable
        assert logging.getLogger("jointgraph.recompiles").level == logging.INFO
        assert logging.getLogger("jointgraph.graphs").level == logging.DEBUG
        assert logging.getLogger("jointgraph.plan").level == saved["plan"]
        assert logs.root.handlers
    finally:
        for name, level in saved.items():
            logging.getLogger(f"jointgraph.{name}").setLevel(level)
        logs.root.handlers[:] = handlers


def test_memory_budget_alone_implies_the_budget_partitioner():
    from jointgraph.options import make_options

    assert make_options(memory_budget=0.5).partitioner == "budget"
    with pytest.raises(ValueError, match='needs partitioner="budget"'):
        make_options(memory_budget=0.5, partitioner="mincut")
