"""The cache directory: atomic, checksummed entry files with least-recently-used eviction.

Note [Cache storage]
--------------------
One file per key, ``<dir>/entries/<key[:2]>/<key>.jg``: a header (magic, format version),
the SHA-256 of the body, then the body. Writes go to a temporary file in the same directory,
are flushed and ``os.replace``-d over the final name: a reader sees the old file, the new
one, or none, never half of one; two processes storing one key both write complete files
and the last rename wins (both hold the same entry). A file whose magic, format or checksum
is wrong (truncated, corrupted, from another format version) is reported with a warning,
treated as a miss and overwritten by the recompiled entry. A hit touches the file's mtime;
after a store, the oldest files go until the directory is under ``max_bytes``. Hits,
misses and bypasses are appended to ``<dir>/events.log`` (one short line each, with
``O_APPEND``) for ``jointgraph cache info``.

Note [Cache usage ledger]
-------------------------
Eviction needs the directory's total size, and adding it up stats every entry file: with
tens of thousands of entries that is most of a compile (fuzz runs measured 0.8 s of a 0.9 s
compile in ``entries()``). So ``<dir>/usage`` holds the running total: a store adds the
bytes it wrote (less those of the file it replaced) under an exclusive ``flock`` on
``<dir>/usage.lock``, and the directory is listed only when the total passes ``max_bytes``
(to evict, which writes the listed total back), when the ledger is missing or unreadable,
or when it is over an hour old (files removed by hand, a platform without ``flock``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import tempfile
import time
from pathlib import Path

from ..logs import cache_log as log

MAGIC = b"JGCACHE\x00"
FORMAT = 1
DEFAULT_MAX_BYTES = 4 << 30
_HEADER = len(MAGIC) + 4 + 32
_EVENTS_MAX_BYTES = 1 << 20
_LEDGER_MAX_AGE_S = 3600
ENV_DIR = "JOINTGRAPH_CACHE_DIR"


def default_dir() -> Path:
    """The per-user cache directory (platformdirs when installed, else ~/.cache/jointgraph)."""
    try:
        import platformdirs
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "jointgraph"
    return Path(platformdirs.user_cache_dir("jointgraph"))


def cache_option_from_env(cache: bool | str | os.PathLike) -> bool | str | os.PathLike:
    """``cache=True`` made explicit from $JOINTGRAPH_CACHE_DIR (a directory, or 0 / off to disable).
    Read once, where options are made (the entry points), never inside the pipeline."""
    if cache is not True:
        return cache
    value = os.environ.get(ENV_DIR)
    if value is None or value == "":
        return True
    if value.lower() in ("0", "off", "false", "no"):
        return False
    return value


class CorruptEntry(Exception):
    """An entry file that fails its checks."""


@dataclasses.dataclass
class DiskStore:
    """The entry files under ``root`` (Note [Cache storage])."""

    root: Path
    max_bytes: int = DEFAULT_MAX_BYTES

    def path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.jg"

    def read(self, key: str) -> bytes | None:
        """The body stored under ``key``; None when absent or unusable (warned once per file)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("jointgraph cache: cannot read %s (%s); recompiling", path, exc)
            return None
        try:
            body = _check(data)
        except CorruptEntry as exc:
            log.warning("jointgraph cache: ignoring entry %s: %s; it is recompiled and rewritten", path, exc)
            return None
        try:
            os.utime(path)   # least recently used: by mtime
        except OSError:
            pass
        return body

    def write(self, key: str, body: bytes) -> None:
        path = self.path(key)
        data = MAGIC + FORMAT.to_bytes(4, "little") + hashlib.sha256(body).digest() + body
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            replaced = path.stat().st_size
        except OSError:
            replaced = 0
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._account(len(data) - replaced)

    def _account(self, delta: int) -> None:
        """Add ``delta`` bytes to the ledger; evict when the total passes the bound (Note [Cache usage ledger])."""
        with self._ledger_lock():
            total = self._ledger()
            if total is None:
                self.evict()   # lists the directory, the new file included, and writes the ledger
                return
            total += delta
            if total > self.max_bytes:
                self.evict()
            else:
                self._set_ledger(total)

    @contextlib.contextmanager
    def _ledger_lock(self):
        try:
            import fcntl
        except ImportError:   # no flock (Windows): the hourly recount corrects what races lose
            yield
            return
        fd = os.open(self.root / "usage.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)   # releases the lock

    def _ledger(self) -> int | None:
        """The recorded total; None when missing, unreadable or too old to trust."""
        path = self.root / "usage"
        try:
            if time.time() - path.stat().st_mtime > _LEDGER_MAX_AGE_S:
                return None
            return int(path.read_text())
        except (OSError, ValueError):
            return None

    def _set_ledger(self, total: int) -> None:
        path = self.root / "usage"
        tmp = path.with_name(f".usage.{os.getpid()}.tmp")
        try:
            tmp.write_text(f"{max(total, 0)}\n")
            os.replace(tmp, path)
        except OSError:
            pass

    def entries(self) -> list[tuple[Path, int, float]]:
        """(path, bytes, mtime) of every entry file."""
        found = []
        for path in (self.root / "entries").glob("*/*.jg"):
            try:
                stat = path.stat()
            except OSError:   # removed meanwhile
                continue
            found.append((path, stat.st_size, stat.st_mtime))
        return found

    def evict(self) -> int:
        """Remove least recently used entries until under ``max_bytes``; return how many went, and
        record the total left in the ledger. Temporary files a crashed writer left behind go once
        they are an hour old."""
        stale = time.time() - 3600
        for tmp in (self.root / "entries").glob("*/.*.tmp"):
            try:
                if tmp.stat().st_mtime < stale:
                    tmp.unlink()
            except OSError:
                continue
        entries = sorted(self.entries(), key=lambda e: e[2])
        total = sum(size for _, size, _ in entries)
        removed = 0
        for path, size, _ in entries:
            if total <= self.max_bytes:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
        self._set_ledger(total)
        return removed

    def clear(self) -> int:
        removed = 0
        for path, _, _ in self.entries():
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
        for name in ("events.log", "usage"):
            try:
                (self.root / name).unlink()
            except OSError:
                pass
        return removed

    def record(self, event: str, key: str, detail: str = "") -> None:
        """Append one event line (hit / miss / store / bypass / corrupt) for ``cache info``."""
        line = f"{time.time():.3f} {os.getpid()} {event} {key[:16] or '-'} {detail}".replace("\n", " ")[:400] + "\n"
        path = self.root / "events.log"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if path.exists() and path.stat().st_size > _EVENTS_MAX_BYTES:
                os.replace(path, self.root / "events.old.log")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    def events(self) -> list[list[str]]:
        lines = []
        for name in ("events.old.log", "events.log"):
            try:
                lines += (self.root / name).read_text().splitlines()
            except OSError:
                continue
        return [line.split(" ", 4) for line in lines if line.count(" ") >= 3]


def _check(data: bytes) -> bytes:
    if len(data) < _HEADER or not data.startswith(MAGIC):
        raise CorruptEntry("not a jointgraph cache entry (truncated or overwritten)")
    version = int.from_bytes(data[len(MAGIC):len(MAGIC) + 4], "little")
    if version != FORMAT:
        raise CorruptEntry(f"entry format {version}, this jointgraph reads format {FORMAT}")
    digest, body = data[len(MAGIC) + 4:_HEADER], data[_HEADER:]
    if hashlib.sha256(body).digest() != digest:
        raise CorruptEntry("checksum mismatch (truncated or corrupted)")
    return body
