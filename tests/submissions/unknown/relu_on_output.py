# unknown: a ReLU is applied to the projected output, clipping every negative output to 0
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
        b, t, c = x.shape
        h = self.n_heads
        q, k, v = (z.reshape(b, t, h, c // h).transpose(1, 2) for z in self.qkv(x).chunk(3, dim=-1))
        att = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(c // h)
        blocked = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        if key_padding_mask is not None:
            blocked = blocked | ~key_padding_mask[:, None, None, :]
        att = att.masked_fill(blocked, float("-inf")).softmax(-1)
        y = torch.einsum("bhij,bhjd->bhid", att, v).transpose(1, 2).reshape(b, t, c)
        return F.relu(self.proj(y))
