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
    with torch.no_grad(), torch.autograd._unsafe_preserve_version_counter(t):
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


# --- FSDP2's own patterns (issue 18): fsdp.copy_, parameters that require grad, compiled autograd ---

import torch.distributed.fsdp  # noqa: E402  registers torch.ops.fsdp.copy_

NBYTES = 4 * 4


def unshard_with_fsdp_copy(x, p, full):
    """FSDP2's all-gather copy-out: re-allocate the freed parameter and fill it with fsdp.copy_."""
    resize(p, full.numel() * full.element_size())
    with torch.no_grad():
        torch.ops.fsdp.copy_(p, full)
    return (x * p).sum()


def unshard_use_reshard_with_fsdp_copy(x, p, full):
    resize(p, full.numel() * full.element_size())
    with torch.no_grad():
        torch.ops.fsdp.copy_(p, full)
    out = (x * p).sum()
    resize(p, 0)
    return out


def unshard_with_copy(x, p, full):
    resize(p, full.numel() * full.element_size())
    with torch.no_grad():
        p.copy_(full)
    return (x * p).sum()


def unshard_use_reshard_with_copy(x, p, full):
    resize(p, full.numel() * full.element_size())
    with torch.no_grad():
        p.copy_(full)
    out = (x * p).sum()
    resize(p, 0)
    return out


def _fsdp_inputs(requires_grad):
    x, full = torch.randn(4, requires_grad=True), torch.randn(4)
    p = _freed()
    p.requires_grad_(requires_grad)
    return x, p, full


def _clone_inputs(x, p, full):
    x2 = x.detach().clone().requires_grad_(x.requires_grad)
    p2 = _freed()
    p2.requires_grad_(p.requires_grad)
    return x2, p2, full.clone()


def _compile(fn, how):
    if how == "aot_function":
        return jointgraph.aot_function(fn)
    torch._dynamo.reset()
    return torch.compile(fn, backend="jointgraph", fullgraph=True)


@pytest.mark.parametrize("how", ["aot_function", "torch.compile"])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("fn", [unshard_with_fsdp_copy, unshard_use_reshard_with_fsdp_copy, unshard_with_copy,
                                unshard_use_reshard_with_copy], ids=lambda f: f.__name__)
def test_fsdp_unshard_patterns_match_eager(fn, requires_grad, how):
    x, p, full = _fsdp_inputs(requires_grad)
    ex, ep, efull = _clone_inputs(x, p, full)
    expected = fn(ex, ep, efull)
    out = _compile(fn, how)(x, p, full)
    torch.testing.assert_close(out, expected)
    assert p.untyped_storage().nbytes() == ep.untyped_storage().nbytes()
    if p.untyped_storage().nbytes():
        torch.testing.assert_close(p.detach(), ep.detach())
    for t, e in ((p, ep), (x, ex)):   # FSDP refills a freed parameter before the backward uses it
        if t.untyped_storage().nbytes() == 0:
            _refill(t, full)
            _refill(e, full)
    expected.backward()
    out.backward()
    torch.testing.assert_close(x.grad, ex.grad)
    if requires_grad:
        torch.testing.assert_close(p.grad, ep.grad)
    else:
        assert p.grad is None


def test_fsdp_copy_into_freed_parameter_never_writes_a_zero_byte_storage():
    # The forward graph holds no in-place write into the parameter: fsdp.copy_ became a functional copy.
    x, p, full = _fsdp_inputs(False)
    plan = jointgraph.plan(unshard_with_fsdp_copy, x, p, full)
    targets = [n.target for gm in (plan.forward, plan.backward) for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.fsdp.copy_.default not in targets
    assert torch.ops.aten.copy.default in targets


_lib = torch.library.Library("jgtest_resize", "DEF")
_lib.define("raw_copy_(Tensor(a!) tensor, Tensor data) -> ()")


@torch.library.impl(_lib, "raw_copy_", "CompositeExplicitAutograd")
def _raw_copy(tensor, data):
    tensor.copy_(data)


@torch.library.impl(_lib, "raw_copy_", "Functionalize")
def _raw_copy_functionalize(tensor, data):
    # Like fsdp.copy_: writes the wrapped tensor in place, functionalization records nothing.
    torch._sync(tensor)
    torch._sync(data)
    inner, value = torch._from_functional_tensor(tensor), torch._from_functional_tensor(data)
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)):
        torch.ops.jgtest_resize.raw_copy_.default(inner, value)


def test_unfunctionalized_write_into_a_resized_input_is_refused():
    def fn(x, p, full):
        resize(p, full.numel() * full.element_size())
        with torch.no_grad():
            torch.ops.jgtest_resize.raw_copy_(p, full)
        return (x * p).sum()

    x, p, full = _fsdp_inputs(False)
    with pytest.raises(jointgraph.UnsupportedError, match="raw_copy_"):
        jointgraph.aot_function(fn)(x, p, full)
    assert p.untyped_storage().nbytes() == 0   # nothing ran


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def test_compiled_autograd_backward_graph_with_boxed_inputs():
    import copy

    model, x = _mlp(), torch.randn(4, 8)
    reference = copy.deepcopy(model)
    seen = []
    inner = jointgraph.backend()

    def recording(gm, example_inputs):
        seen.append([type(e) for e in example_inputs])
        return inner(gm, example_inputs)

    def forward_backward(m):
        loss = m(x).pow(2).sum()
        loss.backward()
        return loss

    def train(run, m):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        losses = []
        for _ in range(3):
            losses.append(run(m))
            opt.step()
            opt.zero_grad()
        return losses

    torch._dynamo.reset()
    try:
        torch._dynamo.config.compiled_autograd = True
        losses = train(torch.compile(forward_backward, backend=recording), model)
    finally:
        torch._dynamo.config.compiled_autograd = False
        torch._dynamo.reset()
    expected = train(forward_backward, reference)
    assert any(list in types for types in seen), "no boxed backward graph reached the backend"
    torch.testing.assert_close(torch.stack(losses), torch.stack(expected))
    for p, e in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, e)


def test_random_programs_with_fsdp_storage_cycles_match_eager():
    from jointgraph.bench import fuzz

    default = fuzz.contenders()["default"]
    programs = [p for p in (fuzz.generate(s, fuzz.STORAGE_WRITERS) for s in range(120))
                if "resize_storage_bytes_" in p.source][:12]
    assert len(programs) == 12
    outcomes = {p.seed: fuzz.check(p, default) for p in programs}
    bad = {seed: (o.status, o.message) for seed, o in outcomes.items() if o.status in ("wrong", "crash")}
    assert not bad, bad
    assert sum(o.status == "pass" for o in outcomes.values()) >= 6


@pytest.mark.parametrize("partitioner", ["default", "mincut"])
def test_fsdp_copy_into_a_saved_input_makes_the_backward_raise_as_eager(partitioner):
    """fuzz STORAGE_WRITERS seed 60: eager's fsdp.copy_ moves its target's version, so a value an op saved before
    it makes the backward raise; the trace moved none and its backward read the copied value."""
    def f(b):
        t0 = b.cos()
        with torch.no_grad():
            torch.ops.fsdp.copy_(b, t0.detach())
        return b + t0

    for fn in (f, jointgraph.aot_function(f, partitioner=partitioner)):
        b = torch.randn(2).requires_grad_()
        out = fn(b)
        assert b._version == 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


### Tensor.resize_ (issue 17: an internal RuntimeError before)

def _grow_input(x, w):
    x.resize_(32)
    return (x[:24].view(3, 8) @ w).sum()


def _grow_made_inside(x, w):
    y = x * 2
    y.resize_(32)
    y[24:] = 1.0
    return (y.view(4, 8) @ w).sum()


def _grow_input_as(x, w):
    x.resize_as_(torch.empty(32))
    return (x[:24].view(3, 8) @ w).sum()


def _grow_made_inside_as(x, w):
    y = x * 2
    y.resize_as_(torch.empty(32))
    y[24:] = 1.0
    return (y.view(4, 8) @ w).sum()


def _same_elements(x, w):
    x.resize_(4, 6)
    return (x.view(3, 8) @ w).sum()


def _same_elements_as(x, w):
    x.resize_as_(torch.empty(4, 6))
    return (x.view(3, 8) @ w).sum()


def _shrink(x, w):
    x.resize_(16)
    return (x.view(2, 8) @ w).sum()


@pytest.mark.parametrize("fn, op", [(_grow_input, "resize_"), (_grow_made_inside, "resize_"),
                                    (_grow_input_as, "resize_as_"), (_grow_made_inside_as, "resize_as_")])
def test_resize_that_grows_a_storage_is_refused_by_name(fn, op):
    x, w = torch.randn(3, 8), torch.randn(8, 8, requires_grad=True)
    with pytest.raises(jointgraph.UnsupportedError, match=rf"^{op}\(\) to \(32,\) grows the storage") as info:
        jointgraph.aot_function(fn)(x.clone(), w)
    assert "test_storage_resize.py" in str(info.value) and "on_unsupported" in str(info.value)
    # the way out it names works, and gives eager's result
    expected_x = x.clone()
    expected = fn(expected_x, w)
    actual_x = x.clone()
    with pytest.warns(UserWarning):
        actual = jointgraph.aot_function(fn, on_unsupported="eager")(actual_x, w)
    if fn in (_grow_made_inside, _grow_made_inside_as):   # deterministic: new elements written before read
        torch.testing.assert_close(actual, expected)
    assert actual_x.shape == expected_x.shape == ((32,) if fn in (_grow_input, _grow_input_as) else (3, 8))


@pytest.mark.parametrize("fn", [_same_elements, _same_elements_as, _shrink])
def test_resize_within_the_storage_compiles_like_eager(fn):
    x, w = torch.randn(3, 8), torch.randn(8, 8, requires_grad=True)
    expected_x, actual_x = x.clone(), x.clone()
    expected = fn(expected_x, w)
    (expected_grad,) = torch.autograd.grad(expected, w)
    actual = jointgraph.aot_function(fn)(actual_x, w)
    (actual_grad,) = torch.autograd.grad(actual, w)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual_grad, expected_grad)
    assert actual_x.shape == expected_x.shape and actual_x.stride() == expected_x.stride()
    torch.testing.assert_close(actual_x, expected_x)


def _channels_last(x, w):
    x.resize_(1, 2, 3, 4, memory_format=torch.channels_last)
    return (x.reshape(3, 8) @ w).sum()


def _channels_last_as(x, w):
    x.resize_as_(torch.empty(1, 2, 3, 4).to(memory_format=torch.channels_last), memory_format=torch.preserve_format)
    return (x.reshape(3, 8) @ w).sum()


@pytest.mark.parametrize("fn, op", [(_channels_last, "resize_"), (_channels_last_as, "resize_as_")])
def test_resize_to_channels_last_is_refused_by_name(fn, op):
    # functionalization keeps the channels-last strides on the wrapper only: compiled, it was silently wrong
    x, w = torch.randn(3, 8), torch.randn(8, 8, requires_grad=True)
    with pytest.raises(jointgraph.UnsupportedError, match=rf"^{op}\(\) with memory_format=torch.channels_last"):
        jointgraph.aot_function(fn)(x.clone(), w)
    expected_x, actual_x = x.clone(), x.clone()
    expected = fn(expected_x, w)
    with pytest.warns(UserWarning):
        actual = jointgraph.aot_function(fn, on_unsupported="eager")(actual_x, w)
    torch.testing.assert_close(actual, expected)
    assert actual_x.stride() == expected_x.stride() == (24, 1, 8, 2)
