"""Saved-tensor hooks in the graph: built-in compression (bf16, fp8), host offload, user hooks.

Two ways in:

- ``SavedTensorPolicy``, the option ``saved_tensors=``: store the saved values it matches
  compressed and/or on the host. With ``partitioner="default"`` / ``"mincut"`` it is applied
  to every saved value it matches; with ``"budget"`` it says what the planner may use.
- Ambient ``torch.autograd.graph.saved_tensors_hooks(pack, unpack)`` around a compiled call:
  pure hooks are traced on each saved value and inlined (Note [Inlined saved-tensor hooks]);
  others run at runtime, once per saved tensor, as in eager.

Either way the packing sits right after the value's last forward use and the unpacking
right before its first backward use (``passes/saved_codecs.py``), so the memory is saved.

Note [Inlined saved-tensor hooks]
---------------------------------
A hook pair is inlined when both are ``torch.fx.GraphModule`` s, or plain Python functions
that provably touch nothing but their arguments (``is_inlineable``: on their bytecode, no
stores outside their own frame, no attribute or subscript stores, and every global and
closure value is torch, math, operator, a pure builtin, an immutable constant, a dtype /
device / tensor, or a function passing the same check), and ``make_fx`` traces them on each
saved value's fake tensor to out-of-place ATen ops whose unpack returns the value's shape
and dtype. Branches on dtype, shape or size are decided at trace time (per saved value).
Anything else (a counter, a print, a list append, ``torch.save``, a bound method, a failed
trace) runs at runtime through ``ctx.save_for_backward``, once per saved tensor, exactly as
eager runs it: never dropped, never run at trace time only. The active pair is part of the
compiled entry's guard. An inlined pair is never also run at runtime.
"""

from __future__ import annotations

import builtins
import dataclasses
import dis
import math
import operator
import types
from collections.abc import Callable

import torch
import torch.fx

from ..ir import Decision
from ..ir.graph_utils import SavedChoice, aliases_input, is_symbolic_scalar
from .codecs import Codec, codec_decision, trace_hooks
from .precision import Exactness, saved_value_needs

# ### Policies

COMPRESS = (None, "bf16", "fp8")
_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


@dataclasses.dataclass(frozen=True)
class SavedTensorPolicy:
    """Which saved values to store compressed and/or on the host.

    - ``compress="bf16"``: floating saved values wider than 2 bytes stored as bfloat16
      (8 mantissa bits: relative error ~4e-3 per element; gradients of an MLP within
      ~1e-2 relative of uncompressed eager).
    - ``compress="fp8"``: saved values wider than 1 byte stored as ``float8_e4m3fn`` with one
      fp32 scale per tensor (``amax / 448``), dequantized in the backward (3 mantissa bits:
      relative error ~6e-2 per element, worse for values far below the tensor's amax;
      gradients within ~1e-1 relative).
    - ``offload=True``: copied to host memory after the last forward use and back before
      the first backward use (pinned, non-blocking on CUDA; a plain copy on CPU). Exact.
      With ``compress`` too, the compressed value is offloaded.
    - ``min_bytes``: only values of at least this many bytes (unpacked).
    - ``dtypes``: only values of these dtypes (floating only; integer tensors never).

    Graph inputs and parameters (and views of them) are never packed: they are live anyway.
    """

    compress: str | None = None
    offload: bool = False
    min_bytes: int = 0
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)

    def __post_init__(self) -> None:
        if self.compress not in COMPRESS:
            raise ValueError(f"SavedTensorPolicy compress={self.compress!r} is invalid; allowed: None, 'bf16', 'fp8'")
        if not isinstance(self.offload, bool):
            raise ValueError(f"SavedTensorPolicy offload={self.offload!r} is invalid; allowed: True, False")
        if isinstance(self.min_bytes, bool) or not isinstance(self.min_bytes, int) or self.min_bytes < 0:
            raise ValueError(f"SavedTensorPolicy min_bytes={self.min_bytes!r} is invalid; allowed: an int >= 0")
        dtypes = tuple(self.dtypes) if isinstance(self.dtypes, (list, tuple, set, frozenset)) else None
        if not dtypes or any(d not in _FLOATS for d in dtypes):
            raise ValueError(f"SavedTensorPolicy dtypes={self.dtypes!r} is invalid; allowed: a non-empty tuple of "
                             "floating dtypes (float32, float16, bfloat16, float64)")
        object.__setattr__(self, "dtypes", dtypes)
        if self.compress is None and not self.offload:
            raise ValueError("SavedTensorPolicy needs compress='bf16' / 'fp8' or offload=True")

    def codec_for(self, val: torch.Tensor, needs: Exactness = Exactness.ANY) -> str | None:
        """The codec this policy gives a saved value with fake value ``val`` (None: stored as is),
        which the backward ``needs`` exact or by sign (Note [Compared saved values])."""
        if val.dtype not in self.dtypes or val.numel() * val.dtype.itemsize < self.min_bytes:
            return None
        compress = self.compress
        if compress == "bf16" and val.dtype.itemsize <= 2 or compress == "fp8" and val.dtype.itemsize <= 1:
            compress = None
        # fp8 packing keeps every sign and zero; bf16 does from fp32 (same exponent range; fp32
        # denormals below 2^-133, about 1e-40, round to zero) but not from fp64.
        keeps_sign = compress == "fp8" or compress == "bf16" and val.dtype == torch.float32
        if needs is Exactness.EXACT or needs is Exactness.SIGN and not keeps_sign:
            compress = None
        stages = [s for s in (compress, "offload" if self.offload else None) if s]
        return "+".join(stages) or None


def check_policy(policy) -> None:
    if policy is not None and not isinstance(policy, SavedTensorPolicy):
        raise ValueError(f"option saved_tensors={policy!r} is invalid; allowed: None or a "
                         "jointgraph.hooks.SavedTensorPolicy")


def apply_policy(choices: list[SavedChoice], policy: SavedTensorPolicy | None) -> list[SavedChoice]:
    """``choices`` with the policy's codec on every SAVE of a non-input floating tensor it matches."""
    if policy is None or not choices:
        return choices
    needs = saved_value_needs(choices[0].node.graph)
    result = []
    for choice in choices:
        val = choice.node.meta.get("val")
        codec = None
        if (choice.decision is Decision.SAVE and choice.codec is None and isinstance(val, torch.Tensor)
                and not is_symbolic_scalar(choice.node) and not aliases_input(choice.node)):
            need = needs.get(choice.node)
            codec = policy.codec_for(val, need.exactness if need else Exactness.ANY)
            if need is not None and codec != policy.codec_for(val):
                choice = dataclasses.replace(choice, reason=f"{choice.reason}; not compressed: the backward "
                                             f"compares it ({need.because}), rounding would change the result")
        if codec is None:
            result.append(choice)
            continue
        result.append(dataclasses.replace(choice, decision=codec_decision(codec), codec=codec,
                                          reason=f"{choice.reason}; saved_tensors policy: {codec}"))
    return result


# ### User hooks


def cache_hash(fn: Callable, key: str) -> Callable:
    """Mark hook ``fn`` with a stable hash so the on-disk cache may reuse entries compiled with it."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"cache_hash key={key!r} is invalid; allowed: a non-empty str")
    fn.__jointgraph_cache_hash__ = key
    return fn


def hook_cache_key(fn: Callable) -> str | None:
    """The stable hash of a hook: ``cache_hash``'s mark, or a GraphModule's ``user_cache_hash`` node meta."""
    key = getattr(fn, "__jointgraph_cache_hash__", None)
    if key is None and isinstance(fn, torch.fx.GraphModule):
        keys = [n.meta["user_cache_hash"] for n in fn.graph.nodes if "user_cache_hash" in n.meta]
        key = "|".join(map(str, keys)) or None
    return key


def user_hook_codecs(choices: list[SavedChoice], hooks: tuple[Callable, Callable]
                     ) -> tuple[list[SavedChoice], dict[str, Codec]] | None:
    """Trace ``hooks`` on every saved tensor; ``None`` when they must run at runtime instead.

    Every saved tensor gets the hooks, inputs and integer tensors included, as in eager.
    """
    pack, unpack = hooks
    if not (is_inlineable(pack) and is_inlineable(unpack)):
        return None
    codecs: dict[str, Codec] = {}
    result = []
    for choice in choices:
        val = choice.node.meta.get("val")
        if is_symbolic_scalar(choice.node) or not isinstance(val, torch.Tensor):
            result.append(choice)
            continue
        if choice.codec is not None:   # a policy codec already packs it: hooks would see the packed value
            return None
        key = f"hooks:{choice.node.name}"
        try:
            codecs[key] = trace_hooks(pack, unpack, val, key)
        except Exception:  # noqa: BLE001  any trace failure: the hooks run at runtime instead
            return None
        result.append(dataclasses.replace(choice, codec=key))
    return result, codecs


_PURE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "complex", "dict", "divmod", "enumerate", "float", "getattr", "hasattr", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "pow", "range", "reversed",
    "round", "slice", "sorted", "str", "sum", "tuple", "type", "zip", "ValueError", "TypeError", "RuntimeError",
    "AssertionError", "NotImplementedError", "None", "True", "False"})
_PURE_MODULES = (torch, math, operator)
_REFUSED_NAMES = frozenset({"save", "load", "print", "synchronize", "record_stream", "manual_seed", "set_rng_state",
                            "register_hook", "setattr", "__setattr__", "__setitem__", "write", "backward"})
_FRAME_STORES = frozenset({"STORE_FAST", "DELETE_FAST", "STORE_NAME", "DELETE_NAME"})


def is_inlineable(fn: Callable, _depth: int = 0) -> bool:
    """True if ``fn`` may be traced and inlined (Note [Inlined saved-tensor hooks])."""
    if isinstance(fn, torch.fx.GraphModule) or isinstance(fn, torch._ops.OpOverload):
        return True
    if not isinstance(fn, types.FunctionType) or _depth > 8:
        return False
    code = fn.__code__
    codes = [code, *(c for c in _nested_codes(code))]
    for co in codes:
        for ins in dis.get_instructions(co):
            name = ins.opname
            if name.startswith(("STORE_", "DELETE_")) and name not in _FRAME_STORES:
                if name == "STORE_DEREF" and ins.argval in co.co_cellvars:
                    continue
                return False
            if name in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME") and ins.argval in _REFUSED_NAMES:
                return False
            if name in ("IMPORT_NAME", "IMPORT_FROM"):
                return False
    for co in codes:
        for name in co.co_names:
            if name in fn.__globals__ and not _pure_value(fn.__globals__[name], _depth):
                return False
            if name not in fn.__globals__ and hasattr(builtins, name) and name not in _PURE_BUILTINS:
                return False
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:   # an empty cell
            continue
        if not _pure_value(value, _depth):
            return False
    return not fn.__defaults__ or all(_pure_value(d, _depth) for d in fn.__defaults__)


def _nested_codes(code: types.CodeType):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _nested_codes(const)


def _pure_value(value, depth: int) -> bool:
    if isinstance(value, types.ModuleType):
        return any(value is m or value.__name__.startswith(f"{m.__name__}.") for m in _PURE_MODULES)
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype, torch.device,
                                           torch.Tensor, torch.Size)):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_pure_value(v, depth) for v in value)
    if isinstance(value, types.FunctionType):
        return is_inlineable(value, depth + 1)
    if isinstance(value, (types.BuiltinFunctionType, torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        module = getattr(value, "__module__", None) or ""
        return module.startswith(("torch", "math", "_operator", "operator")) and value.__name__ not in _REFUSED_NAMES
    return False


__all__ = ["SavedTensorPolicy", "apply_policy", "cache_hash", "hook_cache_key", "is_inlineable", "user_hook_codecs"]
