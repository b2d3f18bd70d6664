"""Side by side on real models: eager, torch.compile (AOTAutograd) and jointgraph.

A thin wrapper over ``jointgraph bench`` (the code lives in ``jointgraph/bench/``)::

    python benchmarks/bench.py gpt2 --layers 2 --batch 4 --seq 256 --json gpt2.json
    python benchmarks/bench.py llama --budget 0.6 --report llama.html
"""

import sys

from jointgraph.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *(sys.argv[1:] or ["gpt2"])]))
