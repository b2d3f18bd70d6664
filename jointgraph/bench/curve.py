"""Live memory over one measured training step, from the profiler's CPU allocator events.

Note [Eager's memory curve]
``jointgraph bench`` measures each contender's peak from the allocator events of
``torch.profiler.profile(profile_memory=True)`` (Note [Measuring peak memory] in runner.py). Their
running sum, plus the bytes live when the step starts, is the live memory after each allocation
or free: a curve over the step, not just its maximum. The report overlays eager's curve on
jointgraph's simulated timeline, whose x-axis is the graph's node index (forward, then backward).
The two runs share no node names, so the common axis is the *fraction of each phase's ATen ops*:
an allocator event in the forward that comes after k of the forward's n innermost ATen ops
(``aten::`` events with no ``aten::`` event inside them: ``aten::linear`` counts as the ``t`` and
``addmm`` it runs, as in the traced graph) lies at forward fraction k / n, and likewise in the
backward. Op counts, not wall time: one matmul takes as long as hundreds of views, while the
timeline gives every node one step. The curve is kept at ``MAX_POINTS`` per phase, each point the
highest value of its stretch, so its peak is the measured one.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator
from typing import Any

MAX_POINTS = 400   # per phase: finer than a report's plot resolves
FORWARD_RANGE = "jointgraph.bench.forward"
BACKWARD_RANGE = "jointgraph.bench.backward"


@dataclasses.dataclass(frozen=True)
class MemoryCurve:
    """Measured live bytes over one step: ``forward`` and ``backward`` are ``(fraction, bytes)``
    points, the fraction of that phase's ATen ops run before the value (Note [Eager's memory curve])."""

    forward: list[tuple[float, int]]
    backward: list[tuple[float, int]]
    method: str = "torch.profiler CPU allocator events, running sum + bytes live at step start; x: fraction of " \
                  "the phase's innermost ATen ops"

    @property
    def peak_bytes(self) -> int:
        return max((b for _, b in self.forward + self.backward), default=0)


def curve_from_events(events: list[Any], base_bytes: int) -> MemoryCurve | None:
    """The curve of one profiled step whose forward and backward ran inside ``record_function``
    ranges ``FORWARD_RANGE`` and ``BACKWARD_RANGE``; ``events`` are kineto events
    (``prof.profiler.kineto_results.events()``). None when a range is missing."""
    ranges = {e.name(): e for e in events if e.name() in (FORWARD_RANGE, BACKWARD_RANGE)}
    if len(ranges) != 2:
        return None
    forward, backward = ranges[FORWARD_RANGE], ranges[BACKWARD_RANGE]
    ops = _innermost_ops(events)
    op_starts = {name: [e.start_ns() for e in ops if span.start_ns() <= e.start_ns() <= span.end_ns()]
                 for name, span in (("forward", forward), ("backward", backward))}
    points: dict[str, list[tuple[float, int]]] = {"forward": [(0.0, base_bytes)], "backward": []}
    for start, running in running_bytes(events, base_bytes):
        name = "backward" if start >= backward.start_ns() else "forward"
        starts = op_starts[name]
        done = bisect.bisect_right(starts, start)
        points[name].append((done / len(starts) if starts else 0.0, running))
    if not points["backward"]:
        points["backward"] = [(0.0, points["forward"][-1][1])]
    return MemoryCurve(_thin(points["forward"]), _thin(points["backward"]))


def running_bytes(events: list[Any], base_bytes: int = 0) -> Iterator[tuple[int, int]]:
    """(start ns, live bytes after it) for each allocator event of the kineto ``events``, in time
    order: their running sum from ``base_bytes``."""
    running = base_bytes
    for event in sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        running += event.nbytes()
        yield event.start_ns(), running


def _innermost_ops(events: list[Any]) -> list[Any]:
    """``aten::`` events with no other ``aten::`` event of their thread starting inside them."""
    ops = sorted((e for e in events if e.name().startswith("aten::")),
                 key=lambda e: (e.start_thread_id(), e.start_ns(), -e.end_ns()))
    leaves = []
    for i, event in enumerate(ops):
        following = ops[i + 1] if i + 1 < len(ops) else None
        if (following is None or following.start_thread_id() != event.start_thread_id()
                or following.start_ns() >= event.end_ns()):
            leaves.append(event)
    return sorted(leaves, key=lambda e: e.start_ns())


def _thin(points: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """At most ``MAX_POINTS``: the highest value of each stretch of 1 / MAX_POINTS of the phase,
    then the phase's last value (what the next phase starts from)."""
    if len(points) <= MAX_POINTS:
        return points
    buckets: dict[int, tuple[float, int]] = {}
    for fraction, value in points:
        key = min(int(fraction * MAX_POINTS), MAX_POINTS - 1)
        if key not in buckets or value > buckets[key][1]:
            buckets[key] = (key / MAX_POINTS, value)
    thinned = [buckets[k] for k in sorted(buckets)]
    return thinned + [(1.0, points[-1][1])]
