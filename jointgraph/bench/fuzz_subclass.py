"""Random programs over TwoTensor arguments, checked against eager PyTorch (Note [Tensor subclasses]).

    python benchmarks/fuzz.py --subclass --n 200 --seed 0

A separate generator from ``fuzz.py``'s: that oracle compares storages, versions and aliasing of
plain tensors, which a wrapper subclass has not (its storage is its inner tensors'). Here a program
takes two or three ``TwoTensor`` arguments (some requiring grad, some not) and one plain tensor,
and runs random statements written while running them on live tensors: elementwise and matmul ops
on subclasses and plain tensors, views, reductions, reading an inner tensor (``x.a``), building a
``TwoTensor`` inside, in-place ops on intermediates and on arguments that do not require grad. It
returns some of the values. Eager and each contender run on fresh inputs, twice; compared: the
outputs (pytree, types, a subclass's metadata and inner values), the arguments after the call
(inner values), and after ``sum(o.sum())`` over the differentiable outputs is differentiated, the
``.grad`` of every argument (a subclass, with its metadata). ``UnsupportedError`` is ``refused``.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

from .fuzz import STATUSES, Contender, _first_line, _inner, _is_refusal, _resolve, _same_values

SHAPES = ((3, 4), (4, 4), (4, 3), (4,))
_HEADER = "import torch\nfrom torch.testing._internal.two_tensor import TwoTensor\n"


@dataclasses.dataclass(frozen=True)
class SubclassProgram:
    seed: int
    source: str          # ``make_inputs()`` and ``f``

    def namespace(self) -> dict[str, Any]:
        env: dict[str, Any] = {}
        exec(compile(_HEADER + self.source, f"<subclass fuzz {self.seed}>", "exec"), env)   # noqa: S102 - ours
        return env

    def render(self) -> str:
        return _HEADER + self.source


def _inputs(rng: random.Random) -> tuple[list[str], list[tuple[str, tuple[int, ...], bool, bool]]]:
    specs = []
    for k in range(rng.choice((2, 3))):
        specs.append((f"x{k}", rng.choice(SHAPES), rng.random() < 0.7, True))
    specs.append(("p", rng.choice(SHAPES), rng.random() < 0.3, False))   # with grad: its gradient may be a subclass
    lines = []
    for name, shape, grad, sub in specs:
        make = f"torch.randn({shape})"
        value = f"TwoTensor({make}, {make})" if sub else make
        lines.append(f"{name} = {value}" + (".requires_grad_()" if grad else ""))
    return lines, specs


def _statement(rng: random.Random, env: dict[str, Any], fresh: str, params: set[str]) -> str | None:
    names = [n for n, v in env.items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    x = rng.choice(names)
    same = [n for n in names if env[n].shape == env[x].shape]
    y = rng.choice(same)
    kind = rng.choice(("unary", "unary", "binary", "binary", "matmul", "view", "reduce", "inner", "make",
                       "inplace"))
    if kind == "unary":
        return f"{fresh} = {x}.{rng.choice(('sin()', 'exp()', 'relu()', 'tanh()', 'neg()'))} * {rng.choice((0.5, 2.0))}"
    if kind == "binary":
        return f"{fresh} = {x} {rng.choice(('+', '*', '-'))} {y}"
    if kind == "matmul":
        other = [n for n in names if env[n].dim() == 2 and env[x].dim() == 2 and env[n].shape[0] == env[x].shape[1]]
        return f"{fresh} = {x} @ {rng.choice(other)}" if other else None
    if kind == "view":
        views = [".reshape(-1)", ".unsqueeze(0)", "[1:]"] + ([".t()", ".transpose(0, 1)"] if env[x].dim() == 2 else [])
        return f"{fresh} = {x}{rng.choice(views)}"
    if kind == "reduce":
        return f"{fresh} = {x}.{rng.choice(('sum(0)', 'mean()', 'amax(-1)'))}"
    if kind == "inner":
        return f"{fresh} = {x}.{rng.choice('ab')} * 1.5" if hasattr(env[x], "a") else None
    if kind == "make":
        plain = [n for n in names if type(env[n]) is torch.Tensor]
        if not plain:
            return None
        p = rng.choice(plain)
        return f"{fresh} = TwoTensor({p}.detach() * 2.0, {p}.detach() + 1.0)"
    # in place: on an intermediate, or on an argument that does not require grad
    writable = [n for n in names if (n not in params or not env[n].requires_grad) and not env[n]._is_view()]
    if not writable:
        return None
    w = rng.choice(writable)
    return f"{w}.{rng.choice(('mul_', 'add_'))}({rng.choice((2.0, 0.5))})"


def generate(seed: int) -> SubclassProgram:
    """A program whose two calls and backwards run in eager (statements that raise are dropped while
    writing it; a program whose backward raises is written again, from the same random stream)."""
    return _generate(seed)[0]


def _generate(seed: int) -> tuple[SubclassProgram, list]:
    """``generate``'s program, with eager's ``observe`` of it (the run that shows eager runs it)."""
    rng = random.Random(seed)
    for _ in range(10):
        program = _write(rng, seed)
        try:
            return program, observe(program, None)
        except Exception:   # noqa: BLE001 - eager's backward raised (a saved value written in place)
            continue
    raise RuntimeError(f"subclass fuzz seed {seed}: eager raised on each of 10 programs written; try another seed")


def _write(rng: random.Random, seed: int) -> SubclassProgram:
    from torch.testing._internal.two_tensor import TwoTensor

    input_lines, specs = _inputs(rng)
    params = [name for name, *_ in specs]
    make = "def make_inputs():\n" + "".join(f"    {line}\n" for line in input_lines) + \
        f"    return {', '.join(params)},\n"
    torch.manual_seed(seed)
    env: dict[str, Any] = {"torch": torch, "TwoTensor": TwoTensor}
    exec(make, env)   # noqa: S102 - generated here
    env = dict(zip(params, env["make_inputs"](), strict=True))
    body: list[str] = []
    for k in range(rng.randint(3, 8)):
        line = _statement(rng, env, f"v{k}", set(params))
        if line is None:
            continue
        trial = dict(env)
        try:
            exec(line, {"torch": torch, "TwoTensor": TwoTensor}, trial)   # noqa: S102 - generated here
        except Exception:   # noqa: BLE001 - a statement eager rejects is dropped
            continue
        env = trial
        body.append(line)
    values = [n for n in env if n.startswith("v")] or [params[0]]
    returned = rng.sample(values, min(len(values), rng.randint(1, 3)))
    f = f"def f({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body) + \
        f"    return {', '.join(returned)},\n"
    return SubclassProgram(seed, make + "\n\n" + f)


### The oracle


def _describe(value: Any) -> Any:
    """Comparable form of an output, argument or gradient: type, metadata (strides aside), values."""
    from ..capture.subclasses import flatten, is_subclass

    if not isinstance(value, torch.Tensor):
        return value
    value = value.detach()
    if is_subclass(value):
        inner, meta = flatten(value)
        return ("subclass", meta.layout_free(), [_describe(t) for t in inner])
    return ("tensor", value.dtype, tuple(value.shape), value)


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, torch.Tensor):
        return isinstance(actual, torch.Tensor) and _same_values(expected, actual)
    if isinstance(expected, (tuple, list)):
        return isinstance(actual, (tuple, list)) and len(actual) == len(expected) and \
            all(_same(e, a) for e, a in zip(expected, actual, strict=True))
    return expected == actual


def observe(program: SubclassProgram, compile_fn: Callable[[Callable], Callable] | None) -> list:
    """Two calls on fresh inputs: [(outputs, arguments after the call, gradients)] per call."""
    env = program.namespace()
    fn = env["f"] if compile_fn is None else compile_fn(env["f"])
    seen = []
    for _ in range(2):
        torch.manual_seed(program.seed)
        inputs = env["make_inputs"]()
        out = fn(*inputs)
        after = [_describe(x) for x in inputs]
        diff = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]
        if diff:
            sum(o.sum() for o in diff).backward()
        seen.append(([_describe(o) for o in pytree.tree_leaves(out)], after,
                     [_describe(x.grad) if x.requires_grad and x.is_leaf else None for x in inputs]))
    return seen


def check(program: SubclassProgram, contender: Contender, eager: list | None = None) -> tuple[str, str]:
    """(status, message) of ``program`` under ``contender``."""
    eager = eager if eager is not None else observe(program, None)
    if contender.reset is not None:
        contender.reset()
    try:
        actual = observe(program, contender.compile)
    except Exception as exc:   # noqa: BLE001 - a refusal, or a crash (a finding)
        if _is_refusal(exc):
            return "refused", _first_line(_inner(exc))
        return "crash", f"{type(exc).__name__}: {_first_line(exc)}"
    for call, (e, a) in enumerate(zip(eager, actual, strict=True)):
        for what, x, y in zip(("outputs", "arguments after the call", "gradients"), e, a, strict=True):
            if not _same(x, y):
                return "wrong", f"call {call + 1}: {what} differ"
    return "pass", ""


@dataclasses.dataclass
class SubclassSummary:
    counts: dict[str, dict[str, int]]
    failures: list[tuple[str, int, str, str]]   # (contender, seed, status, message)


def run(n: int, seed: int = 0, contenders: Sequence[Contender | str] = ("default",)) -> SubclassSummary:
    """Generate programs ``seed .. seed + n - 1`` and check each under every contender (on the
    programs whose seed is a multiple of its ``every``)."""
    chosen = _resolve(contenders)
    summary = SubclassSummary({c.name: dict.fromkeys(STATUSES, 0) for c in chosen}, [])
    for program_seed in range(seed, seed + n):
        program, eager = _generate(program_seed)
        for contender in chosen:
            if program_seed % contender.every:
                continue
            status, message = check(program, contender, eager)
            summary.counts[contender.name][status] += 1
            if status != "pass":
                summary.failures.append((contender.name, program_seed, status, message))
    return summary
