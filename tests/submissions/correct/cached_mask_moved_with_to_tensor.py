import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    """A future mask kept between calls as an additive float mask, and moved to the scores'
    device and dtype with .to(tensor) (fairseq's way): device-safe."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self._future_mask = torch.empty(0)

    def buffered_future_mask(self, scores):
        T = scores.size(-1)
        if self._future_mask.size(0) < T:
            self._future_mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        self._future_mask = self._future_mask.to(scores)
        return self._future_mask[:T, :T]

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.reshape(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        scores = scores + self.buffered_future_mask(scores)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        weights = scores.softmax(dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
