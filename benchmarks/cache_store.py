"""What one store into the on-disk cache costs as the directory fills (Note [Cache usage ledger]).

A cache directory is filled with ``--entries`` entry files (copies of one real entry under other
keys), then, side by side in this process: the full listing eviction used to do on every store
(``DiskStore.evict``, which stats every entry file), and a store as it is now (the usage ledger
updated under its lock; the directory is listed only to evict). Prints both and their ratio.

    python benchmarks/cache_store.py                  # 20,000 entries
    python benchmarks/cache_store.py --entries 2000 --stores 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jointgraph.cache.store import DiskStore


def fill(store: DiskStore, entries: int) -> None:
    """``entries`` entry files: one written by the store, copied under other keys (no fsync each)."""
    store.write("0" * 64, bytes(2000))
    data = store.path("0" * 64).read_bytes()
    for k in range(1, entries):
        path = store.path(f"{k:064x}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20000, help="entry files in the directory")
    parser.add_argument("--stores", type=int, default=20, help="timed stores (and listings)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = DiskStore(Path(tmp))
        fill(store, args.entries)
        store.evict()   # the ledger now holds the directory's total
        listing, writes = [], []
        for k in range(args.stores):
            start = time.perf_counter()
            store.evict()
            listing.append(time.perf_counter() - start)
            start = time.perf_counter()
            store.write(f"f{k:063x}", bytes(2000))
            writes.append(time.perf_counter() - start)
        result = {"entries": len(store.entries()), "listing_ms": 1e3 * statistics.median(listing),
                  "store_ms": 1e3 * statistics.median(writes)}
    print(f"{result['entries']:,} entries: a full listing (what every store did before the ledger) "
          f"{result['listing_ms']:.1f} ms, a store now {result['store_ms']:.2f} ms "
          f"(median of {args.stores}; ratio {result['listing_ms'] / result['store_ms']:.0f}x)")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
