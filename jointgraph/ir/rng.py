"""The global generator's state as an effect in the graph.

Note [Seeding inside the function]
----------------------------------
``torch.manual_seed``, ``torch.get_rng_state`` / ``torch.set_rng_state`` and
``torch.random.fork_rng`` (which is the get / set pair around its block) inside the
compiled function act on the CPU default generator, and so do the same methods called on
``torch.default_generator`` or ``torch._C.default_generator`` directly. While jointgraph
traces, the generator is replaced under all three names by a stand-in
(``capture/generators.py``) that records each of them as one of the custom ops below
instead of running it. At run time the op acts on the real generator, so it happens on
every call, not once at trace time. The stand-in passed as ``generator=`` to a random op
is the default generator again in the graph.

A ``torch.Generator()`` created inside the function is refused: the graph would hold the
one object made at trace time, whose state carries over from call to call. A generator
made outside and passed in (or closed over) is a constant of the graph, and its draws
happen at run time, as eager's. Seeding it inside the function (``g.manual_seed(n)``) is
not seen by any mode (its methods belong to a C type) and would act at trace time only, so
it is refused by name: the generators the function can reach (arguments, closure cells,
globals, attributes of the modules found there) have their state compared before and after
the trace (``capture/generators.outside_generators_kept``). One reached only through a
container or another object's attribute is not watched (a known gap, docs/semantics.md).

Random ops (``native_dropout``, ``rand_like``, ``bernoulli``...) stay in the graph as
they are and draw from the global generator when they run. The graph runs its nodes
in trace order (the same contract as the effect tokens of ``capture/trace.py``), so a
seed, a draw and a restore happen in eager's order; after the call the caller's
generator is in the state eager leaves it in. The ops are side-effecting
(``Node.is_impure``), so dead-code elimination keeps them and the split puts them in
the forward graph. A recomputed random op (Note [Activation checkpointing] in
``passes/checkpoint.py``) replays the state its forward twin saved just before it
drew, which is after any seed that preceded it.

``torch.seed()`` (a non-deterministic seed) is still refused: eager's result is not
reproducible, so nothing could check it.
"""

from __future__ import annotations

import threading

import torch
import torch.fx

_FOR_REAL = threading.local()   # an effect op's kernel is running: the tracer's stand-in must pass calls through


def running_for_real() -> bool:
    """An effect op below runs for real in this thread (a trace's stand-in generator must not record)."""
    return getattr(_FOR_REAL, "on", False)


@torch.library.custom_op("jointgraph::rng_manual_seed", mutates_args=())
def rng_manual_seed(seed: int) -> None:
    _FOR_REAL.on = True   # torch.manual_seed also seeds the other devices' generators
    try:
        torch.manual_seed(seed)
    finally:
        _FOR_REAL.on = False


@rng_manual_seed.register_fake
def _(seed: int) -> None:
    return None


# The CPU generator itself, taken before any trace puts its stand-in under torch._C.default_generator:
# an op that runs for real while a trace is under way must not reach the stand-in (it would record itself).
_GENERATOR = torch._C.default_generator
_STATE_BYTES = _GENERATOR.get_state().numel()   # the CPU generator's state, a fixed size


@torch.library.custom_op("jointgraph::rng_get_state", mutates_args=())
def rng_get_state() -> torch.Tensor:
    return _GENERATOR.get_state()


@rng_get_state.register_fake
def _() -> torch.Tensor:
    return torch.empty(_STATE_BYTES, dtype=torch.uint8)


@torch.library.custom_op("jointgraph::rng_set_state", mutates_args=())
def rng_set_state(state: torch.Tensor) -> None:
    _GENERATOR.set_state(state)


@rng_set_state.register_fake
def _(state: torch.Tensor) -> None:
    return None


RNG_EFFECTS = frozenset({torch.ops.jointgraph.rng_manual_seed.default, torch.ops.jointgraph.rng_get_state.default,
                         torch.ops.jointgraph.rng_set_state.default})
for _op in RNG_EFFECTS:
    torch.fx.node.has_side_effect(_op)


def sets_rng_state(node: torch.fx.Node) -> bool:
    """``node`` reads or replaces the global generator's state (Note [Seeding inside the function])."""
    return node.op == "call_function" and node.target in RNG_EFFECTS
