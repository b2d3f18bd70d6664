"""The model zoo of ``jointgraph bench``: small models with random weights, built from configs (no downloads).

Every entry builds a :class:`Workload`: a ``TrainStep`` module whose forward returns the scalar loss,
and the example inputs it is called with. One training step is ``step(*inputs).backward()``.

Example::

    work = build_workload("gpt", ZooShape(layers=2, width=128, batch=4, seq=128))
    work.step(*work.inputs).backward()
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 1024


@dataclasses.dataclass(frozen=True)
class ZooShape:
    """How big to build a zoo model: depth, width, batch and sequence length (images: side)."""

    layers: int = 2
    width: int = 128
    batch: int = 4
    seq: int = 128
    dtype: torch.dtype = torch.float32
    device: str = "cpu"


@dataclasses.dataclass
class Workload:
    """A training step to benchmark: ``step(*inputs)`` is the loss."""

    name: str
    description: str
    step: nn.Module
    inputs: tuple

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.step.parameters())


class TrainStep(nn.Module):
    """``loss_fn(model, *inputs)`` as a module, so every contender compiles forward + loss together."""

    def __init__(self, model: nn.Module, loss_fn: Callable[..., torch.Tensor]):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, *inputs: Any) -> torch.Tensor:
        return self.loss_fn(self.model, *inputs)


### Loss functions

def lm_loss(model: nn.Module, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the model's last dimension against ``targets`` (tokens or classes)."""
    logits = model(idx)
    return F.cross_entropy(logits.flatten(0, -2).float(), targets.flatten())


def hf_loss(model: nn.Module, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return model(input_ids=input_ids, labels=labels).loss


def classifier_loss(model: nn.Module, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x).float(), labels)


def default_loss(output: Any) -> torch.Tensor:
    """The loss of a user model without its own: ``.loss`` when the output has one, else mean of squares."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(output, (tuple, list)):
        output = output[0]
    if hasattr(output, "logits"):
        output = output.logits
    return output.float().square().mean()


### Builders

def _tokens(shape: ZooShape) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (shape.batch, shape.seq), device=shape.device)
    return ids, ids.roll(-1, dims=1)


def _gpt(shape: ZooShape) -> tuple[nn.Module, tuple, Callable]:
    from .gpt import GPT, GPTConfig

    config = GPTConfig(layers=shape.layers, d_model=shape.width, heads=max(1, shape.width // 32), vocab=VOCAB,
                       seq=shape.seq)
    return GPT(config), _tokens(shape), lm_loss


def _hf(shape: ZooShape, kind: str) -> tuple[nn.Module, tuple, Callable]:
    import transformers

    heads = max(1, shape.width // 32)
    common = {"vocab_size": VOCAB, "attn_implementation": "eager"}
    if kind == "gpt2":
        config = transformers.GPT2Config(n_layer=shape.layers, n_embd=shape.width, n_head=heads,
                                         n_positions=shape.seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                         bos_token_id=0, eos_token_id=0, **common)
        model = transformers.GPT2LMHeadModel(config)
        model.loss_type = "ForCausalLM"  # its class name does not say which loss; without this, a warning
    elif kind == "llama":
        config = transformers.LlamaConfig(num_hidden_layers=shape.layers, hidden_size=shape.width,
                                          intermediate_size=4 * shape.width, num_attention_heads=heads,
                                          num_key_value_heads=heads, max_position_embeddings=shape.seq,
                                          bos_token_id=0, eos_token_id=0, pad_token_id=0, loss_type="ForCausalLM",
                                          **common)
        model = transformers.LlamaForCausalLM(config)
    else:
        config = transformers.BertConfig(num_hidden_layers=shape.layers, hidden_size=shape.width,
                                         intermediate_size=4 * shape.width, num_attention_heads=heads,
                                         max_position_embeddings=shape.seq, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0, pad_token_id=0, loss_type="ForMaskedLM",
                                         **common)
        model = transformers.BertForMaskedLM(config)
    ids = torch.randint(1, VOCAB, (shape.batch, shape.seq), device=shape.device)
    return model, (ids, ids.clone()), hf_loss


def _mlp(shape: ZooShape) -> tuple[nn.Module, tuple, Callable]:
    hidden = 4 * shape.width
    layers: list[nn.Module] = [nn.Linear(shape.width, hidden), nn.GELU()]
    for _ in range(shape.layers - 1):
        layers += [nn.Linear(hidden, hidden), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(hidden, 10))
    rows = shape.batch * shape.seq
    x = torch.randn(rows, shape.width, device=shape.device)
    return model, (x, torch.randint(0, 10, (rows,), device=shape.device)), classifier_loss


def _convnet(shape: ZooShape) -> tuple[nn.Module, tuple, Callable]:
    channels, blocks = 3, []
    for i in range(shape.layers):
        width = shape.width // 4 * 2 ** min(i, 3)
        blocks += [nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2)]
        channels = width
    model = nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))
    side = max(8, min(shape.seq, 64))
    x = torch.randn(shape.batch, 3, side, side, device=shape.device)
    return model, (x, torch.randint(0, 10, (shape.batch,), device=shape.device)), classifier_loss


@dataclasses.dataclass(frozen=True)
class ZooEntry:
    build: Callable[[ZooShape], tuple[nn.Module, tuple, Callable]]
    description: str


ZOO: dict[str, ZooEntry] = {
    "gpt": ZooEntry(_gpt, "plain PyTorch GPT (jointgraph.bench.gpt), tied head, cross-entropy"),
    "gpt2": ZooEntry(lambda s: _hf(s, "gpt2"), "transformers GPT2LMHeadModel, random weights, eager attention"),
    "llama": ZooEntry(lambda s: _hf(s, "llama"), "transformers LlamaForCausalLM, random weights, eager attention"),
    "bert": ZooEntry(lambda s: _hf(s, "bert"), "transformers BertForMaskedLM, random weights, eager attention"),
    "mlp": ZooEntry(_mlp, "GELU MLP classifier on (batch*seq, width) rows"),
    "convnet": ZooEntry(_convnet, "conv-BatchNorm-ReLU-pool blocks on (batch, 3, seq, seq) images (seq <= 64)"),
}


class ModelSpecError(ValueError):
    """The MODEL argument names nothing we can build."""


def build_workload(name: str, shape: ZooShape, *, seed: int = 0) -> Workload:
    """Build a zoo model or the user's ``module:function`` on ``shape.device`` in ``shape.dtype``."""
    torch.manual_seed(seed)
    if ":" in name:
        model, inputs, loss_fn, description = _user_model(name)
        step = TrainStep(model, lambda m, *args: loss_fn(m(*args)))
    elif name in ZOO:
        model, inputs, loss_fn = ZOO[name].build(shape)
        step, description = TrainStep(model, loss_fn), ZOO[name].description
    else:
        raise ModelSpecError(f"unknown model {name!r}; choose one of {', '.join(ZOO)}, "
                             "or module:function returning (model, example_inputs[, loss_fn])")
    step = step.to(device=shape.device).train()
    if shape.dtype != torch.float32:
        step = step.to(dtype=shape.dtype)
    inputs = tuple(_cast(x, shape) for x in inputs)
    return Workload(name, description, step, inputs)


def _cast(x: Any, shape: ZooShape) -> Any:
    if isinstance(x, torch.Tensor):
        x = x.to(shape.device)
        return x.to(shape.dtype) if x.is_floating_point() else x
    return x


def _user_model(spec: str) -> tuple[nn.Module, tuple, Callable, str]:
    module_name, _, attr = spec.partition(":")
    if "" not in sys.path:
        sys.path.insert(0, "")  # `module:function` resolves against the working directory, like python -m
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelSpecError(f"cannot import {module_name!r} for model {spec!r}: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ModelSpecError(f"{module_name!r} has no callable {attr!r} (model {spec!r})")
    result = factory()
    if not isinstance(result, tuple) or len(result) not in (2, 3) or not isinstance(result[0], nn.Module):
        raise ModelSpecError(f"{spec} must return (model, example_inputs) or (model, example_inputs, loss_fn); "
                             f"got {type(result).__name__}")
    model, inputs = result[0], result[1]
    loss_fn = result[2] if len(result) == 3 else default_loss
    inputs = inputs if isinstance(inputs, tuple) else tuple(inputs) if isinstance(inputs, list) else (inputs,)
    return model, inputs, loss_fn, f"{spec} (user model)"
