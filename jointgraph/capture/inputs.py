"""Flatten a call into graph inputs, dedupe repeated tensors, fake-ify, and compute guard keys.

Note [Guards]
-------------
A compiled entry is valid for calls whose flat arguments match it on: the pytree
structure, every non-tensor value (specialized into the graph), and for every
tensor its shape, strides, dtype, device, layout and ``requires_grad``, plus
which tensor arguments are the same object (duplicates are traced once), and
whether grad mode is on. A symbolic ("dynamic") entry drops shapes and strides
from the key and checks the ShapeEnv's guard expression instead. PyTorch's own
``aot_function`` ignores scalars and ``requires_grad``; reusing a graph across
those silently computes the wrong thing, so we key on them.

The key also holds what else a trace bakes in (capture/guards.py): the ambient
torch state (autocast enabled and dtype per device type, the default dtype,
deterministic mode), the ambient saved-tensor hooks, and the Python values the
function reads from its closure cells and globals, found once from its code
(``__closure__`` and the global names of its code and of the functions and lambdas
it defines), following the Python functions it reaches through them (bound by
identity, so rebinding one recompiles). Scalars, strings, None, dtypes, devices,
enums and small tuples/lists/dicts/sets of them are guarded by type and value
(2, 2.0 and True differ); a container of more than 64 values is refused with
``UnsupportedError`` at compile time. Objects (modules, classes, tensors,
instances) are not guarded: their attributes are read at trace time only, and a
method's ``self`` is not followed. The tensors a function reads from them are lifted into
graph inputs, re-read and guarded per call like arguments (Note [Captured tensors] in
capture/captured.py). Values are read per call from precomputed
getters (about 0.3 µs per guarded value, 0.2 µs for the ambient state); a
function that reads none adds nothing. Dynamo guards all of this itself for
``torch.compile``. Threads calling a function for the first time compile it once,
under ``api.COMPILE_LOCK``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.multiprocessing.reductions import StorageWeakRef

from ..errors import UnsupportedError
from ..ir import Role

_TENSOR = torch.Tensor
_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter, *((torch.nn.Buffer,) if hasattr(torch.nn, "Buffer") else ()))


def _constant_key(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return (type(value), value)


def static_key(leaves: list, grad_enabled: bool) -> tuple:
    """Guard key of a call for a static entry (see Note [Guards])."""
    seen: dict[int, int] = {}
    key: list = [grad_enabled]
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, _TENSOR):
            first = seen.setdefault(id(leaf), i)
            try:
                key.append((leaf.shape, leaf.stride(), leaf.dtype, leaf.device, leaf.requires_grad, first))
            except RuntimeError:  # sparse layouts have no strides; compiling them raises UnsupportedError
                key.append((leaf.shape, leaf.layout, leaf.dtype, leaf.device, leaf.requires_grad, first))
        else:
            key.append(_constant_key(leaf))
    return tuple(key)


def dynamic_key(leaves: list, grad_enabled: bool) -> tuple:
    """Guard key of a call for a symbolic entry: no sizes (see Note [Guards])."""
    seen: dict[int, int] = {}
    key: list = [grad_enabled, "dynamic"]
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, _TENSOR):
            first = seen.setdefault(id(leaf), i)
            key.append((leaf.dim(), leaf.dtype, leaf.device, leaf.requires_grad, first, leaf.is_contiguous()))
        else:
            key.append(_constant_key(leaf))
    return tuple(key)


@dataclasses.dataclass(frozen=True)
class FlatSignature:
    """How the user's flat leaves map to graph inputs.

    ``tensor_leaf_positions[k]`` is the leaf index of graph input ``k`` (first
    occurrence of each distinct tensor); ``constants`` holds the non-tensor leaves
    specialized into the graph, by leaf index.
    """

    num_leaves: int
    tensor_leaf_positions: tuple[int, ...]
    duplicate_of: dict[int, int]          # leaf index -> graph input index, for repeated tensors
    constants: dict[int, Any]
    roles: tuple[Role, ...]
    names: tuple[str, ...] = ()


def leaf_names(args_tree: Any) -> list[str]:
    """Readable names of the flat leaves: the innermost dict key (a keyword, a parameter's
    name), else ``arg`` and the innermost position (``arg0`` for the first argument)."""
    names = []
    for i, (path, _) in enumerate(pytree.tree_flatten_with_path(args_tree)[0]):
        key = next((k.key for k in reversed(path) if isinstance(k, pytree.MappingKey)), None)
        if isinstance(key, str) and key:
            names.append("".join(c if c.isalnum() else "_" for c in key).strip("_") or f"arg{i}")
            continue
        index = next((k.idx for k in reversed(path) if isinstance(k, pytree.SequenceKey)), i)
        names.append(f"arg{index}")
    return names


def flat_signature(leaves: list, leaf_roles: list[Role] | None = None,
                   names: list[str] | None = None) -> FlatSignature:
    """Describe the graph inputs of a call; repeated tensors become one input."""
    positions: list[int] = []
    first_input: dict[int, int] = {}
    duplicate_of: dict[int, int] = {}
    constants: dict[int, Any] = {}
    roles: list[Role] = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, _TENSOR):
            _check_supported_tensor(leaf, i)
            if id(leaf) in first_input:
                duplicate_of[i] = first_input[id(leaf)]
                continue
            first_input[id(leaf)] = len(positions)
            positions.append(i)
            roles.append(leaf_roles[i] if leaf_roles else Role.PRIMAL)
        else:
            constants[i] = leaf
    input_names = tuple(names[p] for p in positions) if names else tuple(f"arg{p}" for p in positions)
    return FlatSignature(len(leaves), tuple(positions), duplicate_of, constants, tuple(roles), input_names)


def _check_supported_tensor(t: torch.Tensor, index: int) -> None:
    if t.layout != torch.strided:
        raise UnsupportedError(
            f"argument {index} has layout {t.layout}; jointgraph compiles strided (dense) tensors only",
            hint="convert it with .to_dense(), or pass on_unsupported=\"eager\"")
    if type(t) not in _PLAIN_TENSOR_TYPES:
        raise UnsupportedError(
            f"argument {index} is a tensor subclass ({type(t).__name__}); jointgraph compiles plain tensors",
            hint="pass the plain tensor, or on_unsupported=\"eager\"")


def unflattener(spec: pytree.TreeSpec):
    """``tree_unflatten`` for ``spec``, keeping ``torch.Size`` nodes ``torch.Size``.

    ``make_fx`` registers ``torch.Size`` with pytree to unflatten as a plain tuple; a user who
    returns (or passes) ``x.shape`` gets a ``torch.Size`` in eager, so we rebuild it. Specs
    without a ``torch.Size`` use pytree's own (faster) unflatten.
    """
    if not _has_size(spec):
        return lambda leaves: pytree.tree_unflatten(leaves, spec)
    return lambda leaves: _rebuild(spec, iter(leaves))


def _children(spec: pytree.TreeSpec) -> list:
    return list(spec.children()) if hasattr(spec, "children") else list(spec.children_specs)


def _has_size(spec: pytree.TreeSpec) -> bool:
    return spec.type is torch.Size or any(_has_size(c) for c in _children(spec))


def _rebuild(spec: pytree.TreeSpec, leaves) -> Any:
    if spec.is_leaf():
        return next(leaves)
    children = [_rebuild(c, leaves) for c in _children(spec)]
    if spec.type is torch.Size and all(isinstance(c, int) for c in children):
        return torch.Size(children)
    return pytree.SUPPORTED_NODES[spec.type].unflatten_fn(children, spec.context)


def make_flat_fn(fn, spec: pytree.TreeSpec, signature: FlatSignature, captured: list = ()):
    """Return ``flat_fn(*graph_inputs)`` that rebuilds the user's call and flattens its result.

    The leaves past ``spec``'s are ``captured``, the real tensors the function reads from its
    closure, globals and modules: the function runs with each swapped for its graph input
    (Note [Captured tensors] in capture/captured.py). ``out_spec_box`` receives the pytree
    spec of the result at trace time.
    """
    from .captured import run_captured
    from .subclasses import SubclassOutputs, any_subclass

    positions = signature.tensor_leaf_positions
    duplicates = signature.duplicate_of
    constants = signature.constants
    num_leaves = signature.num_leaves
    num_args = spec.num_leaves
    out_spec_box: list = []
    unflatten = unflattener(spec)

    def flat_fn(*inputs):
        leaves: list = [None] * num_leaves
        for k, pos in enumerate(positions):
            leaves[pos] = inputs[k]
        for pos, k in duplicates.items():
            leaves[pos] = inputs[k]
        for pos, value in constants.items():
            leaves[pos] = value
        args, kwargs = unflatten(leaves[:num_args])
        lifted = {id(real): leaves[num_args + j] for j, real in enumerate(captured) if isinstance(real, _TENSOR)}
        result = run_captured(fn, args, kwargs, lifted)
        flat, out_spec = pytree.tree_flatten(result)
        if any_subclass(flat):   # Note [Tensor subclasses]: compiled again, flattened
            raise SubclassOutputs()
        out_spec_box[:] = [out_spec]
        return flat

    return flat_fn, out_spec_box


def fakeify(tensors: list, fake_mode, *, dynamic: bool, static: frozenset[int] = frozenset()) -> list:
    """Fake copies of the graph inputs: leaves with the caller's ``requires_grad``. Under ``dynamic``
    the inputs in ``static`` (captured tensors) keep their sizes."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    fakes = []
    for i, t in enumerate(tensors):
        if not isinstance(t, _TENSOR):
            fakes.append(t)
            continue
        context = None
        if dynamic and t.dim() > 0:
            kind = DimDynamic.STATIC if i in static else DimDynamic.DYNAMIC
            context = StatelessSymbolicContext(dynamic_sizes=[kind] * t.dim())
        # Only non-leaf inputs are detached: a leaf keeps its identity and autograd metadata. A view given
        # other data (``t.data = ...``, a Dynamo graph break between: fuzz seed 10003680) is fakified apart
        # from its autograd base: faked as a view of it, it would share the base's memory it no longer shares.
        if t.is_leaf and moved_off_base(t):
            fake = fake_mode.from_tensor(t.detach(), symbolic_context=context).requires_grad_(t.requires_grad)
        elif t.is_leaf:
            fake = fake_mode.from_tensor(t, symbolic_context=context)
        else:
            fake = fake_mode.from_tensor(t.detach(), symbolic_context=context).requires_grad_(True)
        fakes.append(fake)
    return fakes


def moved_off_base(t: torch.Tensor) -> bool:
    """``t``, a view in autograd's sense, no longer shares its base's storage (``t1 = a[0]; t1.data = y``)."""
    return t._base is not None and StorageWeakRef(t.untyped_storage()) != StorageWeakRef(t._base.untyped_storage())
