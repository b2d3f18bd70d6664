"""The on-disk compile cache (jointgraph/cache): sound keys, warm starts, robust files."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
import types

import pytest
import torch

import jointgraph
from jointgraph.cache.key import environment
from jointgraph.cache.store import DiskStore
from jointgraph.hooks import cache_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


pytestmark = pytest.mark.usefixtures("fresh_cache_reports")


def _events(path) -> list[str]:
    return [e[2] for e in DiskStore(path).events()]


def _run(fn, args, cache_dir, **options):
    """Compile ``fn`` afresh (a new CompiledFunction: only the disk can help), run forward and backward."""
    args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    compiled = jointgraph.aot_function(fn, cache=str(cache_dir), **options)
    out = compiled(*args)
    out.backward()
    return out.detach(), [a.grad for a in args if a.requires_grad], compiled


def _make(src: str, name: str = "step", namespace: dict | None = None):
    """A function from source, as a module-level function of a fresh module ``user_code``."""
    module = types.ModuleType("user_code")
    module.__dict__.update(torch=torch, **(namespace or {}))
    exec(compile(textwrap.dedent(src), "user_code.py", "exec"), module.__dict__)
    return module.__dict__[name]


def _args(dtype=torch.float32, n=4):
    return [torch.randn(n, 3, dtype=dtype, requires_grad=True), torch.randn(3, 5, dtype=dtype, requires_grad=True)]


BODY_A = "def step(x, w):\n    return (x @ w).relu().sum()\n"
BODY_B = "def step(x, w):\n    return (x @ w).sigmoid().sum()\n"


def test_hit_reuses_plan_and_matches_bit_for_bit(tmp_path):
    args = _args()
    cold_out, cold_grads, cold = _run(_make(BODY_A), args, tmp_path)
    warm_out, warm_grads, warm = _run(_make(BODY_A), args, tmp_path)
    assert _events(tmp_path) == ["miss", "store", "hit"]
    assert torch.equal(cold_out, warm_out)
    assert all(torch.equal(a, b) for a, b in zip(cold_grads, warm_grads, strict=True))
    cold_plan, warm_plan = cold.entries[0].plan, warm.entries[0].plan
    assert warm_plan.explain() == cold_plan.explain()
    assert warm_plan.timeline == cold_plan.timeline and warm_plan.peak_bytes == cold_plan.peak_bytes
    assert "trace" not in warm_plan.timings and "cache_load" in warm_plan.timings
    assert [str(n.meta.get("val")) for n in warm_plan.backward.graph.nodes] == \
        [str(n.meta.get("val")) for n in cold_plan.backward.graph.nodes]
    report = warm_plan.to_html(str(tmp_path / "warm.html"))   # the report works from a hit
    assert "Saved for the backward" in open(report).read()
    expected = (args[0] @ args[1]).relu().sum()
    torch.testing.assert_close(warm_out, expected.detach())


@pytest.mark.parametrize("change", ["body", "closure", "global helper", "option", "dtype", "shape", "grad mode",
                                    "requires_grad", "autocast-free default dtype"])
def test_every_change_misses(tmp_path, change):
    args = _args()
    _run(_make(BODY_A), args, tmp_path)
    fn, options, new_args = _make(BODY_A), {}, args
    if change == "body":
        fn = _make(BODY_B)
    elif change == "closure":
        fn = _closure(2.0)
        _run(fn, args, tmp_path)
        fn = _closure(3.0)
    elif change == "global helper":
        _run(_make("def step(x, w):\n    return helper(x @ w).sum()\n", namespace={"helper": _make(
            "def helper(y):\n    return y.relu()\n", "helper")}), args, tmp_path)
        fn = _make("def step(x, w):\n    return helper(x @ w).sum()\n", namespace={"helper": _make(
            "def helper(y):\n    return y.tanh()\n", "helper")})
    elif change == "option":
        options = {"partitioner": "default"}
    elif change == "dtype":
        new_args = _args(torch.float64)
    elif change == "shape":
        new_args = _args(n=6)
    elif change == "requires_grad":
        new_args = [args[0].detach(), args[1]]
    before = _events(tmp_path).count("hit")
    if change == "grad mode":
        with torch.no_grad():
            compiled = jointgraph.aot_function(fn, cache=str(tmp_path))
            out = compiled(*[a.detach() for a in args])
        torch.testing.assert_close(out, (args[0] @ args[1]).relu().sum().detach())
    elif change == "autocast-free default dtype":
        torch.set_default_dtype(torch.float64)
        try:
            _run(fn, args, tmp_path)
        finally:
            torch.set_default_dtype(torch.float32)
    else:
        out, grads, _ = _run(fn, new_args, tmp_path, **options)
        expected = fn(*[a.detach().clone().requires_grad_(a.requires_grad) for a in new_args])
        torch.testing.assert_close(out, expected.detach())
    assert _events(tmp_path).count("hit") == before, change


def _closure(scale: float):
    def step(x, w):
        return ((x @ w) * scale).sum()
    return step


def test_closure_value_hits_only_when_equal(tmp_path):
    args = _args()
    out2, _, _ = _run(_closure(2.0), args, tmp_path)
    out2b, _, _ = _run(_closure(2.0), args, tmp_path)
    out3, _, _ = _run(_closure(3.0), args, tmp_path)
    assert _events(tmp_path).count("hit") == 1
    torch.testing.assert_close(out3, out2 * 1.5)
    assert torch.equal(out2, out2b)


def test_torch_version_change_misses(tmp_path, monkeypatch):
    args = _args()
    _run(_make(BODY_A), args, tmp_path)
    monkeypatch.setattr(torch, "__version__", "9.99.0")
    environment.cache_clear()
    try:
        _run(_make(BODY_A), args, tmp_path)
    finally:
        monkeypatch.undo()
        environment.cache_clear()
    assert "hit" not in _events(tmp_path)
    _run(_make(BODY_A), args, tmp_path)
    assert _events(tmp_path)[-1] == "hit"


def _hook_run(tmp_path, pack, unpack):
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        return _run(_make("def step(x, w):\n    return (x @ w).sin().sum()\n"), _args(), tmp_path)


def _pack(t):
    return t


def _unpack(t):
    return t


def test_saved_tensor_hooks_key_and_bypass(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="jointgraph.cache")
    _hook_run(tmp_path, _pack, _unpack)   # no stable hash: bypassed, reason logged once
    _hook_run(tmp_path, _pack, _unpack)
    reasons = [r.getMessage() for r in caplog.records if "bypassed" in r.getMessage()]
    assert len(reasons) == 1 and "saved-tensor pack hook" in reasons[0] and "cache_hash" in reasons[0]
    assert "store" not in _events(tmp_path)

    def pack_a(t):
        return t * 1

    def pack_b(t):
        return t * 1

    cache_hash(pack_a, "pack-v1")
    cache_hash(pack_b, "pack-v2")
    cache_hash(_unpack, "unpack-v1")
    _hook_run(tmp_path, pack_a, _unpack)
    _hook_run(tmp_path, pack_a, _unpack)
    assert _events(tmp_path).count("hit") == 1
    _hook_run(tmp_path, pack_b, _unpack)   # another hash: a miss
    assert _events(tmp_path).count("hit") == 1 and _events(tmp_path)[-1] == "store"


def test_custom_compiler_needs_a_hash(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="jointgraph.cache")
    calls = []

    def my_compiler(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    _run(_make(BODY_A), _args(), tmp_path, fw_compiler=my_compiler)
    assert any("custom compiler without a stable hash" in r.getMessage() for r in caplog.records)
    assert "store" not in _events(tmp_path)
    cache_hash(my_compiler, "my-compiler-v1")
    _run(_make(BODY_A), _args(), tmp_path, fw_compiler=my_compiler)
    _run(_make(BODY_A), _args(), tmp_path, fw_compiler=my_compiler)
    assert _events(tmp_path)[-1] == "hit"
    assert len(calls) == 3   # the compiler runs on the reloaded graph too


def test_captured_tensor_bypasses(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="jointgraph.cache")
    weight = torch.randn(3, 5, requires_grad=True)

    def step(x):
        return (x @ weight).sum()

    x = torch.randn(4, 3)
    out = jointgraph.aot_function(step, cache=str(tmp_path))(x)
    torch.testing.assert_close(out, (x @ weight).sum())
    assert any("captures" in r.getMessage() and "bypassed" in r.getMessage() for r in caplog.records)
    assert "store" not in _events(tmp_path)


def test_module_attribute_and_parameter_shape_change_miss(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.GELU())
    x = torch.randn(2, 3)

    def run(m):
        return jointgraph.aot_module(m, cache=str(tmp_path))(x).sum()

    run(model)
    run(model)
    assert _events(tmp_path).count("hit") == 1
    model[1].approximate = "tanh"   # a plain attribute the forward reads
    out = run(model)
    torch.testing.assert_close(out, model(x).sum())
    assert _events(tmp_path).count("hit") == 1


def _entry_file(path) -> str:
    files = [e[0] for e in DiskStore(path).entries()]
    assert len(files) == 1
    return files[0]


@pytest.mark.parametrize("damage", ["flip", "truncate", "format"])
def test_damaged_entry_is_recompiled_with_a_warning(tmp_path, caplog, damage):
    args = _args()
    cold_out, cold_grads, _ = _run(_make(BODY_A), args, tmp_path)
    path = _entry_file(tmp_path)
    data = bytearray(open(path, "rb").read())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    elif damage == "truncate":
        data = data[:len(data) // 3]
    else:
        data[8] += 1   # another format version
    open(path, "wb").write(bytes(data))
    caplog.set_level(logging.WARNING, logger="jointgraph.cache")
    out, grads, _ = _run(_make(BODY_A), args, tmp_path)
    assert any("ignoring entry" in r.getMessage() for r in caplog.records)
    assert torch.equal(out, cold_out) and all(torch.equal(a, b) for a, b in zip(grads, cold_grads, strict=True))
    _run(_make(BODY_A), args, tmp_path)   # rewritten: a hit now
    assert _events(tmp_path)[-2:] == ["store", "hit"]


def test_lru_eviction(tmp_path):
    store = DiskStore(tmp_path, max_bytes=3200)   # three entries of 1000 bytes and a header fit, four do not
    for i, key in enumerate(("a" * 64, "b" * 64, "c" * 64)):
        store.write(key, bytes(1000))
        os.utime(store.path(key), (1000 + i, 1000 + i))
    assert store.read("a" * 64) is not None   # touched: now the most recent
    store.write("d" * 64, bytes(1000))
    kept = sorted(p.name[0] for p, _, _ in store.entries())
    assert kept == ["a", "c", "d"]   # b: the least recently used


def test_store_keeps_a_usage_ledger_and_lists_the_directory_only_to_evict(tmp_path, monkeypatch):
    store = DiskStore(tmp_path, max_bytes=3200)
    listed = []
    entries = DiskStore.entries
    monkeypatch.setattr(DiskStore, "entries", lambda self: listed.append(1) or entries(self))
    store.write("a" * 64, bytes(1000))   # no ledger yet: counted once
    assert len(listed) == 1
    store.write("b" * 64, bytes(1000))
    store.write("b" * 64, bytes(500))   # replaces b: the ledger drops the old file's bytes
    store.write("c" * 64, bytes(1000))
    assert len(listed) == 1   # under the bound: nothing listed
    on_disk = sum(size for _, size, _ in entries(store))
    assert int((tmp_path / "usage").read_text()) == on_disk
    store.write("d" * 64, bytes(1000))   # over the bound: listed, the oldest evicted, the ledger recounted
    assert len(listed) == 2
    assert int((tmp_path / "usage").read_text()) == sum(size for _, size, _ in entries(store)) <= 3200


def test_stale_usage_ledger_is_recounted(tmp_path):
    store = DiskStore(tmp_path, max_bytes=2100)
    store.write("a" * 64, bytes(1000))
    (tmp_path / "usage").write_text("0\n")   # wrong (files added by hand), and an hour old
    os.utime(tmp_path / "usage", (time.time() - 7200, time.time() - 7200))
    store.write("b" * 64, bytes(1000))
    store.write("c" * 64, bytes(1000))
    assert len(store.entries()) == 2   # recounted, so the third store evicted one


def test_dynamo_graph_hits_after_reset(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    x = torch.randn(3, 8)
    results = []
    for _ in range(2):
        torch._dynamo.reset()
        model.zero_grad()
        out = torch.compile(model, backend=jointgraph.backend(cache=str(tmp_path)))(x).sum()
        out.backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    torch._dynamo.reset()
    assert _events(tmp_path) == ["miss", "store", "hit"]
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1], strict=True))


def test_cli_info_and_clear(tmp_path, capsys):
    from jointgraph.cli import main

    _run(_make(BODY_A), _args(), tmp_path)
    _run(_make(BODY_A), _args(), tmp_path)
    assert main(["cache", "info", "--dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "entries: 1," in text and "1 hit, 1 miss, 1 store" in text
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert DiskStore(tmp_path).entries() == []


def test_env_var_is_read_by_the_entry_point(tmp_path, monkeypatch):
    monkeypatch.setenv("JOINTGRAPH_CACHE_DIR", str(tmp_path))
    assert jointgraph.aot_function(lambda x: x).options.cache == str(tmp_path)
    assert jointgraph.aot_function(lambda x: x, cache=False).options.cache is False
    monkeypatch.setenv("JOINTGRAPH_CACHE_DIR", "off")
    assert jointgraph.aot_function(lambda x: x).options.cache is False


_CHILD = """
import sys, torch, jointgraph
from jointgraph.bench.gpt import GPT, GPTConfig
torch.manual_seed(0)
model = GPT(GPTConfig(layers=1, d_model=32, heads=2, vocab=64, seq=16))
idx = torch.randint(0, 64, (2, 16))
step = jointgraph.aot_module(model, cache=sys.argv[1])
loss = step(idx).logsumexp(-1).mean()
loss.backward()
torch.save([loss.detach(), *[p.grad for p in model.parameters()]], sys.argv[2])
"""


def test_two_concurrent_writers_then_a_warm_process(tmp_path):
    """Two processes compile one key at once (both store it); a third loads it; all agree bit for bit."""
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": ROOT}

    def start(name):
        return subprocess.Popen([sys.executable, str(script), str(cache_dir), str(tmp_path / name)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    writers = [start("a.pt"), start("b.pt")]
    for p in writers:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
    warm = start("c.pt")
    out, _ = warm.communicate(timeout=300)
    assert warm.returncode == 0, out
    events = _events(cache_dir)
    assert events.count("store") >= 1 and events[-1] == "hit", events
    assert len(DiskStore(cache_dir).entries()) == 1
    results = [torch.load(tmp_path / n) for n in ("a.pt", "b.pt", "c.pt")]
    for other in results[1:]:
        assert all(torch.equal(x, y) for x, y in zip(results[0], other, strict=True))


_LAZY_CHILD = """
import sys, torch, jointgraph
torch.manual_seed(0)
x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True)
step = jointgraph.aot_function(lambda x, w: (x @ w).relu().sum(), cache=sys.argv[1])
step(x, w).backward()
plan = step.entries[0].plan
print("dynamo" if "torch._dynamo" in sys.modules else "no dynamo", "cache_load" in plan.timings)
print(plan.backward.graph.find_nodes(op="placeholder")[0].meta["val"].shape)   # made on first read
"""


def test_warm_start_with_eager_compilers_makes_no_fake_tensors(tmp_path):
    """Note [Cached node values]: a hit with the "eager" compilers makes node values on first read, so
    the warm process does not even import Dynamo (the fake mode's first use does)."""
    script = tmp_path / "child.py"
    script.write_text(_LAZY_CHILD)
    env = {**os.environ, "PYTHONPATH": ROOT}
    lines = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script), str(tmp_path / "cache")], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines.append(proc.stdout.splitlines())
    assert lines[0][0] == "dynamo False" and lines[1][0] == "no dynamo True"
    assert lines[0][1] == lines[1][1] == "torch.Size([4, 3])"
