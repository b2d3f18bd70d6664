"""jointgraph's logging: the ``jointgraph`` logger and one child logger per topic.

Nothing is printed unless asked. ``JOINTGRAPH_LOGS`` (in the spirit of ``TORCH_LOGS``) names
the topics to show, comma-separated; it is read once, by the entry points
(``aot_function``, ``aot_module``, ``backend``, ``plan``, the CLI), never by a pass::

    JOINTGRAPH_LOGS=recompiles,plan python train.py
    JOINTGRAPH_LOGS=all python train.py          # every topic
    JOINTGRAPH_LOGS=+compile python train.py     # "+": DEBUG detail as well

Topics (each a logger ``jointgraph.<topic>``):

- ``compile``: what was compiled (function, inputs) and how long each stage took;
- ``recompiles``: every recompile and the guard that failed (``input 0: shape (4, 128) -> (8, 128)``);
- ``plan``: the plan's summary (partitioner, saved values and bytes, simulated peak);
- ``graphs``: the forward and backward graphs' code;
- ``cache``: the on-disk compile cache.

Python's own ``logging`` configuration works too: ``logging.getLogger("jointgraph.recompiles")
.setLevel(logging.INFO)`` with a handler of your own.
"""

from __future__ import annotations

import logging
import os

ENV_VAR = "JOINTGRAPH_LOGS"
TOPICS = ("compile", "recompiles", "plan", "graphs", "cache")

root = logging.getLogger("jointgraph")
compile_log = logging.getLogger("jointgraph.compile")
recompiles_log = logging.getLogger("jointgraph.recompiles")
plan_log = logging.getLogger("jointgraph.plan")
graphs_log = logging.getLogger("jointgraph.graphs")
cache_log = logging.getLogger("jointgraph.cache")

_configured_from: list[str | None] = []   # the value of ENV_VAR already applied (read once)


def parse_topics(spec: str) -> dict[str, int]:
    """``"recompiles,+plan"`` -> ``{"recompiles": INFO, "plan": DEBUG}``; ``"all"`` is every topic.

    Raises ``ValueError`` naming the unknown topic and the known ones.
    """
    levels: dict[str, int] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        level = logging.DEBUG if item.startswith("+") else logging.INFO
        name = item.lstrip("+")
        if name == "all":
            levels.update(dict.fromkeys(TOPICS, level))
        elif name in TOPICS:
            levels[name] = level
        else:
            raise ValueError(f"{ENV_VAR}: unknown topic {name!r}; known: all, {', '.join(TOPICS)}")
    return levels


def set_logs(**topics: int | bool) -> None:
    """Show the given topics on stderr: ``set_logs(recompiles=True, plan=logging.DEBUG)``."""
    for name, level in topics.items():
        if name not in TOPICS:
            raise ValueError(f"unknown log topic {name!r}; known: {', '.join(TOPICS)}")
        logger = logging.getLogger(f"jointgraph.{name}")
        logger.setLevel(logging.INFO if level is True else logging.WARNING if level is False else level)
    if any(level is not False for level in topics.values()) and not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        root.addHandler(handler)


def configure_from_env() -> None:
    """Apply ``JOINTGRAPH_LOGS`` once per process (and again only if its value changes)."""
    spec = os.environ.get(ENV_VAR)
    if _configured_from and _configured_from[-1] == spec:
        return
    _configured_from.append(spec)
    if spec:
        set_logs(**parse_topics(spec))
