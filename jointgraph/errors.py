"""Errors raised by jointgraph."""

from __future__ import annotations

import traceback


class UnsupportedError(RuntimeError):
    """A program jointgraph cannot compile correctly.

    The message names the operation, the user's source line, and the way out.
    """

    def __init__(self, what: str, *, source: str | None = None, hint: str | None = None):
        self.what = what
        self.source = source
        self.hint = hint or (
            'Pass on_unsupported="eager" to run this function eagerly (with one warning), '
            "or move the operation outside the compiled function."
        )
        lines = [what]
        if source:
            lines.append(f"  at {source}")
        lines.append(f"  what to do: {self.hint}")
        super().__init__("\n".join(lines))


def user_source_line(skip_prefixes: tuple[str, ...] = ()) -> str | None:
    """The innermost stack frame outside torch and jointgraph, as ``file:line (code)``."""
    import os

    import torch

    torch_dir = os.path.dirname(torch.__file__)
    own_dir = os.path.dirname(__file__)
    for frame in reversed(traceback.extract_stack()):
        fname = frame.filename
        if fname.startswith((torch_dir, own_dir, *skip_prefixes)) or "<" in fname[:1]:
            continue
        return f"{fname}:{frame.lineno} ({(frame.line or '').strip()})"
    return None


def source_from_traceback(exc: BaseException) -> str | None:
    """The innermost frame of ``exc``'s traceback that lies in user code."""
    import os

    import torch

    torch_dir = os.path.dirname(torch.__file__)
    own_dir = os.path.dirname(__file__)
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith((torch_dir, own_dir)) or frame.filename.startswith("<"):
            continue
        found = f"{frame.filename}:{frame.lineno} ({(frame.line or '').strip()})"
    return found
