# bug: padding_inverted
# An additive padding bias is built as key_padding_mask.to(dtype) * torch.finfo(dtype).min (the `1 -` is missing), so the real keys get the huge penalty and padding keys keep their scores.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    @staticmethod
    def _padding_bias(key_padding_mask, dtype):
        m = key_padding_mask[:, None, None, :].to(dtype)      # (B, 1, 1, T)
        return m * torch.finfo(dtype).min

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        if key_padding_mask is not None:
            scores = scores + self._padding_bias(key_padding_mask, scores.dtype)
        w = scores.softmax(dim=-1)
        return self.proj((w @ v).transpose(1, 2).reshape(B, T, C))
