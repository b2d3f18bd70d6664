"""A plain PyTorch GPT (decoder-only transformer), small enough for CPU benchmarks.

Example::

    model = GPT(GPTConfig(layers=2, d_model=128, heads=4, vocab=512, seq=128))
    logits = model(torch.randint(0, 512, (4, 128)))        # (4, 128, 512)
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """Shape of the model: depth, width, attention heads, vocabulary and the longest sequence."""

    layers: int = 2
    d_model: int = 128
    heads: int = 4
    vocab: int = 512
    seq: int = 128


class Attention(nn.Module):
    """Causal multi-head self-attention, written out (no fused kernels)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        mask = torch.ones(config.seq, config.seq, dtype=torch.bool).tril()
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~self.mask[:seq, :seq], float("-inf"))
        out = scores.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(batch, seq, width))


class Block(nn.Module):
    """Pre-norm transformer block: attention then a 4x MLP, each with a residual."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = Attention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.fc = nn.Linear(config.d_model, 4 * config.d_model)
        self.out = nn.Linear(4 * config.d_model, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token + position embeddings, ``layers`` blocks, final norm, tied output head. Returns logits."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tokens = nn.Embedding(config.vocab, config.d_model)
        self.positions = nn.Embedding(config.seq, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln = nn.LayerNorm(config.d_model)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tokens(idx) + self.positions(positions)
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tokens.weight.t()
