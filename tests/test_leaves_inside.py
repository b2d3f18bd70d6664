"""Leaves created inside the compiled function (Note [New leaves] in capture/leaves.py): factories with
requires_grad=True, nn.Parameter(...), requires_grad_() and ``requires_grad = True`` on intermediates.
Eager is the oracle: values, is_leaf, requires_grad, grad_fn, .grad of returned leaves, input grads;
through aot_function and torch.compile, with every partitioner."""

import shutil

import pytest
import torch

import jointgraph

HOW = ["aot_function", "torch.compile"]
PARTITIONERS = {"default": {}, "mincut": {"partitioner": "mincut"},
                "budget": {"partitioner": "budget", "memory_budget": 0.5}}


def compile_with(how: str, fn, **options):
    if how == "aot_function":
        return jointgraph.aot_function(fn, **options)
    torch._dynamo.reset()
    return torch.compile(fn, backend=jointgraph.backend(**options) if options else "jointgraph")


def factory_leaf(x):
    w = torch.ones(3, requires_grad=True)
    return x * w


def factory_leaf_returned(x):
    w = torch.full((3,), 2.0, requires_grad=True)
    return w, (x * w).sin()


def leaf_not_returned(x):
    w = torch.linspace(0.5, 1.5, 3, requires_grad=True)
    y = x.cos() * w
    return y.sum(), y * 3


def detach_requires_grad(x):
    v = x.detach().requires_grad_()
    return v, v * 2


def detach_transposed(x):
    v = x.detach().requires_grad_()
    return v.t(), v * 2


def view_requires_grad(x):
    return x.view(-1).requires_grad_(True)


def view_of_intermediate_requires_grad(x):
    a = x * 2
    return a.view(-1).requires_grad_(True)


def requires_grad_attribute(x):
    w = x.detach() * 2
    w.requires_grad = True
    return x * w, w


def requires_grad_of_intermediate(x):
    t = x.detach().exp()
    t.requires_grad_()
    return t, (t * x).sum()


def parameter_inside(x):
    w = torch.nn.Parameter(x.detach() * 2)
    return x * w, w


def leaf_written_under_no_grad(x):
    w = torch.zeros(3, requires_grad=True)
    with torch.no_grad():
        w.add_(x)
    return w * x, w


def two_leaves(x):
    a = torch.ones(3, requires_grad=True)
    b = (x.detach() + 1).requires_grad_()
    return a * b * x, b, a.t()


SQUARE = {"detach_transposed"}   # forms that take a 2-D input
FORMS = [factory_leaf, factory_leaf_returned, leaf_not_returned, detach_requires_grad, detach_transposed,
         view_requires_grad, view_of_intermediate_requires_grad, requires_grad_attribute,
         requires_grad_of_intermediate, parameter_inside, leaf_written_under_no_grad, two_leaves]


def _outs(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


def _observe(fn, x: torch.Tensor) -> dict:
    """Everything eager shows about the outputs, before and after a backward through all of them."""
    outs = _outs(fn(x))
    seen = {"values": [o.detach().clone() for o in outs],
            "types": [type(o) for o in outs],
            "state": [(o.is_leaf, o.requires_grad, o.grad_fn is None) for o in outs]}
    differentiable = [(k + 1) * o.sum() for k, o in enumerate(outs) if o.requires_grad]
    if differentiable:
        sum(differentiable).backward()
    seen["grads"] = [o.grad.clone() if o.is_leaf and o.grad is not None else None for o in outs]
    seen["input_grad"] = x.grad
    return seen


def _assert_same(actual: dict, expected: dict) -> None:
    assert actual["types"] == expected["types"]
    assert actual["state"] == expected["state"]
    for a, e in zip(actual["values"], expected["values"], strict=True):
        torch.testing.assert_close(a, e)
    for a, e in zip((*actual["grads"], actual["input_grad"]), (*expected["grads"], expected["input_grad"]),
                    strict=True):
        assert (a is None) == (e is None), (a, e)
        if e is not None:
            torch.testing.assert_close(a, e)


def _input(name: str, requires_grad: bool) -> torch.Tensor:
    torch.manual_seed(0)
    shape = (3, 3) if name in SQUARE else (3,)
    return torch.randn(*shape).requires_grad_(requires_grad)


@pytest.mark.parametrize("partitioner", list(PARTITIONERS))
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("requires_grad", [False, True], ids=["plain_input", "input_requires_grad"])
@pytest.mark.parametrize("fn", FORMS, ids=lambda f: f.__name__)
def test_leaf_made_inside_matches_eager(fn, requires_grad, how, partitioner):
    compiled = compile_with(how, fn, **PARTITIONERS[partitioner])
    expected = _observe(fn, _input(fn.__name__, requires_grad))
    for _ in range(2):   # a second call runs the same entry and makes new leaves
        _assert_same(_observe(compiled, _input(fn.__name__, requires_grad)), expected)


@pytest.mark.parametrize("how", HOW)
def test_returned_leaf_is_the_object_gradients_accumulate_into(how):
    compiled = compile_with(how, detach_requires_grad)
    x = torch.randn(3)
    o0, o1 = compiled(x)
    assert o0.is_leaf and o0.requires_grad and o0.grad_fn is None
    assert o0.data_ptr() == x.data_ptr()   # x.detach() shares x's storage, as in eager
    o1.sum().backward()
    torch.testing.assert_close(o0.grad, torch.full((3,), 2.0))
    again, _ = compiled(x)
    assert again is not o0 and again.grad is None   # a new leaf at every call
    with torch.no_grad():
        x.add_(1)   # the caller's tensor and the returned leaf share storage
    torch.testing.assert_close(o0, x)


@pytest.mark.parametrize("how", HOW)
def test_view_of_detached_leaf_sends_no_gradient_into_the_input(how):
    compiled = compile_with(how, detach_transposed)
    x = torch.randn(3, 3, requires_grad=True)
    vt, doubled = compiled(x)
    assert vt.requires_grad and vt.grad_fn is not None and not vt.is_leaf
    (vt.sum() + doubled.sum()).backward()
    assert x.grad is None


@pytest.mark.parametrize("how", HOW)
def test_leaf_made_inside_makes_outputs_require_grad_without_inputs_that_do(how):
    compiled = compile_with(how, factory_leaf)
    out = compiled(torch.randn(3))
    assert out.requires_grad and out.grad_fn is not None
    out.sum().backward()   # w's gradient is not reachable by the caller, but the backward runs


def test_leaf_made_inside_under_no_grad_matches_eager():
    compiled = jointgraph.aot_function(factory_leaf_returned)
    with torch.no_grad():
        expected = factory_leaf_returned(torch.ones(3))
        actual = compiled(torch.ones(3))
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)
        assert (a.is_leaf, a.requires_grad) == (e.is_leaf, e.requires_grad)


def test_alias_leaf_with_symbolic_sizes_compiles():
    compiled = jointgraph.aot_function(detach_requires_grad, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n)
        v, doubled = compiled(x)
        doubled.sum().backward()
        assert v.is_leaf and v.data_ptr() == x.data_ptr()
        torch.testing.assert_close(v.grad, torch.full((n,), 2.0))


def _leaf_sized_by_input(x):
    w = torch.ones(x.shape[0], requires_grad=True)
    return x * w


def _leaf_sharing_storage_with_an_output(x):
    a = x * 2
    return a, a.view(-1).requires_grad_()


def _leaf_no_longer_requiring_grad(x):
    w = torch.ones(4, requires_grad=True)
    y = x * w
    w.requires_grad_(False)
    return y, w


@pytest.mark.parametrize(("fn", "options", "message"), [
    (_leaf_sized_by_input, {"dynamic": True}, "symbolic sizes"),
    (_leaf_sharing_storage_with_an_output, {}, "shares its storage with another output"),
    (_leaf_no_longer_requiring_grad, {}, r"requires_grad_\(False\)"),
], ids=["symbolic-sizes", "storage-shared-with-an-output", "requires-grad-unset"])
def test_leaves_that_cannot_be_compiled_are_refused_by_name(fn, options, message):
    compiled = jointgraph.aot_function(fn, **options)
    with pytest.raises(jointgraph.UnsupportedError, match=message) as refused:
        compiled(torch.randn(4))
    assert "test_leaves_inside.py" in str(refused.value)   # the user's source line


@pytest.mark.parametrize("fn", [detach_transposed, factory_leaf_returned, parameter_inside], ids=lambda f: f.__name__)
def test_leaves_made_inside_load_from_the_cache(fn, tmp_path):
    expected = _observe(fn, _input(fn.__name__, True))
    for _ in range(2):   # compiled and stored, then loaded by a new compiled function
        _assert_same(_observe(jointgraph.aot_function(fn, cache=str(tmp_path)), _input(fn.__name__, True)), expected)
    assert "hit" in (tmp_path / "events.log").read_text()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="Inductor's CPU backend needs a C++ compiler")
def test_leaves_made_inside_under_inductor():
    """The slots are example inputs of Inductor's compile too."""
    compiled = jointgraph.aot_function(two_leaves, fw_compiler="inductor", bw_compiler="inductor")
    _assert_same(_observe(compiled, _input("two_leaves", True)), _observe(two_leaves, _input("two_leaves", True)))


def test_input_set_onto_a_leaf_made_inside_is_refused_not_detached_from_it():
    """Fuzz seed 401603: ``b.set_(t0); t0.requires_grad_()``: eager's returned leaf shares ``b``'s (new)
    storage; the leaf was taken for a view of the input ``b`` and came back sharing nothing."""
    def f(b):
        t0 = b.tanh()
        b.set_(t0)
        t0.requires_grad_()
        return t0

    x = torch.randn(3)
    out = f(x)
    assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() and out.is_leaf
    with pytest.raises(jointgraph.UnsupportedError, match="storage of a leaf created inside"):
        jointgraph.aot_function(f)(torch.randn(3))
