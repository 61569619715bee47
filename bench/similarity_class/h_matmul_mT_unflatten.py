import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.h = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        T = x.size(-2)
        # (B, T, 3C) -> (B, T, 3, H, hd) -> three (B, H, T, hd) tensors
        qkv = self.qkv(x).unflatten(-1, (3, self.h, -1))
        q, k, v = qkv.movedim(-3, 0).transpose(-2, -3)
        hd = q.size(-1)

        logits = torch.matmul(q, k.mT) / math.sqrt(hd)
        seen = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            seen = seen & key_padding_mask.unflatten(0, (-1, 1, 1))  # (B, 1, 1, T)
        logits = logits.masked_fill(~seen, -torch.inf)
        out = torch.matmul(logits.softmax(-1), v)      # (B, H, T, hd)
        return self.proj(out.transpose(-2, -3).flatten(-2))
