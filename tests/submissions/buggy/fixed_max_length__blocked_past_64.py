# bug: fixed_max_length
# The mask comes from a 64x64 buffer copied into a blocked T x T mask, with the diagonal opened so no row is empty: past 64 a position sees only itself.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("tri", torch.tril(torch.ones(64, 64, dtype=torch.bool)))

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(hd)
        n = min(T, 64)
        allowed = torch.zeros(T, T, dtype=torch.bool, device=x.device)
        allowed[:n, :n] = self.tri[:n, :n]
        allowed = allowed | torch.eye(T, dtype=torch.bool, device=x.device)
        s = s.masked_fill(~allowed, float("-inf"))
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
