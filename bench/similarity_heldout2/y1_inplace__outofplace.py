import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.nh = n_heads

    def forward(self, inputs, key_padding_mask=None):
        n, L, W = inputs.shape
        h = self.nh
        q, k, v = self.qkv(inputs).split(W, -1)
        q = q.reshape(n, L, h, -1).transpose(1, 2)
        k = k.reshape(n, L, h, -1).transpose(1, 2)
        v = v.reshape(n, L, h, -1).transpose(1, 2)
        # scaled scores
        sc = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        sc = sc.masked_fill(torch.ones(L, L, dtype=torch.bool, device=inputs.device).triu(1), float("-inf"))
        if key_padding_mask is not None:
            sc = sc.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        att = sc.softmax(dim=-1)
        res = att @ v
        res = res.transpose(1, 2).reshape(n, L, W)
        return self.proj(res)
