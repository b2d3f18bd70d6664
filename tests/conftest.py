import os

import pytest
import torch
import torch.distributed as dist

# The on-disk compile cache is off unless a test asks for it (tests/test_cache.py passes cache=DIR):
# a warm hit would skip the tracing and planning most tests exercise.
os.environ.setdefault("JOINTGRAPH_CACHE_DIR", "off")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def fresh_cache_reports(monkeypatch):
    """The disk cache logs each reason it bypasses once per process: this test sees its own first report."""
    import jointgraph.cache as jg_cache

    monkeypatch.setattr(jg_cache, "_REPORTED", set())


def assert_same_grads(expected: list, actual: list, *, atol=1e-5, rtol=1e-5):
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual, strict=True):
        if e is None:
            assert a is None
        else:
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol)


@pytest.fixture(scope="module")
def gloo_world(tmp_path_factory):
    """A one-rank gloo process group (collectives, FSDP2 state, DTensor), for the tests of one module."""
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("needs gloo")
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    store = tmp_path_factory.mktemp("store") / "file"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()
