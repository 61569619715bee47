import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):

    def __init__(self, dim, n_heads):
        super().__init__()
        self.heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        n, length, width = x.size()
        size = width // self.heads

        qq, kk, vv = self.qkv(x).chunk(3, dim=-1)
        qq = qq.reshape(n, length, self.heads, size).transpose(1, 2)
        kk = kk.reshape(n, length, self.heads, size).transpose(1, 2)
        vv = vv.reshape(n, length, self.heads, size).transpose(1, 2)

        scores = torch.einsum("bhqd,bhkd->bhqk", qq, kk) / math.sqrt(size)

        ahead = torch.triu(torch.ones(length, length, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(ahead, float("-inf"))
        if key_padding_mask is not None:
            padded = key_padding_mask.logical_not()[:, None, None, :]
            scores = scores.masked_fill(padded, float("-inf"))

        weights = F.softmax(scores, dim=-1)
        ctx = torch.einsum("bhqk,bhkd->bhqd", weights, vv)
        ctx = ctx.transpose(1, 2).reshape(n, length, width)
        return self.proj(ctx)
