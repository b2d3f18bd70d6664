"""Random programs that mutate and alias their inputs, checked against eager PyTorch (issue 11).

    program = generate(7)                        # the source of ``f`` and of ``make_inputs``
    print(program.render())                      # a self-contained reproducer
    check(program, contenders()["default"])      # Outcome(status="pass", ...)
    run(200, seed=0, contenders=["default"])     # Summary: counts, failures grouped by message

Note [Fuzz oracle]
A program is two pieces of Python source: ``make_inputs()`` builds f's arguments (plain tensors,
views into larger storages, arguments that alias each other, leaves and non-leaves requiring grad,
a few bool / int tensors) and returns them with every tensor it named (bases and leaves too); ``f``
is a body of random statements written while running them on live tensors, so most programs run in
eager (a statement that raises is kept now and then, as the last one). Eager and each compiled
contender run on fresh inputs from ``make_inputs``; the compiled function is called twice (the
second call runs the cached entry). Compared, in order:
  * exceptions: same type (or a subclass) in the same phase, ``call`` or ``backward``;
  * outputs: pytree structure, dtype, shape, strides (dims of size <= 1 ignored), requires_grad,
    is_leaf, grad_fn None-ness, which argument it *is*, which inputs / other outputs it shares a
    storage with and which a version counter (probed: each bumped, every version put back), its
    storage offset when it shares an input's storage, values (allclose with torch's float32
    tolerances, NaN equal to NaN);
  * every named input tensor after the call: the same, plus untyped storage bytes and whether its
    ``_version`` changed (changed or not, not the count);
  * after ``sum((x * w).sum())`` over differentiable outputs and every non-leaf named tensor that
    requires grad (``w`` drawn from a generator seeded by the program's seed) is differentiated:
    ``.grad`` of every leaf that requires grad, None and zeros told apart; when that backward
    raises, which of those items raise when each is differentiated alone (on fresh inputs).
``UnsupportedError`` (also when Dynamo wraps it) makes the program ``refused``, as does an error of
Dynamo's own (its fake-tensor pass, or an internal error) that ``backend="eager"`` raises too (no
backend saw the program), or, through Dynamo, a mismatch that ``backend="eager"`` gives the very same
way (the graphs Dynamo handed over already compute it); a mismatch, or an exception eager raised that the
contender did not (or raised in the other phase), ``wrong``; any other exception from the contender ``crash``.

Issue 12's opt-in steps (``fuzz_semantics.SEMANTICS12_WRITERS``, whose ``Writers.steps`` turn them on):
a program with ``mutate_outputs`` gets ``o.mul_(2)`` on every float output right after the call, one with
``assign_data`` then ``o.data =`` its values doubled (on a copy of its storage, its geometry kept: ``_doubled``)
on each, inputs and views of them too (an exception there is phase ``after``; the state is compared after
it); non-tensor outputs must have eager's type (``torch.Size`` stays ``torch.Size``); values computed with
bf16 (autocast) compare with bf16's tolerances (LOOSE_RTOL / LOOSE_ATOL). The opt-in step ``no_grad_views``
(``benchmarks/fuzz.py --no-grad-views``) makes some view arguments under ``torch.no_grad()``.

Note [Fuzz guards]
A program with ``guard`` set is called a third time, eager and compiled alike, on fresh inputs under a
change of something its graph may depend on, entered around the call only (not ``make_inputs``, not the
backward): ``"scale"`` sets the global ``SCALE`` f reads from 2.0 to 3.0 (in the globals of the function
object the contender compiled), ``"autocast"`` enters ``torch.autocast("cpu", torch.bfloat16)``,
``"default_dtype"`` sets float64, ``"no_grad"`` enters ``torch.no_grad()``. The third call must match eager's
under the same change (a failure's key starts ``guard <name>:``): the contender recompiles, reuses a graph
that does not depend on the change, or refuses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
import os
import random
import re
import sys
import textwrap
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

PARAMS = ("a", "b", "c")
STATUSES = ("pass", "refused", "wrong", "crash")
SCALARS = ("0.5", "2.0", "-1.0", "3.0")
RTOL, ATOL = 1.3e-6, 1e-5          # torch.testing's float32 tolerances
LOOSE_RTOL, LOOSE_ATOL = 1.6e-2, 1e-2   # bf16 (torch.testing's rtol; atol for sums of bf16 products)
KEEP_RAISING = 0.12                # chance a statement that raised in eager is kept (as the last one)
SCALE, CHANGED_SCALE = 2.0, 3.0    # the global float f may read (``SCALE``), and its value in the "scale" guard step
GUARDS = ("scale", "autocast", "default_dtype", "no_grad")


### Programs

@dataclasses.dataclass(frozen=True)
class Program:
    """One random program: the source of ``f`` and of ``make_inputs`` (which returns ``(args, named)``)."""

    seed: int
    source: str
    inputs: str
    guard: str | None = None          # a third call under this change (Note [Fuzz guards]), one of GUARDS
    mutate_outputs: bool = False      # float outputs get ``.mul_(2)`` right after the call, before backward
    assign_data: bool = False         # ... then ``o.data = o.data * 2`` (Note [Which op saved a value])

    @classmethod
    def scenario(cls, body: str, inputs: str, mutate_outputs: bool = False) -> Program:
        """A hand-written program (the scenario tests): ``body`` the source of ``f``; ``inputs`` lines
        naming tensors, the last one the argument tuple (made under ``torch.manual_seed(0)``)."""
        lines = textwrap.dedent(inputs).strip().splitlines()
        args = lines.pop()
        named = [line.split("=", 1)[0].strip() for line in lines if "=" in line.split("(", 1)[0]]
        body_lines = "".join(f"    {line}\n" for line in lines)
        mapping = ", ".join(f"{n!r}: {n}" for n in named)
        source = f"def make_inputs():\n    torch.manual_seed(0)\n{body_lines}    return ({args}), {{{mapping}}}"
        return cls(seed=0, source=textwrap.dedent(body).strip() + "\n", inputs=source, mutate_outputs=mutate_outputs)

    @property
    def params(self) -> list[str]:
        """f's parameter names."""
        return self.source.split("(", 1)[1].split(")", 1)[0].split(", ")

    def function(self) -> Callable:
        """A fresh function object for ``f`` (its source is registered with linecache for tracebacks)."""
        return _exec(self.source, f"<fuzz {self.seed}: f>")["f"]

    def make_inputs(self) -> tuple[tuple, dict[str, torch.Tensor]]:
        """Fresh arguments, and every tensor the recipe named (arguments, their bases and leaves)."""
        return _exec(self.inputs, f"<fuzz {self.seed}: make_inputs>")["make_inputs"]()

    def render(self) -> str:
        """A self-contained script that reproduces the program."""
        then = ""
        if self.mutate_outputs:
            then += "for o in torch.utils._pytree.tree_leaves(out):\n    if isinstance(o, torch.Tensor) and " \
                    "o.is_floating_point():\n        o.mul_(2)\n"
        if self.assign_data:
            then += "for o in torch.utils._pytree.tree_leaves(out):\n    if isinstance(o, torch.Tensor) and " \
                    "o.is_floating_point():\n        o.data = _doubled(o)   # fuzz._doubled: its geometry kept\n"
        if self.guard is not None:
            then += f"# then again under the guard change {self.guard!r} (Note [Fuzz guards])\n"
        return (f"import torch\n\nSCALE = {SCALE}\n\n{self.inputs}\n\n{self.source}\n\nargs, named = make_inputs()\n"
                f"out = f(*args)\n{then}")


def _exec(source: str, filename: str) -> dict[str, Any]:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"torch": torch, "SCALE": SCALE}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


### Generator: inputs

@dataclasses.dataclass
class _Recipe:
    """The input recipe being written: lines of ``make_inputs`` and the storages its arguments view."""

    lines: list[str]
    args: list[str] = dataclasses.field(default_factory=list)
    arg_storage: list[int] = dataclasses.field(default_factory=list)
    names: list[str] = dataclasses.field(default_factory=list)
    storages: list[tuple[str, tuple[int, ...]]] = dataclasses.field(default_factory=list)
    # draws whether a view argument is made under no_grad (its creation meta: eager refuses writing it with grad
    # mode on, and reading it so after a write into its base); None: never. Its own stream, so that the programs
    # of the main one stay as they were
    no_grad: random.Random | None = None

    def add_arg(self, storage: int, suffix: str, index: int) -> None:
        base = self.storages[storage][0]
        name = base
        if suffix:
            name = f"x{index}"
            if self.no_grad is not None and self.no_grad.random() < 0.15:
                self.lines += ["with torch.no_grad():", f"    {name} = {base}{suffix}"]
            else:
                self.lines.append(f"{name} = {base}{suffix}")
            self.names.append(name)
        self.args.append(name)
        self.arg_storage.append(storage)


def _inputs_source(rng: random.Random, seed: int, no_grad_views: bool = False) -> str:
    """``make_inputs``' source; ``no_grad_views``: some view arguments are made under no_grad (review of the
    twelfth session: such views, passed beside others of their base, lost eager's errors)."""
    recipe = _Recipe([f"g = torch.Generator().manual_seed({seed})"],
                     no_grad=random.Random(f"no_grad {seed}") if no_grad_views else None)
    for index in range(rng.choices((1, 2, 3), (3, 5, 2))[0]):
        if recipe.storages and rng.random() < 0.45:
            _aliasing_input(rng, recipe, index)
        else:
            _fresh_input(rng, recipe, index)
    body = "".join(f"    {line}\n" for line in recipe.lines)
    named = ", ".join(f"{name!r}: {name}" for name in recipe.names)
    args = f"{recipe.args[0]}," if len(recipe.args) == 1 else ", ".join(recipe.args)
    return f"def make_inputs():\n{body}    return ({args}), {{{named}}}"


def _shape(rng: random.Random) -> tuple[int, ...]:
    return tuple(rng.randint(2, 4) for _ in range(rng.choices((1, 2, 3), (4, 5, 1))[0]))


def _input_view(rng: random.Random, shape: tuple[int, ...]) -> tuple[tuple[int, ...], str]:
    """A base shape and a view of it (source suffix) whose shape is ``shape``."""
    kind = rng.choice(("plain", "plain", "plain", "offset", "strided", "transposed", "columns", "detached",
                       "expanded"))
    first, rest = shape[0], shape[1:]
    if kind in ("transposed", "columns") and len(shape) != 2:
        kind = "offset"
    k = rng.randint(1, 2)
    if kind == "offset":
        return (first + k + 1, *rest), rng.choice((f"[{k}:{k + first}]", f"[{k + 1}:]"))
    if kind == "strided":
        if rng.random() < 0.8:
            return (2 * first, *rest), "[::2]"
        # an as_strided() of the strided view reaching the elements it skips (fuzz seed 11103840)
        strides = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
        return (2 * first, *rest), f"[::2].as_strided({tuple(shape)}, {tuple(strides)})"
    if kind == "transposed":
        return (shape[1], first), ".t()"
    if kind == "columns":
        return (first, shape[1] + k), rng.choice((f"[:, :{shape[1]}]", f"[:, {k}:]"))
    if kind == "detached":
        return (first + 1, *rest), "[1:].detach()"
    if kind == "expanded":
        return (1, *rest), f".expand({', '.join(map(str, shape))})"
    return shape, ""


def _fresh_input(rng: random.Random, recipe: _Recipe, index: int) -> None:
    base_shape, suffix = _input_view(rng, _shape(rng))
    size = ", ".join(map(str, base_shape))
    base = f"base{index}"
    dtype = rng.choices(("float", "bool", "int"), (14, 1, 1))[0]
    grad = rng.choice(("leaf", "non-leaf", "none")) if dtype == "float" else "none"
    if dtype == "bool":
        recipe.lines.append(f"{base} = torch.randn({size}, generator=g) > 0")
    elif dtype == "int":
        recipe.lines.append(f"{base} = torch.randint(-3, 4, ({size},), generator=g)")
    elif grad == "non-leaf":
        leaf = f"leaf{index}"
        recipe.lines.append(f"{leaf} = torch.randn({size}, generator=g).requires_grad_()")
        recipe.lines.append(f"{base} = {leaf}{rng.choice((' * 1', '.clone()'))}")
        recipe.names.append(leaf)
    else:
        requires_grad = ".requires_grad_()" if grad == "leaf" else ""
        recipe.lines.append(f"{base} = torch.randn({size}, generator=g){requires_grad}")
    recipe.names.append(base)
    recipe.storages.append((base, base_shape))
    recipe.add_arg(len(recipe.storages) - 1, suffix, index)


def _aliasing_input(rng: random.Random, recipe: _Recipe, index: int) -> None:
    """An argument sharing the storage of an earlier one: the same tensor again, or another view of its base."""
    storage = rng.randrange(len(recipe.storages))
    earlier = [a for a, s in zip(recipe.args, recipe.arg_storage, strict=True) if s == storage]
    if earlier and rng.random() < 0.3:
        recipe.args.append(rng.choice(earlier))
        recipe.arg_storage.append(storage)
        return
    shape = recipe.storages[storage][1]
    suffixes = ["", "[1:]", "[:-1]", "[::2]", "[0]", ".detach()", "[1:].detach()", ".view(-1)"]
    # an empty view: its backward reads no gradient, autograd's path runs on (fuzz --semantics12 seed 14602540)
    suffixes += ["[1:1]"]
    if len(shape) == 2:
        suffixes += [".t()", "[:, :2]", "[:, 1:]"]
    recipe.add_arg(storage, rng.choice(suffixes), index)


### Generator: the body of f

@dataclasses.dataclass
class _Scope:
    """What the generator knows while it writes f: live values after the statements so far."""

    rng: random.Random
    env: dict[str, Any]
    origin: dict[str, str]         # variable -> "input" | "input view" | "value" | "value view"

    def tensors(self, floating: bool = False) -> list[str]:
        return [n for n in self.origin if isinstance(self.env.get(n), torch.Tensor)
                and (not floating or self.env[n].is_floating_point())]

    def pick(self, names: list[str]) -> str:
        weights = [2.0 if self.origin[n].startswith("input") else 1.0 for n in names]
        return self.rng.choices(names, weights)[0]

    def fresh(self) -> str:
        return f"t{sum(1 for n in self.origin if n.startswith('t'))}"


@dataclasses.dataclass(frozen=True)
class _Statement:
    text: str
    var: str | None = None
    origin: str | None = None
    keep: bool = False              # kept even when it raises in eager (writers of programs that raise)


def _view_suffix(rng: random.Random, shape: torch.Size) -> str:
    rank = len(shape)
    options = [".unsqueeze(0)", ".detach()", ".reshape(-1)", ".view(-1)",
               f".expand(2, {', '.join(map(str, shape))})"]
    if rank >= 1:
        options += ["[0]", ".select(0, -1)"]
    if rank >= 1 and shape[0] >= 2:
        options += ["[1:]", "[::2]", "[:-1]", ".narrow(0, 1, 1)"]
    if rank <= 2:
        options += [".t()"]
    if rank >= 2:
        options += [".transpose(0, 1)", "[:, :1]", "[:, 1:]", ".diagonal()"]
    if rng.random() < 0.04:
        options = ["[1:1]", ".unfold(0, 2, 1)"] if rank >= 1 and shape[0] >= 2 else options
    return rng.choice(options)


def _eval(expr: str, env: dict[str, Any]) -> torch.Tensor | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = eval(expr, env)
    except Exception:
        return None
    return value if isinstance(value, torch.Tensor) else None


def _target(scope: _Scope, names: list[str] | None = None, wrap: str = "") -> tuple[str, torch.Tensor] | None:
    """Something to mutate: a variable, sometimes a view of it written inline (``a.t()``, ``b[1:]``)."""
    names = names if names is not None else scope.tensors()
    if not names:
        return None
    expr = scope.pick(names) + wrap
    value = _eval(expr, scope.env)
    if value is not None and scope.rng.random() < 0.35:
        viewed = expr + _view_suffix(scope.rng, value.shape)
        viewed_value = _eval(viewed, scope.env)
        if viewed_value is not None:
            expr, value = viewed, viewed_value
    return (expr, value) if value is not None else None


def _operand(scope: _Scope, shape: torch.Size) -> str | None:
    """A float variable whose shape broadcasts to ``shape``."""
    def fits(name: str) -> bool:
        try:
            return torch.broadcast_shapes(scope.env[name].shape, shape) == shape
        except RuntimeError:
            return False

    names = [n for n in scope.tensors(floating=True) if fits(n)]
    return scope.pick(names) if names else None


def _index(rng: random.Random, value: torch.Tensor) -> str:
    if value.dim() == 0:
        return "[...]"
    # an integer writes a view of the target, a full slice or a list of integers the target itself (eager's
    # __setitem__: --semantics12 seed 10102973 and its review); a list naming one element twice counts it twice in
    # the gradient of the value written (through overlapping unfold windows too: a review of 40285d8)
    options = ["[0]", "[-1]", "[1:]", "[::2]", "[:]", "[[0, -1]]", "[[0, 0]]"]
    if value.dim() >= 2:
        options += ["[:, 0]", "[0, 1]"]
    return rng.choice(options)


def _mutation(scope: _Scope, expr: str, value: torch.Tensor) -> str:
    """One in-place statement on ``expr`` (an input, a view, an intermediate)."""
    rng = scope.rng
    c, index = rng.choice(SCALARS), _index(rng, value)
    if value.dtype == torch.bool:
        ops = [".fill_(True)", ".zero_()", ".logical_not_()", f"{index} = False"]
    elif not value.is_floating_point():
        ops = [".add_(1)", ".mul_(2)", ".fill_(3)", ".zero_()", ".clamp_(-1, 1)", f"{index} = 0"]
    else:
        ops = [f".add_({c})", f".mul_({c})", f".fill_({c})", ".zero_()", f".masked_fill_({expr} > 0, {c})",
               ".clamp_(-0.5, 0.5)", ".sin_()", ".square_()", f"{index} = {c}", f"[{expr} > 0] = {c}"]
        other = _operand(scope, value.shape)
        if other is not None:
            ops += [f".add_({other})", f".mul_({other})", f".copy_({other})", f"{index} = {other}.sum()"] * 2
    return expr + rng.choice(ops)


def _compute(scope: _Scope) -> _Statement | None:
    names = scope.tensors()
    if not names:
        return None
    rng, x = scope.rng, scope.pick(names)
    value = scope.env[x]
    if value.dtype == torch.bool:
        exprs = [f"{x}.float()", f"~{x}", f"{x}.sum()"]
    elif not value.is_floating_point():
        exprs = [f"{x} + 1", f"{x}.float()", f"{x}.sum()"]
    else:
        exprs = [f"{x}.{op}()" for op in ("sin", "cos", "exp", "tanh", "relu", "sum", "clone")]
        exprs += [f"{x} * {rng.choice(SCALARS)}", f"{x} + {rng.choice(SCALARS)}", f"{x} * 1"]
        exprs += [f"{x}.sum(0)"] if value.dim() >= 1 else []
        exprs += [f"{x} @ {x}.t()"] if value.dim() == 2 else []
        other = _operand(scope, value.shape)
        exprs += [f"{x} + {other}", f"{x} * {other}"] * 2 if other is not None else []
        exprs += [f"{x} @ {y}" for y in scope.tensors(floating=True) if _matmul_fits(value, scope.env[y])]
    name = scope.fresh()
    return _Statement(f"{name} = {rng.choice(exprs)}", name, "value")


def _matmul_fits(x: torch.Tensor, y: torch.Tensor) -> bool:
    return x.dim() == 2 and y.dim() in (1, 2) and x.shape[1] == y.shape[0]


def _view(scope: _Scope) -> _Statement | None:
    names = scope.tensors()
    if not names:
        return None
    x = scope.pick(names)
    origin = "input view" if scope.origin[x].startswith("input") else "value view"
    name = scope.fresh()
    return _Statement(f"{name} = {x}{_view_suffix(scope.rng, scope.env[x].shape)}", name, origin)


def _mutate(scope: _Scope) -> _Statement | None:
    target = _target(scope)
    return _Statement(_mutation(scope, *target)) if target else None


def _no_grad(scope: _Scope) -> _Statement | None:
    """``with torch.no_grad():`` and one or two mutations (the optimizer and EMA pattern)."""
    lines = []
    for _ in range(scope.rng.randint(1, 2)):
        target = _target(scope)
        if target is not None:
            lines.append(f"    {_mutation(scope, *target)}")
    return _Statement("with torch.no_grad():\n" + "\n".join(lines)) if lines else None


def _detached(scope: _Scope) -> _Statement | None:
    """A mutation through ``.detach()`` or ``.data``."""
    target = _target(scope, scope.tensors(floating=True), wrap=scope.rng.choice((".detach()", ".data")))
    return _Statement(_mutation(scope, *target)) if target else None


def _metadata(scope: _Scope) -> _Statement | None:
    names = [n for n in scope.tensors() if scope.origin[n] != "value"] or scope.tensors()
    if not names:
        return None
    x = scope.pick(names)
    shape = scope.env[x].shape
    ops = [".unsqueeze_(0)"]
    ops += [".t_()"] if len(shape) <= 2 else []
    ops += [".transpose_(0, 1)"] if len(shape) >= 2 else []
    ops += [".squeeze_()"] if 1 in shape else []
    ops += [".squeeze_(0)"] if shape and shape[0] == 1 else []
    ops += [".as_strided_((2,), (1,))"] if scope.rng.random() < 0.15 else []
    return _Statement(x + scope.rng.choice(ops))


def _plain_leaf(t: torch.Tensor) -> bool:
    """A leaf that does not require grad; False for a multi-output view whose base was written,
    whose autograd state eager refuses to read."""
    try:
        return t.is_leaf and not t.requires_grad
    except RuntimeError:
        return False


def _requires_grad(scope: _Scope) -> _Statement | None:
    names = [n for n in scope.tensors(floating=True) if _plain_leaf(scope.env[n])]
    return _Statement(f"{scope.pick(names)}.requires_grad_()") if names else None


def _replace_data(scope: _Scope) -> _Statement | None:
    """``x.data = ...`` and ``x.set_(y)``: the input's storage changes."""
    names = scope.tensors()
    if not names:
        return None
    x = scope.pick(names)
    same_dtype = [n for n in names if n != x and scope.env[n].dtype == scope.env[x].dtype]
    if same_dtype and scope.rng.random() < 0.5:
        return _Statement(f"{x}.set_({scope.pick(same_dtype)})")
    return _Statement(f"{x}.data = {x}.data * 2")


WRITERS: dict[str, tuple[Callable[[_Scope], _Statement | None], float]] = {
    "compute": (_compute, 5.0),
    "view": (_view, 4.0),
    "mutate": (_mutate, 8.0),
    "no_grad": (_no_grad, 2.0),
    "detached": (_detached, 2.0),
    "metadata": (_metadata, 2.0),
    "requires_grad": (_requires_grad, 1.0),
    "replace_data": (_replace_data, 0.7),
}


def _storage_cycle(scope: _Scope) -> _Statement | None:
    """FSDP2's free and re-fill of a parameter (Note [Storage resize]): an input that owns its whole
    storage is freed, re-allocated and filled under ``no_grad`` with ``fsdp.copy_`` or ``copy_`` from a
    value taken before the free (reading a freed storage would crash eager itself)."""
    names = [n for n in scope.tensors(floating=True) if scope.origin[n] == "input" and _owns_storage(scope, n)]
    if not names:
        return None
    x = scope.pick(names)
    t = scope.env[x]
    value = _operand(scope, t.shape) or x
    fill = scope.rng.choice((f"torch.ops.fsdp.copy_({x}, _full)", f"{x}.copy_(_full)"))
    nbytes = t.numel() * t.element_size()
    return _Statement(f"_full = ({value} * {scope.rng.choice(SCALARS)}).detach().expand({tuple(t.shape)}).clone()\n"
                      f"torch.ops.inductor.resize_storage_bytes_({x}, 0)\n"
                      f"torch.ops.inductor.resize_storage_bytes_({x}, {nbytes})\n"
                      f"with torch.no_grad():\n    {fill}")


def _owns_storage(scope: _Scope, name: str) -> bool:
    """Contiguous from offset 0 over its whole storage, which no other argument shares."""
    t = scope.env[name]
    storage = t.untyped_storage()
    if not t.is_contiguous() or t.storage_offset() != 0 or storage.nbytes() != t.numel() * t.element_size() \
            or t.numel() == 0:
        return False
    ptr = storage.data_ptr()
    return not any(other != name and isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() == ptr
                   for other, v in scope.env.items() if other in scope.origin)


# Opt-in (``generate(seed, writers=STORAGE_WRITERS)``, ``benchmarks/fuzz.py --storage``): the default
# programs, and the named known ones of the CI run, stay what their seeds give.
STORAGE_WRITERS: dict[str, tuple[Callable[[_Scope], _Statement | None], float]] = {
    **WRITERS, "storage_cycle": (_storage_cycle, 3.0)}


def _returns(scope: _Scope) -> str:
    rng, exprs = scope.rng, []
    names = scope.tensors()
    for _ in range(rng.choices((1, 2, 3), (5, 3, 1))[0]):
        x = rng.choice(names)
        roll = rng.random()
        expr = x
        if roll < 0.3:
            viewed = x + _view_suffix(rng, scope.env[x].shape)
            expr = viewed if _eval(viewed, scope.env) is not None else x
        elif roll < 0.45 and scope.env[x].is_floating_point():
            expr = f"{x}.sum()"
        exprs.append(expr)
    exprs += [n for n, o in scope.origin.items() if o == "non-tensor"]    # none unless a writer made them
    return "return " + ", ".join(exprs)


def _replay(make_inputs: Callable, params: tuple[str, ...], lines: list[str]) -> dict[str, Any]:
    args, _ = make_inputs()
    env: dict[str, Any] = {"torch": torch, "SCALE": SCALE, **dict(zip(params, args, strict=True))}
    for line in lines:
        exec(line, env)
    return env


def _raises(text: str, env: dict[str, Any]) -> bool:
    try:
        exec(text, env)
    except Exception:
        return True
    return False


def _body(rng: random.Random, make_inputs: Callable, params: tuple[str, ...], writer_table: dict) -> list[str]:
    """Statements written one at a time, each run on live inputs; one that raises is kept only rarely."""
    lines: list[str] = []
    origin = {p: "input" for p in params}
    writers, weights = zip(*writer_table.values(), strict=True)
    for _ in range(rng.randint(1, 6)):
        for _attempt in range(6):
            env = _replay_ending(make_inputs, params, lines)
            if env is None:
                return [*lines, _returns(_Scope(rng, _replay(make_inputs, params, lines), origin))]
            scope = _Scope(rng, env, origin)
            statement = rng.choices(writers, weights)[0](scope)
            if statement is None:
                continue
            raised = _raises(statement.text, scope.env)
            if raised and not statement.keep and rng.random() >= KEEP_RAISING:
                continue
            lines.append(statement.text)
            if statement.var is not None:
                origin[statement.var] = statement.origin
            if raised:
                return [*lines, _returns(_Scope(rng, _replay(make_inputs, params, lines[:-1]), origin))]
            break
    env = _replay_ending(make_inputs, params, lines)
    return [*lines, _returns(_Scope(rng, env or _replay(make_inputs, params, lines), origin))]


def _replay_ending(make_inputs: Callable, params: tuple[str, ...], lines: list[str]) -> dict[str, Any] | None:
    """``_replay``; where the last statement, run once on the writer's scope, raises on fresh inputs (its writer
    changed that scope while writing it: --semantics12 seed 3901335), it is dropped and None returned."""
    try:
        return _replay(make_inputs, params, lines)
    except Exception:
        lines.pop()
        return None


class Writers(dict):
    """A writer table that also opts into oracle steps (``"guard"``, ``"mutate_outputs"``, ``"assign_data"``)
    for its programs."""

    def __init__(self, table: dict, steps: tuple[str, ...] = ()):
        super().__init__(table)
        self.steps = steps


def generate(seed: int, writers: dict | None = None) -> Program:
    """The program for ``seed`` (and ``writers``, default ``WRITERS``): the same seed always gives the same program."""
    rng = random.Random(seed)
    inputs = _inputs_source(rng, seed, "no_grad_views" in getattr(writers, "steps", ()))
    namespace: dict[str, Any] = {"torch": torch}
    exec(inputs, namespace)
    make_inputs = namespace["make_inputs"]
    params = PARAMS[:len(make_inputs()[0])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lines = _body(rng, make_inputs, params, WRITERS if writers is None else writers)
    body = "".join(f"    {line}\n" for text in lines for line in text.split("\n"))
    steps = getattr(writers, "steps", ())
    guard = rng.choice(GUARDS) if "guard" in steps and rng.random() < 0.7 else None
    mutate_outputs = "mutate_outputs" in steps and rng.random() < 0.4
    assign_data = "assign_data" in steps and rng.random() < 0.2
    return Program(seed, f"def f({', '.join(params)}):\n{body}", inputs, guard, mutate_outputs, assign_data)


### Oracle: observe one run

@dataclasses.dataclass(frozen=True)
class TensorState:
    """What eager and the contender must agree on for one tensor (Note [Fuzz oracle])."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    strides: tuple[int | None, ...]           # None for dims of size <= 1
    requires_grad: bool
    is_leaf: bool | str                       # str: reading it raised (see _attribute)
    has_grad_fn: bool | str
    same_object_as: str | None                # outputs: the argument it is
    shares_storage_with: tuple[str, ...]
    shares_counter_with: tuple[str, ...]      # the inputs / other outputs sharing its version counter
    storage_offset: int
    storage_bytes: int | None                 # inputs
    version_changed: bool | None              # inputs
    values: torch.Tensor


@dataclasses.dataclass
class Observation:
    """One run of a program: the state after the call and the gradients, or the exception and its phase."""

    error: BaseException | None = None
    phase: str = ""                           # "call" | "backward" when error is set
    output_spec: str = ""
    outputs: list[Any] = dataclasses.field(default_factory=list)
    inputs: dict[str, TensorState] = dataclasses.field(default_factory=dict)
    grads: dict[str, torch.Tensor | None] = dataclasses.field(default_factory=dict)
    loose: bool = False                       # bf16 was involved (autocast): compare with bf16's tolerances
    # after a backward error: the differentiated items whose backward raises on its own (_raising_items)
    raising: tuple[int, ...] | None = None


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _attribute(t: torch.Tensor, name: str, convert: Callable[[Any], Any] = lambda v: v) -> Any:
    """``t.<name>``, or the name of the exception reading it raises (a multi-output view modified in place)."""
    try:
        return convert(getattr(t, name))
    except RuntimeError as exc:
        return f"raises {type(exc).__name__}"


def _tracks_versions(t: torch.Tensor) -> bool:
    """Not an inference tensor, nor one given another's data by ``.data =`` (is_inference() then reads False, yet it
    has no version counter: --semantics12 seed 14600584 crashed the oracle)."""
    try:
        t._version  # noqa: B018
    except RuntimeError:
        return False
    return True


def _counter_sharing(tensors: dict[str, torch.Tensor]) -> dict[str, tuple[str, ...]]:
    """Per named tensor, the others sharing its version counter (a write through one moves the other's version:
    ``t.detach()`` and ``t``, a view and its base). Each is bumped in turn and every version put back as it was,
    so the probe leaves nothing behind (a multi-output view compares the same version as before)."""
    names = [n for n, t in tensors.items() if type(t) is torch.Tensor and _tracks_versions(t)]
    ts = [tensors[n] for n in names]
    before = tuple(t._version for t in ts)
    sharing = {}
    for n, t in zip(names, ts, strict=True):
        torch.autograd.graph.increment_version(t)
        sharing[n] = tuple(sorted(m for m, u, v in zip(names, ts, before, strict=True) if m != n and u._version != v))
        torch._C._autograd._unsafe_set_version_counter(tuple(ts), before)
    return sharing


def _state(t: torch.Tensor, owners: dict[int, list[str]], own_name: str, *, same_object_as: str | None = None,
           version_before: int | None = None, counters: dict[str, tuple[str, ...]] | None = None) -> TensorState:
    shares = tuple(sorted({n for n in owners.get(_storage_key(t), []) if n != own_name}))
    is_input = version_before is not None
    return TensorState(
        dtype=t.dtype, shape=tuple(t.shape),
        strides=tuple(s if n > 1 else None for n, s in zip(t.shape, t.stride(), strict=True)),
        requires_grad=t.requires_grad, is_leaf=_attribute(t, "is_leaf"),
        has_grad_fn=_attribute(t, "grad_fn", lambda g: g is not None),
        same_object_as=same_object_as, shares_storage_with=shares,
        shares_counter_with=(counters or {}).get(own_name, ()),
        storage_offset=t.storage_offset(),
        storage_bytes=t.untyped_storage().nbytes() if is_input else None,
        version_changed=t._version != version_before if is_input else None,
        values=t.detach().clone())


def _snapshot(observation: Observation, args: tuple, named: dict[str, torch.Tensor], versions: dict[str, int],
              out: Any, params: list[str]) -> list:
    leaves, spec = pytree.tree_flatten(out)
    observation.output_spec = str(spec)
    owners: dict[int, list[str]] = {}
    for name, t in named.items():
        owners.setdefault(_storage_key(t), []).append(name)
    for i, x in enumerate(leaves):
        if isinstance(x, torch.Tensor):
            owners.setdefault(_storage_key(x), []).append(f"output {i}")
    every = dict(named)
    every.update((f"output {i}", x) for i, x in enumerate(leaves) if isinstance(x, torch.Tensor))
    counters = _counter_sharing(every)
    for i, x in enumerate(leaves):
        if isinstance(x, torch.Tensor):
            arg = next((params[j] for j, a in enumerate(args) if a is x), None)
            if arg is None:   # return t, t: one object, as eager's (fuzz --semantics12 seed 3303383: a view twice)
                arg = next((f"output {j}" for j in range(i) if leaves[j] is x), None)
            observation.outputs.append(_state(x, owners, f"output {i}", same_object_as=arg, counters=counters))
        else:
            observation.outputs.append(x)
    observation.inputs = {n: _state(t, owners, n, version_before=versions[n], counters=counters)
                          for n, t in named.items()}
    return leaves


def _differentiated(outputs: list, named: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """What ``_backward`` differentiates: the float outputs and the non-leaf inputs that require grad."""
    items = [x for x in outputs if isinstance(x, torch.Tensor) and x.is_floating_point() and x.requires_grad]
    return items + [t for t in named.values() if t.requires_grad and not t.is_leaf]


def _backward(seed: int, outputs: list, named: dict[str, torch.Tensor], only: int | None = None) -> None:
    """Differentiate a fixed random weighting of ``_differentiated`` (of its item ``only`` alone, if given)."""
    items = _differentiated(outputs, named)
    if not items:
        return
    generator = torch.Generator().manual_seed(seed)
    weighted = [(x * torch.randn(x.shape, generator=generator)).sum() for x in items]
    loss = sum(weighted) if only is None else weighted[only]
    loss.backward()


def _raising_items(program: Program, fn: Callable, context: Callable[[], Any]) -> tuple[int, ...]:
    """When the backward raised: which differentiated items raise on their own, each on fresh inputs
    (eager raises only for the outputs whose history reaches the modified saved value)."""
    def call() -> tuple[list, dict[str, torch.Tensor]]:
        args, named = program.make_inputs()
        with context():
            out = fn(*args)
        if program.mutate_outputs or program.assign_data:   # as observe() did: the state the backward ran on
            with contextlib.suppress(Exception):
                _mutate_outputs(out, program, named)
        return pytree.tree_leaves(out), named

    outputs, named = call()
    raising = []
    for k in range(len(_differentiated(outputs, named))):
        if k:
            outputs, named = call()
        try:
            _backward(program.seed, outputs, named, only=k)
        except Exception as exc:
            if _is_refusal(exc):   # a refusal of one item's backward is the program's answer (seed 7300898)
                raise
            raising.append(k)
    return tuple(raising)


def _mutate_outputs(out: Any, program: Program, named: dict[str, torch.Tensor]) -> None:
    floats = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if program.mutate_outputs:
        for x in floats:
            x.mul_(2)
    if program.assign_data:   # Notes [Which op saved a value], [Inputs given new data after the call]
        for x in floats:
            x.data = _doubled(x)


def _doubled(x: torch.Tensor) -> torch.Tensor:
    """``x``'s values doubled, on a copy of its storage with its geometry: eager regenerates a view's grad_fn from
    the geometry it has when first read after a write, so new data at another offset would move its gradient"""
    new = torch.empty(0, dtype=x.dtype, device=x.device)
    new.set_(x.untyped_storage().clone(), x.storage_offset(), x.size(), x.stride())
    if torch._debug_has_internal_overlap(new) != 1:   # an expand: eager's mul_ refuses it
        new.mul_(2)
    return new


def observe(program: Program, fn: Callable, context: Callable[[], Any] = contextlib.nullcontext,
            loose: bool = False) -> Observation:
    """Run ``fn`` (eager ``f`` or a compiled one) on fresh inputs and record what Note [Fuzz oracle] compares;
    ``context`` is entered around the call only (a guard change, Note [Fuzz guards])."""
    args, named = program.make_inputs()
    versions = {n: t._version for n, t in named.items()}
    loose = loose or "autocast" in program.source
    observation = Observation(loose=loose)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with context():
                out = fn(*args)
        except Exception as exc:
            return Observation(error=exc, phase="call", loose=loose)
        after = None
        if program.mutate_outputs or program.assign_data:
            try:
                _mutate_outputs(out, program, named)
            except Exception as exc:
                after = exc
        outputs = _snapshot(observation, args, named, versions, out, program.params)
        if after is not None:
            observation.error, observation.phase = after, "after"
            return observation
        try:
            _backward(program.seed, outputs, named)
        except Exception as exc:
            observation.error, observation.phase = exc, "backward"
            try:
                observation.raising = _raising_items(program, fn, context)
            except Exception as again:   # a second call that fails is the other comparisons' finding
                observation.raising = None
                if _is_refusal(again):
                    observation.error = again
            return observation
        observation.grads = {n: None if t.grad is None else t.grad.clone()
                             for n, t in named.items() if t.is_leaf and t.requires_grad}
    return observation


### Oracle: compare

@dataclasses.dataclass(frozen=True)
class Outcome:
    """The verdict on one program under one contender: status, what differed, and a key to group it by."""

    status: str                 # pass | refused | wrong | crash
    message: str = ""
    key: str = ""


def _tolerances(expected: torch.Tensor, loose: bool) -> tuple[float, float]:
    if loose or expected.dtype in (torch.bfloat16, torch.float16):
        return LOOSE_RTOL, LOOSE_ATOL
    return RTOL, ATOL


def _same_values(expected: torch.Tensor, actual: torch.Tensor, loose: bool = False) -> bool:
    if expected.is_floating_point():
        rtol, atol = _tolerances(expected, loose)
        return actual.dtype == expected.dtype and torch.allclose(actual, expected, rtol=rtol, atol=atol,
                                                                 equal_nan=True)
    return torch.equal(actual, expected)


def _values_message(expected: torch.Tensor, actual: torch.Tensor, loose: bool = False) -> str:
    """The first element that differs, and how many do."""
    expected, actual = expected.flatten(), actual.flatten()
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, eager {expected.dtype}"
    if expected.is_floating_point():
        rtol, atol = _tolerances(expected, loose)
        close = torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = actual == expected
    differ = (~close).nonzero().flatten().tolist()
    if not differ:
        return "values differ"
    i = differ[0]
    return (f"{len(differ)} of {expected.numel()} values differ, first at flat index {i}: "
            f"{actual[i].item():.4g}, eager {expected[i].item():.4g}")


def _tensor_mismatch(where: str, expected: TensorState, actual: TensorState, loose: bool = False) -> Outcome | None:
    kind = where.split(" ")[0]        # "output" | "input"
    for field in dataclasses.fields(TensorState):
        e, a = getattr(expected, field.name), getattr(actual, field.name)
        if field.name == "values":
            if not _same_values(e, a, loose):
                return Outcome("wrong", f"{where}: {_values_message(e, a, loose)}", f"{kind} values")
        elif e != a:
            return Outcome("wrong", f"{where}: {field.name} is {a!r}, eager {e!r}", f"{kind} {field.name}")
    return None


def _state_mismatch(expected: Observation, actual: Observation) -> Outcome | None:
    if expected.output_spec != actual.output_spec:
        return Outcome("wrong", f"outputs: structure {actual.output_spec}, eager {expected.output_spec}",
                       "output structure")
    for i, (e, a) in enumerate(zip(expected.outputs, actual.outputs, strict=True)):
        if isinstance(e, TensorState) != isinstance(a, TensorState) or not isinstance(e, TensorState) and e != a:
            return Outcome("wrong", f"output {i}: {a!r}, eager {e!r}", "output value")
        if type(e) is not type(a):
            return Outcome("wrong", f"output {i}: {type(a).__name__} {a!r}, eager {type(e).__name__}",
                           "output type")
        found = isinstance(e, TensorState) and _tensor_mismatch(f"output {i}", e, a, expected.loose)
        if found:
            return found
    for name, e in expected.inputs.items():
        found = _tensor_mismatch(f"input {name}", e, actual.inputs[name], expected.loose)
        if found:
            return found
    return None


def _grad_mismatch(expected: Observation, actual: Observation) -> Outcome | None:
    if expected.grads.keys() != actual.grads.keys():
        return Outcome("wrong", f"leaves requiring grad: {sorted(actual.grads)}, eager {sorted(expected.grads)}",
                       "grad leaves")
    for name, e in expected.grads.items():
        a = actual.grads[name]
        if (e is None) != (a is None):
            return Outcome("wrong", f"{name}.grad is {'None' if a is None else 'a tensor'}, eager "
                           f"{'None' if e is None else 'a tensor'}", "grad None-ness")
        if e is not None and (e.shape != a.shape or not _same_values(e, a, expected.loose)):
            detail = (f"shape {tuple(a.shape)}, eager {tuple(e.shape)}" if e.shape != a.shape
                      else _values_message(e, a, expected.loose))
            return Outcome("wrong", f"{name}.grad: {detail}", "grad values")
    return None


def _inner(exc: BaseException) -> BaseException:
    """The exception Dynamo wrapped (``BackendCompilerFailed.inner_exception``, ``__cause__``), if any;
    an UnsupportedError is itself the answer (its cause is the tracer's error it translated)."""
    from ..errors import UnsupportedError

    for _ in range(8):
        if isinstance(exc, UnsupportedError):
            return exc
        nested = getattr(exc, "inner_exception", None) or exc.__cause__
        if nested is None:
            return exc
        exc = nested
    return exc


def _is_refusal(exc: BaseException) -> bool:
    from ..errors import UnsupportedError

    return isinstance(exc, UnsupportedError) or isinstance(_inner(exc), UnsupportedError)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _normalized(text: str) -> str:
    return re.sub(r"\d+", "N", text)


def _where_raised(exc: BaseException) -> str:
    """The innermost frame of ``exc`` inside jointgraph's product code, as ``jointgraph/x.py:line``."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename.startswith(package) and os.sep + "bench" + os.sep not in f.filename]
    if not frames:
        return ""
    return f" [{os.path.relpath(frames[-1].filename, os.path.dirname(package))}:{frames[-1].lineno}]"


def _describe(exc: BaseException) -> str:
    inner = _inner(exc)
    return f"{type(inner).__name__}: {_first_line(inner)}{_where_raised(inner)}"


def _error_outcome(expected: Observation, actual: Observation) -> Outcome:
    """Exceptions must match: the same type (or a subclass) raised in the same phase."""
    e, a = expected.error, actual.error
    if a is None:
        return Outcome("wrong", f"eager raised {type(e).__name__} at {expected.phase} ({_first_line(e)}); "
                       "compiled did not", f"no exception at {expected.phase}")
    described = _describe(a)
    if e is None:
        return Outcome("crash", f"{actual.phase}: {described}", f"{actual.phase}: {_normalized(described)}")
    eager = f"{type(e).__name__}: {_first_line(e)}"
    if not isinstance(a, type(e)):
        return Outcome("crash", f"{actual.phase}: {described}; eager raised {eager}",
                       f"{actual.phase}: {_normalized(described)} (eager {type(e).__name__})")
    if actual.phase != expected.phase:
        return Outcome("wrong", f"raised at {actual.phase} ({described}); eager at {expected.phase}",
                       f"exception at {actual.phase}, eager at {expected.phase}")
    if expected.raising is not None and actual.raising is not None and expected.raising != actual.raising:
        return Outcome("wrong", f"the backward of differentiated items {list(actual.raising)} raises alone; eager's "
                       f"of {list(expected.raising)}", "backward raises for other outputs")
    return Outcome("pass")


def compare(expected: Observation, actual: Observation) -> Outcome:
    """The verdict on ``actual`` (a contender's run) against ``expected`` (eager's), per Note [Fuzz oracle]."""
    if actual.error is not None and _is_refusal(actual.error):
        where = "" if actual.phase == "call" else f" (at {actual.phase})"
        line = _first_line(_inner(actual.error))
        return Outcome("refused", line + where, _normalized(line) + where)
    if "call" in (expected.phase, actual.phase):
        return _error_outcome(expected, actual)
    found = _state_mismatch(expected, actual)
    if found:
        return found
    if expected.error is not None or actual.error is not None:
        return _error_outcome(expected, actual)
    return _grad_mismatch(expected, actual) or Outcome("pass")


### Contenders

@dataclasses.dataclass(frozen=True)
class Contender:
    """A compiler under test: ``compile(fn) -> callable``; ``reset`` runs before each program."""

    name: str
    compile: Callable[[Callable], Callable]
    reset: Callable[[], None] | None = None
    every: int = 1              # runs on programs whose seed is a multiple of ``every``
    through_dynamo: bool = False   # Dynamo captures the program: its own failures are told apart (Note [Fuzz oracle])


def contenders(dynamo_every: int = 1, opt_in: bool = False) -> dict[str, Contender]:
    """jointgraph.aot_function under each partitioner, and torch.compile(backend="jointgraph"); ``opt_in`` adds
    aot_function with symbolic sizes ("dynamic")."""
    from .. import aot_function

    def aot(**options: Any) -> Callable[[Callable], Callable]:
        return lambda fn: aot_function(fn, **options)

    chosen = {
        "default": Contender("default", aot(partitioner="default")),
        "mincut": Contender("mincut", aot(partitioner="mincut")),
        "budget": Contender("budget", aot(partitioner="budget", memory_budget=0.5)),
        "dynamo": Contender("dynamo", lambda fn: torch.compile(fn, backend="jointgraph"), torch._dynamo.reset,
                            dynamo_every, through_dynamo=True),
    }
    if opt_in:   # symbolic sizes: each output's geometry read per call
        chosen["dynamic"] = Contender("dynamic", aot(partitioner="default", dynamic=True))
    return chosen


def check(program: Program, contender: Contender, eager: Observation | None = None) -> Outcome:
    """Run ``program`` compiled by ``contender`` twice on fresh inputs; compare each call with eager."""
    eager = eager if eager is not None else observe(program, program.function())
    if contender.reset is not None:
        contender.reset()
    original = program.function()
    try:
        compiled = contender.compile(original)
    except Exception as exc:
        return compare(eager, Observation(error=exc, phase="call"))
    calls: list[tuple[str, Callable[[], Observation], Callable[[], Observation]]] = [
        ("", lambda: eager, lambda: observe(program, compiled)),
        ("call 2: ", lambda: eager, lambda: observe(program, compiled))]
    if program.guard is not None:
        fresh = program.function()
        loose = program.guard == "autocast"
        calls.append((f"guard {program.guard}: ",
                      lambda: observe(program, fresh, _guard_change(program.guard, fresh), loose),
                      lambda: observe(program, compiled, _guard_change(program.guard, original), loose)))
    for prefix, expected, actual in calls:
        try:
            observed = actual()
            outcome = compare(expected(), observed)
        except Exception as exc:   # the oracle could not even compare (e.g. a malformed output)
            outcome = Outcome("crash", f"comparing: {_describe(exc)}", f"comparing: {_normalized(_describe(exc))}")
            observed = None
        if outcome.status in ("wrong", "crash") and observed is not None and contender.through_dynamo:
            guarded = prefix.startswith("guard")
            if _dynamo_itself_fails(program, observed, guarded):
                line = "Dynamo's own trace raised before any backend (backend='eager' too): " \
                    + _first_line(observed.error)
                outcome = Outcome("refused", line, _normalized(line))
            elif outcome.status == "wrong" and _dynamo_itself_differs(program, expected(), outcome, guarded):
                line = "Dynamo's own result differs from eager's, before any backend (backend='eager' too): " \
                    + outcome.key
                outcome = Outcome("refused", line, line)
        if outcome.status != "pass":
            return dataclasses.replace(outcome, message=prefix + outcome.message, key=prefix + outcome.key)
    return Outcome("pass")


def _dynamo_itself_fails(program: Program, observed: Observation, guarded: bool = False) -> bool:
    """The error is Dynamo's own (its fake-tensor pass, ``TorchRuntimeError``, or an
    ``InternalTorchDynamoError``), before any backend: confirmed by ``backend="eager"`` failing
    the same way, in the same call (``guarded``: the call under the guard change, after two plain
    ones, fuzz seed 310050). Not a jointgraph result."""
    own = (torch._dynamo.exc.TorchRuntimeError, torch._dynamo.exc.InternalTorchDynamoError)
    if observed.error is None:
        return False
    reference = _dynamo_eager_observation(program, guarded)
    if type(reference.error) is not type(observed.error):
        return False
    # Dynamo's wrapped errors are its own by type; any other (an assertion in its fake-tensor
    # conversion of a graph output, say) only when backend="eager" raises the very same message.
    return isinstance(observed.error, own) or _first_line(reference.error) == _first_line(observed.error)


def _dynamo_itself_differs(program: Program, expected: Observation, outcome: Outcome, guarded: bool) -> bool:
    """A wrong result that ``backend="eager"`` gives too, the very same way (fuzz seed 1900858: Dynamo returns
    the ``torch.Size`` of an empty slice as it was before the slice's ``unsqueeze_(0)``): the graphs Dynamo
    handed over already compute it. Not a jointgraph result."""
    found = compare(expected, _dynamo_eager_observation(program, guarded))
    return found.status == "wrong" and found.message == outcome.message


def _dynamo_eager_observation(program: Program, guarded: bool) -> Observation:
    """The program through ``torch.compile(backend="eager")``: its first call, or (``guarded``) its third, under
    the guard change, after two plain ones."""
    torch._dynamo.reset()
    original = program.function()
    reference_fn = torch.compile(original, backend="eager")
    try:
        if not guarded:
            return observe(program, reference_fn)
        observe(program, reference_fn)
        observe(program, reference_fn)
        return observe(program, reference_fn, _guard_change(program.guard, original), program.guard == "autocast")
    finally:
        torch._dynamo.reset()


def _guard_change(guard: str, fn: Callable) -> Callable[[], Any]:
    """Note [Fuzz guards]: a change of something f's graph depends on, entered around a call of ``fn``
    (eager's fresh ``f``, or the function object the contender compiled, whose globals it reads)."""
    @contextlib.contextmanager
    def change() -> Iterator[None]:
        if guard == "autocast":
            with torch.autocast("cpu", torch.bfloat16):
                yield
        elif guard == "no_grad":
            with torch.no_grad():
                yield
        elif guard == "default_dtype":
            old = torch.get_default_dtype()
            torch.set_default_dtype(torch.float64)
            try:
                yield
            finally:
                torch.set_default_dtype(old)
        elif guard == "scale":
            fn.__globals__["SCALE"] = CHANGED_SCALE
            try:
                yield
            finally:
                fn.__globals__["SCALE"] = SCALE
        else:
            raise ValueError(f"guard {guard!r} is invalid; allowed: {', '.join(GUARDS)}")

    return change


### Runs

@dataclasses.dataclass(frozen=True)
class Failure:
    """A program a contender did not pass."""

    program: Program
    contender: str
    outcome: Outcome


@dataclasses.dataclass
class Group:
    """Failures of one contender with the same status and key; the first few kept as examples."""

    contender: str
    status: str
    key: str
    count: int = 0
    examples: list[Failure] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Summary:
    """A fuzz run: counts per contender and status, failures grouped by message."""

    n: int
    seed: int
    counts: dict[str, dict[str, int]]
    groups: dict[tuple[str, str, str], Group] = dataclasses.field(default_factory=dict)
    failures: list[Failure] = dataclasses.field(default_factory=list)    # wrong and crash, in program order
    eager_raised: int = 0
    seconds: float = 0.0
    examples_per_group: int = 3

    def record(self, program: Program, contender: str, outcome: Outcome) -> None:
        self.counts[contender][outcome.status] += 1
        if outcome.status == "pass":
            return
        failure = Failure(program, contender, outcome)
        group = self.groups.setdefault((contender, outcome.status, outcome.key),
                                       Group(contender, outcome.status, outcome.key))
        group.count += 1
        if len(group.examples) < self.examples_per_group:
            group.examples.append(failure)
        if outcome.status in ("wrong", "crash"):
            self.failures.append(failure)

    def line(self, contender: str) -> str:
        """``P pass, R refused, W wrong, C crash``."""
        return ", ".join(f"{self.counts[contender][s]} {s}" for s in STATUSES)

    def sorted_groups(self, status: str) -> list[Group]:
        return sorted((g for g in self.groups.values() if g.status == status), key=lambda g: (-g.count, g.key))


def _resolve(chosen: Sequence[Contender | str]) -> list[Contender]:
    known: dict[str, Contender] | None = None
    resolved = []
    for c in chosen:
        if isinstance(c, str):
            known = known or contenders(opt_in=True)
            if c not in known:
                raise ValueError(f"contender {c!r} is invalid; allowed: {', '.join(known)}")
            c = known[c]
        resolved.append(c)
    return resolved


def run(n: int, seed: int = 0, contenders: Sequence[Contender | str] = ("default",), progress: bool = True,
        examples_per_group: int = 3, writers: dict | None = None) -> Summary:
    """Generate programs ``seed .. seed + n - 1`` and check each under every contender."""
    chosen = _resolve(contenders)
    summary = Summary(n, seed, {c.name: dict.fromkeys(STATUSES, 0) for c in chosen},
                      examples_per_group=examples_per_group)
    start = time.perf_counter()
    with _progress(n, progress) as advance:
        for program_seed in range(seed, seed + n):
            program = generate(program_seed, writers)
            eager = observe(program, program.function())
            summary.eager_raised += eager.error is not None
            for contender in chosen:
                if program_seed % contender.every == 0:
                    outcome = check(program, contender, eager)
                    summary.record(program, contender.name, outcome)
                    if progress and outcome.status in ("wrong", "crash"):   # as found: long runs show them early
                        print(f"fuzz seed {program_seed} {contender.name}: {outcome.status}: {outcome.message[:200]}",
                              file=sys.stderr, flush=True)
            advance(summary)
    summary.seconds = time.perf_counter() - start
    return summary


@contextlib.contextmanager
def _progress(n: int, enabled: bool) -> Iterator[Callable[[Summary], None]]:
    """A rich progress bar on a terminal, a line every 10% otherwise, nothing when disabled."""
    if not enabled:
        yield lambda summary: None
        return
    try:
        from rich.progress import Progress
    except ImportError:
        Progress = None
    if Progress is not None and sys.stderr.isatty():
        with Progress(transient=True) as bar:
            task = bar.add_task("fuzz", total=n)
            yield lambda summary: bar.update(task, advance=1, description=_tally(summary))
        return
    done = [0]

    def advance(summary: Summary) -> None:
        done[0] += 1
        if done[0] % max(1, n // 10) == 0 or done[0] == n:
            print(f"fuzz {done[0]}/{n}: {_tally(summary)}", file=sys.stderr, flush=True)

    yield advance


def _tally(summary: Summary) -> str:
    total = {s: sum(c[s] for c in summary.counts.values()) for s in STATUSES[1:]}
    return f"{total['refused']} refused, {total['wrong']} wrong, {total['crash']} crash"


### Minimize

def _variants(source: str) -> Iterator[str]:
    """Smaller versions of f: one body line (or a whole ``with`` block) fewer, or a single returned value."""
    head, *body = source.rstrip("\n").split("\n")
    *statements, ret = body
    for i, line in enumerate(statements):
        end = i + 1
        if line.strip().startswith("with "):
            while end < len(statements) and statements[end].startswith("        "):
                end += 1
        yield "\n".join([head, *statements[:i], *statements[end:], ret]) + "\n"
    values = ret.strip()[len("return "):].split(", ")
    if len(values) > 1:
        for value in values:
            yield "\n".join([head, *statements, f"    return {value}"]) + "\n"


def _without_argument(program: Program, index: int) -> Program | None:
    """``program`` with argument ``index`` dropped, when f does not use it, and the recipe lines nothing needs."""
    params = program.params
    if re.search(rf"\b{params[index]}\b", program.source.split("\n", 1)[1]):
        return None
    head, *lines = program.inputs.rstrip("\n").split("\n")
    *assignments, ret = lines
    args = ret.strip()[len("return ("):].split("), {")[0].rstrip(",").split(", ")
    kept_args = args[:index] + args[index + 1:]
    needed = set(kept_args)
    kept: list[str] = []
    for line in reversed(assignments):
        name = line.strip().split(" = ")[0]
        if name == "g" or name in needed:
            kept.insert(0, line)
            needed |= set(re.findall(r"\b(?:base|leaf|x)\d+\b", line.split(" = ", 1)[1]))
    names = [line.strip().split(" = ")[0] for line in kept if not line.strip().startswith("g =")]
    args_text = f"{kept_args[0]}," if len(kept_args) == 1 else ", ".join(kept_args)
    named = ", ".join(f"{n!r}: {n}" for n in names)
    inputs = "\n".join([head, *kept, f"    return ({args_text}), {{{named}}}"])
    source = program.source.replace(f"def f({', '.join(params)}):",
                                    f"def f({', '.join(params[:index] + params[index + 1:])}):", 1)
    return dataclasses.replace(program, source=source, inputs=inputs)


def _smaller(program: Program) -> Iterator[Program]:
    for source in _variants(program.source):
        yield dataclasses.replace(program, source=source)
    for index in range(len(program.params) if len(program.params) > 1 else 0):
        smaller = _without_argument(program, index)
        if smaller is not None:
            yield smaller


def minimize(program: Program, contender: Contender, outcome: Outcome | None = None) -> Program:
    """A shorter program (statements, returned values, unused arguments removed) failing with the same key."""
    outcome = outcome or check(program, contender)
    target = (outcome.status, outcome.key)
    changed = True
    while changed:
        changed = False
        for smaller in _smaller(program):
            try:
                found = check(smaller, contender)
            except SyntaxError:
                continue
            if (found.status, found.key) == target:
                program, changed = smaller, True
                break
    return program
