import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.h = n_heads
        self.d = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        b, t, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        # b t (h d) -> b t h d
        q = q.reshape(b, t, self.h, self.d)
        k = k.reshape(b, t, self.h, self.d)
        v = v.reshape(b, t, self.h, self.d)

        att = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d)

        i = torch.arange(t, device=x.device)
        keep = i[None, :] <= i[:, None]            # (q, k): key index <= query index
        keep = keep[None, None]                    # (1, 1, q, k)
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        att = att.masked_fill(~keep, -math.inf)
        att = att.softmax(dim=-1)

        y = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, c)
        return self.proj(y)
