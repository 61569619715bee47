# bug: mask_fill_not_neg_inf
# Blocked scores are replaced by the mean score of their row, which leaves blocked keys with an average weight.
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim, self.n_heads = dim, n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        b, t, c = x.shape
        hd = c // self.n_heads
        qkv = self.qkv(x).reshape(b, t, 3, self.n_heads, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(hd)
        blocked = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1).expand(b, 1, t, t)
        if key_padding_mask is not None:
            blocked = blocked | (~key_padding_mask)[:, None, None, :]
        att = torch.where(blocked, att.mean(dim=-1, keepdim=True), att)
        out = torch.einsum("bhij,bhjd->bhid", att.softmax(-1), v)
        return self.proj(out.transpose(1, 2).reshape(b, t, c))
