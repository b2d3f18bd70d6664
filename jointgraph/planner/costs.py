"""The cost model: seconds per joint-graph node from FLOPs and bytes moved, on a roofline.

Note [Cost model]
-----------------
A node's time is ``max(flops / flops_per_s, bytes_moved / bytes_per_s) + launch_s``
(a roofline with a fixed per-kernel overhead). FLOPs come from
``torch.utils.flop_counter``'s per-op formulas, evaluated on the nodes' fake
tensors (no data is touched); ops it does not know count 0 FLOPs, i.e. they are
memory-bound. Bytes moved are the bytes of the tensor inputs read plus the
outputs written; view ops move nothing and launch nothing.

Offloading a saved value costs its bytes twice over the host link (device to host
in the forward, back in the backward); compressing it costs ``codec_s_per_byte``
per original byte (quantize + dequantize) and keeps ``bytes * ratio`` on the
device. All device constants live in one table, ``DEVICES``.

The graph compiler changes the estimate of pointwise ops (``torch.Tag.pointwise``).
Run eagerly, each is its own kernel and pays the roofline above. Under Inductor a
pointwise op fuses into the kernel that consumes it: its inputs are read and its
output written by that kernel, whose traffic is already counted, so what remains is
one arithmetic operation per output element (``numel / flops_per_s``), no launch.
This is what makes recomputing a pointwise chain in the backward nearly free under
Inductor (the budget planner reads it), while eagerly it costs a kernel per op.

Recomputing a value in the backward costs its real time where it does not fuse
(``recompute_seconds``): a matrix product runs as a library kernel under either compiler, and what
it feeds (attention's scale, mask and softmax) is materialized for the product that reads it:
eagerly a kernel per op; under Inductor one fused kernel that reads the product and writes the
result (the softmax statistics are saved). Each buffer a recomputation writes is fresh memory: on
a CPU the allocator hands large blocks back to the OS, so every step pays the page faults of
touching them again (``first_touch_bytes_per_s``; measured here: ``torch.exp`` of a 16 MiB tensor
took 4.3 ms into a fresh buffer and 2.1 ms into a reused one). GPU caching allocators keep their
blocks: no such cost.

A node's estimate depends only on its target, fake values and the compiler, so the budget
planner computes it once per joint-graph node (``annotate_seconds``) into
``meta["est_seconds"]`` (keyed by device and compiler); the graphs ``split`` builds copy
node meta, so every candidate plan's estimate is a sum of stored numbers.
"""

from __future__ import annotations

import dataclasses
import operator

import torch
import torch.fx
from torch.utils.flop_counter import flop_registry

from ..ir.graph_utils import is_pointwise, shares_storage, size_hint, tensor_bytes


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """Roofline constants of one device."""

    name: str
    flops_per_s: float        # dense fp32 (CPU) / bf16 tensor-core (GPU) matmul throughput
    bytes_per_s: float        # device memory bandwidth
    launch_s: float           # fixed overhead per kernel
    host_bytes_per_s: float   # device <-> host link, one direction (offload)
    codec_s_per_byte: float   # quantize + dequantize, per original byte
    first_touch_bytes_per_s: float = float("inf")   # page faults of a fresh buffer (Note [Cost model])


# One table of device presets.
# "cpu": this machine, measured once with 2 threads (torch 2.13): a 1024^3 fp32 matmul
#   ran at ~118 GFLOP/s; ``torch.add(x, 1, out=y)`` on 32 MiB moved ~28 GB/s (read + write).
#   Host "offload" on a CPU is a copy within the same memory (same bandwidth). A fresh 16 MiB
#   buffer cost 2.2 ms more than a reused one (one thread): ~7 GB/s of first touch.
# "h100": NVIDIA H100 SXM public specs: ~990 TFLOP/s dense bf16, 3.35 TB/s HBM3,
#   PCIe Gen5 x16 ~55 GB/s achievable per direction, ~5 us launch overhead.
DEVICES: dict[str, DeviceSpec] = {
    "cpu": DeviceSpec("cpu", flops_per_s=118e9, bytes_per_s=28e9, launch_s=5e-6,
                      host_bytes_per_s=28e9, codec_s_per_byte=2 / 28e9, first_touch_bytes_per_s=7e9),
    "h100": DeviceSpec("h100", flops_per_s=990e12, bytes_per_s=3.35e12, launch_s=5e-6,
                       host_bytes_per_s=55e9, codec_s_per_byte=2 / 3.35e12),
}

# Bytes kept on the device per original byte, per codec (fp32 source).
CODEC_RATIO: dict[str, float] = {"bf16": 0.5, "fp8": 0.25, "offload": 0.0}


def device_for(graph: torch.fx.Graph) -> DeviceSpec:
    """The preset matching the device of the graph's tensors (CUDA -> h100, else cpu)."""
    for node in graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            return DEVICES["h100"] if val.device.type == "cuda" else DEVICES["cpu"]
    return DEVICES["cpu"]


def node_flops(node: torch.fx.Node) -> int:
    """FLOPs of one call node from ``torch.utils.flop_counter``'s formulas (0 if unknown)."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return 0
    formula = flop_registry.get(target.overloadpacket)
    if formula is None:
        return 0
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
    try:
        return int(size_hint(formula(*args, **kwargs, out_val=node.meta.get("val"))))
    except Exception:  # a formula that cannot read these (symbolic) shapes: count it memory-bound
        return 0


def annotate_seconds(graph: torch.fx.Graph, device: DeviceSpec, compiler: str = "eager") -> None:
    """Store every node's estimate in its meta (Note [Cost model]); ``node_seconds`` reads it back."""
    for node in graph.nodes:
        node.meta["est_seconds"] = ((device, compiler), _node_seconds(node, device, compiler))


def node_seconds(node: torch.fx.Node, device: DeviceSpec, compiler: str = "eager") -> float:
    """Estimated run time of one call node run by ``compiler`` (Note [Cost model])."""
    if node.op != "call_function":   # a placeholder made from a forward node keeps its meta
        return 0.0
    stored = node.meta.get("est_seconds")
    if stored is not None and stored[0] == (device, compiler):   # equal constants, not just an equal name
        return stored[1]
    return _node_seconds(node, device, compiler)


def fuses_into_consumer(node: torch.fx.Node, compiler: str) -> bool:
    """A pointwise op that ``compiler`` fuses into the kernel consuming it (Note [Cost model])."""
    return compiler == "inductor" and is_pointwise(node)


def _node_seconds(node: torch.fx.Node, device: DeviceSpec, compiler: str = "eager") -> float:
    if node.op != "call_function" or node.target is operator.getitem:
        return 0.0
    target = node.target
    if shares_storage(target):
        return 0.0
    if fuses_into_consumer(node, compiler):
        return tensor_numel(node.meta.get("val")) / device.flops_per_s
    moved = sum(tensor_bytes(a.meta.get("val")) for a in node.all_input_nodes) + tensor_bytes(node.meta.get("val"))
    # jointgraph.hooks offload / reload: one crossing of the host link.
    if isinstance(target, torch._ops.OpOverload) and target._schema.name in _HOST_COPIES:
        return tensor_bytes(node.meta.get("val")) / device.host_bytes_per_s + device.launch_s
    return max(node_flops(node) / device.flops_per_s, moved / device.bytes_per_s) + device.launch_s


_HOST_COPIES = {"jointgraph::offload", "jointgraph::reload"}


def recompute_seconds(node: torch.fx.Node, chain: list[torch.fx.Node], device: DeviceSpec,
                      compiler: str = "eager") -> float:
    """Seconds the backward spends recomputing the product ``node`` and the ``chain`` of cheap ops
    after it (Note [Cost model]: what does not fuse costs its real time, fresh buffers included)."""
    out_bytes = tensor_bytes(node.meta.get("val"))
    product = max(node_flops(node) / device.flops_per_s,
                  (sum(tensor_bytes(a.meta.get("val")) for a in node.all_input_nodes) + out_bytes)
                  / device.bytes_per_s) + device.launch_s
    if compiler == "inductor":   # one fused kernel: read the product, write the chain's result
        written = [out_bytes] * (1 + bool(chain))
        rest = bool(chain) * (2 * out_bytes / device.bytes_per_s + device.launch_s)
    else:                        # a kernel and a buffer per op
        written = [out_bytes] + [tensor_bytes(n.meta.get("val")) for n in chain if not shares_storage(n.target)]
        rest = sum(_node_seconds(n, device, "eager") for n in chain)
    return product + rest + sum(written) / device.first_touch_bytes_per_s


def codec_seconds(codec: str, nbytes: int, device: DeviceSpec) -> float:
    """Extra step time of storing ``nbytes`` through ``codec`` (Note [Cost model])."""
    if codec == "offload":
        return 2 * nbytes / device.host_bytes_per_s
    return nbytes * device.codec_s_per_byte


def graph_seconds(graph: torch.fx.Graph, device: DeviceSpec | None = None, compiler: str = "eager") -> float:
    """Estimated time of running every call node of ``graph`` once, compiled by ``compiler``."""
    device = device or device_for(graph)
    return sum(node_seconds(n, device, compiler) for n in graph.nodes)


def tensor_numel(val) -> int:
    """Elements of a tensor value (size hints for symbolic sizes); 0 for anything else."""
    if not isinstance(val, torch.Tensor):
        return 0
    numel = 1
    for size in val.shape:
        numel *= size_hint(size)
    return numel
