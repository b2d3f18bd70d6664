import pytest
import torch


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
