import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        batch, seq, _ = x.shape
        heads = self.n_heads
        size = self.dim // heads
        q, k, v = torch.split(self.qkv(x), [self.dim, self.dim, self.dim], dim=2)
        q = q.view(batch, seq, heads, size).transpose(1, 2)
        k = k.view(batch, seq, heads, size).transpose(1, 2)
        v = v.view(batch, seq, heads, size).transpose(1, 2)

        pos = torch.arange(seq, device=x.device)
        query_pos, key_pos = pos.view(seq, 1), pos.view(1, seq)
        visible = key_pos <= query_pos                                    # (seq, seq)
        if key_padding_mask is not None:
            # right padding: the real tokens of a sequence are its first `lengths` positions
            lengths = key_padding_mask.sum(dim=1)                         # (batch,)
            visible = visible & (key_pos < lengths.view(batch, 1, 1)).unsqueeze(1)
        score = q @ k.transpose(2, 3) / math.sqrt(size)
        score = score.masked_fill(~visible, float("-inf"))
        out = F.softmax(score, dim=3) @ v
        return self.proj(out.transpose(1, 2).reshape(batch, seq, self.dim))
