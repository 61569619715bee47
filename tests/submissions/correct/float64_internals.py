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
        hd = C // H

        # the attention core runs in double precision whatever the input dtype;
        # the result goes back to the caller's dtype before the output projection
        q, k, v = self.qkv(x).double().chunk(3, dim=-1)
        q = q.reshape(B, T, H, hd).permute(0, 2, 1, 3)
        k = k.reshape(B, T, H, hd).permute(0, 2, 1, 3)
        v = v.reshape(B, T, H, hd).permute(0, 2, 1, 3)

        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            keep = keep & key_padding_mask.unsqueeze(1).unsqueeze(2)
        att = att.masked_fill(~keep, float("-inf")).softmax(dim=-1)

        y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C).to(x.dtype)
        return self.proj(y)
