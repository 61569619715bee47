# bug: nan_from_inf_mask
# The additive mask is the future indicator times -inf (triu(1) * -inf), which is NaN, not 0, where the indicator is 0.
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
        self.inf = float("inf")

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        future = torch.ones(T, T, device=x.device).triu(diagonal=1)
        att = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        att = att + future.to(att.dtype) * -self.inf
        if key_padding_mask is not None:
            att = att.masked_fill(key_padding_mask[:, None, None, :].logical_not(), -self.inf)
        y = att.softmax(dim=-1).matmul(v)
        return self.proj(y.permute(0, 2, 1, 3).reshape(B, T, C))
