"""Which module and source line each traced node comes from, recorded cheaply.

Note [Module scopes]
--------------------
``make_fx`` can record a full Python stack per node, but it walks the stack for every node. What
``explain`` and the report need is coarser: the module a value was computed in
(``model.blocks.0.attn``) and the line of the user's code that called it. While the joint
graph is traced, global forward pre/post hooks keep a stack of the modules being run; each
module entered sets ``nn_module_stack`` (path -> (path, class)) and ``stack_trace`` (the call
site: the first frame outside ``torch``) in ``torch.fx.traceback``'s current meta, which
``make_fx`` copies onto every node it creates while node-meta preservation is on. One frame
walk per module call, nothing per op. A module's path is its attribute name in its parent
(``named_modules``: ``blocks.0`` through a ModuleList), found once per parent; the outermost
module traced has the path ``""``. Hooks run only for the tracing thread. The line is the
call site of the innermost module, not of each op inside it.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading
from collections.abc import Iterator

import torch
from torch.fx import traceback as fx_traceback

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_OUR_MODELS = tuple(os.path.join(_OUR_DIR, "bench", name) for name in ("zoo.py", "gpt.py"))   # user code here


@contextlib.contextmanager
def module_scopes() -> Iterator[None]:
    """Record module paths and call sites into traced nodes' meta (Note [Module scopes])."""
    thread = threading.get_ident()
    stack: list[tuple[torch.nn.Module, str, dict, str | None]] = []
    children: dict[int, dict[int, str]] = {}

    def pre(module: torch.nn.Module, args) -> None:
        if threading.get_ident() != thread:
            return
        meta = fx_traceback.get_current_meta()
        if stack:
            parent = stack[-1][0]
            names = children.get(id(parent))
            if names is None:
                names = children[id(parent)] = {id(m): n for n, m in parent.named_modules() if n}
            name = names.get(id(module), type(module).__name__)
            path = f"{stack[-1][1]}.{name}" if stack[-1][1] else name
        else:
            path = ""
        saved = (meta.get("nn_module_stack"), meta.get("stack_trace"))
        scopes = dict(saved[0] or {})
        scopes[path or type(module).__name__] = (path, f"{type(module).__module__}.{type(module).__qualname__}")
        meta["nn_module_stack"] = scopes
        site = _call_site()
        if site is not None:
            meta["stack_trace"] = site
        stack.append((module, path, *saved))

    def post(module: torch.nn.Module, args, output) -> None:
        if threading.get_ident() != thread or not stack or stack[-1][0] is not module:
            return
        _, _, scopes, site = stack.pop()
        meta = fx_traceback.get_current_meta()
        for key, value in (("nn_module_stack", scopes), ("stack_trace", site)):
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value

    handles = [torch.nn.modules.module.register_module_forward_pre_hook(pre),
               torch.nn.modules.module.register_module_forward_hook(post, always_call=True)]
    try:
        with fx_traceback.preserve_node_meta():
            yield
    finally:
        for handle in handles:
            handle.remove()


def _call_site() -> str | None:
    """The first frame outside torch and jointgraph (the zoo's models count as user code), in
    ``traceback``'s format."""
    frame = sys._getframe(2)
    while frame is not None and _skipped(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    code = frame.f_code
    line = linecache.getline(code.co_filename, frame.f_lineno).strip()
    return f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}\n    {line}\n'


def _skipped(filename: str) -> bool:
    return (filename.startswith((_TORCH_DIR, "<")) or
            (filename.startswith(_OUR_DIR) and not filename.startswith(_OUR_MODELS)))


def node_scope(node: torch.fx.Node) -> tuple[str, str | None]:
    """(module path, ``file:line``) a traced node was recorded with; ``("", None)`` if none."""
    scopes = node.meta.get("nn_module_stack") or {}
    path = next(reversed(scopes.values()))[0] if scopes else ""
    trace = node.meta.get("stack_trace") or ""
    source = None
    if trace:
        first = trace.strip().splitlines()[0]
        if first.startswith('File "'):
            file, _, rest = first[len('File "'):].partition('", line ')
            source = f"{os.path.basename(file)}:{rest.split(',')[0]}"
    return path, source
