"""The random-program differential tester (jointgraph.bench.fuzz): its oracle catches wrong compilers,
it has no false alarms on eager itself, and a seeded CI-sized run of jointgraph finds nothing wrong."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.utils._pytree as pytree

import jointgraph
from jointgraph.bench import fuzz

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def program(source: str, *lines: str, args: str) -> fuzz.Program:
    """A hand-written program: f's source, then make_inputs' lines (all tensors named) and its arguments."""
    names = [line.split(" = ")[0] for line in lines]
    body = "".join(f"    {line}\n" for line in ("g = torch.Generator().manual_seed(0)", *lines))
    named = ", ".join(f"{n!r}: {n}" for n in names)
    return fuzz.Program(0, source, f"def make_inputs():\n{body}    return ({args}), {{{named}}}\n")


def fake(wrap) -> fuzz.Contender:
    """A deliberately wrong "compiler": ``wrap(fn, *args)`` runs in place of ``fn(*args)``."""
    return fuzz.Contender("fake", lambda fn: lambda *args: wrap(fn, *args))


EAGER = fuzz.Contender("eager", lambda fn: fn)
LEAF = "a = torch.randn(3, 4, generator=g).requires_grad_()"
PLAIN = "a = torch.randn(3, 4, generator=g)"
DOUBLED = program("def f(a):\n    return a * 2\n", LEAF, args="a,")


def scale_floats(value, factor: float):
    return pytree.tree_map(lambda x: x * factor if isinstance(x, torch.Tensor) and x.is_floating_point() else x,
                           value)


class DoubleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class BackwardRaises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("boom in backward")


class BackwardRaisesRuntimeError(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("a saved value was modified")


### The generator

def test_generate_is_deterministic_and_varied():
    assert fuzz.generate(3) == fuzz.generate(3)
    assert len({fuzz.generate(s).source for s in range(20)}) == 20


def test_generated_programs_cover_the_features_of_issue_11():
    programs = [fuzz.generate(s) for s in range(300)]
    bodies = "\n".join(p.source for p in programs)
    recipes = "\n".join(p.inputs for p in programs)
    for feature in ("with torch.no_grad():", ".detach()", ".data", ".t_()", ".transpose_(", ".unsqueeze_(",
                    ".squeeze_(", ".requires_grad_()", ".set_(", ".add_(", ".mul_(", ".fill_(", ".zero_()",
                    ".copy_(", ".masked_fill_(", ".clamp_(", "] = ", ".expand(", ".diagonal()", ".narrow(",
                    ".select(", ".view(-1)", ".reshape(", ".unsqueeze(0)", ".t()", " @ ", ".sum()", "return a"):
        assert feature in bodies, feature
    for feature in ("[::2]", ".t()", "[:, :", ".detach()", ".expand(", "leaf0 * 1", "leaf0.clone()",
                    ".requires_grad_()", "> 0", "torch.randint("):
        assert feature in recipes, feature
    aliased = [p for p in programs if len(p.make_inputs()[0]) > 1 and _storages(p.make_inputs()[0]) < len(
        p.make_inputs()[0])]
    same_twice = [p for p in programs if len({id(t) for t in p.make_inputs()[0]}) < len(p.make_inputs()[0])]
    assert len(aliased) > 30 and len(same_twice) > 5


def _storages(args: tuple) -> int:
    return len({t.untyped_storage().data_ptr() for t in args})


def test_eager_against_itself_passes_and_some_programs_raise_in_eager():
    """No false alarms: the oracle is deterministic, and programs that raise in eager are part of the mix."""
    phases = []
    for seed in range(120):
        p = fuzz.generate(seed)
        eager = fuzz.observe(p, p.function())
        phases.append(eager.phase)
        assert fuzz.check(p, EAGER, eager) == fuzz.Outcome("pass"), p.render()
    assert 0.03 < phases.count("call") / len(phases) < 0.25
    assert 0.01 < phases.count("backward") / len(phases) < 0.25


def test_render_is_a_runnable_reproducer():
    namespace: dict = {}
    exec(fuzz.generate(11).render(), namespace)
    assert "out" in namespace


### The oracle catches deliberately wrong compilers

def test_catches_slightly_scaled_outputs():
    outcome = fuzz.check(DOUBLED, fake(lambda fn, *args: scale_floats(fn(*args), 1.0001)))
    assert (outcome.status, outcome.key) == ("wrong", "output values")


def test_catches_a_dropped_input_mutation():
    p = program("def f(a):\n    a.add_(1.0)\n    return a * 2\n", PLAIN, args="a,")
    outcome = fuzz.check(p, fake(lambda fn, a: fn(a.clone())))
    assert outcome.status == "wrong" and outcome.message.startswith("input a:")


def test_catches_a_mutation_through_a_view_written_back_wrong():
    p = program("def f(a):\n    a.add_(1.0)\n    return a.sum()\n", "base = torch.randn(6, generator=g)",
                "a = base[::2]", args="a,")

    def wrong_writeback(fn, a):
        out = fn(a.contiguous())
        a.add_(1.0)
        a.add_(0.001)
        return out

    outcome = fuzz.check(p, fake(wrong_writeback))
    assert (outcome.status, outcome.key) == ("wrong", "input values") and "input" in outcome.message


def test_catches_a_spurious_version_bump():
    def bump(fn, a):
        out = fn(a)
        a.add_(0.0)
        return out

    p = program("def f(a):\n    return a * 2\n", PLAIN, args="a,")
    assert fuzz.check(p, fake(bump)).key == "input version_changed"


def test_catches_wrong_gradients():
    outcome = fuzz.check(DOUBLED, fake(lambda fn, a: DoubleGrad.apply(fn(a))))
    assert (outcome.status, outcome.key) == ("wrong", "grad values")


def test_tells_a_zero_gradient_from_none():
    p = program("def f(a, b):\n    return a * 2\n", LEAF, "b = torch.randn(2, generator=g).requires_grad_()",
                args="a, b")
    outcome = fuzz.check(p, fake(lambda fn, a, b: fn(a, b) + 0 * b.sum()))
    assert (outcome.status, outcome.key) == ("wrong", "grad None-ness")


def test_catches_detached_outputs():
    outcome = fuzz.check(DOUBLED, fake(lambda fn, a: fn(a).detach()))
    assert (outcome.status, outcome.key) == ("wrong", "output requires_grad")


def test_catches_wrong_strides():
    p = program("def f(a):\n    return (a * 2).t()\n", LEAF, args="a,")
    outcome = fuzz.check(p, fake(lambda fn, a: fn(a).contiguous()))
    assert (outcome.status, outcome.key) == ("wrong", "output strides")


def test_catches_lost_aliasing_of_outputs():
    view = program("def f(a):\n    return a[0]\n", PLAIN, args="a,")
    assert fuzz.check(view, fake(lambda fn, a: fn(a).clone())).key == "output shares_storage_with"
    same = program("def f(a):\n    return a\n", PLAIN, args="a,")
    assert fuzz.check(same, fake(lambda fn, a: fn(a).view_as(a))).key == "output same_object_as"


def test_catches_a_swallowed_exception_and_one_raised_too_early():
    raises_at_call = program("def f(a):\n    a.add_(1.0)\n    return a\n", LEAF, args="a,")
    outcome = fuzz.check(raises_at_call, fake(lambda fn, a: a * 1))
    assert (outcome.status, outcome.key) == ("wrong", "no exception at call")

    def raise_early(fn, a):
        fn(a)
        raise RuntimeError("too early")

    raises_at_backward = program("def f(a):\n    t0 = a.sin()\n    a.mul_(2.0)\n    return t0\n",
                                 "leaf = torch.randn(3, generator=g).requires_grad_()", "a = leaf * 1", args="a,")
    assert fuzz.observe(raises_at_backward, raises_at_backward.function()).phase == "backward"
    outcome = fuzz.check(raises_at_backward, fake(raise_early))
    assert (outcome.status, outcome.key) == ("wrong", "exception at call, eager at backward")


def test_refusals_and_crashes_are_told_apart():
    def refuse(fn, *args):
        raise jointgraph.UnsupportedError("cannot compile this")

    def crash(fn, *args):
        raise ValueError("internal error")

    assert fuzz.check(DOUBLED, fake(refuse)) == fuzz.Outcome("refused", "cannot compile this", "cannot compile this")
    assert fuzz.check(DOUBLED, fake(crash)).status == "crash"
    outcome = fuzz.check(DOUBLED, fake(lambda fn, a: BackwardRaises.apply(fn(a))))
    assert outcome.status == "crash" and outcome.key.startswith("backward: ValueError")


def test_catches_a_backward_that_raises_for_more_outputs_than_eager():
    """Eager's backward raises for y alone (x, which y's gradient needs, is written after); a compiler
    whose every output raises at backward raises the same type in the same phase, and is still wrong."""
    p = program("def f(x, w):\n    y = x @ w\n    x.add_(1.0)\n    return y, w * 2\n",
                "x = torch.randn(3, 3, generator=g)", "w = torch.randn(3, 3, generator=g).requires_grad_()",
                args="x, w")
    eager = fuzz.observe(p, p.function())
    assert (eager.phase, eager.raising) == ("backward", (0,))
    assert fuzz.check(p, EAGER, eager) == fuzz.Outcome("pass")
    every_output_raises = fake(lambda fn, *args: tuple(BackwardRaisesRuntimeError.apply(o) for o in fn(*args)))
    outcome = fuzz.check(p, every_output_raises, eager)
    assert (outcome.status, outcome.key) == ("wrong", "backward raises for other outputs")


@pytest.mark.parametrize("error", [torch._dynamo.exc.TorchRuntimeError, torch._dynamo.exc.InternalTorchDynamoError])
def test_a_dynamo_error_that_backend_eager_does_not_raise_is_not_a_refusal(error):
    """Only an error of Dynamo's that backend="eager" raises on the program too is Dynamo's own."""
    def raise_dynamo_error(fn, *args):
        raise error("raised by the compiler under test")

    outcome = fuzz.check(DOUBLED, fake(raise_dynamo_error))
    assert outcome.status == "crash" and outcome.key.startswith(f"call: {error.__name__}"), outcome


def test_an_assertion_dynamo_raises_with_backend_eager_too_is_dynamos_own():
    """Fuzz seed 60008: Dynamo's fake-tensor conversion of a returned input view (whose base a
    copy_ from a tensor that requires grad wrote) asserts, with backend="eager" as with any other:
    Dynamo's own error, not the backend's. An assertion backend="eager" does not raise is a crash."""
    p = program("def f(a, b, c):\n    a[:, 1:].copy_(c)\n    return b\n",
                "base0 = torch.randn(2, 4, generator=g)", "x1 = base0[:, :2]",
                "leaf2 = torch.randn(6, generator=g).requires_grad_()", "base2 = leaf2 * 1", "x2 = base2[3:]",
                args="base0, x1, x2")
    dynamo = fuzz.contenders(dynamo_every=1)["dynamo"]
    outcome = fuzz.check(p, dynamo)
    assert outcome.status == "refused" and "backend='eager' too" in outcome.message, outcome

    def assertion(fn, *args):
        raise AssertionError("raised by the compiler under test")

    assert fuzz.check(p, fake(assertion)).status == "crash"


def test_a_wrong_result_backend_eager_gives_too_is_dynamos_own_only_through_dynamo():
    """Fuzz seed 1900858: Dynamo returns the torch.Size of an empty slice as it was before the slice's
    unsqueeze_(0), with backend="eager" too: Dynamo's own result, not the backend's. The same wrong result
    from a compiler that is not Dynamo is wrong."""
    p = program("def f(a):\n    t1 = a[1:1]\n    t1.unsqueeze_(0)\n    return t1.shape\n",
                "a = torch.randn(4, 4, generator=g)", args="a,")
    outcome = fuzz.check(p, fuzz.contenders(dynamo_every=1)["dynamo"])
    assert outcome.status == "refused" and "Dynamo's own result" in outcome.message, outcome

    def stale_size(fn, a):
        return a[1:1].shape

    outcome = fuzz.check(p, fake(stale_size))
    assert (outcome.status, outcome.key) == ("wrong", "output structure"), outcome


def test_dynamos_own_error_under_a_guard_change_is_confirmed_in_that_call():
    """Fuzz seed 310050: Dynamo itself raises in the third call, under no_grad (a view made in no_grad mode
    and an in-place op with grad mode on, in its own bytecode). backend="eager" was run once, without the
    guard change, so the error counted as ours."""
    source = ("def f(a, b):\n    t0 = b.view(-1).requires_grad_(True)\n    a.t_()\n    t1 = t0 * SCALE\n"
              "    return b.sum()\n")
    p = dataclasses.replace(program(source, "leaf0 = torch.randn(4, generator=g).requires_grad_()",
                                    "base0 = leaf0.clone()", args="base0, base0"), guard="no_grad")
    outcome = fuzz.check(p, fuzz.contenders(dynamo_every=1)["dynamo"])
    assert outcome.status == "refused" and "guard no_grad" in outcome.message \
        and "backend='eager' too" in outcome.message, outcome


def test_second_call_is_checked_too():
    calls = []

    def wrong_when_cached(fn, a):
        calls.append(a)
        return fn(a) if len(calls) == 1 else scale_floats(fn(a), 1.01)

    outcome = fuzz.check(DOUBLED, fake(wrong_when_cached))
    assert outcome.status == "wrong" and outcome.key == "call 2: output values"


def test_minimize_keeps_the_failure_and_drops_the_rest():
    p = program("def f(a, b):\n    t0 = a.sin()\n    with torch.no_grad():\n        b.add_(1.0)\n"
                "    t1 = a * 3\n    return a * 2, t1\n",
                LEAF, "b = torch.randn(3, generator=g)", args="a, b")
    scaled = fake(lambda fn, *args: scale_floats(fn(*args), 1.0001))
    small = fuzz.minimize(p, scaled)
    assert small.source.count("\n") < p.source.count("\n") and "b" not in small.params
    assert fuzz.check(small, scaled).key == fuzz.check(p, scaled).key == "output values"


### jointgraph under the oracle

def test_random_programs_match_eager():
    """The CI-sized run: every program passes or is refused clearly under every contender
    (the long run: benchmarks/fuzz.py)."""
    contenders = fuzz.contenders(dynamo_every=3)
    summary = fuzz.run(90, seed=2024, contenders=list(contenders.values()), progress=False)
    report = "\n\n".join(f"{f.contender}: {f.outcome.message}\n{f.program.render()}" for f in summary.failures[:3])
    assert not summary.failures, report
    assert sum(c["pass"] for c in summary.counts.values()) > 0.6 * sum(sum(c.values()) for c in summary.counts.values())


def test_benchmark_cli_prints_counts(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "fuzz", raising=False)
    import fuzz as fuzz_cli

    result = fuzz_cli.main(["--n", "3", "--seed", "5", "--contenders", "default", "--show", "1"])
    assert sum(result["counts"]["default"].values()) == 3
    assert re.search(r"default +\d+ pass, \d+ refused, \d+ wrong, \d+ crash", capsys.readouterr().out)


### Issue 12's writers and oracle steps (opt-in: fuzz_semantics.SEMANTICS12_WRITERS, --semantics12)

def _semantics12(seed: int) -> fuzz.Program:
    from jointgraph.bench import fuzz_semantics

    return fuzz.generate(seed, fuzz_semantics.SEMANTICS12_WRITERS)


def test_semantics12_is_opt_in_and_covers_issue_12():
    assert all(fuzz.generate(s).guard is None and not fuzz.generate(s).mutate_outputs for s in range(30))
    programs = [_semantics12(s) for s in range(200)]
    bodies = "\n".join(p.source for p in programs)
    for feature in (".detach().requires_grad_()", ".requires_grad_(True)", "requires_grad=True", ".shape",
                    ".dim()", 'with torch.autocast("cpu", torch.bfloat16):', "enabled=False", "SCALE",
                    "torch.ones(", ".unbind(0)", ".split(1)", ".chunk(2)", ".detach().add_(1)", "return t"):
        assert feature in bodies, feature
    assert {p.guard for p in programs} == {None, *fuzz.GUARDS}
    assert 10 < sum(p.mutate_outputs for p in programs) < 190
    assert 5 < sum(p.assign_data for p in programs) < 100
    assert any("torch._dynamo.graph_break()" in p.source for p in programs)
    assert any(re.search(r"return .*\bn\d", p.source) for p in programs)    # non-tensor outputs
    # Note [Grad mode switched on inside]: regions with grad mode on (and calls under the "no_grad" guard, above)
    assert any("with torch.enable_grad():" in p.source for p in programs)
    assert any("with torch.set_grad_enabled(True):" in p.source for p in programs)


@pytest.mark.parametrize("seed,region,refusal", [
    # a value computed under torch.enable_grad() in the third call, under no_grad, came back without eager's history
    (13600291, "enable_grad", "torch.enable_grad()"),
    # an input view written in place under set_grad_enabled(True): its base (the caller's) takes the history
    (13900026, "set_grad_enabled", "torch.enable_grad()"),
    # a view taken under torch.inference_mode(): c10's version-counter error at the call
    (13600285, "inference_mode", "a view taken under it"),
    # an inference tensor returned: eager's in-place op on it after the call raises, the compiled one's did not
    (13600304, "inference_mode", "a result is an inference tensor"),
])
def test_semantics12_grad_mode_writer_finds_modes_switched_on_inside(seed, region, refusal):
    """--semantics12's grad_mode writer (Note [Grad mode switched on inside]): each was wrong or a crash before,
    and is refused by name now."""
    program = _semantics12(seed)
    assert region in program.source
    outcome = fuzz.check(program, fuzz.contenders()["default"])
    assert outcome.status == "refused" and refusal in outcome.message, outcome.message


def test_the_oracle_reads_no_version_of_a_tensor_without_a_counter():
    """--semantics12 seed 14600584: an inference tensor returned, then given other data by ``.data =`` after the call
    (is_inference() reads False, yet it has no version counter): the oracle's counter probe raised on eager's run."""
    program = _semantics12(14600584)
    assert "inference_mode" in program.source and program.assign_data
    observation = fuzz.observe(program, program.function())
    assert observation.error is None or observation.phase != "call"
    assert fuzz.check(program, fuzz.contenders()["default"]).status in ("pass", "refused")


def test_semantics12_eager_against_itself_passes_and_raises_in_every_phase():
    phases = []
    for seed in range(80):
        p = _semantics12(seed)
        eager = fuzz.observe(p, p.function())
        phases.append(eager.phase)
        assert fuzz.check(p, EAGER, eager) == fuzz.Outcome("pass"), p.render()
    assert {"call", "after", "backward"} <= set(phases)


def test_guard_step_catches_a_baked_in_global():
    import types

    def frozen_globals(fn):
        return types.FunctionType(fn.__code__, dict(fn.__globals__))

    p = dataclasses.replace(program("def f(a):\n    return a * SCALE\n", LEAF, args="a,"), guard="scale")
    assert fuzz.check(p, EAGER) == fuzz.Outcome("pass")
    outcome = fuzz.check(p, fuzz.Contender("frozen", frozen_globals))
    assert (outcome.status, outcome.key) == ("wrong", "guard scale: output values")


def test_guard_step_catches_ignored_autocast_and_grad_mode():
    source = "def f(a):\n    return a @ a.t()\n"
    autocast = dataclasses.replace(program(source, LEAF, args="a,"), guard="autocast")
    disabled = fake(lambda fn, a: _without_autocast(fn, a))
    assert fuzz.check(autocast, disabled).key == "guard autocast: output dtype"
    no_grad = dataclasses.replace(program(source, LEAF, args="a,"), guard="no_grad")
    assert fuzz.check(no_grad, fake(lambda fn, a: _with_grad(fn, a))).key == "guard no_grad: output requires_grad"


def _without_autocast(fn, *args):
    with torch.autocast("cpu", enabled=False):
        return fn(*args)


def _with_grad(fn, *args):
    with torch.enable_grad():
        return fn(*args)


def test_catches_a_non_tensor_output_of_another_type():
    p = program("def f(a):\n    return a * 2, a.shape\n", LEAF, args="a,")
    outcome = fuzz.check(p, fake(lambda fn, a: (fn(a)[0], tuple(fn(a)[1]))))
    assert outcome.status == "wrong" and outcome.key in ("output structure", "output type")


def test_outputs_modified_in_place_must_raise_where_eager_does():
    p = dataclasses.replace(program("def f(a):\n    return a.unbind(0)[0]\n", LEAF, args="a,"), mutate_outputs=True)
    assert fuzz.observe(p, p.function()).phase == "after"
    outcome = fuzz.check(p, fake(lambda fn, a: fn(a).clone()))
    assert outcome.status == "wrong"


SEMANTICS12_SEEDS = range(1200, 1240)


def test_semantics12_random_programs_match_eager():
    from jointgraph.bench import fuzz_semantics

    chosen = fuzz.contenders(dynamo_every=4)
    summary = fuzz.run(len(SEMANTICS12_SEEDS), seed=SEMANTICS12_SEEDS.start,
                       contenders=[chosen["default"], chosen["dynamo"]], progress=False,
                       writers=fuzz_semantics.SEMANTICS12_WRITERS)
    report = "\n\n".join(f"{f.contender}: {f.outcome.message}\n{f.program.render()}" for f in summary.failures)
    assert not summary.failures, report


def test_no_grad_views_step_programs_match_eager():
    """``benchmarks/fuzz.py --no-grad-views``: view arguments made under ``torch.no_grad()`` (review of the twelfth
    session: passed beside another view of their base, and read with grad mode on after a write through that one
    under no_grad, eager raises; the views were rebuilt from their synthetic base under the call's grad mode, and
    the call ran). Its own random stream: the programs without such views are --semantics12's, unchanged."""
    from jointgraph.bench import fuzz_semantics

    writers = fuzz.Writers(fuzz_semantics.SEMANTICS12_WRITERS,
                           (*fuzz_semantics.SEMANTICS12_WRITERS.steps, "no_grad_views"))
    seeds = range(3400, 3430)
    programs = [fuzz.generate(seed, writers) for seed in seeds]
    assert sum("with torch.no_grad():\n        x" in p.inputs for p in programs) > 4
    plain = [fuzz.generate(seed, fuzz_semantics.SEMANTICS12_WRITERS) for seed in seeds]
    assert all(p.source == q.source for p, q in zip(programs, plain, strict=True) if "no_grad" not in p.inputs)
    chosen = fuzz.contenders(dynamo_every=2)
    summary = fuzz.run(len(programs), seed=seeds.start, contenders=[chosen["default"], chosen["dynamo"]],
                       progress=False, writers=writers)
    report = "\n\n".join(f"{f.contender}: {f.outcome.message}\n{f.program.render()}" for f in summary.failures)
    assert not summary.failures, report
    # one it found on the twelfth session's code: ``x0 = base0[:, 1:]`` made under no_grad, passed beside a view of
    # the same elements made with grad, both written under no_grad, then ``a.sum()``: eager raises at the call, the
    # step raised at the backward
    found = fuzz.generate(15110120, writers)
    assert "with torch.no_grad():\n        x0 = base0[:, 1:]" in found.inputs
    for contender in ("default", "dynamo"):
        outcome = fuzz.check(found, fuzz.contenders()[contender])
        assert outcome.status == "pass", outcome.message


def test_checkpoint_writer_programs_match_eager():
    """``benchmarks/fuzz.py --checkpoint``: torch.utils.checkpoint regions in issue 12's programs (in-place ops
    inside a region, Note [Activation checkpointing]: through torch.compile they crashed on PyTorch's cache of
    the region's results). Weighted up here so that most programs have one; the reentrant ones are refused by
    name under aot_function."""
    from jointgraph.bench import fuzz_semantics

    writer, _ = fuzz_semantics.CHECKPOINT_WRITERS["checkpoint"]
    writers = fuzz.Writers({**fuzz_semantics.SEMANTICS12_WRITERS, "checkpoint": (writer, 8.0)},
                           fuzz_semantics.SEMANTICS12_WRITERS.steps)
    programs = [fuzz.generate(seed, writers) for seed in range(3300, 3330)]
    assert sum("torch.utils.checkpoint.checkpoint(" in p.source for p in programs) > 8
    assert any("use_reentrant=True" in p.source for p in programs)
    assert any(".mul_(0.5)" in p.source for p in programs)
    chosen = fuzz.contenders(dynamo_every=2)
    summary = fuzz.run(len(programs), seed=3300, contenders=[chosen["default"], chosen["dynamo"]], progress=False,
                       writers=writers)
    report = "\n\n".join(f"{f.contender}: {f.outcome.message}\n{f.program.render()}" for f in summary.failures)
    assert not summary.failures, report
    # the program --semantics12 --checkpoint found: a region writing exp's saved result, after a graph break
    found = fuzz.generate(14920148, fuzz.Writers({**fuzz_semantics.SEMANTICS12_WRITERS,
                                                   **fuzz_semantics.CHECKPOINT_WRITERS},
                                                  fuzz_semantics.SEMANTICS12_WRITERS.steps))
    assert "u.exp().mul_(0.5)" in found.source and "graph_break" in found.source
    outcome = fuzz.check(found, fuzz.contenders()["dynamo"])
    assert outcome.status == "pass", outcome.message


# ### TwoTensor programs (jointgraph/bench/fuzz_subclass.py, Note [Tensor subclasses])


def test_subclass_programs_match_eager():
    from jointgraph.bench import fuzz_subclass

    summary = fuzz_subclass.run(12, seed=0, contenders=["default", "mincut"])
    for name, counts in summary.counts.items():
        assert counts["wrong"] == counts["crash"] == 0, (name, summary.failures)
        assert counts["pass"] >= 10, (name, summary.failures)


def test_subclass_run_passes_eager_and_honours_every():
    from jointgraph.bench import fuzz_subclass

    every_other = dataclasses.replace(EAGER, name="every_other", every=2)
    summary = fuzz_subclass.run(3, seed=1, contenders=[EAGER, every_other])
    assert summary.counts == {"eager": {"pass": 3, "refused": 0, "wrong": 0, "crash": 0},
                              "every_other": {"pass": 1, "refused": 0, "wrong": 0, "crash": 0}}, summary.failures


def test_subclass_oracle_catches_scaled_outputs_and_lost_gradients():
    from jointgraph.bench import fuzz_subclass

    def scaled(fn):
        compiled = jointgraph.aot_function(fn)
        return lambda *args: tuple(o * 1.001 if isinstance(o, torch.Tensor) else o for o in compiled(*args))

    def no_grad(fn):
        def run(*args):
            with torch.no_grad():
                return fn(*args)
        return run

    programs = [fuzz_subclass.generate(seed) for seed in range(6)]
    for broken in (scaled, no_grad):
        statuses = [fuzz_subclass.check(p, fuzz.Contender("broken", broken))[0] for p in programs]
        assert "wrong" in statuses


def test_a_statement_that_raises_only_on_fresh_inputs_ends_the_program():
    """--semantics12 seed 3901335: a statement ran once on its writer's scope, then raised on fresh inputs when the
    program was replayed; the generator crashed the long run. It now ends the program before that statement."""
    from jointgraph.bench import fuzz, fuzz_semantics

    writers = fuzz.Writers(dict(fuzz_semantics.SEMANTICS12_WRITERS), fuzz_semantics.SEMANTICS12_WRITERS.steps)
    program = fuzz.generate(3901335, writers)
    assert program.source.count("\n") >= 2
    args, _ = program.make_inputs()
    program.function()(*args)   # eager runs it
