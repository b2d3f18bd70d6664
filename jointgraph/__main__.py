"""``python -m jointgraph``: the ``jointgraph`` command (see jointgraph/cli.py)."""

import sys

from .cli import main

sys.exit(main())
