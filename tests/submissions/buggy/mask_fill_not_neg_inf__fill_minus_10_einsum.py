# bug: mask_fill_not_neg_inf
# Masked scores (future and padding) are filled with -10, a finite value that still leaves the masked keys a weight of about exp(-10) relative to a score of 0, so the future leaks in a little.
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        b, n, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.reshape(b, n, h, d // h) for t in (q, k, v))
        sim = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(d // h)
        i = torch.arange(n, device=x.device)
        keep = i[None, :] <= i[:, None]
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        sim = sim.masked_fill(~keep, -10.0)  # big enough for the softmax
        attn = sim.softmax(dim=-1)
        out = torch.einsum("bhij,bjhd->bihd", attn, v).reshape(b, n, d)
        return self.proj(out)
