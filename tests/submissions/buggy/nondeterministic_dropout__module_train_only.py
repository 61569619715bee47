# bug: nondeterministic_dropout
# An nn.Dropout(0.1) on the attention weights makes train-mode outputs random (eval mode is exact).
import math
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_dropout = nn.Dropout(0.1)

    def forward(self, x, key_padding_mask=None):
        b, t, _ = x.shape
        h = self.heads
        d = self.dim // h
        q, k, v = self.qkv(x).split(self.dim, dim=-1)
        q = q.reshape(b, t, h, d)
        k = k.reshape(b, t, h, d)
        v = v.reshape(b, t, h, d)

        sim = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(d)
        idx = torch.arange(t, device=x.device)
        future = idx[None, :] > idx[:, None]  # (i, j): key j is after query i
        sim = sim.masked_fill(future, float("-inf"))
        if key_padding_mask is not None:
            sim = sim.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        attn = self.attn_dropout(sim.softmax(dim=-1))
        out = torch.einsum("bhij,bjhd->bihd", attn, v).reshape(b, t, self.dim)
        return self.proj(out)
