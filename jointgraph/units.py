"""Byte and time units as jointgraph prints and parses them: binary units (KiB, MiB, GiB).

Example::

    >>> fmt_bytes(3 * 2**20)
    '3.00 MiB'
    >>> parse_bytes("1.5GiB"), parse_bytes("1500MB"), parse_bytes("0.6")
    (1610612736, 1500000000, 0.6)
"""

from __future__ import annotations

import re

# Binary units, largest first: what every table, plot and message prints.
BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))

# What parse_bytes accepts: binary units and, as written, decimal ones (MB = 10**6 bytes).
_PARSED_UNITS = {
    "": 1, "b": 1,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    "k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def fmt_bytes(n: int | None) -> str:
    """``n`` bytes in the largest binary unit it reaches (``'1.50 GiB'``); ``'n/a'`` for None."""
    if n is None:
        return "n/a"
    for unit, size in BYTE_UNITS:
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def fmt_seconds(s: float | None) -> str:
    """``'12.3 ms'`` below a second, ``'1.23 s'`` above; ``'n/a'`` for None."""
    if s is None:
        return "n/a"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def parse_bytes(text: str) -> int | float:
    """A memory budget as written by a user: ``'0.6'`` (a fraction, returned as a float),
    ``'2GiB'``, ``'1500MiB'``, ``'1500MB'`` (decimal, 10**6), ``'123456'`` (bytes, an int).

    Raises ``ValueError`` with the accepted forms when ``text`` is none of these.
    """
    match = _QUANTITY.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _PARSED_UNITS:
        raise ValueError(f"not a memory size: {text!r} (use a fraction such as 0.6, bytes such as 123456, "
                         "or a size with a unit: 2GiB, 1500MiB, 1500MB)")
    number = float(match.group(1))
    if not unit and "." not in match.group(1) and "e" not in match.group(1).lower():
        return int(match.group(1))
    if not unit:
        return number
    return int(number * _PARSED_UNITS[unit])
