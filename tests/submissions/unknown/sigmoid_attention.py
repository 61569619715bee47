# unknown: the weights come from a sigmoid of the scores (masked ones at -inf give 0) instead of a softmax, so they are not normalised over the keys
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
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(C // H)
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        w = torch.sigmoid(s.masked_fill(~allowed, float("-inf")))
        return self.proj(torch.matmul(w, v).transpose(1, 2).reshape(B, T, C))
