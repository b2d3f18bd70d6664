"""The on-disk cache with symbolic sizes (Note [Cached symbolic sizes]): stable names, symbolic keys, guards."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import jointgraph
from jointgraph.cache.store import DiskStore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


pytestmark = pytest.mark.usefixtures("fresh_cache_reports")


def step(x, w):
    y = x @ w
    if x.shape[0] > 3:   # a guard on a symbolic size: x.size(0) > 3
        y = y * 2
    return y.tanh().sum()


def _inputs(n: int) -> list[torch.Tensor]:
    torch.manual_seed(n)
    return [torch.randn(n, 3, requires_grad=True), torch.randn(3, n + 1, requires_grad=True)]


def _eager(n: int) -> list[torch.Tensor]:
    x, w = _inputs(n)
    loss = step(x, w)
    loss.backward()
    return [loss.detach(), x.grad, w.grad]


def _aot(n: int, cache_dir, compiled=None):
    x, w = _inputs(n)
    compiled = compiled or jointgraph.aot_function(step, dynamic=True, cache=str(cache_dir))
    loss = compiled(x, w)
    loss.backward()
    return [loss.detach(), x.grad, w.grad], compiled


def _events(path) -> list[tuple[str, str]]:
    return [(e[2], e[4] if len(e) > 4 else "") for e in DiskStore(path).events()]


_CHILD = """
import sys, torch, jointgraph
sys.path.insert(0, sys.argv[1])
from test_cache_dynamic import _inputs, step

cache_dir, out, sizes = sys.argv[2], sys.argv[3], [int(s) for s in sys.argv[4:]]
results = {}
for mode in ("aot", "compile"):
    for n in sizes:
        x, w = _inputs(n)
        if mode == "aot":
            fn = jointgraph.aot_function(step, dynamic=True, cache=cache_dir)
        else:
            torch._dynamo.reset()
            fn = torch.compile(step, backend=jointgraph.backend(cache=cache_dir), dynamic=True)
        loss = fn(x, w)
        loss.backward()
        results[f"{mode}:{n}"] = [loss.detach(), x.grad, w.grad]
torch.save(results, out)
"""


def test_dynamic_entries_hit_in_a_second_process(tmp_path):
    """aot_function(dynamic=True) and torch.compile(dynamic=True): a cold process stores, a second
    one hits for the same sizes (bit for bit) and for other sizes of the same symbolic form."""
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": ROOT}

    def run(out, *sizes):
        proc = subprocess.run([sys.executable, str(script), os.path.join(ROOT, "tests"), str(cache_dir),
                               str(tmp_path / out), *map(str, sizes)], env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return torch.load(tmp_path / out)

    cold = run("cold.pt", 5)
    assert [e for e, _ in _events(cache_dir)] == ["miss", "store", "miss", "store"]
    warm = run("warm.pt", 5, 7)
    assert [e for e, _ in _events(cache_dir)][4:] == ["hit"] * 4
    for mode in ("aot", "compile"):
        assert all(torch.equal(a, b) for a, b in zip(cold[f"{mode}:5"], warm[f"{mode}:5"], strict=True))
        for n in (5, 7):
            for got, expected in zip(warm[f"{mode}:{n}"], _eager(n), strict=True):
                torch.testing.assert_close(got, expected)


def test_hit_has_the_cold_runs_shape_guard(tmp_path):
    """A hit re-adds the trace's guards to its ShapeEnv: the entry's guard is the cold one, and a
    call that fails it (x.size(0) <= 3) compiles another entry instead of running this one."""
    cold_result, cold = _aot(5, tmp_path)
    warm_result, warm = _aot(6, tmp_path)
    assert [e for e, _ in _events(tmp_path)] == ["miss", "store", "hit"]

    def guard(compiled):
        entry = compiled.entries[0]
        return entry.fake_mode.shape_env.produce_guards_expression(entry.fakes)

    assert guard(warm) == guard(cold) and "4 <= L['t0'].size()[0]" in guard(cold)   # from x.size(0) > 3
    for got, expected in zip(warm_result, _eager(6), strict=True):
        torch.testing.assert_close(got, expected)
    small, _ = _aot(2, tmp_path, compiled=warm)
    assert len(warm.entries) == 2   # the loaded entry's guard refused n=2
    for got, expected in zip(small, _eager(2), strict=True):
        torch.testing.assert_close(got, expected)


def test_changed_symbolic_structure_or_failed_guard_misses(tmp_path):
    _aot(5, tmp_path)
    first = _events(tmp_path)[0]
    # Size 1 is specialized (not a symbol): another symbolic form, another key.
    one, _ = _aot(1, tmp_path)
    assert _events(tmp_path)[2][0] == "miss"
    # Same form as n=5, but the trace's guard x.size(0) > 3 fails: a miss, recompiled and rewritten.
    small, _ = _aot(2, tmp_path)
    events = _events(tmp_path)
    assert events[4] == ("miss", "a stored guard fails on these sizes")
    assert events[5][0] == "store" and first[0] == "miss"
    for result, n in ((one, 1), (small, 2)):
        for got, expected in zip(result, _eager(n), strict=True):
            torch.testing.assert_close(got, expected)


def test_symbolic_entry_past_the_recompile_limit_hits(tmp_path):
    """dynamic=None: past recompile_limit the entry is symbolic; a fresh CompiledFunction loads the two
    static entries and then the symbolic one from disk."""
    def run(compiled, n):
        x = torch.randn(n, 3)
        w = torch.randn(3, 2, requires_grad=True)
        out = compiled(x, w)
        out.backward()
        torch.testing.assert_close(out, (x @ w).relu().sum())
        torch.testing.assert_close(w.grad, x.t() @ ((x @ w) > 0).float().reshape(n, 2))

    for _ in range(2):
        compiled = jointgraph.aot_function(lambda x, w: (x @ w).relu().sum(), recompile_limit=2, cache=str(tmp_path))
        with pytest.warns(UserWarning, match="symbolic sizes"):
            for n in (2, 3, 5, 7):
                run(compiled, n)
        assert len(compiled.entries) == 3   # two static, one symbolic (n=5, reused for n=7)
    assert [e for e, _ in _events(tmp_path)] == ["miss", "store"] * 3 + ["hit"] * 3
