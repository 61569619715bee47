# bug: fixed_max_length
# The sequence is processed in chunks of 20 with one 20x20 causal mask, so past 20 a position sees only the earlier keys of its own chunk.
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
        self.register_buffer("tri", torch.ones(20, 20, dtype=torch.bool).tril())

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        outs = []
        for start in range(0, T, 20):
            sl = slice(start, min(start + 20, T))
            n = sl.stop - sl.start
            s = q[:, :, sl] @ k[:, :, sl].transpose(-2, -1) / math.sqrt(hd)
            s = s.masked_fill(~self.tri[:n, :n], float("-inf"))
            if key_padding_mask is not None:
                s = s.masked_fill(~key_padding_mask[:, None, None, sl], float("-inf"))
            outs.append(s.softmax(-1) @ v[:, :, sl])
        y = torch.cat(outs, dim=2).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
