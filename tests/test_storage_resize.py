"""FSDP2-style storage resizes (Note [Storage resize]), eager PyTorch as the oracle."""

import pytest
import torch

import jointgraph

resize = torch.ops.inductor.resize_storage_bytes_


def _freed(n=4):
    t = torch.randn(n)
    t.untyped_storage().resize_(0)
    return t


def _refill(t, value):
    """What FSDP does before the backward: re-allocate and fill, keeping the version counter."""
    t.untyped_storage().resize_(value.numel() * value.element_size())
    with torch.autograd._unsafe_preserve_version_counter(t):
        t.copy_(value)


def resized_down(x, p):
    out = (x * p).sum()
    resize(p, 0)
    return out


def resized_up_and_filled(x, p, full):
    resize(p, full.numel() * full.element_size())
    p.copy_(full)
    return (x * p).sum()


def resized_up_used_and_down(x, p, full):
    resize(p, full.numel() * full.element_size())
    p.copy_(full)
    out = (x * p).sum()
    resize(p, 0)
    return out


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_input_resized_down_to_zero(partitioner):
    x, p = torch.randn(4, requires_grad=True), torch.randn(4)
    value = p.clone()
    out = jointgraph.aot_function(resized_down, partitioner=partitioner)(x, p)
    assert p.untyped_storage().nbytes() == 0
    _refill(p, value)
    out.backward()
    torch.testing.assert_close(out, (x * value).sum())
    torch.testing.assert_close(x.grad, value)


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_zero_storage_input_resized_up_and_filled(partitioner):
    x, p, full = torch.randn(4, requires_grad=True), _freed(), torch.randn(4)
    out = jointgraph.aot_function(resized_up_and_filled, partitioner=partitioner)(x, p, full)
    assert p.untyped_storage().nbytes() == 16
    torch.testing.assert_close(p, full)
    out.backward()
    torch.testing.assert_close(x.grad, full)


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_resized_up_used_and_back_down_is_no_net_mutation(partitioner):
    # PyTorch 2.13's torch.compile(backend="aot_eager") crashes the process on this pattern on CPU.
    x, p, full = torch.randn(4, requires_grad=True), _freed(), torch.randn(4)
    compiled = jointgraph.aot_function(resized_up_used_and_down, partitioner=partitioner)
    out = compiled(x, p, full)
    assert p.untyped_storage().nbytes() == 0
    torch.testing.assert_close(out, (x * full).sum())
    _refill(p, full)
    out.backward()
    torch.testing.assert_close(x.grad, full)
    plan = jointgraph.plan(resized_up_used_and_down, x, _freed(), full, partitioner=partitioner)
    targets = {str(n.target) for gm in (plan.forward, plan.backward) for n in gm.graph.nodes}
    assert not any("resize_storage_bytes_" in t for t in targets)


def test_partial_resize_is_refused():
    def fn(x, p):
        resize(p, 8)
        return x * 2

    with pytest.raises(jointgraph.UnsupportedError, match="only 0"):
        jointgraph.aot_function(fn)(torch.randn(4, requires_grad=True), torch.randn(4))


def test_storage_resize_through_torch_compile():
    torch._dynamo.reset()

    def fn(x, p, full):
        p.untyped_storage().resize_(full.numel() * full.element_size())
        with torch.no_grad():
            p.copy_(full)
        out = (x * p).sum()
        p.untyped_storage().resize_(0)
        return out

    x, p, full = torch.randn(4, requires_grad=True), _freed(), torch.randn(4)
    out = torch.compile(fn, backend="jointgraph", fullgraph=True)(x, p, full)
    assert p.untyped_storage().nbytes() == 0
    torch.testing.assert_close(out, (x * full).sum())
    _refill(p, full)
    out.backward()
    torch.testing.assert_close(x.grad, full)
