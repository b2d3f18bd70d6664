import os

import pytest
import torch

# The on-disk compile cache is off unless a test asks for it (tests/test_cache.py passes cache=DIR):
# a warm hit would skip the tracing and planning most tests exercise.
os.environ.setdefault("JOINTGRAPH_CACHE_DIR", "off")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


def assert_same_grads(expected: list, actual: list, *, atol=1e-5, rtol=1e-5):
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual, strict=True):
        if e is None:
            assert a is None
        else:
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol)
