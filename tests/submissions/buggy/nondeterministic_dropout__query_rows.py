# bug: nondeterministic_dropout
# In training mode whole query rows of the attention weights (one position of one head) are dropped with p = 0.1 via F.dropout on a (B, H, T, 1) ones tensor, which also rescales the kept rows by 1/0.9.
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

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allow = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            allow = allow & key_padding_mask[:, None, None, :]
        w = s.masked_fill(~allow, float("-inf")).softmax(-1)
        rows = F.dropout(torch.ones(B, self.n_heads, T, 1, dtype=w.dtype, device=w.device), p=0.1,
                         training=self.training)
        w = w * rows
        return self.proj((w @ v).transpose(1, 2).reshape(B, T, C))
