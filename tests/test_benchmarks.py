"""The budget benchmark runs end to end at CI size (so it cannot rot) and its figures are consistent."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_budget_benchmark_quick(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "budget", raising=False)
    import budget

    result = budget.main(["--quick"])
    points = result["points"]
    contenders = ("jointgraph", "pytorch", "jointgraph at pytorch peak")
    assert {(p["contender"], p["budget"]) for p in points} == {(c, b) for c in contenders for b in (1.0, 0.5)}
    torch_peak = {p["budget"]: p["measured_peak"] for p in points if p["contender"] == "pytorch"}
    for p in points:
        assert p["measured_peak"] > 0 and p["step_seconds"] > 0 and p["compile_seconds"] > 0
        if p["contender"] != "pytorch":   # simulated is what the planner promised; measured must agree
            assert abs(p["measured_peak"] - p["simulated_peak"]) <= 0.1 * p["simulated_peak"]
        if p["contender"] == "jointgraph at pytorch peak":   # PyTorch's measured peak as a byte budget
            assert p["simulated_peak"] <= torch_peak[p["budget"]]
    ours = {p["budget"]: p["simulated_peak"] for p in points if p["contender"] == "jointgraph"}
    assert ours[0.5] <= ours[1.0]
    assert [d["layers"] for d in result["depths"]] == [2]
    assert "At equal peak" in capsys.readouterr().out


def test_cache_store_benchmark_quick(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "cache_store", raising=False)
    import cache_store

    result = cache_store.main(["--entries", "200", "--stores", "3"])
    assert result["entries"] == 203   # the filled ones and the three timed stores: none evicted
    assert result["listing_ms"] > 0 and result["store_ms"] > 0
    assert "a store now" in capsys.readouterr().out


def test_retention_benchmark_quick(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "retention", raising=False)
    import retention

    rows = {row["contender"]: row for row in retention.main(["--steps", "3", "--size", "64"])["rows"]}
    assert set(rows) == {"eager", "pytorch aot_function", "jointgraph"}
    assert all(row["peak_mib"] > 0 for row in rows.values())
    assert rows["jointgraph"]["alive"] == rows["eager"]["alive"] == 0   # no step kept by a reference cycle
    assert "jointgraph / eager peak" in capsys.readouterr().out
