"""What ``jointgraph cache info`` prints and what ``jointgraph cache clear`` does."""

from __future__ import annotations

import collections
import dataclasses
import time

from .store import DiskStore

RECENT_RUNS = 5


@dataclasses.dataclass
class CacheInfo:
    """The directory's entries and bytes, and the hit / miss / bypass counts of the last runs."""

    root: str
    entries: int
    bytes: int
    max_bytes: int
    runs: list[tuple[str, int, dict[str, int]]]   # (started, pid, counts by event), latest last
    bypass_reasons: list[str]


def cache_info(store: DiskStore, recent: int = RECENT_RUNS) -> CacheInfo:
    entries = store.entries()
    runs: dict[str, dict] = collections.OrderedDict()
    reasons: list[str] = []
    for parts in store.events():
        stamp, pid, event = parts[0], parts[1], parts[2]
        run = runs.setdefault(pid, {"started": stamp, "counts": collections.Counter()})
        run["counts"][event] += 1
        if event == "bypass" and len(parts) > 4 and parts[4] not in reasons:
            reasons.append(parts[4])
    last = list(runs.items())[-recent:]
    return CacheInfo(str(store.root), len(entries), sum(size for _, size, _ in entries), store.max_bytes,
                     [(_when(r["started"]), int(pid), dict(r["counts"])) for pid, r in last], reasons[-recent:])


def _when(stamp: str) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stamp)))
    except ValueError:
        return stamp


def info_lines(info: CacheInfo) -> list[str]:
    lines = [f"cache directory: {info.root}",
             f"entries: {info.entries}, {info.bytes:,} bytes (bound {info.max_bytes:,} bytes, least recently "
             "used evicted first)"]
    if not info.runs:
        lines.append("no runs recorded yet")
    for started, pid, counts in info.runs:
        shown = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("hit", "miss", "store", "bypass", "corrupt"))
        lines.append(f"run {started} (pid {pid}): {shown}")
    lines += [f"bypassed: {reason}" for reason in info.bypass_reasons]
    return lines
