# bug: wrong_head_merge
# The heads' output (B, n_heads, T, head_dim) is joined with transpose(0, 1), which swaps the batch and head axes instead of heads and time, then reshaped to (B, T, dim).
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
        att = q @ k.transpose(-2, -1) / math.sqrt(hd)
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        att = att.masked_fill(~keep, float("-inf")).softmax(dim=-1)
        y = att @ v                                   # (B, H, T, hd)
        y = y.transpose(0, 1).reshape(B, T, C)        # should be transpose(1, 2)
        return self.proj(y)
