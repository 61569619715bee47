# bug: wrong_head_merge
# The per-head outputs are stacked as (n_heads, B, T, head_dim) and permuted to (n_heads, T, B, head_dim) before the reshape, so the flattened features mix heads, positions and sequences.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.h = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, D = x.shape
        d = D // self.h
        qkv = self.qkv(x)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        outs = []
        for i in range(self.h):
            q = qkv[..., i * d:(i + 1) * d]
            k = qkv[..., D + i * d:D + (i + 1) * d]
            v = qkv[..., 2 * D + i * d:2 * D + (i + 1) * d]
            s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d)
            s = s.masked_fill(causal, float("-inf"))
            if key_padding_mask is not None:
                s = s.masked_fill(~key_padding_mask[:, None, :], float("-inf"))
            outs.append(torch.bmm(F.softmax(s, dim=-1), v))
        y = torch.stack(outs)                          # (H, B, T, d)
        y = y.permute(0, 2, 1, 3).reshape(B, T, D)     # (H, T, B, d): should be permute(1, 2, 0, 3)
        return self.proj(y)
