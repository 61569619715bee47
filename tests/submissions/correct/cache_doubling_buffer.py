import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):

    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_head = n_heads
        self.n_embd = dim
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        # causal mask cache, grown on demand (not saved in the state dict)
        self.register_buffer("tril_cache", torch.ones(16, 16, dtype=torch.bool).tril(), persistent=False)

    def causal_mask(self, T, device):
        size = self.tril_cache.size(0)
        if T > size or self.tril_cache.device != device:
            while size < T:
                size *= 2
            self.tril_cache = torch.ones(size, size, dtype=torch.bool, device=device).tril()
        return self.tril_cache[:T, :T]

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = self.causal_mask(T, x.device).view(1, 1, T, T)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.view(B, 1, 1, T)
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)
