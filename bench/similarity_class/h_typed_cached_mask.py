from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention.

    The causal mask is cached in a non-persistent buffer and rebuilt whenever a
    longer sequence (or another device) shows up, so there is no maximum length.
    """

    mask: Tensor

    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads: int = n_heads
        self.head_dim: int = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.ones(0, 0, dtype=torch.bool), persistent=False)

    def _causal(self, T: int, device: torch.device) -> Tensor:
        if self.mask.size(0) < T or self.mask.device != device:
            self.mask = torch.ones(T, T, dtype=torch.bool, device=device).tril()
        return self.mask[:T, :T]

    def forward(self, x: Tensor, key_padding_mask: Optional[Tensor] = None) -> Tensor:
        B, T, C = x.shape
        shape = (B, T, self.n_heads, self.head_dim)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in self.qkv(x).split(C, dim=-1))

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, T, T)
        keep = self._causal(T, x.device)[None, None]                              # (1, 1, T, T)
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]                      # (B, 1, T, T)
        weights = scores.masked_fill(~keep, -math.inf).softmax(dim=-1)
        return self.proj(torch.matmul(weights, v).transpose(1, 2).reshape(B, T, C))
