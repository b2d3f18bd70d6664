"""Random generators while the function is traced (Note [Seeding inside the function] in ir/rng.py).

``rng_state_as_effects`` puts a stand-in for the CPU default generator under every name user
code reaches it by: ``torch.random.default_generator`` (what ``torch.manual_seed``,
``torch.get_rng_state`` / ``torch.set_rng_state`` and ``torch.random.fork_rng`` use),
``torch.default_generator`` and ``torch._C.default_generator``. Its state methods record
effect ops. Passed as ``generator=`` to a random op, it is swapped back for the generator
itself (``GeneratorArgs``), so the op draws from the global generator at run time, as eager's
does. ``torch.Generator()`` inside the function is refused: it would be made once, when the
function is traced, and carry its state from call to call, where eager makes a fresh one at
every call.

A generator made *outside* the function (an argument, a closure cell, a global, an attribute of a
module the function reaches) and seeded or reset inside it (``g.manual_seed(n)``,
``g.set_state(s)``) is refused by name (``outside_generators_kept``): its methods belong to a C type
no mode intercepts, so the seed would act once, at trace time. Its state is read before the trace
and compared (and restored) after it.

Another thread's code runs as is: the stand-in and the class forward its calls to the real
generator (one exception: another thread passing ``torch.default_generator`` as ``generator=``
while a compile runs draws from the stand-in's own state).
"""

from __future__ import annotations

import contextlib
import threading

import torch

from ..errors import UnsupportedError, user_source_line
from ..ir.rng import running_for_real

_REAL_CLASS = torch._C.Generator
_PYTHON_KEYS = (torch._C.DispatchKey.Python, torch._C.DispatchKey.PythonTLSSnapshot)


class DefaultGeneratorStandIn(torch._C.Generator):
    """Stands in for the CPU default generator while tracing: reading and setting the state are
    recorded as effect ops that act on the real generator at run time, on every call.
    ``torch.seed()`` (a non-deterministic seed) is refused. A Generator itself, so random ops
    accept it as ``generator=`` (``GeneratorArgs`` then passes the real one)."""

    def __new__(cls, real):
        return super().__new__(cls)

    def __init__(self, real):
        super().__init__()
        self._real = real
        self._tracing_thread = threading.get_ident()

    def _record(self, op, *args):
        """Call ``op`` so that the tracer records it, also under ``no_dispatch()`` (torch.testing's
        ``freeze_rng_state`` reads and restores the state with the Python dispatch key excluded)."""
        excluded = [k for k in _PYTHON_KEYS if torch._C._dispatch_tls_is_dispatch_key_excluded(k)]
        for key in excluded:
            torch._C._dispatch_tls_set_dispatch_key_excluded(key, False)
        try:
            return op(*args)
        finally:
            for key in excluded:
                torch._C._dispatch_tls_set_dispatch_key_excluded(key, True)

    def _ours(self) -> bool:
        # Another thread's eager code runs as is, and so does an effect op's own kernel.
        return threading.get_ident() == self._tracing_thread and not running_for_real()

    def manual_seed(self, seed):
        if not self._ours():
            return self._real.manual_seed(seed)
        if not isinstance(seed, int):
            raise UnsupportedError(f"torch.manual_seed with a {type(seed).__name__} seed inside the compiled "
                                   "function is not supported: only a Python int is recorded",
                                   source=user_source_line(), hint="pass a Python int, or seed outside the function")
        self._record(torch.ops.jointgraph.rng_manual_seed, seed)
        return self

    def get_state(self):
        if not self._ours():
            return self._real.get_state()
        return self._record(torch.ops.jointgraph.rng_get_state)

    def set_state(self, state):
        if not self._ours():
            return self._real.set_state(state)
        self._record(torch.ops.jointgraph.rng_set_state, state)
        return self

    def seed(self):
        if not self._ours():
            return self._real.seed()
        raise UnsupportedError("torch.seed() (a non-deterministic seed) inside the compiled function is not "
                               "supported: the seed it draws is not reproducible",
                               source=user_source_line(),
                               hint='call torch.manual_seed(n) instead, or pass on_unsupported="eager"')

    def set_offset(self, offset):
        return self._not_recorded("set_offset", offset)

    def graphsafe_set_state(self, state):
        return self._not_recorded("graphsafe_set_state", state)

    def _not_recorded(self, name: str, *args):
        if not self._ours():
            return getattr(self._real, name)(*args)
        raise UnsupportedError(f"Generator.{name} on the default generator inside the compiled function is not "
                               "supported: it would act at trace time only", source=user_source_line(),
                               hint='use torch.manual_seed / torch.set_rng_state, or pass on_unsupported="eager"')

    # What only reads the generator: the real one's answer.
    def initial_seed(self):
        return self._real.initial_seed()

    def get_offset(self):
        return self._real.get_offset()

    def clone_state(self):
        return self._real.clone_state()

    def graphsafe_get_state(self):
        return self._real.graphsafe_get_state()

    @property
    def device(self):
        return self._real.device

    def __reduce__(self):
        return self._real.__reduce__()


class _GeneratorClass(type):
    """The class of the stand-in for ``torch.Generator``: ``isinstance`` and attributes are the
    real class's; a call from the tracing thread raises, one from another thread makes a real
    generator."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _REAL_CLASS)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, _REAL_CLASS)

    def __getattr__(cls, name):
        return getattr(_REAL_CLASS, name)

    def __call__(cls, *args, **kwargs):
        if threading.get_ident() != cls.tracing_thread:
            return _REAL_CLASS(*args, **kwargs)
        raise UnsupportedError("torch.Generator() created inside the compiled function is not supported: it would "
                               "be created once, when the function is traced, and keep its state from call to call "
                               "(eager creates a fresh one at every call)", source=user_source_line(),
                               hint="create the generator outside the function and pass it in or close over it "
                                    "(seeding it outside), or seed the global generator inside (torch.manual_seed), "
                                    'or pass on_unsupported="eager"')


@contextlib.contextmanager
def rng_state_as_effects():
    """Record the default generator's state changes as graph effects while tracing, under each
    name it has; refuse ``torch.Generator()`` in this thread."""

    stand_in = DefaultGeneratorStandIn(torch.random.default_generator)
    generator_class = _GeneratorClass("Generator", (), {"tracing_thread": threading.get_ident()})
    names = {(torch.random, "default_generator"): stand_in, (torch, "default_generator"): stand_in,
             (torch._C, "default_generator"): stand_in, (torch, "Generator"): generator_class,
             (torch._C, "Generator"): generator_class}
    before = {key: getattr(*key) for key in names}
    for (module, name), value in names.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for (module, name), value in before.items():
            setattr(module, name, value)


class GeneratorArgs(torch.overrides.TorchFunctionMode):
    """Pass the real default generator where the traced function passes the stand-in as ``generator=``."""

    def __init__(self):
        super().__init__()
        self.stand_in = real = torch.random.default_generator   # the stand-in while tracing
        while isinstance(real, DefaultGeneratorStandIn):   # a compile inside a compile
            real = real._real
        self.real = real

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs and kwargs.get("generator") is self.stand_in:
            kwargs = {**kwargs, "generator": self.real}
        return func(*args, **(kwargs or {}))


def outside_generators(fn, constants: dict) -> list[tuple[str, torch._C.Generator]]:
    """(name, generator) of the generators made outside ``fn`` that it may use: non-tensor arguments,
    closure cells and globals of the functions it reaches, attributes of the modules found there."""
    from .captured import _roots

    found: dict[int, tuple[str, torch._C.Generator]] = {}
    default = torch._C.default_generator

    def add(name, value) -> None:
        if isinstance(value, _REAL_CLASS) and value is not default and not isinstance(value, DefaultGeneratorStandIn):
            found.setdefault(id(value), (name, value))

    for k, value in constants.items():
        add(f"argument (leaf {k})", value)
    for name, _, value in _roots(fn):
        add(name, value)
        if isinstance(value, torch.nn.Module):
            for path, module in value.named_modules():
                for attr, held in vars(module).items():
                    add(".".join(p for p in (name, path, attr) if p), held)
    return list(found.values())


@contextlib.contextmanager
def outside_generators_kept(generators: list[tuple[str, torch._C.Generator]]):
    """Refuse a trace that changed the state of one of ``generators`` (seeding it inside the function);
    each is left in the state it had before the trace."""
    states = [(name, g, g.get_state()) for name, g in generators]
    try:
        yield
    finally:
        changed = [name for name, g, state in states if not torch.equal(g.get_state(), state)]
        for _, g, state in states:
            g.set_state(state)
    if changed:
        raise UnsupportedError(
            f"the compiled function seeds or sets the state of the generator {changed[0]!r}, made outside it: "
            "Generator methods are not seen while jointgraph traces, so the seed would act once, at trace time, "
            "not on every call (Note [Seeding inside the function])",
            hint="seed it outside the function, or seed the global generator inside (torch.manual_seed) and "
                 'draw from it, or pass on_unsupported="eager"')
