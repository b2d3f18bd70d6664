"""Autograd hooks registered inside the compiled function, as opaque calls in the backward graph.

Note [Hooks inside the function]
--------------------------------
``y.register_hook(fn)`` inside the traced function, on an intermediate ``y``, is traced as
one ``jointgraph::tensor_hook(grad, index)`` node in the backward graph, where the autograd
engine called the hook while the backward was traced: after ``y``'s gradient is summed over
all of ``y``'s uses, before ``y``'s backward consumes it, and after the hooks registered on
``y`` before it (two hooks are two chained nodes). ``index`` points into the compiled
entry's hook table (``capture/hooks_inside.py``); the callables are not graph constants.
The op is side-effecting (``Node.is_impure``): dead-code elimination, CSE and the
partitioners keep it, it is never recomputed (it is backward work: Note [Phases]), and its
output, the gradient the hook returned (or the gradient it was given when it returned
None), is what ``y``'s backward reads. At run time the compiled backward runs inside
``running_hooks(calls)``, and the op hands the real gradient to ``calls.run(index, grad)``
(``runtime/hook_calls.py``), which runs the hook or skips it where eager's engine would
not reach it.

Hooks on graph inputs (``register_hook``, ``register_post_accumulate_grad_hook``,
``retain_grad``) are not in the graph: the runtime registers them on the caller's tensor
before each call (a prologue), as the user's code did in eager, so the engine runs them
with eager's order, accumulation and persistence (a hook registered on a leaf at each call
stays registered, in eager too).

The hook object is the one the traced call registered. Eager's function body makes a new
hook object at every call; the compiled function does not run the body again, so it
reuses the traced one. Dynamo re-runs the Python around its graphs at every call and
hands the fresh hook to the backward through a ``BackwardState`` (with compiled autograd;
without it, ``torch.compile`` graph-breaks at the registration). jointgraph compiles the
step once and runs no user Python per call, so re-capturing would mean running the body
again: the traced hook is reused. What the hook reads from its closure at backward time is
read then (a list it appends to, a module's attributes), as in eager; a hook that closes
over a tensor computed in the function would see the trace's fake value, and is refused.
A hook that reads an input's ``.grad`` while the backward runs may see it before
accumulations eager would already have done (the whole compiled backward is one node).
"""

from __future__ import annotations

import contextlib
import threading

import torch
import torch.fx


@torch.library.custom_op("jointgraph::tensor_hook", mutates_args=())
def tensor_hook(grad: torch.Tensor, index: int) -> torch.Tensor:
    calls = getattr(_RUNNING, "calls", None)
    if calls is None:
        raise RuntimeError("jointgraph::tensor_hook ran outside the compiled backward that holds its hooks")
    return calls.run(index, grad)


@tensor_hook.register_fake
def _(grad: torch.Tensor, index: int) -> torch.Tensor:
    return torch.empty_like(grad)


HOOK_OP = torch.ops.jointgraph.tensor_hook.default
torch.fx.node.has_side_effect(HOOK_OP)

_RUNNING = threading.local()   # the hook calls of the compiled backward this thread runs


def is_hook_call(node: torch.fx.Node) -> bool:
    """``node`` runs a hook registered inside the function (Note [Hooks inside the function])."""
    return node.op == "call_function" and node.target is HOOK_OP


@contextlib.contextmanager
def running_hooks(calls):
    """Make ``calls`` (an object with ``run(index, grad)``) the table the hook ops of the
    graph run in this block use; nested compiled backwards restore the outer one."""
    outer = getattr(_RUNNING, "calls", None)
    _RUNNING.calls = calls
    try:
        yield
    finally:
        _RUNNING.calls = outer
