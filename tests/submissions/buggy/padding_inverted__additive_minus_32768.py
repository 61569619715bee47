# bug: padding_inverted
# A bias of -32768 is added where key_padding_mask is True (the real tokens), not where it is False.
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
        s = s + torch.full((T, T), float("-inf"), device=x.device, dtype=s.dtype).triu(1)
        if key_padding_mask is not None:
            s = s + torch.where(key_padding_mask, -32768.0, 0.0).to(s.dtype)[:, None, None, :]
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
