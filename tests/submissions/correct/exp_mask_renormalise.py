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
        H = self.n_heads
        D = C // H
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, D)
        k = k.view(B, T, H, D)
        v = v.view(B, T, H, D)

        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D)
        keep = torch.ones(T, T, device=x.device, dtype=x.dtype).tril()[None, None]
        if key_padding_mask is not None:
            keep = keep * key_padding_mask[:, None, None, :].to(x.dtype)
        # my own softmax: subtract the largest kept score, exponentiate, zero the
        # masked keys, divide by the sum of what is left
        s = s.masked_fill(keep == 0, float("-inf"))
        top = s.max(dim=-1, keepdim=True).values
        e = torch.exp(s - top) * keep
        p = e / e.sum(dim=-1, keepdim=True)

        o = torch.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, T, C)
        return self.proj(o)
